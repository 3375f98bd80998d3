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
// Entries: {kda,gdn}_{decode,verify,commit}_sm90a_bf16_k128 (and KDA's live alternatives,
// "entries" below), one `const __grid_constant__
// KdaStepParams`. Grid (V / 32, HV, seqs), block 128: a block owns 32 value rows of one head
// of one sequence (16 KiB of state); warp w holds rows 8w..8w+7, its lane group i (lanes
// 8i..8i+7) rows 8w+2i and 8w+2i+1, and lane j of a group key channels {32c + 4j + e}
// (c, e in 0..3), so every 16-byte load of a warp covers four 128-byte row segments. Row dots
// reduce over the 8 lanes of a group (3 shuffles). The state rows and the tokens' values are
// loaded first; meanwhile the block prepares its tokens once (step_tokens.cuh: gate, l2norm,
// beta, k.q into shared memory, which every lane group reads). decode and commit apply the
// same update code (apply, one kTree) and decode and verify the same preparation, so verify +
// commit(a) leaves the state bit for bit where a decode steps would. KDA's verify runs the 8
// tokens in the chunk form (kda_verify_chunk below: independent dots against the initial
// state, per-head coefficients, a scalar solve per row): it keeps no state, so only its
// outputs' rounding differs from the recurrence, and its record is the same.
// Under PDL (the manifests launch with it) KDA's verify and commit ask L2 for their block's
// state tile before griddepcontrol.wait and release the next grid at block start, so the first
// blocks of the next call stream in while this one drains; the decodes (KDA and GDN) do so in
// their first 512 blocks and every block asks L2 for the tile 512 blocks ahead, its line index
// read before the wait and the prefetch issued after its own loads (entries below: what each
// prefetch bought). Prefetches change timing only.
//
// Not checked here: K = 128, V % 32, HV % H, steps <= 8, distinct lines for distinct
// sequences, accepted[n] <= the verify's steps (clamped), the record fitting the line region
// (the generator sizes bytes_per_seq; the runtime checks line indices against the pool).
#include "common/ptx/ldst.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/tma.cuh"
#include "kda/kda_vec.cuh"
#include "kda/params.h"
#include "kda/step_tokens.cuh"

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
// when kOut. Shared by decode and commit (bit-identical states) and the recurrent verify.
// `update` false skips the rank-1 update (the recurrent verify's last token). kTree: the
// lane's dots in 4 partial sums (chains of 4 FMA where one of 16 stood between the state's
// arrival and the update); decode and commit must agree on it.
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

// The group's two state rows from `rows` (the first of them; the second K floats on) in a
// lane's layout (element i = key channel 32 (i / 4) + 4 sub + i % 4); zeros and nothing read
// for the null line.
__device__ __forceinline__ void load_state_rows(const char* rows, bool live, int sub,
                                                float (&s)[2][kLaneCh]) {
#pragma unroll
  for (int w = 0; w < 2; ++w)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const float4 x = live ? ld_f4(rows + w * kHeadDim * 4 + (32 * c + 4 * sub) * 4)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
      s[w][4 * c] = x.x, s[w][4 * c + 1] = x.y, s[w][4 * c + 2] = x.z, s[w][4 * c + 3] = x.w;
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

// The tile `dist` linear block ids after this block's (x fastest: the order blocks are
// dispatched in) for an L2 prefetch: `raw` is its line index, read with ld.global.cg before
// griddepcontrol.wait and consumed only by prefetch_ahead after the block's own loads, so the
// reading warp does not wait for it on its way to them.
struct AheadTile {
  int x, hv, n;
  int32_t raw;
};

__device__ __forceinline__ AheadTile ahead_tile(const KdaStepParams& p, int dist) {
  const int gx = gridDim.x, gy = gridDim.y;
  const int b = blockIdx.x + gx * (blockIdx.y + gy * blockIdx.z) + dist;
  AheadTile a{b % gx, (b / gx) % gy, b / gx / gy, 0};
  if (p.lines != nullptr && a.n < p.seqs) a.raw = ptx::ld_global_cg_s32(p.lines + a.n);
  return a;
}

__device__ __forceinline__ void prefetch_ahead(const KdaStepParams& p, const AheadTile& a) {
  if (a.n >= p.seqs || (p.lines != nullptr && a.raw == 0)) return;
  const int64_t line = p.lines != nullptr ? a.raw : a.n;
  ptx::bulk_prefetch_l2(static_cast<const char*>(p.state) + line * p.state_stride +
                            (int64_t(a.hv) * p.dim_v + a.x * kStepRows) * (kHeadDim * 4),
                        kStepRows * kHeadDim * 4);
}

// Block start of every step entry. kPf >= 0: thread 0 asks L2 for the block's state tile and
// the next grid is released before the wait for the previous one's writes; kPf > 0: only the
// first kPf blocks ask for their own tile (every later one was asked for kPf blocks earlier,
// and the line index read stalls the token warp, warp 0, one L2 round trip before its loads),
// and thread 32 reads the line index of the tile kPf blocks ahead (returned for
// prefetch_ahead).
template <int kPf>
__device__ __forceinline__ void enter_step(const KdaStepParams& p, int hv, int n,
                                           AheadTile& ahead) {
  if constexpr (kPf >= 0) {
    const int lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0 && (kPf == 0 || lin < kPf)) prefetch_state_tile(p, blockIdx.x, hv, n);
    if (kPf > 0 && threadIdx.x == 32) ahead = ahead_tile(p, kPf);
    ptx::griddepcontrol_launch_dependents();
  }
  ptx::griddepcontrol_wait();
}

