// Issue 10, kernel 1: a kernel writes a module-level array and reads it back through a pointer parameter
// (the host passes src = g_buf). `.nc` on src would read stale data.
__device__ float g_buf[1 << 20];
__global__ void symbol_alias(const float* src) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    g_buf[i] = (float)i;  __syncthreads();  g_buf[i + (1 << 19)] = src[i ^ 1];
}
