// Paged decode attention for sm_90a behind the TRTLLM-GEN 1280-byte parameter block.
//
// Shape (compiled in): BF16 Q/K/V/O, 24 query heads over 4 KV heads (GQA group 6), head dim
// 256, page 64, one query token per sequence. Reads the block at FlashInfer's offsets
// (params.h): tensormaps Q@0, K@128, V@384; ptr_o@912, split counter@984, page table@1000,
// partial O@1008, partial stats@1016, seq lens@1080, batch@1116, splits@1156, page-table row
// length@1160, softmax scale (log2 domain)@1220.
//
// Grid (splits, 4 KV heads, seqs), block 128 (4 warps), 2 CTAs per SM. Per KV head the grid
// holds units u = z * splits + x, and every CTA derives the same schedule from the <= 128
// lengths: when the whole grid is resident at once (one wave), or one wave's units split the
// sequences with every CTA within a page of the average (the other CTAs leave at once),
// sequence b gets a number of consecutive units in proportion to its pages (at least 1), so
// all CTAs start with about the same work and end together; else grid row z serves the
// sequence of rank z by length, longest first (ties by index) with `splits` units: the block
// scheduler starts rows in z order, so the long sequences start first and the short ones
// fill the SMs that free up (longest-processing-time-first list scheduling). The CTAs of one (seq b, head h) group
// share b's pages dynamically: split s of a group of g starts with chunks s and s + g
// (kChunkPages pages each), then warp 0 claims further chunks from a per-(b, h) work counter
// (counter scratch [b*24 + 4 + h]), so CTAs on faster SMs take more and every CTA ends within
// about one chunk of the others. Warp 0 also feeds the 3-stage ring
// (lane 0 issues TMA): tiles alternate K, V of one page and head (64 tokens x 256 dims, 4 boxes
// of 64x64 with 128B swizzle, 32 KiB), the next two tiles in flight while one is consumed.
// Warp w takes tokens [16w, 16w+16) of every page and keeps its own online softmax (rows =
// the 6 query heads padded to 16 for mma.m16n8k16): S = Q K^T (2 n-tiles x 16 k-steps),
// P = exp2(S*scale - m), O += P V (32 n-tiles).
// Epilogue: the 4 warps merge in shared memory, every CTA writes its unnormalised O and
// (max, sum) to the partial scratch at [head][unit][8 rows] (zeros and (-inf, 0) when it got
// no page; a group's partials are contiguous), and the last
// CTA to arrive on the (b, h) counter [b*24 + h] merges all splits, writes O and puts both
// counters back to zero for the next launch or graph replay. The merge issues its first
// kMergeDepth splits' loads before it reduces the (max, sum) statistics (one warp per row).
//
// Shared memory: 3 x 32 KiB stages (each box 1024-byte aligned for the 128B swizzle) + 4 KiB Q
// (4 boxes of 6 rows, rows 6-7 zeroed) + barriers = 103,552 bytes with alignment slack.
//
// Deliberately does not check: that the block's head counts, page size and head dim equal
// the compiled shape, that page indices are inside the pool the K/V tensormaps span, that
// splits <= kMaxSplits, that the counter scratch holds seqs*24 entries and was zero before the
// first launch, or that the summation order is reproducible: which CTA takes which chunk
// depends on timing, so results may differ in the last bits between runs. Tokens past a
// sequence's length inside its last page are masked (K) and zeroed (V) here; an empty
// sequence gets zeros. The lengths are ranked as signed ints.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention/params.h"
#include "attention/warp_mma.cuh"
#include "common/ptx.cuh"

