#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using namespace nvcuda;
__global__ void wmma_f16(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.f); wmma::load_matrix_sync(fa, a, 16); wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc); wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
__global__ void wmma_tf32_bf16_int(const float* a, const float* b, float* c, const __nv_bfloat16* x, const signed char* i8, int* ic, const double* da, double* dc) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
  wmma::load_matrix_sync(fa, a, 8); wmma::load_matrix_sync(fb, b, 16);
  for (int t = 0; t < fa.num_elements; t++) fa.x[t] = wmma::__float_to_tf32(fa.x[t]);
  wmma::fill_fragment(fc, 0.f); wmma::mma_sync(fc, fa, fb, fc); wmma::store_matrix_sync(c, fc, 16, wmma::mem_col_major);
  wmma::fragment<wmma::matrix_a, 32, 8, 16, __nv_bfloat16, wmma::row_major> ba;
  wmma::fragment<wmma::matrix_b, 32, 8, 16, __nv_bfloat16, wmma::row_major> bb;
  wmma::fragment<wmma::accumulator, 32, 8, 16, float> bc;
  wmma::load_matrix_sync(ba, x, 16); wmma::load_matrix_sync(bb, x, 8); wmma::fill_fragment(bc, 1.f);
  wmma::mma_sync(bc, ba, bb, bc); wmma::store_matrix_sync(c + 256, bc, 8, wmma::mem_row_major);
  wmma::fragment<wmma::matrix_a, 8, 32, 16, signed char, wmma::row_major> ia;
  wmma::fragment<wmma::matrix_b, 8, 32, 16, signed char, wmma::col_major> ib;
  wmma::fragment<wmma::accumulator, 8, 32, 16, int> icf;
  wmma::load_matrix_sync(ia, i8, 16); wmma::load_matrix_sync(ib, i8, 16); wmma::fill_fragment(icf, 0);
  wmma::mma_sync(icf, ia, ib, icf, true); wmma::store_matrix_sync(ic, icf, 32, wmma::mem_row_major);
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> dA;
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major> dB;
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> dC;
  wmma::load_matrix_sync(dA, da, 4); wmma::load_matrix_sync(dB, da, 4); wmma::fill_fragment(dC, 0.0);
  wmma::mma_sync(dC, dA, dB, dC); wmma::store_matrix_sync(dc, dC, 8, wmma::mem_row_major);
}
__global__ void mma_ptx(const unsigned* a, const unsigned* b, float* d) {
  unsigned a0 = a[threadIdx.x], a1 = a[threadIdx.x + 32], a2 = a[threadIdx.x + 64], a3 = a[threadIdx.x + 96];
  unsigned b0 = b[threadIdx.x], b1 = b[threadIdx.x + 32];
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  int i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+r"(i0), "+r"(i1), "+r"(i2), "+r"(i3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  __shared__ unsigned short sm[16 * 16];
  sm[threadIdx.x] = (unsigned short)a0; __syncthreads();
  unsigned r0, r1, r2, r3;
  unsigned saddr = (unsigned)__cvta_generic_to_shared(sm + (threadIdx.x % 16) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(saddr));
  d[threadIdx.x] = c0 + c1 + c2 + c3 + i0 + i1 + i2 + i3 + r0 + r1 + r2 + r3;
}
