// Each thread sums 0.5 * its neighbour's staged a[] value per tile, and stops loading (stages 0) once its sum
// passes a limit; the per-row liveness lives in a dynamically indexed array (local memory).
extern "C" __global__ void __launch_bounds__(128) live_sum(const float* __restrict__ a, float* __restrict__ out, int n, int rows)
{
    __shared__ float tile[128];
    const int t = threadIdx.x;
    const float* p = a + (size_t)blockIdx.x * n * 128 + t;
    int live[8];
    for (int r = 0; r < 8; ++r) live[r] = 1;
    float acc = 0.f;
#pragma unroll 1
    for (int k = 0; k < n; ++k) {
        tile[t] = live[k % rows] ? p[(size_t)k * 128] : 0.f;
        __syncthreads();
        acc += 0.5f * tile[t ^ 1];
        if (acc > 100.f) live[(k + 1) % rows] = 0;
        __syncthreads();
    }
    out[blockIdx.x * 128 + t] = acc;
}
