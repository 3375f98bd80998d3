// KDA / GDN token steps over a per-sequence fp32 state pool, for the H200 (sm_90a):
//   decode  one token per sequence, the state line updated in place (or written to a second
//           base, `state_out`, for callers that keep the old state);
//   verify  1..8 tokens per sequence (a speculative round): the outputs of every token; the
//           state line is left as it was and a replay record of the tokens is written
//           beside it (params.h StepRecord);
//   commit  replays the first accepted[n] tokens of that record into the state line, in place
//           (0 leaves it untouched), which rolls a verify round back to any accepted prefix.
// Per value head, with the state line S [V, K] (row v = value channel v, K contiguous):
//   S <- S Diag(alpha);  r = v - S k;  S <- S + beta r k^T;  o = S q
// (the transpose of kda_ref.py's K x V form); alpha = exp(log decay) per key channel (KDA) or
// one per head (GDN); gate, beta sigmoid, q/k l2norm and scale in the kernel (params.h flags).
// o = (S' q) + beta r (k.q) with S' the decayed state: the same value as S_new q.
//
// Entries: {kda,gdn}_{decode,verify,commit}_sm90a_bf16_k128, one `const __grid_constant__
// KdaStepParams`. Grid (V / 32, HV, seqs), block 128: a block owns 32 value rows of one head
// of one sequence (16 KiB of state); warp w holds rows 8w..8w+7, its lane group i (lanes
// 8i..8i+7) rows 8w+2i and 8w+2i+1, and lane j of a group key channels {32c + 4j + e}
// (c, e in 0..3), so every 16-byte load of a warp covers four 128-byte row segments. Row dots
// reduce over the 8 lanes of a group (3 shuffles). The state rows and the tokens' values are
// loaded first; meanwhile the block prepares its tokens once (gate, l2norm, beta, k.q: thread
// i takes token i / 16 and 8 key channels) into shared memory, which every lane group reads.
// decode and commit apply the same update code and decode and verify the same preparation, so
// verify + commit(a) leaves the state bit for bit where a decode steps would.
//
// Not checked here: K = 128, V % 32, HV % H, steps <= 8, distinct lines for distinct
// sequences, accepted[n] <= the verify's steps (clamped), the record fitting the line region
// (the generator sizes bytes_per_seq; the runtime checks line indices against the pool).
#include "common/ptx/ldst.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/tma.cuh"
#include "kda/kda_vec.cuh"
#include "kda/params.h"

