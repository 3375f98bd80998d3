// KDA 64-token chunk: prep v4, prep v3 (tag kda6-chunk64-preps-v2-v3) with the token code
// inside and its registers cut to two blocks per SM (kernels/kda/chunk64_prep4.md). Raw inputs in
// (Chunk64Prep4Params: bf16 q, k, raw bf16 g with A_log and dt_bias, fp32 effective beta;
// GVA), the state step's operands out as v3 (kq, kbt, tmb, aqk, gamma), with the numerics of
// validation/kda/chunk64_model.py tokens64 then prep64 (plan "f16"). A design entry, not the
// shipped forward and not a serving op.
//
// One block per (chunk, value head, sequence); 256 threads, thread = (sub-block I = warp / 2,
// channel pair cp = tid % 64) as v3. What differs from v3:
//   0. the raw stage: q, k, g of the chunk's 64 tokens by cp.async into shared memory (bf16
//      rows, zero past T), q, k re-read there whenever a pass needs them instead of held in
//      registers; beta by 64 threads;
//   1. the token code: the l2 norms' sums of squares as the diagonals of the sub-blocks'
//      Gram matrices q q^T, k k^T on tensor cores (one warp each, from the raw stage), the 64
//      scales 1 / sqrt(sum + 1e-6) (q's times scale) to shared memory beside dec's exchange;
//      the gate per element in log2 units, alpha = 2^(-A log2(1 + 2^((g + dt_bias) log2 e)))
//      (A = exp(A_log); 3 MUFU, no branch; alpha = 1 past T); only alpha (16 float2) stays
//      in registers until the diagonal rounds;
//   2. the channel pass streamed: q^, k^ formed from the raw stage per token in a forward
//      pass (la products) and a backward one (lb products); the diagonal rounds form them once
//      more from the raw stage; a sub-block off the tf32 path stages fp32 q^, k^, alpha for
//      the pairs (v3 read its fp32 inputs in place);
//   3. the off-diagonal mma, the diagonal mma, the solve: v3's code.
//
// Cost (static count of the executed path, validation/kda/sass_path.py): 17.5k warp
// instructions per chunk with the token code (first build 20.0k; v3 13.4k without it; v3 + the
// shipped token code ~23.1k); 128 registers, no spills (v3 255); 111968 bytes of shared memory:
// two blocks per SM. The diagonal operands round to tf32 to nearest even (cvt.rn.tf32.f32;
// chunk64_model.PREP4). kernels/kda/chunk64_prep4.md has the tables and what is left.
//
// Gate and beta forms (template parameters kGate, kBetaSigmoid of prep64, one entry each):
// the softplus gate exp(-exp(A_log) softplus(g + dt_bias)) or the bounded one
// exp(lower_bound sigmoid(exp(A_log) (g + dt_bias))) (kda-conv.md §1.3; FlashKDA's form), both
// in log2 units with 3 MUFU and the same static count (gate_alpha); beta effective or logits
// with sigmoid here (2 MUFU on 64 threads). Executed path (sass_path.py --entry, warp
// instructions per chunk): default 17,516, sigbeta 17,526, lbgate 17,548, lbgate_sigbeta
// 17,558 (18,264 .. 18,306 before the copies by row, the solve levels as templates, the packed
// inverse halves and the zeros by block row: chunk64_prep4.md; +4 when the pieces GDN's prep
// shares moved to chunk64_prep_shared.cuh); 128 registers, no spills, each.
//
// Entries: kda_chunk64_prep4_sm90a_f16_k128 (softplus, direct beta), _sigbeta_ (softplus,
// logits), _lbgate_ (bounded, direct), _lbgate_sigbeta_ (bounded, logits: FlashKDA's inputs),
// each `const __grid_constant__ Chunk64Prep4Params`, grid (NC, HV, N) dense or (slots, HV, 1) varlen, 256 threads,
// __launch_bounds__(256, 2). Not checked here: K = 128; HV a multiple of H; the buffers'
// extents; NC = ceil(T / 64); lower_bound in [-5, 0) (the generator's).
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk64_seqs.cuh"
#include "kda/chunk64_prep4_smem.cuh"
#include "kda/chunk64_prep_shared.cuh"
#include "kda/chunk_prep.cuh"

