// PTX003 shapes: warp-specialized kernels that give their producer warpgroup fewer registers and the consumers
// more with setmaxnreg. With __launch_bounds__(384, 1) ptxas knows the registers at entry and emits USETMAXREG
// (false); without the minimum-blocks argument it ignores setmaxnreg and says so (C7508: true).

template <int N> __device__ void dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> __device__ void inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }

__device__ void body(const float *in, float *out) {
    int role = threadIdx.x / 128;
    if (role == 0) {
        dec<40>();
        out[threadIdx.x] = in[threadIdx.x];
    } else {
        inc<232>();
        float acc = 0.f;
        for (int k = 0; k < 64; ++k) acc += in[k * 384 + threadIdx.x] * k;
        out[threadIdx.x] = acc;
    }
}

__global__ void __launch_bounds__(384, 1) ws_bounded(const float *in, float *out) { body(in, out); }

__global__ void __launch_bounds__(384) ws_unbounded(const float *in, float *out) { body(in, out); }
