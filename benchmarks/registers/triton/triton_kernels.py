"""Emits spill-prone Triton PTX for sm_90a (attention backward dK/dV, layernorm backward dx, a wide softmax) and
meta.json (warps, shared memory, signature). Run on a machine with triton: python triton_kernels.py DIR"""

import json
import os
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def attn_bwd_dkdv(
    Q, K, V, DO, LSE, DELTA, DK, DV, seqlen, scale, HEAD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr
):
    pid = tl.program_id(0)
    rn = pid * BN + tl.arange(0, BN)
    rd = tl.arange(0, HEAD)
    k = tl.load(K + rn[:, None] * HEAD + rd[None, :])
    v = tl.load(V + rn[:, None] * HEAD + rd[None, :])
    dk = tl.zeros((BN, HEAD), tl.float32)
    dv = tl.zeros((BN, HEAD), tl.float32)
    for start in range(0, seqlen, BM):
        rm = start + tl.arange(0, BM)
        q = tl.load(Q + rm[:, None] * HEAD + rd[None, :])
        do = tl.load(DO + rm[:, None] * HEAD + rd[None, :])
        lse = tl.load(LSE + rm)
        delta = tl.load(DELTA + rm)
        qk = tl.dot(q, tl.trans(k)) * scale
        p = tl.exp(qk - lse[:, None])
        dv += tl.dot(tl.trans(p.to(tl.float16)), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(tl.float16)), q)
    tl.store(DK + rn[:, None] * HEAD + rd[None, :], (dk * scale).to(tl.float16))
    tl.store(DV + rn[:, None] * HEAD + rd[None, :], dv.to(tl.float16))


@triton.jit
def layernorm_bwd_dx(DX, DY, X, W, MEAN, RSTD, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(MEAN + row)
    rstd = tl.load(RSTD + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = tl.where(mask, w * dy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + row * stride + cols, dx, mask=mask)


@triton.jit
def softmax_wide(OUT, X, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(OUT + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


ATTN = dict.fromkeys(("Q", "K", "V", "DO"), "*fp16") | {"LSE": "*fp32", "DELTA": "*fp32", "DK": "*fp16", "DV": "*fp16"}
ATTN |= {"seqlen": "i32", "scale": "fp32", "HEAD": "constexpr", "BM": "constexpr", "BN": "constexpr"}
LAYERNORM = dict.fromkeys(("DX", "DY", "X", "W", "MEAN", "RSTD"), "*fp32") | {"stride": "i32", "N": "i32"}
LAYERNORM |= {"BLOCK": "constexpr"}
SOFTMAX = {"OUT": "*fp32", "X": "*fp32", "stride": "i32", "N": "i32", "BLOCK": "constexpr"}
TILES = {"HEAD": 128, "BM": 64, "BN": 128}
jobs = [
    ("attn_bwd_dkdv", attn_bwd_dkdv, ATTN, TILES, {"num_warps": 4, "num_stages": 2}),
    ("attn_bwd_dkdv_w8", attn_bwd_dkdv, ATTN, TILES, {"num_warps": 8, "num_stages": 2}),
    ("layernorm_bwd_dx", layernorm_bwd_dx, LAYERNORM, {"BLOCK": 16384}, {"num_warps": 4}),
    ("layernorm_bwd_dx_w8", layernorm_bwd_dx, LAYERNORM, {"BLOCK": 16384}, {"num_warps": 8}),
    ("softmax_wide", softmax_wide, SOFTMAX, {"BLOCK": 16384}, {"num_warps": 4}),
]
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
meta = {}
for name, fn, sig, const, opts in jobs:
    try:
        k = triton.compile(
            triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const),
            target=GPUTarget("cuda", 90, 32),
            options=opts,
        )
    except Exception as e:
        print(name, "FAILED", repr(e)[:400])
        continue
    open(os.path.join(out, f"{name}.sm90.ptx"), "w").write(k.asm["ptx"])
    md = k.metadata
    meta[name] = {
        "num_warps": md.num_warps,
        "shared": md.shared,
        "n_regs": getattr(k, "n_regs", None),
        "n_spills": getattr(k, "n_spills", None),
        "constexprs": const,
        "signature": sig,
    }
    print(name, "warps", md.num_warps, "shared", md.shared)
json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
print(triton.__version__)
