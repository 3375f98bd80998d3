// Parameter blocks of the KDA / GDN kernels, shared by the kernels and by every manifest that
// packs them. A manifest passes a block as one `bytes<N>` launch param whose pack writes the
// fields at the offsets asserted below; bytes no field covers are zero, so an optional pointer
// left out of the pack is null and turns its feature off. Plain data only.
//
// State: one fp32 line per sequence, [HV, V, K] (K contiguous: FlashKDA's and vLLM's
// "state_v_first" layout; fla's default is [HV, K, V]). Sequence n's line is at
// `state + line * state_stride` bytes with line = lines ? lines[n] : n. With a line table,
// line 0 is the null line: it reads as a zero state and is never written.
//
// Not checked here: pointer alignment, shapes, K = 128 (the generator refuses other K and
// writes shapes from one profile; see kernels/kda/README.md "Limits").
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace kernrt::kda {

constexpr int kHeadDim = 128;    // K, the key (reduction) dimension
constexpr int kMaxSteps = 8;     // verify tokens per sequence
constexpr int kStepRows = 32;    // value rows (of V) per decode / verify / commit block
constexpr int kStepThreads = 128;

// Flag bits of `flags`.
constexpr int32_t kFlagGate = 1;        // g is raw: log decay = -exp(A_log) * softplus(g + dt_bias)
constexpr int32_t kFlagLowerBound = 2;  // with kFlagGate: lower_bound * sigmoid(exp(A_log) * (g + dt_bias))
constexpr int32_t kFlagBetaSigmoid = 4; // beta is a logit: sigmoid(beta)
constexpr int32_t kFlagNegEigval = 8;   // with kFlagBetaSigmoid: 2 * sigmoid(beta)
constexpr int32_t kFlagL2norm = 16;     // q, k <- x / sqrt(sum x^2 + 1e-6)
constexpr int32_t kFlagGF32 = 32;       // g is f32, else bf16
constexpr int32_t kFlagBetaF32 = 64;    // beta is f32, else bf16

// Decode (1 token, state updated in place), verify (`steps` tokens, state read only, the
// outputs of every token and a replay record written) and commit (replays the first
// accepted[n] tokens of the record into the state, in place). Strides are in elements;
// the head stride is implicit (K for q/k/g, V for v/o, 1 for beta and GDN's g).
struct KdaStepParams {
  const void* q;            // [seqs, steps, H, K] bf16
  const void* k;            // like q (same strides)
  const void* v;            // [seqs, steps, HV, V] bf16
  const void* g;            // [seqs, steps, HV, K] (KDA) or [seqs, steps, HV] (GDN); bf16|f32
  const void* beta;         // [seqs, steps, HV] bf16|f32
  const float* A_log;       // [HV]; null: exp(A_log) = 1
  const float* dt_bias;     // [HV * K] (KDA) or [HV] (GDN); null: 0
  void* o;                  // [seqs, steps, HV, V] bf16
  void* state;              // pool base (+ the layer's byte offset)
  const int32_t* lines;     // [seqs], or null (line n)
  const int32_t* accepted;  // commit: [seqs] tokens to keep, 0..steps
  int64_t qk_stride_seq;
  int64_t qk_stride_tok;
  int64_t v_stride_seq;
  int64_t v_stride_tok;
  int64_t g_stride_seq;
  int64_t g_stride_tok;
  int64_t beta_stride_seq;
  int64_t beta_stride_tok;
  int64_t o_stride_seq;
  int64_t o_stride_tok;
  int64_t state_stride;     // bytes per line
  int64_t record_offset;    // bytes from a line to its verify record (verify / commit)
  int32_t heads;            // H
  int32_t value_heads;      // HV, a multiple of H
  int32_t dim_v;            // V, a multiple of kStepRows
  int32_t seqs;
  int32_t steps;            // 1..kMaxSteps
  int32_t flags;            // kFlag*
  float scale;              // applied to q after the l2norm
  float lower_bound;        // kFlagLowerBound
  void* state_out;          // decode / commit: the new state goes to this base (same line
                            // index and stride) instead of in place; null: in place
};

static_assert(sizeof(void*) == 8, "64-bit pointers");
static_assert(offsetof(KdaStepParams, q) == 0, "pack layout");
static_assert(offsetof(KdaStepParams, k) == 8, "pack layout");
static_assert(offsetof(KdaStepParams, v) == 16, "pack layout");
static_assert(offsetof(KdaStepParams, g) == 24, "pack layout");
static_assert(offsetof(KdaStepParams, beta) == 32, "pack layout");
static_assert(offsetof(KdaStepParams, A_log) == 40, "pack layout");
static_assert(offsetof(KdaStepParams, dt_bias) == 48, "pack layout");
static_assert(offsetof(KdaStepParams, o) == 56, "pack layout");
static_assert(offsetof(KdaStepParams, state) == 64, "pack layout");
static_assert(offsetof(KdaStepParams, lines) == 72, "pack layout");
static_assert(offsetof(KdaStepParams, accepted) == 80, "pack layout");
static_assert(offsetof(KdaStepParams, qk_stride_seq) == 88, "pack layout");
static_assert(offsetof(KdaStepParams, qk_stride_tok) == 96, "pack layout");
static_assert(offsetof(KdaStepParams, v_stride_seq) == 104, "pack layout");
static_assert(offsetof(KdaStepParams, v_stride_tok) == 112, "pack layout");
static_assert(offsetof(KdaStepParams, g_stride_seq) == 120, "pack layout");
static_assert(offsetof(KdaStepParams, g_stride_tok) == 128, "pack layout");
static_assert(offsetof(KdaStepParams, beta_stride_seq) == 136, "pack layout");
static_assert(offsetof(KdaStepParams, beta_stride_tok) == 144, "pack layout");
static_assert(offsetof(KdaStepParams, o_stride_seq) == 152, "pack layout");
static_assert(offsetof(KdaStepParams, o_stride_tok) == 160, "pack layout");
static_assert(offsetof(KdaStepParams, state_stride) == 168, "pack layout");
static_assert(offsetof(KdaStepParams, record_offset) == 176, "pack layout");
static_assert(offsetof(KdaStepParams, heads) == 184, "pack layout");
static_assert(offsetof(KdaStepParams, value_heads) == 188, "pack layout");
static_assert(offsetof(KdaStepParams, dim_v) == 192, "pack layout");
static_assert(offsetof(KdaStepParams, seqs) == 196, "pack layout");
static_assert(offsetof(KdaStepParams, steps) == 200, "pack layout");
static_assert(offsetof(KdaStepParams, flags) == 204, "pack layout");
static_assert(offsetof(KdaStepParams, scale) == 208, "pack layout");
static_assert(offsetof(KdaStepParams, lower_bound) == 212, "pack layout");
static_assert(offsetof(KdaStepParams, state_out) == 216, "pack layout");
static_assert(sizeof(KdaStepParams) == 224, "pack size");

// Verify record of one sequence (at line + record_offset), always laid out for kMaxSteps
// tokens so commit can index it; byte offsets for H, HV, V (KDA: per-channel decays):
//   khat  f32  [kMaxSteps, H, K]          at 0                 normalized k
//   alpha f32  [kMaxSteps, HV, K] (KDA) or [kMaxSteps, HV] (GDN)   exp(log decay)
//   beta  f32  [kMaxSteps, HV]            effective beta
//   v     bf16 [kMaxSteps, HV, V]         the verify tokens' values
// Every part starts 16-byte aligned (all sizes are multiples of 16 bytes for HV % 4 == 0
// or K-wide parts).
struct StepRecord {
  int64_t alpha, beta, v, bytes;
};

__host__ __device__ constexpr int64_t align16(int64_t b) { return (b + 15) / 16 * 16; }

__host__ __device__ constexpr StepRecord step_record(bool kda, int64_t H, int64_t HV,
                                                     int64_t V) {
  return StepRecord{
      align16(kMaxSteps * H * kHeadDim * 4),
      align16(kMaxSteps * H * kHeadDim * 4) + align16(kMaxSteps * HV * (kda ? kHeadDim : 1) * 4),
      align16(kMaxSteps * H * kHeadDim * 4) + align16(kMaxSteps * HV * (kda ? kHeadDim : 1) * 4) +
          align16(kMaxSteps * HV * 4),
      align16(kMaxSteps * H * kHeadDim * 4) + align16(kMaxSteps * HV * (kda ? kHeadDim : 1) * 4) +
          align16(kMaxSteps * HV * 4) + align16(kMaxSteps * HV * V * 2)};
}

static_assert(step_record(true, 16, 16, 128).bytes == 8 * (16 * 128 * 4 * 2 + 16 * 4 + 16 * 128 * 2),
              "record size, KDA H = HV = 16, V = 128");
static_assert(step_record(false, 16, 32, 128).v == 8 * (16 * 128 * 4 + 32 * 4 + 32 * 4),
              "record offsets, GDN");

// ---- chunked forward (prefill) -----------------------------------------------------------
constexpr int kChunk = 16;         // tokens per chunk
constexpr int kVTile = 128;        // value rows (of V) per block
constexpr int kChunkThreads = 512; // 8 state warps (16 value rows each) + 8 prep warps

// Flag bits of KdaChunkParams::flags beyond the shared kFlag* above.
constexpr int32_t kFlagNoOutput = 128;    // o is not written (context-parallel transitions)
// kda_cp_combine: the last segment's transition was not computed (c64's phase 1 skips it); the
// combine stops at that segment's initial state and phase 3 writes the final state.
constexpr int32_t kFlagCpLastInPhase3 = 256;

// q, k [B, T, H, K] (dense; cu_seqlens null, sequence n = batch row n, `tokens` = T) or
// [1, total, H, K] with cu_seqlens [seqs + 1] i32 prefix sums (varlen); v, o [.., HV, V]; g
// [.., HV, K] (KDA) or [.., HV] (GDN); beta [.., HV]. Strides in elements (the head stride
// is implicit). States as in KdaStepParams: sequence n's initial state is the line
// h0_lines ? h0_lines[n] : n of `h0` (null: zeros; with a line table, line 0 reads zeros),
// its final state the line of `ht` (null: not written; line 0 with a table: not written).
// Context parallel (seg_chunks > 0): a sequence is cut into cp_segs segments of seg_chunks
// chunks, grid.z = seqs * cp_segs; cp_phase 1 computes every segment's state from zero and its
// transition (kernels/kda/README.md "Long sequences"), 2 (kda_cp_combine) chains them, 3
// computes the outputs of segments 1.. from their combined initial states; all use cp_scratch.
struct KdaChunkParams {
  const void* q;
  const void* k;
  const void* v;
  const void* g;
  const void* beta;
  const float* A_log;        // [HV]; null: exp(A_log) = 1
  const float* dt_bias;      // [HV * K] (KDA) or [HV] (GDN); null: 0
  void* o;
  const void* h0;
  void* ht;
  const int32_t* h0_lines;
  const int32_t* ht_lines;
  const int32_t* cu_seqlens;
  void* cp_scratch;
  int64_t qk_stride_seq;
  int64_t qk_stride_tok;
  int64_t v_stride_seq;
  int64_t v_stride_tok;
  int64_t g_stride_seq;
  int64_t g_stride_tok;
  int64_t beta_stride_seq;
  int64_t beta_stride_tok;
  int64_t o_stride_seq;
  int64_t o_stride_tok;
  int64_t h0_stride;         // bytes per line
  int64_t ht_stride;
  int32_t tokens;            // T (dense)
  int32_t seqs;
  int32_t heads;
  int32_t value_heads;
  int32_t dim_v;             // a multiple of kVTile
  int32_t flags;
  float scale;
  float lower_bound;
  int32_t seg_chunks;
  int32_t cp_phase;          // 0 none, 1 transitions, 2 combine, 3 outputs
  int32_t cp_segs;           // segments per sequence (grid.z of phases 1 and 3 = seqs * cp_segs)
  int32_t reserved;
};

static_assert(offsetof(KdaChunkParams, q) == 0, "pack layout");
static_assert(offsetof(KdaChunkParams, k) == 8, "pack layout");
static_assert(offsetof(KdaChunkParams, v) == 16, "pack layout");
static_assert(offsetof(KdaChunkParams, g) == 24, "pack layout");
static_assert(offsetof(KdaChunkParams, beta) == 32, "pack layout");
static_assert(offsetof(KdaChunkParams, A_log) == 40, "pack layout");
static_assert(offsetof(KdaChunkParams, dt_bias) == 48, "pack layout");
static_assert(offsetof(KdaChunkParams, o) == 56, "pack layout");
static_assert(offsetof(KdaChunkParams, h0) == 64, "pack layout");
static_assert(offsetof(KdaChunkParams, ht) == 72, "pack layout");
static_assert(offsetof(KdaChunkParams, h0_lines) == 80, "pack layout");
static_assert(offsetof(KdaChunkParams, ht_lines) == 88, "pack layout");
static_assert(offsetof(KdaChunkParams, cu_seqlens) == 96, "pack layout");
static_assert(offsetof(KdaChunkParams, cp_scratch) == 104, "pack layout");
static_assert(offsetof(KdaChunkParams, qk_stride_seq) == 112, "pack layout");
static_assert(offsetof(KdaChunkParams, qk_stride_tok) == 120, "pack layout");
static_assert(offsetof(KdaChunkParams, v_stride_seq) == 128, "pack layout");
static_assert(offsetof(KdaChunkParams, v_stride_tok) == 136, "pack layout");
static_assert(offsetof(KdaChunkParams, g_stride_seq) == 144, "pack layout");
static_assert(offsetof(KdaChunkParams, g_stride_tok) == 152, "pack layout");
static_assert(offsetof(KdaChunkParams, beta_stride_seq) == 160, "pack layout");
static_assert(offsetof(KdaChunkParams, beta_stride_tok) == 168, "pack layout");
static_assert(offsetof(KdaChunkParams, o_stride_seq) == 176, "pack layout");
static_assert(offsetof(KdaChunkParams, o_stride_tok) == 184, "pack layout");
static_assert(offsetof(KdaChunkParams, h0_stride) == 192, "pack layout");
static_assert(offsetof(KdaChunkParams, ht_stride) == 200, "pack layout");
static_assert(offsetof(KdaChunkParams, tokens) == 208, "pack layout");
static_assert(offsetof(KdaChunkParams, seqs) == 212, "pack layout");
static_assert(offsetof(KdaChunkParams, heads) == 216, "pack layout");
static_assert(offsetof(KdaChunkParams, value_heads) == 220, "pack layout");
static_assert(offsetof(KdaChunkParams, dim_v) == 224, "pack layout");
static_assert(offsetof(KdaChunkParams, flags) == 228, "pack layout");
static_assert(offsetof(KdaChunkParams, scale) == 232, "pack layout");
static_assert(offsetof(KdaChunkParams, lower_bound) == 236, "pack layout");
static_assert(offsetof(KdaChunkParams, seg_chunks) == 240, "pack layout");
static_assert(offsetof(KdaChunkParams, cp_phase) == 244, "pack layout");
static_assert(offsetof(KdaChunkParams, cp_segs) == 248, "pack layout");
static_assert(sizeof(KdaChunkParams) == 256, "pack size");

}  // namespace kernrt::kda
