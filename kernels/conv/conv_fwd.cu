// Causal depthwise conv1d forward (prefill) for the H200:
//   y[t, d] = act(bias[d] + sum_j weight[d, j] * x~[t - (W-1) + j, d])
// over x [B, T, D] with any token/batch strides, or a packed varlen batch (cu_seqlens),
// x~[s < 0] taken from an optional initial state, optional final state output.
// Entries: conv_fwd_sm90a_{bf16,f16}_w{2,3,4}, one `const __grid_constant__ ConvFwdParams`.
//
// Grid/block: block.x threads, one per 8 channels (one 16-byte vector); grid.x =
// ceil(D / (8 * block.x)); grid.y spans of consecutive rows; grid.z = B (dense) or 1
// (varlen). A thread rebuilds the W-1 inputs before its span (x rows, initial state or
// zeros), keeps that window in registers and walks the span row by row: x is read once from
// DRAM (the halo rows are the previous span's rows, L2 hits, loaded with plain ld.global.nc
// since run 10), y written once (plain stores and unhinted cp.async since run 9: see
// conv_walk.cuh and conv_async.cuh).
// Two walks (KERNRT_CONV_FWD_KERNEL):
//   1 ring (default), 2 ring with bulk copies: a shared-memory ring of kRingStages stages of
//     kRingRows rows x the block's channels, so the bytes in flight per SM are bounded by
//     shared memory, not registers. Loader 1: each thread cp.async's its own 16-byte vector
//     of each row (commit/wait groups, no barrier: a thread only reads what it copied).
//     Loader 2: one thread issues 1-D bulk copies (TMA) of each row's D-slice completing on
//     a per-stage `full` mbarrier; every thread arrives on an `empty` mbarrier when done
//     with a stage. The span is ceil(tokens / grid.y) rows: any grid.y covers the rows.
//   0 registers: spans of kSpan rows (grid.y = ceil(tokens / kSpan)) walked in chunks of
//     kChunk rows with the next chunk's loads in flight in a second register buffer.
//   3 persistent ring: loader 1's ring, but block y walks chunks y, y + grid.y, ... of
//     kChunkStages stages each (a chunk's W-1 halo rows arrive through its first stage), so
//     a grid of about one wave keeps every block's ring full from its first row to its last.
//   4 warp walk: walk 1's tile without shared memory, kPipe rows of loads in flight per lane
//     in registers, optionally an L2 bulk prefetch kPrefetch rows ahead.
// The per-thread walk (window, row step, span bounds) shared by all walks: conv_walk.cuh.
// fp32 accumulation; outputs rounded to x's dtype (RNE). With PDL only the weight loads
// precede griddepcontrol.wait. KERNRT_CONV_IDENTITY (y = x), KERNRT_CONV_TANH_SILU (silu
// through one tanh.approx) and walk 9 (a linear copy probe) exist for measurement variants only.
//
// Not checked here (the manifest and the runtime's load check them, see README.md): D % 8,
// 16-byte alignment of every pointer/stride, block.x == kThreads (the ring is sized for
// it; every manifest launches 128), W <= 4 (one entry per W), cu_seqlens being
// monotone with cu[0] = 0, sequence lengths >= 1 where a final state is wanted, and that the
// initial and final states do not overlap (a tile reading an initial state may run after
// the tile that writes the final state).
#include "conv/conv_async.cuh"
#include "conv/conv_vec.cuh"
#include "conv/conv_walk.cuh"
#include "conv/params.h"

#ifndef KERNRT_CONV_FWD_KERNEL
#define KERNRT_CONV_FWD_KERNEL 1
#endif
#ifndef KERNRT_CONV_CHUNK
#define KERNRT_CONV_CHUNK 8
#endif
#ifndef KERNRT_CONV_SPAN
#define KERNRT_CONV_SPAN 32
#endif
#ifndef KERNRT_CONV_RING_ROWS
#define KERNRT_CONV_RING_ROWS 4
#endif
#ifndef KERNRT_CONV_RING_STAGES
#define KERNRT_CONV_RING_STAGES 5
#endif
#ifndef KERNRT_CONV_CHUNK_STAGES  // walk 3: ring stages per chunk (halo rows included)
#define KERNRT_CONV_CHUNK_STAGES 8
#endif
#ifndef KERNRT_CONV_MIN_BLOCKS  // resident blocks per SM the register budget must allow
#if KERNRT_CONV_FWD_KERNEL == 0
#define KERNRT_CONV_MIN_BLOCKS 3
#else
#define KERNRT_CONV_MIN_BLOCKS 4
#endif
#endif
#ifndef KERNRT_CONV_PIPE  // walk 4: rows of loads in flight per thread
#define KERNRT_CONV_PIPE 8
#endif
#ifndef KERNRT_CONV_PREFETCH  // walk 4: rows ahead of the L2 bulk prefetch (0: none)
#define KERNRT_CONV_PREFETCH 0
#endif

