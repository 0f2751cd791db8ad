#!/usr/bin/env python3
"""How `ptxtool optimize`'s analysis and cache-operator pass scale with a kernel's size, against ptxas on the same file.

Generates two kernels per size N, each with N global loads at constant offsets from each thread's element
(`%ctaid.x * %ntid.x + %tid.x`): an unrolled reduction over four inputs with a store every 8 loads, and a grid-stride
loop whose body holds all N loads of one input. For each it prints, side by side, the seconds the default pass
pipeline takes in-process (analyses included, parse excluded), the wall time of `ptxas -arch=sm_90` on the same file,
their ratio and the milliseconds per load: a pass that compares every access with every other shows as a ratio and
a time per load that grow with N.

Usage: python benchmarks/optimize_scaling.py [--sizes 100 400 1600] [--repeat R] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_throughput import find_ptxas  # noqa: E402

SIZES = (100, 400, 1600)
INPUTS = 4  # read-only pointer parameters the unrolled kernel's loads take turns on
STORE_EVERY = 8  # the unrolled kernel stores once per this many loads


def _header(name: str, params: list[str], floats: int) -> list[str]:
    return [
        ".version 8.0",
        ".target sm_90",
        ".address_size 64",
        "",
        f".visible .entry {name}(",
        ",\n".join(f"    .param .u64 {p}" for p in params),
        ")",
        "{",
        "    .reg .pred %p<2>;",
        "    .reg .b32 %r<8>;",
        f"    .reg .f32 %f<{floats}>;",
        f"    .reg .b64 %rd<{2 * len(params) + 2}>;",
        "    mov.u32 %r1, %ctaid.x;",
        "    mov.u32 %r2, %ntid.x;",
        "    mov.u32 %r3, %tid.x;",
        "    mad.lo.s32 %r0, %r1, %r2, %r3;",
    ]


def unrolled(loads: int) -> str:
    """An unrolled reduction: `loads` loads over INPUTS pointers at 4 KiB steps, a store every STORE_EVERY loads."""
    params = [f"in{p}" for p in range(INPUTS)] + ["out"]
    lines = [*_header(f"unrolled_{loads}", params, loads + 1), "    mul.wide.s32 %rd0, %r0, 4;"]
    for n, p in enumerate(params):  # %rd(2n+1): the global pointer, %rd(2n+2): this thread's element
        lines += [
            f"    ld.param.u64 %rd{2 * n + 1}, [{p}];",
            f"    cvta.to.global.u64 %rd{2 * n + 1}, %rd{2 * n + 1};",
            f"    add.s64 %rd{2 * n + 2}, %rd{2 * n + 1}, %rd0;",
        ]
    out = 2 * INPUTS + 2
    lines.append("    mov.f32 %f0, 0f00000000;")
    for i in range(loads):
        lines.append(f"    ld.global.f32 %f{i + 1}, [%rd{2 * (i % INPUTS) + 2}+{4096 * (i // INPUTS)}];")
        lines.append(f"    add.f32 %f{i + 1}, %f{i + 1}, %f{i};")
        if i % STORE_EVERY == STORE_EVERY - 1:
            lines.append(f"    st.global.f32 [%rd{out}+{4096 * (i // STORE_EVERY)}], %f{i + 1};")
    return "\n".join([*lines, "    ret;", "}", ""])


def grid_stride(loads: int) -> str:
    """A grid-stride loop whose body sums `loads` loads of one input at 4 KiB steps and stores the sum."""
    lines = [
        *_header(f"grid_stride_{loads}", ["src", "dst", "n"], loads + 1),
        "    ld.param.u64 %rd1, [src];",
        "    ld.param.u64 %rd2, [dst];",
        "    ld.param.u64 %rd3, [n];",
        "    cvt.u32.u64 %r5, %rd3;",
        "    cvta.to.global.u64 %rd1, %rd1;",
        "    cvta.to.global.u64 %rd2, %rd2;",
        "    mov.u32 %r4, %nctaid.x;",
        "    mul.lo.s32 %r6, %r4, %r2;",
        "LOOP:",
        "    setp.ge.s32 %p1, %r0, %r5;",
        "    @%p1 bra DONE;",
        "    mul.wide.s32 %rd4, %r0, 4;",
        "    add.s64 %rd5, %rd1, %rd4;",
        "    add.s64 %rd6, %rd2, %rd4;",
        "    mov.f32 %f0, 0f00000000;",
    ]
    for i in range(loads):
        lines.append(f"    ld.global.f32 %f{i + 1}, [%rd5+{4096 * i}];")
        lines.append(f"    add.f32 %f{i + 1}, %f{i + 1}, %f{i};")
    lines += [f"    st.global.f32 [%rd6], %f{loads};", "    add.s32 %r0, %r0, %r6;", "    bra LOOP;", "DONE:"]
    return "\n".join([*lines, "    ret;", "}", ""])


SHAPES = {"unrolled": unrolled, "grid-stride": grid_stride}


def optimize_seconds(text: str) -> float:
    """Seconds the default pipeline takes on the parsed kernel (analyses included, parse excluded)."""
    from ptxtool.passes import DEFAULT_PIPELINE, run_pipeline
    from ptxtool.syntax import parse

    module = parse(text)
    start = time.perf_counter()
    run_pipeline(module, DEFAULT_PIPELINE)
    return time.perf_counter() - start


def ptxas_seconds(ptxas: str, path: Path) -> float:
    """Wall time of `ptxas -arch=sm_90 FILE` (start-up included)."""
    start = time.perf_counter()
    subprocess.run([ptxas, "-arch=sm_90", str(path), "-o", str(path.with_suffix(".cubin"))], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--repeat", type=int, default=1, help="best of R rounds for each timing")
    parser.add_argument("--keep", type=Path, help="write the generated kernels here")
    args = parser.parse_args()
    ptxas = find_ptxas()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ptxtool-scaling-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{'shape':<12} {'loads':>6} {'lines':>6} {'optimize s':>11} {'ptxas s':>8} {'ratio':>6} {'ms/load':>8}")
    for shape, generate in SHAPES.items():
        for size in args.sizes:
            text = generate(size)
            path = folder / f"{shape}_{size}.ptx"
            path.write_text(text)
            ours = min(optimize_seconds(text) for _ in range(args.repeat))
            theirs = min(ptxas_seconds(ptxas, path) for _ in range(args.repeat))
            lines = text.count("\n")
            row = f"{shape:<12} {size:>6} {lines:>6} {ours:>11.3f} {theirs:>8.3f} {ours / theirs:>6.2f}"
            print(f"{row} {1000 * ours / size:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
