// Scalar and vector helpers of the KDA / GDN kernels: loads of one or four bf16 / f32 input
// elements (through common/ptx/ldst.cuh's non-coherent loads: inputs q, k, v, g, beta are read
// only for the whole kernel), coherent 16-byte state loads and stores, bf16 <-> fp32,
// reductions over lane groups of a warp, and the gate, beta and l2norm formulas shared by the
// decode and the chunked kernels (kernels/kda/README.md "Math"). No inline asm: every PTX
// instruction comes from kernels/common/ptx. Every array index is a compile-time constant
// after unrolling, so arrays stay in registers.
//
// Not checked here: alignment (callers pass aligned addresses), that every lane of a group
// calls a group reduction (the shuffles are .sync over the full warp mask).
#pragma once

#include <cuda_bf16.h>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "kda/params.h"

namespace kernrt::kda {

// ---- loads and stores --------------------------------------------------------------------

// State lines and verify records are written by this kernel family: coherent loads.
__device__ __forceinline__ float4 ld_f4(const void* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st_f4(void* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

// ---- conversions -------------------------------------------------------------------------

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float bf16_f32(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }
__device__ __forceinline__ uint32_t bf16_bits(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
// fp32 -> tf32 (10-bit mantissa, round to nearest, ties away: cvt.rna.tf32.f32's result) by
// integer arithmetic for finite x: 2 instructions where cvt.rna is emulated with ~4 on sm_90
// (its inf / NaN handling). Not for inf or NaN.
__device__ __forceinline__ float tf32_rna(float x) {
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return bf16_bits(lo) | (bf16_bits(hi) << 16);
}

// Four consecutive elements of a bf16 or f32 vector (f32: 16 bytes, bf16: 8 bytes).
__device__ __forceinline__ void load4(const void* base, int64_t elem, bool f32, float (&x)[4]) {
  if (f32) {
    const uint4 u = ptx::ld_global_nc_v4(static_cast<const float*>(base) + elem);
    x[0] = __uint_as_float(u.x), x[1] = __uint_as_float(u.y);
    x[2] = __uint_as_float(u.z), x[3] = __uint_as_float(u.w);
  } else {
    const uint2 u = ptx::ld_global_nc_v2(static_cast<const uint16_t*>(base) + elem);
    x[0] = bf16_lo(u.x), x[1] = bf16_hi(u.x), x[2] = bf16_lo(u.y), x[3] = bf16_hi(u.y);
  }
}

__device__ __forceinline__ float load1(const void* base, int64_t elem, bool f32) {
  if (f32) return __uint_as_float(ptx::ld_global_nc_u32(static_cast<const float*>(base) + elem));
  return bf16_f32(ptx::ld_global_nc_u16(static_cast<const uint16_t*>(base) + elem));
}

// ---- reductions over groups of 8 lanes (lanes 8i..8i+7) -----------------------------------
// Butterfly (xor 1, 2, 4): every lane of the group ends with the same sum, bit for bit
// (a + b and b + a round alike at every level).
__device__ __forceinline__ float group8_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  return x;
}

// ---- gate, beta, l2norm -------------------------------------------------------------------

// softplus as fla computes it (x above 20 is returned as is), branch-free: log1p(u), u = e^x,
// by its series to u^6 below u = 0.1 (truncation < 3e-7 relative) and __logf(1 + u) above
// (MUFU: <= 2^-21.4 absolute on [1, 2], < 4e-6 relative at u = 0.1). log1pf's range branches
// around every element kept the chunk's prep warps from overlapping their 16 channels (the
// profile's largest prep region) and cost ~30 instructions per element in decode / verify.
__device__ __forceinline__ float softplus(float x) {
  const float u = __expf(fminf(x, 20.f));
  float s = fmaf(u, -1.f / 6.f, 0.2f);
  s = fmaf(u, s, -0.25f);
  s = fmaf(u, s, 1.f / 3.f);
  s = fmaf(u, s, -0.5f);
  s = fmaf(u, s, 1.f) * u;
  const float l = __logf(1.f + u);
  return x > 20.f ? x : (u < 0.1f ? s : l);
}

// Log decay of one channel (KDA) or head (GDN) from the raw gate input `x` (g + dt_bias):
// -a * softplus(x), or lower_bound * sigmoid(a * x); a = exp(A_log). Without kFlagGate, g
// is already the log decay.
__device__ __forceinline__ float log_decay(float g, float dtb, float a, int flags, float lb) {
  if (!(flags & kFlagGate)) return g;
  const float x = g + dtb;
  if (flags & kFlagLowerBound) return __fdividef(lb, 1.f + __expf(-a * x));
  return -a * softplus(x);
}

__device__ __forceinline__ float beta_of(float b, int flags) {
  if (!(flags & kFlagBetaSigmoid)) return b;
  const float s = __fdividef(1.f, 1.f + __expf(-b));
  return (flags & kFlagNegEigval) ? 2.f * s : s;
}

// 1 / sqrt(sum x^2 + 1e-6) from the sum of squares (eps inside the sqrt, as fla's l2norm).
__device__ __forceinline__ float l2_rscale(float sumsq) { return rsqrtf(sumsq + 1e-6f); }

}  // namespace kernrt::kda
