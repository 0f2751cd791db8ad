"""Emit the triton36/ corpus: Triton 3.6 PTX for sm_90a (wgmma dots, TMA descriptors, fp8, scans, sort, atomics, a
spin lock, flash attention). `python triton_kernels.py OUTDIR` on a machine with Triton and a GPU (for the allocator)."""
import json, os, sys, traceback
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def matmul(A, B, C, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           WS: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        a = tl.load(A + rm[:, None] * sam + (k + rk)[None, :] * sak)
        b = tl.load(B + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * scm + rn[None, :] * scn, acc.to(C.dtype.element_ty))


@triton.jit
def matmul_tma(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(B, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k])
        b = b_desc.load([pid_n * BN, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def persistent_matmul(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NSM: tl.constexpr):
    start = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for t in tl.range(start, tiles, NSM, flatten=True):
        pm = t // tiles_n
        pn = t % tiles_n
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, K, BK):
            a = tl.load(A + rm[:, None] * K + (k + rk)[None, :], mask=rm[:, None] < M, other=0.)
            b = tl.load(B + (k + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.)
            acc = tl.dot(a, b, acc)
        tl.store(C + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def flash_fwd(Q, K, V, O, L, seqlen, scale, HEAD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, HEAD)
    q = tl.load(Q + rm[:, None] * HEAD + rd[None, :])
    m_i = tl.full((BM,), -float('inf'), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, HEAD), tl.float32)
    for start in range(0, seqlen, BN):
        rn = start + tl.arange(0, BN)
        k = tl.load(K + rn[:, None] * HEAD + rd[None, :])
        v = tl.load(V + rn[:, None] * HEAD + rd[None, :])
        qk = tl.dot(q, tl.trans(k)) * scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    tl.store(O + rm[:, None] * HEAD + rd[None, :], (acc / l_i[:, None]).to(tl.float16))
    tl.store(L + rm, m_i + tl.math.log2(l_i))


@triton.jit
def fp8_quant(X, Y, S, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.)
    amax = tl.max(tl.abs(x), 0)
    s = 448.0 / tl.maximum(amax, 1e-12)
    tl.store(Y + offs, (x * s).to(tl.float8e4nv), mask=offs < n)
    tl.store(S + pid, 1.0 / s)


@triton.jit
def hist(X, H, n, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0)
    tl.atomic_add(H + (x % BINS), 1, mask=offs < n, sem='relaxed')


@triton.jit
def scan_sort(X, Y, Z, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    tl.store(Y + offs, tl.cumsum(x, 0))
    tl.store(Z + offs, tl.sort(x, 0))


@triton.jit
def gelu_gather(OUT, X, IDX, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(IDX + offs, mask=m, other=0)
    x = tl.load(X + i, mask=m, other=0.)
    y = 0.5 * x * (1 + tl.erf(x * 0.7071067811865476))
    tl.store(OUT + offs, y, mask=m)


@triton.jit
def argmax_rows(X, OUT, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride + cols, mask=cols < N, other=-float('inf'))
    tl.store(OUT + row, tl.argmax(x, 0))


@triton.jit
def atomic_cas_lock(LOCK, CNT, BLOCK: tl.constexpr):
    while tl.atomic_cas(LOCK, 0, 1, sem='acquire') == 1:
        pass
    c = tl.load(CNT)
    tl.store(CNT, c + 1)
    tl.atomic_xchg(LOCK, 0, sem='release')


MM = dict(A='*fp16', B='*fp16', C='*fp16', M='i32', N='i32', K='i32', sam='i32', sak='i32', sbk='i32', sbn='i32',
          scm='i32', scn='i32', BM='constexpr', BN='constexpr', BK='constexpr', WS='constexpr')
jobs = [
    ('matmul_w4_s3', matmul, MM, dict(BM=128, BN=128, BK=64, WS=False), dict(num_warps=4, num_stages=3)),
    ('matmul_w8_s4', matmul, MM, dict(BM=128, BN=256, BK=64, WS=False), dict(num_warps=8, num_stages=4)),
    ('matmul_fp8', matmul, dict(MM, A='*fp8e4nv', B='*fp8e4nv'), dict(BM=128, BN=128, BK=128, WS=False),
     dict(num_warps=8, num_stages=3)),
    ('matmul_tma', matmul_tma, dict(A='*fp16', B='*fp16', C='*fp16', M='i32', N='i32', K='i32', BM='constexpr',
                                     BN='constexpr', BK='constexpr'), dict(BM=128, BN=128, BK=64),
     dict(num_warps=4, num_stages=3)),
    ('persistent_matmul', persistent_matmul, dict(A='*fp16', B='*fp16', C='*fp16', M='i32', N='i32', K='i32',
     BM='constexpr', BN='constexpr', BK='constexpr', NSM='constexpr'), dict(BM=128, BN=128, BK=64, NSM=132),
     dict(num_warps=8, num_stages=3)),
    ('flash_fwd', flash_fwd, dict(Q='*fp16', K='*fp16', V='*fp16', O='*fp16', L='*fp32', seqlen='i32', scale='fp32',
     HEAD='constexpr', BM='constexpr', BN='constexpr'), dict(HEAD=64, BM=128, BN=64), dict(num_warps=4, num_stages=2)),
    ('fp8_quant', fp8_quant, dict(X='*fp32', Y='*fp8e4nv', S='*fp32', n='i32', BLOCK='constexpr'), dict(BLOCK=1024),
     dict(num_warps=4)),
    ('hist', hist, dict(X='*i32', H='*i32', n='i32', BLOCK='constexpr', BINS='constexpr'), dict(BLOCK=1024, BINS=256),
     dict(num_warps=4)),
    ('scan_sort', scan_sort, dict(X='*i32', Y='*i32', Z='*i32', BLOCK='constexpr'), dict(BLOCK=512), dict(num_warps=4)),
    ('gelu_gather', gelu_gather, dict(OUT='*fp32', X='*fp32', IDX='*i64', n='i32', BLOCK='constexpr'),
     dict(BLOCK=1024), dict(num_warps=4)),
    ('argmax_rows', argmax_rows, dict(X='*fp32', OUT='*i32', stride='i32', N='i32', BLOCK='constexpr'),
     dict(BLOCK=4096), dict(num_warps=8)),
    ('atomic_cas_lock', atomic_cas_lock, dict(LOCK='*i32', CNT='*i32', BLOCK='constexpr'), dict(BLOCK=1),
     dict(num_warps=1)),
]
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
try:
    import torch
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device='cuda'))
except Exception as e:
    print('allocator', e)
meta = {}
for name, fn, sig, const, opts in jobs:
    for arch, cap in (('sm90a', 90),):
        try:
            k = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const),
                               target=GPUTarget('cuda', cap, 32), options=opts)
        except Exception as e:
            print(name, 'FAILED', repr(e)[:600]); continue
        open(os.path.join(out, f'{name}.{arch}.ptx'), 'w').write(k.asm['ptx'])
        md = k.metadata
        meta[name] = {'num_warps': md.num_warps, 'shared': md.shared, 'constexprs': const, 'signature': sig,
                      'options': opts}
        print(name, 'ok warps', md.num_warps, 'shared', md.shared)
json.dump(meta, open(os.path.join(out, 'meta.json'), 'w'), indent=1)
print(triton.__version__)
