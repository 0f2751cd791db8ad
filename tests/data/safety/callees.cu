// Effects behind calls: a fence two calls deep, and a call through a function pointer loaded from memory.
__device__ __noinline__ void inner_fence() { __threadfence(); }
__device__ __noinline__ void outer_step() { inner_fence(); }

extern "C" __global__ void fence_two_calls_deep(const float* src, float* dst) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) outer_step();
    __syncthreads();
    dst[i] = src[i];
}

__device__ __noinline__ float negate(float x) { return -x; }
__device__ __noinline__ float square(float x) { return x * x; }
typedef float (*Op)(float);
__device__ Op g_ops[2] = {negate, square};

extern "C" __global__ void indirect_call(const float* src, float* dst, int which) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = g_ops[which & 1](src[i]);
}
