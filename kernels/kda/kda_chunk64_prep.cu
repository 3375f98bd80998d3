// KDA 64-token chunk: the prep alone (kernels/kda/chunk64.md "Order of work" step 2), from
// prepared fp32 tokens to the operands of the state-step entry (kda_chunk64_state.cu), in
// global memory. A check of the 64-token prep's algebra against validation/kda/chunk64_model.py
// (prep64, plan "f16") and a measure of its cost (chunk64.md "Measured": 787.8 us, 24.5k warp
// instructions per chunk at B8 T4096 H16, too many to fuse as is); not the shipped forward
// (kda_chunk.cu is) and not a serving op.
//
// One block per (chunk of 64 tokens, value head, sequence); block 256 (8 warps), one block
// per SM (kChunk64PrepSmem). Per chunk, sub-blocks I = 0..3 of 16 tokens, every decay a
// product of alphas (each <= 1: no gate overflows):
//   1. per key channel: dec_I = the product of sub-block I's alphas (threads (half, channel));
//   2. per (sub-block, channel), two sub-blocks at a time: la_t (prefix inside the sub-block),
//      lb_t (suffix), a_t = A_I la_t, b_t = B_I lb_t with A_I (B_I) the product of the
//      earlier (later) sub-blocks' dec; the f16 state operands k a, q a (rows of kq) and
//      (k b)^T (kbt) and gamma = a_63 straight to global memory; the f16 operands of the
//      off-diagonal blocks (q la, k la, k lb D) into shared memory; the shipped 16-token
//      kernel's tf32 operands of the diagonal blocks (its prep_channel_tf32, from registers,
//      into its PrepScratch);
//      then the diagonal blocks of Aqk / Akk as the shipped kernel computes them (tf32
//      relative to token 7 when every channel is in range, else prep_column's fp32 pairs);
//   3. the six off-diagonal blocks of Aqk and of Akk (I > J), exp(G_i - G_j) = la_i lb_j D_JI
//      with D_JI = prod_{M=J+1..I-1} dec_M: mma.sync m16n8k16, f16 operands, fp32 sums;
//   4. Tm = (I + Akk)^-1 blocked: the four 16 x 16 diagonal inverses by forward substitution
//      in fp32 (64 lanes), then T_IJ = -T_II sum_{M=J..I-1} A_IM T_MJ in three levels on
//      mma.sync with f16 operands (the model's "f16" solve; an fp32 CUDA-core form was 22 % of
//      this entry's instructions, ncu at 8ab3ced); Tm Diag(beta) and Aqk rounded to f16 into
//      global memory.
//
// Entry: kda_chunk64_prep_sm90a_f16_k128, one `const __grid_constant__ Chunk64PrepParams`
// (chunk64_params.h); grid (NC, HV, N). Off sm_90a it compiles all the same (mma.sync exists
// on sm_100a), but only sm_90a is pinned by a manifest.
// Not checked here: the layouts of chunk64_params.h, that padded tokens carry q = k = 0,
// alpha = 1, beta = 0 (the caller pads), K = 128.
#include <cuda_fp16.h>
#include <stdint.h>

#include "common/ptx/mma.cuh"
#include "common/ptx/sync.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk_prep.cuh"

