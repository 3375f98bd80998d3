// Shared-memory layout and per-element helpers of prep v4 of the 64-token chunk
// (kda_chunk64_prep4.cu, chunk64_prep4.md): the block's constants, the tile swizzles, Smem (the
// phases' union, the raw q / k / g stage, the exchanges), the pair maps, the f16 / tf32 / bf16
// conversions and stores it uses, and pair_column (the fp32 pairs of a sub-block off the tf32
// path). The size constant and its static_asserts (two blocks per SM) stay beside the entries.
// Not checked here: the caller's dynamic shared memory is sizeof(Smem).
#pragma once

#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "kda/chunk_prep.cuh"

namespace kernrt::kda::c64p4 {

constexpr int kC = 64, kSub = 16, kK = 128, kThreads = 256;
constexpr int kRowB = kSub + 8;  // f16 row of a 16 x 16 block (48 B: ldmatrix rows conflict-free)
// raw stage row in u32 words: 64 bf16 pairs + 4 words of padding (272 B: the Gram's ldmatrix
// rows, 8 at one 16-byte column, fall on 8 distinct 4-bank groups; unpadded 256 B rows were
// 8-way conflicted)
constexpr int kRawW = kK / 2 + 4;

// f16 tile [16 tokens][128 channels], 16-byte chunks XOR-swizzled by row % 8 (no padding;
// ldmatrix of 8 rows at one chunk and f16x2 stores of 32 channel pairs are conflict-free):
// chunk (c / 8) ^ (t % 8) is c ^ 8 (t % 8), so a row's offsets are the 8 values c ^ 8 k.
__device__ __forceinline__ int swz_h(int t, int c) { return t * kK + (c ^ ((t & 7) << 3)); }
// fp32 tile [16 tokens][128 channels], 16-byte chunks (4 floats) swizzled the same way.
__device__ __forceinline__ int swz_f(int t, int c) { return t * kK + (c ^ ((t & 7) << 2)); }

struct SolveTiles {
  __half tt[kC][kC + 8];            // T transposed (tt[j][m] = T[m][j]), lower blocks, B operands
  __half th[4][kSub][kRowB];        // T_II row-major, A operands
  __half pw[8][8][kRowB];           // per warp: its 16 x 8 product, transposed, B operand
};

struct Smem {
  union {
    __half tiles[12][kSub * kK];    // phase 1-2: 0..2 q la (I = 1..3), 3..5 k la, 6..11 k lb D (pair)
    float stg[2][3][kSub * kK];     // phase 3: q f, k f, k / f (or fp32 q^, k^, alpha) of two sub-blocks
    SolveTiles sv;                  // phase 4
  };
  __half akh[6][kSub][kRowB];       // Akk of pair p (I > J), f16
  float akd[4][kSub * kSub + 4];    // Akk diagonal blocks, fp32 (block stride 1040 B: no conflicts)
  float2 dec[4][kC];                // dec_I of channel pair cp
  float beta[kC];
  int32_t safe[4][2];               // per sub-block, per warp: factors in range
  uint32_t rq[kC][kRawW];           // the raw stage: bf16 pairs of q, k, row = token of the chunk
  uint32_t rk[kC][kRawW];
  uint32_t rg[kC][kK / 2];          // raw g, bf16 pairs (value head hv), row = token of the chunk
  float2 rs[kC];                    // per token the l2 scales (q's times scale, k's)
};

constexpr float kLog2e = 1.4426950408889634f;

// Pairs I > J (prep v2's order) and the k lb D tile of each: D = 1 for I = J + 1, dec_{J+1} for
// I = J + 2, dec_2 dec_1 for (3, 0). pair_of(I, M) inverts it.
__device__ __forceinline__ int pair_i(int p) { return p < 3 ? p + 1 : (p < 5 ? p - 1 : 3); }
__device__ __forceinline__ int pair_j(int p) { return p < 3 ? p : (p < 5 ? p - 3 : 0); }
__device__ __forceinline__ int pair_of(int I, int M) { return I - M == 1 ? M : (I - M == 2 ? 3 + M : 5); }

using ptx::smem_u32;
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const void* p) {
  ptx::ldmatrix_x4(r[0], r[1], r[2], r[3], smem_u32(p));
}
__device__ __forceinline__ void stg_h2(__half* p, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(p) = ptx::pack_f16x2(lo, hi);
}
__device__ __forceinline__ float2 mul2(float2 a, float2 b) { return make_float2(a.x * b.x, a.y * b.y); }
// fp32 -> tf32, round to nearest, ties to even: cvt.rn.tf32.f32, one F2FP.TF32 (sm_90a, sm_100a)
// where the ties-away add-and-mask (kda_vec.cuh tf32_rna) is an IADD3 and a LOP3; the model's
// diagonal rounding for this entry is chunk_model.tf32_rn (chunk64_model.PREP4).
__device__ __forceinline__ float tf32_rn(float x) { return ptx::cvt_rn_tf32(x); }

// The fp32 pairs of column j of sub-block rows (prep v2's prep_column, from fp32 rows in place with
// row stride K): lane l holds channels 4l..4l+3; lane l < 16 ends with Aqk[l][j], lane
// l >= 16 with Akk[l - 16][j] (before beta).
__device__ __forceinline__ float pair_column(const float* qh, const float* kh, const float* al,
                                             int j, int lane) {
  float x[2 * kSub];
#pragma unroll
  for (int i = 0; i < 2 * kSub; ++i) x[i] = 0.f;
  const int c = 4 * lane;
  float4 z = *reinterpret_cast<const float4*>(kh + j * kK + c);
  {
    const float4 qv = *reinterpret_cast<const float4*>(qh + j * kK + c);
    float s = qv.x * z.x;
    s = fmaf(qv.y, z.y, s), s = fmaf(qv.z, z.z, s), s = fmaf(qv.w, z.w, s);
#pragma unroll
    for (int i = 0; i < kSub; ++i)
      if (i == j) x[i] = s;
  }
#pragma unroll
  for (int i = 1; i < kSub; ++i) {
    if (i > j) {
      const float4 a = *reinterpret_cast<const float4*>(al + i * kK + c);
      const float4 qv = *reinterpret_cast<const float4*>(qh + i * kK + c);
      const float4 kv = *reinterpret_cast<const float4*>(kh + i * kK + c);
      z.x *= a.x, z.y *= a.y, z.z *= a.z, z.w *= a.w;
      float sq = qv.x * z.x, sk = kv.x * z.x;
      sq = fmaf(qv.y, z.y, sq), sq = fmaf(qv.z, z.z, sq), sq = fmaf(qv.w, z.w, sq);
      sk = fmaf(kv.y, z.y, sk), sk = fmaf(kv.z, z.z, sk), sk = fmaf(kv.w, z.w, sk);
      x[i] = sq, x[kSub + i] = sk;
    }
  }
  scatter_step<16>(x, lane);
  scatter_step<8>(x, lane);
  scatter_step<4>(x, lane);
  scatter_step<2>(x, lane);
  scatter_step<1>(x, lane);
  return x[0];
}

__device__ __forceinline__ float2 bf2(uint32_t w) { return make_float2(bf16_lo(w), bf16_hi(w)); }
__device__ __forceinline__ float2 scl2(float2 a, float s) { return make_float2(a.x * s, a.y * s); }

}  // namespace kernrt::kda::c64p4
