// Pieces of the 64-token chunk's prep shared by prep v4 (kda_chunk64_prep4.cu, KDA) and the
// GDN prep (kda_chunk64_prep_gdn.cu): the raw stage's row copy, the l2 norms from the Gram
// diagonals, the zero upper blocks of aqk / tmb, the solve's diagonal inverses and its levels.
// Templates over the caller's shared-memory struct S, which must hold the members they name
// with prep v4's types (chunk64_prep4_smem.cuh): rq, rk (raw bf16 stage, kRawW-word rows),
// rs (float2 per token), akd, akh, beta, sv (SolveTiles). Inlined into each entry (the code
// was prep v4's: the same operations in the same order, outputs unchanged; prep v4's executed
// path moved by ptxas's index math, 17,512 -> 17,516 warp instructions per chunk, 128 registers,
// no spills). Not checked here: the callers' barriers (each piece says what must be visible
// before it).
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "kda/chunk64_prep4_smem.cuh"
#include "kda/chunk_prep.cuh"

namespace kernrt::kda::c64p4 {

// The raw stage's copy j of one row (cp.async, 16 bytes at +64 j on both sides) of q and k:
// thread row t, 16-byte chunk c / 8 + 4 j; a masked row (ok false) reads no byte: its source
// is the tensor's start plus the offset, size 0 (zero fill).
template <int kJ, class S>
__device__ __forceinline__ void copy_row(S& sm, int t, int c, const uint16_t* q, const uint16_t* k,
                                         bool ok) {
  ptx::cp_async_cg_16_zfill_off<64 * kJ>(&sm.rq[t][c / 2 + 16 * kJ], q, ok ? 16 : 0);
  ptx::cp_async_cg_16_zfill_off<64 * kJ>(&sm.rk[t][c / 2 + 16 * kJ], k, ok ? 16 : 0);
}

// Step 0's q, k part (both preps): the chunk's 64 rows of head h into the raw stage, thread
// tid copying row tid / 4, 16-byte chunks tid % 4 + 4 j (j = 0..3) at immediate offsets from
// one 64-bit source address per tensor; kTail: rows t >= live zero-filled. A row offset t H K +
// c < 64 H K fits 32 bits.
template <bool kTail, class P, class S>
__device__ __forceinline__ void qk_stage(const P& p, S& sm, int tid, int64_t row0, int h, int live) {
  const int t = tid >> 2, c = 8 * (tid & 3);
  const bool ok = !kTail || t < live;
  const int64_t b = (row0 * p.heads + h) * kK;
  const int e = ok ? t * (p.heads * kK) + c : 0;
  const uint16_t *q = p.q + b + e, *k = p.k + b + e;
  copy_row<0>(sm, t, c, q, k, ok);
  copy_row<1>(sm, t, c, q, k, ok);
  copy_row<2>(sm, t, c, q, k, ok);
  copy_row<3>(sm, t, c, q, k, ok);
}

// The l2 scales of every token (sm.rs[t] = (scale / |q_t|, 1 / |k_t|), eps 1e-6 inside the
// sqrt) as the diagonals of the Gram matrices q q^T, k k^T of each sub-block on tensor cores
// (bf16 products exact, fp32 sums), warp w: sub-block I = w / 2, q (w even) or k. Per 16
// channels two ldmatrix.x4 of the same rows: the A fragment from rows 16 I + (l % 8) + 8 ((l /
// 8) % 2), 16-byte chunk 2 ks + l / 16 (registers (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15),
// (8-15, 8-15)), the B fragments (B = A^T) from rows 16 I + (l % 8) + 8 (l / 16), chunk 2 ks +
// (l / 8) % 2 (registers (0-7, 0-7), (0-7, 8-15): n-tile 0, (8-15, 0-7), (8-15, 8-15): n-tile
// 1), so each mma's B is a register pair as loaded (B taken from the A registers cost 4 MOV per
// 16 channels). Rows of kRawW words: conflict-free. Needs the raw stage complete (a barrier
// after the copies); sm.rs is read after the next barrier.
template <class S>
__device__ __forceinline__ void gram_norms(S& sm, float scale, int I, int warp, int lane) {
  const int g = lane >> 2, qd = lane & 3;
  const uint32_t* raw = (warp & 1) ? &sm.rk[0][0] : &sm.rq[0][0];
  const int ra = kSub * I + (lane & 7) + 8 * ((lane >> 3) & 1), rb = kSub * I + (lane & 7) + 8 * (lane >> 4);
  const uint32_t pa = smem_u32(raw + ra * kRawW) + 16 * (lane >> 4);
  const uint32_t pb = smem_u32(raw + rb * kRawW) + 16 * ((lane >> 3) & 1);
  float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    uint32_t f[4], b[4];
    ptx::ldmatrix_x4(f[0], f[1], f[2], f[3], pa + 32 * ks);
    ptx::ldmatrix_x4(b[0], b[1], b[2], b[3], pb + 32 * ks);
    ptx::mma_m16n8k16_bf16(d0, f[0], f[1], f[2], f[3], b[0], b[1]);
    ptx::mma_m16n8k16_bf16(d1, f[0], f[1], f[2], f[3], b[2], b[3]);
  }
  // C[i][i]: lane (g = i % 8, qd = g / 2), element g % 2 of d0 (i < 8) or 2 + g % 2 of d1
  if ((g >> 1) == qd) {
    const bool e = g & 1;
    const float sc = (warp & 1) ? 1.f : scale;
    float* rw = &sm.rs[kSub * I].x + (warp & 1);
    rw[2 * g] = l2_rscale(e ? d0[1] : d0[0]) * sc;
    rw[2 * (g + 8)] = l2_rscale(e ? d1[3] : d1[2]) * sc;
  }
}

