// Causal depthwise conv1d forward (prefill) for the H200:
//   y[t, d] = act(bias[d] + sum_j weight[d, j] * x~[t - (W-1) + j, d])
// over x [B, T, D] with any token/batch strides, or a packed varlen batch (cu_seqlens),
// x~[s < 0] taken from an optional initial state, optional final state output.
// Entries: conv_fwd_sm90a_{bf16,f16}_w{2,3,4}, one `const __grid_constant__ ConvFwdParams`.
//
// Grid/block: block.x threads, one per 8 channels (one 16-byte vector); grid.x =
// ceil(D / (8 * block.x)); grid.y = ceil(tokens / kRows) tiles of kRows consecutive rows;
// grid.z = B (dense) or 1 (varlen). A thread loads its kRows x rows up front (kRows 16-byte
// loads in flight), rebuilds the W-1 previous inputs of its tile (x rows, initial state or
// zeros), then walks the rows keeping the window in registers: x is read once from DRAM
// (the halo rows are the previous tile's rows, L2 hits) and y written once. No shared memory.
// fp32 accumulation; outputs rounded to x's dtype (RNE).
//
// Not checked here (the manifest and the runtime's load check them, see README.md): D % 8,
// 16-byte alignment of every pointer/stride, W <= 4 (one entry per W), cu_seqlens being
// monotone with cu[0] = 0, sequence lengths >= 1 where a final state is wanted, and that the
// initial and final states do not overlap (a tile reading an initial state may run after
// the tile that writes the final state).
#include "conv/conv_vec.cuh"
#include "conv/params.h"

#ifndef KERNRT_CONV_ROWS
#define KERNRT_CONV_ROWS 16
#endif

namespace kernrt_conv {

constexpr int kRows = KERNRT_CONV_ROWS;  // rows per thread (tile height)
static_assert(kRows >= 4 && kRows <= 32, "tile height: enough loads in flight, bounded registers");

// ---- state addressing ------------------------------------------------------------------
__device__ __forceinline__ const void* state_line(const void* base, const int32_t* lines,
                                                  int64_t stride, int n) {
  if (base == nullptr) return nullptr;
  int64_t line = n;
  if (lines != nullptr) {
    line = lines[n];
    if (line == 0) return nullptr;  // null line: no state
  }
  return static_cast<const char*>(base) + line * stride;
}

// Window for a sequence start: slots from the initial state, or zeros.
template <typename E, int S>
__device__ __forceinline__ void window_from_state(E tag, const ConvFwdParams& p, int n, int c0,
                                                  float (&win)[S][8]) {
  const void* line = state_line(p.init_state, p.init_lines, p.init_stride, n);
  if (line != nullptr) {
    load_state(tag, line, c0, win);
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j)
#pragma unroll
      for (int c = 0; c < 8; ++c) win[j][c] = 0.f;
  }
}

// ---- kernel body -----------------------------------------------------------------------
template <typename E, int W>
__device__ __forceinline__ void conv_fwd(const ConvFwdParams& p) {
  constexpr int S = W - 1;
  const E tag{};
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * kChannelsPerThread;
  if (c0 >= p.dim) return;
  const int t0 = blockIdx.y * kRows;

  // Which sequence holds row t0, and where it starts and ends (in rows).
  int n, start, end, limit;
  const uint16_t* x = static_cast<const uint16_t*>(p.x);
  uint16_t* y = static_cast<uint16_t*>(p.y);
  if (p.cu_seqlens != nullptr) {
    const int32_t* cu = p.cu_seqlens;
    limit = cu[p.seqs];
    if (t0 >= limit) return;
    int lo = 0, hi = p.seqs - 1;  // largest n with cu[n] <= t0 (skips empty sequences)
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (cu[mid] <= t0) lo = mid;
      else hi = mid - 1;
    }
    n = lo;
    start = cu[n];
    end = cu[n + 1];
  } else {
    limit = p.tokens;
    if (t0 >= limit) return;
    n = blockIdx.z;
    start = 0;
    end = limit;
    x += n * p.x_stride_seq;
    y += n * p.y_stride_seq;
  }
  x += c0;
  y += c0;

  // Issue every x load of the tile first.
  uint4 buf[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    if (t0 + r < limit) buf[r] = ld_nc_v4(x + static_cast<int64_t>(t0 + r) * p.x_stride_tok);

  float w[W][8], b[8];
  load_weights<W>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, w, b);
  const bool silu = (p.flags & kFlagSilu) != 0;

  // Window win[j] = x~[t0 - S + j]: x rows inside the sequence, else initial state / zeros.
  float win[S][8];
  if (t0 - S < start) window_from_state(tag, p, n, c0, win);
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int s = t0 - S + j;
    if (s >= start) {
      unpack8(tag, ld_nc_v4(x + static_cast<int64_t>(s) * p.x_stride_tok), win[j]);
    } else if (s - start + S > j) {
      // The state slot that lands at window position j: slot (s - start + S).
#pragma unroll
      for (int k = 0; k < S; ++k)
        if (k == s - start + S)
#pragma unroll
          for (int c = 0; c < 8; ++c) win[j][c] = win[k][c];
    }
  }

  // Walk the rows.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int t = t0 + r;
    if (t < limit) {
      if (t == end) {  // next packed sequence (varlen only): restart the window
        do {
          ++n;
          end = p.cu_seqlens[n + 1];
        } while (end == t);
        start = t;
        window_from_state(tag, p, n, c0, win);
      }
      float cur[8], out[8];
      unpack8(tag, buf[r], cur);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        float z = b[c];
#pragma unroll
        for (int j = 0; j < S; ++j) z = fmaf(w[j][c], win[j][c], z);
        z = fmaf(w[S][c], cur[c], z);
        out[c] = activate(z, silu);
      }
      st_cs_v4(y + static_cast<int64_t>(t) * p.y_stride_tok, pack8(tag, out));
#pragma unroll
      for (int j = 0; j + 1 < S; ++j)
#pragma unroll
        for (int c = 0; c < 8; ++c) win[j][c] = win[j + 1][c];
#pragma unroll
      for (int c = 0; c < 8; ++c) win[S - 1][c] = cur[c];
      if (t == end - 1 && p.final_state != nullptr) {
        void* line = const_cast<void*>(
            state_line(p.final_state, p.final_lines, p.final_stride, n));
        if (line != nullptr) store_state(tag, line, c0, win);
      }
    }
  }
}

}  // namespace kernrt_conv

// ---- entries -----------------------------------------------------------------------------
#define KERNRT_CONV_FWD_ENTRY(dtype, tag, w)                                                \
  extern "C" __global__ void __launch_bounds__(256)                                         \
      conv_fwd_sm90a_##dtype##_w##w(const __grid_constant__ kernrt_conv::ConvFwdParams p) { \
    kernrt_conv::conv_fwd<kernrt_conv::tag, w>(p);                                          \
  }

KERNRT_CONV_FWD_ENTRY(bf16, Bf16, 2)
KERNRT_CONV_FWD_ENTRY(bf16, Bf16, 3)
KERNRT_CONV_FWD_ENTRY(bf16, Bf16, 4)
KERNRT_CONV_FWD_ENTRY(f16, F16, 2)
KERNRT_CONV_FWD_ENTRY(f16, F16, 3)
KERNRT_CONV_FWD_ENTRY(f16, F16, 4)
