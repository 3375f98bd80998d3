// Warp-level tensor-core and copy wrappers of the KDA chunked kernel: one inline `asm` per
// instruction, named after it (ldmatrix x4 / x4.trans, mma.sync m16n8k16 f16 / bf16 and
// m16n8k8 tf32 -> f32, cvt to tf32,
// cp.async 16 bytes with zero fill, its commit / wait, named barriers, f16x2 packing). They
// sit beside the kernel, as attention's warp_mma.cuh does, because only this family uses the
// f16 forms.
//
// Fragment layout of mma.m16n8k16 (g = lane / 4, q = lane % 4): A (16 x 16, row major) a0 =
// (row g, cols 2q, 2q+1), a1 = (row g+8, same cols), a2 = (row g, cols 2q+8, 2q+9), a3 = (row
// g+8, cols 2q+8, 2q+9); B (16 x 8) b0 = (rows 2q, 2q+1, col g), b1 = (rows 2q+8, 2q+9, col g);
// C (16 x 8, f32) c0, c1 = (row g, cols 2q, 2q+1), c2, c3 = (row g+8, same cols).
//
// Deliberately does not check: 16-byte alignment of ldmatrix / cp.async addresses, that all
// 32 lanes execute each .sync.aligned call, or barrier counts (multiples of 32).
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

namespace kernrt_kda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l gives the address of row l % 8 of matrix
// l / 8; register i receives row lane / 4, columns 2 (lane % 4) + {0, 1} of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: register i receives rows 2 (lane % 4) +
// {0, 1}, column lane / 4 of matrix i (the transpose of the above).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: d += A * B.
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d += A * B (bf16 operands).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: d += A * B, A 16 x 8 (a0 = (row g,
// col q), a1 = (row g+8, col q), a2 = (row g, col q+4), a3 = (row g+8, col q+4)), B 8 x 8
// (b0 = (row q, col g), b1 = (row q+4, col g)), operands tf32 in 32-bit registers.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cvt.rna.tf32.f32: fp32 -> tf32 (10-bit mantissa, round to nearest, ties away), as fp32 bits.
__device__ __forceinline__ float to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// Two floats -> one f16x2 register (round to nearest even), `lo` in the low half.
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: copies src_bytes (0 or 16) and zero
// fills the rest, so a masked row lands as zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}

// cp.async.ca.shared.global [dst], [src], 4, src_bytes: the 4-byte form (beta).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// cp.async.wait_group N: this thread's groups except the newest N have landed.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// bar.sync id, count / bar.arrive id, count: named barriers among `count` threads.
__device__ __forceinline__ void bar_sync(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(uint32_t id, uint32_t count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

}  // namespace kernrt_kda