// The upper blocks (I < J) of aqk and tmb are 0: 6 blocks x 16 rows x 2 uint4 each, by two
// warps w = 0, 1, lane (r = row, h = half): block row w, blocks (w, 1 + w), (w, 2 + w) at offsets
// off, off + 16, and (0, 3) (w = 0) or (2, 3) (w = 1) as the third (no per-store decode).
__device__ __forceinline__ void zero_upper(__half* aqk, __half* tmb, int w, int lane) {
  const int r = lane >> 1, h = lane & 1;
  const int off = (kSub * w + r) * kC + kSub * (1 + w) + 8 * h;
  const int off3 = w ? off + kSub * kC + kSub : off + 2 * kSub;
  const uint4 z = make_uint4(0u, 0u, 0u, 0u);
  *reinterpret_cast<uint4*>(aqk + off) = z, *reinterpret_cast<uint4*>(tmb + off) = z;
  *reinterpret_cast<uint4*>(aqk + off + kSub) = z, *reinterpret_cast<uint4*>(tmb + off + kSub) = z;
  *reinterpret_cast<uint4*>(aqk + off3) = z, *reinterpret_cast<uint4*>(tmb + off3) = z;
}

// Tm's diagonal blocks: thread tid < 64, block bI = tid / 16, column j = tid % 16, forward
// substitution of (I + A_II)^-1 in fp32 from sm.akd (fp32 strictly lower blocks, beta in); the
// column in f16 to tt (transposed, the levels' B operand), th (row-major, A operand) and times
// beta_j to tmb. Needs akd and beta visible (a barrier before).
template <class S>
__device__ __forceinline__ void solve_diag(S& sm, __half* tmb, int tid) {
  SolveTiles& sv = sm.sv;
  const int bI = tid >> 4, j = tid & (kSub - 1), o = kSub * bI;
  const float* A = sm.akd[bI];
  float x[kSub];
#pragma unroll
  for (int i = 0; i < kSub; ++i) {
    float s = 0.f;
#pragma unroll
    for (int m4 = 0; m4 < i; m4 += 4) {
      const float4 row = *reinterpret_cast<const float4*>(A + i * kSub + m4);
      s = fmaf(row.x, x[m4], s);
      if (m4 + 1 < i) s = fmaf(row.y, x[m4 + 1], s);
      if (m4 + 2 < i) s = fmaf(row.z, x[m4 + 2], s);
      if (m4 + 3 < i) s = fmaf(row.w, x[m4 + 3], s);
    }
    x[i] = i < j ? 0.f : (i == j ? 1.f : -s);
  }
  const float bj = sm.beta[o + j];
  // f16 pairs along i (cvt.rn per half: the bits of __float2half_rn each): row o + j of tt
  // takes them as 2 STS.128 (rows of 144 bytes: 8 threads on 8 distinct 16-byte bank groups),
  // th (column j) and tmb (column o + j) a half each
  uint32_t hp[kSub / 2], bp[kSub / 2];
#pragma unroll
  for (int i = 0; i < kSub; i += 2) {
    hp[i / 2] = ptx::pack_f16x2(x[i], x[i + 1]);
    bp[i / 2] = ptx::pack_f16x2(x[i] * bj, x[i + 1] * bj);
  }
  uint4* ttr = reinterpret_cast<uint4*>(&sv.tt[o + j][o]);
  ttr[0] = make_uint4(hp[0], hp[1], hp[2], hp[3]);
  ttr[1] = make_uint4(hp[4], hp[5], hp[6], hp[7]);
#pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const int sh = 16 * (i & 1);
    *reinterpret_cast<uint16_t*>(&sv.th[bI][i][j]) = uint16_t(hp[i / 2] >> sh);
    *reinterpret_cast<uint16_t*>(tmb + (o + i) * kC + o + j) = uint16_t(bp[i / 2] >> sh);
  }
}