namespace kernrt::kda::c64p4 {

constexpr int kChunk64Prep4Smem = 111968;
static_assert(int(sizeof(Smem)) == kChunk64Prep4Smem, "kChunk64Prep4Smem is the layout");
static_assert(2 * (kChunk64Prep4Smem + 1024) <= 228 * 1024, "two blocks per SM (1 KiB reserved each)");
static_assert(sizeof(SolveTiles) <= sizeof(float) * 2 * 3 * kSub * kK, "solve tiles fit the scratch");
static_assert(kThreads == 4 * kC, "thread = (sub-block, channel pair)");
static_assert(offsetof(Smem, rs) % 16 == 0, "rs is read as float4 (two tokens' scales)");
static_assert(offsetof(SolveTiles, tt) % 16 == 0 && sizeof(__half) * (kC + 8) % 16 == 0,
              "a row of tt at a 16-byte multiple: the diagonal inverses' STS.128");

// The gate forms an entry takes (template parameter kGate of prep64, one entry each):
// kSoftplus: log decay -exp(A_log) softplus(g + dt_bias) (fla's default);
// kLowerBound: lower_bound sigmoid(exp(A_log) (g + dt_bias)), in [lower_bound, 0) (fla's
// lower_bound / safe_gate form, the one FlashKDA computes).
enum Gate : int { kSoftplus = 0, kLowerBound = 1 };

// alpha of one element in log2 units from z = g s + d (one FFMA; s, d per channel, once per
// thread: gate_coefs), x = g + dt_bias, A = exp(A_log), M the outer factor (0 past T):
//   kSoftplus:   exp(-A softplus(x)) = 2^(M log2(1 + 2^z)),  z = x log2 e, M = -A;
//                2^z = inf gives alpha = 0 (the limit);
//   kLowerBound: exp(lb sigmoid(A x)) = 2^(M / (1 + 2^z)),  z = -A x log2 e, M = lb log2 e;
//                2^z = inf gives M / inf = 0 (__fdividef: M rcp(y)), alpha = 1 (the limit).
// Both 3 MUFU, no branch; M = 0 gives exactly 1.
template <int kGate>
__device__ __forceinline__ float gate_alpha(float g, float s, float d, float M) {
  const float z = fmaf(g, s, d);
  if (kGate == kLowerBound) return exp2f(__fdividef(M, 1.f + exp2f(z)));
  return exp2f(M * __log2f(1.f + exp2f(z)));
}

// alpha of 16 tokens (2 channels each) from their raw g (the g stage's words of pair cp, row
// stride kK / 2); kTail: tokens t >= nl get M = 0, so alpha = 1 exactly (their g is the zero
// fill).
template <int kGate, bool kTail>
__device__ __forceinline__ void token_alphas(const uint32_t* gw, int nl, float gs, float2 gd, float M,
                                             float2 (&a)[kSub]) {
#pragma unroll
  for (int t = 0; t < kSub; ++t) {
    const float Mt = (!kTail || t < nl) ? M : 0.f;
    const float2 gv = bf2(gw[t * (kK / 2)]);
    a[t] = make_float2(gate_alpha<kGate>(gv.x, gs, gd.x, Mt), gate_alpha<kGate>(gv.y, gs, gd.y, Mt));
  }
}

// (k b)^T rows c0, c0 + 1 of thread (sub-block I, channel pair cp): f16 pairs along the tokens
// 16 I .. 16 I + 15, 32 bytes a row, staged in shared memory (KbtStage) and written by kbt_out as
// whole 512-byte runs: straight to global they were 16-byte pieces of 32 rows per store
// instruction, a partial sector each. One process, bit-identical (kda_profile.py variants, call
// k2 at cdb3734): KDA B8 T4096 V128 673.0 -> 654.5 us, V256 899.4 -> 881.6, B1 T32768 CP 960.4
// -> 949.5; GDN B1 T32768 CP 841.1 -> 826.7, B8 T4096 549.4 -> 525.9 (ncu had GDN's prep at 82 %
// of L2 throughput with DRAM at 53 %).
struct KbtStage {  // 16-byte chunk j of row c at j ^ ((c / 2) % 8): rows 2 cp of a warp on 8 chunks
  uint4 w[kK][kC / 8];
};
static_assert(sizeof(KbtStage) == 16384, "(k b)^T of one chunk");
__device__ __forceinline__ void kbt_rows(KbtStage& ks, int c0, int I, int cp,
                                         const uint32_t (&kbx)[kSub / 2], const uint32_t (&kby)[kSub / 2]) {
  const int x = cp & 7;
  ks.w[c0][(2 * I) ^ x] = make_uint4(kbx[0], kbx[1], kbx[2], kbx[3]);
  ks.w[c0][(2 * I + 1) ^ x] = make_uint4(kbx[4], kbx[5], kbx[6], kbx[7]);
  ks.w[c0 + 1][(2 * I) ^ x] = make_uint4(kby[0], kby[1], kby[2], kby[3]);
  ks.w[c0 + 1][(2 * I + 1) ^ x] = make_uint4(kby[4], kby[5], kby[6], kby[7]);
}
// The staged (k b)^T to the chunk's kbt (16 KiB contiguous) by threads t .. of n: 16-byte word
// i = 8 c + j of row c from its swizzled place. Visible before it: every kbt_rows of the chunk.
__device__ __forceinline__ void kbt_out(__half* kbt, const KbtStage& ks, int t, int n) {
  uint4* dst = reinterpret_cast<uint4*>(kbt);
  for (int i = t; i < kK * kC / 8; i += n) {
    const int c = i >> 3, j = i & 7;
    dst[i] = ks.w[c][j ^ ((c >> 1) & 7)];
  }
}

// (k b)^T staged over the g stage (dead after the gate; 16 KiB, KbtStage above)
// and written by warps 6, 7 beside the zero blocks while warps 0..5 take the off-diagonal pairs
// (before round 1 of the diagonal blocks puts its B tiles there).
__device__ __forceinline__ KbtStage* kbt_over_g(Smem& sm) {
  static_assert(sizeof(sm.rg) == sizeof(KbtStage), "(k b)^T fits the g stage");
  return reinterpret_cast<KbtStage*>(&sm.rg[0][0]);
}

// Step 1 after the exchanges, for sub-block kI (a template: no per-token conditions, no
// factors of 1): gamma (kI = 0), a = A_I la and b = B_I lb; k a, q a rows of kq (to global) and
// (k b)^T rows of kbt (staged: kbt_rows) in f16x2 packs; q la, k la (kI >= 1) and k lb D (kI <=
// 2, the pairs with J = kI) into the tiles. q^, k^ are formed per token from the raw stage and the
// scales rs (the forward pass for la, the backward pass re-forms k^ for lb).
template <int kI>
__device__ __forceinline__ void channel_pass(const Chunk64Prep4Params& p, Smem& sm, int64_t chunk,
                                             int cp, const float2* rs, const float2 (&a)[kSub]) {
  const int c0 = 2 * cp, r0 = kSub * kI;
  const float2 d0 = sm.dec[0][cp], d1 = sm.dec[1][cp], d2 = sm.dec[2][cp], d3 = sm.dec[3][cp];
  if (kI == 0)
    *reinterpret_cast<float2*>(p.gamma + chunk * kK + c0) = mul2(mul2(mul2(d0, d1), d2), d3);
  const float2 AI = kI == 1 ? d0 : (kI == 2 ? mul2(d0, d1) : mul2(mul2(d0, d1), d2));
  const float2 BI = kI == 2 ? d3 : (kI == 1 ? mul2(d3, d2) : mul2(mul2(d3, d2), d1));
  __half* kq = p.kq + chunk * 2 * kC * kK + r0 * kK + c0;
  float2 la = make_float2(1.f, 1.f), k[kSub];  // k^ held for the backward pass
  float4 r2;  // rs of a token pair: one LDS.128 per two tokens
#pragma unroll
  for (int t = 0; t < kSub; ++t) {
    la = mul2(la, a[t]);
    if ((t & 1) == 0) r2 = reinterpret_cast<const float4*>(rs)[t / 2];  // scales of tokens t, t + 1
    const float2 r = (t & 1) ? make_float2(r2.z, r2.w) : make_float2(r2.x, r2.y);
    const float2 q = scl2(bf2(sm.rq[r0 + t][cp]), r.x);
    k[t] = scl2(bf2(sm.rk[r0 + t][cp]), r.y);
    const float2 kl = mul2(k[t], la), ql = mul2(q, la);
    if (kI == 0) {
      stg_h2(kq + t * kK, kl.x, kl.y);
      stg_h2(kq + (kC + t) * kK, ql.x, ql.y);
    } else {
      stg_h2(&sm.tiles[kI - 1][swz_h(t, c0)], ql.x, ql.y);
      stg_h2(&sm.tiles[2 + kI][swz_h(t, c0)], kl.x, kl.y);
      stg_h2(kq + t * kK, kl.x * AI.x, kl.y * AI.y);
      stg_h2(kq + (kC + t) * kK, ql.x * AI.x, ql.y * AI.y);
    }
  }
  const float2 d21 = mul2(d2, d1);
  uint32_t kbx[kSub / 2], kby[kSub / 2];
  float2 run = make_float2(1.f, 1.f), prev = run;
#pragma unroll
  for (int t = kSub - 1; t >= 0; --t) {
    const float2 klb = mul2(k[t], run);  // lb_t = run
    const float2 kb = kI == 3 ? klb : mul2(klb, BI);
    if ((t & 1) == 0) kbx[t / 2] = ptx::pack_f16x2(kb.x, prev.x), kby[t / 2] = ptx::pack_f16x2(kb.y, prev.y);
    prev = kb;
    const int o = swz_h(t, c0);
    if (kI <= 2) stg_h2(&sm.tiles[6 + kI][o], klb.x, klb.y);
    if (kI == 0) {
      stg_h2(&sm.tiles[6 + 3][o], klb.x * d1.x, klb.y * d1.y);
      stg_h2(&sm.tiles[6 + 5][o], klb.x * d21.x, klb.y * d21.y);
    }
    if (kI == 1) stg_h2(&sm.tiles[6 + 4][o], klb.x * d2.x, klb.y * d2.y);
    if (t > 0) run = mul2(run, a[t]);
  }
  kbt_rows(*kbt_over_g(sm), c0, kI, cp, kbx, kby);
}

// Step 0: the cp.async of the chunk's q, k (head h) and g (value head hv) rows into the raw
// stage. q, k: thread tid copies row tid / 4, 16-byte chunks tid % 4 + 4 j (j = 0..3): one
// 64-bit source address per tensor, the four copies at immediate offsets (+64 j bytes on both
// sides; a warp's copy j covers 8 rows x 64 bytes: whole sectors, and on the 272-byte rows 4
// shared wavefronts, the minimum). g: chunk tid % 16 of rows tid / 16 + 16 u (its 256-byte
// rows would put the 8 rows of the q, k map on the same 16 banks). kTail: rows t >= live are
// zero-filled (source address clamped to the tensor's start, no byte read).

template <bool kTail>
__device__ __forceinline__ void raw_stage(const Chunk64Prep4Params& p, Smem& sm, int tid, int64_t row0,
                                          int h, int hv, int HV, int live) {
  // 64-bit bases of the chunk's token 0 (per block), 32-bit offsets from them: a row offset
  // t HV K + c < 64 HV K fits while HV <= 65535 (gridDim.y)
  qk_stage<kTail>(p, sm, tid, row0, h, live);
  const int t0 = tid >> 4, c = 8 * (tid & 15);  // g: rows t0 + 16 u, chunk tid % 16
  const uint16_t* gb = p.g + (row0 * HV + hv) * kK;
  const int g0 = t0 * (HV * kK) + c, gstep = kSub * HV * kK;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int t = t0 + kSub * u;
    const bool ok = !kTail || t < live;
    ptx::cp_async_cg_16_zfill(&sm.rg[t][c / 2], gb + (ok ? g0 + u * gstep : 0), ok ? 16 : 0);
  }
}