namespace kernrt::attention {
namespace {

// ---- tile arithmetic ----------------------------------------------------------------------
constexpr int kHeadDim = 256;
constexpr int kPage = 64;               // tokens per page = rows of one K/V box
constexpr int kGroup = 6;               // query heads per KV head
constexpr int kHeadsKv = 4;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTokensPerWarp = kPage / kWarps;
constexpr int kStages = 3;
constexpr int kBoxBytes = 64 * kPage * 2;          // 64 dims x 64 tokens bf16
constexpr int kBoxesPerTile = kHeadDim / 64;      // 4 boxes cover one head's 256 dims
constexpr int kTileBytes = kBoxesPerTile * kBoxBytes;
constexpr int kQBoxBytes = 64 * kGroup * 2;        // what one Q box transfers
constexpr int kQOffset = kStages * kTileBytes;
constexpr int kBarOffset = kQOffset + kBoxesPerTile * 1024;  // each Q box in a 1024-byte slot
constexpr int kSmemBytes = kBarOffset + 128 + 1024;          // + slack to align the base
#ifndef KERNRT_DECODE_CHUNK_PAGES
#define KERNRT_DECODE_CHUNK_PAGES 2
#endif
constexpr int kChunkPages = KERNRT_DECODE_CHUNK_PAGES;  // pages per work claim
#ifndef KERNRT_DECODE_SHARES
#define KERNRT_DECODE_SHARES 1
#endif
// Up to this batch every CTA derives the same schedule from the lengths (one per thread):
// length-proportional shares for a one-wave grid, else (and with KERNRT_DECODE_SHARES=0, v4)
// longest-first grid rows of `splits` CTAs each; beyond it grid row z is sequence z.
constexpr bool kShares = KERNRT_DECODE_SHARES != 0;
#ifndef KERNRT_DECODE_PROBE
#define KERNRT_DECODE_PROBE 0
#endif
// Timing probes only: 1 streams the ring without the math, 2 skips the final merge of the
// splits (both give wrong results; the difference to the shipped kernel places the time of
// each stage); 3 is the shipped kernel that also writes %globaltimer's low 32 bits at entry,
// stream end, arrival and merge end into the unused stats rows 6-7 of its partial.
constexpr int kProbe = KERNRT_DECODE_PROBE;
constexpr int kMaxRanked = kThreads;
constexpr int kMergeSplitBytes = kGroup * kHeadDim * 4;  // rows 0-5 of one split's partial
constexpr int kMergeBatch = 8;                           // splits per merge buffer
constexpr int kMergeBufBytes = kMergeBatch * kMergeSplitBytes;
static_assert(2 * kMergeBufBytes <= kStages * kTileBytes, "two merge buffers fit in the ring");
constexpr int kCounterStride = 24;                 // counter ints per sequence (B x heads_q)
constexpr int kMaxSplits = 128;
static_assert(kMaxSplits * 8 * 4 <= kBoxesPerTile * 1024, "merge weights fit in the Q tile");
constexpr int kMergeStride = kHeadDim + 8;         // padded f32 row in the warp merge
static_assert(kTokensPerWarp == 16, "one m16n8k16 k-step of tokens per warp and page");
static_assert(kTileBytes == 32768, "K (or V) of one page and head");
static_assert(2 * (kSmemBytes + 1024) <= 228 * 1024, "two CTAs per SM");
static_assert(kWarps * 8 * kMergeStride * 4 + kWarps * 16 * 4 <= 2 * kTileBytes,
              "warp merge fits in stages 0-1");
static_assert(kChunkPages >= 1 && kChunkPages <= 32, "a chunk's page indices live one per lane");
static_assert(kMaxRanked * 4 + 64 <= kTileBytes, "the lengths and scan totals fit in stage 2");

// Byte offset of the 16-byte chunk `chunk` (0..31 across a 256-dim row) of tile row `row`
// inside a tile of kBoxesPerTile swizzled boxes: TMA's 128B swizzle XORs the chunk index
// within a 128-byte row with (row % 8).
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kBoxBytes + row * 128 +
                               (((chunk & 7) ^ (row & 7)) << 4));
}

// Sum over the block's 128 threads, every thread gets it. `tmp` holds kWarps ints; the
// caller's next __syncthreads separates a second use of the same `tmp`.
__device__ __forceinline__ int block_sum(int v, int* tmp, int warp, int lane) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) tmp[warp] = v;
  __syncthreads();
  int total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += tmp[w];
  return total;
}

// Exclusive prefix sum over the block's threads in thread order (same contract as block_sum).
__device__ __forceinline__ int block_exclusive_scan(int v, int* tmp, int warp, int lane) {
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) tmp[warp] = x;
  __syncthreads();
  for (int w = 0; w < warp; ++w) x += tmp[w];
  return x - v;
}

// Warp 0's view of the work: the current and the next claimed chunk (page indices one per
// lane), and lane 0's pending claim of the chunk after them.
struct Feed {
  const int32_t* table;  // this sequence's page-table row
  int* work;             // per-(seq, head) chunk counter
  int pages;             // pages of the sequence
  int cur_chunk, cur_n, cur_pos, cur_pg;
  int nxt_chunk, nxt_n, nxt_pg;
  int claim;             // lane 0: the chunk its outstanding atomicAdd claimed
  int dyn_base;          // first dynamically claimed chunk
  int lane;