// One level of the solve, T_IJ = -T_II sum_{M=J..I-1} A_IM T_MJ for I - J = kL: warp w takes
// block J = w / 2 and its 8 columns 8 (w % 2) ..; the sum rounded to f16 as the next B
// operand (v2's order). A template per level: the M loop unrolled (M = J + m, I - M = kL - m
// known), so the pair's tile is J plus a constant and every address an immediate from the
// level's base (the loop over L and M with pair_of per trip was ~16 index instructions a trip).
template <int kL, class S>
__device__ __forceinline__ void solve_level(S& sm, __half* tmb, int warp, int lane) {
  SolveTiles& sv = sm.sv;
  const int g = lane >> 2, qd = lane & 3;
  const int J = warp >> 1, nh = warp & 1, bI = J + kL, n0 = kSub * J + 8 * nh;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int ar = 8 * ((lane >> 3) & 1) + (lane & 7), ac = 8 * (lane >> 4);
#pragma unroll
  for (int m = 0; m < kL; ++m) {  // M = J + m: bI - M = kL - m is a constant in pair_of
    uint32_t fa[4];
    ldsm4(fa, &sm.akh[pair_of(bI, J + m)][ar][ac]);
    const int c = kSub * (J + m) + 2 * qd;
    ptx::mma_m16n8k16_f16(acc, fa[0], fa[1], fa[2], fa[3],
                          *reinterpret_cast<const uint32_t*>(&sv.tt[n0 + g][c]),
                          *reinterpret_cast<const uint32_t*>(&sv.tt[n0 + g][c + 8]));
  }
  __half (&pw)[8][kRowB] = sv.pw[warp];
#pragma unroll
  for (int e = 0; e < 4; ++e) pw[2 * qd + (e & 1)][g + 8 * (e >> 1)] = __float2half_rn(acc[e]);
  __syncwarp();
  float t[4] = {0.f, 0.f, 0.f, 0.f};
  uint32_t fa[4];
  ldsm4(fa, &sv.th[bI][ar][ac]);
  ptx::mma_m16n8k16_f16(t, fa[0], fa[1], fa[2], fa[3],
                        *reinterpret_cast<const uint32_t*>(&pw[g][2 * qd]),
                        *reinterpret_cast<const uint32_t*>(&pw[g][2 * qd + 8]));
  const int j = n0 + 2 * qd;
  const float bj0 = sm.beta[j], bj1 = sm.beta[j + 1];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = kSub * bI + g + 8 * h;
    stg_h2(tmb + i * kC + j, -t[2 * h] * bj0, -t[2 * h + 1] * bj1);
    sv.tt[j][i] = __float2half_rn(-t[2 * h]);
    sv.tt[j + 1][i] = __float2half_rn(-t[2 * h + 1]);
  }
}

}  // namespace kernrt::kda::c64p4
