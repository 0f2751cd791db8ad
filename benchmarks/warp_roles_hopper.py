#!/usr/bin/env python3
"""The fourth warp-role benchmark kernel: a Hopper bf16 GEMM with TMA and wgmma, pipelined but not specialized.

Triton 3.6 writes it (tensor descriptors: `cp.async.bulk.tensor` into an mbarrier ring of `num_stages` slots,
`wgmma` from shared memory, one role for every warp); the reference is the same kernel with Triton's automatic warp
specialization (`tl.range(..., warp_specialize=True)`: a producer warpgroup issuing the TMA copies, consumers with
`setmaxnreg`), the form CUTLASS and FlashAttention-3 write by hand. ptxtool's warp-role pass is run on the input's
PTX (split and pipeline variants); what it does, or why it refuses, is printed beside the times, so the table shows
input, ptxtool and reference side by side in one run.

Runs on the GPU machine (torch, triton, a CUDA GPU of compute capability 9.0):

    python benchmarks/warp_roles_hopper.py [--size N] [--stages S] [--rounds R] [--keep DIR] [--json OUT]

Times: CUDA events around each launch, input and reference interleaved launch by launch, medians with a 95 %
interval of the paired ratio (ptxtool/toolchain/timing.py, as `tune` and `bench` compute them); outputs compared
bit for bit first (same tiles, same k order: the accumulation order is the same).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptxtool.toolchain.timing import median_interval, paired_ratios  # noqa: E402


@triton.jit
def gemm(
    a,
    b,
    c,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    SMS: tl.constexpr,
    STAGES: tl.constexpr,
    WS_TILES: tl.constexpr,
    WS_K: tl.constexpr,
):
    """C = A @ B.T in bf16 (fp32 accumulation), persistent over output tiles, every operand through TMA; WS_TILES
    or WS_K asks Triton to specialize the tile loop or the k loop."""
    da = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    db = tl.make_tensor_descriptor(b, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    dc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    columns = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * columns
    for tile in tl.range(tl.program_id(0), tiles, SMS, warp_specialize=WS_TILES):
        row, column = tile // columns, tile % columns
        acc = tl.zeros((BM, BN), tl.float32)
        for k in tl.range(0, K, BK, num_stages=STAGES, warp_specialize=WS_K):
            acc = tl.dot(da.load([row * BM, k]), db.load([column * BN, k]).T, acc)
        dc.store([row * BM, column * BN], acc.to(tl.bfloat16))


# Where Triton 3.6 may specialize on Hopper: (which loop, num_warps); the first that builds a specialized kernel is
# the reference, and the input is the same kernel with the same warps, unspecialized.
ATTEMPTS = (("k", 8), ("tiles", 8), ("k", 4), ("tiles", 4))


def launch(a, b, c, sms: int, stages: int, ws: str, warps: int):
    m, k = a.shape
    n = b.shape[0]
    return gemm[(sms,)](
        a,
        b,
        c,
        m,
        n,
        k,
        BM=128,
        BN=128,
        BK=64,
        SMS=sms,
        STAGES=stages,
        WS_TILES=ws == "tiles",
        WS_K=ws == "k",
        num_warps=warps,
    )


def specialized(kernel) -> bool:
    """Triton's split shows in its PTX: setmaxnreg between the roles, or warps beyond the ones asked for."""
    return "setmaxnreg" in kernel.asm["ptx"]


