#!/usr/bin/env python3
"""Start-up: wall time of short ptxtool commands beside `ptxas --version` and a bare interpreter, in one run.

Each command runs as a fresh process, best of R rounds, interleaved so a busy moment hits all alike; `fmt`, `parse`
and `lint` run on a ten-line kernel, so the time is start-up and imports. Then, from `python -X importtime`, the
modules each command imports and the slowest of them. The package's bytecode is compiled first, as an installed
wheel has it (PYTHONDONTWRITEBYTECODE would otherwise make every run compile ptxtool from source).

With --baseline DIR (another commit: `git archive REV ptxtool grammar | tar -x -C DIR`), each ptxtool command also
runs on DIR's package (first on PYTHONPATH, from a folder without ptxtool/), interleaved with this one, and the ratio
this / baseline is printed beside it.

Usage: python benchmarks/startup.py [--repeat R] [--top N] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_throughput import find_ptxas  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KERNEL = (
    ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry k(\n\t.param .u64 p\n)\n{\n\t.reg .b64 %rd<2>;\n"
    "\n\tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 0;\n\tret;\n}\n"
)


def wall(command: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env, cwd=cwd)
    return time.perf_counter() - start


def imports(command: list[str]) -> list[tuple[int, str]]:
    """(self microseconds, module) for each module the command imports, from -X importtime."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command[1:]], capture_output=True, text=True, check=True
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            own, _, name = line.removeprefix("import time:").split("|")
            rows.append((int(own), name.strip()))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10, help="rounds per command, best kept")
    ap.add_argument("--top", type=int, default=8, help="slowest modules listed per command")
    ap.add_argument("--baseline", type=Path, help="a folder holding another version's ptxtool/ package, to compare")
    args = ap.parse_args()
    compileall.compile_dir(str(ROOT / "ptxtool"), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    base_env = None
    if args.baseline:
        compileall.compile_dir(str(args.baseline / "ptxtool"), quiet=1)
        base_env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve())}
    ptxas = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="ptxtool-startup-") as work:
        kernel = Path(work) / "k.ptx"
        kernel.write_text(KERNEL, encoding="utf-8")
        cli = [sys.executable, "-m", "ptxtool.cli"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "ptxas --version": [ptxas, "--version"],
            "ptxtool --help": [*cli, "--help"],
            "ptxtool fmt k.ptx -o OUT": [*cli, "fmt", str(kernel), "-o", str(Path(work) / "out.ptx")],
            "ptxtool parse k.ptx": [*cli, "parse", str(kernel)],
            "ptxtool parse --check k.ptx": [*cli, "parse", "--check", str(kernel)],
            "ptxtool lint --no-ptxas k.ptx": [*cli, "lint", "--no-ptxas", str(kernel)],
            "ptxas -arch=sm_80 k.ptx": [ptxas, "-arch=sm_80", str(kernel), "-o", str(Path(work) / "k.cubin")],
        }
        best = dict.fromkeys(commands, float("inf"))
        base = {name: float("inf") for name in commands if base_env and name.startswith("ptxtool")}
        for _ in range(args.repeat):
            for name, command in commands.items():
                best[name] = min(best[name], wall(command))
                if name in base:
                    base[name] = min(base[name], wall(command, base_env, work))
        reference = best["ptxas --version"]
        extra = f" {'baseline ms':>12} {'this / baseline':>16}" if base else ""
        print(f"{'command':28} {'best ms':>8} {'/ ptxas --version':>18}{extra}")
        for name, seconds in best.items():
            line = f"{name:28} {seconds * 1000:>8.1f} {seconds / reference:>18.1f}"
            if name in base:
                line += f" {base[name] * 1000:>12.1f} {seconds / base[name]:>16.2f}"
            print(line)
        for name, command in commands.items():
            if not name.startswith("ptxtool"):
                continue
            rows = imports(command)
            total = sum(own for own, _ in rows)
            slowest = ", ".join(f"{m} {own / 1000:.1f}" for own, m in sorted(rows, reverse=True)[: args.top])
            print(f"\n{name}: {len(rows)} modules, {total / 1000:.0f} ms of imports (self); slowest (ms): {slowest}")
            loaded = {m for _, m in rows}
            print("  rich: " + ("imported" if "rich" in loaded else "not imported"), end="; ")
            print("parser: " + ("imported" if "ptxtool.syntax.parser" in loaded else "not imported"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
