// Issue 10, kernel 2: the acquire lives in a non-inlined callee; the kernel itself shows no ordered access.
// `data` is written by another grid after launch: `.nc` (hoisted above the barrier by ptxas) reads stale data.
#include <cuda/atomic>
__device__ int g_ready;  __device__ float g_out[1 << 20];
__device__ __noinline__ void wait_ready() {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(g_ready);
    while (f.load(cuda::memory_order_acquire) == 0) {}
}
__global__ void consumer(const float* data) {   // data is written by another grid after launch
    if (threadIdx.x == 0) wait_ready();
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;  g_out[i] = data[i];
}
