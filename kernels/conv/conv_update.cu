// Causal conv1d decode update for the H200: `steps` (1..8) new tokens per sequence against a
// per-sequence conv state in a state pool, updated in place.
// Per channel d of sequence n, with state s[0..W-2] (s[W-2] the newest input):
//   for each new token x_t:  y_t = act(bias + sum_{j<W-1} w[j] s[j] + w[W-1] x_t) (+ res_t);
//                            s <- [s[1..W-2], x_t]
// Entries, one `const __grid_constant__ ConvUpdateParams` each, dtype in {bf16, f16}, W in
// {2, 3, 4}:
//   conv_update_c4s2p_sm90a_<dtype>_w<W> 1 token, 4 channels x 2 sequences per thread, block
//                                        128, our [D, W-1] lines
//   conv_update_c4p_fla_sm90a_<dtype>_w<W> 1 token, 4 channels x 1 sequence per thread, block
//                                        128, fla's [N, D, W] cache lines
//   conv_verify_sm90a_<dtype>_w<W>       up to 8 tokens, 8 channels x 1 sequence per thread,
//                                        block 128, our lines
// The two update entries ask L2 for their lines and x rows before griddepcontrol.wait and let
// the next grid launch at block start (prefetch_lines): under PDL the bytes of one call
// stream in while the previous call drains. On the H200 (B64 D4096 / B256 D8192, W4 silu,
// per call in a 64-call graph) c4s2p ran 2.22 / 10.16 us over our lines and c4p 2.22 / 11.78
// over fla's cache, fla 3.07 / 11.97; without the prefetch (same run as the prefetch's
// first timing) 2.97 / 11.05 and 2.79 / 12.42. Earlier, without prefetch: 4 channels x 4
// sequences per thread (one wave at B256, 64 registers) 3.25 / 11.62, with it 2.84 / 10.89;
// 8 x 4 (block 64) 3.44 / 12.43 and 3.42 / 17.11; 8 x 2 3.49 / 13.11 and 3.68 / 16.26
// (validation/conv/notes.md; those entries are in git tags conv-candidates-2026-12b..d).
// c4s2p held to 48 registers (10 blocks/SM instead of 9) ran 2.17 / 10.15 against 2.22 /
// 10.19 in one run (tag conv-candidates-2026-12g; not re-checked in full, so not shipped);
// c4s2p launched in clusters of 8 blocks along grid x 2.23 / 10.15 against 2.24 / 10.19
// (tag conv-candidates-2026-12h; both within run-to-run noise, 78.2 % of the floor).
// The loads as bulk copies into shared memory by a producer lane per sequence (c4r2, 10.49
// us at B256) and the stores as one bulk copy a sequence and row (c4s2b, 10.16 against
// 10.15) lost too (commits 652bac6, 8acfc93; validation/conv/notes.md).
// Many small threads win: at 46-56 registers 9-10 blocks of 128 share an SM and their phases
// (loads, math, stores) interleave, where 8 x 4 at 146-158 registers ran 6 blocks of 64 in
// lockstep.
//
// Grid/block: block.x threads, one per N channels; grid.x = ceil(D / (N * block.x));
// grid.y = ceil(seqs / kSeqs): each thread serves kSeqs sequences of the same channels, so
// the weights it holds in registers are loaded once for all of them. All state lines and x
// rows of those sequences are loaded before any math; y rows and the new state are stored.
// Padded sequences (n >= seqs) and steps > params.steps are skipped, so one captured graph
// serves any seqs <= grid coverage.
//
// Not checked here: D % 8 and 16-byte alignment (manifest and load checks), steps <= 8,
// distinct lines for distinct sequences (two sequences sharing a line race).
#include "common/ptx/sync.cuh"
#include "common/ptx/tma.cuh"
#include "conv/conv_vec.cuh"
#include "conv/params.h"