namespace kernrt_conv {

constexpr int kThreads = 128;                     // block.x the manifests launch with
constexpr int kChunk = KERNRT_CONV_CHUNK;         // walk 0: rows per register buffer
constexpr int kSpan = KERNRT_CONV_SPAN;           // walk 0: rows per thread
constexpr int kRingRows = KERNRT_CONV_RING_ROWS;  // walks 1-2: rows per ring stage
constexpr int kRingStages = KERNRT_CONV_RING_STAGES;
static_assert(kChunk >= 2 && kChunk <= 16, "chunk: loads in flight vs registers (2 buffers)");
static_assert(kSpan % (2 * kChunk) == 0, "a span is whole pairs of chunks");
constexpr int kChunkStages = KERNRT_CONV_CHUNK_STAGES;  // walk 3: stages per chunk
static_assert(kRingStages >= 2 && kRingRows >= 1, "ring shape");
constexpr int kPipe = KERNRT_CONV_PIPE;
constexpr int kPrefetch = KERNRT_CONV_PREFETCH;
static_assert(kPipe >= 2 && kPipe <= 16, "walk 4: rows in flight vs registers");
static_assert(kPrefetch == 0 || kPrefetch > kPipe, "walk 4: prefetch beyond the loads");
static_assert(KERNRT_CONV_FWD_KERNEL != 3 || kRingRows >= 3,
              "walk 3: a chunk's W-1 halo rows fit in its first stage");

// Ring of walks 1-2: buf[stage][row][thread] holds thread's 16-byte vector of that row, so
// row r of a stage is the block's contiguous D-slice (the bulk copy's destination).
struct Ring {
  uint4 buf[kRingStages][kRingRows][kThreads];
  uint64_t full[kRingStages];   // bulk: the stage's rows have landed
  uint64_t empty[kRingStages];  // bulk: every thread has read the stage
};
static_assert(sizeof(Ring) <= 48 * 1024, "static shared memory limit");

// ---- walk 0: register double buffer -------------------------------------------------------
__device__ __forceinline__ void load_chunk(uint4 (&buf)[kChunk], const uint16_t* x, int64_t stride,
                                           int tc, int stop) {
#pragma unroll
  for (int r = 0; r < kChunk; ++r)
    if (tc + r < stop) buf[r] = ld_nc_v4(x + static_cast<int64_t>(tc + r) * stride);
}

template <typename E, int W>
__device__ __forceinline__ void compute_chunk(const ConvFwdParams& p, Walk<W>& k,
                                              const uint4 (&buf)[kChunk], uint16_t* y, int c0,
                                              int tc, int stop) {
#pragma unroll
  for (int r = 0; r < kChunk; ++r)
    if (tc + r < stop) step_row<E, W>(p, k, buf[r], y, c0, tc + r);
}

template <typename E, int W>
__device__ __forceinline__ void conv_fwd_regs(const ConvFwdParams& p) {
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * kChannelsPerThread;
  if (c0 >= p.dim) return;
  const int t0 = blockIdx.y * kSpan;
  Walk<W> k;
  load_weights<W>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, k.w, k.b);
  k.silu = (p.flags & kFlagSilu) != 0;
  pdl_wait();
  const uint16_t* x;
  uint16_t* y;
  int start, stop;
  if (!locate(p, k, t0, kSpan, x, y, start, stop)) return;
  x += c0;
  y += c0;
  uint4 bufa[kChunk], bufb[kChunk];
  load_chunk(bufa, x, p.x_stride_tok, t0, stop);
  enter_span<E, W>(p, k, x, c0, t0, start);
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

// ---- walks 1-2: shared-memory ring ----------------------------------------------------------
// Chunk i (rows t0 + i*kRingRows ...) into stage s. cp.async: this thread's vectors; bulk:
// called by thread 0 only, one copy per row of the block's D-slice.
template <bool kBulk>
__device__ __forceinline__ void fill_stage(Ring& ring, const ConvFwdParams& p,
                                           const uint16_t* x, int tc, int stop, int s,
                                           uint32_t row_bytes) {
  if (kBulk) {
    const int rows = min(kRingRows, stop - tc);
    mbar_arrive_expect_tx(&ring.full[s], rows * row_bytes);
    for (int r = 0; r < rows; ++r)
      bulk_g2s(&ring.buf[s][r][0], x + static_cast<int64_t>(tc + r) * p.x_stride_tok, row_bytes,
               &ring.full[s]);
  } else {
#pragma unroll
    for (int r = 0; r < kRingRows; ++r)
      if (tc + r < stop)
        cp_async16(&ring.buf[s][r][threadIdx.x], x + static_cast<int64_t>(tc + r) * p.x_stride_tok);
  }
}

template <typename E, int W, bool kBulk>
__device__ __forceinline__ void conv_fwd_ring(const ConvFwdParams& p) {
  __shared__ Ring ring;
  const int cb = blockIdx.x * blockDim.x * kChannelsPerThread;  // block's first channel
  const int c0 = cb + threadIdx.x * kChannelsPerThread;
  const bool active = c0 < p.dim;
  if (kBulk) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < kRingStages; ++s) {
        mbar_init(&ring.full[s], 1);
        mbar_init(&ring.empty[s], blockDim.x);
      }
      mbar_init_fence();
    }
    __syncthreads();
  } else if (!active) {
    return;
  }
  Walk<W> k;
  if (active) load_weights<W>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, k.w, k.b);
  k.silu = (p.flags & kFlagSilu) != 0;
  pdl_wait();
  const int span = (p.tokens + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
  const int t0 = blockIdx.y * span;
  const uint16_t* x;
  uint16_t* y;
  int start, stop;
  if (!locate(p, k, t0, span, x, y, start, stop)) return;  // block-uniform
  const int chunks = (stop - t0 + kRingRows - 1) / kRingRows;
  const uint32_t row_bytes = 2u * static_cast<uint32_t>(min(static_cast<int>(blockDim.x) *
                                                           kChannelsPerThread, p.dim - cb));
  const uint16_t* xs = kBulk ? x + cb : x + c0;  // what the loader copies from
  x += c0;
  y += c0;

  // Prefill: every stage (bulk) or all but one (cp.async: the loop's first fill is the last).
  if (kBulk) {
    if (threadIdx.x == 0)
      for (int i = 0; i < kRingStages && i < chunks; ++i)
        fill_stage<true>(ring, p, xs, t0 + i * kRingRows, stop, i, row_bytes);
  } else {
#pragma unroll
    for (int i = 0; i < kRingStages - 1; ++i) {
      if (i < chunks) fill_stage<false>(ring, p, xs, t0 + i * kRingRows, stop, i, row_bytes);
      cp_async_commit();
    }
  }
  if (active) enter_span<E, W>(p, k, x, c0, t0, start);

#pragma unroll 1
  for (int i = 0; i < chunks; ++i) {
    const int s = i % kRingStages;
    if (kBulk) {
      // Refill the stage chunk i-1 used once every thread has read it.
      const int j = i - 1 + kRingStages;
      if (threadIdx.x == 0 && i >= 1 && j < chunks) {
        const int sj = (i - 1) % kRingStages;
        mbar_wait(&ring.empty[sj], ((i - 1) / kRingStages) & 1);
        fill_stage<true>(ring, p, xs, t0 + j * kRingRows, stop, sj, row_bytes);
      }
      mbar_wait(&ring.full[s], (i / kRingStages) & 1);
    } else {
      // Stage (i-1) % kRingStages was read by this thread in iteration i-1.
      const int j = i + kRingStages - 1;
      if (j < chunks) fill_stage<false>(ring, p, xs, t0 + j * kRingRows, stop, j % kRingStages, row_bytes);
      cp_async_commit();
      cp_async_wait<kRingStages - 1>();
    }
    if (i + 1 == chunks) pdl_launch_dependents();
    const int tc = t0 + i * kRingRows;
    if (active) {
#pragma unroll
      for (int r = 0; r < kRingRows; ++r)
        if (tc + r < stop) step_row<E, W>(p, k, ring.buf[s][r][threadIdx.x], y, c0, tc + r);
    }
    if (kBulk) mbar_arrive(&ring.empty[s]);
  }
}