namespace kernrt::kda {

enum StepMode { kDecode = 0, kVerify = 1, kCommit = 2 };

constexpr int kLaneCh = 16;  // key channels per lane
static_assert(kHeadDim == 8 * kLaneCh, "a lane group covers K");
static_assert(kStepRows == 4 * 4 * 2, "4 warps x 4 groups x 2 rows");

// A lane's element i (0..15) is key channel 32 (i / 4) + 4 sub + i % 4 (sub = lane % 8).

// One token as the update needs it.
template <bool kKda>
struct Token {
  float q[kLaneCh];            // scaled (and normalized) q; decode / verify only
  float k[kLaneCh];            // k-hat
  float a[kKda ? kLaneCh : 1]; // alpha
  float beta;
  uint32_t v2;                 // bf16 values of the group's two rows
};

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
// load nothing (whole half warps).
template <bool kKda>
__device__ __forceinline__ void load_token_inputs(const KdaStepParams& p, int n, int steps, int h,
                                                  int hv, TokenLoads& in) {
  const int t = threadIdx.x >> 4, c0 = 8 * (threadIdx.x & 15);
  in.g0 = in.g1 = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int i = 0; i < 8; ++i) in.dtb[i] = 0.f;
  in.A = 1.f, in.braw = 0.f;
  if (t >= steps) return;
  const int64_t qk = n * p.qk_stride_seq + t * p.qk_stride_tok + int64_t(h) * kHeadDim + c0;
  in.q = ptx::ld_global_nc_v4(static_cast<const uint16_t*>(p.q) + qk);
  in.k = ptx::ld_global_nc_v4(static_cast<const uint16_t*>(p.k) + qk);
  const int64_t gb = n * p.g_stride_seq + t * p.g_stride_tok;
  const bool gf32 = (p.flags & kFlagGF32) != 0;
  const bool gate = (p.flags & kFlagGate) != 0;
  if (gate && p.A_log != nullptr) in.A = p.A_log[hv];  // exp below, after the loads
  if constexpr (kKda) {
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
template <bool kKda, bool kRecord>
__device__ __forceinline__ void prepare_tokens(const KdaStepParams& p, int steps, int h, int hv,
                                               const TokenLoads& in, char* rec,
                                               const StepRecord& lay, bool write_k, bool write_a,
                                               StepSmem<kKda>& sm) {
  const int t = threadIdx.x >> 4, c0 = 8 * (threadIdx.x & 15);
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
  const float A = (p.flags & kFlagGate) != 0 && p.A_log != nullptr ? __expf(in.A) : 1.f;
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
  for (int i = 0; i < (kKda ? 8 : 1); ++i)
    a[i] = __expf(log_decay(g[i], in.dtb[i], A, p.flags, p.lower_bound));
  const float beta = beta_of(in.braw, p.flags);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float4 qv = make_float4(q[4 * j], q[4 * j + 1], q[4 * j + 2], q[4 * j + 3]);
    const float4 kv = make_float4(k[4 * j], k[4 * j + 1], k[4 * j + 2], k[4 * j + 3]);
    *reinterpret_cast<float4*>(&sm.q[t][c0 + 4 * j]) = qv;
    *reinterpret_cast<float4*>(&sm.k[t][c0 + 4 * j]) = kv;
    if (kRecord && write_k) st_f4(rec + ((int64_t(t) * p.heads + h) * kHeadDim + c0 + 4 * j) * 4, kv);
    if constexpr (kKda) {
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

// ---- warp-level preparation (kWp) ----------------------------------------------------------
// A warp prepares a whole token: lane j holds key channels 4j .. 4j + 3, the sums of q^2, k^2
// and k.q reduce over the warp in one 5-level butterfly (every lane ends with the same bits),
// so one lane computes 4 decays per token where a thread of the 16-lane layout computed 8 and
// decode's 8 channels of softplus per thread ran in 16 threads of one warp. decode (kSplit):
// the four warps share the token (each computes its norms, the same bits) and each stores a
// part: warp 0 q, warp 1 k, warp w the decays of channels 4j + w, warp 2 beta and k.q.
// verify: warp w prepares tokens w and w + 4 and stores them whole.

// The lane's inputs of one token (loaded before the state rows, as TokenLoads).
struct WarpTokenLoads {
  uint2 q, k;  // bf16 x 4
  uint4 g;     // KDA: f32 x 4, or bf16 x 4 in g.x, g.y; GDN: g.x (the head's g as f32 bits)
  float braw;
};
// Per value head: dt_bias of the lane's channels (GDN: dtb[0]) and A_log.
struct WarpHeadLoads {
  float dtb[4];
  float A;
};

template <bool kKda>
__device__ __forceinline__ void load_warp_head(const KdaStepParams& p, int hv, WarpHeadLoads& hd) {
  const int c0 = 4 * (threadIdx.x & 31);
  const bool gate = (p.flags & kFlagGate) != 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) hd.dtb[i] = 0.f;
  hd.A = gate && p.A_log != nullptr ? p.A_log[hv] : 0.f;  // exp after the loads
  if (!gate || p.dt_bias == nullptr) return;
  if constexpr (kKda) {
    const uint4 d = ptx::ld_global_nc_v4(p.dt_bias + hv * kHeadDim + c0);
    hd.dtb[0] = __uint_as_float(d.x), hd.dtb[1] = __uint_as_float(d.y);
    hd.dtb[2] = __uint_as_float(d.z), hd.dtb[3] = __uint_as_float(d.w);
  } else {
    hd.dtb[0] = p.dt_bias[hv];
  }
}

template <bool kKda>
__device__ __forceinline__ void load_warp_token(const KdaStepParams& p, int n, int t, int h, int hv,
                                                WarpTokenLoads& in) {
  const int c0 = 4 * (threadIdx.x & 31);
  const int64_t qk = n * p.qk_stride_seq + t * p.qk_stride_tok + int64_t(h) * kHeadDim + c0;
  in.q = ptx::ld_global_nc_v2(static_cast<const uint16_t*>(p.q) + qk);
  in.k = ptx::ld_global_nc_v2(static_cast<const uint16_t*>(p.k) + qk);
  const int64_t gb = n * p.g_stride_seq + t * p.g_stride_tok;
  const bool gf32 = (p.flags & kFlagGF32) != 0;
  in.g = make_uint4(0u, 0u, 0u, 0u);
  if constexpr (kKda) {
    const int64_t e = gb + int64_t(hv) * kHeadDim + c0;
    if (gf32) {
      in.g = ptx::ld_global_nc_v4(static_cast<const float*>(p.g) + e);
    } else {
      const uint2 u = ptx::ld_global_nc_v2(static_cast<const uint16_t*>(p.g) + e);
      in.g.x = u.x, in.g.y = u.y;
    }
  } else {
    in.g.x = __float_as_uint(load1(p.g, gb + hv, gf32));
  }
  in.braw = load1(p.beta, n * p.beta_stride_seq + t * p.beta_stride_tok + hv,
                  (p.flags & kFlagBetaF32) != 0);
}

template <bool kKda, bool kRecord, bool kSplit>
__device__ __forceinline__ void prepare_warp_token(const KdaStepParams& p, int t, int h, int hv,
                                                   const WarpTokenLoads& in, const WarpHeadLoads& hd,
                                                   char* rec, const StepRecord& lay, bool write_k,
                                                   bool write_a, StepSmem<kKda>& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, c0 = 4 * lane;
  float q[4] = {bf16_lo(in.q.x), bf16_hi(in.q.x), bf16_lo(in.q.y), bf16_hi(in.q.y)};
  float k[4] = {bf16_lo(in.k.x), bf16_hi(in.k.x), bf16_lo(in.k.y), bf16_hi(in.k.y)};
  float qs = 0.f, ks = 0.f, kq = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) qs = fmaf(q[i], q[i], qs), ks = fmaf(k[i], k[i], ks), kq = fmaf(k[i], q[i], kq);
#pragma unroll
  for (int w = 16; w >= 1; w >>= 1) {
    qs += __shfl_xor_sync(0xffffffffu, qs, w);
    ks += __shfl_xor_sync(0xffffffffu, ks, w);
    kq += __shfl_xor_sync(0xffffffffu, kq, w);
  }
  float rq = 1.f, rk = 1.f;
  if (p.flags & kFlagL2norm) rq = l2_rscale(qs), rk = l2_rscale(ks);
  rq *= p.scale;
  kq = kq * rq * rk;  // k-hat . q-hat (q-hat scaled)
#pragma unroll
  for (int i = 0; i < 4; ++i) q[i] *= rq, k[i] *= rk;
  const float A = (p.flags & kFlagGate) != 0 && p.A_log != nullptr ? __expf(hd.A) : 1.f;
  const bool gf32 = (p.flags & kFlagGF32) != 0;
  float g[4];
  if (kKda && !gf32) {
    g[0] = bf16_lo(in.g.x), g[1] = bf16_hi(in.g.x), g[2] = bf16_lo(in.g.y), g[3] = bf16_hi(in.g.y);
  } else {
    g[0] = __uint_as_float(in.g.x), g[1] = __uint_as_float(in.g.y);
    g[2] = __uint_as_float(in.g.z), g[3] = __uint_as_float(in.g.w);
  }
  const bool head_lane = lane == 0 && (!kSplit || warp == 2);
  if constexpr (kKda) {
    if (kSplit) {
      const float gw = warp == 0 ? g[0] : warp == 1 ? g[1] : warp == 2 ? g[2] : g[3];
      const float dw = warp == 0 ? hd.dtb[0] : warp == 1 ? hd.dtb[1] : warp == 2 ? hd.dtb[2] : hd.dtb[3];
      sm.a[t][c0 + warp] = __expf(log_decay(gw, dw, A, p.flags, p.lower_bound));
    } else {
      float a[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = __expf(log_decay(g[i], hd.dtb[i], A, p.flags, p.lower_bound));
      const float4 av = make_float4(a[0], a[1], a[2], a[3]);
      *reinterpret_cast<float4*>(&sm.a[t][c0]) = av;
      if (kRecord && write_a)
        st_f4(rec + lay.alpha + ((int64_t(t) * p.value_heads + hv) * kHeadDim + c0) * 4, av);
    }
  } else if (head_lane) {
    const float a0 = __expf(log_decay(g[0], hd.dtb[0], A, p.flags, p.lower_bound));
    sm.a[t][0] = a0;
    if (kRecord && write_a)
      *reinterpret_cast<float*>(rec + lay.alpha + (int64_t(t) * p.value_heads + hv) * 4) = a0;
  }
  if (!kSplit || warp == 0)
    *reinterpret_cast<float4*>(&sm.q[t][c0]) = make_float4(q[0], q[1], q[2], q[3]);
  if (!kSplit || warp == 1) {
    const float4 kv = make_float4(k[0], k[1], k[2], k[3]);
    *reinterpret_cast<float4*>(&sm.k[t][c0]) = kv;
    if (kRecord && write_k) st_f4(rec + ((int64_t(t) * p.heads + h) * kHeadDim + c0) * 4, kv);
  }
  if (head_lane) {
    const float beta = beta_of(in.braw, p.flags);
    sm.beta[t] = beta, sm.kq[t] = kq;
    if (kRecord && write_a)
      *reinterpret_cast<float*>(rec + lay.beta + (int64_t(t) * p.value_heads + hv) * 4) = beta;
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

// A lane's 16 key channels of prepared token t (element i = channel 32 (i / 4) + 4 sub + i % 4);
// q only for tokens whose output is computed (decode, verify).
template <bool kKda, bool kQ>
__device__ __forceinline__ void load_token(const StepSmem<kKda>& sm, int t, int sub, uint32_t v2,
                                           Token<kKda>& tk) {
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    if constexpr (kQ) {
      const float4 q = *reinterpret_cast<const float4*>(&sm.q[t][32 * c + 4 * sub]);
      tk.q[4 * c] = q.x, tk.q[4 * c + 1] = q.y, tk.q[4 * c + 2] = q.z, tk.q[4 * c + 3] = q.w;
    }
    const float4 k = *reinterpret_cast<const float4*>(&sm.k[t][32 * c + 4 * sub]);
    tk.k[4 * c] = k.x, tk.k[4 * c + 1] = k.y, tk.k[4 * c + 2] = k.z, tk.k[4 * c + 3] = k.w;
    if constexpr (kKda) {
      const float4 a = *reinterpret_cast<const float4*>(&sm.a[t][32 * c + 4 * sub]);
      tk.a[4 * c] = a.x, tk.a[4 * c + 1] = a.y, tk.a[4 * c + 2] = a.z, tk.a[4 * c + 3] = a.w;
    }
  }
  if constexpr (!kKda) tk.a[0] = sm.a[t][0];
  tk.beta = sm.beta[t];
  tk.v2 = v2;
}

// The state update of one token on the group's two rows; returns S' q + beta r (k.q) per row
// when kOut. Shared by decode, verify and commit (bit-identical states). `update` false skips
// the rank-1 update (verify's last token: the state is not kept, only the output is needed).
// kTree: the lane's dots in 4 partial sums (chains of 4 FMA, not 16: each token's update
// waits on its dot).
template <bool kKda, bool kOut, bool kTree>
__device__ __forceinline__ void apply(float (&s)[2][kLaneCh], const Token<kKda>& tk, float kq,
                                      float (&o)[2], bool update = true) {
  constexpr int kParts = kTree ? 4 : 1;
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    float pk[kParts], pq[kParts];
#pragma unroll
    for (int j = 0; j < kParts; ++j) pk[j] = 0.f, pq[j] = 0.f;
#pragma unroll
    for (int i = 0; i < kLaneCh; ++i) {
      s[w][i] = __fmul_rn(s[w][i], tk.a[kKda ? i : 0]);
      pk[i % kParts] = __fmaf_rn(s[w][i], tk.k[i], pk[i % kParts]);
      if (kOut) pq[i % kParts] = __fmaf_rn(s[w][i], tk.q[i], pq[i % kParts]);
    }
    float dk = pk[0], dq = pq[0];
    if constexpr (kTree) {
      dk = __fadd_rn(__fadd_rn(pk[0], pk[1]), __fadd_rn(pk[2], pk[3]));
      dq = __fadd_rn(__fadd_rn(pq[0], pq[1]), __fadd_rn(pq[2], pq[3]));
    }
    dk = group8_sum(dk);
    const float v = w == 0 ? bf16_lo(tk.v2) : bf16_hi(tk.v2);
    const float br = __fmul_rn(tk.beta, __fsub_rn(v, dk));
    if (update) {
#pragma unroll
      for (int i = 0; i < kLaneCh; ++i) s[w][i] = __fmaf_rn(br, tk.k[i], s[w][i]);
    }
    if (kOut) o[w] = __fmaf_rn(br, kq, group8_sum(dq));
  }
}

// Asks L2 for the 16 KiB state tile of block (x, hv, n); nothing past the grid, nothing for
// the null line. The line index is read with ld.global.cg: this may run before
// griddepcontrol.wait, where a stale index only prefetches the wrong line. A prefetch returns
// nothing and L2 is the coherence point: every byte is read again later, only the timing
// depends on it.
__device__ __forceinline__ void prefetch_state_tile(const KdaStepParams& p, int x, int hv, int n) {
  if (n >= p.seqs) return;
  const int64_t line = p.lines != nullptr ? ptx::ld_global_cg_s32(p.lines + n) : n;
  if (p.lines != nullptr && line == 0) return;
  ptx::bulk_prefetch_l2(static_cast<const char*>(p.state) + line * p.state_stride +
                            (int64_t(hv) * p.dim_v + x * kStepRows) * (kHeadDim * 4),
                        kStepRows * kHeadDim * 4);
}

// kPf < 0: griddepcontrol.wait first, the next grid released after the token preparation.
// kPf >= 0: before the wait, thread 0 asks L2 for this block's state tile and every thread
// releases the next grid (under PDL the first blocks of the next call stream their state in
// while this call drains); kPf > 0: after its own loads, thread 32 also asks L2 for the tile
// of the block kPf linear ids ahead (bytes in flight without registers).
// kWp: the warp-level token preparation and the dots in partial sums (above); decode,
// verify and commit of one family must agree on it (commit(a) = a decode steps, bit for bit).
template <bool kKda, int kMode, int kPf, bool kWp>
__device__ __forceinline__ void kda_step(const KdaStepParams& p) {
  const int hv = blockIdx.y, n = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane >> 3, sub = lane & 7;
  const int row = blockIdx.x * kStepRows + warp * 8 + grp * 2;
  const int h = hv / (p.value_heads / p.heads);
  const int steps = kMode == kDecode ? 1 : (p.steps < kMaxSteps ? p.steps : kMaxSteps);
  __shared__ StepSmem<kKda> sm;

  if constexpr (kPf >= 0) {
    if (threadIdx.x == 0) prefetch_state_tile(p, blockIdx.x, hv, n);
    ptx::griddepcontrol_launch_dependents();
  }
  ptx::griddepcontrol_wait();

  // ---- the line, the record, the token inputs and the state rows -----------------------
  const int64_t line = p.lines != nullptr ? p.lines[n] : n;
  const bool live = p.lines == nullptr || line != 0;
  char* base = static_cast<char*>(p.state) + line * p.state_stride;
  char* rec = base + p.record_offset;
  const StepRecord lay = step_record(kKda, p.heads, p.value_heads, p.dim_v);
  int keep = steps;
  TokenLoads in;
  constexpr int kWarpTokens = kMode == kVerify ? kMaxSteps / 4 : 1;
  WarpHeadLoads hd;
  WarpTokenLoads wt[kWarpTokens];
  if (kMode == kCommit) {
    keep = live ? p.accepted[n] : 0;
    keep = keep < steps ? keep : steps;
    if (keep <= 0) {
      if constexpr (kPf < 0) ptx::griddepcontrol_launch_dependents();
      return;
    }
  } else if constexpr (kWp) {  // first: they arrive before the state
    load_warp_head<kKda>(p, hv, hd);
#pragma unroll
    for (int u = 0; u < kWarpTokens; ++u) {
      const int t = kMode == kDecode ? 0 : warp + 4 * u;
      if (t < steps) load_warp_token<kKda>(p, n, t, h, hv, wt[u]);
    }
  } else {
    load_token_inputs<kKda>(p, n, steps, h, hv, in);  // first: they arrive before the state
  }
  char* rows = base + (int64_t(hv) * p.dim_v + row) * (kHeadDim * 4);
  float s[2][kLaneCh];
#pragma unroll
  for (int w = 0; w < 2; ++w)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const float4 x = live ? ld_f4(rows + w * kHeadDim * 4 + (32 * c + 4 * sub) * 4)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
      s[w][4 * c] = x.x, s[w][4 * c + 1] = x.y, s[w][4 * c + 2] = x.z, s[w][4 * c + 3] = x.w;
    }
  if constexpr (kPf > 0) {  // linear ids, x fastest: the order blocks are dispatched in
    const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z) + kPf;
    if (threadIdx.x == 32)
      prefetch_state_tile(p, b % gridDim.x, (b / gridDim.x) % gridDim.y, b / gridDim.x / gridDim.y);
  }
  // the values of the group's two rows for every token (commit: from the record)
  uint32_t v2[kMaxSteps];
#pragma unroll
  for (int t = 0; t < kMaxSteps; ++t) {
    v2[t] = 0u;
    if (t < keep) {
      if (kMode == kCommit)
        v2[t] = *reinterpret_cast<const uint32_t*>(
            rec + lay.v + ((int64_t(t) * p.value_heads + hv) * p.dim_v + row) * 2);
      else
        v2[t] = ptx::ld_global_nc_u32(static_cast<const uint16_t*>(p.v) + n * p.v_stride_seq +
                                      t * p.v_stride_tok + int64_t(hv) * p.dim_v + row);
    }
  }

  // ---- tokens ----------------------------------------------------------------------------
  if (kMode == kCommit) {
    stage_record<kKda>(p, keep, h, hv, rec, lay, sm);
  } else {
    const bool rec_on = kMode == kVerify && live && blockIdx.x == 0;
    const bool rec_k = rec_on && hv % (p.value_heads / p.heads) == 0;
    if constexpr (kWp) {
#pragma unroll
      for (int u = 0; u < kWarpTokens; ++u) {
        const int t = kMode == kDecode ? 0 : warp + 4 * u;
        if (t < steps)
          prepare_warp_token<kKda, kMode == kVerify, kMode == kDecode>(p, t, h, hv, wt[u], hd, rec,
                                                                      lay, rec_k, rec_on, sm);
      }
    } else {
      prepare_tokens<kKda, kMode == kVerify>(p, steps, h, hv, in, rec, lay, rec_k, rec_on, sm);
    }
  }
  __syncthreads();
  if constexpr (kPf < 0) ptx::griddepcontrol_launch_dependents();
#pragma unroll
  for (int t = 0; t < kMaxSteps; ++t) {  // unrolled: v2[t] stays in registers
    if (t >= keep) break;
    Token<kKda> tk;
    load_token<kKda, kMode != kCommit>(sm, t, sub, v2[t], tk);
    float o[2];
    if (kMode == kCommit) {
      apply<kKda, false, kWp>(s, tk, 0.f, o);
      continue;
    }
    if (kMode == kVerify && live && sub == 0)  // the replay record's values of token t
      *reinterpret_cast<uint32_t*>(
          rec + lay.v + ((int64_t(t) * p.value_heads + hv) * p.dim_v + row) * 2) = tk.v2;
    apply<kKda, true, kWp>(s, tk, sm.kq[t], o, kMode != kVerify || t + 1 < steps);
    if (sub == 0)
      *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + n * p.o_stride_seq +
                                   t * p.o_stride_tok + int64_t(hv) * p.dim_v + row) =
          pack_bf16x2(o[0], o[1]);
  }

