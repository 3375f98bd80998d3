// Parameter blocks of the causal conv1d kernels (forward and decode update), shared by the
// kernels and by every manifest that packs them. A manifest passes each block as one
// `bytes<N>` launch param whose pack writes the fields at the offsets asserted below; bytes
// no field covers are zero, so an optional pointer left out of the pack is null and turns
// its feature off. The Python copy of these offsets is runtime/python/kernrt/gen/conv_params.py;
// ctest `conv.params_match_header` parses the static_asserts below and compares.
// Plain data only: no constructor, no CUDA type.
//
// Not checked here: pointer alignment and shapes (the manifest ties shapes together, the
// runtime checks alignment of bound pointers at load; see kernels/conv/README.md).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace kernrt::conv {

// Flag bits of `flags`.
constexpr int32_t kFlagSilu = 1;        // y = silu(z), else y = z
constexpr int32_t kFlagWeightF32 = 2;   // weight and bias are f32, else bf16
// State lines hold W slots per channel, fla's [N, D, W] cache (slot 0 the oldest input,
// which no later output reads); without it a line holds the W-1 newest inputs, [D, W-1].
// The forward reads this bit; the decode update has one entry per layout (`_fla` entries).
constexpr int32_t kFlagStateFull = 4;

// Forward over a dense batch x[B, T, D] (cu_seqlens null; B is grid.z) or a packed varlen
// batch x[1, total, D] (cu_seqlens[N + 1] i32 prefix sums; grid.z = 1).
// Strides are in elements. State addresses: sequence n's state is at
// `init_state + (init_lines ? init_lines[n] : n) * init_stride` bytes, laid out [D, W-1]
// (or [D, W] with kFlagStateFull) in x's dtype, newest slot last; line index 0 means "no
// state" (zeros / not written). Same for final_state.
// y = act(z) + residual when residual is not null (fla's order: the residual is added to
// the activated value in fp32, then rounded once).
struct ConvFwdParams {
  const void* x;             // [B, T, D] bf16|f16, rows 16-byte aligned
  const void* weight;        // [D, W] bf16|f32 (flags)
  const void* bias;          // [D] like weight, or null
  void* y;                   // [B, T, D] x's dtype
  const void* init_state;    // see above, or null (zeros)
  void* final_state;         // see above, or null (not written)
  const int32_t* cu_seqlens; // [seqs + 1], or null (dense batch)
  const int32_t* init_lines; // [seqs], or null (row n)
  const int32_t* final_lines;// [seqs], or null (row n)
  int64_t x_stride_seq;      // elements between batch rows (unused with cu_seqlens)
  int64_t x_stride_tok;      // elements between tokens
  int64_t y_stride_seq;
  int64_t y_stride_tok;
  int64_t init_stride;       // bytes per state line
  int64_t final_stride;
  int32_t dim;               // D, a multiple of 8
  int32_t tokens;            // T (dense) or rows covered by the grid (varlen)
  int32_t seqs;              // N (varlen; unused when dense)
  int32_t flags;             // kFlag*
  const void* residual;      // [B, T, D] x's dtype, or null
  int64_t res_stride_seq;    // elements
  int64_t res_stride_tok;
};

static_assert(sizeof(void*) == 8, "64-bit pointers");
static_assert(offsetof(ConvFwdParams, x) == 0, "pack layout");
static_assert(offsetof(ConvFwdParams, weight) == 8, "pack layout");
static_assert(offsetof(ConvFwdParams, bias) == 16, "pack layout");
static_assert(offsetof(ConvFwdParams, y) == 24, "pack layout");
static_assert(offsetof(ConvFwdParams, init_state) == 32, "pack layout");
static_assert(offsetof(ConvFwdParams, final_state) == 40, "pack layout");
static_assert(offsetof(ConvFwdParams, cu_seqlens) == 48, "pack layout");
static_assert(offsetof(ConvFwdParams, init_lines) == 56, "pack layout");
static_assert(offsetof(ConvFwdParams, final_lines) == 64, "pack layout");
static_assert(offsetof(ConvFwdParams, x_stride_seq) == 72, "pack layout");
static_assert(offsetof(ConvFwdParams, x_stride_tok) == 80, "pack layout");
static_assert(offsetof(ConvFwdParams, y_stride_seq) == 88, "pack layout");
static_assert(offsetof(ConvFwdParams, y_stride_tok) == 96, "pack layout");
static_assert(offsetof(ConvFwdParams, init_stride) == 104, "pack layout");
static_assert(offsetof(ConvFwdParams, final_stride) == 112, "pack layout");
static_assert(offsetof(ConvFwdParams, dim) == 120, "pack layout");
static_assert(offsetof(ConvFwdParams, tokens) == 124, "pack layout");
static_assert(offsetof(ConvFwdParams, seqs) == 128, "pack layout");
static_assert(offsetof(ConvFwdParams, flags) == 132, "pack layout");
static_assert(offsetof(ConvFwdParams, residual) == 136, "pack layout");
static_assert(offsetof(ConvFwdParams, res_stride_seq) == 144, "pack layout");
static_assert(offsetof(ConvFwdParams, res_stride_tok) == 152, "pack layout");
static_assert(sizeof(ConvFwdParams) == 160, "pack size");

