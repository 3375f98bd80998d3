// Causal depthwise conv1d forward (prefill) for the H200:
//   y[t, d] = act(bias[d] + sum_j weight[d, j] * x~[t - (W-1) + j, d]) (+ residual[t, d])
// over x [B, T, D] with any token/batch strides, or a packed varlen batch (cu_seqlens),
// x~[s < 0] taken from an optional initial state, optional final state output, both in our
// [D, W-1] lines or fla's [D, W] (kFlagStateFull).
// Entries, one `const __grid_constant__ ConvFwdParams` each, for dtype in {bf16, f16} and
// W in {2, 3, 4}:
//   conv_fwd_strip4p_sm90a_<dtype>_w<W>  register strip, 4 channels per thread (8-byte
//                                        vectors), groups of kGroup rows, the next group's
//                                        loads issued before this group's math
//
// Grid/block: block.x threads (any; the manifests launch 128), one per 4 channels;
// grid.x = ceil(D / (4 * block.x)); grid.y spans of ceil(tokens / grid.y) consecutive rows
// (any grid.y covers the rows; the manifests take spans of 32); grid.z = B (dense) or 1
// (varlen). A thread rebuilds the W-1 inputs before its span (x rows, initial-state slots
// or zeros), keeps that window in registers and walks the span (conv_walk.cuh): x is read
// once from DRAM (the halo rows are the previous span's rows, L2 hits), y written once.
//
// Strip: no shared memory; a thread holds two groups of kGroup rows, the one it computes and
// the next one, whose loads are in flight during the math (96 registers, 5 blocks of 128 per
// SM). A whole group without a residual runs straight-line. On the H200 (B8 T4096 D2048 /
// D4096, B16 T8192 D2048, B1 T32768 D4096, W4 silu, one run) it ran 71.99 / 138.92 / 269.72 /
// 139.06 us, 1.01-1.03x kernel-fun, where loading each group after the previous group's
// math (72 registers, 7 blocks/SM) ran 72.90 / 140.33 / 271.64 / 140.38, at spans of 24 / 16 / 8
// rows -0.1-1.9 / 3.7-6.7 / 20-26 % slower still, and the PDL trigger at block start no faster
// (validation/conv/notes.md; those entries are in git tag conv-candidates-2026-12b). The
// moves of the next group into v wait for its loads, so one group is in flight at a time;
// two buffers that swap roles (no moves, up to two groups in flight, same 96 registers) ran
// 4.1-4.9 % slower at all four shapes, and that walk over a grid whose last-dispatched
// blocks take half spans 5.8-10.6 % slower (tag conv-candidates-2026-12g): more rows in
// flight lowered DRAM throughput (ncu 69.9 % against 72.5 %). Groups of 6 rows held to 6
// blocks/SM (80 registers: 24 warps with 6 rows in flight each) ran 1.5-2.9 % slower at
// spans of 30 / 36 / 42, and strip4p launched in clusters along grid x 0.3-0.6 % (pairs)
// and 1.5-3.5 % (whole row bands) slower (tag conv-candidates-2026-12h): more warps for
// the math and co-started row bands do not buy back what the registers or the cluster
// placement cost. y = x over exactly these accesses without the math (a probe on tag
// conv6-floor-probes) reaches only 91.9-94.6 % of the floor, so most of the gap to the
// copy is the access pattern, not the math.
//
// fp32 accumulation in conv_dot's order (fla's); outputs rounded to x's dtype (RNE). With
// PDL only the weight loads precede griddepcontrol.wait. The residual row is loaded when
// its row is computed (supported, not overlapped with other rows' loads).
//
// Not checked here (the manifest and the runtime's load check them, see README.md): D % 8,
// 16-byte alignment of every pointer/stride, W <= 4 (one entry per W), cu_seqlens being
// monotone with cu[0] = 0, sequence lengths >= 1 where a final state is wanted, and that the
// initial and final states do not overlap (a tile reading an initial state may run after
// the tile that writes the final state).
#include "common/ptx/sync.cuh"
#include "common/ptx/tma.cuh"
#include "conv/conv_vec.cuh"
#include "conv/conv_walk.cuh"
#include "conv/params.h"

