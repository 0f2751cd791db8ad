// Many-stream loops for the register pass (issue 15): per-stream addresses that nvcc hoists out of the loop and
// keeps live across it, where ptxas cannot recompute them itself (they come from global memory, not parameters).
#define STREAMS 32
#define OFFSETS 48

// 32 input pointers read from a table once: nvcc hoists the 32 loads and keeps 32 pointers live across the loop.
extern "C" __global__ void sum_table(const float* const* __restrict__ table, float* __restrict__ out, int n) {
  int stride = gridDim.x * blockDim.x;
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < STREAMS; ++j) s += table[j][k] * (float)(j + 1);
    out[k] = s;
  }
}

// A table of 48 offsets into one array: nvcc hoists the loads and the 48 addresses base + 4*offset.
extern "C" __global__ void sum_offsets(const float* __restrict__ in, const int* __restrict__ offsets,
                                       float* __restrict__ out, int n) {
  int stride = gridDim.x * blockDim.x;
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < OFFSETS; ++j) s += in[offsets[j] + k] * (float)(j + 1);
    out[k] = s;
  }
}
