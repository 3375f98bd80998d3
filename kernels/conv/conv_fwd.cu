// Causal depthwise conv1d forward (prefill) for the H200:
//   y[t, d] = act(bias[d] + sum_j weight[d, j] * x~[t - (W-1) + j, d])
// over x [B, T, D] with any token/batch strides, or a packed varlen batch (cu_seqlens),
// x~[s < 0] taken from an optional initial state, optional final state output.
// Entries: conv_fwd_sm90a_{bf16,f16}_w{2,3,4}, one `const __grid_constant__ ConvFwdParams`.
//
// Grid/block: block.x threads, one per 8 channels (one 16-byte vector); grid.x =
// ceil(D / (8 * block.x)); grid.y = ceil(tokens / kSpan) spans of kSpan consecutive rows;
// grid.z = B (dense) or 1 (varlen). A thread rebuilds the W-1 inputs before its span (x
// rows, initial state or zeros), then walks the span in chunks of kChunk rows with the next
// chunk's kChunk 16-byte loads in flight while it computes the current one (two register
// buffers), keeping the window in registers: x is read once from DRAM (the halo rows are
// the previous span's rows, L2 hits) and y written once. No shared memory.
// fp32 accumulation; outputs rounded to x's dtype (RNE). With PDL only the weight loads
// precede griddepcontrol.wait.
//
// Not checked here (the manifest and the runtime's load check them, see README.md): D % 8,
// 16-byte alignment of every pointer/stride, W <= 4 (one entry per W), cu_seqlens being
// monotone with cu[0] = 0, sequence lengths >= 1 where a final state is wanted, and that the
// initial and final states do not overlap (a tile reading an initial state may run after
// the tile that writes the final state).
#include "conv/conv_vec.cuh"
#include "conv/params.h"

#ifndef KERNRT_CONV_CHUNK
#define KERNRT_CONV_CHUNK 8
#endif
#ifndef KERNRT_CONV_SPAN
#define KERNRT_CONV_SPAN 32
#endif
#ifndef KERNRT_CONV_MIN_BLOCKS  // resident blocks per SM the register budget must allow
#define KERNRT_CONV_MIN_BLOCKS 3
#endif

namespace kernrt_conv {

constexpr int kThreads = 128;                // block.x the manifests launch with
constexpr int kChunk = KERNRT_CONV_CHUNK;  // rows per register buffer (loads in flight)
constexpr int kSpan = KERNRT_CONV_SPAN;    // rows per thread; grid.y = ceil(tokens / kSpan)
static_assert(kChunk >= 2 && kChunk <= 16, "chunk: loads in flight vs registers (2 buffers)");
static_assert(kSpan % (2 * kChunk) == 0, "a span is whole pairs of chunks");

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
// Rows of one chunk: issue every load of rows [tc, tc + kChunk) that lies before `stop`.
__device__ __forceinline__ void load_chunk(uint4 (&buf)[kChunk], const uint16_t* x, int64_t stride,
                                           int tc, int stop) {
#pragma unroll
  for (int r = 0; r < kChunk; ++r)
    if (tc + r < stop) buf[r] = ld_nc_v4(x + static_cast<int64_t>(tc + r) * stride);
}

// Running state of one thread's walk.
template <int W>
struct Walk {
  float w[W][8], b[8];
  float win[W - 1][8];  // win[j] = x~[t - (W-1) + j] before row t
  int n, end;           // current sequence and its end row
  bool silu;
};

template <typename E, int W>
__device__ __forceinline__ void compute_chunk(const ConvFwdParams& p, Walk<W>& k,
                                              const uint4 (&buf)[kChunk], uint16_t* y, int c0,
                                              int tc, int stop) {
  constexpr int S = W - 1;
  const E tag{};
#pragma unroll
  for (int r = 0; r < kChunk; ++r) {
    const int t = tc + r;
    if (t < stop) {
      if (t == k.end) {  // next packed sequence (varlen only): restart the window
        do {
          ++k.n;
          k.end = p.cu_seqlens[k.n + 1];
        } while (k.end == t);
        window_from_state(tag, p, k.n, c0, k.win);
      }
      float cur[8], out[8];
      unpack8(tag, buf[r], cur);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        float z = k.b[c];
#pragma unroll
        for (int j = 0; j < S; ++j) z = fmaf(k.w[j][c], k.win[j][c], z);
        z = fmaf(k.w[S][c], cur[c], z);
        out[c] = activate(z, k.silu);
      }
      st_cs_v4(y + static_cast<int64_t>(t) * p.y_stride_tok, pack8(tag, out));
#pragma unroll
      for (int j = 0; j + 1 < S; ++j)
#pragma unroll
        for (int c = 0; c < 8; ++c) k.win[j][c] = k.win[j + 1][c];
#pragma unroll
      for (int c = 0; c < 8; ++c) k.win[S - 1][c] = cur[c];
      if (t == k.end - 1 && p.final_state != nullptr) {
        void* line = const_cast<void*>(
            state_line(p.final_state, p.final_lines, p.final_stride, k.n));
        if (line != nullptr) store_state(tag, line, c0, k.win);
      }
    }
  }
}