  __device__ __forceinline__ int chunk_len(int c) const {
    return max(0, min(kChunkPages, pages - c * kChunkPages));
  }
  __device__ __forceinline__ int load(int c, int n) const {
    return lane < n ? table[c * kChunkPages + lane] : 0;
  }
  // The first two chunks are static (split s of a group of g CTAs takes chunks s and s + g,
  // no atomic on the start-up path); later ones come from the counter, offset by 2 * g. Every
  // CTA's chunks therefore increase, so an exhausted chunk means all later ones are too.
  __device__ __forceinline__ void init(int split, int group) {
    dyn_base = 2 * group;
    cur_chunk = split;
    cur_n = chunk_len(split);
    cur_pos = 0;
    cur_pg = load(split, cur_n);
    nxt_chunk = split + group;
    nxt_n = chunk_len(nxt_chunk);
    nxt_pg = load(nxt_chunk, nxt_n);
    if (nxt_n > 0 && lane == 0) claim = dyn_base + atomicAdd(work, 1);
  }
  // Next (logical page, physical page) of this CTA, or logical -1 when the work is gone.
  // The claim and the table loads for a chunk are issued one chunk ahead of their use.
  __device__ __forceinline__ int next(int& phys) {
    if (cur_pos == cur_n) {
      if (nxt_n == 0) return -1;
      cur_chunk = nxt_chunk;
      cur_n = nxt_n;
      cur_pg = nxt_pg;
      cur_pos = 0;
      const int c = __shfl_sync(0xffffffffu, claim, 0);
      nxt_chunk = c;
      nxt_n = chunk_len(c);
      nxt_pg = load(c, nxt_n);
      if (nxt_n > 0 && lane == 0) claim = dyn_base + atomicAdd(work, 1);
    }
    phys = __shfl_sync(0xffffffffu, cur_pg, cur_pos);
    return cur_chunk * kChunkPages + cur_pos++;
  }
};

// Probe 3: (entry, stream end, arrival, merge end or 0) into the unused stats rows 6-7 at `at`;
// the merging CTA also stamps its steps into the unused partial O row 6 (`mstamp`).
__device__ __forceinline__ void probe_stamp(float* at, const int* pick, uint32_t merged, int tid) {
  if (tid != 0) return;
  uint32_t* w = reinterpret_cast<uint32_t*>(at);
  w[0] = pick[5];
  w[1] = pick[6];
  w[2] = pick[7];
  w[3] = merged;
}

// The final merge's batch `b` (tid 0): rows 0-5 of splits [b * kMergeBatch, ...) of the group
// whose partials start at `src` into buffer b % 2 of the ring stages, on merge_bar[b % 2].
__device__ __forceinline__ void merge_issue(uint8_t* smem, uint64_t* merge_bar, const float* src,
                                            int splits, int b) {
  const int left = splits - b * kMergeBatch;
  const int n = left < kMergeBatch ? left : kMergeBatch;
  uint8_t* dst = smem + (b & 1) * kMergeBufBytes;
  ptx::mbarrier_arrive_expect_tx(&merge_bar[b & 1], n * kMergeSplitBytes);
  for (int j = 0; j < n; ++j) {
    ptx::bulk_load(dst + j * kMergeSplitBytes,
                   src + static_cast<int64_t>(b * kMergeBatch + j) * 8 * kHeadDim,
                   kMergeSplitBytes, &merge_bar[b & 1]);
  }
}

