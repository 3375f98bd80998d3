// Paged prefill, chunked prefill and multi-token verify attention for sm_90a behind the
// TRTLLM-GEN 1280-byte parameter block (the seed's `attn_prefill` op).
//
// Math: for sequence b with q_len = cu_seqlens_q[b+1] - cu_seqlens_q[b] new rows and kv_len =
// seq_lens[b] keys (the new rows' own K/V already paged), query row j sees keys
// [0, kv_len - q_len + j + 1) (bottom-right causal): O = softmax(scale Q K^T) V per query head,
// in the log2 domain with scale_log2 = pack@1220; P is rounded to bf16 for the P V product,
// everything else is f32. A row that sees no key gets zeros.
//
// Shape (compiled in, prefill_shape.cuh): BF16 Q/K/V/O, 24 query heads over 4 KV heads, head
// dim 256, page 64. Reads the block at FlashInfer's offsets (params.h): tensormaps Q@0
// (dims [256, 1, 24, rows], box [64, 1, 1, 128]: the kernel copies it into scratch with the
// box edited to [64, 1, 6, 21]), K@128 and V@384 ([256, 64, 4, pages], box [64, 64, 1, 1]);
// ptr_o@912 (O is stored through the pointer: rows of a work item are 6 heads x up to 21
// tokens, which the O map's 128-token box does not fit), cu_seqlens_q@936, counters@984,
// page table@1000, partial O@1008, partial stats@1016, seq lens@1080, batch@1116, partial slots
// @1156, page-table row length@1160, hidden size@1192, softmax scale@1220. Ignores the O
// tensormap and the other fields of the block.
//
// Work: an item is up to 21 query tokens x the 6 query heads of one KV head (M = 126 of a 128
// row tile) over one chunk of that unit's pages (prefill_schedule.cuh: order, split count; a
// verify launch whose units fit one wave may take chunk counts per sequence in proportion to
// its pages instead of one S for all). Grid: one persistent CTA per SM (grid.x from
// geometry.json); CTA c starts with item c and claims the next from a queue counter. Block:
// 384 threads, 1 CTA per SM.
//   Warp 0 (producer, 40 registers): per item, loads Q (4 TMA boxes of 126 rows x 64 dims)
//   once the previous item's last Q K^T is done, then K and V of each page in turn into a ring
//   of 5 tiles of 32 KiB (full / empty mbarriers), reading the page table 32 entries at a time.
//   Warpgroups 1, 2 (consumers, 232 registers): rows 0-63 / 64-127 of the item. Per page:
//   S = Q K^T (16 wgmma m64n64k16, both operands in shared memory), online softmax in
//   registers, O += P V (4 wgmma m64n256k16, P from registers, V transposed in shared memory).
//   Q K^T of page j+1 is issued before P V of page j and the softmax of j+1 runs while P V of
//   j executes (wgmma.wait_group 1): the tensor cores see the next product while the special
//   function units work.
// Entry: attention_prefill_sm90a_bf16_q24kv4d256p64 (prefill_geometry.json); beside it
// attention_prefill_wide_sm90a_bf16_q24kv4d256p64, run 5's kernel: without the balanced split,
// the counter warm-up, the lean merge sync and the counter banks (Tuning below).
// Registers per consumer thread: O 128 f32 (64 x 256 per warpgroup), S 32 f32, P 2 x 16 bf16x2
// (the one P V reads and the next), row max / sum 4, addresses and loop state.
// Shared memory (prefill_shape.cuh): Q 64 KiB + 5 x 32 KiB ring + 1280 B = 231679 B.
// Output: an item that is its unit's only chunk normalises and stores O (bf16x2 per thread and
// row); a chunk of a split unit stores its partial and (max, sum) rows and arrives on the
// unit's counter; the unit's rows are then merged by row parts (prefill_merge.cuh). A launch
// counts in one of two counter banks (its ticket picks it) and zeroes the other one, which
// the previous launch used, so nothing is counted or reset when the CTAs finish.
//
// Deliberately does not check: that the pack's head counts, page size and head dim equal the
// compiled shape, that page indices are inside the pool the K/V tensormaps span, that the
// scratch holds the slots at pack@1156 (the generator sizes it), that cu_seqlens_q ends at
// most at the Q/O row count, or a reproducible summation order across launches (which CTA
// merges which part depends on timing; the sums are the same), or that two launches sharing
// one counter scratch never overlap (the banks assume stream order: no PDL into this kernel).
#include <cuda.h>
#include <cuda_bf16.h>
#include <nv/target>

