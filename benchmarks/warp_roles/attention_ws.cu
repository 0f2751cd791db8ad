// Reference: the same attention-like loop, warp-specialized by hand: 128 consumer threads compute as
// attention_tiled does (bit-identical), PRODUCERS producer warps stage K/V tiles into an S-slot mbarrier ring with
// cp.async (zero-filled past nkeys, as the input's 0.f), each thread arriving when its copies land.
#include "ws.cuh"
#define THREADS 128
#define D 32
#define KT 64
#define PRODUCERS 1
#define S 2

extern "C" __global__ void __launch_bounds__(THREADS + 32 * PRODUCERS)
    attention_ws(const float* __restrict__ Q, const float* __restrict__ Kg, const float* __restrict__ Vg,
                 float* __restrict__ O, int nkeys, float scale) {
  __shared__ float Ks[S][KT * D];
  __shared__ float Vs[S][KT * D];
  __shared__ uint64_t full[S], empty[S];
  if (threadIdx.x == 0)
    for (int k = 0; k < S; ++k) {
      mbar_init(&full[k], 32 * PRODUCERS);
      mbar_init(&empty[k], THREADS);
    }
  __syncthreads();
  int trips = nkeys > 0 ? (nkeys + KT - 1) / KT : 0;
  if (threadIdx.x >= THREADS) {
    int p = threadIdx.x - THREADS;
    for (int t = 0; t < trips; ++t) {
      int k = t % S, k0 = t * KT;
      mbar_wait(&empty[k], ((t / S) & 1) ^ 1);
      for (int i = p; i < KT * D; i += 32 * PRODUCERS) {
        bool ok = k0 + i / D < nkeys;
        cp_async4(&Ks[k][i], ok ? &Kg[k0 * D + i] : Kg, ok ? 4 : 0);
        cp_async4(&Vs[k][i], ok ? &Vg[k0 * D + i] : Vg, ok ? 4 : 0);
      }
      cp_async_arrive(&full[k]);
    }
    return;
  }
  int qi = blockIdx.x * THREADS + threadIdx.x;
  float q[D], acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = Q[qi * D + d] * scale;
    acc[d] = 0.f;
  }
  float m = -1e30f, l = 0.f;
  for (int t = 0; t < trips; ++t) {
    int k = t % S, k0 = t * KT;
    mbar_wait(&full[k], (t / S) & 1);
    int valid = nkeys - k0 < KT ? nkeys - k0 : KT;
    for (int j = 0; j < valid; ++j) {
      float sc = 0.f;
#pragma unroll
      for (int d = 0; d < D; ++d) sc = fmaf(q[d], Ks[k][j * D + d], sc);
      float mn = fmaxf(m, sc), c = __expf(m - mn), p = __expf(sc - mn);
      l = fmaf(l, c, p);
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] = fmaf(acc[d], c, p * Vs[k][j * D + d]);
      m = mn;
    }
    mbar_arrive(&empty[k]);
  }
#pragma unroll
  for (int d = 0; d < D; ++d) O[qi * D + d] = acc[d] / l;
}