// Number of SMs (%nsmid): with two CTAs per SM, the CTAs one wave holds. PTX allows %nsmid
// to exceed the SMs present (sparse SM ids); then "one wave" is overestimated, which costs
// speed (some CTAs wait for a slot), never correctness.
__device__ __forceinline__ int sm_count() {
  uint32_t n;
  asm("mov.u32 %0, %%nsmid;" : "=r"(n));
  return static_cast<int>(n);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_decode_sm90a_bf16_q24kv4d256p64(const __grid_constant__ KernelParams p) {
  const int head = blockIdx.y;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int tid = threadIdx.x;
  const int batch = p.batch_size;
  if (static_cast<int>(blockIdx.z) >= batch) return;
  const bool scheduled = batch <= kMaxRanked;
  const int splits = p.max_num_ctas_kv;

  // ---- smem layout ------------------------------------------------------------------------
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint8_t* q_tile = smem + kQOffset;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOffset);
  uint64_t* empty = full + kStages;
  uint64_t* q_bar = empty + kStages;
  uint64_t* merge_bar = q_bar + 1;                     // [2]: the final merge's two buffers
  int* tile_page = reinterpret_cast<int*>(merge_bar + 2);  // [stage]: logical page or -1
  int* last_flag = tile_page + kStages;
  int* pick = last_flag + 1;  // this CTA's [seq, len, split, group size, group's first unit]
  static_assert(2 * kStages * 8 + 3 * 8 + (kStages + 9) * 4 <= 128, "barrier area holds the picks");
  if (kProbe == 3 && threadIdx.x == 0) pick[5] = ptx::globaltimer_lo();
  int* rank_len = reinterpret_cast<int*>(smem + 2 * kTileBytes);  // before stage 2's first TMA
  int* scan_tmp = rank_len + kMaxRanked;                          // 3 x kWarps ints
  if (scheduled && tid < batch) rank_len[tid] = p.ptr_seq_lens_kv[tid];

  // ---- barrier init -----------------------------------------------------------------------
  if (tid == 0) {
    ptx::prefetch_tensormap(&p.tma_q);
    ptx::prefetch_tensormap(&p.tma_k);
    ptx::prefetch_tensormap(&p.tma_v);
    for (int i = 0; i < kStages; ++i) {
      ptx::mbarrier_init(&full[i], 1);
      ptx::mbarrier_init(&empty[i], kWarps);
    }
    ptx::mbarrier_init(q_bar, 1);
    ptx::mbarrier_init(&merge_bar[0], 1);
    ptx::mbarrier_init(&merge_bar[1], 1);
    ptx::fence_mbarrier_init();
    pick[0] = -1;  // stays -1 for a unit that the shares leave over
  }
  // Rows 6 and 7 of each Q box are padding rows of the mma; TMA writes rows 0-5 only.
  if (tid < kBoxesPerTile * 16) {
    reinterpret_cast<uint4*>(q_tile + (tid >> 4) * 1024 + kGroup * 128)[tid & 15] =
        make_uint4(0, 0, 0, 0);
  }
  __syncthreads();

  // ---- schedule: this CTA's sequence, its split in the sequence's group, the group ---------
  // Unit u = z * splits + x (per KV head). Shares: sequence b gets g_b ~ units * pages_b /
  // pages consecutive units (at least 1, at most kMaxSplits), so every CTA starts with about
  // the same number of pages and the CTAs end together. v4: grid row z is the sequence of
  // rank z by length, longest first, with `splits` units. Partials live at
  // [head][unit][8 rows], so a group's are contiguous.
  int seq = blockIdx.z;
  int len, split = blockIdx.x, group = splits;
  if (scheduled) {
    const int mine = tid < batch ? rank_len[tid] : 0;
    // Shares run in one wave (2 CTAs per SM): the grid's units when it fits, else only the
    // units one wave holds (the CTAs of the other units leave at once), and then only when
    // no sequence's CTAs start with more than one page above the average: with few units
    // per sequence the rounding unbalances them (a page per CTA costs about as much as one
    // more wave), and v4's longest-first rows of equal groups pair up better over several
    // waves (run 5: shares with two waves of CTAs lost 30 us at batch 4).
    bool use_shares = false;
    int n = 0;
    const int grid_units = splits * batch;
    if (kShares) {
      const int pages = tid < batch ? (max(mine, 0) + kPage - 1) / kPage : 0;
      const int total = block_sum(pages, scan_tmp, warp, lane);
      const int units = min(grid_units, 2 * sm_count() / kHeadsKv);
      if (batch <= units) {
        // Nearest share (at least 1); if those overshoot the units, floor shares of what is
        // left after one unit each, which never do.
        if (tid < batch) {
          const int64_t near =
              total > 0 ? (2 * static_cast<int64_t>(pages) * units + total) / (2 * total) : 1;
          n = static_cast<int>(near < 1 ? 1 : near > kMaxSplits ? kMaxSplits : near);
        }
        if (block_sum(n, scan_tmp + kWarps, warp, lane) > units && tid < batch) {
          n = min(1 + static_cast<int>(static_cast<int64_t>(pages) * (units - batch) / total),
                  kMaxSplits);
        }
        const bool balanced = __syncthreads_and(
            tid >= batch ||
            static_cast<int64_t>(pages) * units <= static_cast<int64_t>(total + units) * n);
        use_shares = units == grid_units || balanced;
      }
    }
    if (use_shares) {
      const int start = block_exclusive_scan(n, scan_tmp + 2 * kWarps, warp, lane);
      const int unit = static_cast<int>(blockIdx.z) * splits + static_cast<int>(blockIdx.x);
      if (tid < batch && unit >= start && unit < start + n) {
        pick[0] = tid;
        pick[1] = mine;
        pick[2] = unit - start;
        pick[3] = n;
        pick[4] = start;
      }
    } else if (tid < batch) {
      int rank = 0;
      for (int j = 0; j < batch; ++j) {
        const int lj = rank_len[j];
        rank += (lj > mine || (lj == mine && j < tid)) ? 1 : 0;
      }
      if (rank == seq) {
        pick[0] = tid;
        pick[1] = mine;
        pick[2] = blockIdx.x;
        pick[3] = splits;
        pick[4] = seq * splits;
      }
    }
    ptx::fence_proxy_async_shared();  // the lengths in stage 2 before its first TMA write
    __syncthreads();
    seq = pick[0];
    if (seq < 0) return;  // no sequence for this unit: the whole CTA leaves together
    len = pick[1];
    split = pick[2];
    group = pick[3];
  } else {
    len = p.ptr_seq_lens_kv[seq];
    if (tid == 0) {  // the epilogue reads the schedule back from here
      pick[0] = seq;
      pick[2] = split;
      pick[3] = group;
      pick[4] = seq * splits;
    }
  }
  int* work = p.ptr_multi_ctas_kv_counter + seq * kCounterStride + kHeadsKv + head;

  // ---- producer (warp 0): Q once, then K/V tiles of claimed pages into the ring ------------
  Feed feed;
  int issued = 0, feed_done = 0, cur_phys = 0, cur_logical = 0;
  if (warp == 0) {
    feed.table = p.ptr_page_idx_kv + static_cast<int64_t>(seq) * p.max_num_pages_per_seq_kv;
    feed.work = work;
    feed.pages = (len + kPage - 1) / kPage;
    feed.lane = lane;
    feed.claim = 0;
    if (lane == 0) {
      ptx::mbarrier_arrive_expect_tx(q_bar, kBoxesPerTile * kQBoxBytes);
      for (int j = 0; j < kBoxesPerTile; ++j) {
        ptx::tma_load_4d(q_tile + j * 1024, &p.tma_q, q_bar, j * 64, 0, head, seq);
      }
    }
    feed.init(split, group);
  }
  // Issues tiles up to index `upto` (even = K, odd = V of the same page). Warp 0 only.
  auto produce = [&](int upto) {
    while (!feed_done && issued <= upto) {
      const int t = issued;
      const int stage = t % kStages;
      const bool is_k = (t & 1) == 0;
      if (is_k) cur_logical = feed.next(cur_phys);
      if (lane == 0) {
        if (t >= kStages) ptx::mbarrier_wait(&empty[stage], ((t / kStages) - 1) & 1);
        if (cur_logical < 0) {
          tile_page[stage] = -1;  // sentinel: consumers stop here
          ptx::mbarrier_arrive(&full[stage]);
        } else {
          tile_page[stage] = cur_logical;
          uint8_t* dst = smem + stage * kTileBytes;
          const CUtensorMap* map = is_k ? &p.tma_k : &p.tma_v;
          ptx::mbarrier_arrive_expect_tx(&full[stage], kTileBytes);
          for (int j = 0; j < kBoxesPerTile; ++j) {
            ptx::tma_load_4d(dst + j * kBoxBytes, map, &full[stage], j * 64, 0, head, cur_phys);
          }
        }
      }
      if (cur_logical < 0) feed_done = 1;
      ++issued;
      __syncwarp();
    }
  };

  // ---- consumers: Q fragments (rows = query heads, only a0/a2 non-zero) --------------------
  const int g = lane >> 2;  // fragment row: query head within the group
  const int t = lane & 3;
  ptx::mbarrier_wait(q_bar, 0);
  uint32_t qa[16][2];
  {
    const uint32_t q_base = ptx::smem_u32(q_tile);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const int chunk = 4 * q + (lane >> 3);
      const int row = lane & 7;
      const uint32_t addr = q_base + (chunk >> 3) * 1024 + row * 128 + (((chunk & 7) ^ row) << 4);
      ldmatrix_x4(qa[2 * q][0], qa[2 * q][1], qa[2 * q + 1][0], qa[2 * q + 1][1], addr);
    }
  }

  float o[32][4];
