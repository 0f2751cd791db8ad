"""Emit the triton36ws/ corpus: Triton 3.6 PTX for sm_90a with automatic warp specialization (TMA GEMM, fp8 GEMM,
attention: a producer warpgroup, consumers, setmaxnreg, each role at its own barrier.sync 1), TMA attention unspecialized,
looped layernorm and online softmax, a layernorm backward with a spin lock, a custom tl.reduce, inline asm, gather and
histogram. `python triton_ws_kernels.py OUTDIR` on a machine with Triton and a GPU (for the allocator). int8_mm fails
to compile in Triton 3.6 and is not in the corpus."""
import json, os, sys
import torch
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget

triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device='cuda'))


@triton.jit
def mm_tma_ws(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, WS: tl.constexpr):
    da = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    db = tl.make_tensor_descriptor(B, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    pm, pn = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        acc = tl.dot(da.load([pm * BM, k]), db.load([pn * BN, k]).T, acc)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def attn_tma_ws(Q, K, V, O, n, scale, HEAD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, WS: tl.constexpr):
    dq = tl.make_tensor_descriptor(Q, shape=[n, HEAD], strides=[HEAD, 1], block_shape=[BM, HEAD])
    dk = tl.make_tensor_descriptor(K, shape=[n, HEAD], strides=[HEAD, 1], block_shape=[BN, HEAD])
    dv = tl.make_tensor_descriptor(V, shape=[n, HEAD], strides=[HEAD, 1], block_shape=[BN, HEAD])
    pid = tl.program_id(0)
    q = dq.load([pid * BM, 0])
    m = tl.full((BM,), -float('inf'), tl.float32)
    l = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, HEAD), tl.float32)
    for start in tl.range(0, n, BN, warp_specialize=WS):
        s = tl.dot(q, dk.load([start, 0]).T) * scale
        m2 = tl.maximum(m, tl.max(s, 1))
        p = tl.math.exp2(s - m2[:, None])
        a = tl.math.exp2(m - m2)
        l = l * a + tl.sum(p, 1)
        acc = acc * a[:, None] + tl.dot(p.to(tl.float16), dv.load([start, 0]))
        m = m2
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, HEAD)
    tl.store(O + rm[:, None] * HEAD + rd[None, :], (acc / l[:, None]).to(tl.float16))


