// Causal conv1d decode update for the H200: `steps` (1..8) new tokens per sequence against a
// per-sequence conv state in a state pool, updated in place.
// Per channel d of sequence n, with state s[0..W-2] (s[W-2] the newest input):
//   for each new token x_t:  y_t = act(bias + sum_{j<W-1} w[j] s[j] + w[W-1] x_t) (+ res_t);
//                            s <- [s[1..W-2], x_t]
// Entries, one `const __grid_constant__ ConvUpdateParams` each, dtype in {bf16, f16}, W in
// {2, 3, 4}:
//   conv_update_s4_sm90a_<dtype>_w<W>      1 token, 4 sequences per thread, block 64
//   conv_update_s4_fla_sm90a_<dtype>_w<W>  the same over fla's [N, D, W] cache lines
//   conv_verify_sm90a_<dtype>_w<W>         up to 8 tokens, 1 sequence per thread, block 128
// On the H200 (B64 D4096 / B256 D8192, W4 silu, per call in a 64-call graph) s4 ran 3.31 /
// 11.77 us over our lines and 3.30 / 17.76 over fla's cache; one sequence per thread ran
// 3.74 / 14.51 (3.84 / 18.58), s4 held to 128 registers for 8 blocks per SM 3.26 / 14.56
// (validation/conv/notes.md; those entries are in git tag conv-candidates-2026-12).
//
// Grid/block: block.x threads, one per 8 channels; grid.x = ceil(D / (8 * block.x));
// grid.y = ceil(seqs / kSeqs): each thread serves kSeqs sequences of the same channels so
// the weights it holds in registers are loaded once for all of them. All state lines and x
// rows of those sequences are loaded before any math; y rows and the new state are stored.
// Padded sequences (n >= seqs) and steps > params.steps are skipped, so one captured graph
// serves any seqs <= grid coverage.
//
// Not checked here: D % 8 and 16-byte alignment (manifest and load checks), steps <= 8,
// distinct lines for distinct sequences (two sequences sharing a line race).
#include "common/ptx/sync.cuh"
#include "conv/conv_vec.cuh"
#include "conv/params.h"

namespace kernrt::conv {

constexpr int kUpdateThreads = 64;   // block.x of the 1-token entries
constexpr int kUpdateSeqs = 4;       // sequences per thread of the 1-token entries
constexpr int kVerifyThreads = 128;  // block.x of the verify entries

// z for one channel of a decode step from its taps x[0..W-1] (oldest first, the new token
// last), in the order of fla 0.6.0's update kernel: its `tl.sum` over the taps (padded to
// 4, or 2 for W 2) is a butterfly across lanes, lane i computing fma(x_i, w_i, x_{i^2}
// w_{i^2}) and adding its neighbour's; the lanes of a channel round differently and all
// store y; we take the value of lanes {0, 1}. That order passed the peer gate on all 16
// update/verify checks of its first two runs, where one fma chain (conv_dot's order)
// missed it by one or two bf16 flips in 3 of 5 (notes.md). Products are __fmul_rn and sums
// __fadd_rn so that nothing is contracted into an fma.
template <int W>
__device__ __forceinline__ float dot_update(const float (&w)[W][8], const float (&x)[W],
                                            const float (&b)[8], int c) {
  float z;
  if (W == 2) {
    z = fmaf(x[0], w[0][c], __fmul_rn(x[1], w[1][c]));
  } else {
    const float x3 = W == 4 ? x[W == 4 ? 3 : 0] : 0.f, w3 = W == 4 ? w[W == 4 ? 3 : 0][c] : 0.f;
    const float s0 = fmaf(x[0], w[0][c], __fmul_rn(x[2], w[2][c]));
    const float s1 = fmaf(x[1], w[1][c], __fmul_rn(x3, w3));
    z = __fadd_rn(s0, s1);
  }
  return __fadd_rn(z, b[c]);
}

// 16-bit element e of the packed line chunk `v` (L slots per channel, channel-major).
template <int L>
__device__ __forceinline__ uint32_t slot16(const uint4 (&v)[L], int e) {
  return elem16<8, L>(v, e);
}

// The line chunk after one token, still packed: slot j of channel c takes slot j+1, the last
// slot the token (both layouts: the window slides by one; fla's slot 0 is the oldest kept).
template <int L>
__device__ __forceinline__ void slide(uint4 (&v)[L], const uint4& x) {
  uint4 o[L];
#pragma unroll
  for (int i = 0; i < L; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      uint32_t h[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int e = 8 * i + 2 * k + u, c = e / L, j = e % L;
        h[u] = j + 1 < L ? slot16<L>(v, e + 1) : elem16<8, 1>(reinterpret_cast<const uint4 (&)[1]>(x), c);
      }
      set_word(o[i], k, h[0] | (h[1] << 16));
    }
  }
#pragma unroll
  for (int i = 0; i < L; ++i) v[i] = o[i];
}

// kFull: lines are fla's [D, W] (slot 0 the oldest input, unread by the next output).
// The state stays packed in registers from load to store (no fp32 window): each output
// converts its W taps, and the new line is the old one slid by a 16-bit shuffle.
template <typename E, int W, int kSteps, int kSeqs, bool kFull>
__device__ __forceinline__ void conv_update(const ConvUpdateParams& p) {
  constexpr int N = 8;
  constexpr int S = W - 1;               // window slots
  constexpr int L = kFull ? W : W - 1;   // slots per line
  const E tag{};
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
  if (c0 >= p.dim) return;
  const int steps = kSteps == 1 ? 1 : (p.steps < kSteps ? p.steps : kSteps);

  float w[W][N], b[N];
  load_weights<W, N>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, w, b);
  const bool silu = (p.flags & kFlagSilu) != 0;
  ptx::griddepcontrol_wait();

  // ---- loads: every sequence's line, new tokens and state before any math ------------
  int32_t line[kSeqs];  // -1: no state (a padded sequence or the null line)