#pragma unroll
  for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float row_max = -INFINITY;  // log2 domain, quad-uniform
  float row_sum = 0.f;        // this thread's share of the row's sum
  const float scale = p.scale_softmax_log2;
  const uint32_t smem_base = ptx::smem_u32(smem);

  // ---- consumers: main loop, one page (K tile then V tile) per iteration --------------------
  for (int i = 0;; ++i) {
    const int tk = 2 * i;
    const int sk = tk % kStages;
    if (warp == 0) produce(tk + 2);
    ptx::mbarrier_wait(&full[sk], (tk / kStages) & 1);
    const int logical = tile_page[sk];
    if (logical < 0) break;
    const int tok0 = logical * kPage + warp * kTokensPerWarp;
    const bool live = kProbe != 1 && tok0 < len;  // warp-uniform: a valid token in the slice
    uint32_t pa0 = 0, pa2 = 0;
    if (live) {
      // S = Q K^T for tokens [16w, 16w+16): n-tile nt holds tokens 8nt..8nt+7.
      const uint32_t k_base = smem_base + sk * kTileBytes;
      float s[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int row = warp * kTokensPerWarp + nt * 8 + (lane & 7);
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4(b0, b1, b2, b3, k_base + swz(row, 4 * q + (lane >> 3)));
          mma_m16n8k16_bf16(s[nt], qa[2 * q][0], 0u, qa[2 * q][1], 0u, b0, b1);
          mma_m16n8k16_bf16(s[nt], qa[2 * q + 1][0], 0u, qa[2 * q + 1][1], 0u, b2, b3);
        }
      }
      // Online softmax over row g (values d0, d1 of both n-tiles; rows g+8 are padding).
      float v[4];
      float mx = -INFINITY;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tok = tok0 + (e >> 1) * 8 + 2 * t + (e & 1);
        v[e] = tok < len ? s[e >> 1][e & 1] * scale : -INFINITY;
        mx = fmaxf(mx, v[e]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max, mx);  // finite: the slice has a valid token
      const float alpha = exp2f(row_max - m_new);
      float pr[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) pr[e] = exp2f(v[e] - m_new);
      row_sum = row_sum * alpha + (pr[0] + pr[1]) + (pr[2] + pr[3]);
      if (__any_sync(0xffffffffu, alpha != 1.f)) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          o[j][0] *= alpha;
          o[j][1] *= alpha;
        }
      }
      row_max = m_new;
      pa0 = pack_bf16x2(pr[0], pr[1]);  // tokens 2t, 2t+1
      pa2 = pack_bf16x2(pr[2], pr[3]);  // tokens 8+2t, 8+2t+1
    }
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&empty[sk]);

    const int tv = tk + 1;
    const int sv = tv % kStages;
    if (warp == 0) produce(tv + 2);
    ptx::mbarrier_wait(&full[sv], (tv / kStages) & 1);
    if (live) {
      uint8_t* v_tile = smem + sv * kTileBytes;
      if (tok0 + kTokensPerWarp > len) {
        // Tail slice: zero V rows past the length so that P = 0 never meets a NaN there.
        // Chunks are claimed in order, so no later TMA writes this stage in this CTA.
        for (int idx = lane; idx < kTokensPerWarp * 32; idx += 32) {
          const int r = idx >> 5;
          if (tok0 + r >= len) {
            *reinterpret_cast<uint4*>(v_tile + swz(warp * kTokensPerWarp + r, idx & 31)) =
                make_uint4(0, 0, 0, 0);
          }
        }
        ptx::fence_proxy_async_shared();  // order before any later TMA write of this stage
        __syncwarp();
      }
      // O += P V: matrices (tokens 0-7 | 8-15) x (dims 16q..16q+7 | 16q+8..16q+15).
      const uint32_t v_base = smem_base + sv * kTileBytes;
#pragma unroll
      for (int q = 0; q < 16; ++q) {
        const int mi = lane >> 3;
        const int row = warp * kTokensPerWarp + (mi & 1) * 8 + (lane & 7);
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3, v_base + swz(row, 2 * q + (mi >> 1)));
        mma_m16n8k16_bf16(o[2 * q], pa0, 0u, pa2, 0u, b0, b1);
        mma_m16n8k16_bf16(o[2 * q + 1], pa0, 0u, pa2, 0u, b2, b3);
      }
    }
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&empty[sv]);
  }

  // ---- epilogue: merge the 4 warps in shared memory (no TMA is in flight any more) ---------
  if (kProbe == 3 && tid == 0) pick[6] = ptx::globaltimer_lo();
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
  float* merge_o = reinterpret_cast<float*>(smem);
  float* merge_ml = merge_o + kWarps * 8 * kMergeStride;  // [warp][row][max, sum]
  __syncthreads();  // every warp is past its last ldmatrix
  {
    float* dst = merge_o + (warp * 8 + g) * kMergeStride + 2 * t;
#pragma unroll
    for (int j = 0; j < 32; ++j) *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[j][0], o[j][1]);
    if (t == 0) {
      merge_ml[(warp * 8 + g) * 2] = row_max;
      merge_ml[(warp * 8 + g) * 2 + 1] = row_sum;
    }
  }
  __syncthreads();

  // The schedule again from shared memory: keeping it in registers across the loop costs some.
  // The pack's fields are read again from parameter space for the same reason.
  const volatile int* vpick = pick;
  const int seq_e = vpick[0];
  const int split_e = vpick[2];
  const int group_e = vpick[3];
  const int first_e = vpick[4];
  __nv_bfloat16* out =
      static_cast<__nv_bfloat16*>(p.ptr_o) +
      (static_cast<int64_t>(seq_e) * p.num_hidden_elts_o + head * kGroup * kHeadDim);
  int* arrivals = p.ptr_multi_ctas_kv_counter + seq_e * kCounterStride + head;
  const int64_t units = static_cast<int64_t>(p.max_num_ctas_kv) * p.batch_size;
  const int64_t seq_row0 = (head * units + first_e) * 8;  // [head][unit][8 rows]
  const int64_t part_row0 = seq_row0 + split_e * 8;
  // Each thread owns dim pairs; 6 rows x 128 pairs = 768 pairs, 6 per thread.
  for (int pair = tid; pair < kGroup * kHeadDim / 2; pair += kThreads) {
    const int row = pair / (kHeadDim / 2);
    const int d = (pair % (kHeadDim / 2)) * 2;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, merge_ml[(w * 8 + row) * 2]);
    float l = 0.f, ox = 0.f, oy = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = merge_ml[(w * 8 + row) * 2];
      const float f = mw == -INFINITY ? 0.f : exp2f(mw - m);
      l += merge_ml[(w * 8 + row) * 2 + 1] * f;
      const float2 ow = *reinterpret_cast<const float2*>(merge_o + (w * 8 + row) * kMergeStride + d);
      ox += ow.x * f;
      oy += ow.y * f;
    }
    __stcg(reinterpret_cast<float2*>(p.ptr_partial_o + (part_row0 + row) * kHeadDim + d),
           make_float2(ox, oy));
    if (d == 0) {
      __stcg(reinterpret_cast<float2*>(p.ptr_partial_stats + (part_row0 + row) * 2),
             make_float2(m, l));
    }
  }

  // ---- epilogue: the last CTA of (seq, head) merges all splits ------------------------------
  __threadfence();
  __syncthreads();
  if (tid == 0) *last_flag = atomicAdd(arrivals, 1) == group_e - 1;

  if (kProbe == 3 && tid == 0) pick[7] = ptx::globaltimer_lo();
  __syncthreads();
  if (!*last_flag) {
    if (kProbe == 3) probe_stamp(p.ptr_partial_stats + (part_row0 + 6) * 2, pick, 0, tid);
    return;
  }
  __threadfence();
  uint32_t* mstamp = reinterpret_cast<uint32_t*>(p.ptr_partial_o + (part_row0 + 6) * kHeadDim);
  if (kProbe == 3 && tid == 0) mstamp[0] = ptx::globaltimer_lo();
  if (kProbe == 2) {
    if (tid == 0) *arrivals = arrivals[kHeadsKv] = 0;
    return;
  }

  // Weights 2^(m_s - M) / L per (split, row) into the Q tile's 4 KiB (Q is dead by now): warp
  // w reduces rows w and w + 4, lanes over splits. An empty sequence (L = 0) gets weights 0.
  // Meanwhile the partials' rows 0-5 (6 KiB per split, contiguous) stream into the three ring
  // stages as two 48 KiB buffers of kMergeBatch splits by 1-D bulk copies: one SM's plain loads
  // drew them at ~40 GB/s (5-6 us for 33 splits, probe 3); the copy engine is not bound by the
  // loads a CTA can have in flight.
  const int batches = (group_e + kMergeBatch - 1) / kMergeBatch;
  float* fac = reinterpret_cast<float*>(q_tile);
  const float* part_src = p.ptr_partial_o + seq_row0 * kHeadDim;

  // The partials were acquired through the counter (generic proxy) and stages 0-1 were last
  // written and read by the warp merge: both ordered before the copy engine's accesses.
  ptx::fence_proxy_async();
  __syncthreads();
  if (kProbe == 3 && tid == 0) mstamp[1] = ptx::globaltimer_lo();
  if (tid == 0) {
    merge_issue(smem, merge_bar, part_src, group_e, 0);
    if (batches > 1) merge_issue(smem, merge_bar, part_src, group_e, 1);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp + r * kWarps;
    if (row >= kGroup) continue;
    float ms[kMaxSplits / 32], ls[kMaxSplits / 32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxSplits / 32; ++i) {
      const int sp = lane + 32 * i;
      ms[i] = -INFINITY;
      ls[i] = 0.f;
      if (sp < group_e) {
        const float2 st = __ldcg(reinterpret_cast<const float2*>(
            p.ptr_partial_stats + (seq_row0 + sp * 8 + row) * 2));
        ms[i] = st.x;
        ls[i] = st.y;
      }
      m = fmaxf(m, ms[i]);
    }
#pragma unroll
    for (int o2 = 16; o2 > 0; o2 >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o2));
    float l = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxSplits / 32; ++i) {
      ms[i] = ms[i] == -INFINITY ? 0.f : exp2f(ms[i] - m);
      l += ls[i] * ms[i];
    }
