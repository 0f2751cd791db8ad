__device__ int g_ready;  __device__ float g_out[1 << 20];
__device__ __noinline__ void wait_ready() {
    int v;
    do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(&g_ready) : "memory"); } while (v == 0);
}
__global__ void consumer(const float* data) {
    if (threadIdx.x == 0) wait_ready();
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;  g_out[i] = data[i];
}
