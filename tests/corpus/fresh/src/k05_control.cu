#include <cstdio>
typedef float (*op_t)(float, float);
__device__ float op_add(float a, float b) { return a + b; }
__device__ float op_mul(float a, float b) { return a * b; }
__device__ float op_max(float a, float b) { return fmaxf(a, b); }
__device__ op_t table[3] = {op_add, op_mul, op_max};
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ void dump(int tid, float v, const char* s) { printf("tid=%d v=%f %s %lld\n", tid, v, s, (long long)clock64()); }
__managed__ int managed_counter;
__device__ int dev_array[64] = {1, 2, 3, 4};
__constant__ float coeffs[16] = {0.5f, 0.25f, 0.125f};
__global__ void control_kernel(float* x, int which, int n) {
  int i = threadIdx.x;
  float local[20];
  for (int k = 0; k < 20; ++k) local[k] = x[(i + k * which) % n];
  float acc = table[which % 3](local[which % 20], coeffs[i & 15]);
  switch (which) { case 0: acc += 1; break; case 1: acc *= 2; break; case 2: acc -= 3; break; case 7: acc = -acc; break; default: acc = 0; }
  acc += fib(which & 15) + dev_array[i & 63];
  if (i == 0) { dump(i, acc, "hello"); atomicAdd(&managed_counter, 1); }
  if (acc < -1e30f) __trap();
  if (acc > 1e30f) asm("exit;");
  x[i] = acc;
  __nanosleep(100);
  if (i > 1000) __brkpt();
}
__global__ void dyn_smem(float* x) { extern __shared__ float buf[]; buf[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x]; }
__global__ void alloc_kernel(int n) { int* p = (int*)malloc(n * sizeof(int)); if (p) { p[0] = n; printf("%p\n", p); free(p); } }
