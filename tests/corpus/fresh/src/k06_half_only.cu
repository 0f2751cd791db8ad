#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
__global__ void half_math(const __half2* a, const __half2* b, __half2* c, const __nv_bfloat162* x, __nv_bfloat162* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
  __half2 r = __hfma2(a[i], b[i], __hmul2(a[i], a[i]));
  r = __hmax2(r, h2exp(a[i])); r = __hadd2_sat(r, h2sqrt(b[i])); r = __hmin2_nan(r, h2rcp(b[i]));
  __half lo = __low2half(r); __half hi = __high2half(r);
  if (__hgt(lo, hi)) r = __halves2half2(hi, lo);
  c[i] = __habs2(r);
  __nv_bfloat162 q = __hfma2(x[i], x[i], x[i]);
  q = __hmax2(q, h2exp2(x[i])); q = __hneg2(q); y[i] = __hmul2_rn(q, h2log(x[i]));
}
