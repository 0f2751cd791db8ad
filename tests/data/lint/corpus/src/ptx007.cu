// PTX007 shapes: a local array ptxas must keep in local memory (filled by a loop of run-time length, read at a
// run-time index: true), and one whose .local depot in the PTX ptxas removes (no stack frame, no LDL/STL: false).

__global__ void runtime_window(const float *in, float *out, const int *idx, int n) {
    float window[128];
    for (int k = 0; k < n && k < 128; ++k) window[k] = in[k * blockDim.x + threadIdx.x];
    out[threadIdx.x] = window[idx[threadIdx.x] & 127];
}

__global__ void recomputed(const int *idx, float *out, int n) {
    float scratch[64];
    for (int k = 0; k < 64; ++k) scratch[k] = out[k] * k;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = scratch[idx[i] & 63];
}