  // ---- the state, in place (decode, commit) ------------------------------------------------
  if (kMode != kVerify && live) {
    if (p.state_out != nullptr)
      rows = static_cast<char*>(p.state_out) + line * p.state_stride +
             (int64_t(hv) * p.dim_v + row) * (kHeadDim * 4);
#pragma unroll
    for (int w = 0; w < 2; ++w)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        st_f4(rows + w * kHeadDim * 4 + (32 * c + 4 * sub) * 4,
              make_float4(s[w][4 * c], s[w][4 * c + 1], s[w][4 * c + 2], s[w][4 * c + 3]));
  }
}

}  // namespace kernrt::kda

// ---- entries -------------------------------------------------------------------------------
// decode keeps <= 128 registers (4 blocks, 64 KiB of state in flight per SM); verify holds a
// second token's inputs and its record writes, commit its record reads: <= 168 (3 blocks).
// The _pf<N> entries are the prefetch variants (kPf = N) that the decode / commit timing
// compares.
#define KERNRT_KDA_STEP_ENTRY(fam, is_kda, mode, name, blocks, pf, wp, tag)                      \
  extern "C" __global__ void __launch_bounds__(kernrt::kda::kStepThreads, blocks)               \
      fam##_##name##tag##_sm90a_bf16_k128(const __grid_constant__ kernrt::kda::KdaStepParams p) { \
    kernrt::kda::kda_step<is_kda, kernrt::kda::mode, pf, wp>(p);                                \
  }

#define KERNRT_KDA_STEP_FAMILY(fam, is_kda)                                  \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 4, -1, false, )        \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kVerify, verify, 3, -1, false, )        \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kCommit, commit, 3, -1, false, )        \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 4, 0, false, _pf0)     \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 4, 512, false, _pf512) \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kVerify, verify, 3, 0, false, _pf0)     \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kCommit, commit, 3, 0, false, _pf0)     \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 4, -1, true, _wp)      \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 4, 0, true, _wppf0)    \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 4, 512, true, _wppf512) \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 6, -1, true, _wpo6)    \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kDecode, decode, 6, 0, true, _wppf0o6)  \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kVerify, verify, 3, -1, true, _wp)      \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kVerify, verify, 3, 0, true, _wppf0)    \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kCommit, commit, 3, -1, true, _wp)      \
  KERNRT_KDA_STEP_ENTRY(fam, is_kda, kCommit, commit, 3, 0, true, _wppf0)

KERNRT_KDA_STEP_FAMILY(kda, true)
KERNRT_KDA_STEP_FAMILY(gdn, false)
