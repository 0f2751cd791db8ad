// The safe near-misses of symbol_alias.cu and consumer.cu: the same accesses without the hazard, so the pass
// must still make the parameter loads `.nc` (with --noalias where another pointer parameter is written).
__device__ float g_table[1 << 10];
__device__ __noinline__ float twice(float x) { return 2.0f * x; }

// Reads a module variable, writes only through a parameter: no module-variable store to alias `src`.
extern "C" __global__ void reads_symbol(const float* src, float* dst) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i] + g_table[threadIdx.x & 1023];
}

// Calls a function that neither writes memory nor synchronizes.
extern "C" __global__ void pure_callee(const float* src, float* dst) {
    if (threadIdx.x == 0) dst[blockIdx.x] = twice((float)blockIdx.x);
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i + (1 << 20)] = src[i];
}
