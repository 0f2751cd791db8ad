#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void atomics_all(int* i, unsigned* u, unsigned long long* ull, long long* ll, float* f, double* d,
                            __half* h, __half2* h2, __nv_bfloat16* b, __nv_bfloat162* b2, int v) {
  atomicAdd(i, v); atomicSub(i, v); atomicExch(i, v); atomicMin(i, v); atomicMax(i, v);
  atomicAnd(i, v); atomicOr(i, v); atomicXor(i, v); atomicCAS(i, v, v + 1);
  atomicInc(u, 17u); atomicDec(u, 17u); atomicAdd(u, 3u);
  atomicAdd(ull, 1ull); atomicCAS(ull, 1ull, 2ull); atomicMin(ll, (long long)v); atomicMax(ull, 5ull);
  atomicAnd(ull, 7ull); atomicExch(ull, 9ull);
  atomicAdd(f, 1.5f); atomicExch(f, 2.5f); atomicAdd(d, 2.0);
  atomicAdd(h, __float2half(1.f)); atomicAdd(h2, __floats2half2_rn(1.f, 2.f));
  atomicAdd(b, __float2bfloat16(1.f)); atomicAdd(b2, __floats2bfloat162_rn(1.f, 2.f));
  atomicAdd_block(i, 1); atomicAdd_system(i, 2); atomicCAS_block(i, 1, 2); atomicExch_system(f, 1.f);
  __shared__ int s[32]; __shared__ double sd[4];
  atomicAdd(&s[threadIdx.x & 31], v); atomicMax(&s[0], v); atomicAdd(&sd[threadIdx.x & 3], 1.0);
  __syncthreads();
  i[threadIdx.x + 1] = s[threadIdx.x & 31] + (int)sd[0];
  __threadfence(); __threadfence_block(); __threadfence_system();
}
