// Reference: the same SGEMM, warp-specialized by hand: 256 consumer threads compute exactly as sgemm_tiled does
// (same fmaf order, so outputs are bit-identical), PRODUCERS producer warps fill an S-slot mbarrier ring with
// cp.async (zero-filled out of bounds, as the input's 0.f), each thread arriving when its copies land.
#include "ws.cuh"
#define TILE 64
#define TK 16
#define THREADS 256
#define PRODUCERS 1
#define S 3

extern "C" __global__ void __launch_bounds__(THREADS + 32 * PRODUCERS)
    sgemm_ws(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  __shared__ float As[S][TK][TILE + 4];
  __shared__ float Bs[S][TK][TILE];
  __shared__ uint64_t full[S], empty[S];
  if (threadIdx.x == 0)
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 32 * PRODUCERS);
      mbar_init(&empty[s], THREADS);
    }
  __syncthreads();
  int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
  int trips = K > 0 ? (K + TK - 1) / TK : 0;
  if (threadIdx.x >= THREADS) {
    int p = threadIdx.x - THREADS;
    for (int t = 0; t < trips; ++t) {
      int s = t % S, k0 = t * TK;
      mbar_wait(&empty[s], ((t / S) & 1) ^ 1);
      for (int i = p; i < TK * TILE; i += 32 * PRODUCERS) {
        int r = i / TK, c = i % TK;
        bool ok = row0 + r < M && k0 + c < K;
        cp_async4(&As[s][c][r], ok ? &A[(row0 + r) * K + k0 + c] : A, ok ? 4 : 0);
        int rb = i / TILE, cb = i % TILE;
        ok = k0 + rb < K && col0 + cb < N;
        cp_async4(&Bs[s][rb][cb], ok ? &B[(k0 + rb) * N + col0 + cb] : B, ok ? 4 : 0);
      }
      cp_async_arrive(&full[s]);
    }
    return;
  }
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int t = 0; t < trips; ++t) {
    int s = t % S;
    mbar_wait(&full[s], (t / S) & 1);
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[s][kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[s][kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    mbar_arrive(&empty[s]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < M && c < N) C[r * N + c] = acc[i][j];
    }
}
