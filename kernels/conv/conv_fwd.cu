// Causal depthwise conv1d forward (prefill) for the H200:
//   y[t, d] = act(bias[d] + sum_j weight[d, j] * x~[t - (W-1) + j, d]) (+ residual[t, d])
// over x [B, T, D] with any token/batch strides, or a packed varlen batch (cu_seqlens),
// x~[s < 0] taken from an optional initial state, optional final state output, both in our
// [D, W-1] lines or fla's [D, W] (kFlagStateFull).
// Entries, one `const __grid_constant__ ConvFwdParams` each, for dtype in {bf16, f16} and
// W in {2, 3, 4}, one per loader (the candidates are measured side by side on the device;
// the losers go to git history):
//   conv_fwd_ring_sm90a_<dtype>_w<W>    shared-memory ring filled by cp.async, 8 channels
//                                       per thread (the loader shipped since Nov 2026)
//   conv_fwd_strip8_sm90a_<dtype>_w<W>  register strip, 8 channels per thread, groups of
//                                       kStrip8Group rows loaded before their math
//   conv_fwd_strip4_sm90a_<dtype>_w<W>  the same with 4 channels per thread (8-byte vectors)
//   conv_fwd_strip4g4_sm90a_<dtype>_w<W> strip4 with groups of 4 rows (more warps, fewer
//                                        rows in flight each)
//
// Grid/block: block.x = kThreads threads (the strips take any block.x), one per N channels;
// grid.x = ceil(D / (N * block.x)); grid.y spans of ceil(tokens / grid.y) consecutive rows
// (any grid.y covers the rows); grid.z = B (dense) or 1 (varlen). A thread rebuilds the W-1 inputs before its span
// (x rows, initial-state slots or zeros), keeps that window in registers and walks the span
// row by row (conv_walk.cuh): x is read once from DRAM (the halo rows are the previous
// span's rows, L2 hits), y written once.
//
// Ring: x rows reach the thread through a ring of kRingStages stages x kRingRows rows x the
// block's 1024 channels (40 KB static shared memory, <= 128 registers: 4 blocks per SM);
// each thread cp.async's its own 16-byte vector of every row kRingStages-1 stages ahead
// (commit/wait groups, no barrier: a thread only reads what it copied), so 32 KB per block
// are in flight whatever the math is doing.
// Strip: no shared memory; a thread issues the loads of G rows, then computes them (the
// shape of kernel-fun's Triton `cconv` forward, which ran B8 T4096 D2048 in 72.3 us on the
// H200 where the ring ran 80.5 and the ring without its math 75.7): bytes in flight come
// from many resident warps, so the per-thread state is kept small (4 channels: 32 fp32
// registers of weights and window). A whole group without a residual runs straight-line.
//
// fp32 accumulation in conv_dot's order (fla's); outputs rounded to x's dtype (RNE). With
// PDL only the weight loads precede griddepcontrol.wait. The residual row is loaded when
// its row is computed (supported, not overlapped with other rows' loads).
//
// Not checked here (the manifest and the runtime's load check them, see README.md): D % 8,
// 16-byte alignment of every pointer/stride, block.x == kThreads for the ring (its shared
// ring is sized for it), W <= 4 (one entry per W), cu_seqlens being
// monotone with cu[0] = 0, sequence lengths >= 1 where a final state is wanted, and that the
// initial and final states do not overlap (a tile reading an initial state may run after
// the tile that writes the final state).
#include "conv/conv_ptx.cuh"
#include "conv/conv_vec.cuh"
#include "conv/conv_walk.cuh"
#include "conv/params.h"

