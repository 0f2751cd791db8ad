import os, sys, traceback
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget

@triton.jit
def softmax_kernel(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=-float('inf'))
    x = x - tl.max(x, 0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, 0), mask=offs < n_cols)

@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.).to(tl.float32)
    mean = tl.sum(x, 0) / N
    d = tl.where(m, x - mean, 0.)
    var = tl.sum(d * d, 0) / N
    y = d * tl.math.rsqrt(var + eps) * tl.load(w_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m)
    tl.store(y_ptr + row * N + offs, y.to(tl.bfloat16), mask=m)

@triton.jit
def atomic_hist(x_ptr, h_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_add(h_ptr + (v & 255), 1, mask=offs < n)
    tl.atomic_max(h_ptr + 256 + offs * 0, v, mask=offs < n)
    tl.atomic_cas(h_ptr + 257, 0, 1)

@triton.jit
def fp8_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM); rn = tl.program_id(1) * BN + tl.arange(0, BN); rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)

@triton.jit
def cumsum_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.cumsum(x, 0))

@triton.jit
def sort_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.sort(tl.load(x_ptr + offs)))

@triton.jit
def tma_copy(desc_in, desc_out, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    t = desc_in.load([pid * BM, 0])
    desc_out.store([pid * BM, 0], t * 2)

@triton.jit
def asm_print(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    y = tl.inline_asm_elementwise("{ .reg .b32 t; shl.b32 t, $1, 1; add.u32 $0, t, 1; }", "=r,r", [x],
                                  dtype=tl.int32, is_pure=True, pack=1)
    tl.device_print("y", y)
    tl.device_assert(y >= 0, "negative")
    tl.store(y_ptr + offs, y, mask=offs < n)

P = lambda **kw: kw
jobs = [
    ('softmax', softmax_kernel, P(x_ptr='*fp32', y_ptr='*fp32', stride='i32', n_cols='i32', BLOCK='constexpr'), {'BLOCK': 1024}, {'num_warps': 4}, (80, 90, 100, 120)),
    ('layernorm', layernorm_kernel, P(x_ptr='*fp16', w_ptr='*fp32', b_ptr='*fp32', y_ptr='*bf16', N='i32', eps='fp32', BLOCK='constexpr'), {'BLOCK': 2048}, {'num_warps': 8}, (80, 90, 100)),
    ('atomic_hist', atomic_hist, P(x_ptr='*i32', h_ptr='*i32', n='i32', BLOCK='constexpr'), {'BLOCK': 512}, {}, (80, 90)),
    ('fp8_matmul', fp8_matmul, P(a_ptr='*fp8e4nv', b_ptr='*fp8e4nv', c_ptr='*fp32', K='i32', BM='constexpr', BN='constexpr', BK='constexpr'), {'BM': 64, 'BN': 64, 'BK': 64}, {'num_warps': 4, 'num_stages': 3}, (90, 100, 120)),
    ('bf16_matmul', fp8_matmul, P(a_ptr='*bf16', b_ptr='*bf16', c_ptr='*fp32', K='i32', BM='constexpr', BN='constexpr', BK='constexpr'), {'BM': 128, 'BN': 128, 'BK': 64}, {'num_warps': 4, 'num_stages': 4}, (90, 100)),
    ('asm_print', asm_print, P(x_ptr='*i32', y_ptr='*i32', n='i32', BLOCK='constexpr'), {'BLOCK': 128}, {}, (80, 90)),
    ('cumsum', cumsum_kernel, P(x_ptr='*i64', y_ptr='*i64', BLOCK='constexpr'), {'BLOCK': 256}, {}, (80, 90)),
    ('sort', sort_kernel, P(x_ptr='*fp16', y_ptr='*fp16', BLOCK='constexpr'), {'BLOCK': 128}, {}, (80,)),
    ('tma_copy', tma_copy, P(desc_in='tensordesc<fp16[64, 64]>', desc_out='tensordesc<fp16[64, 64]>', BM='constexpr', BN='constexpr'), {'BM': 64, 'BN': 64}, {}, (90, 100)),
]
only = os.environ.get('ONLY')
for name, fn, sig, const, opts, ccs in jobs:
    if only and name not in only.split(','):
        continue
    for cc in ccs:
        try:
            k = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const), target=GPUTarget('cuda', cc, 32), options=opts)
        except Exception as e:
            print("FAIL", name, cc, type(e).__name__, str(e)[:300]); continue
        open(os.path.join(sys.argv[1], f'{name}.sm{cc}.ptx'), 'w').write(k.asm['ptx'])
        print(f'{name} sm_{cc}: {k.asm["ptx"].count(chr(10))} lines')