// ---- walk 3: persistent ring over chunks ----------------------------------------------------
// A chunk is kChunkStages ring stages: the W-1 halo rows before its first row, then up to
// kTile = kChunkStages * kRingRows - (W-1) rows, so every stage belongs to one chunk and the
// halo arrives through the ring like any row (no synchronous load per chunk). Chunk c covers
// rows [c * tile, (c+1) * tile) of the sequence space (dense: batch blockIdx.z; varlen: the
// packed rows), tile <= kTile chosen so that every block walks the same number of chunks
// (one wave of blocks ends together). Block y walks chunks y, y + gridDim.y, ...: the ring
// stays full across chunk boundaries, so any grid.y is correct.
template <int W>
struct Chunks {
  static constexpr int kSlots = kChunkStages * kRingRows;
  static constexpr int kTile = kSlots - (W - 1);
  static_assert(kTile >= 1, "a chunk holds at least one output row");
  const uint16_t* x;  // thread's channels of row 0 of the sequence space
  int64_t stride;
  int limit;          // rows of the sequence space
  int tile;           // rows per chunk, 1..kTile
};

// Stage i of this block's stream (chunk i / kChunkStages, stage i % kChunkStages of it).
template <int W>
__device__ __forceinline__ void fill_chunk_stage(Ring& ring, const Chunks<W>& ch, int i) {
  const int j = i / kChunkStages, q = i % kChunkStages;
  const int t0 = (static_cast<int>(blockIdx.y) + j * static_cast<int>(gridDim.y)) * ch.tile;
  const int stop = min(ch.limit, t0 + ch.tile);
  const int first = t0 - (W - 1) + q * kRingRows;
  uint4* dst = &ring.buf[i % kRingStages][0][threadIdx.x];
#pragma unroll
  for (int r = 0; r < kRingRows; ++r) {
    const int t = first + r;
    if (t >= 0 && t < stop) cp_async16(dst + r * kThreads, ch.x + static_cast<int64_t>(t) * ch.stride);
  }
}