namespace kernrt::conv {

constexpr int kVerifyThreads = 128;  // block.x of the verify entries

// z for one channel of a decode step from its taps x[0..W-1] (oldest first, the new token
// last), in the order of fla 0.6.0's update kernel: its `tl.sum` over the taps (padded to
// 4, or 2 for W 2) is a butterfly across lanes, lane i computing fma(x_i, w_i, x_{i^2}
// w_{i^2}) and adding its neighbour's; the lanes of a channel round differently and all
// store y; we take the value of lanes {0, 1}. That order passed the peer gate on all 16
// update/verify checks of its first two runs, where one fma chain (conv_dot's order)
// missed it by one or two bf16 flips in 3 of 5 (notes.md). Products are __fmul_rn and sums
// __fadd_rn so that nothing is contracted into an fma.
template <int W, int N>
__device__ __forceinline__ float dot_update(const float (&w)[W][N], const float (&x)[W],
                                            const float (&b)[N], int c) {
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

// One thread's chunk of a state line: N channels x L slots, channel-major (element
// e = c * L + j), 2 * N * L bytes as 32-bit words. Its offset in the line, 2 * c0 * L with
// c0 a multiple of N, is a multiple of the chunk size, so it moves as 16-byte vectors where
// the chunk is a multiple of 16 bytes and as 8-byte vectors otherwise (4 channels of our
// W4 lines: 24 bytes).
template <int N, int L>
struct Chunk {
  static constexpr int kWords = N * L / 2;
  static constexpr bool kV4 = (2 * N * L) % 16 == 0;
  uint32_t w[kWords];
};

template <int N, int L>
__device__ __forceinline__ uint32_t slot16(const Chunk<N, L>& s, int e) {
  const uint32_t w = s.w[e >> 1];
  return (e & 1) ? (w >> 16) : (w & 0xffffu);
}

template <int N, int L>
__device__ __forceinline__ void load_chunk(Chunk<N, L>& s, const char* p) {
  if constexpr (Chunk<N, L>::kV4) {
#pragma unroll
    for (int i = 0; i < Chunk<N, L>::kWords / 4; ++i) {
      const uint4 v = ld<8>(p + 16 * i);
      s.w[4 * i] = v.x, s.w[4 * i + 1] = v.y, s.w[4 * i + 2] = v.z, s.w[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < Chunk<N, L>::kWords / 2; ++i) {
      const uint2 v = ld<4>(p + 8 * i);
      s.w[2 * i] = v.x, s.w[2 * i + 1] = v.y;
    }
  }
}

template <int N, int L>
__device__ __forceinline__ void store_chunk(const Chunk<N, L>& s, char* p) {
  if constexpr (Chunk<N, L>::kV4) {
#pragma unroll
    for (int i = 0; i < Chunk<N, L>::kWords / 4; ++i)
      st_vec(p + 16 * i, make_uint4(s.w[4 * i], s.w[4 * i + 1], s.w[4 * i + 2], s.w[4 * i + 3]));
  } else {
#pragma unroll
    for (int i = 0; i < Chunk<N, L>::kWords / 2; ++i)
      st_vec(p + 8 * i, make_uint2(s.w[2 * i], s.w[2 * i + 1]));
  }
}

// The chunk after one token, still packed: slot j of channel c takes slot j+1, the last
// slot the token (both layouts: the window slides by one; fla's slot 0 is the oldest kept).
template <int N, int L>
__device__ __forceinline__ void slide(Chunk<N, L>& s, const Vec<N>& x) {
  const Vec<N> xv[1] = {x};
  Chunk<N, L> o;
#pragma unroll
  for (int i = 0; i < Chunk<N, L>::kWords; ++i) {
    uint32_t h[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int e = 2 * i + u, c = e / L, j = e % L;
      h[u] = j + 1 < L ? slot16(s, e + 1) : elem16<N, 1>(xv, c);
    }
    o.w[i] = h[0] | (h[1] << 16);
  }
  s = o;
}

// Before griddepcontrol.wait: asks L2 for this block's x rows and state chunks (threads
// 0 .. kSeqs-1, one bulk prefetch each), so that under PDL they stream in while the previous
// grid drains. A prefetch returns nothing and L2 is the coherence point: every byte is read
// again after the wait, so only the timing depends on it. The line index is read here with
// ld.global.cg (no L1 copy survives to the real read after the wait); a stale index only
// prefetches the wrong line. On the H200 (64-call graph) it took the update over our lines
// from 2.97 / 11.05 to 2.22 / 10.18 us at B64 D4096 / B256 D8192 and over fla's cache from
// 2.79 / 12.42 to 2.23 / 11.85; prefetching also for the blocks of the second half of the grid
// (the first wave covering all of it) ran 2.27 / 11.69 and, over fla's cache at 4 rows,
// 2.36 / 15.45 (validation/conv/notes.md).
template <int N, int L, int kSeqs>
__device__ __forceinline__ void prefetch_lines(const ConvUpdateParams& p) {
  const int k = threadIdx.x, n = blockIdx.y * kSeqs + k;
  if (k >= kSeqs || n >= p.seqs) return;
  const int cb = blockIdx.x * blockDim.x * N;
  const uint32_t ch = static_cast<uint32_t>(min(static_cast<int>(blockDim.x) * N, p.dim - cb));
  ptx::bulk_prefetch_l2(static_cast<const uint16_t*>(p.x) + n * p.x_stride_seq + cb, 2u * ch);
  const int32_t l = p.lines != nullptr ? ptx::ld_global_cg_s32(p.lines + n) : n;
  if (l != 0 || p.lines == nullptr)
    ptx::bulk_prefetch_l2(static_cast<const char*>(p.state) + l * p.state_stride + 2 * cb * L, 2u * L * ch);
}

// kFull: lines are fla's [D, W] (slot 0 the oldest input, unread by the next output).
// The state stays packed in registers from load to store (no fp32 window): each output
// converts its W taps, and the new line is the old one slid by a 16-bit shuffle.
// N channels per thread (4 or 8), kSeqs sequences per thread.
template <typename E, int W, int N, int kSteps, int kSeqs, bool kFull, bool kPrefetch>
__device__ __forceinline__ void conv_update(const ConvUpdateParams& p) {
  constexpr int S = W - 1;               // window slots
  constexpr int L = kFull ? W : W - 1;   // slots per line
  const E tag{};
  if constexpr (kPrefetch) {  // and the next grid may start its prefetch now
    prefetch_lines<N, L, kSeqs>(p);
    ptx::griddepcontrol_launch_dependents();
  }
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
  Vec<N> xv[kSeqs][kSteps];
#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    const int n = blockIdx.y * kSeqs + k;
    const uint16_t* x = static_cast<const uint16_t*>(p.x) + n * p.x_stride_seq + c0;
#pragma unroll
    for (int t = 0; t < kSteps; ++t)
      if (n < p.seqs && t < steps) xv[k][t] = ld_nc<N>(x + t * p.x_stride_tok);
  }
  Chunk<N, L> sv[kSeqs];
#pragma unroll
  for (int k = 0; k < kSeqs; ++k) {
    if (line[k] >= 0) {
      load_chunk(sv[k], static_cast<const char*>(p.state) + line[k] * p.state_stride + 2 * c0 * L);
    } else {
#pragma unroll
      for (int i = 0; i < Chunk<N, L>::kWords; ++i) sv[k].w[i] = 0;
    }
  }
  if constexpr (!kPrefetch) ptx::griddepcontrol_launch_dependents();

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
        const Vec<N> xt[1] = {xv[k][t]};
        float out[N];
#pragma unroll
        for (int c = 0; c < N; ++c) {
          float x[W];
#pragma unroll
          for (int j = 0; j < S; ++j) x[j] = to_f32(tag, slot16(sv[k], c * L + L - S + j));
          x[W - 1] = to_f32(tag, elem16<N, 1>(xt, c));
          out[c] = activate(dot_update<W, N>(w, x, b, c), silu);
        }
        if (res != nullptr) {  // fla: y = act(z) + residual in fp32, one rounding
          const Vec<N> rv[1] = {ld_nc<N>(res + t * p.res_stride_tok)};
#pragma unroll
          for (int c = 0; c < N; ++c) out[c] += to_f32(tag, elem16<N, 1>(rv, c));
        }
        st<N>(y + t * p.y_stride_tok, pack(tag, out));
        slide(sv[k], xv[k][t]);
        if (kSteps > 1 && p.step_lines != nullptr) {
          const int64_t sl = p.step_lines[t * p.step_lines_stride + n];
          if (sl != 0) store_chunk(sv[k], static_cast<char*>(p.state) + sl * p.state_stride + 2 * c0 * L);
        }
      }
    }