def ptxtool_on(ptx: str, folder: Path) -> list[dict]:
    """`ptxtool optimize --passes warp-roles` on the input's PTX, per variant: exit code and what it said."""
    source = folder / "gemm_tma.sm90a.ptx"
    source.write_text(ptx)
    out = []
    for variant in ("split", "pipeline"):
        target = folder / f"gemm_tma.{variant}.ptx"
        cmd = [
            sys.executable,
            "-m",
            "ptxtool",
            "optimize",
            str(source),
            "--passes",
            "warp-roles",
            "--variant",
            variant,
            "-o",
            str(target),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
        said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        changed = target.exists() and target.read_text() != ptx
        out.append({"variant": variant, "exit": done.returncode, "changed": changed, "said": said})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=8192, help="M = N = K (default 8192)")
    parser.add_argument("--stages", type=int, default=4, help="the input's pipeline depth (num_stages, default 4)")
    parser.add_argument("--rounds", type=int, default=60, help="timed launches of each (default 60)")
    parser.add_argument("--keep", type=Path, help="write the PTX files here")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    args = parser.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs a GPU of compute capability 9.0 (an H100 or H200)", file=sys.stderr)
        return 3
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(0)
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    outputs, kernels, failed, tried = {}, {}, {}, []
    warps = 4
    for loop, warps in ATTEMPTS:  # the reference first: it fixes the warps the input gets
        c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        try:
            kernel = launch(a, b, c, sms, args.stages, loop, warps)
        except Exception as error:  # Triton's warp specialization is young on Hopper: say so, time the rest
            tried.append(f"warp_specialize on the {loop} loop, {warps} warps: {type(error).__name__}")
            continue
        torch.cuda.synchronize()
        if not specialized(kernel):
            tried.append(f"warp_specialize on the {loop} loop, {warps} warps: built, not specialized (no setmaxnreg)")
            continue
        tried.append(f"warp_specialize on the {loop} loop, {warps} warps: specialized")
        kernels["reference"], outputs["reference"] = kernel, c
        break
    else:
        failed["reference"] = "; ".join(tried)
        loop, warps = "", 4
    reference_loop = loop
    c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernels["input"], outputs["input"] = launch(a, b, c, sms, args.stages, "", warps), c
    torch.cuda.synchronize()
    names = [name for name in ("input", "reference") if name in kernels]
    identical = len(names) == 2 and torch.equal(
        outputs["input"].view(torch.int16), outputs["reference"].view(torch.int16)
    )
    close = torch.allclose(
        outputs["input"].float(), (a.float() @ b.float().T).to(torch.bfloat16).float(), rtol=0.05, atol=1.0
    )

    times: dict[str, list[float]] = {name: [] for name in names}
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        for name in times:
            launch(a, b, c, sms, args.stages, reference_loop if name == "reference" else "", warps)
    for _ in range(args.rounds):
        for name in times:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch(a, b, c, sms, args.stages, reference_loop if name == "reference" else "", warps)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1000.0)

    folder = args.keep or Path(tempfile.mkdtemp(prefix="ptxtool-hopper-"))
    folder.mkdir(parents=True, exist_ok=True)
    if "reference" in kernels:
        (folder / "gemm_tma_ws.sm90a.ptx").write_text(kernels["reference"].asm["ptx"])
    passes = ptxtool_on(kernels["input"].asm["ptx"], folder)

    flops = 2.0 * n**3
    rows = []
    for name in names:
        med = median_interval(times[name], 0.95).median
        meta = kernels[name].metadata
        rows.append(
            {
                "kernel": name,
                "median_us": med,
                "tflops": flops / med / 1e6,
                "warps": meta.num_warps,
                "shared": meta.shared,
                "setmaxnreg": "setmaxnreg" in kernels[name].asm["ptx"],
            }
        )
    ratio = median_interval(paired_ratios(times["reference"], times["input"]), 0.95) if len(names) == 2 else None
    print(
        f"bf16 GEMM {n}x{n}x{n}, 128x128x64 tiles, {args.stages} stages, persistent on {sms} SMs "
        f"({torch.cuda.get_device_name(0)}, Triton {triton.__version__})"
    )
    print(f"{'kernel':34} {'median us':>10} {'TFLOP/s':>8} {'warps':>5} {'smem':>7} setmaxnreg")
    for r in rows:
        label = {"input": "input (TMA+wgmma, pipelined)", "reference": "reference (Triton warp_specialize)"}
        print(
            f"{label[r['kernel']]:34} {r['median_us']:10.1f} {r['tflops']:8.1f} {r['warps']:5} {r['shared']:7} "
            f"{'yes' if r['setmaxnreg'] else 'no'}"
        )
    if ratio is not None:
        print(
            f"reference / input speed: {1 / ratio.median:.3f}x [{1 / ratio.high:.3f}, {1 / ratio.low:.3f}] (95 %); "
            f"outputs {'bit-identical' if identical else 'DIFFER'}"
        )
    else:
        print(f"reference: Triton could not build it: {failed.get('reference')}")
    print(f"input close to torch's fp32 product: {close}")
    for line in tried:
        print(f"  tried: {line}")
    for p in passes:
        verdict = "changed the kernel (not timed here)" if p["changed"] else "left the input as it is"
        print(f"ptxtool --variant {p['variant']}: exit {p['exit']}, {verdict}")
        for line in p["said"][:6]:
            print(f"    {line}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "size": n,
                    "stages": args.stages,
                    "rows": rows,
                    "identical": identical,
                    "reference_speedup": ratio and [1 / ratio.median, 1 / ratio.high, 1 / ratio.low],
                    "failed": failed,
                    "ptxtool": passes,
                },
                indent=1,
            )
        )
    return 0 if identical or ratio is None else 1


if __name__ == "__main__":
    sys.exit(main())
