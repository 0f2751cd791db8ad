// PTX002 shapes: warp-specialized kernels whose warpgroups each reach `bar.sync 1` on their own branch (clean),
// a loop whose trip count is uniform although threadIdx appears on both sides of its test (clean), and barriers
// that only some threads reach (true findings).

__global__ void __launch_bounds__(384) ws_pingpong(const float *in, float *out, int tiles) {
    __shared__ float stage[2][128];
    int role = threadIdx.x / 128, t = threadIdx.x % 128;
    if (role == 0) {  // producer warpgroup
        for (int i = 0; i < tiles; ++i) {
            stage[i & 1][t] = in[i * 128 + t];
            asm volatile("bar.sync 1;" ::: "memory");
        }
    } else {  // two consumer warpgroups
        float acc = 0.f;
        for (int i = 0; i < tiles; ++i) {
            asm volatile("bar.sync 1;" ::: "memory");
            acc += stage[i & 1][t] * role;
        }
        out[blockIdx.x * 256 + threadIdx.x - 128] = acc;
    }
}

__global__ void __launch_bounds__(256) ws_split(const int *in, int *out) {
    __shared__ int cell[128];
    int t = threadIdx.x;
    if (t < 128) {
        cell[t] = in[blockIdx.x * 128 + t];
        asm volatile("bar.sync 1;" ::: "memory");
    } else {
        asm volatile("bar.sync 1;" ::: "memory");
        out[blockIdx.x * 128 + t - 128] = cell[255 - t];
    }
}

__global__ void strided_window(const float *in, float *out, int n) {
    __shared__ float tile[256];
    float acc = 0.f;
    for (const float *p = in + threadIdx.x; p < in + threadIdx.x + n; p += 256) {
        tile[threadIdx.x] = *p;
        __syncthreads();
        acc += tile[(threadIdx.x + 1) % 256];
        __syncthreads();
    }
    out[threadIdx.x] = acc;
}

__global__ void half_block_sync(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] *= 2.f;
        __syncthreads();
    }
}

__global__ void tid_trip_count(float *x) {
    __shared__ float s[256];
    s[threadIdx.x] = 0.f;
    for (int k = 0; k < threadIdx.x; ++k) {
        s[threadIdx.x] += x[k];
        __syncthreads();
    }
    x[threadIdx.x] = s[threadIdx.x];
}

__global__ void one_side_named(float *x) {
    if (threadIdx.x < 128) {
        x[threadIdx.x] += 1.f;
        asm volatile("bar.sync 1;" ::: "memory");
    } else {
        x[threadIdx.x] -= 1.f;
    }
}