template <typename E, int W>
__device__ __forceinline__ void conv_fwd_chunks(const ConvFwdParams& p) {
  constexpr int S = W - 1;
  constexpr int kTile = Chunks<W>::kTile;
  const E tag{};
  __shared__ Ring ring;
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * kChannelsPerThread;
  if (c0 >= p.dim) return;  // no barrier below: each thread reads only what it copied
  Walk<W> k;
  load_weights<W>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, k.w, k.b);
  k.silu = (p.flags & kFlagSilu) != 0;
  pdl_wait();
  Chunks<W> ch;
  ch.x = static_cast<const uint16_t*>(p.x) + c0;
  ch.stride = p.x_stride_tok;
  if (p.cu_seqlens != nullptr) {
    ch.limit = p.cu_seqlens[p.seqs];
  } else {
    ch.limit = p.tokens;
    ch.x += blockIdx.z * p.x_stride_seq;
  }
  const int g = static_cast<int>(gridDim.y), b = static_cast<int>(blockIdx.y);
  if (ch.limit <= 0) return;
  const int per = (ch.limit + g * kTile - 1) / (g * kTile);  // chunks of the busiest block
  ch.tile = (ch.limit + g * per - 1) / (g * per);
  const int chunks = (ch.limit + ch.tile - 1) / ch.tile;
  if (b >= chunks) return;
  const int stages = ((chunks - 1 - b) / g + 1) * kChunkStages;
#pragma unroll
  for (int i = 0; i < kRingStages - 1; ++i) {
    if (i < stages) fill_chunk_stage<W>(ring, ch, i);
    cp_async_commit();
  }
  const uint16_t* x;
  uint16_t* y;
  int t0 = 0, start = 0, stop = 0;
