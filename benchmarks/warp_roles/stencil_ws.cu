// Reference: the same stencil, warp-specialized by hand: 256 consumer threads compute as stencil_tiled does
// (bit-identical), PRODUCERS producer warps stage tiles and halos into an S-slot mbarrier ring with cp.async
// (zero-filled outside 0..n-1, as the input's 0.f), each thread arriving when its copies land.
#include "ws.cuh"
#define THREADS 256
#define R 4
#define TILE 1024
#define PRODUCERS 1
#define S 3

__device__ __forceinline__ float stencil9(const float* s) {
  float v = 0.0625f * s[0];
  v = fmaf(0.125f, s[1], v);
  v = fmaf(0.25f, s[2], v);
  v = fmaf(0.5f, s[3], v);
  v = fmaf(-1.875f, s[4], v);
  v = fmaf(0.5f, s[5], v);
  v = fmaf(0.25f, s[6], v);
  v = fmaf(0.125f, s[7], v);
  return fmaf(0.0625f, s[8], v);
}

extern "C" __global__ void __launch_bounds__(THREADS + 32 * PRODUCERS)
    stencil_ws(const float* __restrict__ x, float* __restrict__ y, int n, int tiles) {
  __shared__ float s[S][TILE + 2 * R];
  __shared__ uint64_t full[S], empty[S];
  if (threadIdx.x == 0)
    for (int k = 0; k < S; ++k) {
      mbar_init(&full[k], 32 * PRODUCERS);
      mbar_init(&empty[k], THREADS);
    }
  __syncthreads();
  int base = blockIdx.x * tiles * TILE;
  if (threadIdx.x >= THREADS) {
    int p = threadIdx.x - THREADS;
    for (int t = 0; t < tiles; ++t) {
      int k = t % S, start = base + t * TILE - R;
      mbar_wait(&empty[k], ((t / S) & 1) ^ 1);
      for (int i = p; i < TILE + 2 * R; i += 32 * PRODUCERS) {
        int g = start + i;
        bool ok = g >= 0 && g < n;
        cp_async4(&s[k][i], ok ? &x[g] : x, ok ? 4 : 0);
      }
      cp_async_arrive(&full[k]);
    }
    return;
  }
  for (int t = 0; t < tiles; ++t) {
    int k = t % S;
    mbar_wait(&full[k], (t / S) & 1);
#pragma unroll
    for (int j = 0; j < TILE / THREADS; ++j) {
      int o = threadIdx.x + j * THREADS;
      int g = base + t * TILE + o;
      if (g < n) y[g] = stencil9(&s[k][o]);
    }
    mbar_arrive(&empty[k]);
  }
}