// The diagonal rounds' range vote (step 3): whether every factor of a sub-block's tf32 path,
// the products of its alphas from token 7, stays >= 1e-30, per sub-block and warp into sm.safe.
// It reads alpha alone, so every warp takes it after the channel pass, before that phase's
// barrier, and the rounds need no barrier of their own for it: one process (call h6), against
// each round voting first, B8 T4096 V128 707.4 -> 698.7 us, FlashKDA's form 707.2 -> 699.4, V256
// 926.1 -> 917.2, B1 T32768 CP 999.1 -> 989.8. (Beside the gate it grew the channel pass by ~200
// warp instructions a chunk at 128 registers; after the pass the count is the rounds' own.)
__device__ __forceinline__ void range_vote(Smem& sm, const float2 (&a)[kSub], int I, int warp, int lane) {
  constexpr int kRef = 7;
  float2 P = make_float2(1.f, 1.f), F = P;
#pragma unroll
  for (int t = kRef - 1; t >= 0; --t) P = mul2(P, a[t + 1]);
#pragma unroll
  for (int t = kRef + 1; t < kSub; ++t) F = mul2(F, a[t]);
  const bool ok = P.x >= 1e-30f && P.y >= 1e-30f && F.x >= 1e-30f && F.y >= 1e-30f;
  const bool wok = __all_sync(0xffffffffu, ok);
  if (lane == 0) sm.safe[I][warp & 1] = wok;
}

