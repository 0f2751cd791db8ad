__global__ void tex_kernel(cudaTextureObject_t t1, cudaTextureObject_t t2, cudaTextureObject_t t3, cudaSurfaceObject_t s, float* out, int w) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  float a = tex1Dfetch<float>(t1, x);
  float4 b = tex2D<float4>(t2, x + 0.5f, y + 0.5f);
  float c = tex3D<float>(t3, x, y, 0.5f);
  float d = tex2DLod<float>(t2, x, y, 1.0f);
  float e = tex1DLayered<float>(t1, x, 2);
  float4 g = tex2Dgather<float4>(t2, x, y, 1);
  float v; surf2Dread(&v, s, x * 4, y);
  surf2Dwrite(a + b.x + c + d + e + g.w + v, s, x * 4, y, cudaBoundaryModeClamp);
  out[y * w + x] = a;
}
struct __align__(16) Particle { float3 pos; int id; double mass; char tag[5]; };
__global__ void aos_kernel(Particle* __restrict__ p, const Particle* __restrict__ q, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { Particle t = q[i]; t.pos.x += t.mass; t.tag[4] = 'x'; p[i] = t; }
}
__global__ void int_tricks(const long long* a, unsigned long long* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
  long long x = a[i];
  b[i] = __popcll(x) + __clzll(x) + __ffsll(x) + __brevll(x) + __mul64hi(x, x + 1) + __umul64hi(x, 3) + __sad(i, n, 1) + __dp4a(i, n, 7) + __dp2a_lo(i, n, 3)
         + __vabsdiffu4(i, n) + __vadd2(i, n) + __hadd(i, n) + __rhadd(i, n) + __usad(i, n, 0) + (x / 7) + (x % 13) + ((unsigned long long)x >> 3);
}
