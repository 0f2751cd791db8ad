// Input: the tiled SGEMM of sgemm.cu with its fill loop unrolled by a constant trip count (each thread stages
// elements tid + 256j, j < 4): the same arithmetic, straight-line staging stores.
#define TILE 64
#define TK 16
#define THREADS 256

extern "C" __global__ void __launch_bounds__(THREADS) sgemm_unrolled(int M, int N, int K, const float* __restrict__ A,
                                                                   const float* __restrict__ B, float* __restrict__ C) {
  __shared__ float As[TK][TILE + 4];
  __shared__ float Bs[TK][TILE];
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += TK) {
#pragma unroll
    for (int j = 0; j < TK * TILE / THREADS; ++j) {
      int i = threadIdx.x + j * THREADS;
      int r = i / TK, c = i % TK;
      As[c][r] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : 0.f;
      int rb = i / TILE, cb = i % TILE;
      Bs[rb][cb] = (k0 + rb < K && col0 + cb < N) ? B[(k0 + rb) * N + col0 + cb] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < M && c < N) C[r * N + c] = acc[i][j];
    }
}