#pragma unroll
    for (int o2 = 16; o2 > 0; o2 >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int i = 0; i < kMaxSplits / 32; ++i) {
      const int sp = lane + 32 * i;
      if (sp < group_e) fac[sp * 8 + row] = ms[i] * inv;
    }
  }
  __syncthreads();
  if (kProbe == 3 && tid == 0) mstamp[2] = ptx::globaltimer_lo();

  // 6 rows x 64 float4 = 384 float4 outputs, 3 per thread; output idx = row * 64 + dim / 4 is
  // also the float4 index inside one split's 6 KiB in the buffer.
  constexpr int kPer = kGroup * kHeadDim / 4 / kThreads;
  static_assert(kPer * kThreads == kGroup * kHeadDim / 4, "outputs split evenly");
  float4 acc[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int b = 0; b < batches; ++b) {
    ptx::mbarrier_wait(&merge_bar[b & 1], (b >> 1) & 1);
    if (kProbe == 3 && tid == 0 && b == 0) mstamp[3] = ptx::globaltimer_lo();
    const float4* buf = reinterpret_cast<const float4*>(smem + (b & 1) * kMergeBufBytes);
    const int left = group_e - b * kMergeBatch;
    const int n = left < kMergeBatch ? left : kMergeBatch;
    for (int j = 0; j < n; ++j) {
      const float* f = fac + (b * kMergeBatch + j) * 8;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int idx = tid + k * kThreads;
        const float w = f[idx / (kHeadDim / 4)];
        const float4 x = buf[j * (kMergeSplitBytes / 16) + idx];
        acc[k].x += x.x * w;
        acc[k].y += x.y * w;
        acc[k].z += x.z * w;
        acc[k].w += x.w * w;
      }
    }
    if (b + 2 < batches) {
      __syncthreads();  // every thread is done with this buffer
      if (tid == 0) {
        ptx::fence_proxy_async_shared();
        merge_issue(smem, merge_bar, part_src, group_e, b + 2);
      }
    }
  }
  if (kProbe == 3 && tid == 0) mstamp[4] = ptx::globaltimer_lo();
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int idx = tid + k * kThreads;
    const int row = idx / (kHeadDim / 4);
    const int d = (idx % (kHeadDim / 4)) * 4;
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + row * kHeadDim + d);
    dst[0] = __floats2bfloat162_rn(acc[k].x, acc[k].y);
    dst[1] = __floats2bfloat162_rn(acc[k].z, acc[k].w);
  }
  if (tid == 0) {
    *arrivals = 0;  // ready for the next launch or graph replay
    arrivals[kHeadsKv] = 0;  // the work counter
  }
  if (kProbe == 3) {
    probe_stamp(p.ptr_partial_stats + (part_row0 + 6) * 2, pick, ptx::globaltimer_lo(), tid);
  }
}

}  // namespace kernrt::attention