    // ---- in-place state --------------------------------------------------------------
    if (line[k] >= 0)
      store_chunk(sv[k], static_cast<char*>(p.state) + line[k] * p.state_stride + 2 * c0 * L);
  }
}

}  // namespace kernrt::conv

// ---- entries -----------------------------------------------------------------------------
// conv_update_<loader>[_fla]: (channels per thread, sequences per thread, block.x). Both
// prefetch before the wait (prefetch_lines); verify does not (up to 8 rows per sequence,
// not a timed shape).
#define KERNRT_CONV_UPDATE_ENTRY(loader, n, seqs, threads, suffix, full, dtype, tag, w)         \
  extern "C" __global__ void __launch_bounds__(threads)                                         \
      conv_update_##loader##suffix##_sm90a_##dtype##_w##w(                                       \
          const __grid_constant__ kernrt::conv::ConvUpdateParams p) {                            \
    kernrt::conv::conv_update<kernrt::conv::tag, w, n, 1, seqs, full, true>(p);                  \
  }
#define KERNRT_CONV_VERIFY_ENTRY(dtype, tag, w)                                                      \
  extern "C" __global__ void __launch_bounds__(kernrt::conv::kVerifyThreads)                        \
      conv_verify_sm90a_##dtype##_w##w(                                                              \
          const __grid_constant__ kernrt::conv::ConvUpdateParams p) {                                \
    kernrt::conv::conv_update<kernrt::conv::tag, w, 8, kernrt::conv::kMaxSteps, 1, false, false>(p); \
  }
#define KERNRT_CONV_UPDATE_ENTRIES(dtype, tag, w)                        \
  KERNRT_CONV_UPDATE_ENTRY(c4s2p, 4, 2, 128, , false, dtype, tag, w)     \
  KERNRT_CONV_UPDATE_ENTRY(c4p, 4, 1, 128, _fla, true, dtype, tag, w)    \
  KERNRT_CONV_VERIFY_ENTRY(dtype, tag, w)

KERNRT_CONV_UPDATE_ENTRIES(bf16, Bf16, 2)
KERNRT_CONV_UPDATE_ENTRIES(bf16, Bf16, 3)
KERNRT_CONV_UPDATE_ENTRIES(bf16, Bf16, 4)
KERNRT_CONV_UPDATE_ENTRIES(f16, F16, 2)
KERNRT_CONV_UPDATE_ENTRIES(f16, F16, 3)
KERNRT_CONV_UPDATE_ENTRIES(f16, F16, 4)