// Where a step block's thread works: sequence n, value head hv and its q/k head h, the lane
// coordinates (group grp of 8 lanes owns two state rows, lane sub of it a token), the first
// of its two rows.
struct StepLane {
  int hv, n, lane, warp, grp, sub, row, h;
};
__device__ __forceinline__ StepLane step_lane(const KdaStepParams& p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  return {static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z), lane, warp, lane >> 3,
          lane & 7, static_cast<int>(blockIdx.x) * kStepRows + warp * 8 + (lane >> 3) * 2,
          static_cast<int>(blockIdx.y) / (p.value_heads / p.heads)};
}

// Sequence n's state line: line 0 is the null line (no state read, nothing written).
struct StepLine {
  int64_t line;
  bool live;
  char* base;  // the line's first byte
  char* rec;   // its verify record
};
__device__ __forceinline__ StepLine step_line(const KdaStepParams& p, int n) {
  const int64_t line = p.lines != nullptr ? p.lines[n] : n;
  char* base = static_cast<char*>(p.state) + line * p.state_stride;
  return {line, p.lines == nullptr || line != 0, base, base + p.record_offset};
}

// kPf < 0: griddepcontrol.wait first, the next grid released after the token preparation.
// kPf >= 0: before the wait, the block's state tile is asked of L2 (kPf > 0: by the first kPf
// blocks only) and every thread releases the next grid (under PDL the first blocks of the next
// call stream their state in while this call drains); kPf > 0: after its own loads, thread 32
// also asks L2 for the tile of the block kPf linear ids ahead (bytes in flight without
// registers; its line index read before the wait). kSplit (KDA decode): the decays spread
// over the block (step_tokens.cuh); kTree: apply's dots in 4 partial sums (decode and commit
// of one manifest must agree on it).
template <bool kKda, int kMode, int kPf, bool kSplit, bool kTree>
__device__ __forceinline__ void kda_step(const KdaStepParams& p) {
  const auto [hv, n, lane, warp, grp, sub, row, h] = step_lane(p);
  const int steps = kMode == kDecode ? 1 : (p.steps < kMaxSteps ? p.steps : kMaxSteps);
  __shared__ StepSmem<kKda> sm;

  AheadTile ahead{};
  enter_step<kPf>(p, hv, n, ahead);

  // ---- the line, the record, the token inputs and the state rows -----------------------
  const auto [line, live, base, rec] = step_line(p, n);
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
    load_token_inputs<kKda, kSplit>(p, n, steps, h, hv, in);  // first: before the state
  }
  char* rows = base + (int64_t(hv) * p.dim_v + row) * (kHeadDim * 4);
  float s[2][kLaneCh];
  load_state_rows(rows, live, sub, s);
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
  if constexpr (kPf > 0) {
    if (threadIdx.x == 32) prefetch_ahead(p, ahead);
  }

  // ---- tokens ----------------------------------------------------------------------------
  if (kMode == kCommit) {
    stage_record<kKda>(p, keep, h, hv, rec, lay, sm);
  } else {
    const bool rec_on = kMode == kVerify && live && blockIdx.x == 0;
    prepare_tokens<kKda, kMode == kVerify, kSplit>(
        p, steps, h, hv, in, rec, lay, rec_on && hv % (p.value_heads / p.heads) == 0, rec_on, sm);
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
      apply<kKda, false, kTree>(s, tk, 0.f, o);
      continue;
    }
    if (kMode == kVerify && live && sub == 0)  // the replay record's values of token t
      *reinterpret_cast<uint32_t*>(
          rec + lay.v + ((int64_t(t) * p.value_heads + hv) * p.dim_v + row) * 2) = tk.v2;
    apply<kKda, true, kTree>(s, tk, sm.kq[t], o, kMode != kVerify || t + 1 < steps);
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