template <typename E, int W>
__device__ __forceinline__ void conv_fwd(const ConvFwdParams& p) {
  constexpr int S = W - 1;
  const E tag{};
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * kChannelsPerThread;
  if (c0 >= p.dim) return;
  const int t0 = blockIdx.y * kSpan;

  Walk<W> k;
  load_weights<W>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, k.w, k.b);
  k.silu = (p.flags & kFlagSilu) != 0;
  pdl_wait();

  // Which sequence holds row t0, and where it starts and ends (in rows).
  int start, limit;
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
    k.n = lo;
    start = cu[k.n];
    k.end = cu[k.n + 1];
  } else {
    limit = p.tokens;
    if (t0 >= limit) return;
    k.n = blockIdx.z;
    start = 0;
    k.end = limit;
    x += k.n * p.x_stride_seq;
    y += k.n * p.y_stride_seq;
  }
  x += c0;
  y += c0;
  const int stop = min(limit, t0 + kSpan);

  // First chunk in flight, then the window before t0: x rows inside the sequence, else
  // initial-state slots / zeros.
  uint4 bufa[kChunk], bufb[kChunk];
  load_chunk(bufa, x, p.x_stride_tok, t0, stop);
  if (t0 - S < start) window_from_state(tag, p, k.n, c0, k.win);
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int s = t0 - S + j;
    if (s >= start) {
      unpack8(tag, ld_nc_v4(x + static_cast<int64_t>(s) * p.x_stride_tok), k.win[j]);
    } else if (s - start + S > j) {
      // The state slot that lands at window position j: slot (s - start + S) >= j.
#pragma unroll
      for (int i = 0; i < S; ++i)
        if (i == s - start + S)
#pragma unroll
          for (int c = 0; c < 8; ++c) k.win[j][c] = k.win[i][c];
    }
  }

  // Walk the span: compute one buffer while the other's loads are in flight.
#pragma unroll 1
  for (int tc = t0; tc < stop; tc += 2 * kChunk) {
    load_chunk(bufb, x, p.x_stride_tok, tc + kChunk, stop);
    if (tc + 2 * kChunk >= stop) pdl_launch_dependents();
    compute_chunk<E, W>(p, k, bufa, y, c0, tc, stop);
    if (tc + kChunk >= stop) break;
    load_chunk(bufa, x, p.x_stride_tok, tc + 2 * kChunk, stop);
    compute_chunk<E, W>(p, k, bufb, y, c0, tc + kChunk, stop);
  }
}

}  // namespace kernrt_conv

// ---- entries -----------------------------------------------------------------------------
#define KERNRT_CONV_FWD_ENTRY(dtype, tag, w)                                                \
  extern "C" __global__ void __launch_bounds__(kernrt_conv::kThreads, KERNRT_CONV_MIN_BLOCKS) \
      conv_fwd_sm90a_##dtype##_w##w(const __grid_constant__ kernrt_conv::ConvFwdParams p) { \
    kernrt_conv::conv_fwd<kernrt_conv::tag, w>(p);                                          \
  }

KERNRT_CONV_FWD_ENTRY(bf16, Bf16, 2)
KERNRT_CONV_FWD_ENTRY(bf16, Bf16, 3)
KERNRT_CONV_FWD_ENTRY(bf16, Bf16, 4)
KERNRT_CONV_FWD_ENTRY(f16, F16, 2)
KERNRT_CONV_FWD_ENTRY(f16, F16, 3)
KERNRT_CONV_FWD_ENTRY(f16, F16, 4)
