#!/usr/bin/env python3
"""Speed of the pictures and the page: the CFG layout (report/layout.py + SVG) on the corpus functions with the most
blocks, beside ptxas on the same file; and `ptxtool report` on a generated 30 k-line file beside ptxas, `ptxtool
inspect` and the page's rendering alone.

Usage: python benchmarks/report_speed.py [--largest K] [--lines N] [--repeat R]
Every ratio is ptxtool / ptxas, both measured here, one after the other, on the same file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_throughput import CORPUS, ROOT, find_ptxas, generate, measure, target_arch  # noqa: E402

from ptxtool.analysis.cfg import build_cfg  # noqa: E402
from ptxtool.analysis.loops import find_loops  # noqa: E402
from ptxtool.report.pictures import cfg_svg  # noqa: E402
from ptxtool.syntax import parse  # noqa: E402


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


def bench_page(ptxas: str, lines: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.ptx"
        count = generate(lines, big)
        ptxtool = str(Path(sys.executable).parent / "ptxtool")
        arch = target_arch(big.read_text(encoding="utf-8"))
        runs = {
            "ptxas -arch": [ptxas, f"-arch={arch}", str(big), "-o", f"{tmp}/big.cubin"],
            "ptxtool inspect": [ptxtool, "inspect", str(big)],
            "ptxtool report": [ptxtool, "report", str(big), "-o", f"{tmp}/big.html"],
        }
        times = {}
        for label, command in runs.items():
            times[label] = min(measure(command, check=False).seconds for _ in range(repeat))
        size = (Path(tmp) / "big.html").stat().st_size
        start = time.perf_counter()
        from ptxtool.services.report import Options, view_file
        from ptxtool.sources import read_source

        view = view_file(read_source(str(big)), Options())
        gathered = time.perf_counter() - start
        from ptxtool.report.html import render

        rendered = best_of(repeat, lambda: render([view]))
    print(f"\ngenerated file: {count} lines ({big.name}); page {size / 1e6:.1f} MB")
    for label, seconds in times.items():
        print(f"{label:<18} {seconds:>7.2f} s   ratio to ptxas {seconds / times['ptxas -arch']:>5.2f}")
    print(f"{'  gathering':<18} {gathered:>7.2f} s   (ptxas, nvdisasm, lint, analyses; in-process, warm caches)")
    print(f"{'  render only':<18} {rendered:>7.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--largest", type=int, default=5, help="how many of the largest corpus functions")
    parser.add_argument("--lines", type=int, default=30_000, help="lines of the generated file")
    parser.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = parser.parse_args()
    ptxas = find_ptxas()
    print(f"corpus: {CORPUS.relative_to(ROOT) if CORPUS.is_relative_to(ROOT) else CORPUS}; ptxas: {ptxas}\n")
    bench_layout(ptxas, args.largest, args.repeat)
    bench_page(ptxas, args.lines, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
