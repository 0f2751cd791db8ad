#!/usr/bin/env python3
"""Parse throughput: ptxtool's parse and parse+print against the wheel's ptxas on the same files, side by side.

For the largest corpus files, generated files of 50 k and about a million lines (the corpus's sm_80 functions and
variables repeated under new names, one header), and two data-heavy generated files (a `-G` file whose debug sections
hold about 30 k lines of bytes; a 1 M-element `.b8` initializer on 16 k lines), print lines/s of `parse` and of
`parse+print` with the peak memory of that process, the wall time of `ptxtool fmt FILE -o OUT` (start-up and imports
included), the wall time of `ptxas -arch=<target> FILE`, and the ratios ptxtool / ptxas. Every measurement runs in a
fresh subprocess, so peak memory (ru_maxrss from wait4) is that measurement's alone. ptxtool's bytecode is compiled
first, as an installed wheel has it (under PYTHONDONTWRITEBYTECODE every run would compile ptxtool from source).

Usage: python benchmarks/parse_throughput.py [--quick] [--lines [N...]] [--largest K] [--repeat R] [--keep DIR]
                                            [--debug-lines N] [--elements N]
(`--quick --lines --largest 0`: the two data files alone, with the phase breakdown, in under a minute: the
interpreter's start, the program's and the parser's imports, the tables, parse, print, write, and the rest of
fmt's CPU time: reading the command line and the file, and the exit.)
Targets (issue 2): fmt ratio <= 1.0, and under 2 GB for 1 M lines; (issue 12) fmt ratio <= 1.0 on both data files.
On a machine others share, compare the CPU ratio, and a run beside another version's (`git archive REV | tar -x -C
DIR`, then this script from DIR) at the same time, rather than wall times from different moments.
"""

from __future__ import annotations

import argparse
import compileall
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
CORPUS = Path(os.environ.get("PTXTOOL_CORPUS", ROOT / "tests" / "corpus"))
# One target and PTX version, so their functions can share a module.
GENERATOR_SOURCES = ("comm", "control", "elementwise", "gemm_smem", "pressure", "reduce", "tensorcore", "texture")

# Runs in a child: times parse alone and parse+print in-process, after the imports, best of R rounds.
_CHILD = """
import gc, json, sys, time
t0 = time.perf_counter()
from ptxtool.syntax import format_module, parse
t1 = time.perf_counter()
text = open(sys.argv[1], encoding="utf-8").read()
best_parse = best_both = cold = float("inf")
for round in range(int(sys.argv[2])):
    t2 = time.perf_counter()
    module = parse(text)
    t3 = time.perf_counter()
    out = format_module(module)
    t4 = time.perf_counter()
    best_parse, best_both = min(best_parse, t3 - t2), min(best_both, t4 - t2)
    cold = t4 - t2 if round == 0 else cold  # the first round also loads the grammar and builds the tables
    del module, out
    gc.collect()
print(json.dumps({"import": t1 - t0, "parse": best_parse, "parse_print": best_both, "cold": cold}))
"""

# `ptxtool` as the console script pip installs runs it (`import re`, `from ptxtool.program import run`, the tree's
# package first on sys.path as with `-m`), not `python -m ptxtool`, whose runpy and importlib.util are no part of a
# user's run.
_PROGRAM = "import re, sys\nfrom ptxtool.program import run\nsys.argv[0] = 'ptxtool'\nsys.exit(run())"

# Runs in a child: where one `ptxtool fmt FILE -o OUT` spends its time, phase by phase, in a fresh process (no
# round is repeated, so every phase is cold, as in a real run), in CPU time (what a busy machine disturbs least). The
# interpreter's own start is `python -c pass`; `program imports` are what fmt's short path (ptxtool/program.py, no
# click) loads before the parser. What the phases leave of fmt's CPU time is `rest`: the program's reading of its
# command line, reading the file, and the exit.
_PHASES = """
import json, sys, time
clock = time.process_time
t0 = clock()
import ptxtool.program, ptxtool.services.fmt, ptxtool.sources, ptxtool.report, ptxtool.guard
t2 = clock()
from ptxtool.syntax import format_module, parse
from ptxtool.syntax.parser import _parser
t3 = clock()
_parser()
t4 = clock()
text = open(sys.argv[1], encoding="utf-8").read()
module = parse(text)
t5 = clock()
out = format_module(module)
t6 = clock()
open(sys.argv[2], "w", encoding="utf-8").write(out)
t7 = clock()
print(json.dumps({"program imports": t2 - t0, "syntax imports": t3 - t2, "tables and lexer": t4 - t3,
                  "read and parse": t5 - t4, "print": t6 - t5, "write": t7 - t6}))
"""


