#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
extern "C" __device__ int vprintf(const char*, void*);
__device__ float sq(float x) { return x * x; }
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
  if (i < n) y[i] = a * x[i] + sq(y[i]);
}
extern "C" __global__ void reduce(const int* in, int* out) {
  __shared__ int s[256];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  s[t] = in[t];
  __syncthreads();
  for (unsigned k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) { __nvvm_atom_add_gen_i(out, s[0]); vprintf("sum %d\n", (void*)out); }
  int v = __nvvm_shfl_sync_bfly_i32(0xffffffff, s[t], 1, 31);
  out[t + 1] = v + __nvvm_vote_ballot_sync(0xffffffff, v > 0);
}
struct P { double a; int b[3]; };
extern "C" __global__ void structs(P* p, int n) {
  P local[8];
  for (int k = 0; k < 8; ++k) local[k] = p[(k * 7) % n];
  double acc = 0; for (int k = 0; k < 8; ++k) acc += local[k].a * local[(k + n) & 7].b[k % 3];
  p[0].a = acc; __nvvm_membar_gl();
}
