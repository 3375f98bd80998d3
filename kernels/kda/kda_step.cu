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
// reduce over the 8 lanes of a group (3 shuffles). The state and the first token's inputs are
// loaded before any math; the next token's inputs are loaded while the current one is applied.
// decode and commit apply the same update code, so verify + commit(a) leaves the state bit
// for bit where a decode steps would.
//
// Not checked here: K = 128, V % 32, HV % H, steps <= 8, distinct lines for distinct
// sequences, accepted[n] <= the verify's steps (clamped), the record fitting the line region
// (the generator sizes bytes_per_seq; the runtime checks line indices against the pool).
#include "common/ptx/ldst.cuh"
#include "common/ptx/sync.cuh"
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

// Raw inputs of token t, loaded a step ahead of their use and kept packed: q, k as bf16
// pairs; g as 16 f32 words (kFlagGF32) or 8 bf16 pairs (words 0..7).
template <bool kKda>
struct Raw {
  uint32_t q[kLaneCh / 2], k[kLaneCh / 2], g[kKda ? kLaneCh : 1];
  float b;
  uint32_t v2;
};

template <bool kKda>
__device__ __forceinline__ void load_raw(const KdaStepParams& p, int n, int t, int h, int hv,
                                         int row, int sub, Raw<kKda>& r) {
  const int64_t qk = n * p.qk_stride_seq + t * p.qk_stride_tok + int64_t(h) * kHeadDim;
  const bool gf32 = (p.flags & kFlagGF32) != 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const uint2 x = ptx::ld_global_nc_v2(static_cast<const uint16_t*>(p.q) + qk + 32 * c + 4 * sub);
    const uint2 y = ptx::ld_global_nc_v2(static_cast<const uint16_t*>(p.k) + qk + 32 * c + 4 * sub);
    r.q[2 * c] = x.x, r.q[2 * c + 1] = x.y, r.k[2 * c] = y.x, r.k[2 * c + 1] = y.y;
  }
  const int64_t gb = n * p.g_stride_seq + t * p.g_stride_tok;
  if constexpr (kKda) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t e = gb + int64_t(hv) * kHeadDim + 32 * c + 4 * sub;
      if (gf32) {
        const uint4 x = ptx::ld_global_nc_v4(static_cast<const float*>(p.g) + e);
        r.g[4 * c] = x.x, r.g[4 * c + 1] = x.y, r.g[4 * c + 2] = x.z, r.g[4 * c + 3] = x.w;
      } else {
        const uint2 x = ptx::ld_global_nc_v2(static_cast<const uint16_t*>(p.g) + e);
        r.g[2 * c] = x.x, r.g[2 * c + 1] = x.y;
      }
    }
  } else {
    r.g[0] = __float_as_uint(load1(p.g, gb + hv, gf32));
  }
  r.b = load1(p.beta, n * p.beta_stride_seq + t * p.beta_stride_tok + hv,
              (p.flags & kFlagBetaF32) != 0);
  r.v2 = ptx::ld_global_nc_u32(static_cast<const uint16_t*>(p.v) + n * p.v_stride_seq +
                               t * p.v_stride_tok + int64_t(hv) * p.dim_v + row);
}

__device__ __forceinline__ float unpack_pair(const uint32_t* w, int i) {
  return (i & 1) ? bf16_hi(w[i >> 1]) : bf16_lo(w[i >> 1]);
}

// Gate, beta, l2norm and scale: raw inputs -> the token the update applies.
template <bool kKda>
__device__ __forceinline__ void prepare(const KdaStepParams& p, const Raw<kKda>& r,
                                        const float (&dtb)[kKda ? kLaneCh : 1], float a,
                                        Token<kKda>& tk) {
  float q[kLaneCh], k[kLaneCh];
#pragma unroll
  for (int i = 0; i < kLaneCh; ++i) q[i] = unpack_pair(r.q, i), k[i] = unpack_pair(r.k, i);
  float qs = 0.f, ks = 0.f;
#pragma unroll
  for (int i = 0; i < kLaneCh; ++i) qs = fmaf(q[i], q[i], qs), ks = fmaf(k[i], k[i], ks);
  float rq = 1.f, rk = 1.f;
  if (p.flags & kFlagL2norm) rq = l2_rscale(group8_sum(qs)), rk = l2_rscale(group8_sum(ks));
  rq *= p.scale;
#pragma unroll
  for (int i = 0; i < kLaneCh; ++i) tk.q[i] = q[i] * rq, tk.k[i] = k[i] * rk;
  const bool gf32 = (p.flags & kFlagGF32) != 0;
#pragma unroll
  for (int i = 0; i < (kKda ? kLaneCh : 1); ++i) {
    const float g = !kKda || gf32 ? __uint_as_float(r.g[i]) : unpack_pair(r.g, i);
    tk.a[i] = __expf(log_decay(g, dtb[i], a, p.flags, p.lower_bound));
  }
  tk.beta = beta_of(r.b, p.flags);
  tk.v2 = r.v2;
}

