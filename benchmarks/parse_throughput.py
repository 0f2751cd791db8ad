#!/usr/bin/env python3
"""Parse throughput: ptxtool's parse and parse+print against the wheel's ptxas on the same files, side by side.

For the largest corpus files and a generated file of about a million lines (the corpus's sm_80 functions and
variables repeated under new names, one header), print lines/s of `parse` and of `parse+print`, the peak memory of
each, the wall time of `ptxtool fmt FILE -o OUT` (start-up and imports included), the wall time of
`ptxas -arch=<target> FILE`, and the ratios ptxtool / ptxas. Every measurement runs in a fresh subprocess, so peak
memory (ru_maxrss from wait4) is that measurement's alone.

Usage: python benchmarks/parse_throughput.py [--quick] [--lines N] [--largest K] [--repeat R] [--keep DIR]
Targets (issue 2): fmt ratio <= 1.0, and under 2 GB for 1 M lines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("PTXTOOL_CORPUS", ROOT.parent / "shared" / "corpus"))
# One target and PTX version, so their functions can share a module.
GENERATOR_SOURCES = ("comm", "control", "elementwise", "gemm_smem", "pressure", "reduce", "tensorcore", "texture")

# Runs in a child: times parse alone or parse+print in-process, after the imports.
_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from ptxtool.syntax import format_module, parse
t1 = time.perf_counter()
text = open(sys.argv[1], encoding="utf-8").read()
t2 = time.perf_counter()
module = parse(text)
t3 = time.perf_counter()
if sys.argv[2] == "print":
    out = format_module(module)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "parse": t3 - t2, "print": t4 - t3}))
"""


@dataclass
class Run:
    seconds: float  # wall time of the whole child process
    peak_mb: float  # its peak resident memory
    stdout: str
    stderr: str = ""
    returncode: int = 0


def measure(command: list[str], check: bool = True) -> Run:
    """Run a command to completion: its wall time and its own peak RSS (reaped with wait4, not the maximum over
    all children that RUSAGE_CHILDREN would give)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        run = Run(seconds, usage.ru_maxrss / 1024, out.read(), err.read(), child.returncode)
    if check and run.returncode:
        raise SystemExit(f"failed ({run.returncode}): {' '.join(command)}\n{run.stderr[-2000:]}")
    return run


def find_ptxas() -> str:
    """The wheel's ptxas ($PTXAS overrides), never a system one from PATH."""
    if os.environ.get("PTXAS"):
        return os.environ["PTXAS"]
    from cuda.pathfinder import find_nvidia_binary_utility

    path = find_nvidia_binary_utility("ptxas")
    if not path:
        raise SystemExit("no ptxas: install the nvidia-cuda-nvcc wheel or set PTXAS")
    return str(path)


def target_arch(text: str) -> str:
    match = re.search(r"^\s*\.target\s+(\w+)", text, re.M)
    number = re.fullmatch(r"sm_(\d+)[af]?", match.group(1)) if match else None
    return "sm_75" if number and int(number.group(1)) < 75 else (match.group(1) if match else "sm_80")


def assemble(ptxas: str, path: Path, out: Path) -> Run:
    """Time ptxas as a whole-program build, or with -c when the file calls externals defined elsewhere."""
    command = [ptxas, f"-arch={target_arch(path.read_text(encoding='utf-8'))}", str(path), "-o", str(out)]
    run = measure(command, check=False)
    if run.returncode and "nresolved extern" in run.stderr:
        run = measure([command[0], "-c", *command[1:]], check=False)
    if run.returncode:
        raise SystemExit(f"ptxas rejects {path}:\n{run.stderr[-2000:]}")
    return run


# ---------------------------------------------------------------- the generated file

_HEADER = re.compile(r"^\s*\.(version|target|address_size)\b")


def _module_names(text: str) -> tuple[set[str], list[str]]:
    """Names this file defines at module scope (renamed per copy), and its `.extern` declarations (kept once)."""
    from ptxtool.syntax import ast, format_module, parse

    module = parse(text)
    defined = {f.name for f in module.functions if f.body is not None}
    renamed, externs = set(defined), []
    for item in module.items:
        if isinstance(item, ast.Declaration):
            if item.has(".extern"):
                externs.append(format_module(ast.Module((item,))).strip())
            else:
                renamed.update(d.name for d in item.declarators)
        elif isinstance(item, ast.Function) and item.body is None and item.name not in defined:
            externs.append(format_module(ast.Module((item,))).strip())
    return renamed, externs


