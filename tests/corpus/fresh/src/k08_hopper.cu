#include <cuda/barrier>
#include <cooperative_groups.h>
#include <cuda.h>
namespace cg = cooperative_groups;
__global__ void __cluster_dims__(2, 1, 1) cluster_kernel(float* out) {
  cg::cluster_group cl = cg::this_cluster();
  __shared__ float s[64];
  s[threadIdx.x] = threadIdx.x + cl.block_rank();
  cl.sync();
  float* peer = cl.map_shared_rank(s, (cl.block_rank() + 1) % cl.num_blocks());
  out[blockIdx.x * 64 + threadIdx.x] = peer[threadIdx.x] + cl.dim_blocks().x;
  cl.sync();
}
__global__ void mbar_kernel(const float* __restrict__ g, float* out, int n) {
  __shared__ alignas(16) float buf[256];
  __shared__ unsigned long long bar;
  unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned buf_addr = (unsigned)__cvta_generic_to_shared(buf);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar_addr), "r"(1));
    asm volatile("fence.mbarrier_init.release.cluster;");
    asm volatile("fence.proxy.async.shared::cta;");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_addr), "r"(1024));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(buf_addr), "l"(g), "r"(1024), "r"(bar_addr) : "memory");
  }
  asm volatile("{\n\t.reg .pred P1;\n"
               "WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
               "@!P1 bra WAIT;\n\t}" :: "r"(bar_addr), "r"(0));
  out[threadIdx.x] = buf[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(out + 256), "r"(buf_addr), "r"(1024) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group.read 0;");
  }
}
__global__ void __launch_bounds__(384, 1) wgmma_kernel(const __grid_constant__ CUtensorMap tmap, float* out) {
  __shared__ alignas(128) unsigned short A[64 * 16];
  __shared__ alignas(128) unsigned short B[16 * 64];
  __shared__ unsigned long long bar;
  int wg = threadIdx.x / 128;
  if (wg == 0) { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); return; }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 128) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(bar_addr));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"((unsigned)__cvta_generic_to_shared(A)), "l"(&tmap), "r"(0), "r"(0), "r"(bar_addr) : "memory");
  }
  unsigned long long da = ((unsigned long long)__cvta_generic_to_shared(A) >> 4) | (1ull << 62);
  unsigned long long db = ((unsigned long long)__cvta_generic_to_shared(B) >> 4) | (1ull << 62);
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  asm volatile("wgmma.fence.sync.aligned;");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 1;\n}"
    : "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]),"+f"(d[4]),"+f"(d[5]),"+f"(d[6]),"+f"(d[7]),"+f"(d[8]),"+f"(d[9]),"+f"(d[10]),"+f"(d[11]),"+f"(d[12]),"+f"(d[13]),"+f"(d[14]),"+f"(d[15]),
      "+f"(d[16]),"+f"(d[17]),"+f"(d[18]),"+f"(d[19]),"+f"(d[20]),"+f"(d[21]),"+f"(d[22]),"+f"(d[23]),"+f"(d[24]),"+f"(d[25]),"+f"(d[26]),"+f"(d[27]),"+f"(d[28]),"+f"(d[29]),"+f"(d[30]),"+f"(d[31])
    : "l"(da), "l"(db), "r"(1));
  asm volatile("wgmma.commit_group.sync.aligned;");
  asm volatile("wgmma.wait_group.sync.aligned 0;");
  float s = 0; for (int i = 0; i < 32; ++i) s += d[i];
  unsigned is_elected;
  asm volatile("{\n.reg .pred e;\nelect.sync _|e, 0xffffffff;\nselp.u32 %0, 1, 0, e;\n}" : "=r"(is_elected));
  asm volatile("griddepcontrol.wait;");
  out[threadIdx.x] = s + is_elected;
  asm volatile("griddepcontrol.launch_dependents;");
}