@triton.jit
def layernorm_fwd(X, Y, W, B, MEAN, RSTD, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    total = tl.zeros((BLOCK,), tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        total += tl.load(X + row * stride + cols, mask=cols < N, other=0.).to(tl.float32)
    mean = tl.sum(total, 0) / N
    var = tl.zeros((BLOCK,), tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + cols, mask=cols < N, other=0.).to(tl.float32)
        d = tl.where(cols < N, x - mean, 0.)
        var += d * d
    rstd = 1 / tl.sqrt(tl.sum(var, 0) / N + eps)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + cols, mask=cols < N, other=0.).to(tl.float32)
        w = tl.load(W + cols, mask=cols < N)
        b = tl.load(B + cols, mask=cols < N)
        tl.store(Y + row * stride + cols, (x - mean) * rstd * w + b, mask=cols < N)


@triton.jit
def layernorm_bwd_locked(DX, DY, DW, X, W, MEAN, RSTD, LOCK, stride, N, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(MEAN + row)
    rstd = tl.load(RSTD + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.)
    wdy = tl.where(mask, w * dy, 0.)
    c1 = tl.sum(xhat * wdy, 0) / N
    c2 = tl.sum(wdy, 0) / N
    tl.store(DX + row * stride + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
    group = row % GROUPS
    lock = LOCK + group
    count = LOCK + GROUPS + group
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    partial = (dy * xhat).to(DW.dtype.element_ty)
    if tl.load(count) == 0:
        tl.atomic_xchg(count, 1)
    else:
        partial += tl.load(DW + group * N + cols, mask=mask)
    tl.store(DW + group * N + cols, partial, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(lock, 0)


@triton.jit
def online_softmax(X, Y, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float('inf'), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + cols, mask=cols < N, other=-float('inf'))
        m2 = tl.maximum(m, x)
        s = s * tl.exp(m - m2) + tl.exp(x - m2)
        m = m2
    mx = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - mx), 0)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + cols, mask=cols < N, other=-float('inf'))
        tl.store(Y + row * stride + cols, tl.exp(x - mx) / total, mask=cols < N)


@triton.jit
def _argmin_combine(v1, i1, v2, i2):
    take = (v1 < v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take, v1, v2), tl.where(take, i1, i2)


@triton.jit
def custom_reduce(X, V, I, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=float('inf'))
    v, i = tl.reduce((x, cols), 0, _argmin_combine)
    tl.store(V + row, v)
    tl.store(I + row, i)


@triton.jit
def inline_asm_shift(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0)
    y = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $1, 7;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(Y + offs, y, mask=offs < n)


@triton.jit
def gather_hist(X, IDX, OUT, H, n, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    idx = tl.load(IDX + offs) % BLOCK
    tl.store(OUT + offs, tl.gather(x, idx, 0))
    h = tl.histogram(idx % BINS, BINS)
    tl.atomic_add(H + tl.arange(0, BINS), h, sem='relaxed')


@triton.jit
def int8_mm(A, B, C, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.int32)
    for k in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(B + (k + rk)[:, None] * K + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * K + rn[None, :], acc)


MMT = dict(A='*fp16', B='*fp16', C='*fp16', M='i32', N='i32', K='i32', BM='constexpr', BN='constexpr', BK='constexpr',
           WS='constexpr')
ATT = dict(Q='*fp16', K='*fp16', V='*fp16', O='*fp16', n='i32', scale='fp32', HEAD='constexpr', BM='constexpr',
           BN='constexpr', WS='constexpr')
jobs = [
    ('mm_tma_ws', mm_tma_ws, MMT, dict(BM=128, BN=128, BK=64, WS=True), dict(num_warps=4, num_stages=3)),
    ('mm_tma_ws_fp8', mm_tma_ws, dict(MMT, A='*fp8e4nv', B='*fp8e4nv'), dict(BM=128, BN=128, BK=128, WS=True),
     dict(num_warps=4, num_stages=3)),
    ('attn_tma_ws', attn_tma_ws, ATT, dict(HEAD=64, BM=128, BN=64, WS=True), dict(num_warps=4, num_stages=2)),
    ('attn_tma', attn_tma_ws, ATT, dict(HEAD=64, BM=128, BN=64, WS=False), dict(num_warps=4, num_stages=2)),
    ('layernorm_fwd', layernorm_fwd, dict(X='*fp16', Y='*fp16', W='*fp16', B='*fp16', MEAN='*fp32', RSTD='*fp32',
     stride='i32', N='i32', eps='fp32', BLOCK='constexpr'), dict(BLOCK=1024), dict(num_warps=8)),
    ('layernorm_bwd_locked', layernorm_bwd_locked, dict(DX='*fp16', DY='*fp16', DW='*fp32', X='*fp16', W='*fp16',
     MEAN='*fp32', RSTD='*fp32', LOCK='*i32', stride='i32', N='i32', GROUPS='constexpr', BLOCK='constexpr'),
     dict(GROUPS=64, BLOCK=4096), dict(num_warps=8)),
    ('online_softmax', online_softmax, dict(X='*fp32', Y='*fp32', stride='i32', N='i32', BLOCK='constexpr'),
     dict(BLOCK=2048), dict(num_warps=8)),
    ('custom_reduce', custom_reduce, dict(X='*fp32', V='*fp32', I='*i32', N='i32', BLOCK='constexpr'),
     dict(BLOCK=1024), dict(num_warps=4)),
    ('inline_asm_shift', inline_asm_shift, dict(X='*i32', Y='*i32', n='i32', BLOCK='constexpr'), dict(BLOCK=1024),
     dict(num_warps=4)),
    ('gather_hist', gather_hist, dict(X='*fp32', IDX='*i32', OUT='*fp32', H='*i32', n='i32', BLOCK='constexpr',
     BINS='constexpr'), dict(BLOCK=512, BINS=64), dict(num_warps=4)),
    ('int8_mm', int8_mm, dict(A='*i8', B='*i8', C='*i32', K='i32', BM='constexpr', BN='constexpr', BK='constexpr'),
     dict(BM=128, BN=128, BK=64), dict(num_warps=4, num_stages=3)),
]
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
meta = {}
for name, fn, sig, const, opts in jobs:
    try:
        k = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const),
                           target=GPUTarget('cuda', 90, 32), options=opts)
    except Exception as e:
        print(name, 'FAILED', repr(e)[:400]); continue
    ptx = k.asm['ptx']
    open(os.path.join(out, f'{name}.sm90a.ptx'), 'w').write(ptx)
    meta[name] = {'num_warps': k.metadata.num_warps, 'shared': k.metadata.shared, 'constexprs': const,
                  'signature': sig, 'options': opts, 'setmaxnreg': 'setmaxnreg' in ptx}
    print(name, 'ok warps', k.metadata.num_warps, 'shared', k.metadata.shared, 'setmaxnreg', 'setmaxnreg' in ptx)
json.dump(meta, open(os.path.join(out, 'meta.json'), 'w'), indent=1)
print(triton.__version__)
