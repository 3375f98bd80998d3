// PTX wrappers for warp-level tensor-core math (one inline `asm` per instruction, each
// function named after it): ldmatrix x4 and x4.trans, stmatrix x4.trans, mma.sync m16n8k16 bf16 / f16 and
// m16n8k8 tf32 -> f32, the tf32 conversions (ties away, ties to even), and the f16x2 / bf16x2 packing of A operands.
//
// Deliberately does not check: 16-byte alignment of ldmatrix row addresses, that all 32
// lanes of the warp execute each call (.sync.aligned), or the register fragment layout; the
// comments give the lane -> element mapping a kernel relies on.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace kernrt::ptx {

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l gives the address of row l%8 of matrix
// l/8; register i receives row lane/4, columns 2*(lane%4)+{0,1} of matrix i.
// volatile: the source is shared memory that TMA rewrites between calls with equal addresses.
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                            uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: as above, transposed: register i
// receives rows 2*(lane%4)+{0,1}, column lane/4 of matrix i.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16: the inverse of ldmatrix_x4_trans: lane l
// gives the address of row l%8 of matrix l/8 (16 bytes); register i holds row lane/4, columns
// 2*(lane%4)+{0,1} of matrix i, stored transposed (stored row c receives column c).
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1,
                                                  uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d += A(16x16) * B(16x8).
// A: a0 = (row g, k 2t..2t+1), a1 = (row g+8, same k), a2 = (row g, k 2t+8..), a3 = (row g+8,
// k 2t+8..); B: b0 = (k 2t..2t+1, col g), b1 = (k 2t+8.., col g); D: d0,d1 = (row g, cols
// 2t, 2t+1), d2,d3 = (row g+8, ...), with g = lane/4 and t = lane%4.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], uint32_t a0, uint32_t a1,
                                                  uint32_t a2, uint32_t a3, uint32_t b0,
                                                  uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: as above with f16 operands.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, uint32_t b0,
                                                 uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: d += A(16x8) * B(8x8), operands tf32 in
// 32-bit registers: a0 = (row g, col t), a1 = (row g+8, col t), a2 = (row g, col t+4), a3 =
// (row g+8, col t+4); b0 = (row t, col g), b1 = (row t+4, col g); D as for m16n8k16.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, uint32_t b0,
                                                 uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// cvt.rna.tf32.f32: fp32 to tf32 (10-bit mantissa, round to nearest, ties away), as fp32 bits.
__device__ __forceinline__ float cvt_rna_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// cvt.rn.tf32.f32: fp32 to tf32 (round to nearest, ties to even), as fp32 bits; sm_90+. One
// F2FP.TF32 in SASS where cvt.rna is an add, a mask and an infinity test.
__device__ __forceinline__ float cvt_rn_tf32(float x) {
  uint32_t r;
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// cvt.rn.f16x2.f32: two floats to one f16x2 register (round to nearest even), `lo` in the low
// half.
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Two floats to one bf16x2 register (round to nearest), `lo` in the low half (the lower
// column index of an A or B fragment).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

}  // namespace kernrt::ptx
