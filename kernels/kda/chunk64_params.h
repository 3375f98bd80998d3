// Parameter block of kda_chunk64_state_sm90a_f16_k128 (kda_chunk64_state.cu), the 64-token
// chunk's state step alone (kernels/kda/chunk64.md step 1), and those of the pipelined state
// step and the preps below (prep v4, GDN's). Owns the field layouts the generator
// (runtime/python/kernrt/gen/kda_chunk64.py) packs, asserted below; all operand
// buffers are contiguous, N sequences x HV heads x NC chunks, in the layouts of the comments.
// Not checked here: the buffers' extents (the manifest's shapes), V % 128.
#pragma once

#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

namespace kernrt::kda {

struct Chunk64StateParams {
  const __half* kq;     // [N, HV, NC, 128, K]: rows 0..63 k^ a, rows 64..127 q^ a (tokens)
  const __half* kbt;    // [N, HV, NC, K, 64]: (k^ b)^T, one row per key channel
  const __half* tmb;    // [N, HV, NC, 64, 64]: Tm Diag(beta), row t, column t'
  const __half* aqk;    // [N, HV, NC, 64, 64]: Aqk (lower incl. the diagonal)
  const float* gamma;   // [N, HV, NC, K]: the chunk's decay per key channel
  const uint16_t* v;    // [N, HV, NC, 64, V] bf16
  const float* x0;      // [N, HV, V, K] initial state
  float* xt;            // [N, HV, V, K] final state
  float* o;             // [N, HV, NC, 64, V] fp32 outputs (before the bf16 rounding)
  int32_t chunks;       // NC
  int32_t dim_v;        // V
};

static_assert(offsetof(Chunk64StateParams, kq) == 0, "pack layout");
static_assert(offsetof(Chunk64StateParams, kbt) == 8, "pack layout");
static_assert(offsetof(Chunk64StateParams, tmb) == 16, "pack layout");
static_assert(offsetof(Chunk64StateParams, aqk) == 24, "pack layout");
static_assert(offsetof(Chunk64StateParams, gamma) == 32, "pack layout");
static_assert(offsetof(Chunk64StateParams, v) == 40, "pack layout");
static_assert(offsetof(Chunk64StateParams, x0) == 48, "pack layout");
static_assert(offsetof(Chunk64StateParams, xt) == 56, "pack layout");
static_assert(offsetof(Chunk64StateParams, o) == 64, "pack layout");
static_assert(offsetof(Chunk64StateParams, chunks) == 72, "pack layout");
static_assert(offsetof(Chunk64StateParams, dim_v) == 76, "pack layout");
static_assert(sizeof(Chunk64StateParams) == 80, "pack size");

// Parameter block of kda_chunk64_state2_sm90a_f16_k128 (kda_chunk64_state2.cu, the pipelined
// state step, the product's): Chunk64StateParams's operands in the slots of Chunk64Slots (below),
// v and o in the product layout, the states by line.
// - Sequences: dense (cu_seqlens null: sequence n = rows n T .. n T + T - 1, NC = `chunks`) or
//   varlen (cu_seqlens [seqs + 1] i32, sequence n = rows cu[n] .. cu[n + 1] - 1); grid.z = seqs.
// - v [rows, HV, V] bf16 (token row r, value head hv at (r HV + hv) V; HV = gridDim.y), o
//   likewise, rounded to nearest even; rows past a sequence are neither read (zeros) nor stored.
// - Initial state: line x0_lines ? x0_lines[n] : n of `x0` (x0_stride bytes a line), [HV, V, K]
//   fp32 (FlashKDA's and vLLM's layout); x0 null: zeros; with a line table, line 0 reads zeros.
//   Final state: the line of `xt` (xt null: not written; with a table, line 0 is not written).
//   A line read and written in place is safe: a block reads its rows before the first chunk and
//   writes them after the last.
struct Chunk64State2Params {
  const __half* kq;     // as Chunk64StateParams, at the slots of Chunk64Slots
  const __half* kbt;
  const __half* tmb;
  const __half* aqk;
  const float* gamma;
  const uint16_t* v;    // [rows, HV, V] bf16
  const float* x0;      // initial state lines, or null
  float* xt;            // final state lines, or null
  uint16_t* o;          // [rows, HV, V] bf16
  int32_t chunks;       // dense: NC = ceil(T / 64); varlen: unused
  int32_t dim_v;        // V
  int32_t tokens;       // dense: T; varlen: unused
  int32_t pad;
  const int32_t* cu_seqlens;  // varlen: [seqs + 1]; null: dense
  const int32_t* x0_lines;    // [seqs], or null (line n)
  const int32_t* xt_lines;    // [seqs], or null (line n)
  int64_t x0_stride;          // bytes per line of x0
  int64_t xt_stride;          // bytes per line of xt
  // Context parallel (cp_phase 1 or 3; 0: one pass): sequence n's segment s is item
  // n cp_segs + s (block z in phase 3, cp_order[z] in phase 1); of its NC chunks the last
  // segments take seg_chunks each from the end and segment 0 the rest (cp_segment,
  // chunk64_seqs.cuh; c16's kda_chunk.cu fills from the start instead). The last populated segment
  // has no phase-1 block: phase 3 writes the final state from it, and kda_cp_combine (flag
  // kFlagCpLastInPhase3) stops at its initial state. cp_scratch is kda_chunk.cu's layout
  // (KdaChunkParams' comment): per (sequence, segment, value head) B [V, K], M [K, K], I [V, K]
  // over `seqs` sequences.
  float* cp_scratch;
  int32_t cp_phase;
  int32_t cp_segs;
  int32_t seg_chunks;         // 64-token chunks per segment
  int32_t seqs;               // the call's sequences (the scratch's extent)
  // Decay-bounded context parallel (GDN; null: every segment exact, as KDA's): per chunk slot
  // log2 of a bound on the norm of the chunk's transition (Chunk64PrepGdnParams::bound). A
  // segment whose trailing chunks' bounds sum below kWarmLog2 (kda_chunk64_state2.cu) runs in
  // phase 1 from zero over those chunks alone, its transition written as zeros.
  const float* bound;
  // GDN's entry (kda_chunk64_state2_gdn_sm90a_f16_k128; kbt null): kq holds k^, q^ without the
  // decay, and per chunk slot [2][64] 2^G_t, 2^(G_63 - G_t) (Chunk64PrepGdnParams::tok), applied
  // per token on the accumulators and on vn' (a scalar decay per token commutes with the
  // products); (k b) is k^'s rows read transposed.
  const float* tok;
  // Varlen exact context parallel: [2][seqs cp_segs] items (n cp_segs + s, -1 past the last)
  // as kda_chunk64_cp_order writes them: phase 1's, the longest blocks first, then phase 3's
  // working ones; null: dense exact ones take the same phase-1 order in closed form, the
  // decay-bounded form block z as item z. Phase 3 reads the second half (chunk64_cp_order.cuh
  // cp_item).
  int32_t* cp_order;
};

static_assert(offsetof(Chunk64State2Params, kq) == 0, "pack layout");
static_assert(offsetof(Chunk64State2Params, kbt) == 8, "pack layout");
static_assert(offsetof(Chunk64State2Params, tmb) == 16, "pack layout");
static_assert(offsetof(Chunk64State2Params, aqk) == 24, "pack layout");
static_assert(offsetof(Chunk64State2Params, gamma) == 32, "pack layout");
static_assert(offsetof(Chunk64State2Params, v) == 40, "pack layout");
static_assert(offsetof(Chunk64State2Params, x0) == 48, "pack layout");
static_assert(offsetof(Chunk64State2Params, xt) == 56, "pack layout");
static_assert(offsetof(Chunk64State2Params, o) == 64, "pack layout");
static_assert(offsetof(Chunk64State2Params, chunks) == 72, "pack layout");
static_assert(offsetof(Chunk64State2Params, dim_v) == 76, "pack layout");
static_assert(offsetof(Chunk64State2Params, tokens) == 80, "pack layout");
static_assert(offsetof(Chunk64State2Params, cu_seqlens) == 88, "pack layout");
static_assert(offsetof(Chunk64State2Params, x0_lines) == 96, "pack layout");
static_assert(offsetof(Chunk64State2Params, xt_lines) == 104, "pack layout");
static_assert(offsetof(Chunk64State2Params, x0_stride) == 112, "pack layout");
static_assert(offsetof(Chunk64State2Params, xt_stride) == 120, "pack layout");
static_assert(offsetof(Chunk64State2Params, cp_scratch) == 128, "pack layout");
static_assert(offsetof(Chunk64State2Params, cp_phase) == 136, "pack layout");
static_assert(offsetof(Chunk64State2Params, cp_segs) == 140, "pack layout");
static_assert(offsetof(Chunk64State2Params, seg_chunks) == 144, "pack layout");
static_assert(offsetof(Chunk64State2Params, seqs) == 148, "pack layout");
static_assert(offsetof(Chunk64State2Params, bound) == 152, "pack layout");
static_assert(offsetof(Chunk64State2Params, tok) == 160, "pack layout");
static_assert(offsetof(Chunk64State2Params, cp_order) == 168, "pack layout");
static_assert(sizeof(Chunk64State2Params) == 176, "pack size");

// Where the operands of chunk c of sequence n, value head hv live (the preps write them, the
// state step reads them), in units of one chunk's operand block (kq 128 x K, kbt K x 64, ...):
// - dense: slot (n HV + hv) NC + c, i.e. [N, HV, NC];
// - varlen: slot (floor(cu[n] / 64) + n + c) HV + hv. floor(cu[n] / 64) + n + ceil(len / 64)
//   <= floor(cu[n + 1] / 64) + n + 1, so sequences never share a slot, and every slot is below
//   (floor(total / 64) + seqs + 1) HV: the preps' grid.x and the scratch's extent
//   (kernrt.gen.kda_chunk64.varlen_slots). A slot that maps to no chunk is not written.
// The preps' `flags` (kernrt.gen.kda_prefill64 PREP_FLAG_*): per-token scalars in bf16.
constexpr int32_t kPrepBetaBf16 = 1;  // beta [N, T, HV] is bf16 (else fp32)
constexpr int32_t kPrepGBf16 = 2;     // GDN's g [N, T, HV] is bf16 (else fp32)

// Parameter block of kda_chunk64_prep4_sm90a_f16_k128 (kda_chunk64_prep4.cu, chunk64_prep4.md):
// prep v4 takes a chunk's raw inputs and does the token code itself (q, k l2norm, eps 1e-6
// inside the sqrt, q times scale; the softplus gate alpha = exp(-exp(A_log) softplus(g +
// dt_bias)), or the bounded one (exp(lower_bound sigmoid(exp(A_log) (g + dt_bias))), and beta
// direct or sigmoid(logit), per entry; padded tokens q = k = 0, alpha = 1, beta = 0), then
// Chunk64StateParams's operands (kq, kbt, tmb, aqk, gamma) as outputs.
// Inputs per sequence dense (token t of sequence n at row n * T + t, grid (NC, HV, N)) or varlen
// (row cu[n] + t; grid (slots, HV, 1), block x = the slot of Chunk64Slots); GVA: value head hv
// reads q, k head hv / group (group = HV / H, HV = gridDim.y). Outputs at the slots.
struct Chunk64Prep4Params {
  const uint16_t* q;        // [N, T, H, K] bf16
  const uint16_t* k;        // [N, T, H, K] bf16
  const uint16_t* g;        // [N, T, HV, K] bf16, the raw gate input
  const void* beta;         // [N, T, HV] fp32 or bf16 (flags): effective beta, or logits (sigbeta)
  const float* a_log;       // [HV]
  const float* dt_bias;     // [HV, K]
  __half* kq;               // as Chunk64StateParams ([N, HV, NC, ...])
  __half* kbt;
  __half* tmb;
  __half* aqk;
  float* gamma;
  float scale;              // q scale (K^-0.5 by default)
  int32_t tokens;           // T, tokens per sequence (NC = ceil(T / 64))
  int32_t heads;            // H
  int32_t group;            // HV / H (value heads per q, k head)
  int32_t chunks;           // NC
  float lower_bound;        // the bounded gate's bound (lbgate entries; the others ignore it)
  const int32_t* cu_seqlens;  // varlen: [seqs + 1] (grid.x = the slots); null: dense (grid (NC, HV, N))
  int32_t seqs;              // varlen: sequences
  int32_t flags;            // kPrepBetaBf16
};

static_assert(offsetof(Chunk64Prep4Params, q) == 0, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, k) == 8, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, g) == 16, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, beta) == 24, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, a_log) == 32, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, dt_bias) == 40, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, kq) == 48, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, kbt) == 56, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, tmb) == 64, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, aqk) == 72, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, gamma) == 80, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, scale) == 88, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, tokens) == 92, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, heads) == 96, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, group) == 100, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, chunks) == 104, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, lower_bound) == 108, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, cu_seqlens) == 112, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, seqs) == 120, "pack layout");
static_assert(offsetof(Chunk64Prep4Params, flags) == 124, "pack layout");
static_assert(sizeof(Chunk64Prep4Params) == 128, "pack size");