#include <cstdint>

#include "attention/params.h"
#include "attention/prefill_math.cuh"
#include "attention/prefill_merge.cuh"
#include "attention/prefill_schedule.cuh"
#include "attention/prefill_shape.cuh"
#include "common/ptx.cuh"
#include "common/ptx/tensormap.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/warpgroup.cuh"
#include "common/ptx/wgmma.cuh"

namespace kernrt::attention::prefill {


// Live alternatives of the entry, one template instance and extern "C" entry each (the
// manifest selects one): kEarly, the setup overlaps the Q tensormap edit (warp 3) with the
// length loads and schedule, and warp 2 asks L2 for the CTA's share of the page table at
// entry; kBatched, the merge issues a batch of partial loads at once (merge_rows);
// kOneWave, a launch whose items all fit one wave merges without claims (chunk c merges row
// part c once its unit is complete); kTailSplit, the schedule may leave whole waves of units
// unsplit (prefill_schedule.cuh); kSplitCap, the largest chunk count per unit it rates;
// kBalanced, the schedule also rates the balanced one-wave verify split (a chunk count per
// sequence in proportion to its pages, prefill_schedule.cuh's balance()); kWarmCounters, CTA 0
// asks L2 for the counter scratch at entry, so that the chunks' arrivals, the merge waits and
// the finish count are L2 hits rather than first touches of lines a serving step left in HBM.
// kLazyBalance: the balanced split is rated only where the S rating's sums say it can win
// (prefill_schedule.cuh); kLeanSync: a chunk's arrival is one acq_rel add after the consumers'
// barrier and the merge wait an acquire spin without sleep or fence (prefill_merge.cuh);
// kEpoch: two counter banks used by alternate launches (prefill_shape.cuh), so nothing is
// counted or reset at the end: the kernel's tail is the last merge's stores (without it the
// last CTA to finish resets bank 0).
template <bool kEarlyT, bool kBatchedT, bool kOneWaveT, bool kTailSplitT, int kSplitCapT,
          bool kBalancedT, bool kWarmCountersT, bool kLazyBalanceT, bool kLeanSyncT,
          bool kEpochT>
struct Tuning {
  static constexpr bool kEarly = kEarlyT;
  static constexpr bool kBatched = kBatchedT;
  static constexpr bool kOneWave = kOneWaveT;
  static constexpr bool kTailSplit = kTailSplitT;
  static constexpr int kSplitCap = kSplitCapT;
  static constexpr bool kBalanced = kBalancedT;
  static constexpr bool kWarmCounters = kWarmCountersT;
  static constexpr bool kLazyBalance = kLazyBalanceT;
  static constexpr bool kLeanSync = kLeanSyncT;
  static constexpr bool kEpoch = kEpochT;
};
using Shipped = Tuning<true, true, true, true, kMaxSplit, true, true, true, true, true>;
// run 5's kernel (463732f)
using Wide = Tuning<true, true, true, true, kMaxSplit, false, false, false, false, false>;

// Without kEpoch, the last CTA to finish: bank 0 back to zero for the next launch or graph
// replay (`n` threads from index `t`).
__device__ __forceinline__ void reset_counters(int* counters, const Schedule& sched, int slots,
                                               int t, int n) {
  const int split_units = sched.split() > 1 ? sched.units() : 0;
  for (int u = t; u < split_units; u += n) {
    counters[kArriveAt + u] = 0;
    counters[kArriveAt + slots + u] = 0;
  }
  if (t == 0) {
    counters[kQueueAt] = 0;
    counters[kFinishedAt] = 0;
  }
}

// The whole kernel: setup, then the producer warp or a consumer warpgroup's item loop.
template <class Cfg>
__device__ __forceinline__ void prefill_body(const KernelParams& p) {
  const int tid = threadIdx.x;
  // Warp-uniform as far as the compiler knows (a broadcast): role branches on it are not
  // divergent, which wgmma needs to stay asynchronous.
  const int warp = __shfl_sync(0xffffffffu, tid >> 5, 0);
  const int lane = tid & 31;

  // ---- smem layout ------------------------------------------------------------------------
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint8_t* q_tile = smem + kQOffset;
  uint8_t* ring = smem + kRingOffset;
  uint8_t* small = smem + kSmallOffset;
  uint64_t* full = reinterpret_cast<uint64_t*>(small + kBarFullAt);
  uint64_t* empty = reinterpret_cast<uint64_t*>(small + kBarEmptyAt);
  uint64_t* q_full = reinterpret_cast<uint64_t*>(small + kBarQFullAt);
  uint64_t* q_empty = reinterpret_cast<uint64_t*>(small + kBarQEmptyAt);
  CUtensorMap* q_stage = reinterpret_cast<CUtensorMap*>(small + kTmapAt);
  ItemInfo* info = reinterpret_cast<ItemInfo*>(small + kInfoAt);
  int* words = reinterpret_cast<int*>(small + kSchedAt);  // [0..4] schedule, [8..10] merge
  Schedule sched{words, reinterpret_cast<int16_t*>(small + kOrderAt),
                 reinterpret_cast<int*>(small + kPrefixAt)};
  int* counters = p.ptr_multi_ctas_kv_counter;
  const int slots = p.max_num_ctas_kv;
  CUtensorMap* q_map = reinterpret_cast<CUtensorMap*>(counters + tmap_word(slots)) + blockIdx.x;

  // ---- barrier init, Q padding rows, the edited Q tensormap, the schedule -------------------
  if (Cfg::kEarly && warp == 2 && lane == 0) {
    // The CTA's 1/G share of the page table into L2 now, so that the producers' table reads
    // (the first before any K/V load can be issued) hit L2. Rounded out to 16 bytes: those
    // bytes share the table's first and last 16-byte granules, so they are mapped.
    const int ctas = static_cast<int>(gridDim.x);
    const uintptr_t at = reinterpret_cast<uintptr_t>(p.ptr_page_idx_kv);
    const uintptr_t base = at & ~uintptr_t{15};
    const int64_t span = static_cast<int64_t>(at - base) +
                         static_cast<int64_t>(p.batch_size) * p.max_num_pages_per_seq_kv * 4;
    const int64_t share = ((span + ctas - 1) / ctas + 15) & ~int64_t{15};
    const int64_t from = share * blockIdx.x;
    if (from < span) {
      const int64_t size = min(share, (span - from + 15) & ~int64_t{15});
      ptx::bulk_prefetch_l2(reinterpret_cast<const void*>(base + from),
                            static_cast<uint32_t>(size));
    }
  }
  if (Cfg::kWarmCounters && warp == 2 && lane == 1 && blockIdx.x == 0) {
    // Queue, finish count, arrivals and claims: bank 0 (kEpoch: both banks) from the scratch
    // base (16-byte aligned; the Q tensormaps follow at tmap_word(slots), so the rounded size
    // stays inside the scratch).
    const int banks = Cfg::kEpoch ? 2 : 1;
    ptx::bulk_prefetch_l2(counters,
                          static_cast<uint32_t>(banks * bank_words(slots) * 4 + 15) & ~15u);
  }
  if (Cfg::kEpoch && warp == 1) {
    // This launch's ticket picks its bank; the CTA zeroes its share of the other bank, which
    // the previous launch used (complete: launches on a stream do not overlap). The CTA that
    // draws the last ticket of a bank-1 launch puts the ticket word back to 0.
    const int ctas = static_cast<int>(gridDim.x);
    int ticket = 0;
    if (lane == 0) {
      ticket = atomicAdd(counters + kTicketAt, 1);
      if (ticket == 2 * ctas - 1) atomicSub(counters + kTicketAt, 2 * ctas);
      words[12] = ticket >= ctas;
    }
    ticket = __shfl_sync(0xffffffffu, ticket, 0);
    int* other = counters + (ticket >= ctas ? 0 : bank_words(slots));
    const int n = 2 * slots;
    const int share = (n + ctas - 1) / ctas;
    const int end = min(n, share * (static_cast<int>(blockIdx.x) + 1));
    for (int x = share * static_cast<int>(blockIdx.x) + lane; x < end; x += 32) {
      other[kArriveAt + x] = 0;
    }
    if (blockIdx.x == 0 && lane == 0) other[kQueueAt] = 0;
  }
  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) {
      ptx::mbarrier_init(&full[i], 1);
      ptx::mbarrier_init(&empty[i], kConsumerWarps);
    }
    ptx::mbarrier_init(q_full, 1);
    ptx::mbarrier_init(q_empty, kConsumerWarps);
    ptx::fence_mbarrier_init();
    ptx::prefetch_tensormap(&p.tma_k);
    ptx::prefetch_tensormap(&p.tma_v);
  }
  if (tid >= 64 && tid < 128) {  // rows 126, 127 of each Q chunk: TMA never writes them
    const int i = tid - 64;
    reinterpret_cast<uint4*>(q_tile + (i >> 4) * kQChunkBytes + kItemRows * 128)[i & 15] =
        make_uint4(0, 0, 0, 0);
    ptx::fence_proxy_async_shared();  // before wgmma reads them through the async proxy
  }
  if (warp == (Cfg::kEarly ? 3 : 0)) {
    // The pack's Q map loads 128 tokens of one head; ours loads 21 tokens x 6 heads, rows
    // ordered token-major (r = 6 t + h), exactly the item's rows. kEarly: warp 3 edits and
    // releases it while warp 0 loads the lengths; warp 0 acquires it after the schedule's
    // barriers.
    if (lane < 8) {
      reinterpret_cast<uint4*>(q_stage)[lane] = reinterpret_cast<const uint4*>(&p.tma_q)[lane];
    }
    __syncwarp();
    if (lane == 0) {
      ptx::tensormap_replace_box_dim<2>(q_stage, kGroup);
      ptx::tensormap_replace_box_dim<3>(q_stage, kBlockTokens);
    }
    __syncwarp();
    ptx::tensormap_cp_fenceproxy(q_map, q_stage);
    if (!Cfg::kEarly && lane == 0) ptx::fence_proxy_tensormap_acquire(q_map);
  }
  sched.build<Cfg::kTailSplit, Cfg::kSplitCap, Cfg::kBalanced, Cfg::kLazyBalance>(
      p, reinterpret_cast<int*>(ring), tid);
  // (build ends with __syncthreads)
  if (Cfg::kEarly && warp == 0 && lane == 0) {
    ptx::fence_proxy_tensormap_acquire(q_map);
    ptx::prefetch_tensormap(q_map);
  }
  const int n_items = sched.items();
  const int ctas = static_cast<int>(gridDim.x);
  // This launch's counter bank, derived at each use from the pack and shared memory (a pointer
  // kept live across the consumer loop costs the 168-register budget a spill).
  const auto bank = [&p, words]() {
    return p.ptr_multi_ctas_kv_counter +
           (Cfg::kEpoch && words[12] != 0 ? bank_words(p.max_num_ctas_kv) : 0);
  };

  if (warp < 4) {
    // ---- producer -------------------------------------------------------------------------
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (warp != 0) return;
    int tile = 0;
    int i = static_cast<int>(blockIdx.x);
    for (int k = 0;; ++k) {
      ItemInfo it;
      bool ok = false;
      while (i < n_items) {
        ok = sched.template decode<Cfg::kBalanced>(p, i, it);
        if (ok) break;
        int next = 0;
        if (lane == 0) next = atomicAdd(bank() + kQueueAt, 1);
        i = __shfl_sync(0xffffffffu, next, 0) + ctas;
      }
      if (k > 0 && lane == 0) ptx::mbarrier_wait(q_empty, (k - 1) & 1);
      __syncwarp();
      if (!ok) {
        if (lane == 0) {
          info[k & 1].ntok = 0;  // end of the work
          ptx::mbarrier_arrive(q_full);
        }
        break;
      }
      int next = 0;
      if (lane == 0) {
        info[k & 1] = it;
        ptx::mbarrier_arrive_expect_tx(q_full, kBoxesPerTile * kQBoxBytes);
        for (int j = 0; j < kBoxesPerTile; ++j) {
          ptx::tma_load_4d(q_tile + j * kQChunkBytes, q_map, q_full, j * 64, 0, kGroup * it.kvh,
                           it.tok_abs);
        }
        next = atomicAdd(bank() + kQueueAt, 1);  // claimed now, used after the pages
      }
      const int* table =
          p.ptr_page_idx_kv + static_cast<int64_t>(it.seq) * p.max_num_pages_per_seq_kv;
      for (int base = it.page0; base < it.page1; base += 32) {
        const int cnt = min(32, it.page1 - base);
        const int phys_lane = lane < cnt ? table[base + lane] : 0;
        for (int q = 0; q < cnt; ++q) {
          const int phys = __shfl_sync(0xffffffffu, phys_lane, q);
          if (lane == 0) {
#pragma unroll
            for (int kv = 0; kv < 2; ++kv) {
              const int t = tile + kv;
              const int slot = t % kStages;
              if (t >= kStages) ptx::mbarrier_wait(&empty[slot], ((t / kStages) - 1) & 1);
              ptx::mbarrier_arrive_expect_tx(&full[slot], kTileBytes);
              const CUtensorMap* map = kv == 0 ? &p.tma_k : &p.tma_v;
              for (int j = 0; j < kBoxesPerTile; ++j) {
                ptx::tma_load_4d(ring + slot * kTileBytes + j * kBoxBytes, map, &full[slot],
                                 j * 64, 0, it.kvh, phys);
              }
            }
          }
          tile += 2;
          __syncwarp();
        }
      }
      i = __shfl_sync(0xffffffffu, next, 0) + ctas;
    }
    ptx::bar_sync(kBarExit, kExitThreads);
    return;
  }

  // ---- consumers ----------------------------------------------------------------------------
  ptx::setmaxnreg_inc<kConsumerRegs>();
  const bool one_wave = Cfg::kOneWave && n_items <= ctas;  // CTA c runs item c, nothing else
  const int ct = tid - 128;         // 0..255
  const int w = (warp - 4) >> 2;    // rows 64w..64w+63 of the tile
  const int wi = warp & 3;          // warp within the warpgroup: rows +16wi
  const int g = lane >> 2;
  const int t = lane & 3;
  const int row_a = kWgRows * w + 16 * wi + g;
  const int row_b = row_a + 8;
  const uint64_t q_desc = ptx::wgmma_desc_sw128(ptx::smem_u32(q_tile) + kWgRows * w * 128, 16, 1024);
  const uint64_t k_desc = ptx::wgmma_desc_sw128(ptx::smem_u32(ring), 16, 1024);
  const uint64_t v_desc = ptx::wgmma_desc_sw128(ptx::smem_u32(ring), kBoxBytes, 1024);
  constexpr uint32_t kTileDesc = kTileBytes >> 4;  // one ring tile in descriptor units
  const float scale = p.scale_softmax_log2;
  int tile = 0;
  ItemInfo pending;
  bool helps = false;  // the last split chunk this CTA wrote without completing its unit
  for (int k = 0;; ++k) {
    ptx::mbarrier_wait_converged(q_full, k & 1);
    const ItemInfo it = uniform(info[k & 1]);
    if (it.ntok == 0) break;
    const int rows = kGroup * it.ntok;
    // Key limits of the thread's rows; padding rows take the last real row's (finite math).
    const int lim_a = it.lim0 + min(row_a, rows - 1) / kGroup;
    const int lim_b = it.lim0 + min(row_b, rows - 1) / kGroup;
    const int lim_min = it.lim0 + min(kWgRows * w, rows - 1) / kGroup;
    const int mask_from = lim_min <= 0 ? 0 : lim_min / kPage;  // pages from here need masks
    float o[128];
#pragma unroll
    for (int j = 0; j < 128; ++j) o[j] = 0.f;
    float m[2] = {-INFINITY, -INFINITY};
    float l[2] = {0.f, 0.f};
    float alpha[2];
    float s[32];
    uint32_t pa[16];
    const int np = it.page1 - it.page0;
    tile = __shfl_sync(0xffffffffu, tile, 0);  // uniform for the compiler: descriptors stay in
                                               // uniform registers between the wgmma
    if (kWgRows * w >= rows) {
      // No real row in this warpgroup's half (items of <= 10 tokens: verify): pass the tiles
      // through without math, releasing each once it has landed.
      ptx::mbarrier_arrive_if(q_empty, lane == 0);
      for (int x = 0; x < 2 * np; ++x) {
        ptx::mbarrier_wait_converged(&full[(tile + x) % kStages], ((tile + x) / kStages) & 1);
        ptx::mbarrier_arrive_if(&empty[(tile + x) % kStages], lane == 0);
      }
      tile += 2 * np;
    } else if (np > 0) {
      // ---- first page: S, softmax (O is zero, nothing to rescale) -------------------------
      {
        const int slot = tile % kStages;
        ptx::mbarrier_wait_converged(&full[slot], (tile / kStages) & 1);
        ptx::wgmma_fence();
        issue_qk(s, q_desc, k_desc + slot * kTileDesc);
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<0>();
        ptx::fence_registers(s);
        ptx::mbarrier_arrive_if(&empty[slot], lane == 0);
        ptx::mbarrier_arrive_if(q_empty, lane == 0 && np == 1);
        softmax_page(s, pa, m, l, alpha, scale, it.page0 >= mask_from, it.page0 * kPage + 2 * t,
                     lim_a, lim_b);
      }
      // ---- main loop: Q K^T of page j overlaps the softmax; P V of page j-1 runs under it --
      for (int j = 1; j < np; ++j) {
        const int tk = tile + 2 * j;      // K of page j
        const int tv = tile + 2 * j - 1;  // V of page j-1
        const int sk = tk % kStages;
        const int sv = tv % kStages;
        // V of page j-2 (its P V completed last iteration) goes back here rather than right
        // after that wait: an arrive between the wait and the rescale makes ptxas serialise
        // every wgmma of the kernel (C7513).
        ptx::mbarrier_arrive_if(&empty[(tv - 2) % kStages], lane == 0 && j > 1);
        ptx::mbarrier_wait_converged(&full[sk], (tk / kStages) & 1);
        ptx::mbarrier_wait_converged(&full[sv], (tv / kStages) & 1);
        ptx::wgmma_fence();
        issue_qk(s, q_desc, k_desc + sk * kTileDesc);
        ptx::wgmma_commit_group();
        ptx::wgmma_fence();  // ptxas would insert this warpgroup.arrive itself (C7519)
        issue_pv(o, pa, v_desc + sv * kTileDesc);
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();
        ptx::fence_registers(s);
        ptx::mbarrier_arrive_if(&empty[sk], lane == 0);
        ptx::mbarrier_arrive_if(q_empty, lane == 0 && j == np - 1);
        uint32_t pn[16];
        const int page = it.page0 + j;
        softmax_page(s, pn, m, l, alpha, scale, page >= mask_from, page * kPage + 2 * t, lim_a,
                     lim_b);
        ptx::wgmma_wait_group<0>();
        ptx::fence_registers(o);
        ptx::fence_registers(pa);
        rescale(o, alpha);
#pragma unroll
        for (int x = 0; x < 16; ++x) pa[x] = pn[x];
      }
      // ---- last P V ---------------------------------------------------------------------------
      {
        const int tv = tile + 2 * np - 1;
        const int sv = tv % kStages;
        ptx::mbarrier_arrive_if(&empty[(tv - 2) % kStages], lane == 0 && np > 1);
        ptx::mbarrier_wait_converged(&full[sv], (tv / kStages) & 1);
        const int tail = it.kv_len % kPage;
        if (tail != 0 && it.page1 == (it.kv_len + kPage - 1) / kPage) {
          // The sequence's last page: V rows past its length hold stale data that could be
          // NaN, and P = 0 times NaN is NaN. Each warpgroup zeroes them before its own P V
          // (both write the same zeros, so neither can read a row before it is zero).
          uint8_t* vt = ring + sv * kTileBytes;
          for (int x = (ct & 127); x < (kPage - tail) * kBoxesPerTile * 8; x += 128) {
            const int row = tail + x / (kBoxesPerTile * 8);
            const int rest = x % (kBoxesPerTile * 8);
            reinterpret_cast<uint4*>(vt + (rest >> 3) * kBoxBytes + row * 128)[rest & 7] =
                make_uint4(0, 0, 0, 0);
          }
          ptx::fence_proxy_async_shared();
          ptx::bar_sync(kBarWarpgroup + w, 128);
        }
        ptx::wgmma_fence();
        issue_pv(o, pa, v_desc + sv * kTileDesc);
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<0>();
        ptx::fence_registers(o);
        ptx::fence_registers(pa);
        ptx::mbarrier_arrive_if(&empty[sv], lane == 0);
      }
      tile += 2 * np;
    } else if (lane == 0) {
      ptx::mbarrier_arrive(q_empty);  // no key at all: Q unused, the rows get zeros
    }

    // ---- epilogue -------------------------------------------------------------------------------
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
    if (it.nchunks == 1) {
      const float inv_a = l[0] > 0.f ? 1.f / l[0] : 0.f;
      const float inv_b = l[1] > 0.f ? 1.f / l[1] : 0.f;
      // Every lane shuffles (the quad shares rows); only real rows store.
      store_row(out_row(p, it, min(row_a, rows - 1)), o, 0, inv_a, t, row_a < rows);
      store_row(out_row(p, it, min(row_b, rows - 1)), o, 1, inv_b, t, row_b < rows);
    } else {
      float* po = p.ptr_partial_o + static_cast<int64_t>(it.slot) * kPartialFloats + 2 * t;
      float* ps = p.ptr_partial_stats + static_cast<int64_t>(it.slot) * kStatsFloats;
      if (row_a < rows) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          *reinterpret_cast<float2*>(po + row_a * kHeadDim + 8 * j) =
              make_float2(o[4 * j], o[4 * j + 1]);
        }
        if (t == 0) *reinterpret_cast<float2*>(ps + 2 * row_a) = make_float2(m[0], l[0]);
      }
      if (row_b < rows) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          *reinterpret_cast<float2*>(po + row_b * kHeadDim + 8 * j) =
              make_float2(o[4 * j + 2], o[4 * j + 3]);
        }
        if (t == 0) *reinterpret_cast<float2*>(ps + 2 * row_b) = make_float2(m[1], l[1]);
      }
      const bool last = arrive_chunk<Cfg::kLeanSync>(it, bank(), words + 8, ct);
      if (one_wave) {
        // Every chunk of the unit is running now: chunk c merges row part c, no claims.
        const int c = it.slot - it.first_slot;
        if (c < min(it.nchunks, kMaxParts)) {
          if (!last) wait_unit<Cfg::kLeanSync>(it, bank(), ct);
          merge_one<Cfg::kBatched>(p, it, c, ct);
        }
      } else if (last) {
        merge_claims<Cfg::kBatched>(p, it, bank(), words + 9, ct);
      } else {
        pending = it;
        helps = true;
      }
    }
  }

  // ---- end: help merge the last unfinished unit, then the last CTA resets the counters -----
  if (helps) {
    wait_unit<Cfg::kLeanSync>(pending, bank(), ct);
    merge_claims<Cfg::kBatched>(p, pending, bank(), words + 9, ct);
  }
  ptx::bar_sync(kBarExit, kExitThreads);
  if (Cfg::kEpoch) return;  // nothing to count or reset
  if (ct == 0) {
    __threadfence();
    words[10] = atomicAdd(counters + kFinishedAt, 1) == ctas - 1;
  }
  ptx::bar_sync(kBarConsumers, kConsumerThreads);
  if (words[10]) {
    __threadfence();
    reset_counters(counters, sched, slots, ct, kConsumerThreads);
  }
}

// ---- entry ---------------------------------------------------------------------------------------
// The sm_100a build compiles it as a trap: wgmma is sm_90a only.

template <class Cfg>
__device__ __forceinline__ void entry_body(const KernelParams& p) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (prefill_body<Cfg>(p);), (__trap();))
}

// The shipped entry (prefill_geometry.json).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    attention_prefill_sm90a_bf16_q24kv4d256p64(const __grid_constant__ KernelParams p) {
  entry_body<Shipped>(p);
}

// Alternatives with the same launch geometry (validation/attention/prefill_cases.VARIANTS).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    attention_prefill_wide_sm90a_bf16_q24kv4d256p64(const __grid_constant__ KernelParams p) {
  entry_body<Wide>(p);
}

}  // namespace kernrt::attention::prefill
