#!/usr/bin/env python3
"""Liveness and pressure speed: ptxtool's analyses per file beside the wheel's ptxas on the same file, in one run.

For the largest corpus files and a generated CUTLASS-style kernel of about 5 k lines (an unrolled SGEMM tile,
16x16 outputs per thread and an 8-deep k step: 256 accumulators live; compiled from CUDA by the wheel's nvcc), print
per file the instructions, the registers, the time of build_cfg, of liveness, of pressure and of def_use (every
kernel and function of the file, best of R rounds), the wall time of `ptxas -arch=<target> FILE`, and the ratio
(liveness + pressure) / ptxas. On the generated kernel the set-per-op liveness took 28 s; the masks take 0.1 s.

Usage: python benchmarks/liveness.py [--largest K] [--repeat R] [FILE ...]
Target (issue 15): liveness + pressure under 2 s for a 5 k-line kernel.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptxtool.analysis.cfg import build_cfg  # noqa: E402
from ptxtool.analysis.dataflow.liveness import def_use, liveness  # noqa: E402
from ptxtool.analysis.pressure import pressure  # noqa: E402
from ptxtool.syntax import parse  # noqa: E402
from ptxtool.toolchain.compile import cuda_to_ptx  # noqa: E402
from ptxtool.toolchain.discover import find_tool  # noqa: E402

CORPUS = Path(os.environ.get("PTXTOOL_CORPUS", ROOT / "tests" / "corpus"))

GEMM = """
template <int TM, int TN, int KT>
__global__ void __launch_bounds__(256) gemm_tile(const float* __restrict__ A, const float* __restrict__ B, float* C,
                                                 int M, int N, int K, float alpha, float beta) {
  __shared__ float As[KT][16 * TM + 4];
  __shared__ float Bs[KT][16 * TN + 4];
  float acc[TM][TN] = {};
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int row0 = blockIdx.y * 16 * TM, col0 = blockIdx.x * 16 * TN;
  for (int k0 = 0; k0 < K; k0 += KT) {
#pragma unroll
    for (int i = threadIdx.x; i < KT * 16 * TM; i += 256) {
      int r = i / KT, c = i % KT;
      As[c][r] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : 0.f;
    }
#pragma unroll
    for (int i = threadIdx.x; i < KT * 16 * TN; i += 256) {
      int r = i / (16 * TN), c = i % (16 * TN);
      Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < KT; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      int r = row0 + ty * TM + i, c = col0 + tx * TN + j;
      if (r < M && c < N) C[r * N + c] = alpha * acc[i][j] + beta * C[r * N + c];
    }
}
template __global__ void gemm_tile<16, 16, 8>(const float*, const float*, float*, int, int, int, float, float);
"""


def best(repeat: int, work) -> tuple[float, object]:
    """The fastest of `repeat` runs of `work()` and its last result."""
    fastest, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest, result


def ptxas_seconds(ptxas: str, path: Path) -> float:
    """Wall time of a whole-program ptxas build (with -c when the file calls functions defined elsewhere)."""
    arch = re.search(r"^\s*\.target\s+(sm_\w+)", path.read_text(encoding="utf-8"), re.M)
    for extra in ([], ["-c"]):
        command = [ptxas, f"-arch={arch[1] if arch else 'sm_80'}", *extra, str(path), "-o", os.devnull]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0:
            return time.perf_counter() - start
    raise SystemExit(f"ptxas rejects {path}:\n{done.stderr[-2000:]}")


def measure(path: Path, ptxas: str, repeat: int) -> str:
    module = parse(path.read_text(encoding="utf-8"))
    functions = [f for f in module.functions if f.body is not None]
    t_cfg, cfgs = best(repeat, lambda: [build_cfg(f) for f in functions])
    t_live, lives = best(repeat, lambda: [liveness(c) for c in cfgs])
    t_pressure, _ = best(repeat, lambda: [pressure(c, lv) for c, lv in zip(cfgs, lives, strict=True)])
    t_du, _ = best(repeat, lambda: [def_use(c) for c in cfgs])
    t_ptxas = ptxas_seconds(ptxas, path)
    ops = sum(len(c.linear.ops) for c in cfgs)
    registers = sum(len(c.linear.registers) for c in cfgs)
    analyses = t_live + t_pressure
    return (
        f"{path.name[:44]:44} {ops:6} {registers:6} {t_cfg:7.3f} {t_live:7.3f} {t_pressure:7.3f} {t_du:7.3f}"
        f" {t_ptxas:7.3f} {analyses / t_ptxas:6.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--largest", type=int, default=5, help="the K largest corpus files (default 5)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ptxas = find_tool("ptxas").path
    with tempfile.TemporaryDirectory(prefix="ptxtool-liveness-") as tmp:
        files = list(args.files)
        if not files:
            files = sorted(CORPUS.glob("*/*.ptx"), key=lambda p: p.stat().st_size, reverse=True)[: args.largest]
            source = Path(tmp) / "gemm_tile.cu"
            source.write_text(GEMM)
            generated = Path(tmp) / "gemm_tile_5k.sm90.ptx"
            generated.write_text(cuda_to_ptx(str(source), "sm_90"))
            files.append(generated)
        print(
            f"{'file':44} {'ops':>6} {'regs':>6} {'cfg s':>7} {'live s':>7} {'press s':>7} {'def-use':>7}"
            f" {'ptxas s':>7} {'(l+p)/ptxas':>7}"
        )
        for path in files:
            lines = sum(1 for _ in path.open(encoding="utf-8"))
            print(measure(path, ptxas, args.repeat), f" ({lines} lines)", flush=True)


if __name__ == "__main__":
    main()