namespace kernrt::conv {

constexpr int kThreads = 128;  // block.x the manifests launch with
constexpr int kChannels = 4;   // channels per thread: one 8-byte vector per row
constexpr int kGroup = 8;      // rows loaded together (4-row groups: 0.1-2.5 % slower)

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
// The next group's loads (v's successor, nv) are issued before this group's math.
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
  Vec<N> nv[G];  // the next group of the segment, loaded during v's math
  load_group<N, G>(v, x, p.x_stride_tok, t0, seg);
  enter_span<E, W, N>(p, k, x, c0, t0, start);  // its loads wait behind the first group's
#pragma unroll 1
  for (int tc = t0;;) {
    if (tc + G >= stop) ptx::griddepcontrol_launch_dependents();
    if (tc + G < seg) load_group<N, G>(nv, x, p.x_stride_tok, tc + G, seg);
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
      load_group<N, G>(v, x, p.x_stride_tok, tc, seg);  // a new segment's first group
    } else {
#pragma unroll
      for (int r = 0; r < G; ++r) v[r] = nv[r];
    }
  }
}


// ---- ring (candidate) ----------------------------------------------------------------------
// The strip's walk with the x rows arriving in shared memory: the block's last warp streams
// the span's rows of the block's channel slice (one 1-D cp.async.bulk a row, kThreads x N
// channels) into S stages of G rows; the kThreads consumers read their vector of each row
// from the stage (LDS.64), so the bytes in flight are S stages a block, not registers.
// Stage use u of stage s completes FULL[s] phase u (the producer's expect-tx and the copies'
// bytes) and EMPTY[s] phase u (one arrival per consumer warp after its reads).
template <int G, int S>
struct Ring {
  Vec<kChannels> rows[S][G][kThreads];
  uint64_t full[S], empty[S];
};
template <int G, int S>
constexpr int ring_smem() {
  return int(sizeof(Ring<G, S>));
}

template <typename E, int W, int G, int S>
__device__ __forceinline__ void conv_fwd_ring(const ConvFwdParams& p, Ring<G, S>& ring) {
  constexpr int N = kChannels;
  static_assert(G <= 32, "one producer lane per row of a stage");
  const E tag{};
  const int lane = threadIdx.x % 32;
  const bool producer = threadIdx.x >= kThreads;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      ptx::mbarrier_init(&ring.full[s], 1);
      ptx::mbarrier_init(&ring.empty[s], kThreads / 32);
    }
    ptx::fence_mbarrier_init();
  }
  const int cb = blockIdx.x * kThreads * N;  // the block's first channel
  const int c0 = cb + (producer ? 0 : threadIdx.x * N);
  const bool active = !producer && c0 < p.dim;
  Walk<W, N> k;
  if (active) start_walk(p, k, c0);
  __syncthreads();
  ptx::griddepcontrol_wait();
  const int span = (p.tokens + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
  const int t0 = blockIdx.y * span;
  const uint16_t* x;
  const uint16_t* res;
  uint16_t* y;
  int start, stop;
  if (!locate(p, k, t0, span, x, y, res, start, stop)) return;  // block-uniform
  if (producer) {
    if (threadIdx.x >= kThreads + 32) return;
    const uint32_t bytes = 2u * static_cast<uint32_t>(min(kThreads * N, p.dim - cb));
    const uint16_t* src = x + cb;
#pragma unroll 1
    for (int g = 0, tc = t0; tc < stop; ++g, tc += G) {
      const int s = g % S;
      if (g >= S) ptx::mbarrier_wait(&ring.empty[s], ((g / S) - 1) & 1);
      const int rows = min(G, stop - tc);
      if (lane == 0) ptx::mbarrier_arrive_expect_tx(&ring.full[s], rows * bytes);
      __syncwarp();
      if (lane < rows)
        ptx::bulk_load(&ring.rows[s][lane][0], src + static_cast<int64_t>(tc + lane) * p.x_stride_tok,
                       bytes, &ring.full[s]);
    }
    ptx::griddepcontrol_launch_dependents();
    return;
  }
  x += c0;
  y += c0;
  if (res != nullptr) res += c0;
  if (active) enter_span<E, W, N>(p, k, x, c0, t0, start);
#pragma unroll 1
  for (int g = 0, tc = t0; tc < stop; ++g, tc += G) {
    const int s = g % S;
    if (tc + G >= stop) ptx::griddepcontrol_launch_dependents();
    ptx::mbarrier_wait(&ring.full[s], (g / S) & 1);
    if (active) {
      const Vec<N>* row = &ring.rows[s][0][threadIdx.x];
      if (res == nullptr && tc + G <= min(stop, k.end)) {
        // the common group: whole, inside one sequence, no residual (as the strip's)
        uint16_t* yr = y + static_cast<int64_t>(tc) * p.y_stride_tok;
#pragma unroll
        for (int r = 0; r < G; ++r, yr += p.y_stride_tok) {
          float cur[N], out[N];
          unpack(tag, row[r * kThreads], cur);
          row_out(k, cur, out);
          st<N>(yr, pack(tag, out));
          shift_window(k, cur);
        }
      } else {
#pragma unroll 1
        for (int r = 0; r < G && tc + r < stop; ++r) {
          const int t = tc + r;
          if (t == k.end) {  // the previous row ended a sequence (varlen)
            if (p.final_state != nullptr) write_final_after<E>(p, k, x, c0, start);
            next_sequence<E>(p, k, c0, t);
            start = t;
          }
          float cur[N];
          unpack(tag, row[r * kThreads], cur);
          emit_row<E>(p, k, cur, y, res, t);
          shift_window(k, cur);
        }
      }
    }
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&ring.empty[s]);
  }
  if (active && stop == k.end && p.final_state != nullptr) write_final_after<E>(p, k, x, c0, start);
}

}  // namespace kernrt::conv