// One 16 x 8 tile of a diagonal block on tf32 mma: A a 16-row fp32 tile, B an 8-row one (rows
// of 128 channels, swz_f); v[e] = acc0 + acc1 with channels 16 s .. + 7 in acc0 and 16 s + 8 ..
// + 15 in acc1 (the rounds' order: the same bits wherever the tiles lie).
__device__ __forceinline__ void diag_tile(const float* A, const float* B, int lane, float (&v)[4]) {
  const int ar = 8 * ((lane >> 3) & 1) + (lane & 7), ach = lane >> 4;
  const int br = lane & 7, bch = lane >> 3;
  // step s = 2 u + v reads channels 16 s + 4 ch (+ 8) at swz_f = row * 128 + 32 u +
  // ((16 v + 4 ch) ^ 4 (row % 8)): byte addresses per (v, half), + 128 u as immediates.
  // 16 v + 8 h and 4 ch are disjoint bits, so the column is c00 ^ (16 v + 8 h) with c00 that
  // of (v, h) = (0, 0): one XOR and one add per address
  const int ca = (4 * ach) ^ ((ar & 7) << 2), cb = (4 * bch) ^ (br << 2);
  const uint32_t a0 = smem_u32(A + ar * kK), b0 = smem_u32(B + br * kK);
  uint32_t pa[2][2], pb[2];
#pragma unroll
  for (int v = 0; v < 2; ++v) {
#pragma unroll
    for (int h = 0; h < 2; ++h) pa[v][h] = a0 + 4 * (ca ^ (16 * v + 8 * h));
    pb[v] = b0 + 4 * (cb ^ (16 * v));
  }
  float acc[2][4] = {};
#pragma unroll
  for (int s = 0; s < kK / 16; ++s) {
    uint32_t fb[4], fa0[4], fa1[4];
    const uint32_t u = 128 * (s >> 1);
    ptx::ldmatrix_x4(fb[0], fb[1], fb[2], fb[3], pb[s & 1] + u);
    ptx::ldmatrix_x4(fa0[0], fa0[1], fa0[2], fa0[3], pa[s & 1][0] + u);
    ptx::ldmatrix_x4(fa1[0], fa1[1], fa1[2], fa1[3], pa[s & 1][1] + u);
    ptx::mma_m16n8k8_tf32(acc[0], fa0[0], fa0[1], fa0[2], fa0[3], fb[0], fb[1]);
    ptx::mma_m16n8k8_tf32(acc[1], fa1[0], fa1[1], fa1[2], fa1[3], fb[2], fb[3]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = acc[0][e] + acc[1][e];
}

// stage_half<kH>: tokens t of half kH to rows t % 8 of the tiles qt (q f), kt (k f), it (k / f),
// f relative to token 7 (the rounds by sub-block pairs pass their 16-row tiles' halves).
template <int kH>
__device__ __forceinline__ void stage_half(Smem& sm, int I, int cp, const float2* rs, const float2 (&a)[kSub],
                                           float* qt, float* kt, float* it) {
  constexpr int kRef = 7;
  const int c0 = 2 * cp, r0 = kSub * I;
  const float2 one = make_float2(1.f, 1.f);
  float2 P = one;  // the running product: down from token 7 (kH = 0) or up from token 8 (kH = 1)
  float4 r2;       // rs of the token pair (2 (t / 2), + 1), loaded at the pair's first token
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int t = kH == 0 ? kRef - i : 8 + i;
    if ((t & 1) == (kH == 0 ? 1 : 0)) r2 = reinterpret_cast<const float4*>(rs)[t / 2];
    const float2 r = (t & 1) ? make_float2(r2.z, r2.w) : make_float2(r2.x, r2.y);
    float2 f = one, inv = one;
    if (t < kRef) {
      P = mul2(P, a[t + 1]), inv = P;
      f = make_float2(__fdividef(1.f, P.x), __fdividef(1.f, P.y));
    } else if (t > kRef) {
      P = mul2(P, a[t]), f = P;
      inv = make_float2(__fdividef(1.f, P.x), __fdividef(1.f, P.y));
    }
    const float2 q = scl2(bf2(sm.rq[r0 + t][cp]), r.x), k = scl2(bf2(sm.rk[r0 + t][cp]), r.y);
    const int o = swz_f(t & 7, c0);
    *reinterpret_cast<float2*>(qt + o) = make_float2(tf32_rn(q.x * f.x), tf32_rn(q.y * f.y));
    *reinterpret_cast<float2*>(kt + o) = make_float2(tf32_rn(k.x * f.x), tf32_rn(k.y * f.y));
    *reinterpret_cast<float2*>(it + o) = make_float2(tf32_rn(k.x * inv.x), tf32_rn(k.y * inv.y));
  }
}

// A tile's row g: token i = i0 + g of sub-block Is, q's (v0, v1) to aqk, k's (v2, v3) times
// beta_i to akd, at columns j0 + 2 qd, + 1 (the lower triangle; aqk's upper part 0).
__device__ __forceinline__ void halves_store(Smem& sm, __half* aqk, int Is, int i0, int j0, int lane,
                                             const float (&v)[4]) {
  const int o = kSub * Is, i = i0 + (lane >> 2), j = j0 + 2 * (lane & 3);
  stg_h2(aqk + (o + i) * kC + o + j, i >= j ? v[0] : 0.f, i >= j + 1 ? v[1] : 0.f);
  const float b = sm.beta[o + i];
  sm.akd[Is][i * kSub + j] = i > j ? v[2] * b : 0.f;
  sm.akd[Is][i * kSub + j + 1] = i > j + 1 ? v[3] * b : 0.f;
}

template <int kGate, bool kBetaSigmoid>
__device__ void prep64(const Chunk64Prep4Params& p, Smem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int I = warp >> 1, cp = tid & (kC - 1), c0 = 2 * cp;
  const int g = lane >> 2, qd = lane & 3;
  const int hv = blockIdx.y, HV = gridDim.y;
  // h = hv / group in fp32 (the integer division was ~28 instructions): (hv + 1/2) / group is
  // at least 1 / (2 group) from an integer and at most H; __fdividef's error (relative
  // < 2^-21) moves it by less than H 2^-21 <= 1 / (2 group) while HV = H group <= 2^20
  // (gridDim.y <= 65535), so the truncation is exact (test_chunk64_prep4_layout)
  const int h = int(__fdividef(float(hv) + 0.5f, float(p.group)));
  // PDL, then the chunk (chunk64_seqs.cuh): live = its tokens before the sequence's end
  c64::PrepChunk pc;
  if (!c64::prep_block_chunk(p, hv, HV, lane, pc)) return;
  const int live = pc.live;
  const int64_t row0 = pc.row0, chunk = pc.slot;
  __half* aqk = p.aqk + chunk * kC * kC;
  __half* tmb = p.tmb + chunk * kC * kC;

  // ---- 0. raw stage: q, k, g rows (16 chunks of 16 bytes each) by cp.async, zero past T -----
  // (g through shared memory: 4 cp.async and 16 LDS per thread instead of 16 LDG with a 64-bit
  // address each); a chunk with tokens past T (block-uniform) takes the masked copy
  if (live >= kC) raw_stage<false>(p, sm, tid, row0, h, hv, HV, live);
  else raw_stage<true>(p, sm, tid, row0, h, hv, HV, live);
  ptx::cp_async_commit_group();
  if (tid < kC) {  // kBetaSigmoid: beta logits, beta = 1 / (1 + 2^(-x log2 e)) (2 MUFU); 0 past T
    const int64_t i = (row0 + tid) * HV + hv;
    const float x = tid < live ? c64::token_scalar(p.beta, i, p.flags & kPrepBetaBf16) : 0.f;
    sm.beta[tid] = !kBetaSigmoid ? x : (tid < live ? __fdividef(1.f, 1.f + exp2f(-x * kLog2e)) : 0.f);
  }
  const int nl = live - kSub * I;  // tokens of the sub-block before T (>= 16: all)
  const float2 dtl = scl2(*reinterpret_cast<const float2*>(p.dt_bias + hv * kK + c0), kLog2e);
  const float A = __expf(p.a_log[hv]);
  // gate_alpha's coefficients: z = g gs + gd, outer factor M
  const float gs = kGate == kLowerBound ? -A * kLog2e : kLog2e;
  const float2 gd = kGate == kLowerBound ? scl2(dtl, -A) : dtl;
  const float M = kGate == kLowerBound ? p.lower_bound * kLog2e : -A;
  ptx::cp_async_wait_group<0>();
  __syncthreads();

  // ---- 1. token code: the l2 scales from the Gram diagonals (chunk64_prep_shared.cuh), then
  // the gate per element
  gram_norms(sm, p.scale, I, warp, lane);
  float2 a[kSub];  // a sub-block past T (warp-uniform) takes the masked copy
  if (nl >= kSub) token_alphas<kGate, false>(&sm.rg[kSub * I][cp], nl, gs, gd, M, a);
  else token_alphas<kGate, true>(&sm.rg[kSub * I][cp], nl, gs, gd, M, a);
  {
    float2 dec = make_float2(1.f, 1.f);
#pragma unroll
    for (int t = 0; t < kSub; ++t) dec = mul2(dec, a[t]);
    sm.dec[I][cp] = dec;
  }
  __syncthreads();
  const float2* rs = sm.rs + kSub * I;
  switch (I) {  // warp-uniform: each warp runs the straight-line pass of its sub-block
    case 0: channel_pass<0>(p, sm, chunk, cp, rs, a); break;
    case 1: channel_pass<1>(p, sm, chunk, cp, rs, a); break;
    case 2: channel_pass<2>(p, sm, chunk, cp, rs, a); break;
    default: channel_pass<3>(p, sm, chunk, cp, rs, a); break;
  }
  range_vote(sm, a, I, warp, lane);
  __syncthreads();

  // ---- 2. off-diagonal pairs: warp p < 6 takes pair p, Aqk and Akk (both 16 x 16) ------------
  if (warp < 6) {
    const int pI = pair_i(warp), pJ = pair_j(warp);
    const __half* Aq = sm.tiles[pI - 1];
    const __half* B = sm.tiles[6 + warp];
    float aq[2][4] = {}, ak[2][4] = {};
    const int ar = 8 * ((lane >> 3) & 1) + (lane & 7), ach = lane >> 4;        // A: (row, chunk)
    const int br = 8 * (lane >> 4) + (lane & 7), bch = (lane >> 3) & 1;        // B
    // k-step ks = 4 u + v reads channel 16 ks + 8 ch of its row at swz_h = row * 128 +
    // 64 u + ((16 v + 8 ch) ^ 8 (row % 8)): four byte addresses per operand, + 128 u as
    // immediates (the XOR formed per step was ~1/3 of this phase's instructions)
    // (16 v and 8 ch are disjoint bits: the column is c0 ^ 16 v, one XOR and one add each)
    const int ca = (8 * ach) ^ ((ar & 7) << 3), cb = (8 * bch) ^ ((br & 7) << 3);
    const uint32_t sa = smem_u32(Aq + ar * kK), sb = smem_u32(B + br * kK);
    uint32_t pa[4], pb[4];
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      pa[v] = sa + 2 * (ca ^ (16 * v));
      pb[v] = sb + 2 * (cb ^ (16 * v));
    }
    constexpr uint32_t kQk = 3 * kSub * kK * 2;  // bytes from tile q la (I) to tile k la (I)
    static_assert(kQk == sizeof(sm.tiles[0]) * 3, "tiles 2 + I and I - 1 are 3 tiles apart");
#pragma unroll
    for (int ks = 0; ks < kK / 16; ++ks) {
      uint32_t fq[4], fk[4], fb[4];
      const uint32_t u = 128 * (ks >> 2);
      ptx::ldmatrix_x4(fq[0], fq[1], fq[2], fq[3], pa[ks & 3] + u);
      ptx::ldmatrix_x4(fk[0], fk[1], fk[2], fk[3], pa[ks & 3] + kQk + u);
      ptx::ldmatrix_x4(fb[0], fb[1], fb[2], fb[3], pb[ks & 3] + u);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        ptx::mma_m16n8k16_f16(aq[nt], fq[0], fq[1], fq[2], fq[3], fb[2 * nt], fb[2 * nt + 1]);
        ptx::mma_m16n8k16_f16(ak[nt], fk[0], fk[1], fk[2], fk[3], fb[2 * nt], fb[2 * nt + 1]);
      }
    }
    const float b0 = sm.beta[kSub * pI + g], b1 = sm.beta[kSub * pI + g + 8];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int j = 8 * nt + 2 * qd;
      stg_h2(aqk + (kSub * pI + g) * kC + kSub * pJ + j, aq[nt][0], aq[nt][1]);
      stg_h2(aqk + (kSub * pI + g + 8) * kC + kSub * pJ + j, aq[nt][2], aq[nt][3]);
      stg_h2(&sm.akh[warp][g][j], ak[nt][0] * b0, ak[nt][1] * b0);
      stg_h2(&sm.akh[warp][g + 8][j], ak[nt][2] * b1, ak[nt][3] * b1);
    }
  } else {
    // the upper blocks (I < J) of aqk and tmb are 0 (warps 6, 7)
    zero_upper(aqk, tmb, warp - 6, lane);
    kbt_out(p.kbt + chunk * kK * kC, *kbt_over_g(sm), tid - 6 * 32, 2 * 32);
  }
  __syncthreads();  // the tiles are dead: the diagonal operands go over them

  // ---- 3. diagonal blocks: by token halves (every sub-block tf32), else sub-blocks
  // 2r, 2r + 1 per round. By token halves (call i2: 4 % of a prefill), round h stages tokens 8 h
  // .. 8 h + 7 of every sub-block on all 8 warps (each its own sub-block and channel half) into
  // a 16-row A tile (q f rows 0..7, k f rows 8..15) and an 8-row k / f B tile. Round 0's
  // products are the blocks' upper-left 8 x 8 (tokens 0..7 with 0..7, warps 0..3), round 1's
  // rows 8..15 against columns 0..7 (round 0's B tiles) and 8..15 (warps 0..7): the operands,
  // products and sums of the rounds by sub-block pairs, so the same bits, with 8 tokens staged
  // on every warp a round instead of 16 on half of them (that barrier's wait was 9 % of the
  // prep's stall samples, call i1). Tiles: the 4 A tiles and round 0's B tiles over the staging
  // union, round 1's B tiles over the g stage (dead since the gate).
  bool all_tf32 = true;
