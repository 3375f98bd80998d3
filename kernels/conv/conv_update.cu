// Causal conv1d decode update for the H200: `steps` (1..8) new tokens per sequence against a
// per-sequence conv state in a state pool, updated in place.
// Per channel d of sequence n, with state s[0..W-2] (s[W-2] the newest input):
//   for each new token x_t:  y_t = act(bias + sum_{j<W-1} w[j] s[j] + w[W-1] x_t);
//                            s <- [s[1..W-2], x_t]
// Entries: conv_update_sm90a_{bf16,f16}_w{2,3,4} (1 token) and conv_verify_sm90a_*
// (up to 8 tokens), one `const __grid_constant__
// ConvUpdateParams` (layout and line-table rules in params.h).
//
// Grid/block: block.x threads, one per 8 channels; grid.x = ceil(D / (8 * block.x));
// grid.y = ceil(seqs / kSeqs): each thread serves kSeqs sequences of the same channels so
// the weights it holds in registers are loaded once for all of them (kUpdateSeqs for the
// 1-token entries, 1 for verify, whose 8 token buffers already fill the registers). All state lines and x
// rows of those sequences are loaded before any math (W-1 + steps 16-byte loads each); y rows
// and the new state are stored. Padded sequences (n >= seqs) and steps > params.steps are
// skipped, so one captured graph serves any seqs <= grid coverage.
//
// Not checked here: D % 8 and 16-byte alignment (manifest and load checks), steps <= 8,
// distinct lines for distinct sequences (two sequences sharing a line race).
#include "conv/conv_vec.cuh"
#include "conv/params.h"

#ifndef KERNRT_CONV_UPDATE_SEQS
#define KERNRT_CONV_UPDATE_SEQS 4
#endif

// Register budget of the 1-token entries: 128-thread blocks per SM it must allow (variants:
// 4 caps them at 128 registers, so 1024 blocks of 64 threads fit one wave on 132 SMs).
#ifdef KERNRT_CONV_UPDATE_MIN_BLOCKS
#define KERNRT_CONV_UPDATE_BOUNDS __launch_bounds__(128, KERNRT_CONV_UPDATE_MIN_BLOCKS)
#else
#define KERNRT_CONV_UPDATE_BOUNDS __launch_bounds__(128)
#endif
#define KERNRT_CONV_VERIFY_BOUNDS __launch_bounds__(128)

#ifndef KERNRT_CONV_UPDATE_ORDER  // tap-sum order, see dot_update (variants: 0, 2)
#define KERNRT_CONV_UPDATE_ORDER 1
#endif

namespace kernrt_conv {

// z for one channel of a decode step. Orders 1 (shipped since run 6) and 2 follow fla 0.6.0's
// update kernel (validation/conv/notes.md, run 4): its `tl.sum` over the taps (padded to 4,
// or 2 for W 2) is a butterfly across lanes, lane i computing fma(x_i, w_i, x_{i^2} w_{i^2})
// and adding its neighbour's; the lanes of a channel round differently and all store y, so
// order 1 takes the value of lanes {0, 1} and order 2 that of lanes {2, 3} (W 2: lane 0 or
// lane 1). Order 1 passed the peer gate on all 16 update/verify checks of runs 5-6; order 0
// (runs 2-5: conv_dot's chain, oldest tap first) missed it by one or two bf16 flips in 3 of 5.
// Products are __fmul_rn and sums __fadd_rn so that nothing is contracted into an fma.
template <int W>
__device__ __forceinline__ float dot_update(const float (&w)[W][8], const float (&win)[W - 1][8],
                                            const float (&cur)[8], const float (&b)[8], int c) {
#if KERNRT_CONV_UPDATE_ORDER == 0
  return conv_dot<W>(w, win, cur, b, c);
#else
  constexpr bool kHigh = KERNRT_CONV_UPDATE_ORDER == 2;
  float x[4], v[4];  // taps oldest first, the current token last, zero padded
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    x[j] = j < W - 1 ? win[j < W - 1 ? j : 0][c] : j == W - 1 ? cur[c] : 0.f;
    v[j] = j < W ? w[j < W ? j : 0][c] : 0.f;
  }
  float z;
  if (W == 2) {
    const int i = kHigh ? 1 : 0;
    z = fmaf(x[i], v[i], __fmul_rn(x[1 - i], v[1 - i]));
  } else {
    const int i = kHigh ? 2 : 0;  // lanes i and i + 1 of the butterfly
    const float si = fmaf(x[i], v[i], __fmul_rn(x[i ^ 2], v[i ^ 2]));
    const float sn = fmaf(x[i + 1], v[i + 1], __fmul_rn(x[(i + 1) ^ 2], v[(i + 1) ^ 2]));
    z = __fadd_rn(si, sn);
  }
  return __fadd_rn(z, b[c]);
#endif
}

constexpr int kUpdateSeqs = KERNRT_CONV_UPDATE_SEQS;  // sequences per thread, 1-token entries
constexpr int kVerifySeqs = 1;                         // sequences per thread, verify entries
static_assert(kUpdateSeqs >= 1 && kUpdateSeqs <= 8, "sequences per thread");