namespace kernrt::conv {

constexpr int kThreads = 128;     // block.x the manifests launch with
constexpr int kRingRows = 4;      // rows per ring stage (2 x 10 and 6 x 3 ran 0-3 % slower)
constexpr int kRingStages = 5;
constexpr int kStrip8Group = 8;   // rows loaded together, 8 channels per thread
constexpr int kStrip4Group = 8;   // rows loaded together, 4 channels per thread
constexpr int kStrip4SmallGroup = 4;

// ---- ring ------------------------------------------------------------------------------
// buf[stage][row][thread] holds the thread's 16-byte vector of that row.
struct Ring {
  uint4 buf[kRingStages][kRingRows][kThreads];
};
static_assert(sizeof(Ring) <= 48 * 1024, "static shared memory limit");

// Rows tc .. tc+kRingRows-1 (those before stop) into stage s: this thread's vectors.
__device__ __forceinline__ void fill_stage(Ring& ring, const ConvFwdParams& p,
                                           const uint16_t* x, int tc, int stop, int s) {
#pragma unroll
  for (int r = 0; r < kRingRows; ++r)
    if (tc + r < stop)
      ptx::cp_async_cg_16(&ring.buf[s][r][threadIdx.x], x + static_cast<int64_t>(tc + r) * p.x_stride_tok);
}

template <typename E, int W>
__device__ __forceinline__ void conv_fwd_ring(const ConvFwdParams& p) {
  constexpr int N = 8;
  __shared__ Ring ring;
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
  if (c0 >= p.dim) return;  // no barrier below: each thread reads only what it copied
  Walk<W, N> k;
  start_walk(p, k, c0);
  ptx::griddepcontrol_wait();
  const int span = (p.tokens + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
  const int t0 = blockIdx.y * span;
  const uint16_t* x;
  const uint16_t* res;
  uint16_t* y;
  int start, stop;
  if (!locate(p, k, t0, span, x, y, res, start, stop)) return;  // block-uniform
  const int chunks = (stop - t0 + kRingRows - 1) / kRingRows;
  x += c0;
  y += c0;
  if (res != nullptr) res += c0;

  // Prefill all stages but one: the loop's first fill is the last.
#pragma unroll
  for (int i = 0; i < kRingStages - 1; ++i) {
    if (i < chunks) fill_stage(ring, p, x, t0 + i * kRingRows, stop, i);
    ptx::cp_async_commit_group();
  }
  enter_span<E, W, N>(p, k, x, c0, t0, start);

#pragma unroll 1
  for (int i = 0; i < chunks; ++i) {
    const int s = i % kRingStages;
    // Stage (i-1) % kRingStages was read by this thread in iteration i-1.
    const int j = i + kRingStages - 1;
    if (j < chunks) fill_stage(ring, p, x, t0 + j * kRingRows, stop, j % kRingStages);
    ptx::cp_async_commit_group();
    ptx::cp_async_wait_group<kRingStages - 1>();
    if (i + 1 == chunks) ptx::griddepcontrol_launch_dependents();
    const int tc = t0 + i * kRingRows;
#pragma unroll
    for (int r = 0; r < kRingRows; ++r)
      if (tc + r < stop) step_row<E, W, N>(p, k, ring.buf[s][r][threadIdx.x], y, res, c0, tc + r);
  }
}

// ---- strip -----------------------------------------------------------------------------
// Rows tc .. tc+G-1 (those before stop) of this thread's channels into registers.
template <int N, int G>
__device__ __forceinline__ void load_group(Vec<N> (&v)[G], const uint16_t* x, int64_t stride,
                                           int tc, int stop) {
  const uint16_t* row = x + static_cast<int64_t>(tc) * stride;
  if (tc + G <= stop) {  // the whole group: no predicates, one address add per row
#pragma unroll
    for (int r = 0; r < G; ++r, row += stride) v[r] = ld_nc<N>(row);
  } else {
#pragma unroll
    for (int r = 0; r < G; ++r, row += stride)
      if (tc + r < stop) v[r] = ld_nc<N>(row);
  }
}

// The span as segments of one sequence each (dense: one segment); inside a segment the
// rows need no check, so the hot loop holds only loads, math and stores, and the sequence
// switch and the final state happen between segments.
template <typename E, int W, int N, int G>
__device__ __forceinline__ void conv_fwd_strip(const ConvFwdParams& p) {
  const E tag{};
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
  if (c0 >= p.dim) return;  // no barrier below
  Walk<W, N> k;
  start_walk(p, k, c0);
  ptx::griddepcontrol_wait();
  const int span = (p.tokens + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
  const int t0 = blockIdx.y * span;
  const uint16_t* x;
  const uint16_t* res;
  uint16_t* y;
  int start, stop;
  if (!locate(p, k, t0, span, x, y, res, start, stop)) return;
  x += c0;
  y += c0;
  if (res != nullptr) res += c0;
  int seg = min(stop, k.end);  // end of the current segment
  Vec<N> v[G];
  load_group<N, G>(v, x, p.x_stride_tok, t0, seg);
  enter_span<E, W, N>(p, k, x, c0, t0, start);  // its loads wait behind the first group's
#pragma unroll 1
  for (int tc = t0;;) {
    if (tc + G >= stop) ptx::griddepcontrol_launch_dependents();
    if (res == nullptr && tc + G <= seg) {
      // The common group: whole, no residual. Straight-line rows, so the window slides by
      // register renaming and y advances by one add per row.
      uint16_t* yr = y + static_cast<int64_t>(tc) * p.y_stride_tok;
#pragma unroll
      for (int r = 0; r < G; ++r, yr += p.y_stride_tok) {
        float cur[N], out[N];
        unpack(tag, v[r], cur);
        row_out(k, cur, out);
        st<N>(yr, pack(tag, out));
        shift_window(k, cur);
      }
    } else {
#pragma unroll
      for (int r = 0; r < G; ++r) {
        if (tc + r < seg) {
          float cur[N];
          unpack(tag, v[r], cur);
          emit_row<E>(p, k, cur, y, res, tc + r);
          shift_window(k, cur);
        }
      }
    }
    tc += G;
    if (tc >= seg) {  // the segment is done: a sequence end, the span's end, or both
      if (seg == k.end && p.final_state != nullptr) write_final_after<E>(p, k, x, c0, start);
      if (seg >= stop) break;
      next_sequence<E>(p, k, c0, seg);
      start = tc = seg;
      seg = min(stop, k.end);
    }
    load_group<N, G>(v, x, p.x_stride_tok, tc, seg);
  }
}

// The entries' bodies, one name per loader.
template <typename E, int W>
__device__ __forceinline__ void fwd_ring(const ConvFwdParams& p) { conv_fwd_ring<E, W>(p); }
template <typename E, int W>
__device__ __forceinline__ void fwd_strip8(const ConvFwdParams& p) {
  conv_fwd_strip<E, W, 8, kStrip8Group>(p);
}
template <typename E, int W>
__device__ __forceinline__ void fwd_strip4(const ConvFwdParams& p) {
  conv_fwd_strip<E, W, 4, kStrip4Group>(p);
}
template <typename E, int W>
__device__ __forceinline__ void fwd_strip4g4(const ConvFwdParams& p) {
  conv_fwd_strip<E, W, 4, kStrip4SmallGroup>(p);
}

}  // namespace kernrt::conv

// ---- entries -----------------------------------------------------------------------------
// Register budgets (bf16 W4, sm_90a, no spills): the ring and strip8 at 4 blocks of 128 per SM
// (<= 128 registers; strip8 spills 172 bytes at 5), strip4 at 7 (<= 72: 28 warps, up to 8
// rows of 8 bytes in flight per lane), strip4g4 at 8 (<= 64: 32 warps, 4 rows each). The
// strips take any block.x (the ring needs kThreads).
#define KERNRT_CONV_FWD_ENTRY(name, blocks, dtype, tag, w)                                   \
  extern "C" __global__ void __launch_bounds__(kernrt::conv::kThreads, blocks)              \
      conv_fwd_##name##_sm90a_##dtype##_w##w(                                               \
          const __grid_constant__ kernrt::conv::ConvFwdParams p) {                          \
    kernrt::conv::fwd_##name<kernrt::conv::tag, w>(p);                                      \
  }
// f16 entries get one block per SM less for the strips: their conversions spill 8-48 bytes
// at the bf16 budgets (f16 is not a timed shape).
#define KERNRT_CONV_FWD_ENTRIES(dtype, tag, w, less)     \
  KERNRT_CONV_FWD_ENTRY(ring, 4, dtype, tag, w)           \
  KERNRT_CONV_FWD_ENTRY(strip8, 4 - less, dtype, tag, w)  \
  KERNRT_CONV_FWD_ENTRY(strip4, 7 - less, dtype, tag, w)  \
  KERNRT_CONV_FWD_ENTRY(strip4g4, 8 - less, dtype, tag, w)

KERNRT_CONV_FWD_ENTRIES(bf16, Bf16, 2, 0)
KERNRT_CONV_FWD_ENTRIES(bf16, Bf16, 3, 0)
KERNRT_CONV_FWD_ENTRIES(bf16, Bf16, 4, 0)
KERNRT_CONV_FWD_ENTRIES(f16, F16, 2, 1)
KERNRT_CONV_FWD_ENTRIES(f16, F16, 3, 1)
KERNRT_CONV_FWD_ENTRIES(f16, F16, 4, 1)
