#include <cooperative_groups.h>
#include <cuda/atomic>
#include <cuda/pipeline>
#include <cuda/std/utility>
namespace cg = cooperative_groups;
__global__ void grid_sync_kernel(float* data, int n, unsigned* flag) {
  cg::grid_group g = cg::this_grid();
  for (int i = g.thread_rank(); i < n; i += g.size()) data[i] *= 2.f;
  g.sync();
  cuda::atomic_ref<unsigned, cuda::thread_scope_device> f(*flag);
  if (g.thread_rank() == 0) f.store(1u, cuda::memory_order_release);
  while (f.load(cuda::memory_order_acquire) == 0) {}
  cuda::atomic_ref<float, cuda::thread_scope_system> s(data[0]);
  s.fetch_add(1.0f, cuda::memory_order_relaxed);
}
__global__ void pipeline_kernel(const float* in, float* out, int n) {
  __shared__ float stage[2][128];
  auto block = cg::this_thread_block();
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  for (int s = 0; s < 2; ++s) {
    pipe.producer_acquire();
    cuda::memcpy_async(&stage[s][threadIdx.x], &in[s * 128 + threadIdx.x], sizeof(float), pipe);
    pipe.producer_commit();
  }
  float acc = 0;
  for (int s = 0; s < 2; ++s) { cuda::pipeline_consumer_wait_prior<1>(pipe); acc += stage[s][threadIdx.x]; pipe.consumer_release(); }
  block.sync();
  out[threadIdx.x] = acc;
}