#pragma unroll
  for (int s = 0; s < 4; ++s) all_tf32 = all_tf32 && sm.safe[s][0] && sm.safe[s][1];
  if (all_tf32) {
    float* const aop = sm.stg[0][0];                              // 4 A tiles of 16 rows
    float* const kinv0 = aop + 4 * kSub * kK;                     // 4 B tiles of 8 rows, round 0
    float* const kinv1 = reinterpret_cast<float*>(&sm.rg[0][0]);  // round 1 (g is dead)
    static_assert(sizeof(sm.stg) == sizeof(float) * (4 * kSub + 4 * 8) * kK, "round 0 fits the union");
    static_assert(sizeof(sm.rg) == sizeof(float) * 4 * 8 * kK, "round 1's B tiles fit the g stage");
#pragma unroll 1
    for (int h = 0; h < 2; ++h) {
      float* const at = aop + kSub * kK * I;
      if (h == 0) stage_half<0>(sm, I, cp, rs, a, at, at + 8 * kK, kinv0 + 8 * kK * I);
      else stage_half<1>(sm, I, cp, rs, a, at, at + 8 * kK, kinv1 + 8 * kK * I);
      __syncthreads();
      const int Is = h ? warp >> 1 : warp, nt = h ? warp & 1 : 0;
      if (h || warp < 4) {
        float v[4];
        diag_tile(aop + kSub * kK * Is, (nt ? kinv1 : kinv0) + 8 * kK * Is, lane, v);
        halves_store(sm, aqk, Is, 8 * h, 8 * nt, lane, v);
      } else if (warp == 4) {  // aqk's diagonal blocks: the upper-right 8 x 8 is 0
        const int sb = lane >> 3, row = lane & 7;
        *reinterpret_cast<uint4*>(aqk + (kSub * sb + row) * kC + kSub * sb + 8) = make_uint4(0u, 0u, 0u, 0u);
      }
      __syncthreads();  // round 1 stages over the A tiles; the solve writes over the union
    }
  } else {
#pragma unroll 1
    for (int r = 0; r < 2; ++r) {
      if ((I >> 1) == r) {  // the round's sub-blocks stage on their own warps
        float* st = sm.stg[I & 1][0];
        const int r0 = kSub * I;
        if (sm.safe[I][0] && sm.safe[I][1]) {  // tf32 q f, k f, k / f, f relative to token 7
          stage_half<0>(sm, I, cp, rs, a, st, st + kSub * kK, st + 2 * kSub * kK);
          stage_half<1>(sm, I, cp, rs, a, st + 8 * kK, st + (kSub + 8) * kK, st + (2 * kSub + 8) * kK);
        } else {  // fp32 q^, k^, alpha rows (row stride K, unswizzled) for the pairs
#pragma unroll
          for (int t = 0; t < kSub; ++t) {
            const float2 q = scl2(bf2(sm.rq[r0 + t][cp]), rs[t].x), k = scl2(bf2(sm.rk[r0 + t][cp]), rs[t].y);
            *reinterpret_cast<float2*>(st + t * kK + c0) = q;
            *reinterpret_cast<float2*>(st + kSub * kK + t * kK + c0) = k;
            *reinterpret_cast<float2*>(st + 2 * kSub * kK + t * kK + c0) = a[t];
          }
        }
      }
      __syncthreads();
      const int sl = warp >> 2, Is = 2 * r + sl, o = kSub * Is;
      if (sm.safe[Is][0] && sm.safe[Is][1]) {  // uniform over the 4 warps of sub-block Is
        const bool kk = (warp >> 1) & 1;
        const int nt = warp & 1, j = 8 * nt + 2 * qd;
        float v[4];
        diag_tile(sm.stg[sl][kk ? 1 : 0], sm.stg[sl][2] + 8 * nt * kK, lane, v);
        if (!kk) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int i = g + 8 * h;
            stg_h2(aqk + (o + i) * kC + o + j, i >= j ? v[2 * h] : 0.f, i >= j + 1 ? v[2 * h + 1] : 0.f);
          }
        } else {  // Akk rows
          const float bi[2] = {sm.beta[o + g], sm.beta[o + g + 8]};  // rows g, g + 8
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = g + 8 * (e >> 1), jj = j + (e & 1);
            sm.akd[Is][i * kSub + jj] = i > jj ? v[e] * bi[e >> 1] : 0.f;
          }
        }
      } else {  // the fp32 pairs from the staged tokens, columns {w, 7 - w, 8 + w, 15 - w}
        const int w4 = warp & 3;
#pragma unroll 1
        for (int jj = 0; jj < 4; ++jj) {
          const int j = (jj & 2 ? 8 : 0) + (jj & 1 ? 7 - w4 : w4);
          const float v = pair_column(sm.stg[sl][0], sm.stg[sl][1], sm.stg[sl][2], j, lane);
          if (lane < kSub) {
            aqk[(o + lane) * kC + o + j] = __float2half_rn(lane >= j ? v : 0.f);
          } else {
            const int i = lane - kSub;
            sm.akd[Is][i * kSub + j] = i > j ? v * sm.beta[o + i] : 0.f;
          }
        }
      }
      __syncthreads();  // the next round (or the solve) writes over the operands
    }
  }

  // ---- 4. Tm = (I + Akk)^-1: diagonal inverses in fp32, then three levels on mma ------------
  if (tid < 4 * kSub) solve_diag(sm, tmb, tid);
  __syncthreads();
  // T_IJ = -T_II sum_{M=J..I-1} A_IM T_MJ (I - J = L): level L on warps 0 .. 2 (4 - L) - 1
  if (warp < 6)
    solve_level<1>(sm, tmb, warp, lane);
  __syncthreads();
  if (warp < 4)
    solve_level<2>(sm, tmb, warp, lane);
  __syncthreads();
  if (warp < 2)
    solve_level<3>(sm, tmb, warp, lane);
}

}  // namespace kernrt::kda::c64p4

