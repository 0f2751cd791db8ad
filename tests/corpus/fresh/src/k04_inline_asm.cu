__device__ __forceinline__ unsigned lane_id() { unsigned r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
__device__ __forceinline__ int clamp_asm(int x, int lo, int hi) {
  int r;
  asm("{\n\t.reg .pred p, q;\n\t"
      "setp.lt.s32 p, %1, %2;\n\t"
      "setp.gt.s32 q, %1, %3;\n\t"
      "mov.s32 %0, %1;\n\t"
      "@p mov.s32 %0, %2;\n\t"
      "@q mov.s32 %0, %3;\n\t}"
      : "=r"(r) : "r"(x), "r"(lo), "r"(hi));
  return r;
}
__device__ __forceinline__ int loop_asm(int n) {
  int r;
  asm volatile("{\n\t.reg .s32 c;\n\t.reg .pred p;\n\tmov.s32 %0, 0;\n\tmov.s32 c, %1;\n"
               "LOOP_%=:\n\t"
               "add.s32 %0, %0, c;\n\tsub.s32 c, c, 1;\n\tsetp.gt.s32 p, c, 0;\n\t@p bra LOOP_%=;\n\t}"
               : "=r"(r) : "r"(n));
  return r;
}
__device__ __forceinline__ float4 ld_nc_v4(const float4* p) {
  float4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ void st_wt(float* p, float v) { asm volatile("st.global.wt.f32 [%0], %1;" :: "l"(p), "f"(v) : "memory"); }
__global__ void asm_kernel(const float4* in, float* out, int* iout, int n) {
  unsigned l = lane_id();
  float4 v = ld_nc_v4(in + threadIdx.x);
  st_wt(out + threadIdx.x, v.x + v.y + v.z + v.w);
  iout[threadIdx.x] = clamp_asm(n, 0, 100) + loop_asm(l);
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  unsigned smid; asm("mov.u32 %0, %%smid;" : "=r"(smid));
  unsigned c; asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
  iout[n + threadIdx.x] = (int)(t + smid + c);
  asm volatile("prefetch.global.L2 [%0];" :: "l"(in + 128));
  asm volatile("discard.global.L2 [%0], 128;" :: "l"(out + 4096));
  asm volatile("membar.gl;" ::: "memory");
}
