// Streaming hints only for elements the whole grid touches once.
// bias[i] is read by every blockIdx.y: no `.L1::no_allocate` there, though %ctaid.x is in its address; in and out
// are split by both grid dimensions and get their hints.
extern "C" __global__ void bias_rows(const float* in, const float* bias, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int at = blockIdx.y * n + i;
    out[at] = in[at] + bias[i];
}

// Every trip of the outer loop reads the same bias elements again: the grid-stride inner loop does not make them
// touched once. (data[] is read once, but proving it needs the loop bounds: the pass leaves it alone too.)
extern "C" __global__ void bias_rounds(const float* data, const float* bias, float* out, int n, int rounds) {
    float acc = 0.0f;
    for (int r = 0; r < rounds; r++)
        for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
            acc += bias[k] * data[(size_t)r * n + k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// The near-miss: a one-dimensional grid-stride copy, each element touched once.
extern "C" __global__ void grid_stride_copy(const float4* in, float4* out, int n) {
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) out[k] = in[k];
}
