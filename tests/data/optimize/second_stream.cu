// nvcc (the wheel, CUDA 13) -arch=sm_90 -ptx; the PTX .version lowered from 9.5 to 8.0 so that older drivers JIT it.
// The issue's shape 2: the acquire lives in a non-inlined callee; `data` is written by another stream after launch.
// The spin is bounded so that the test cannot hang: a timeout sets g_timed_out and the kernel finishes.
__device__ int g_ready;
__device__ int g_timed_out;
__device__ float g_out[1 << 20];

__device__ __noinline__ void wait_ready() {
    for (int n = 0; n < (1 << 22); ++n) {
        int v;
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(&g_ready) : "memory");
        if (v) return;
        __nanosleep(256);
    }
    g_timed_out = 1;
}

__global__ void consumer(const float* data) {
    if (threadIdx.x == 0) wait_ready();
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    g_out[i] = data[i];
}
