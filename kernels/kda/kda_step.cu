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
// Under PDL (the manifests launch with it) KDA's entries ask L2 for their block's state tile
// before griddepcontrol.wait and release the next grid at block start, so the first blocks of
// the next call stream in while this one drains; KDA's decode also asks L2 for the tile 512
// blocks ahead (entries below: what each prefetch bought). Prefetches change timing only.
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
template <bool kKda, bool kOut>
__device__ __forceinline__ void apply(float (&s)[2][kLaneCh], const Token<kKda>& tk, float kq,
                                      float (&o)[2], bool update = true) {
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    float dk = 0.f, dq = 0.f;
#pragma unroll
    for (int i = 0; i < kLaneCh; ++i) {
      s[w][i] = __fmul_rn(s[w][i], tk.a[kKda ? i : 0]);
      dk = __fmaf_rn(s[w][i], tk.k[i], dk);
      if (kOut) dq = __fmaf_rn(s[w][i], tk.q[i], dq);
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
template <bool kKda, int kMode, int kPf>
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
  if (kMode == kCommit) {
    keep = live ? p.accepted[n] : 0;
    keep = keep < steps ? keep : steps;
    if (keep <= 0) {
      if constexpr (kPf < 0) ptx::griddepcontrol_launch_dependents();
      return;
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
    prepare_tokens<kKda, kMode == kVerify>(p, steps, h, hv, in, rec, lay,
                                           rec_on && hv % (p.value_heads / p.heads) == 0, rec_on, sm);
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
      apply<kKda, false>(s, tk, 0.f, o);
      continue;
    }
    if (kMode == kVerify && live && sub == 0)  // the replay record's values of token t
      *reinterpret_cast<uint32_t*>(
          rec + lay.v + ((int64_t(t) * p.value_heads + hv) * p.dim_v + row) * 2) = tk.v2;
    apply<kKda, true>(s, tk, sm.kq[t], o, kMode != kVerify || t + 1 < steps);
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
// Prefetch (kPf) per entry, from decode_x8 / verify_commit_x4 timings on the H200 (per call,
// medians of 180 graph replays, each variant beside the others in one process; two GPUs):
// KDA decode B64 38.1 us (kPf -1) / 37.4 (0) / 36.6 (512) / 40.4 (1024), B256 138.4 / 136.8 /
// 137.3 / 161.9 (a distance of 1024 blocks = 16 MiB of tiles is evicted before use); KDA
// verify + commit 105.6 / 104.7 (-1) against 104.0 / 104.3 (0); GDN decode B64 35.1 (-1) /
// 35.5 (0) / 36.0 (512), B256 133.4 / 133.5 / 135.7: GDN keeps -1 (no GDN verify timing).
#define KERNRT_KDA_STEP_ENTRY(fam, is_kda, mode, name, blocks, pf)                             \
  extern "C" __global__ void __launch_bounds__(kernrt::kda::kStepThreads, blocks)           \
      fam##_##name##_sm90a_bf16_k128(const __grid_constant__ kernrt::kda::KdaStepParams p) { \
    kernrt::kda::kda_step<is_kda, kernrt::kda::mode, pf>(p);                                \
  }

KERNRT_KDA_STEP_ENTRY(kda, true, kDecode, decode, 4, 512)
KERNRT_KDA_STEP_ENTRY(kda, true, kVerify, verify, 3, 0)
KERNRT_KDA_STEP_ENTRY(kda, true, kCommit, commit, 3, 0)
KERNRT_KDA_STEP_ENTRY(gdn, false, kDecode, decode, 4, -1)
KERNRT_KDA_STEP_ENTRY(gdn, false, kVerify, verify, 3, -1)
KERNRT_KDA_STEP_ENTRY(gdn, false, kCommit, commit, 3, -1)
