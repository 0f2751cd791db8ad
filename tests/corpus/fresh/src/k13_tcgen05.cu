__global__ void tcgen05_kernel(float* out, unsigned long long adesc, unsigned long long bdesc) {
  __shared__ unsigned taddr_slot;
  __shared__ unsigned long long bar;
  unsigned slot = (unsigned)__cvta_generic_to_shared(&taddr_slot);
  unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
  if (threadIdx.x < 32) asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(slot));
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
  asm volatile("tcgen05.fence::before_thread_sync;");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;");
  unsigned taddr = taddr_slot;
  unsigned idesc = 0x08100010u;
  if (threadIdx.x == 0) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\ntcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}" :: "r"(taddr), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(0));
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(bar_addr));
  }
  asm volatile("{\n.reg .pred P1;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], 0;\n@!P1 bra W;\n}" :: "r"(bar_addr));
  unsigned r0, r1, r2, r3;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;");
  out[threadIdx.x] = __uint_as_float(r0) + __uint_as_float(r1) + __uint_as_float(r2) + __uint_as_float(r3);
  __syncthreads();
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(taddr));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
}
