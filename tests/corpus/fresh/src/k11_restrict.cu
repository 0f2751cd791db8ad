extern "C" __global__ void stencil_restrict(const float* __restrict__ in, float* __restrict__ out, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= nx - 1 || y >= ny - 1) return;
  out[y * nx + x] = 0.2f * (in[y * nx + x] + in[y * nx + x - 1] + in[y * nx + x + 1] + in[(y - 1) * nx + x] + in[(y + 1) * nx + x]);
}
extern "C" __global__ void stencil_alias(const float* in, float* out, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= nx - 1 || y >= ny - 1) return;
  out[y * nx + x] = 0.2f * (in[y * nx + x] + in[y * nx + x - 1] + in[y * nx + x + 1] + in[(y - 1) * nx + x] + in[(y + 1) * nx + x]);
}
extern "C" __global__ void __launch_bounds__(128) transpose(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 4) tile[threadIdx.y + j][threadIdx.x] = __ldcs(&in[(y + j) * n + x]);
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 4) __stcs(&out[(y + j) * n + x], tile[threadIdx.x][threadIdx.y + j]);
}
extern "C" __global__ void cache_hints(const float4* __restrict__ a, float4* b, const double2* c, double* d) {
  int i = threadIdx.x;
  float4 v = __ldlu(a + i); float4 w = __ldcv(a + i + 32); float4 u = __ldca(a + i + 64); double2 q = __ldcg(c + i);
  __stwb(b + i, make_float4(v.x + w.x, v.y + u.y, w.z, u.w)); __stcg(d + i, q.x + q.y); __stwt(d + i + 64, q.y);
}
