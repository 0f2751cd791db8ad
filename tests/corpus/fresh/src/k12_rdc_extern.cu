extern __device__ float ext_scale(float);
extern __device__ int ext_table[];
__device__ __noinline__ float local_helper(float x, float y) { return x * y + ext_scale(x); }
__device__ float weak_global = 3.0f;
static __device__ float static_global = 2.0f;
__global__ void uses_extern(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = local_helper(x[i], weak_global + static_global) + ext_table[i & 7];
}
__global__ void child(int* p) { p[threadIdx.x] += 1; }
__global__ void parent(int* p) { if (threadIdx.x == 0) child<<<1, 32>>>(p); }