namespace kernrt::kda::c64p {

constexpr int kC = 64;       // tokens per chunk
constexpr int kSub = 16;     // tokens per sub-block (kChunk of the shipped kernel)
constexpr int kK = 128;
constexpr int kThreads = 256;
constexpr int kRowT = kK + 8;  // f16 row of 128 channels, padded (272 B: conflict-free words)
constexpr int kRowA = kC + 4;  // fp32 row of a 64 x 64 matrix
constexpr int kRowS = kC + 8;  // f16 row of a 64 x 64 matrix (144 B: conflict-free words)
static_assert(kSub == kChunk, "the diagonal blocks reuse the 16-token prep scratch");

// The off-diagonal pairs (I, J) and the k lb D tile of each (rb index): D = 1 for I = J + 1,
// dec_{J+1} for I = J + 2, dec_2 dec_1 for (3, 0).
__constant__ int8_t kPairI[6] = {1, 2, 3, 2, 3, 3};
__constant__ int8_t kPairJ[6] = {0, 1, 2, 0, 1, 0};

// f16 operands of the blocked solve, over the prep scratch (dead after step 2).
struct SolveScratch {
  __half akh[kC][kRowS];           // Akk (rows I > J used), A operands
  __half th[4][kSub][kSub + 8];    // T_II row-major, A operands
  __half tt[kC][kRowS];            // T transposed (tt[j][m] = T[m][j]), B operands
  __half pw[8][8][kSub + 8];       // per warp: its 16 x 8 product, transposed, B operand
};

struct PrepSmem {
  union {
    PrepScratch ps[2];             // step 2: sub-blocks 2p + half (the shipped 16-token layout)
    SolveScratch sv;               // step 4
  };
  float aqk[kC][kRowA];            // Aqk, lower incl. the diagonal (upper blocks not written)
  float akk[kC][kRowA];            // Akk (rows times beta_i), strictly lower
  float tm[kC][kRowA];             // T = (I + Akk)^-1 (lower blocks)
  __half lq[3][kSub][kRowT];       // q la of sub-blocks 1..3
  __half lk[3][kSub][kRowT];       // k la of sub-blocks 1..3
  __half rb[6][kSub][kRowT];       // k lb D of pair p (pair order above)
  float dec[4][kK];
  float beta[kC];
  int32_t safe[2][4];
};
static_assert(sizeof(SolveScratch) <= sizeof(PrepScratch[2]), "the solve's scratch fits the prep's");
constexpr int kChunk64PrepSmem = 210624;
static_assert(int(sizeof(PrepSmem)) == kChunk64PrepSmem, "kChunk64PrepSmem is the layout");
static_assert(kChunk64PrepSmem <= 232448, "one block fits the opt-in shared memory");

// The shipped kernel's tf32 intra products (prep_intra_tf32) for the diagonal block of
// sub-block I, by the 4 warps of one half (w4 = 0..3), into the 64 x 64 fp32 matrices.
__device__ __forceinline__ void diag_tf32(const PrepScratch& ps, PrepSmem& sm, int I, int w4,
                                          int lane) {
  const bool qk = w4 < 2;
  const int n = w4 & 1, g = lane >> 2, q = lane & 3;
  const float (*A)[kRowF] = qk ? ps.qf : ps.kf;
  float acc[2][4] = {};
#pragma unroll
  for (int ks = 0; ks < kK / 8; ++ks) {
    const int c = 8 * ks + q;
    ptx::mma_m16n8k8_tf32(acc[ks & 1], __float_as_uint(A[g][c]), __float_as_uint(A[g + 8][c]),
                          __float_as_uint(A[g][c + 4]), __float_as_uint(A[g + 8][c + 4]),
                          __float_as_uint(ps.ki[8 * n + g][c]), __float_as_uint(ps.ki[8 * n + g][c + 4]));
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int i = g + 8 * (e >> 1), j = 8 * n + 2 * q + (e & 1);
    const float v = acc[0][e] + acc[1][e];
    if (qk) {
      sm.aqk[kSub * I + i][kSub * I + j] = i >= j ? v : 0.f;
    } else {
      sm.akk[kSub * I + i][kSub * I + j] = i > j ? v * sm.beta[kSub * I + i] : 0.f;
    }
  }
}

// prep_channel_tf32 of the shipped kernel from registers (this thread's channel of 16 tokens:
// q^, k^, alpha): the tf32 operands q f, k f, k / f with f_t = exp(G_t - G_7) as products of
// alphas; whether both ends stay within [1e-30, 1e30]. (ps.qh / kh / al are then written only
// on the fp32-pair path, which reads them.)
__device__ __forceinline__ bool tf32_operands(PrepScratch& ps, int ch, const float (&q)[kSub],
                                              const float (&k)[kSub], const float (&a)[kSub]) {
  constexpr int kRef = 7;
  float f[kSub], inv[kSub];
  float P = 1.f;
  f[kRef] = inv[kRef] = 1.f;
#pragma unroll
  for (int t = kRef - 1; t >= 0; --t) P *= a[t + 1], inv[t] = P, f[t] = __fdividef(1.f, P);
  float F = 1.f;
#pragma unroll
  for (int t = kRef + 1; t < kSub; ++t) F *= a[t], f[t] = F, inv[t] = __fdividef(1.f, F);
#pragma unroll
  for (int t = 0; t < kSub; ++t) {
    ps.qf[t][ch] = tf32_rna(q[t] * f[t]);
    ps.kf[t][ch] = tf32_rna(k[t] * f[t]);
    ps.ki[t][ch] = tf32_rna(k[t] * inv[t]);
  }
  return P >= 1e-30f && F >= 1e-30f;
}

// One 16 x 8 half (nh) of an off-diagonal block: A (16 tokens x 128 channels, f16 rows) times
// B^T (8 tokens of the k lb D tile), 8 k-steps of m16n8k16.
__device__ __forceinline__ void offdiag(const __half (*A)[kRowT], const __half (*B)[kRowT], int nh,
                                        int lane, float (&acc)[4]) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] = 0.f;
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    const int c = 16 * ks + 2 * q;
    const uint32_t a0 = *reinterpret_cast<const uint32_t*>(&A[g][c]);
    const uint32_t a1 = *reinterpret_cast<const uint32_t*>(&A[g + 8][c]);
    const uint32_t a2 = *reinterpret_cast<const uint32_t*>(&A[g][c + 8]);
    const uint32_t a3 = *reinterpret_cast<const uint32_t*>(&A[g + 8][c + 8]);
    const uint32_t b0 = *reinterpret_cast<const uint32_t*>(&B[8 * nh + g][c]);
    const uint32_t b1 = *reinterpret_cast<const uint32_t*>(&B[8 * nh + g][c + 8]);
    ptx::mma_m16n8k16_f16(acc, a0, a1, a2, a3, b0, b1);
  }
}

