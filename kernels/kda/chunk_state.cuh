// State role of the KDA / GDN chunked forward (kda_chunk.cu): each of the eight state warps
// owns 16 value rows of the block's state X [V, K] (fp32, as mma C fragments: 16 n-tiles of
// 8 key channels, 64 registers) for the whole span and applies one chunk at a time, in the
// transposed residual form (kernels/kda/README.md "Chunked forward"):
//   r^T   = v^T - X (k^ a)^T                     16 x 16, fp32 (v exact)
//   vn^T  = r^T (Tm Diag(beta))^T                 the chunk's corrected values
//   o^T   = X (q^ a)^T + vn^T Aqk^T              16 x 16 outputs
//   X     = X Diag(gamma) + vn^T (k^ b)
// All products are mma.sync m16n8k16 with f16 operands and fp32 accumulation; X, r and vn
// enter them through a power-of-two scale per warp (their largest magnitude near 2^14), which
// keeps f16's 11 bits for any magnitude and is undone exactly on the fp32 results. A C
// fragment of X is an A fragment of the next product (no shared-memory round trip).
//
// Not checked here: what kda_chunk.cu guarantees (warp index, stage, span).
#pragma once

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "kda/chunk_smem.cuh"
#include "kda/kda_vec.cuh"

namespace kernrt::kda {

// Power-of-two scale s (and 1/s) that maps a warp's largest |x| into [2^14, 2^15).
struct Pow2 {
  float s, inv;
};

__device__ __forceinline__ Pow2 pow2_of(float m) {
#pragma unroll
  for (int w = 16; w >= 1; w >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, w));
  const int e = int((__float_as_uint(m) >> 23) & 0xff);  // biased exponent of the max
  int se = e == 0 || e == 255 ? 127 : 268 - e;             // 2^(14 - (e - 127))
  se = se < 1 ? 1 : (se > 253 ? 253 : se);
  return Pow2{__uint_as_float(uint32_t(se) << 23), __uint_as_float(uint32_t(254 - se) << 23)};
}

// ldmatrix address of lane `lane` for the four 8 x 8 matrices (rows r0 + 0..7 | r0 + 8..15) x
// (cols c0 + 0..7 | c0 + 8..15) of a row-major f16 tile with `ld` halves per row, in the order
// (rows lo, cols lo), (rows lo, cols hi), (rows hi, cols lo), (rows hi, cols hi).
__device__ __forceinline__ uint32_t ldm_addr(const __half* tile, int ld, int r0, int c0, int lane) {
  const int r = r0 + (lane & 7) + ((lane >> 4) << 3);
  const int c = c0 + (((lane >> 3) & 1) << 3);
  return ptx::smem_u32(tile + r * ld + c);
}

// The same for .trans loads of B fragments: (rows lo | hi) x (cols n0 | n0 + 8), ordered
// (rows lo, cols n0), (rows hi, cols n0), (rows lo, cols n0+8), (rows hi, cols n0+8).
__device__ __forceinline__ uint32_t ldm_addr_t(const __half* tile, int ld, int n0, int lane) {
  const int r = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int c = n0 + ((lane >> 4) << 3);
  return ptx::smem_u32(tile + r * ld + c);
}

struct StateWarp {
  float x[16][4];  // X rows v0 + g, v0 + g + 8; cols 8n + 2q, 8n + 2q + 1
  int warp, lane;

  __device__ __forceinline__ float absmax() const {
    float m = 0.f;
#pragma unroll
    for (int n = 0; n < 16; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) m = fmaxf(m, fabsf(x[n][e]));
    return m;
  }

