#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;
__device__ unsigned lane_mask_lt() { unsigned r; asm("mov.u32 %0, %%lanemask_lt;" : "=r"(r)); return r; }
__global__ void warp_ops(const int* in, int* out, float* fout) {
  int x = in[threadIdx.x];
  unsigned m = __activemask();
  int b = __ballot_sync(m, x > 0);
  int a = __all_sync(m, x > 0) + __any_sync(m, x < 0) + __popc(b);
  int u = __shfl_up_sync(m, x, 1, 16) + __shfl_xor_sync(m, x, 3, 8) + __shfl_sync(m, x, 5);
  float fx = __int_as_float(x);
  float fs = __shfl_down_sync(m, fx, 2);
  unsigned mm = __match_any_sync(m, x); int pred; unsigned ma = __match_all_sync(m, x, &pred);
  int r = __reduce_add_sync(m, x) + __reduce_min_sync(m, x) + __reduce_max_sync(m, x)
          + __reduce_and_sync(m, (unsigned)x) + __reduce_or_sync(m, (unsigned)x) + __reduce_xor_sync(m, (unsigned)x);
  __syncwarp(m);
  out[threadIdx.x] = a + u + mm + ma + pred + r + __brev(x) + __clz(x) + __ffs(x) + __byte_perm(x, u, 0x3210) + __funnelshift_l(x, u, 3);
  fout[threadIdx.x] = fs + __fns(m, 0, 1) + (float)lane_mask_lt();
}
__global__ void cg_ops(const float* in, float* out, int n) {
  cg::thread_block blk = cg::this_thread_block();
  cg::thread_block_tile<32> t32 = cg::tiled_partition<32>(blk);
  cg::thread_block_tile<8> t8 = cg::tiled_partition<8>(blk);
  float v = in[blk.thread_rank()];
  float s = cg::reduce(t32, v, cg::plus<float>());
  float mx = cg::reduce(t8, v, cg::greater<float>());
  float sc = cg::inclusive_scan(t32, v);
  auto co = cg::coalesced_threads();
  if (v > 0) { auto act = cg::coalesced_threads(); s += act.shfl(v, 0) + act.size(); }
  blk.sync();
  out[blk.thread_rank()] = s + mx + sc + co.thread_rank() + t8.meta_group_rank();
}