#pragma unroll 1
  for (int i = 0; i < stages; ++i) {
    if (i + kRingStages - 1 < stages) fill_chunk_stage<W>(ring, ch, i + kRingStages - 1);
    cp_async_commit();
    cp_async_wait<kRingStages - 1>();
    if (i + 1 == stages) pdl_launch_dependents();
    const int q = i % kChunkStages;
    const uint4* row = &ring.buf[i % kRingStages][0][threadIdx.x];
    if (q == 0) {  // a new chunk: its sequence, and the window from its halo rows
      t0 = (b + (i / kChunkStages) * g) * ch.tile;
      locate(p, k, t0, ch.tile, x, y, start, stop);
      y += c0;
      if (t0 - S < start) window_from_state(tag, p, k.n, c0, k.win);
#pragma unroll
      for (int j = 0; j < S; ++j) {
        const int s = t0 - S + j;
        if (s >= start) {
          unpack8(tag, row[j * kThreads], k.win[j]);
        } else if (s - start + S > j) {  // the state slot that lands at window position j
#pragma unroll
          for (int u = 0; u < S; ++u)
            if (u == s - start + S)
#pragma unroll
              for (int c = 0; c < 8; ++c) k.win[j][c] = k.win[u][c];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRingRows; ++r) {
      const int t = t0 - S + q * kRingRows + r;
      if ((q != 0 || r >= S) && t < stop) step_row<E, W>(p, k, row[r * kThreads], y, c0, t);
    }
  }
}

// ---- walk 4: warp walk with a register pipeline ----------------------------------------------
// The tile of walks 1-2 (the block's channels x its span of ceil(tokens / grid.y) rows)
// without shared memory: each warp walks its contiguous 512-byte channel slice down the span
// with kPipe rows of 16-byte loads in flight per lane in a rotating register buffer (row t's
// vector is unpacked, its registers take the load of row t + kPipe, then row t is computed).
// kPrefetch > 0: lane 0 also asks L2 for the warp's slice of row t + kPrefetch, so DRAM sees
// requests kPrefetch rows ahead while the registers need to cover only L2's latency.
template <typename E, int W>
__device__ __forceinline__ void conv_fwd_pipe(const ConvFwdParams& p) {
  const E tag{};
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * kChannelsPerThread;
  if (c0 >= p.dim) return;  // no barrier below
  Walk<W> k;
  load_weights<W>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, k.w, k.b);
  k.silu = (p.flags & kFlagSilu) != 0;
  pdl_wait();
  const int span = (p.tokens + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
  const int t0 = blockIdx.y * span;
  const uint16_t* x;
  uint16_t* y;
  int start, stop;
  if (!locate(p, k, t0, span, x, y, start, stop)) return;
  x += c0;
  y += c0;
  const int64_t stride = p.x_stride_tok;
  uint4 buf[kPipe];
#pragma unroll
  for (int r = 0; r < kPipe; ++r)
    if (t0 + r < stop) buf[r] = ld_nc_v4(x + static_cast<int64_t>(t0 + r) * stride);
  // Lane 0 holds the warp's first channel (lanes past D returned above, lane 0 last).
  const bool lead = kPrefetch > 0 && (threadIdx.x & 31) == 0;
  const uint32_t slice = 2u * static_cast<uint32_t>(min(32 * kChannelsPerThread, p.dim - c0));
  if (lead)
    for (int t = t0 + kPipe; t < t0 + kPrefetch && t < stop; ++t)
      bulk_prefetch_l2(x + static_cast<int64_t>(t) * stride, slice);
  enter_span<E, W>(p, k, x, c0, t0, start);
#pragma unroll 1
  for (int tc = t0; tc < stop; tc += kPipe) {
    if (tc + kPipe >= stop) pdl_launch_dependents();
#pragma unroll
    for (int r = 0; r < kPipe; ++r) {
      const int t = tc + r;
      if (t < stop) {
        float cur[8];
        unpack8(tag, buf[r], cur);
        if (t + kPipe < stop) buf[r] = ld_nc_v4(x + static_cast<int64_t>(t + kPipe) * stride);
        if (lead && t + kPrefetch < stop)
          bulk_prefetch_l2(x + static_cast<int64_t>(t + kPrefetch) * stride, slice);
        step_row<E, W>(p, k, cur, y, c0, t);
      }
    }
  }
}

// ---- walk 9: linear copy probe (measurement only) -------------------------------------------
// y = x over a dense contiguous [grid.z, tokens, dim] batch as one flat array of 16-byte
// vectors, grid-strided over every thread of the grid with four loads in flight per thread:
// the pattern of a plain device copy, run with the conv's load and store instructions.
__device__ __forceinline__ void copy_probe(const ConvFwdParams& p) {
  const int64_t n = static_cast<int64_t>(gridDim.z) * p.tokens * p.dim / kChannelsPerThread;
  const int64_t step = static_cast<int64_t>(gridDim.x) * gridDim.y * gridDim.z * blockDim.x;
  const int64_t first =
      ((static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) *
          blockDim.x + threadIdx.x;
  const uint4* x = static_cast<const uint4*>(p.x);
  uint4* y = static_cast<uint4*>(p.y);
  pdl_wait();
#pragma unroll 1
  for (int64_t i = first; i < n; i += 4 * step) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * step < n) v[u] = ld_nc_v4(x + i + u * step);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * step < n) st_cs_v4(y + i + u * step, v[u]);
  }
}

template <typename E, int W>
__device__ __forceinline__ void conv_fwd(const ConvFwdParams& p) {
#if KERNRT_CONV_FWD_KERNEL == 9
  copy_probe(p);
#elif KERNRT_CONV_FWD_KERNEL == 0
  conv_fwd_regs<E, W>(p);
#elif KERNRT_CONV_FWD_KERNEL == 3
  conv_fwd_chunks<E, W>(p);
#elif KERNRT_CONV_FWD_KERNEL == 4
  conv_fwd_pipe<E, W>(p);
#else
  conv_fwd_ring<E, W, KERNRT_CONV_FWD_KERNEL == 2>(p);
#endif
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