// ---- entries -----------------------------------------------------------------------------
// Register budget (bf16 W4, sm_90a, no spills): 5 blocks of 128 per SM (<= 102 registers;
// 96 used: 20 warps, up to 16 rows of 8 bytes per lane between issue and use). f16 entries
// get one block per SM less: their conversions need more registers (f16 is not a timed shape).
#define KERNRT_CONV_FWD_ENTRY(blocks, dtype, tag, w)                                  \
  extern "C" __global__ void __launch_bounds__(kernrt::conv::kThreads, blocks)      \
      conv_fwd_strip4p_sm90a_##dtype##_w##w(                                        \
          const __grid_constant__ kernrt::conv::ConvFwdParams p) {                  \
    kernrt::conv::conv_fwd_strip<kernrt::conv::tag, w, kernrt::conv::kChannels,     \
                                 kernrt::conv::kGroup>(p);                          \
  }

KERNRT_CONV_FWD_ENTRY(5, bf16, Bf16, 2)
KERNRT_CONV_FWD_ENTRY(5, bf16, Bf16, 3)
KERNRT_CONV_FWD_ENTRY(5, bf16, Bf16, 4)
KERNRT_CONV_FWD_ENTRY(4, f16, F16, 2)
KERNRT_CONV_FWD_ENTRY(4, f16, F16, 3)
KERNRT_CONV_FWD_ENTRY(4, f16, F16, 4)

// Ring candidates: conv_fwd_ring<G>x<S>[m<B>]_sm90a_<dtype>_w<W>, block kThreads + 32 (the
// producer warp), dynamic shared memory ring_smem<G, S>() (the generator's FWD_RING_SMEM);
// bounds: ptxas takes 64 registers for ring8x2 under (160) and 132 under (160, 1); held to 7
// blocks per SM (56) it spills.
#define KERNRT_CONV_RING_ENTRY(name, g, s, bounds, dtype, tag, w)                      \
  extern "C" __global__ void __launch_bounds__ bounds                                  \
      conv_fwd_##name##_sm90a_##dtype##_w##w(                                          \
          const __grid_constant__ kernrt::conv::ConvFwdParams p) {                     \
    extern __shared__ __align__(16) unsigned char smem_raw[];                          \
    kernrt::conv::conv_fwd_ring<kernrt::conv::tag, w, g, s>(                           \
        p, *reinterpret_cast<kernrt::conv::Ring<g, s>*>(smem_raw));                    \
  }
#define KERNRT_CONV_RING_ENTRIES(name, g, s, bounds)          \
  KERNRT_CONV_RING_ENTRY(name, g, s, bounds, bf16, Bf16, 2)   \
  KERNRT_CONV_RING_ENTRY(name, g, s, bounds, bf16, Bf16, 3)   \
  KERNRT_CONV_RING_ENTRY(name, g, s, bounds, bf16, Bf16, 4)   \
  KERNRT_CONV_RING_ENTRY(name, g, s, bounds, f16, F16, 2)     \
  KERNRT_CONV_RING_ENTRY(name, g, s, bounds, f16, F16, 3)     \
  KERNRT_CONV_RING_ENTRY(name, g, s, bounds, f16, F16, 4)
#define KERNRT_RING_THREADS (kernrt::conv::kThreads + 32)
KERNRT_CONV_RING_ENTRIES(ring8x2, 8, 2, (KERNRT_RING_THREADS))
KERNRT_CONV_RING_ENTRIES(ring8x1, 8, 1, (KERNRT_RING_THREADS))
KERNRT_CONV_RING_ENTRIES(ring4x2, 4, 2, (KERNRT_RING_THREADS))
KERNRT_CONV_RING_ENTRIES(ring4x4, 4, 4, (KERNRT_RING_THREADS))
static_assert(kernrt::conv::ring_smem<8, 2>() == 16416 && kernrt::conv::ring_smem<8, 1>() == 8208 &&
                  kernrt::conv::ring_smem<4, 2>() == 8224 && kernrt::conv::ring_smem<4, 4>() == 16448,
              "the generator's FWD_RING_SMEM");
