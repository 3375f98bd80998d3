// Token preparation of the KDA / GDN token steps (kda_step.cu): the global loads of a block's
// tokens (q, k, g, beta, dt_bias, A_log), the gate, beta sigmoid, l2norm and scale computed
// once per block into shared memory (StepSmem), verify's replay record written from there,
// and commit's staging of the record back into the same shared layout. The layouts and the
// arithmetic here fix the bits of every prepared token: decode and verify prepare through
// this code, so the k-hat, alpha and beta that verify records are the ones a decode step
// computes (commit(a) = a decode steps, bit for bit, checks.py). decode may spread the decays
// over the block (kSplit: a thread a channel): a decay is elementwise, so its bits do not
// depend on which thread computes it; the norms keep the 16-lane layout in every mode.
//
// Not checked here: K = 128 (the thread layouts assume kStepThreads = K = 8 x 16 channels),
// steps <= kMaxSteps, alignment of the inputs (16 bytes for a row of 8 channels).
#pragma once

#include "common/ptx/ldst.cuh"
#include "kda/kda_vec.cuh"
#include "kda/params.h"

namespace kernrt::kda {

static_assert(kStepThreads == kHeadDim, "kSplit: a thread per key channel");

// The prepared tokens of one block (decode: 1, verify: up to kMaxSteps), shared by its 16
// lane groups: normalized and scaled q, normalized k, alpha, effective beta and k.q.
template <bool kKda>
struct StepSmem {
  float q[kMaxSteps][kHeadDim];
  float k[kMaxSteps][kHeadDim];
  float a[kMaxSteps][kKda ? kHeadDim : 1];
  float beta[kMaxSteps];
  float kq[kMaxSteps];
};

// Sum over the 16 lanes of this half warp (butterfly: every lane ends with the same bits).
// The mask names the half only: the other half may have left (a token past `steps`).
__device__ __forceinline__ float group16_sum(float x) {
  const unsigned half = (threadIdx.x & 16) != 0 ? 0xffff0000u : 0x0000ffffu;
#pragma unroll
  for (int w = 1; w < 16; w <<= 1) x += __shfl_xor_sync(half, x, w);
  return x;
}

// The global inputs of one thread's share of the token preparation (below), loaded before the
// state rows so that they arrive first and the preparation overlaps the state's latency
// (decode: the preparation's chain after its loads was on every block's critical path).
struct TokenLoads {
  uint4 q, k;                  // bf16 x 8
  uint4 g0, g1;                // KDA: f32 x 8 (g0, g1) or bf16 x 8 (g0); GDN: g0.x
  float dtb[8];
  float braw, A;
};

// Thread i loads token i / 16, key channels 8 (i % 16) .. + 7; threads of tokens >= steps
// load nothing (whole half warps). kSplit (KDA decode, one token): every thread also loads g
// and dt_bias of key channel i (in g0.x as f32 bits, dtb[0]) for its decay, and the token's
// threads skip their 8 channels of them.
template <bool kKda, bool kSplit = false>
__device__ __forceinline__ void load_token_inputs(const KdaStepParams& p, int n, int steps, int h,
                                                  int hv, TokenLoads& in) {
  static_assert(kKda || !kSplit, "kSplit spreads per-channel decays");
  const int t = threadIdx.x >> 4, c0 = 8 * (threadIdx.x & 15);
  in.g0 = in.g1 = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int i = 0; i < 8; ++i) in.dtb[i] = 0.f;
  in.A = 1.f, in.braw = 0.f;
  if constexpr (kSplit) {
    const bool gate = (p.flags & kFlagGate) != 0;
    if (gate && p.A_log != nullptr) in.A = p.A_log[hv];
    const int64_t e = n * p.g_stride_seq + int64_t(hv) * kHeadDim + threadIdx.x;
    in.g0.x = __float_as_uint(load1(p.g, e, (p.flags & kFlagGF32) != 0));
    if (gate && p.dt_bias != nullptr) in.dtb[0] = p.dt_bias[hv * kHeadDim + threadIdx.x];
  }
  if (t >= steps) return;
  const int64_t qk = n * p.qk_stride_seq + t * p.qk_stride_tok + int64_t(h) * kHeadDim + c0;
  in.q = ptx::ld_global_nc_v4(static_cast<const uint16_t*>(p.q) + qk);
  in.k = ptx::ld_global_nc_v4(static_cast<const uint16_t*>(p.k) + qk);
  const int64_t gb = n * p.g_stride_seq + t * p.g_stride_tok;
  const bool gf32 = (p.flags & kFlagGF32) != 0;
  const bool gate = (p.flags & kFlagGate) != 0;
  if (gate && p.A_log != nullptr) in.A = p.A_log[hv];  // exp below, after the loads
  if constexpr (kSplit) {
  } else if constexpr (kKda) {
    const int64_t e = gb + int64_t(hv) * kHeadDim + c0;
    if (gf32) {
      in.g0 = ptx::ld_global_nc_v4(static_cast<const float*>(p.g) + e);
      in.g1 = ptx::ld_global_nc_v4(static_cast<const float*>(p.g) + e + 4);
    } else {
      in.g0 = ptx::ld_global_nc_v4(static_cast<const uint16_t*>(p.g) + e);
    }
    if (gate && p.dt_bias != nullptr) {
      const uint4 d0 = ptx::ld_global_nc_v4(p.dt_bias + hv * kHeadDim + c0);
      const uint4 d1 = ptx::ld_global_nc_v4(p.dt_bias + hv * kHeadDim + c0 + 4);
      const uint32_t w[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) in.dtb[i] = __uint_as_float(w[i]);
    }
  } else {
    in.g0.x = __float_as_uint(load1(p.g, gb + hv, gf32));
    if (gate && p.dt_bias != nullptr) in.dtb[0] = p.dt_bias[hv];
  }
  in.braw = load1(p.beta, n * p.beta_stride_seq + t * p.beta_stride_tok + hv,
                  (p.flags & kFlagBetaF32) != 0);
}