namespace kernrt::kda::c64p4 {
template <int kGate, bool kBetaSigmoid>
__device__ __forceinline__ void entry(const Chunk64Prep4Params& p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  prep64<kGate, kBetaSigmoid>(p, *reinterpret_cast<Smem*>(smem_raw));
}
}  // namespace kernrt::kda::c64p4

// One entry per (gate, beta) form; the generator selects it (kernrt.gen.kda_chunk64 PREP4_ENTRIES).
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64p4::kThreads, 2)
    kda_chunk64_prep4_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64Prep4Params p) {
  kernrt::kda::c64p4::entry<kernrt::kda::c64p4::kSoftplus, false>(p);
}
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64p4::kThreads, 2)
    kda_chunk64_prep4_sigbeta_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64Prep4Params p) {
  kernrt::kda::c64p4::entry<kernrt::kda::c64p4::kSoftplus, true>(p);
}
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64p4::kThreads, 2)
    kda_chunk64_prep4_lbgate_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64Prep4Params p) {
  kernrt::kda::c64p4::entry<kernrt::kda::c64p4::kLowerBound, false>(p);
}
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64p4::kThreads, 2)
    kda_chunk64_prep4_lbgate_sigbeta_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64Prep4Params p) {
  kernrt::kda::c64p4::entry<kernrt::kda::c64p4::kLowerBound, true>(p);
}