@dataclass
class Run:
    seconds: float  # wall time of the whole child process
    peak_mb: float  # its peak resident memory
    cpu: float  # its user + system CPU time: steadier than wall time on a machine others share
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
        cpu = usage.ru_utime + usage.ru_stime
        run = Run(seconds, usage.ru_maxrss / 1024, cpu, out.read(), err.read(), child.returncode)
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


def generate_debug(target_lines: int, path: Path) -> int:
    """The corpus's `-G` file with a debug section of `target_lines` lines of bytes (and a label every 50 lines)
    added, as nvcc -G writes them: `.b8 N` or a comma list of up to 16 bytes per line."""
    source = CORPUS / "ptx" / "control.sm80.debug.ptx"
    if not source.exists():
        raise SystemExit(f"no {source}: set PTXTOOL_CORPUS")
    rows = ["\t.section\t.debug_str", "\t{"]
    for k in range(target_lines):
        if k % 50 == 0:
            rows.append(f"$L__bench_str{k}:")
        width = (1, 1, 1, 4, 16)[k % 5]
        rows.append(".b8 " + ",".join(str((k * 31 + j * 7) % 256) for j in range(width)))
    rows.append("\t}")
    path.write_text(source.read_text(encoding="utf-8") + "\n".join(rows) + "\n", encoding="utf-8")
    return path.read_text(encoding="utf-8").count("\n")


def generate_initializer(elements: int, path: Path) -> int:
    """A module with one `.b8` table of `elements` bytes, 64 to a line, and a kernel that reads it."""
    values = [str((k * 37) % 256) for k in range(elements)]
    rows = ",\n".join(", ".join(values[k : k + 64]) for k in range(0, elements, 64))
    kernel = (
        ".visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b16 %rs<2>;\n\tld.param.u64 %rd1, [p];\n"
        "\tld.global.u8 %rs1, [table+5];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u8 [%rd2], %rs1;\n\tret;\n}\n"
    )
    head = ".version 9.0\n.target sm_80\n.address_size 64\n\n"
    text = head + f".visible .global .align 1 .b8 table[{elements}] = {{{rows}}};\n\n"
    path.write_text(text + kernel, encoding="utf-8")
    return (text + kernel).count("\n")


# ---------------------------------------------------------------- the report


