import math, sys
from numba import cuda, float32, int32, float64
import numpy as np

def axpy(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

def block_sum(x, out):
    s = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = 64
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(out, 0, s[0])

def math_mix(x, y):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        y[i] = math.sin(v) + math.exp(v) * math.sqrt(abs(v)) + math.atan2(v, 1.0) + math.floor(v) + math.erf(v)

def matmul2d(A, B, C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc

def warp_stuff(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = cuda.activemask()
    b = cuda.ballot_sync(m, v > 0)
    s = cuda.shfl_down_sync(m, v, 1)
    out[i] = s + cuda.popc(b) + cuda.atomic.max(out, 0, v) + cuda.laneid

def cas_loop(arr, out):
    i = cuda.grid(1)
    old = cuda.atomic.compare_and_swap(arr, 0, i)
    cuda.atomic.inc(out, 1, 100)
    out[2] = old + cuda.selp(i > 3, 1, 2)

def local_arr(x):
    i = cuda.grid(1)
    l = cuda.local.array(16, float64)
    for k in range(16):
        l[k] = x[(i + k) % x.size]
    t = 0.0
    for k in range(15, -1, -1):
        t = t * 0.5 + l[k]
    x[i] = t

kernels = [
    (axpy, "void(float32[:], float32, float32[:], float32[:])"),
    (block_sum, "void(float32[:], float32[:])"),
    (math_mix, "void(float64[:], float64[:])"),
    (matmul2d, "void(float32[:,:], float32[:,:], float32[:,:])"),
    (warp_stuff, "void(int32[:], int32[:])"),
    (cas_loop, "void(int32[:], uint32[:])"),
    (local_arr, "void(float64[:])"),
]
out = sys.argv[1]
for fn, sig in kernels:
    for cc, extra in [((7, 5), {}), ((8, 0), {"fastmath": True}), ((9, 0), {"lineinfo": True}), ((12, 0), {"debug": True, "opt": False})]:
        try:
            ptx, _ = cuda.compile_ptx(fn, sig, cc=cc, **extra)
        except Exception as e:
            print("FAIL", fn.__name__, cc, extra, type(e).__name__, str(e)[:200]); continue
        tag = f"sm{cc[0]}{cc[1]}" + "".join("." + k for k in extra)
        open(f"{out}/{fn.__name__}.{tag}.ptx", "w").write(ptx)