// ---- verify in the chunk form (kda_verify_chunk) ------------------------------------------
// With P_t = prod_{u<=t} alpha_u and W_tj = prod_{u=j+1..t} alpha_u per key channel (products
// of factors <= 1: no gate magnitude overflows them), a state row s_0 after the tokens 0..t is
//   s_t = s_0 o P_t + sum_{j<=t} u_j (k_j o W_tj),   u_j = beta_j r_j,   so
//   r_t = v_t - x_t - sum_{j<t} A_tj u_j,   o_t = y_t + sum_{j<=t} B_tj u_j,
// x_t = s_0 . (P_t o k_t), y_t = s_0 . (P_t o q_t), A_tj = k_t . (W_tj o k_j), B_tj =
// q_t . (W_tj o k_j), B_tt = k_t . q_t. A row's 16 dots against s_0 are independent (16 FMA an
// element for 8 tokens where the recurrence chains 4 a token, 31 in all), the 56 coefficients
// are the head's (computed once per block for its 32 rows) and the solve is scalar: lane t of
// a group owns token t, 8 steps of one shuffle. verify keeps no state, so only its outputs
// depend on this rounding order (gated against float64); the record is prepare_tokens' as
// before: commit(a) still equals a decode steps bit for bit.
struct ChunkSmem {
  float red[56][136];      // per-channel terms of A_tj (rows 0..27) and B_tj (28..55), j < t;
                           // stride 136: the pair sums' float4 reads are conflict-free
  float cf[kMaxSteps][16]; // row t: A_t0..A_t7, B_t0..B_t7 (zero where j >= t, resp. j > t)
};

__device__ __forceinline__ int pair_index(int t, int j) { return t * (t - 1) / 2 + j; }

// Thread c = key channel c: column c of sm.k / sm.q becomes P_t k_t / P_t q_t in place (only
// this thread reads it), the per-channel terms of every A_tj, B_tj go to cs.red and cs.cf
// gets its diagonal (B_tt) and zeros. Tokens >= steps act as alpha 1, k = q = 0.
template <bool kKda>
__device__ __forceinline__ void chunk_terms(int steps, StepSmem<kKda>& sm, ChunkSmem& cs) {
  const int c = threadIdx.x;
  float a[kMaxSteps], k[kMaxSteps], q[kMaxSteps];
#pragma unroll
  for (int t = 0; t < kMaxSteps; ++t) {
    const bool on = t < steps;
    a[t] = on ? sm.a[t][kKda ? c : 0] : 1.f;
    k[t] = on ? sm.k[t][c] : 0.f;
    q[t] = on ? sm.q[t][c] : 0.f;
  }
  if (c < kMaxSteps * 16) {
    const int t = c >> 4, col = c & 15;
    cs.cf[t][col] = col == 8 + t && t < steps ? sm.kq[t] : 0.f;
  }
  float P = 1.f;
#pragma unroll
  for (int t = 0; t < kMaxSteps; ++t) {
    P *= a[t];
    sm.k[t][c] = P * k[t], sm.q[t][c] = P * q[t];
  }
#pragma unroll
  for (int j = 0; j + 1 < kMaxSteps; ++j) {
    float kw = k[j];  // k_j o W_tj, one factor more per t
#pragma unroll
    for (int t = j + 1; t < kMaxSteps; ++t) {
      kw *= a[t];
      cs.red[pair_index(t, j)][c] = k[t] * kw;
      cs.red[28 + pair_index(t, j)][c] = q[t] * kw;
    }
  }
}

// Threads 0..111: coefficient i / 2 summed over half the channels (alternate float4s), the
// halves added by one shuffle, written into cs.cf.
__device__ __forceinline__ void chunk_sums(ChunkSmem& cs) {
  const int i = threadIdx.x;
  if (i >= 112) return;  // whole half warps
  const int r = i >> 1, half = i & 1;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int m = 0; m < 16; ++m) {
    const float4 x = *reinterpret_cast<const float4*>(&cs.red[r][8 * m + 4 * half]);
    acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
  }
  float sum = (acc.x + acc.y) + (acc.z + acc.w);
  sum += __shfl_xor_sync(i >= 96 ? 0x0000ffffu : 0xffffffffu, sum, 1);
  if (half == 0) {
    int j = r < 28 ? r : r - 28, t = 1;
    while (j >= t) j -= t, ++t;
    cs.cf[t][(r < 28 ? 0 : 8) + j] = sum;
  }
}