def generate(target_lines: int, path: Path) -> int:
    """Write about `target_lines` lines of PTX that ptxas accepts: one header, then the sm_80 corpus files'
    bodies again and again, every module-level name suffixed with the copy number (call sites too)."""
    sources = [CORPUS / "ptx" / f"{name}.sm80.ptx" for name in GENERATOR_SOURCES]
    sources = [p for p in sources if p.exists()]
    if not sources:
        raise SystemExit(f"no corpus under {CORPUS}: set PTXTOOL_CORPUS")
    prepared = []
    externs: dict[str, None] = {}
    for source in sources:
        text = source.read_text(encoding="utf-8")
        names, extern_lines = _module_names(text)
        externs.update(dict.fromkeys(extern_lines))
        body = re.sub(r"^\.extern\b[^;]*;", "", text, flags=re.M)  # kept once, in the header (may span lines)
        body = "\n".join(line for line in body.splitlines() if not _HEADER.match(line))
        pattern = re.compile(
            r"(?<![\w$%.])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w$])"
        )
        prepared.append((body, pattern))
    header = ".version 9.0\n.target sm_80\n.address_size 64\n\n" + "\n".join(externs) + "\n"
    lines = header.count("\n")
    with path.open("w", encoding="utf-8") as out:
        out.write(header)
        copy = 0
        while lines < target_lines:
            for body, pattern in prepared:
                chunk = pattern.sub(lambda m, k=copy: f"{m.group(1)}_{k}", body) + "\n"
                out.write(chunk)
                lines += chunk.count("\n")
            copy += 1
    return lines


# ---------------------------------------------------------------- the report


def bench_file(path: Path, ptxas: str, repeat: int, work: Path) -> dict:
    lines = path.read_text(encoding="utf-8").count("\n")
    python = sys.executable
    best: dict[str, tuple[float, float, dict]] = {}
    for mode in ("parse", "print"):
        runs = [measure([python, "-c", _CHILD, str(path), mode]) for _ in range(repeat)]
        run = min(runs, key=lambda r: r.seconds)
        best[mode] = (run.seconds, max(r.peak_mb for r in runs), json.loads(run.stdout))
    fmt_out = work / "fmt.ptx"
    fmt = min(
        (measure([python, "-m", "ptxtool.cli", "fmt", str(path), "-o", str(fmt_out)]) for _ in range(repeat)),
        key=lambda r: r.seconds,
    )
    asm = min((assemble(ptxas, path, work / "out.cubin") for _ in range(repeat)), key=lambda r: r.seconds)
    parse_s = best["parse"][2]["parse"]
    print_s = best["print"][2]["parse"] + best["print"][2]["print"]
    return {
        "file": path.name,
        "lines": lines,
        "parse_lps": lines / parse_s,
        "parse_print_lps": lines / print_s,
        "parse_mb": best["parse"][1],
        "print_mb": best["print"][1],
        "fmt_s": fmt.seconds,
        "fmt_mb": fmt.peak_mb,
        "ptxas_s": asm.seconds,
        "ptxas_mb": asm.peak_mb,
        "ratio_inproc": print_s / asm.seconds,
        "ratio_fmt": fmt.seconds / asm.seconds,
        "import_s": best["print"][2]["import"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a ~100 k-line generated file and the 2 largest corpus files")
    ap.add_argument("--lines", type=int, help="lines of the generated file (default 1,000,000; --quick 100,000)")
    ap.add_argument("--largest", type=int, help="how many of the largest corpus files (default 4; --quick 2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per corpus file, best kept (generated file: 1)")
    ap.add_argument("--keep", type=Path, help="write the generated file here and keep it")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    args = ap.parse_args()
    lines = args.lines or (100_000 if args.quick else 1_000_000)
    largest = args.largest if args.largest is not None else (2 if args.quick else 4)
    ptxas = find_ptxas()
    work = Path(tempfile.mkdtemp(prefix="ptxtool-bench-"))
    try:
        files = sorted(CORPUS.rglob("*.ptx"), key=lambda p: p.stat().st_size, reverse=True)[:largest]
        generated = args.keep or work / f"generated_{lines // 1000}k.ptx"
        t = time.perf_counter()
        written = generate(lines, generated)
        print(f"generated {generated} ({written:,} lines) in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        results = []
        for path in [*files, generated]:
            print(f"measuring {path.name} ...", file=sys.stderr)
            results.append(bench_file(path, ptxas, 1 if path == generated else args.repeat, work))
        if args.json:
            print(json.dumps(results, indent=1))
        else:
            report(results)
        worst = results[-1]
        print(
            f"\ntargets for {worst['file']}: fmt/ptxas ratio {worst['ratio_fmt']:.2f} (want <= 1.0), "
            f"peak {worst['print_mb']:.0f} MB (want < 2048 MB)",
            file=sys.stderr,
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def report(results: list[dict]) -> None:
    head = (
        f"{'file':32} {'lines':>9} {'parse l/s':>10} {'p+print l/s':>11} {'peak MB':>8} "
        f"{'fmt s':>7} {'ptxas s':>8} {'ptxas MB':>8} {'p+p/ptxas':>9} {'fmt/ptxas':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r['file'][:32]:32} {r['lines']:>9,} {r['parse_lps']:>10,.0f} {r['parse_print_lps']:>11,.0f} "
            f"{r['print_mb']:>8.0f} {r['fmt_s']:>7.2f} {r['ptxas_s']:>8.2f} {r['ptxas_mb']:>8.0f} "
            f"{r['ratio_inproc']:>9.2f} {r['ratio_fmt']:>9.2f}"
        )
    print(
        "\nparse l/s, p+print l/s: in-process, after imports. peak MB: the parse+print process. "
        "fmt s: `ptxtool fmt FILE -o OUT` wall time, start-up included.\n"
        "p+p/ptxas: in-process parse+print time / ptxas wall time; fmt/ptxas: fmt wall time / ptxas wall time."
    )


if __name__ == "__main__":
    sys.exit(main())
