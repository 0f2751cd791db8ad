// Each kernel copies src to dst and also does one thing through which it may observe another agent's writes
// (another grid, the host, another GPU, the async proxy): none of them may read src through `.nc`, even when the
// pointers are declared alias-free.
#include <cooperative_groups.h>
#include <cuda/atomic>
#include <cuda/barrier>
namespace cg = cooperative_groups;
#pragma nv_diag_suppress static_var_with_dynamic_init  // cuda::barrier in __shared__, initialised by init()

extern "C" __global__ void volatile_flag(const float* src, float* dst, const int* flag) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (*(volatile const int*)flag) dst[i] = src[i];
}

extern "C" __global__ void relaxed_flag(const float* src, float* dst, int* flag) {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (f.load(cuda::memory_order_relaxed)) dst[i] = src[i];
}

extern "C" __global__ void release_flag(const float* src, float* dst, int* flag) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i];
    cuda::atomic_ref<int, cuda::thread_scope_system> f(*flag);
    f.store(1, cuda::memory_order_release);
}

extern "C" __global__ void counts(const float* src, float* dst, unsigned* counter) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i];
    atomicAdd(counter, 1u);
}

extern "C" __global__ void fenced(const float* src, float* dst) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __threadfence_system();
    dst[i] = src[i];
}

extern "C" __global__ void dependent_launch(const float* src, float* dst) {
    asm volatile("griddepcontrol.wait;" ::: "memory");  // cudaGridDependencySynchronize()
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i];
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_synced(const float* src, float* dst) {
    cg::this_cluster().sync();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i];
}

extern "C" __global__ void mbarrier_waits(const float* src, float* dst) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    bar.arrive_and_wait();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i];
}

extern "C" __global__ void weak_poll(const float* src, float* dst, const int* flag) {
    while (__ldcg(flag) == 0) {}  // ld.global.cg: no ordering qualifier, but its loop waits on someone's write
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i];
}

extern "C" __global__ void bulk_store(const float* src, float* dst) {
    __shared__ alignas(128) float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = src[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned s = (unsigned)__cvta_generic_to_shared(tile);
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 1024;"
                     :: "l"(dst + blockIdx.x * 256), "r"(s) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}