// Decode update: `steps` (1..8) new tokens per sequence, x[seqs, steps, D] with strides;
// the state of sequence n lives at `state + line * state_stride` bytes with
// line = lines ? lines[n] : n, laid out [D, W-1] in x's dtype ([D, W] in the `_fla`
// entries), and is replaced in place by the state after the last token. Line 0 (with a
// line table) is a padding row: it reads a zero state and writes no state. With step_lines
// ([steps, step_lines_stride] i32), the state after token s is also written to line
// step_lines[s * step_lines_stride + n] (0 = skip), which lets a speculative verify roll
// back to any accepted prefix. y = act(z) + residual when residual is not null.
struct ConvUpdateParams {
  const void* x;              // [seqs, steps, D]
  const void* weight;         // [D, W]
  const void* bias;           // [D] or null
  void* y;                    // [seqs, steps, D]
  void* state;                // pool base + the layer's byte offset
  const int32_t* lines;       // [seqs] or null (line n)
  const int32_t* step_lines;  // [steps, step_lines_stride] or null
  int64_t x_stride_seq;       // elements
  int64_t x_stride_tok;
  int64_t y_stride_seq;
  int64_t y_stride_tok;
  int64_t state_stride;       // bytes per line
  int64_t step_lines_stride;  // elements between step_lines rows
  int32_t dim;
  int32_t seqs;
  int32_t steps;
  int32_t flags;
  const void* residual;       // [seqs, steps, D] x's dtype, or null
  int64_t res_stride_seq;     // elements
  int64_t res_stride_tok;
};

static_assert(offsetof(ConvUpdateParams, x) == 0, "pack layout");
static_assert(offsetof(ConvUpdateParams, weight) == 8, "pack layout");
static_assert(offsetof(ConvUpdateParams, bias) == 16, "pack layout");
static_assert(offsetof(ConvUpdateParams, y) == 24, "pack layout");
static_assert(offsetof(ConvUpdateParams, state) == 32, "pack layout");
static_assert(offsetof(ConvUpdateParams, lines) == 40, "pack layout");
static_assert(offsetof(ConvUpdateParams, step_lines) == 48, "pack layout");
static_assert(offsetof(ConvUpdateParams, x_stride_seq) == 56, "pack layout");
static_assert(offsetof(ConvUpdateParams, x_stride_tok) == 64, "pack layout");
static_assert(offsetof(ConvUpdateParams, y_stride_seq) == 72, "pack layout");
static_assert(offsetof(ConvUpdateParams, y_stride_tok) == 80, "pack layout");
static_assert(offsetof(ConvUpdateParams, state_stride) == 88, "pack layout");
static_assert(offsetof(ConvUpdateParams, step_lines_stride) == 96, "pack layout");
static_assert(offsetof(ConvUpdateParams, dim) == 104, "pack layout");
static_assert(offsetof(ConvUpdateParams, seqs) == 108, "pack layout");
static_assert(offsetof(ConvUpdateParams, steps) == 112, "pack layout");
static_assert(offsetof(ConvUpdateParams, flags) == 116, "pack layout");
static_assert(offsetof(ConvUpdateParams, residual) == 120, "pack layout");
static_assert(offsetof(ConvUpdateParams, res_stride_seq) == 128, "pack layout");
static_assert(offsetof(ConvUpdateParams, res_stride_tok) == 136, "pack layout");
static_assert(sizeof(ConvUpdateParams) == 144, "pack size");

// Tile constants the manifests' grids are written against.
constexpr int kMaxSteps = 8;  // decode tokens per sequence

}  // namespace kernrt::conv