// Gate, beta, l2norm and scale of the block's tokens, computed once per block (every lane
// group used to redo all 128 channels of every token: verify's 8 tokens were ~90 % of its
// instructions): thread i prepares token i / 16, key channels 8 (i % 16) .. + 7, into `sm`;
// threads of tokens >= steps only wait. verify also writes the replay record's k-hat (one
// block per q head), alpha and beta (one block per value head) from here. Decode and verify
// run this same code, so their tokens are bit-identical (commit replays verify's record).
// kSplit (KDA decode): every thread computes the decay of key channel threadIdx.x (one
// softplus and exp where a token's thread computed 8 in a chain on the block's path: the 16
// threads of decode's one token were the only ones preparing); the same expression as below.
template <bool kKda, bool kRecord, bool kSplit = false>
__device__ __forceinline__ void prepare_tokens(const KdaStepParams& p, int steps, int h, int hv,
                                               const TokenLoads& in, char* rec,
                                               const StepRecord& lay, bool write_k, bool write_a,
                                               StepSmem<kKda>& sm) {
  static_assert(!(kSplit && kRecord), "kSplit is decode's (no record)");
  const int t = threadIdx.x >> 4, c0 = 8 * (threadIdx.x & 15);
  const float A = (p.flags & kFlagGate) != 0 && p.A_log != nullptr ? __expf(in.A) : 1.f;
  if constexpr (kSplit)
    sm.a[0][threadIdx.x] = __expf(log_decay(__uint_as_float(in.g0.x), in.dtb[0], A, p.flags,
                                            p.lower_bound));
  if (t >= steps) return;  // whole half warps: the 16-lane sums below stay in step
  const bool gf32 = (p.flags & kFlagGF32) != 0;
  float g[8];
  if constexpr (kKda) {
    if (gf32) {
      const uint32_t w[8] = {in.g0.x, in.g0.y, in.g0.z, in.g0.w, in.g1.x, in.g1.y, in.g1.z, in.g1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) g[i] = __uint_as_float(w[i]);
    } else {
      const uint32_t w[4] = {in.g0.x, in.g0.y, in.g0.z, in.g0.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) g[2 * i] = bf16_lo(w[i]), g[2 * i + 1] = bf16_hi(w[i]);
    }
  } else {
    g[0] = __uint_as_float(in.g0.x);
  }
  float q[8], k[8];
  const uint32_t wq[4] = {in.q.x, in.q.y, in.q.z, in.q.w}, wk[4] = {in.k.x, in.k.y, in.k.z, in.k.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    q[2 * i] = bf16_lo(wq[i]), q[2 * i + 1] = bf16_hi(wq[i]);
    k[2 * i] = bf16_lo(wk[i]), k[2 * i + 1] = bf16_hi(wk[i]);
  }
  float qs = 0.f, ks = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) qs = fmaf(q[i], q[i], qs), ks = fmaf(k[i], k[i], ks);
  float rq = 1.f, rk = 1.f;
  if (p.flags & kFlagL2norm) rq = l2_rscale(group16_sum(qs)), rk = l2_rscale(group16_sum(ks));
  rq *= p.scale;
  float kq = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) q[i] *= rq, k[i] *= rk, kq = fmaf(k[i], q[i], kq);
  kq = group16_sum(kq);
  float a[8];