template <typename E, int W, int kSteps, int kSeqs>
__device__ __forceinline__ void conv_update(const ConvUpdateParams& p) {
  constexpr int S = W - 1;
  const E tag{};
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * kChannelsPerThread;
  if (c0 >= p.dim) return;
  const int steps = kSteps == 1 ? 1 : (p.steps < kSteps ? p.steps : kSteps);

  float w[W][8], b[8];
  load_weights<W>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, w, b);
  const bool silu = (p.flags & kFlagSilu) != 0;
  pdl_wait();

  // ---- loads: every sequence's line, new tokens and state before any math ------------
  char* st[kSeqs];
#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const int n = blockIdx.y * kSeqs + k;
    const int64_t line = n >= p.seqs ? 0 : p.lines != nullptr ? p.lines[n] : n;
    st[k] = n < p.seqs && (line != 0 || p.lines == nullptr)
                ? static_cast<char*>(p.state) + line * p.state_stride + 2 * c0 * S
                : nullptr;
  }
  uint4 xv[kSeqs][kSteps];
#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const int n = blockIdx.y * kSeqs + k;
    const uint16_t* x = static_cast<const uint16_t*>(p.x) + n * p.x_stride_seq + c0;
#pragma unroll
    for (int t = 0; t < kSteps; ++t)
      if (n < p.seqs && t < steps) xv[k][t] = ld_nc_v4(x + t * p.x_stride_tok);
  }
  uint4 sv[kSeqs][S];
#pragma unroll
  for (int k = 0; k < kSeqs; ++k)
#pragma unroll
    for (int i = 0; i < S; ++i)
      sv[k][i] = st[k] != nullptr ? ld_v4(reinterpret_cast<const uint4*>(st[k]) + i)
                                  : make_uint4(0, 0, 0, 0);
  pdl_launch_dependents();

#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const int n = blockIdx.y * kSeqs + k;
    if (n >= p.seqs) break;
    float win[S][8];
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
      for (int j = 0; j < S; ++j) win[j][c] = to_f32(tag, elem16(sv[k], c * S + j));

    // ---- tokens ----------------------------------------------------------------------
    uint16_t* y = static_cast<uint16_t*>(p.y) + n * p.y_stride_seq + c0;
#pragma unroll
    for (int t = 0; t < kSteps; ++t) {
      if (t < steps) {
        float cur[8], out[8];
        unpack8(tag, xv[k][t], cur);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          out[c] = activate(dot_update<W>(w, win, cur, b, c), silu);
        }
        st_cs_v4(y + t * p.y_stride_tok, pack8(tag, out));
#pragma unroll
        for (int j = 0; j + 1 < S; ++j)
#pragma unroll
          for (int c = 0; c < 8; ++c) win[j][c] = win[j + 1][c];
#pragma unroll
        for (int c = 0; c < 8; ++c) win[S - 1][c] = cur[c];
        if (kSteps > 1 && p.step_lines != nullptr) {
          const int64_t sl = p.step_lines[t * p.step_lines_stride + n];
          if (sl != 0) store_state(tag, static_cast<char*>(p.state) + sl * p.state_stride, c0, win);
        }
      }
    }

    // ---- in-place state --------------------------------------------------------------
    if (st[k] != nullptr) store_state(tag, st[k] - 2 * c0 * S, c0, win);
  }
}

}  // namespace kernrt_conv

// ---- entries -----------------------------------------------------------------------------
// conv_update_*: one token per sequence (decode); conv_verify_*: up to 8 (speculative verify).
#define KERNRT_CONV_UPDATE_ENTRY(name, dtype, tag, w, steps, seqs, bounds)               \
  extern "C" __global__ void bounds conv_##name##_sm90a_##dtype##_w##w(                  \
      const __grid_constant__ kernrt_conv::ConvUpdateParams p) {                         \
    kernrt_conv::conv_update<kernrt_conv::tag, w, steps, seqs>(p);                       \
  }
#define KERNRT_CONV_UPDATE_1(dtype, tag, w)                                                \
  KERNRT_CONV_UPDATE_ENTRY(update, dtype, tag, w, 1, kernrt_conv::kUpdateSeqs,           \
                           KERNRT_CONV_UPDATE_BOUNDS)
#define KERNRT_CONV_VERIFY(dtype, tag, w)                                                  \
  KERNRT_CONV_UPDATE_ENTRY(verify, dtype, tag, w, kernrt_conv::kMaxSteps,                \
                           kernrt_conv::kVerifySeqs, KERNRT_CONV_VERIFY_BOUNDS)

KERNRT_CONV_UPDATE_1(bf16, Bf16, 2)
KERNRT_CONV_UPDATE_1(bf16, Bf16, 3)
KERNRT_CONV_UPDATE_1(bf16, Bf16, 4)
KERNRT_CONV_UPDATE_1(f16, F16, 2)
KERNRT_CONV_UPDATE_1(f16, F16, 3)
KERNRT_CONV_UPDATE_1(f16, F16, 4)
KERNRT_CONV_VERIFY(bf16, Bf16, 2)
KERNRT_CONV_VERIFY(bf16, Bf16, 3)
KERNRT_CONV_VERIFY(bf16, Bf16, 4)
KERNRT_CONV_VERIFY(f16, F16, 2)
KERNRT_CONV_VERIFY(f16, F16, 3)
KERNRT_CONV_VERIFY(f16, F16, 4)