// The state update of one token on the group's two rows; returns S' q + beta r (k.q) per row
// when kOut. Shared by decode, verify and commit (bit-identical states).
template <bool kKda, bool kOut>
__device__ __forceinline__ void apply(float (&s)[2][kLaneCh], const Token<kKda>& tk, float kq,
                                      float (&o)[2]) {
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
#pragma unroll
    for (int i = 0; i < kLaneCh; ++i) s[w][i] = __fmaf_rn(br, tk.k[i], s[w][i]);
    if (kOut) o[w] = __fmaf_rn(br, kq, group8_sum(dq));
  }
}

template <bool kKda, int kMode>
__device__ __forceinline__ void kda_step(const KdaStepParams& p) {
  const int hv = blockIdx.y, n = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane >> 3, sub = lane & 7;
  const int row = blockIdx.x * kStepRows + warp * 8 + grp * 2;
  const int h = hv / (p.value_heads / p.heads);
  const int steps = kMode == kDecode ? 1 : (p.steps < kMaxSteps ? p.steps : kMaxSteps);

  // ---- gate constants (parameters: read before the PDL wait) ---------------------------
  constexpr int kG = kKda ? kLaneCh : 1;
  float a = 1.f, dtb[kG];
#pragma unroll
  for (int i = 0; i < kG; ++i) dtb[i] = 0.f;
  if (kMode != kCommit && (p.flags & kFlagGate)) {
    if (p.A_log != nullptr) a = __expf(p.A_log[hv]);
    if (p.dt_bias != nullptr) {
      if constexpr (kKda) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const uint4 x = ptx::ld_global_nc_v4(p.dt_bias + hv * kHeadDim + 32 * c + 4 * sub);
          dtb[4 * c] = __uint_as_float(x.x), dtb[4 * c + 1] = __uint_as_float(x.y);
          dtb[4 * c + 2] = __uint_as_float(x.z), dtb[4 * c + 3] = __uint_as_float(x.w);
        }
      } else {
        dtb[0] = p.dt_bias[hv];
      }
    }
  }
  ptx::griddepcontrol_wait();

  // ---- the line, the record and the state rows ---------------------------------------
  const int64_t line = p.lines != nullptr ? p.lines[n] : n;
  const bool live = p.lines == nullptr || line != 0;
  char* base = static_cast<char*>(p.state) + line * p.state_stride;
  char* rec = base + p.record_offset;
  const StepRecord lay = step_record(kKda, p.heads, p.value_heads, p.dim_v);
  int keep = steps;
  if (kMode == kCommit) {
    keep = live ? p.accepted[n] : 0;
    keep = keep < steps ? keep : steps;
    if (keep <= 0) {
      ptx::griddepcontrol_launch_dependents();
      return;
    }
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

  // ---- tokens ----------------------------------------------------------------------------
  if (kMode == kCommit) {
    for (int t = 0; t < keep; ++t) {
      Token<kKda> tk;
      const char* kh = rec + (int64_t(t) * p.heads + h) * kHeadDim * 4;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float4 x = ld_f4(kh + (32 * c + 4 * sub) * 4);
        tk.k[4 * c] = x.x, tk.k[4 * c + 1] = x.y, tk.k[4 * c + 2] = x.z, tk.k[4 * c + 3] = x.w;
      }
      if constexpr (kKda) {
        const char* al = rec + lay.alpha + (int64_t(t) * p.value_heads + hv) * kHeadDim * 4;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float4 x = ld_f4(al + (32 * c + 4 * sub) * 4);
          tk.a[4 * c] = x.x, tk.a[4 * c + 1] = x.y, tk.a[4 * c + 2] = x.z, tk.a[4 * c + 3] = x.w;
        }
      } else {
        tk.a[0] = *reinterpret_cast<const float*>(rec + lay.alpha + (int64_t(t) * p.value_heads + hv) * 4);
      }
      tk.beta = *reinterpret_cast<const float*>(rec + lay.beta + (int64_t(t) * p.value_heads + hv) * 4);
      tk.v2 = *reinterpret_cast<const uint32_t*>(
          rec + lay.v + ((int64_t(t) * p.value_heads + hv) * p.dim_v + row) * 2);
      float unused[2];
      apply<kKda, false>(s, tk, 0.f, unused);
    }
  } else {
    Raw<kKda> raw;
    load_raw<kKda>(p, n, 0, h, hv, row, sub, raw);
    ptx::griddepcontrol_launch_dependents();
    for (int t = 0; t < steps; ++t) {
      Token<kKda> tk;
      prepare<kKda>(p, raw, dtb, a, tk);
      if (t + 1 < steps) load_raw<kKda>(p, n, t + 1, h, hv, row, sub, raw);  // in flight meanwhile
      float kq = 0.f;
#pragma unroll
      for (int i = 0; i < kLaneCh; ++i) kq = fmaf(tk.k[i], tk.q[i], kq);
      kq = group8_sum(kq);
      if (kMode == kVerify && live) {  // the replay record of token t
        if (blockIdx.x == 0 && hv % (p.value_heads / p.heads) == 0 && threadIdx.x < 8) {
          char* kh = rec + (int64_t(t) * p.heads + h) * kHeadDim * 4;
#pragma unroll
          for (int c = 0; c < 4; ++c)
            st_f4(kh + (32 * c + 4 * sub) * 4,
                  make_float4(tk.k[4 * c], tk.k[4 * c + 1], tk.k[4 * c + 2], tk.k[4 * c + 3]));
        }
        if (blockIdx.x == 0 && threadIdx.x < 8) {
          if constexpr (kKda) {
            char* al = rec + lay.alpha + (int64_t(t) * p.value_heads + hv) * kHeadDim * 4;
#pragma unroll
            for (int c = 0; c < 4; ++c)
              st_f4(al + (32 * c + 4 * sub) * 4,
                    make_float4(tk.a[4 * c], tk.a[4 * c + 1], tk.a[4 * c + 2], tk.a[4 * c + 3]));
          } else if (threadIdx.x == 0) {
            *reinterpret_cast<float*>(rec + lay.alpha + (int64_t(t) * p.value_heads + hv) * 4) = tk.a[0];
          }
          if (threadIdx.x == 0)
            *reinterpret_cast<float*>(rec + lay.beta + (int64_t(t) * p.value_heads + hv) * 4) = tk.beta;
        }
        if (sub == 0)
          *reinterpret_cast<uint32_t*>(
              rec + lay.v + ((int64_t(t) * p.value_heads + hv) * p.dim_v + row) * 2) = tk.v2;
      }
      float o[2];
      apply<kKda, true>(s, tk, kq, o);
      if (sub == 0)
        *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + n * p.o_stride_seq +
                                     t * p.o_stride_tok + int64_t(hv) * p.dim_v + row) =
            pack_bf16x2(o[0], o[1]);
    }
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
#define KERNRT_KDA_STEP_ENTRY(fam, is_kda, mode, name, blocks)                              \
  extern "C" __global__ void __launch_bounds__(kernrt::kda::kStepThreads, blocks)           \
      fam##_##name##_sm90a_bf16_k128(const __grid_constant__ kernrt::kda::KdaStepParams p) { \
    kernrt::kda::kda_step<is_kda, kernrt::kda::mode>(p);                                    \
  }

KERNRT_KDA_STEP_ENTRY(kda, true, kDecode, decode, 4)
KERNRT_KDA_STEP_ENTRY(kda, true, kVerify, verify, 3)
KERNRT_KDA_STEP_ENTRY(kda, true, kCommit, commit, 3)
KERNRT_KDA_STEP_ENTRY(gdn, false, kDecode, decode, 4)
KERNRT_KDA_STEP_ENTRY(gdn, false, kVerify, verify, 3)
KERNRT_KDA_STEP_ENTRY(gdn, false, kCommit, commit, 3)