#pragma unroll
  for (int i = 0; i < (kKda && !kSplit ? 8 : 1); ++i)
    a[i] = kSplit ? 0.f : __expf(log_decay(g[i], in.dtb[i], A, p.flags, p.lower_bound));
  const float beta = beta_of(in.braw, p.flags);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float4 qv = make_float4(q[4 * j], q[4 * j + 1], q[4 * j + 2], q[4 * j + 3]);
    const float4 kv = make_float4(k[4 * j], k[4 * j + 1], k[4 * j + 2], k[4 * j + 3]);
    *reinterpret_cast<float4*>(&sm.q[t][c0 + 4 * j]) = qv;
    *reinterpret_cast<float4*>(&sm.k[t][c0 + 4 * j]) = kv;
    if (kRecord && write_k) st_f4(rec + ((int64_t(t) * p.heads + h) * kHeadDim + c0 + 4 * j) * 4, kv);
    if constexpr (kKda && !kSplit) {
      const float4 av = make_float4(a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]);
      *reinterpret_cast<float4*>(&sm.a[t][c0 + 4 * j]) = av;
      if (kRecord && write_a)
        st_f4(rec + lay.alpha + ((int64_t(t) * p.value_heads + hv) * kHeadDim + c0 + 4 * j) * 4, av);
    }
  }
  if ((threadIdx.x & 15) == 0) {
    if (!kKda) sm.a[t][0] = a[0];
    sm.beta[t] = beta, sm.kq[t] = kq;
    if (kRecord && write_a) {
      if (!kKda) *reinterpret_cast<float*>(rec + lay.alpha + (int64_t(t) * p.value_heads + hv) * 4) = a[0];
      *reinterpret_cast<float*>(rec + lay.beta + (int64_t(t) * p.value_heads + hv) * 4) = beta;
    }
  }
}

// commit: the first `keep` tokens of the replay record into `sm` in one pass (thread i: token
// i / 16, key channels 8 (i % 16) .. + 7), issued with the state rows; the token loop then
// reads shared memory (a record load per token inside the loop put one L2 round trip per
// accepted token on every block's path). The values are the record's bits: commit(a) still
// equals a decode steps bit for bit.
template <bool kKda>
__device__ __forceinline__ void stage_record(const KdaStepParams& p, int keep, int h, int hv,
                                             const char* rec, const StepRecord& lay,
                                             StepSmem<kKda>& sm) {
  const int t = threadIdx.x >> 4, c0 = 8 * (threadIdx.x & 15);
  if (t >= keep) return;
  const char* kh = rec + ((int64_t(t) * p.heads + h) * kHeadDim + c0) * 4;
  const float4 k0 = ld_f4(kh), k1 = ld_f4(kh + 16);
  float4 a0, a1;
  float a_head = 1.f;
  if constexpr (kKda) {
    const char* al = rec + lay.alpha + ((int64_t(t) * p.value_heads + hv) * kHeadDim + c0) * 4;
    a0 = ld_f4(al), a1 = ld_f4(al + 16);
  } else {
    a_head = *reinterpret_cast<const float*>(rec + lay.alpha + (int64_t(t) * p.value_heads + hv) * 4);
  }
  const float beta = *reinterpret_cast<const float*>(rec + lay.beta + (int64_t(t) * p.value_heads + hv) * 4);
  *reinterpret_cast<float4*>(&sm.k[t][c0]) = k0;
  *reinterpret_cast<float4*>(&sm.k[t][c0 + 4]) = k1;
  if constexpr (kKda) {
    *reinterpret_cast<float4*>(&sm.a[t][c0]) = a0;
    *reinterpret_cast<float4*>(&sm.a[t][c0 + 4]) = a1;
  }
  if ((threadIdx.x & 15) == 0) {
    if (!kKda) sm.a[t][0] = a_head;
    sm.beta[t] = beta;
  }
}


}  // namespace kernrt::kda