__device__ void prep64(const Chunk64PrepParams& p, PrepSmem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ch = tid & (kK - 1), half = tid >> 7, w4 = warp & 3;
  const int64_t chunk = (int64_t(blockIdx.z) * gridDim.y + blockIdx.y) * p.chunks + blockIdx.x;
  const float* qh = p.qh + chunk * kC * kK;
  const float* kh = p.kh + chunk * kC * kK;
  const float* al = p.al + chunk * kC * kK;

  // ---- 1. dec_I per channel -------------------------------------------------------------------
  if (tid < kC) sm.beta[tid] = p.beta[chunk * kC + tid];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int I = half + 2 * r;
    float d = 1.f;
#pragma unroll
    for (int t = 0; t < kSub; ++t) d *= al[(kSub * I + t) * kK + ch];
    sm.dec[I][ch] = d;
  }
  __syncthreads();

  // ---- 2. per (sub-block, channel): state operands, off-diagonal operands, diagonal blocks ---
  const float d0 = sm.dec[0][ch], d1 = sm.dec[1][ch], d2 = sm.dec[2][ch], d3 = sm.dec[3][ch];
  if (half == 0) p.gamma[chunk * kK + ch] = ((d0 * d1) * d2) * d3;
  const float d21 = d2 * d1;
#pragma unroll 1
  for (int r = 0; r < 2; ++r) {
    const int I = 2 * r + half;
    PrepScratch& ps = sm.ps[half];
    const float AI = I == 0 ? 1.f : (I == 1 ? d0 : (I == 2 ? d0 * d1 : (d0 * d1) * d2));
    const float BI = I == 3 ? 1.f : (I == 2 ? d3 : (I == 1 ? d3 * d2 : (d3 * d2) * d1));
    float q[kSub], k[kSub], a[kSub], la[kSub], lb[kSub];
#pragma unroll
    for (int t = 0; t < kSub; ++t) {
      const int64_t e = int64_t(kSub * I + t) * kK + ch;
      q[t] = qh[e], k[t] = kh[e], a[t] = al[e];
    }
    float run = 1.f;
#pragma unroll
    for (int t = 0; t < kSub; ++t) run *= a[t], la[t] = run;
    run = 1.f;
#pragma unroll
    for (int t = kSub - 1; t >= 0; --t) lb[t] = run, run *= a[t];
    __half* kq = p.kq + chunk * 2 * kC * kK;
    uint32_t kb2[kSub / 2];
#pragma unroll
    for (int t = 0; t < kSub; ++t) {
      const float at = AI * la[t];
      kq[(kSub * I + t) * kK + ch] = __float2half_rn(k[t] * at);
      kq[(kC + kSub * I + t) * kK + ch] = __float2half_rn(q[t] * at);
      if (t & 1) kb2[t / 2] = ptx::pack_f16x2(k[t - 1] * (BI * lb[t - 1]), k[t] * (BI * lb[t]));
      if (I >= 1) {
        sm.lq[I - 1][t][ch] = __float2half_rn(q[t] * la[t]);
        sm.lk[I - 1][t][ch] = __float2half_rn(k[t] * la[t]);
      }
      const float klb = k[t] * lb[t];
      if (I <= 2) sm.rb[I][t][ch] = __float2half_rn(klb);
      if (I == 0) sm.rb[3][t][ch] = __float2half_rn(klb * d1), sm.rb[5][t][ch] = __float2half_rn(klb * d21);
      if (I == 1) sm.rb[4][t][ch] = __float2half_rn(klb * d2);
    }
    uint4* kbt = reinterpret_cast<uint4*>(p.kbt + (chunk * kK + ch) * kC + kSub * I);
    kbt[0] = make_uint4(kb2[0], kb2[1], kb2[2], kb2[3]);
    kbt[1] = make_uint4(kb2[4], kb2[5], kb2[6], kb2[7]);
    const bool wsafe = __all_sync(0xffffffffu, tf32_operands(ps, ch, q, k, a));
    if (lane == 0) sm.safe[half][w4] = wsafe;
    __syncthreads();
    bool fast = true;
#pragma unroll
    for (int w = 0; w < 4; ++w) fast = fast && sm.safe[half][w] != 0;
    if (fast) {
      diag_tf32(ps, sm, I, w4, lane);
    } else {  // uniform over the half: the fp32 pairs read this sub-block's inputs from ps
#pragma unroll
      for (int t = 0; t < kSub; ++t) ps.qh[t][ch] = q[t], ps.kh[t][ch] = k[t], ps.al[t][ch] = a[t];
      ptx::bar_sync(1 + half, kThreads / 2);
      const int cols[4] = {w4, 7 - w4, 8 + w4, 15 - w4};
#pragma unroll 1
      for (int jj = 0; jj < 4; ++jj) {
        const int j = cols[jj];
        float v;
        prep_column(ps, j, lane, v);
        if (lane < kSub) {
          sm.aqk[kSub * I + lane][kSub * I + j] = lane >= j ? v : 0.f;
        } else {
          const int i = lane - kSub;
          sm.akk[kSub * I + i][kSub * I + j] = i > j ? v * sm.beta[kSub * I + i] : 0.f;
        }
      }
    }
    __syncthreads();  // ps is refilled by the next pair of sub-blocks
  }

  // ---- 3. off-diagonal blocks: 12 blocks x 2 halves of 8 columns, 3 per warp -----------------
