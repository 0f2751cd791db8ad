// Input: a 1-D 9-point stencil over tiles with halo staging: each block walks `tiles` tiles of 1024 outputs; per
// tile all 256 threads stage the tile and its 4-wide halos into shared memory, then each computes 4 outputs.
#define THREADS 256
#define R 4
#define TILE 1024

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

extern "C" __global__ void __launch_bounds__(THREADS)
    stencil_tiled(const float* __restrict__ x, float* __restrict__ y, int n, int tiles) {
  __shared__ float s[TILE + 2 * R];
  int base = blockIdx.x * tiles * TILE;
  for (int t = 0; t < tiles; ++t) {
    int start = base + t * TILE - R;
    for (int i = threadIdx.x; i < TILE + 2 * R; i += THREADS) {
      int g = start + i;
      s[i] = (g >= 0 && g < n) ? x[g] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TILE / THREADS; ++j) {
      int o = threadIdx.x + j * THREADS;
      int g = base + t * TILE + o;
      if (g < n) y[g] = stencil9(&s[o]);
    }
    __syncthreads();
  }
}
