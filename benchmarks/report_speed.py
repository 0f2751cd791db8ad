#!/usr/bin/env python3
"""Speed of the pictures and the page: the CFG layout (report/layout.py + SVG) on the corpus functions with the most
blocks, beside ptxas on the same file; and `ptxtool report`, `inspect`, `inspect --pressure` and `lint` on two
generated 30 k-line files (kernels from the corpus; nvcc -G debug sections) beside ptxas, and the page's rendering.

Usage: python benchmarks/report_speed.py [--largest K] [--lines N] [--repeat R]
Every ratio is ptxtool / ptxas, both measured here, one after the other, on the same file; the page's commands also
beside "tools alone": the ptxas -lineinfo build and the two nvdisasm listings the report runs, without Python.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_throughput import (  # noqa: E402
    CORPUS,
    ROOT,
    find_ptxas,
    generate,
    generate_debug,
    measure,
    target_arch,
)

from ptxtool.analysis.cfg import build_cfg  # noqa: E402
from ptxtool.analysis.loops import find_loops  # noqa: E402
from ptxtool.report.pictures import cfg_svg  # noqa: E402
from ptxtool.syntax import parse  # noqa: E402
from ptxtool.toolchain.discover import find_tool  # noqa: E402


def best_of(repeat: int, work) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def largest_functions(k: int) -> list[tuple[int, Path, str]]:
    """(blocks, file, function) of the k corpus functions with the most basic blocks."""
    found = []
    for path in sorted(CORPUS.rglob("*.ptx")):
        module = parse(path.read_text(encoding="utf-8"))
        for f in module.functions:
            if f.body is not None:
                found.append((len(build_cfg(f).blocks), path, f.name))
    return sorted(found, key=lambda t: -t[0])[:k]


def bench_layout(ptxas: str, k: int, repeat: int) -> None:
    print(f"{'function':<44} {'blocks':>6} {'cfg svg s':>10} {'ptxas s':>8} {'ratio':>6}  (ptxas: the whole file)")
    for blocks, path, name in largest_functions(k):
        module = parse(path.read_text(encoding="utf-8"))
        cfg = build_cfg(next(f for f in module.functions if f.name == name))
        loops = find_loops(cfg)
        drawn = best_of(repeat, lambda cfg=cfg, loops=loops: cfg_svg(cfg, loops))
        with tempfile.TemporaryDirectory() as tmp:
            arch = target_arch(path.read_text(encoding="utf-8"))
            command = [ptxas, f"-arch={arch}", "-c", str(path), "-o", f"{tmp}/x.cubin"]
            assembled = min(measure(command).seconds for _ in range(repeat))
        label = f"{path.parent.name}/{path.name}:{name}"
        label = label if len(label) <= 44 else label[:41] + "..."
        print(f"{label:<44} {blocks:>6} {drawn:>10.3f} {assembled:>8.3f} {drawn / assembled:>6.2f}")


def bench_page(ptxas: str, big: Path, count: int, repeat: int) -> None:
    """ptxtool's commands on one large file beside ptxas: wall and CPU seconds (the CPU of ptxtool's own ptxas and
    nvdisasm included), each run with an empty cache directory, as on a file nobody has built yet."""
    with tempfile.TemporaryDirectory() as tmp:
        ptxtool = str(Path(sys.executable).parent / "ptxtool")
        arch = target_arch(big.read_text(encoding="utf-8"))
        cubin, nvdisasm = f"{tmp}/lineinfo.cubin", shlex.quote(find_tool("nvdisasm").path)
        tools = (  # the report's own tool runs, without Python: ptxas -lineinfo, then its two nvdisasm listings
            f"{shlex.quote(ptxas)} -arch={arch} -lineinfo {shlex.quote(str(big))} -o {cubin} && "
            f"({nvdisasm} -c -gp {cubin} >/dev/null & {nvdisasm} -c -plr -lrm count {cubin} >/dev/null; wait)"
        )
        runs = {
            "ptxas -arch": [ptxas, f"-arch={arch}", str(big), "-o", f"{tmp}/big.cubin"],
            "tools alone": ["sh", "-c", tools],
            "ptxtool report": [ptxtool, "report", str(big), "-o", f"{tmp}/big.html"],
            "ptxtool inspect": [ptxtool, "inspect", str(big)],
            "inspect --pressure": [ptxtool, "inspect", "--pressure", str(big)],
            "ptxtool lint": [ptxtool, "lint", str(big)],
        }
        times = {}
        for label, command in runs.items():
            best = None
            for k in range(repeat):
                os.environ["PTXTOOL_CACHE_DIR"] = f"{tmp}/cache-{label.replace(' ', '_')}-{k}"  # cold every run
                run = measure(command, check=False)
                best = run if best is None or run.seconds < best.seconds else best
            times[label] = best
        os.environ["PTXTOOL_CACHE_DIR"] = f"{tmp}/cache-ptxtool_report-0"  # what the report runs above made
        size = (Path(tmp) / "big.html").stat().st_size
        from ptxtool.report.html import render
        from ptxtool.services.report import Options, view_file
        from ptxtool.sources import read_source

        start = time.perf_counter()
        view = view_file(read_source(str(big)), Options())
        gathered = time.perf_counter() - start
        rendered = best_of(repeat, lambda: render([view]))
        del os.environ["PTXTOOL_CACHE_DIR"]
    base, floor = times["ptxas -arch"], times["tools alone"]
    print(f"\n{big.name}: {count} lines; page {size / 1e6:.1f} MB; load average {os.getloadavg()[0]:.1f}")
    print("ratios: to ptxas on the same file; `/tools`: to the report's own ptxas and nvdisasm runs without Python")
    print(f"{'':<20} {'wall s':>7} {'ratio':>6} {'/tools':>6} {'cpu s':>7} {'ratio':>6} {'/tools':>6}")
    for label, run in times.items():
        wall, cpu = run.seconds, run.cpu
        print(
            f"{label:<20} {wall:>7.2f} {wall / base.seconds:>6.2f} {wall / floor.seconds:>6.2f}"
            f" {cpu:>7.2f} {cpu / base.cpu:>6.2f} {cpu / floor.cpu:>6.2f}"
        )
    print(f"{'  report gathering':<20} {gathered:>7.2f}   (in-process; the tools' outputs cached by the run above)")
    print(f"{'  report render only':<20} {rendered:>7.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--largest", type=int, default=5, help="how many of the largest corpus functions")
    parser.add_argument("--lines", type=int, default=30_000, help="lines of the generated file")
    parser.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = parser.parse_args()
    ptxas = find_ptxas()
    print(f"corpus: {CORPUS.relative_to(ROOT) if CORPUS.is_relative_to(ROOT) else CORPUS}; ptxas: {ptxas}\n")
    bench_layout(ptxas, args.largest, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        big, debug = Path(tmp) / "big.ptx", Path(tmp) / "debug.ptx"
        bench_page(ptxas, big, generate(args.lines, big), args.repeat)
        bench_page(ptxas, debug, generate_debug(args.lines, debug), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