#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const int n = blockIdx.y * kSeqs + k;
    const int32_t l = n >= p.seqs ? 0 : p.lines != nullptr ? p.lines[n] : n;
    line[k] = n < p.seqs && (l != 0 || p.lines == nullptr) ? l : -1;
  }
  uint4 xv[kSeqs][kSteps];
#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const int n = blockIdx.y * kSeqs + k;
    const uint16_t* x = static_cast<const uint16_t*>(p.x) + n * p.x_stride_seq + c0;
#pragma unroll
    for (int t = 0; t < kSteps; ++t)
      if (n < p.seqs && t < steps) xv[k][t] = ld_nc<N>(x + t * p.x_stride_tok);
  }
  uint4 sv[kSeqs][L];
#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const char* at = static_cast<const char*>(p.state) + line[k] * p.state_stride + 2 * c0 * L;
#pragma unroll
    for (int i = 0; i < L; ++i) sv[k][i] = line[k] >= 0 ? ld<N>(at + 16 * i) : make_uint4(0, 0, 0, 0);
  }
  ptx::griddepcontrol_launch_dependents();

#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const int n = blockIdx.y * kSeqs + k;
    if (n >= p.seqs) break;
    uint16_t* y = static_cast<uint16_t*>(p.y) + n * p.y_stride_seq + c0;
    const uint16_t* res = p.residual == nullptr ? nullptr
                                                : static_cast<const uint16_t*>(p.residual) +
                                                      n * p.res_stride_seq + c0;
#pragma unroll
    for (int t = 0; t < kSteps; ++t) {
      if (t < steps) {
        float out[N];
#pragma unroll
        for (int c = 0; c < N; ++c) {
          float x[W];
#pragma unroll
          for (int j = 0; j < S; ++j) x[j] = to_f32(tag, slot16<L>(sv[k], c * L + L - S + j));
          x[W - 1] = to_f32(tag, elem16<8, 1>(reinterpret_cast<const uint4 (&)[1]>(xv[k][t]), c));
          out[c] = activate(dot_update<W>(w, x, b, c), silu);
        }
        if (res != nullptr) {  // fla: y = act(z) + residual in fp32, one rounding
          const uint4 rv[1] = {ld_nc<N>(res + t * p.res_stride_tok)};
#pragma unroll
          for (int c = 0; c < N; ++c) out[c] += to_f32(tag, elem16<8, 1>(rv, c));
        }
        st<N>(y + t * p.y_stride_tok, pack(tag, out));
        slide<L>(sv[k], xv[k][t]);
        if (kSteps > 1 && p.step_lines != nullptr) {
          const int64_t sl = p.step_lines[t * p.step_lines_stride + n];
          char* at = static_cast<char*>(p.state) + sl * p.state_stride + 2 * c0 * L;
#pragma unroll
          for (int i = 0; i < L; ++i)
            if (sl != 0) st<N>(at + 16 * i, sv[k][i]);
        }
      }
    }

    // ---- in-place state --------------------------------------------------------------
    if (line[k] >= 0) {
      char* at = static_cast<char*>(p.state) + line[k] * p.state_stride + 2 * c0 * L;
#pragma unroll
      for (int i = 0; i < L; ++i) st<N>(at + 16 * i, sv[k][i]);
    }
  }
}

}  // namespace kernrt::conv

// ---- entries -----------------------------------------------------------------------------
#define KERNRT_CONV_UPDATE_ENTRY(suffix, full, dtype, tag, w)                                 \
  extern "C" __global__ void __launch_bounds__(kernrt::conv::kUpdateThreads)               \
      conv_update_s4##suffix##_sm90a_##dtype##_w##w(                                        \
          const __grid_constant__ kernrt::conv::ConvUpdateParams p) {                       \
    kernrt::conv::conv_update<kernrt::conv::tag, w, 1, kernrt::conv::kUpdateSeqs, full>(p); \
  }
#define KERNRT_CONV_VERIFY_ENTRY(dtype, tag, w)                                             \
  extern "C" __global__ void __launch_bounds__(kernrt::conv::kVerifyThreads)               \
      conv_verify_sm90a_##dtype##_w##w(                                                     \
          const __grid_constant__ kernrt::conv::ConvUpdateParams p) {                       \
    kernrt::conv::conv_update<kernrt::conv::tag, w, kernrt::conv::kMaxSteps, 1, false>(p);  \
  }
#define KERNRT_CONV_UPDATE_ENTRIES(dtype, tag, w)      \
  KERNRT_CONV_UPDATE_ENTRY(, false, dtype, tag, w)     \
  KERNRT_CONV_UPDATE_ENTRY(_fla, true, dtype, tag, w)  \
  KERNRT_CONV_VERIFY_ENTRY(dtype, tag, w)

KERNRT_CONV_UPDATE_ENTRIES(bf16, Bf16, 2)
KERNRT_CONV_UPDATE_ENTRIES(bf16, Bf16, 3)
KERNRT_CONV_UPDATE_ENTRIES(bf16, Bf16, 4)
KERNRT_CONV_UPDATE_ENTRIES(f16, F16, 2)
KERNRT_CONV_UPDATE_ENTRIES(f16, F16, 3)
KERNRT_CONV_UPDATE_ENTRIES(f16, F16, 4)