def bench_file(path: Path, ptxas: str, repeat: int, work: Path) -> dict:
    """One file: in-process parse and parse+print (best of `repeat`, one child), then `ptxtool fmt` and ptxas as
    whole processes (best of `repeat` each), side by side."""
    lines = path.read_text(encoding="utf-8").count("\n")
    child = measure([sys.executable, "-c", _CHILD, str(path), str(repeat)])
    times = json.loads(child.stdout)
    fmt_command = [sys.executable, "-c", _PROGRAM, "fmt", str(path), "-o", str(work / "fmt.ptx")]
    fmt_runs, asm_runs = [], []
    for _ in range(repeat):  # interleaved, so a busy moment on the machine hits both sides alike
        fmt_runs.append(measure(fmt_command))
        asm_runs.append(assemble(ptxas, path, work / "out.cubin"))
    phases = [
        json.loads(measure([sys.executable, "-c", _PHASES, str(path), str(work / "phases.ptx")]).stdout)
        for _ in range(3)
    ]
    interpreter = min(measure([sys.executable, "-c", "pass"]).cpu for _ in range(max(repeat, 3)))
    fmt = min(fmt_runs, key=lambda r: r.seconds)
    asm = min(asm_runs, key=lambda r: r.seconds)
    fmt_cpu, asm_cpu = min(r.cpu for r in fmt_runs), min(r.cpu for r in asm_runs)
    spent = {k: min(p[k] for p in phases) for k in phases[0]}
    return {
        "file": path.name,
        "lines": lines,
        "parse_lps": lines / times["parse"],
        "parse_print_lps": lines / times["parse_print"],
        "peak_mb": child.peak_mb,
        "import_s": times["import"],
        "cold_s": times["cold"],
        "fmt_s": fmt.seconds,
        "fmt_mb": fmt.peak_mb,
        "ptxas_s": asm.seconds,
        "ptxas_mb": asm.peak_mb,
        "ratio_inproc": times["parse_print"] / asm.seconds,
        "ratio_fmt": fmt.seconds / asm.seconds,
        "fmt_cpu_s": fmt_cpu,
        "ptxas_cpu_s": asm_cpu,
        "ratio_cpu": fmt_cpu / asm_cpu,
        "phases_s": {"interpreter": interpreter, **spent, "rest": fmt_cpu - interpreter - sum(spent.values())},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="generated files of 50 k and 100 k lines, 2 corpus files")
    ap.add_argument(
        "--lines", type=int, nargs="*", help="sizes of generated files (default 50 k and 1 M lines; none: no such file)"
    )
    ap.add_argument("--largest", type=int, help="how many of the largest corpus files (default 4; --quick 2)")
    ap.add_argument(
        "--repeat", type=int, default=5, help="rounds per file under 50 k lines, best kept (3 to 200 k lines, then 1)"
    )
    ap.add_argument("--keep", type=Path, help="write the generated files into this folder and keep them")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    ap.add_argument("--debug-lines", type=int, default=30_000, help="lines of debug bytes in the -G file (0: none)")
    ap.add_argument("--elements", type=int, default=1_000_000, help="elements of the large initializer (0: none)")
    args = ap.parse_args()
    compileall.compile_dir(str(ROOT / "ptxtool"), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sizes = args.lines if args.lines is not None else ([50_000, 100_000] if args.quick else [50_000, 1_000_000])
    largest = args.largest if args.largest is not None else (2 if args.quick else 4)
    ptxas = find_ptxas()
    work = Path(tempfile.mkdtemp(prefix="ptxtool-bench-"))
    folder = args.keep or work
    folder.mkdir(parents=True, exist_ok=True)
    try:
        files = sorted(CORPUS.rglob("*.ptx"), key=lambda p: p.stat().st_size, reverse=True)[:largest]
        generated = []
        for size in sizes:
            path = folder / f"generated_{size // 1000}k.ptx"
            written = generate(size, path)
            print(f"generated {path} ({written:,} lines)", file=sys.stderr)
            generated.append(path)
        if args.debug_lines:
            path = folder / f"debug_{args.debug_lines // 1000}k.ptx"
            print(f"generated {path} ({generate_debug(args.debug_lines, path):,} lines)", file=sys.stderr)
            generated.append(path)
        if args.elements:
            path = folder / f"initializer_{args.elements // 1000}k.ptx"
            print(f"generated {path} ({generate_initializer(args.elements, path):,} lines)", file=sys.stderr)
            generated.append(path)
        results = []
        for path in [*files, *generated]:
            print(f"measuring {path.name} ...", file=sys.stderr)
            lines = path.read_text(encoding="utf-8").count("\n")
            results.append(
                bench_file(path, ptxas, args.repeat if lines < 50_000 else 3 if lines < 200_000 else 1, work)
            )
        if args.json:
            print(json.dumps(results, indent=1))
        else:
            report(results)
        if sizes:
            largest_file = results[len(files) + len(sizes) - 1]
            print(
                f"\ntargets for {largest_file['file']}: fmt/ptxas ratio {largest_file['ratio_fmt']:.2f} "
                f"(want <= 1.0), peak {largest_file['peak_mb']:.0f} MB (want < 2048 MB)",
                file=sys.stderr,
            )
        for data in results[len(files) + len(sizes) :]:
            print(
                f"target for {data['file']}: fmt {data['fmt_s']:.2f} s, ptxas {data['ptxas_s']:.2f} s, "
                f"fmt/ptxas ratio {data['ratio_fmt']:.2f} (want <= 1.0); CPU time {data['fmt_cpu_s']:.2f} s "
                f"against {data['ptxas_cpu_s']:.2f} s, ratio {data['ratio_cpu']:.2f}",
                file=sys.stderr,
            )
            spent = ", ".join(f"{name} {seconds * 1000:.0f}" for name, seconds in data["phases_s"].items())
            print(f"  where fmt's time goes (CPU ms, each phase best of 3 fresh processes): {spent}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def report(results: list[dict]) -> None:
    head = (
        f"{'file':28} {'lines':>9} {'parse l/s':>10} {'p+print l/s':>11} {'cold s':>7} {'peak MB':>8} "
        f"{'fmt s':>7} {'fmt MB':>7} {'ptxas s':>8} {'ptxas MB':>8} {'p+p/ptxas':>9} {'fmt/ptxas':>9} {'cpu ratio':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r['file'][:28]:28} {r['lines']:>9,} {r['parse_lps']:>10,.0f} {r['parse_print_lps']:>11,.0f} "
            f"{r['cold_s']:>7.2f} {r['peak_mb']:>8.0f} {r['fmt_s']:>7.2f} {r['fmt_mb']:>7.0f} {r['ptxas_s']:>8.2f} "
            f"{r['ptxas_mb']:>8.0f} {r['ratio_inproc']:>9.2f} {r['ratio_fmt']:>9.2f} {r['ratio_cpu']:>9.2f}"
        )
    print(
        "\nparse l/s, p+print l/s: in-process, after imports, best round (tables built). cold s: the first round's "
        "parse+print,\nwhich also loads the grammar. peak MB: that process. fmt s/MB: `ptxtool fmt FILE -o OUT` as a "
        "process, start-up included.\np+p/ptxas: best in-process parse+print time / ptxas wall time; "
        "fmt/ptxas: fmt wall time / ptxas wall time;\ncpu ratio: the same with user+system CPU "
        "time, which a busy machine disturbs less."
    )


if __name__ == "__main__":
    sys.exit(main())