#pragma unroll 1
  for (int job = warp; job < 24; job += 8) {
    const int blk = job >> 1, nh = job & 1, pr = blk % 6;
    const bool kk = blk >= 6;
    const int I = kPairI[pr], J = kPairJ[pr];
    float acc[4];
    offdiag(kk ? sm.lk[I - 1] : sm.lq[I - 1], sm.rb[pr], nh, lane, acc);
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = kSub * I + g + 8 * (e >> 1), j = kSub * J + 8 * nh + 2 * q + (e & 1);
      if (kk) {
        sm.akk[i][j] = acc[e] * sm.beta[i];
      } else {
        sm.aqk[i][j] = acc[e];
      }
    }
  }
  __syncthreads();

  // ---- 4. Tm = (I + Akk)^-1: diagonal inverses (fp32), Akk in f16 beside them ------------------
  SolveScratch& sv = sm.sv;
  if (tid < 4 * kSub) {
    const int I = tid >> 4, j = tid & (kSub - 1), o = kSub * I;
    float x[kSub];
#pragma unroll
    for (int i = 0; i < kSub; ++i) {
      float s = 0.f;
#pragma unroll
      for (int m = 0; m < i; ++m) s = fmaf(sm.akk[o + i][o + m], x[m], s);
      x[i] = i < j ? 0.f : (i == j ? 1.f : -s);
    }
#pragma unroll
    for (int i = 0; i < kSub; ++i) {
      sm.tm[o + i][o + j] = x[i];
      sv.th[I][i][j] = __float2half_rn(x[i]);
      sv.tt[o + j][o + i] = __float2half_rn(x[i]);
    }
  } else {
    // the six blocks I > J of Akk: 1536 elements over 192 threads, 8 consecutive each
    for (int e = 8 * (tid - 4 * kSub); e < 6 * kSub * kSub; e += 8 * (kThreads - 4 * kSub)) {
      const int pr = e >> 8, i = (e >> 4) & (kSub - 1), j0 = e & (kSub - 1);
      const int r = kSub * kPairI[pr] + i, c = kSub * kPairJ[pr] + j0;
#pragma unroll
      for (int u = 0; u < 8; u += 2)
        *reinterpret_cast<uint32_t*>(&sv.akh[r][c + u]) = ptx::pack_f16x2(sm.akk[r][c + u], sm.akk[r][c + u + 1]);
    }
  }
  __syncthreads();
  // three levels T_IJ = -T_II sum_{M=J..I-1} A_IM T_MJ (I - J = L), on mma m16n8k16 with f16
  // operands and fp32 sums (chunk64_model.solve64 "f16"): warp w of level L takes block
  // J = w / 2 and its 8 columns 8 (w % 2) ..; the sum is rounded to f16 as the next B operand
  {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll 1
    for (int L = 1; L < 4; ++L) {
      if (warp < 2 * (4 - L)) {
        const int J = warp >> 1, nh = warp & 1, I = J + L, n0 = kSub * J + 8 * nh;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int M = J; M < I; ++M) {
          const int r = kSub * I, c = kSub * M + 2 * q;
          ptx::mma_m16n8k16_f16(acc, *reinterpret_cast<const uint32_t*>(&sv.akh[r + g][c]),
                                *reinterpret_cast<const uint32_t*>(&sv.akh[r + g + 8][c]),
                                *reinterpret_cast<const uint32_t*>(&sv.akh[r + g][c + 8]),
                                *reinterpret_cast<const uint32_t*>(&sv.akh[r + g + 8][c + 8]),
                                *reinterpret_cast<const uint32_t*>(&sv.tt[n0 + g][c]),
                                *reinterpret_cast<const uint32_t*>(&sv.tt[n0 + g][c + 8]));
        }
        __half (&pw)[8][kSub + 8] = sv.pw[warp];
#pragma unroll
        for (int e = 0; e < 4; ++e) pw[2 * q + (e & 1)][g + 8 * (e >> 1)] = __float2half_rn(acc[e]);
        __syncwarp();
        float t[4] = {0.f, 0.f, 0.f, 0.f};
        ptx::mma_m16n8k16_f16(t, *reinterpret_cast<const uint32_t*>(&sv.th[I][g][2 * q]),
                              *reinterpret_cast<const uint32_t*>(&sv.th[I][g + 8][2 * q]),
                              *reinterpret_cast<const uint32_t*>(&sv.th[I][g][2 * q + 8]),
                              *reinterpret_cast<const uint32_t*>(&sv.th[I][g + 8][2 * q + 8]),
                              *reinterpret_cast<const uint32_t*>(&pw[g][2 * q]),
                              *reinterpret_cast<const uint32_t*>(&pw[g][2 * q + 8]));
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = kSub * I + g + 8 * (e >> 1), j = n0 + 2 * q + (e & 1);
          sm.tm[i][j] = -t[e];
          sv.tt[j][i] = __float2half_rn(-t[e]);
        }
      }
      __syncthreads();
    }
  }

  // ---- Tm Diag(beta) and Aqk in f16: thread = row tid / 4, 16 columns -------------------------
  {
    const int r = tid >> 2, c0 = 16 * (tid & 3);
    uint32_t t2[8], a2[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = c0 + 2 * e;
      const bool lower = (c >> 4) <= (r >> 4);  // blocks above the diagonal are 0 (not stored)
      t2[e] = lower ? ptx::pack_f16x2(sm.tm[r][c] * sm.beta[c], sm.tm[r][c + 1] * sm.beta[c + 1]) : 0u;
      a2[e] = lower ? ptx::pack_f16x2(sm.aqk[r][c], sm.aqk[r][c + 1]) : 0u;
    }
    uint4* tmb = reinterpret_cast<uint4*>(p.tmb + (chunk * kC + r) * kC + c0);
    uint4* aqk = reinterpret_cast<uint4*>(p.aqk + (chunk * kC + r) * kC + c0);
    tmb[0] = make_uint4(t2[0], t2[1], t2[2], t2[3]), tmb[1] = make_uint4(t2[4], t2[5], t2[6], t2[7]);
    aqk[0] = make_uint4(a2[0], a2[1], a2[2], a2[3]), aqk[1] = make_uint4(a2[4], a2[5], a2[6], a2[7]);
  }
}

}  // namespace kernrt::kda::c64p

extern "C" __global__ void __launch_bounds__(kernrt::kda::c64p::kThreads, 1)
    kda_chunk64_prep_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64PrepParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  kernrt::kda::c64p::prep64(p, *reinterpret_cast<kernrt::kda::c64p::PrepSmem*>(smem_raw));
}