// Parameter block of kda_chunk64_prep_gdn{,_sigbeta}_sm90a_f16_k128 (kda_chunk64_prep_gdn.cu,
// chunk64_prep_gdn.md): GDN's prep from raw inputs, one decay per (token, value head): q, k
// l2norm (eps 1e-6 inside the sqrt, q times scale), the gate -exp(A_log) softplus(g + dt_bias)
// per value head, beta direct or sigmoid(logit) per entry; padded tokens q = k = 0, decay 1,
// beta = 0; then prep v4's outputs (gamma = the chunk's decay on every key channel) but for
// the decay: kq holds k^, q^ and `tok` the per-token decays the GDN state entry applies
// itself, and no kbt is written (that entry reads k^ transposed): 50 of the 66 KiB a chunk.
// Sequences (dense or varlen), GVA and the output slots as prep v4.
struct Chunk64PrepGdnParams {
  const uint16_t* q;        // [N, T, H, K] bf16
  const uint16_t* k;        // [N, T, H, K] bf16
  const void* g;            // [N, T, HV] fp32 or bf16 (flags), the raw gate input
  const void* beta;         // [N, T, HV] fp32 or bf16 (flags): effective beta, or logits (sigbeta)
  const float* a_log;       // [HV]
  const float* dt_bias;     // [HV]
  __half* kq;               // [k^; q^] without the decay ([N, HV, NC, ...] as Chunk64StateParams)
  float* tok;               // per chunk slot [2][64]: 2^G_t, 2^(G_63 - G_t) (no kbt: the GDN
                            // state entry applies them, Chunk64State2Params::tok)
  __half* tmb;
  __half* aqk;
  float* gamma;
  float scale;              // q scale (K^-0.5 by default)
  int32_t tokens;           // T, tokens per sequence (NC = ceil(T / 64))
  int32_t heads;            // H
  int32_t group;            // HV / H
  int32_t chunks;           // NC
  int32_t pad;
  const int32_t* cu_seqlens;  // varlen: [seqs + 1] (grid.x = the slots); null: dense (grid (NC, HV, N))
  int32_t seqs;              // varlen: sequences
  int32_t flags;            // kPrepBetaBf16 | kPrepGBf16
  // per chunk slot log2 of a bound on the norm of the chunk's transition, or null (not
  // written): sum over its tokens of log2 decay + log2 max(1, |1 - beta|). With unit k
  // (l2norm) a token maps the state S to decay S (I - beta k k^T), whose norm is at most
  // decay max(1, |1 - beta|) |S|.
  float* bound;
};

static_assert(offsetof(Chunk64PrepGdnParams, q) == 0, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, k) == 8, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, g) == 16, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, beta) == 24, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, a_log) == 32, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, dt_bias) == 40, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, kq) == 48, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, tok) == 56, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, tmb) == 64, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, aqk) == 72, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, gamma) == 80, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, scale) == 88, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, tokens) == 92, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, heads) == 96, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, group) == 100, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, chunks) == 104, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, pad) == 108, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, cu_seqlens) == 112, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, seqs) == 120, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, flags) == 124, "pack layout");
static_assert(offsetof(Chunk64PrepGdnParams, bound) == 128, "pack layout");
static_assert(sizeof(Chunk64PrepGdnParams) == 136, "pack size");

}  // namespace kernrt::kda
