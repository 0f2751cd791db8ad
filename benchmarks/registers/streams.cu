// Many-stream loops for benchmarks/registers.py: per-stream addresses that nvcc hoists out of the loop and keeps live
// across it (one 64-bit pointer per stream), unrolled row reductions, and a wide stencil. Launch bounds as an
// author would write them; each kernel is extern "C" so the launch specs can name it.

#define P(k) const float* __restrict__ a##k
#define L(k) s += a##k[i];
#define P8(b) P(b##0), P(b##1), P(b##2), P(b##3), P(b##4), P(b##5), P(b##6), P(b##7)
#define L8(b) L(b##0) L(b##1) L(b##2) L(b##3) L(b##4) L(b##5) L(b##6) L(b##7)

// out[i] = sum over 16, 32 or 48 input streams, grid-stride loop
extern "C" __global__ void __launch_bounds__(256)
sum16(P8(0), P8(1), float* __restrict__ out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float s = 0.f;
    L8(0) L8(1)
    out[i] = s;
  }
}

extern "C" __global__ void __launch_bounds__(256, 4)
sum32(P8(0), P8(1), P8(2), P8(3), float* __restrict__ out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float s = 0.f;
    L8(0) L8(1) L8(2) L8(3)
    out[i] = s;
  }
}

extern "C" __global__ void __launch_bounds__(512, 2)
sum48(P8(0), P8(1), P8(2), P8(3), P8(4), P8(5), float* __restrict__ out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float s = 0.f;
    L8(0) L8(1) L8(2) L8(3) L8(4) L8(5)
    out[i] = s;
  }
}

// each thread reduces 32 rows of a column-major tile at once: 32 accumulators live across the column loop
extern "C" __global__ void __launch_bounds__(256, 8)
row_reduce32(const float* __restrict__ m, float* __restrict__ out, int rows, int cols) {
  int r0 = (blockIdx.x * blockDim.x + threadIdx.x) * 32;
  if (r0 + 32 > rows) return;
  float acc[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) acc[k] = 0.f;
  for (int c = 0; c < cols; ++c) {
#pragma unroll
    for (int k = 0; k < 32; ++k) acc[k] += m[(size_t)c * rows + r0 + k] * (float)(k + 1);
  }
#pragma unroll
  for (int k = 0; k < 32; ++k) out[r0 + k] = acc[k];
}

// 1-D stencil of radius 16 with 33 coefficients kept in registers across a loop over planes
extern "C" __global__ void __launch_bounds__(1024, 2)
stencil_r16(const float* __restrict__ in, const float* __restrict__ coef, float* __restrict__ out, int nx, int planes) {
  int x = blockIdx.x * blockDim.x + threadIdx.x + 16;
  if (x >= nx - 16) return;
  float c[33];
#pragma unroll
  for (int k = 0; k < 33; ++k) c[k] = coef[k];
  for (int p = 0; p < planes; ++p) {
    const float* row = in + (size_t)p * nx;
    float s = 0.f;
#pragma unroll
    for (int k = -16; k <= 16; ++k) s += c[k + 16] * row[x + k];
    out[(size_t)p * nx + x] = s;
  }
}