template <bool kKda, int kPf>
__device__ __forceinline__ void kda_verify_chunk(const KdaStepParams& p) {
  const auto [hv, n, lane, warp, grp, sub, row, h] = step_lane(p);
  const int steps = p.steps < kMaxSteps ? p.steps : kMaxSteps;
  __shared__ StepSmem<kKda> sm;
  __shared__ ChunkSmem cs;

  AheadTile none{};  // kPf 0: nothing ahead
  enter_step<kPf>(p, hv, n, none);

  const auto [line, live, base, rec] = step_line(p, n);
  const StepRecord lay = step_record(kKda, p.heads, p.value_heads, p.dim_v);
  TokenLoads in;
  load_token_inputs<kKda>(p, n, steps, h, hv, in);
  const char* rows = base + (int64_t(hv) * p.dim_v + row) * (kHeadDim * 4);
  float s[2][kLaneCh];
  load_state_rows(rows, live, sub, s);
  const bool mine = sub < steps;  // lane sub of a group owns token sub
  const uint32_t v2 = mine ? ptx::ld_global_nc_u32(static_cast<const uint16_t*>(p.v) + n * p.v_stride_seq +
                                                   sub * p.v_stride_tok + int64_t(hv) * p.dim_v + row)
                           : 0u;
  const bool rec_on = live && blockIdx.x == 0;
  prepare_tokens<kKda, true>(p, steps, h, hv, in, rec, lay,
                             rec_on && hv % (p.value_heads / p.heads) == 0, rec_on, sm);
  __syncthreads();
  chunk_terms<kKda>(steps, sm, cs);
  __syncthreads();
  chunk_sums(cs);

  // the row dots x_t, y_t: [row w][x, y][token t], partial over the lane's 16 channels
  float d[2][2][kMaxSteps];
#pragma unroll
  for (int w = 0; w < 2; ++w)
#pragma unroll
    for (int t = 0; t < kMaxSteps; ++t) d[w][0][t] = 0.f, d[w][1][t] = 0.f;
#pragma unroll
  for (int c = 0; c < 4; ++c)
#pragma unroll
    for (int t = 0; t < kMaxSteps; ++t) {
      const float4 kv = *reinterpret_cast<const float4*>(&sm.k[t][32 * c + 4 * sub]);
      const float4 qv = *reinterpret_cast<const float4*>(&sm.q[t][32 * c + 4 * sub]);
      const float kk[4] = {kv.x, kv.y, kv.z, kv.w}, qq[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
      for (int w = 0; w < 2; ++w)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          d[w][0][t] = fmaf(s[w][4 * c + e], kk[e], d[w][0][t]);
          d[w][1][t] = fmaf(s[w][4 * c + e], qq[e], d[w][1][t]);
        }
    }
  // over the group's 8 lanes, transposed: at each level a lane keeps the half of the tokens
  // its lane bit names and sends the other half; lane sub ends with token sub's sums (7
  // shuffles per 8 dots where a butterfly per dot takes 24)
#pragma unroll
  for (int half = 4; half >= 1; half >>= 1) {
    const bool hi = (sub & half) != 0;
#pragma unroll
    for (int w = 0; w < 2; ++w)
#pragma unroll
      for (int kd = 0; kd < 2; ++kd)
#pragma unroll
        for (int i = 0; i < half; ++i) {
          const float lo_v = d[w][kd][i], hi_v = d[w][kd][i + half];
          const float recv = __shfl_xor_sync(0xffffffffu, hi ? lo_v : hi_v, half);
          d[w][kd][i] = (hi ? hi_v : lo_v) + recv;
        }
  }
  __syncthreads();  // cs.cf complete

  // the solve: lane t owns token t; at step j lane j's u_j is final and goes to its group
  const float beta = mine ? sm.beta[sub] : 0.f;
  float A[kMaxSteps], B[kMaxSteps];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const float4 x = *reinterpret_cast<const float4*>(&cs.cf[sub][4 * m]);
    const float4 y = *reinterpret_cast<const float4*>(&cs.cf[sub][8 + 4 * m]);
    A[4 * m] = x.x, A[4 * m + 1] = x.y, A[4 * m + 2] = x.z, A[4 * m + 3] = x.w;
    B[4 * m] = y.x, B[4 * m + 1] = y.y, B[4 * m + 2] = y.z, B[4 * m + 3] = y.w;
  }
  const float vv[2] = {bf16_lo(v2), bf16_hi(v2)};
  float accA[2] = {0.f, 0.f}, accB[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < kMaxSteps; ++j) {
    if (j >= steps) break;
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const float u = beta * ((vv[w] - d[w][0][0]) - accA[w]);
      const float uj = __shfl_sync(0xffffffffu, u, (lane & ~7) | j);
      accA[w] = fmaf(A[j], uj, accA[w]);
      accB[w] = fmaf(B[j], uj, accB[w]);
    }
  }
  if (mine) {
    *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + n * p.o_stride_seq +
                                 sub * p.o_stride_tok + int64_t(hv) * p.dim_v + row) =
        pack_bf16x2(d[0][1][0] + accB[0], d[1][1][0] + accB[1]);
    if (live)  // the replay record's values of token sub
      *reinterpret_cast<uint32_t*>(rec + lay.v + ((int64_t(sub) * p.value_heads + hv) * p.dim_v + row) * 2) = v2;
  }
}

}  // namespace kernrt::kda

