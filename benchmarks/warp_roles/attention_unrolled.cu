// Input: the attention-like loop of attention.cu with its K/V fill loop unrolled by a constant trip count (each
// thread stages elements tid + 128j, j < 16): the same arithmetic, straight-line staging stores.
#define THREADS 128
#define D 32
#define KT 64

extern "C" __global__ void __launch_bounds__(THREADS)
    attention_unrolled(const float* __restrict__ Q, const float* __restrict__ Kg, const float* __restrict__ Vg,
                    float* __restrict__ O, int nkeys, float scale) {
  __shared__ float Ks[KT * D];
  __shared__ float Vs[KT * D];
  int qi = blockIdx.x * THREADS + threadIdx.x;
  float q[D], acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = Q[qi * D + d] * scale;
    acc[d] = 0.f;
  }
  float m = -1e30f, l = 0.f;
  for (int k0 = 0; k0 < nkeys; k0 += KT) {
#pragma unroll
    for (int j = 0; j < KT * D / THREADS; ++j) {
      int i = threadIdx.x + j * THREADS;
      bool ok = k0 + i / D < nkeys;
      Ks[i] = ok ? Kg[k0 * D + i] : 0.f;
      Vs[i] = ok ? Vg[k0 * D + i] : 0.f;
    }
    __syncthreads();
    int valid = nkeys - k0 < KT ? nkeys - k0 : KT;
    for (int j = 0; j < valid; ++j) {
      float sc = 0.f;
#pragma unroll
      for (int d = 0; d < D; ++d) sc = fmaf(q[d], Ks[j * D + d], sc);
      float mn = fmaxf(m, sc), c = __expf(m - mn), p = __expf(sc - mn);
      l = fmaf(l, c, p);
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] = fmaf(acc[d], c, p * Vs[j * D + d]);
      m = mn;
    }
    __syncthreads();
  }
#pragma unroll
  for (int d = 0; d < D; ++d) O[qi * D + d] = acc[d] / l;
}