  // One chunk. Writes the 16 x 16 output tile (bf16) to `ost` [t][v] when kOut.
  template <bool kOut>
  __device__ __forceinline__ void apply(const Operands& op, uint16_t (&ost)[kChunk][kChunk]) {
    const int g = lane >> 2, q = lane & 3, v0 = 16 * warp;
    // ---- X (k^ a)^T and X (q^ a)^T ------------------------------------------------------
    const Pow2 sx = pow2_of(absmax());
    float p1[2][4] = {}, p2[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const uint32_t a[4] = {ptx::pack_f16x2(x[2 * ks][0] * sx.s, x[2 * ks][1] * sx.s),
                             ptx::pack_f16x2(x[2 * ks][2] * sx.s, x[2 * ks][3] * sx.s),
                             ptx::pack_f16x2(x[2 * ks + 1][0] * sx.s, x[2 * ks + 1][1] * sx.s),
                             ptx::pack_f16x2(x[2 * ks + 1][2] * sx.s, x[2 * ks + 1][3] * sx.s)};
      uint32_t bk[4], bq[4];
      ptx::ldmatrix_x4(bk[0], bk[1], bk[2], bk[3], ldm_addr(&op.kw[0][0], kRowH, 0, 16 * ks, lane));
      ptx::ldmatrix_x4(bq[0], bq[1], bq[2], bq[3], ldm_addr(&op.qt[0][0], kRowH, 0, 16 * ks, lane));
      ptx::mma_m16n8k16_f16(p1[0], a[0], a[1], a[2], a[3], bk[0], bk[1]);
      ptx::mma_m16n8k16_f16(p1[1], a[0], a[1], a[2], a[3], bk[2], bk[3]);
      if (kOut) {
        ptx::mma_m16n8k16_f16(p2[0], a[0], a[1], a[2], a[3], bq[0], bq[1]);
        ptx::mma_m16n8k16_f16(p2[1], a[0], a[1], a[2], a[3], bq[2], bq[3]);
      }
    }
    // ---- r^T = v^T - X (k^ a)^T ----------------------------------------------------------
    float r[2][4];
    float m = 0.f;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 v = *reinterpret_cast<const float2*>(&op.vt[v0 + g + 8 * h][8 * n + 2 * q]);
        r[n][2 * h] = v.x - p1[n][2 * h] * sx.inv;
        r[n][2 * h + 1] = v.y - p1[n][2 * h + 1] * sx.inv;
        m = fmaxf(m, fmaxf(fabsf(r[n][2 * h]), fabsf(r[n][2 * h + 1])));
      }
    // ---- vn^T = r^T (Tm Diag(beta))^T -----------------------------------------------------
    const Pow2 sr = pow2_of(m);
    uint32_t ar[4] = {ptx::pack_f16x2(r[0][0] * sr.s, r[0][1] * sr.s),
                      ptx::pack_f16x2(r[0][2] * sr.s, r[0][3] * sr.s),
                      ptx::pack_f16x2(r[1][0] * sr.s, r[1][1] * sr.s),
                      ptx::pack_f16x2(r[1][2] * sr.s, r[1][3] * sr.s)};
    uint32_t bt[4];
    ptx::ldmatrix_x4(bt[0], bt[1], bt[2], bt[3], ldm_addr(&op.tmb[0][0], kTileH, 0, 0, lane));
    float vn[2][4] = {};
    ptx::mma_m16n8k16_f16(vn[0], ar[0], ar[1], ar[2], ar[3], bt[0], bt[1]);
    ptx::mma_m16n8k16_f16(vn[1], ar[0], ar[1], ar[2], ar[3], bt[2], bt[3]);
    m = 0.f;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) vn[n][e] *= sr.inv, m = fmaxf(m, fabsf(vn[n][e]));
    const Pow2 sv = pow2_of(m);
    const uint32_t av[4] = {ptx::pack_f16x2(vn[0][0] * sv.s, vn[0][1] * sv.s),
                            ptx::pack_f16x2(vn[0][2] * sv.s, vn[0][3] * sv.s),
                            ptx::pack_f16x2(vn[1][0] * sv.s, vn[1][1] * sv.s),
                            ptx::pack_f16x2(vn[1][2] * sv.s, vn[1][3] * sv.s)};
    // ---- o^T = X (q^ a)^T + vn^T Aqk^T ------------------------------------------------------
    if (kOut) {
      uint32_t ba[4];
      ptx::ldmatrix_x4(ba[0], ba[1], ba[2], ba[3], ldm_addr(&op.aqk[0][0], kTileH, 0, 0, lane));
      float oi[2][4] = {};
      ptx::mma_m16n8k16_f16(oi[0], av[0], av[1], av[2], av[3], ba[0], ba[1]);
      ptx::mma_m16n8k16_f16(oi[1], av[0], av[1], av[2], av[3], ba[2], ba[3]);
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float o = p2[n][e] * sx.inv + oi[n][e] * sv.inv;
          const int t = 8 * n + 2 * q + (e & 1), v = g + 8 * (e >> 1);
          ost[t][v] = uint16_t(bf16_bits(o));
        }
    }
    // ---- X = X Diag(gamma) + vn^T (k^ b) ------------------------------------------------------
#pragma unroll
    for (int np = 0; np < 8; ++np) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b[0], b[1], b[2], b[3],
                             ldm_addr_t(&op.kt[0][0], kRowH, 16 * np, lane));
      float u[2][4] = {};
      ptx::mma_m16n8k16_f16(u[0], av[0], av[1], av[2], av[3], b[0], b[1]);
      ptx::mma_m16n8k16_f16(u[1], av[0], av[1], av[2], av[3], b[2], b[3]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = 2 * np + h;
        const float2 gm = *reinterpret_cast<const float2*>(&op.gamma[8 * n + 2 * q]);
        x[n][0] = fmaf(u[h][0], sv.inv, x[n][0] * gm.x);
        x[n][1] = fmaf(u[h][1], sv.inv, x[n][1] * gm.y);
        x[n][2] = fmaf(u[h][2], sv.inv, x[n][2] * gm.x);
        x[n][3] = fmaf(u[h][3], sv.inv, x[n][3] * gm.y);
      }
    }
  }
};

}  // namespace kernrt::kda