// ---- entries -------------------------------------------------------------------------------
// Per entry: min blocks per SM (registers: decode <= 128, the recurrent verify and commit
// <= 168), kPf, kSplit, kTree; the shipped ones carry the plain names, the _base / _split ones
// are the live alternatives timed beside them (kda_step_variants.py). A manifest must pair a
// decode and a commit of the same kTree (commit(a) = a decode steps, bit for bit).
// Prefetch (kPf) per entry, from decode_x8 / verify_commit_x4 timings on the H200 (per call,
// medians of 180 graph replays, each variant beside the others in one process; two GPUs):
// KDA decode B64 38.1 us (kPf -1) / 37.4 (0) / 36.6 (512) / 40.4 (1024), B256 138.4 / 136.8 /
// 137.3 / 161.9 (a distance of 1024 blocks = 16 MiB of tiles is evicted before use); KDA
// verify + commit 105.6 / 104.7 (-1) against 104.0 / 104.3 (0); GDN decode B64 35.1 (-1) /
// 35.5 (0) / 36.0 (512), B256 133.4 / 133.5 / 135.7. Those kPf >= 0 asked for the own tile in
// every block and read the ahead tile's line index after the state loads: two L2 round trips
// stalled warps 0 (the token's) and 1 before their loads. With the own tile in the first 512
// blocks only and the ahead index read before the wait (kPf 512 now): KDA decode B64 36.41 ->
// 35.35, B256 137.39 -> 132.30; GDN decode (was -1) B64 34.94 -> 34.29, B256 132.66 -> 131.19.
// Lost beside it (same process): the ahead prefetch before the wait 39.00 / 142.78, its index
// before the wait but the own tile in every block 37.49 / 140.63 (by warp 3: 37.37 / 140.41),
// at most 4 blocks per SM 36.47 / 137.61 (with the new prefetch 35.61 / 133.03).
#define KERNRT_KDA_STEP_ENTRY(fam, is_kda, mode, name, blocks, pf, split, tree)              \
  extern "C" __global__ void __launch_bounds__(kernrt::kda::kStepThreads, blocks)           \
      fam##_##name##_sm90a_bf16_k128(const __grid_constant__ kernrt::kda::KdaStepParams p) { \
    kernrt::kda::kda_step<is_kda, kernrt::kda::mode, pf, split, tree>(p);                  \
  }
#define KERNRT_KDA_VERIFY_CHUNK_ENTRY(fam, is_kda, name, blocks, pf)                         \
  extern "C" __global__ void __launch_bounds__(kernrt::kda::kStepThreads, blocks)           \
      fam##_##name##_sm90a_bf16_k128(const __grid_constant__ kernrt::kda::KdaStepParams p) { \
    kernrt::kda::kda_verify_chunk<is_kda, pf>(p);                                           \
  }

KERNRT_KDA_STEP_ENTRY(kda, true, kDecode, decode, 4, 512, true, true)
KERNRT_KDA_VERIFY_CHUNK_ENTRY(kda, true, verify, 4, 0)
KERNRT_KDA_STEP_ENTRY(kda, true, kCommit, commit, 3, 0, false, true)
KERNRT_KDA_STEP_ENTRY(kda, true, kDecode, decode_split, 4, 512, true, false)
KERNRT_KDA_STEP_ENTRY(kda, true, kDecode, decode_base, 4, 512, false, false)
KERNRT_KDA_STEP_ENTRY(kda, true, kVerify, verify_base, 3, 0, false, false)
KERNRT_KDA_STEP_ENTRY(kda, true, kCommit, commit_base, 3, 0, false, false)
KERNRT_KDA_STEP_ENTRY(gdn, false, kDecode, decode, 4, 512, false, false)
KERNRT_KDA_STEP_ENTRY(gdn, false, kVerify, verify, 3, -1, false, false)
KERNRT_KDA_STEP_ENTRY(gdn, false, kCommit, commit, 3, -1, false, false)
