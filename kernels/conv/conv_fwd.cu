// Causal depthwise conv1d forward (prefill) for the H200:
//   y[t, d] = act(bias[d] + sum_j weight[d, j] * x~[t - (W-1) + j, d]) (+ residual[t, d])
// over x [B, T, D] with any token/batch strides, or a packed varlen batch (cu_seqlens),
// x~[s < 0] taken from an optional initial state, optional final state output, both in our
// [D, W-1] lines or fla's [D, W] (kFlagStateFull).
// Entries, one `const __grid_constant__ ConvFwdParams` each, for dtype in {bf16, f16} and
// W in {2, 3, 4}:
//   conv_fwd_ring8x4h_sm90a_<dtype>_w<W> 4 channels per consumer thread (8-byte vectors), the
//                                        x rows streamed into shared memory by a producer warp
//
// Grid/block: block.x = 96 (64 consumers, one per 4 channels, then the producer warp);
// dynamic shared memory sizeof(RingOf<Ring8x4h>) = 16,448 bytes (the generator's
// FWD_RING_SMEM); grid.x = ceil(D / 256); grid.y = 3 * ceil(tokens / 72): the blocks along
// grid.y take spans of 16, 24 and 32 consecutive rows in turn (Loader); grid.z = B (dense)
// or 1 (varlen). A consumer rebuilds the W-1 inputs before its span (x rows from global
// memory: the previous span's rows, L2 hits; initial-state slots or zeros), keeps that
// window in registers and walks the span (conv_walk.cuh); x is read once from DRAM, y
// written once.
//
// Ring: the producer warp copies the span's rows of the block's 256-channel slice, one 1-D
// cp.async.bulk (512 bytes) a row, into 4 stages of kGroup rows, so a span's rows are all in
// flight at once; the consumers read their 8 bytes of each row from the stage (LDS.64) and
// store y from registers. The bytes in flight are the stages, not registers (64 registers,
// 10 blocks of 96 per SM). Why this shape (H200, B8 T4096 D2048 / D4096, B16 T8192 D2048,
// B1 T32768 D4096, W4 silu, per call in an 8-call graph, validation/conv/notes.md): half-
// width blocks and mixed spans both shorten what a wave's blocks do in step. In one run
// (call d3) it ran 68.35 / 131.83 / 259.44 / 131.92 us, where 128 consumers at spans of 24
// in 3 stages (the previous forward) ran 69.26 / 134.04 / 262.10 / 134.06, 128 consumers at
// 16 / 24 / 32 68.94 / 132.99 / 260.95 / 133.00, 64 consumers at a uniform 24 68.81 / 135.27
// / 265.65 / 135.46, 64 consumers at 24 / 32 / 40 in 5 stages 68.60 / 131.54 / 258.39 /
// 131.58 (faster at the larger shapes, slower at the bar's), 32 consumers 89.5 / 173.1 /
// 354.3 / 173.2; in call d2 spans of 8 .. 40 in turn (128 consumers) 69.88 / 133.79 / 261.85
// / 133.67 (tag conv-candidates-2026-12n). Lost before (tag conv-candidates-2026-12l): 256
// consumers, 7 blocks of 160 per SM (spills), blocks walking 2-8 spans with the ring running
// across them (18-55 % slower), an L2 prefetch of the rows of the block a wave later (18-23 %
// slower: L2 evicts them before their use). Stage use u of stage s completes FULL[s] phase u
// (the producer's expect-tx and the copies' bytes) and EMPTY[s] phase u (one arrival per
// consumer warp after its reads).
//
// PDL: before griddepcontrol.wait the block sets up its barriers, loads its weights, asks L2
// for its span's rows (cp.async.bulk.prefetch.L2) and lets the next grid launch; with two
// stages at spans of 16 that ran 70.25 / 137.26 / 268.45 / 137.24 us where the trigger at
// the span's last group without the prefetch ran 72.87 / 137.65 / 270.89 / 137.67, the
// prefetch alone 70.43 / 137.77 / 268.83 / 137.46, the early trigger alone 73.20 / 138.34 /
// 272.06 / 138.40 (tag conv-candidates-2026-12k).
// fp32 accumulation in conv_dot's order (fla's); outputs rounded to x's dtype (RNE). The
// residual row is loaded when its row is computed (supported, not overlapped with other
// rows' loads).
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

constexpr int kChannels = 4;   // channels per consumer: one 8-byte vector per row
constexpr int kGroup = 8;      // rows per stage

// A forward loader: T consumer threads (block.x = T + 32), S stages of kGroup rows, and its
// blocks' spans: A, A + 8, .., A + 8 (P - 1) rows in turn along grid.y (kCycle rows for P
// blocks, grid.y = P * ceil(tokens / kCycle)), so that the blocks of a wave end at P
// different times.
template <int T, int S, int A, int P>
struct Loader {
  static constexpr int kThreads = T, kStages = S, kSpan0 = A, kPeriod = P;
  static constexpr int kCycle = P * A + 4 * P * (P - 1);
};
using Ring8x4h = Loader<64, 4, 16, 3>;  // the shipped forward: 64 consumers, spans 16 / 24 / 32

// Shared memory of a block: the stages and their barriers.
template <class L>
struct RingOf {
  Vec<kChannels> rows[L::kStages][kGroup][L::kThreads];
  uint64_t full[L::kStages], empty[L::kStages];
};
static_assert(sizeof(RingOf<Ring8x4h>) == 16448, "the generator's FWD_RING_SMEM (ring8x4h)");
static_assert(Ring8x4h::kCycle == 72 && Ring8x4h::kPeriod == 3, "the generator's FWD_SPAN_CYCLE");

// This block's first row and its span (see Loader).
template <class L>
__device__ __forceinline__ void block_span(int& t0, int& span) {
  const int k = blockIdx.y % L::kPeriod;
  span = L::kSpan0 + 8 * k;
  t0 = (blockIdx.y / L::kPeriod) * L::kCycle + L::kSpan0 * k + 4 * k * (k - 1);
}

// The span of this block: the producer warp streams, the consumers walk (see the header).
// Before griddepcontrol.wait the producer asks L2 for the span's rows and the W-1 before it
// (up to 32 rows; they are still read after the wait: a prefetch returns nothing, L2 is the
// coherence point), and every thread lets the next grid launch at block start: under PDL a
// call's first rows stream in while the previous call drains.
template <typename E, int W, class L>
__device__ __forceinline__ void conv_fwd_ring(const ConvFwdParams& p, RingOf<L>& ring) {
  constexpr int N = kChannels, G = kGroup, S = L::kStages, kThreads = L::kThreads;
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
  int t0, span;
  block_span<L>(t0, span);
  const uint32_t bytes = 2u * static_cast<uint32_t>(min(kThreads * N, p.dim - cb));
  if (producer) {
    const uint16_t* xb = static_cast<const uint16_t*>(p.x) + cb +
                         (p.cu_seqlens == nullptr ? blockIdx.z * p.x_stride_seq : 0);
    const int row = t0 - (W - 1) + lane;
    if (lane < span + W - 1 && row >= 0 && row < min(p.tokens, t0 + span))
      ptx::bulk_prefetch_l2(xb + static_cast<int64_t>(row) * p.x_stride_tok, bytes);
  }
  Walk<W, N> k;
  if (active) start_walk(p, k, c0);
  __syncthreads();
  ptx::griddepcontrol_launch_dependents();
  ptx::griddepcontrol_wait();
  const uint16_t* x;
  const uint16_t* res;
  uint16_t* y;
  int start, stop;
  if (!locate(p, k, t0, span, x, y, res, start, stop)) return;  // block-uniform
  if (producer) {
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
    return;
  }
  x += c0;
  y += c0;
  if (res != nullptr) res += c0;
  if (active) enter_span<E, W, N>(p, k, x, c0, t0, start);
#pragma unroll 1
  for (int g = 0, tc = t0; tc < stop; ++g, tc += G) {
    const int s = g % S;
    ptx::mbarrier_wait(&ring.full[s], (g / S) & 1);
    if (active) {
      const Vec<N>* row = &ring.rows[s][0][threadIdx.x];
      if (res == nullptr && tc + G <= min(stop, k.end)) {
        // the common group: whole, inside one sequence, no residual: straight-line rows
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
// Registers (sm_90a, bf16 W4): 64 without a minimum-blocks bound, so 10 blocks of 96 per SM
// (the 128-consumer ring held to 7 blocks of 160 per SM, 56 registers, spilled).
#define KERNRT_CONV_FWD_ENTRY(name, loader, dtype, tag, w)                              \
  extern "C" __global__ void __launch_bounds__(kernrt::conv::loader::kThreads + 32)   \
      conv_fwd_##name##_sm90a_##dtype##_w##w(                                         \
          const __grid_constant__ kernrt::conv::ConvFwdParams p) {                    \
    extern __shared__ __align__(16) unsigned char smem_raw[];                         \
    kernrt::conv::conv_fwd_ring<kernrt::conv::tag, w, kernrt::conv::loader>(          \
        p, *reinterpret_cast<kernrt::conv::RingOf<kernrt::conv::loader>*>(smem_raw)); \
  }
#define KERNRT_CONV_FWD_ENTRIES(name, loader)          \
  KERNRT_CONV_FWD_ENTRY(name, loader, bf16, Bf16, 2)   \
  KERNRT_CONV_FWD_ENTRY(name, loader, bf16, Bf16, 3)   \
  KERNRT_CONV_FWD_ENTRY(name, loader, bf16, Bf16, 4)   \
  KERNRT_CONV_FWD_ENTRY(name, loader, f16, F16, 2)     \
  KERNRT_CONV_FWD_ENTRY(name, loader, f16, F16, 3)     \
  KERNRT_CONV_FWD_ENTRY(name, loader, f16, F16, 4)

KERNRT_CONV_FWD_ENTRIES(ring8x4h, Ring8x4h)
