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
// row tile) over one chunk of that unit's pages (prefill_schedule.cuh: order, split count).
// Grid: one persistent CTA per SM (grid.x from geometry.json); CTA c starts with item c and
// claims the next from a queue counter. Block: 384 threads, 1 CTA per SM.
//   Warp 0 (producer, 40 registers): per item, loads Q (4 TMA boxes of 126 rows x 64 dims)
//   once the previous item's last Q K^T is done, then K and V of each page in turn into a ring
//   of 5 tiles of 32 KiB (full / empty mbarriers), reading the page table 32 entries at a time.
//   Warpgroups 1, 2 (consumers, 232 registers): rows 0-63 / 64-127 of the item. Per page:
//   S = Q K^T (16 wgmma m64n64k16, both operands in shared memory), online softmax in
//   registers, O += P V (4 wgmma m64n256k16, P from registers, V transposed in shared memory).
//   Q K^T of page j+1 is issued before P V of page j and the softmax of j+1 runs while P V of
//   j executes (wgmma.wait_group 1): the tensor cores see the next product while the special
//   function units work.
// Registers per consumer thread: O 128 f32 (64 x 256 per warpgroup), S 32 f32, P 2 x 16 bf16x2
// (the one P V reads and the next), row max / sum 4, addresses and loop state.
// Shared memory (prefill_shape.cuh): Q 64 KiB + 5 x 32 KiB ring + 1280 B = 231679 B.
// Output: an item that is its unit's only chunk normalises and stores O (bf16x2 per thread and
// row); a chunk of a split unit stores its partial and (max, sum) rows and arrives on the
// unit's counter; the unit's rows are then merged by row parts (prefill_merge.cuh). The last
// CTA to finish puts every counter back to zero for the next launch or graph replay.
//
// Deliberately does not check: that the pack's head counts, page size and head dim equal the
// compiled shape, that page indices are inside the pool the K/V tensormaps span, that the
// scratch holds the slots at pack@1156 (the generator sizes it), that cu_seqlens_q ends at
// most at the Q/O row count, or a reproducible summation order across launches (which CTA
// merges which part depends on timing; the sums are the same).
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention/params.h"
#include "attention/prefill_merge.cuh"
#include "attention/prefill_schedule.cuh"
#include "attention/prefill_shape.cuh"
#include "common/ptx.cuh"
#include "common/ptx/tensormap.cuh"
#include "common/ptx/warpgroup.cuh"
#include "common/ptx/wgmma.cuh"

namespace kernrt::attention::prefill {
namespace {
#if KERNRT_WGMMA  // sm_90a: the entry below traps on other architectures

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// S (64 x 64) = Q rows (K-major, 4 chunks of 64 dims) x K tile^T (64 tokens x 256 dims): 16
// k-steps of 16 dims, advancing 32 bytes inside a 128-byte swizzled row, then a chunk. The
// descriptors are a base plus compile-time offsets (address field in 16-byte units, no carry
// out of its 14 bits below 256 KiB), so nothing but uniform adds sits between the wgmma.
__device__ __forceinline__ void issue_qk(float (&s)[32], uint64_t q_base, uint64_t k_base) {
  const uint64_t q_desc = ptx::wgmma_desc_uniform(q_base);
  const uint64_t k_desc = ptx::wgmma_desc_uniform(k_base);
#pragma unroll
  for (int kk = 0; kk < 16; ++kk) {
    const uint32_t qa = ((kk >> 2) * kQChunkBytes + (kk & 3) * 32) >> 4;
    const uint32_t kb = ((kk >> 2) * kBoxBytes + (kk & 3) * 32) >> 4;
    ptx::wgmma_m64n64k16_ss(s, q_desc + qa, k_desc + kb, kk > 0);
  }
}

// O (64 x 256) += P (64 x 64 keys, registers) x V tile (64 keys x 256 dims, MN-major): 4
// k-steps of 16 keys (2048 bytes of rows each); the 4 boxes of 64 dims are 8 KiB apart.
__device__ __forceinline__ void issue_pv(float (&o)[128], const uint32_t (&pa)[16],
                                         uint64_t v_base) {
  const uint64_t v_desc = ptx::wgmma_desc_uniform(v_base);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    ptx::wgmma_m64n256k16_rs(o, pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3],
                             v_desc + ((kk * 2048) >> 4), 1);
  }
}

// Online softmax of one page for the thread's rows a (s[4j], s[4j+1]: keys key0 + 8j + {0,1})
// and b (s[4j+2], s[4j+3]); keys >= the row's limit are masked when `mask`. Leaves P as the
// A fragments of the P V product (pa[2j] row a, pa[2j+1] row b) and the rescale of O.
__device__ __forceinline__ void softmax_page(float (&s)[32], uint32_t (&pa)[16], float (&m)[2],
                                             float (&l)[2], float (&alpha)[2], float scale,
                                             bool mask, int key0, int lim_a, int lim_b) {
  if (mask) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = key0 + 8 * j + e;
        if (key >= lim_a) s[4 * j + e] = -INFINITY;
        if (key >= lim_b) s[4 * j + 2 + e] = -INFINITY;
      }
    }
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
  float neg[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    const float m_new = fmaxf(m[i], mx[i] * scale);
    const float use = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet: no NaN
    alpha[i] = exp2f(m[i] - use);
    m[i] = m_new;
    neg[i] = -use;
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float p0 = exp2f(fmaf(s[4 * j], scale, neg[0]));
    const float p1 = exp2f(fmaf(s[4 * j + 1], scale, neg[0]));
    const float p2 = exp2f(fmaf(s[4 * j + 2], scale, neg[1]));
    const float p3 = exp2f(fmaf(s[4 * j + 3], scale, neg[1]));
    sum[0] += p0 + p1;
    sum[1] += p2 + p3;
    pa[2 * j] = pack_bf16x2(p0, p1);
    pa[2 * j + 1] = pack_bf16x2(p2, p3);
  }
  l[0] = l[0] * alpha[0] + sum[0];
  l[1] = l[1] * alpha[1] + sum[1];
}

// The record with every field broadcast from lane 0: the compiler then knows that branches on
// it are warp-uniform (a divergent branch before a wgmma makes ptxas serialise them all).
__device__ __forceinline__ ItemInfo uniform(const ItemInfo& in) {
  ItemInfo it;
  it.seq = __shfl_sync(0xffffffffu, in.seq, 0);
  it.kvh = __shfl_sync(0xffffffffu, in.kvh, 0);
  it.tok_abs = __shfl_sync(0xffffffffu, in.tok_abs, 0);
  it.ntok = __shfl_sync(0xffffffffu, in.ntok, 0);
  it.lim0 = __shfl_sync(0xffffffffu, in.lim0, 0);
  it.page0 = __shfl_sync(0xffffffffu, in.page0, 0);
  it.page1 = __shfl_sync(0xffffffffu, in.page1, 0);
  it.unit = __shfl_sync(0xffffffffu, in.unit, 0);
  it.nchunks = __shfl_sync(0xffffffffu, in.nchunks, 0);
  it.slot = __shfl_sync(0xffffffffu, in.slot, 0);
  it.first_slot = __shfl_sync(0xffffffffu, in.first_slot, 0);
  it.kv_len = __shfl_sync(0xffffffffu, in.kv_len, 0);
  return it;
}

// Stores one normalised output row: the quad's 4 threads hold columns 8j + 2t, +1 of it (bf16x2
// words v_j); a 4x4 transpose inside the quad per 4 words (two butterfly stages of shuffles)
// gives thread t columns 32q + 8t .. +7, one 16-byte store per group q (16 per row instead of
// 64 four-byte ones).
__device__ __forceinline__ void store_row(__nv_bfloat16* row, const float (&o)[128], int half,
                                          float inv, int t, bool live) {
  const bool b0 = t & 1, b1 = t & 2;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    uint32_t a[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * q + i;
      a[i] = pack_bf16x2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
    }
    // Stage 1 (lanes t, t ^ 1): thread t then holds M(t & ~1 | {0,1}, (t & 1) + {0, 2}).
    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, b0 ? a[0] : a[1], 1);
    const uint32_t r1 = __shfl_xor_sync(0xffffffffu, b0 ? a[2] : a[3], 1);
    const uint32_t c0 = b0 ? r0 : a[0], c1 = b0 ? a[1] : r0;
    const uint32_t c2 = b0 ? r1 : a[2], c3 = b0 ? a[3] : r1;
    // Stage 2 (lanes t, t ^ 2): thread t then holds M(0..3, t).
    const uint32_t s0 = __shfl_xor_sync(0xffffffffu, b1 ? c0 : c2, 2);
    const uint32_t s1 = __shfl_xor_sync(0xffffffffu, b1 ? c1 : c3, 2);
    uint4 v;
    v.x = b1 ? s0 : c0;
    v.y = b1 ? s1 : c1;
    v.z = b1 ? c2 : s0;
    v.w = b1 ? c3 : s1;
    if (live) *reinterpret_cast<uint4*>(row + 32 * q + 8 * t) = v;
  }
}

__device__ __forceinline__ void rescale(float (&o)[128], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    o[4 * j] *= alpha[0];
    o[4 * j + 1] *= alpha[0];
    o[4 * j + 2] *= alpha[1];
    o[4 * j + 3] *= alpha[1];
  }
}

#endif  // KERNRT_WGMMA
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    attention_prefill_sm90a_bf16_q24kv4d256p64(const __grid_constant__ KernelParams p) {
#if KERNRT_WGMMA
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
  int* words = reinterpret_cast<int*>(small + kSchedAt);  // [0..3] schedule, [8..9] merge
  Schedule sched{words, reinterpret_cast<int16_t*>(small + kOrderAt),
                 reinterpret_cast<int*>(small + kPrefixAt)};
  int* counters = p.ptr_multi_ctas_kv_counter;
  const int slots = p.max_num_ctas_kv;
  CUtensorMap* q_map = reinterpret_cast<CUtensorMap*>(counters + tmap_word(slots)) + blockIdx.x;

  // ---- barrier init, Q padding rows, the edited Q tensormap, the schedule -------------------
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
  if (warp == 0) {
    // The pack's Q map loads 128 tokens of one head; ours loads 21 tokens x 6 heads, rows
    // ordered token-major (r = 6 t + h), exactly the item's rows.
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
    if (lane == 0) ptx::fence_proxy_tensormap_acquire(q_map);
  }
  sched.build(p, reinterpret_cast<int*>(ring), tid);  // ends with __syncthreads
  const int n_items = sched.items();
  const int ctas = static_cast<int>(gridDim.x);

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
        ok = sched.decode(p, i, it);
        if (ok) break;
        int next = 0;
        if (lane == 0) next = atomicAdd(counters + kQueueAt, 1);
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
        next = atomicAdd(counters + kQueueAt, 1);  // claimed now, used after the pages
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
    ptx::named_bar_sync(kBarExit, kExitThreads);
    return;
  }

  // ---- consumers ----------------------------------------------------------------------------
  ptx::setmaxnreg_inc<kConsumerRegs>();
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
        ptx::wgmma_fence();
        issue_qk(s, q_desc, k_desc + sk * kTileDesc);
        ptx::wgmma_commit_group();
        ptx::mbarrier_wait_converged(&full[sv], (tv / kStages) & 1);
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
          ptx::named_bar_sync(kBarWarpgroup + w, 128);
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
      if (arrive_chunk(p, it, words + 8, ct)) {
        merge_claims(p, it, words + 9, ct);
      } else {
        pending = it;
        helps = true;
      }
    }
  }

  // ---- end: help merge the last unfinished unit, then the last CTA resets the counters -----
  if (helps) {
    wait_unit(p, pending, ct);
    merge_claims(p, pending, words + 9, ct);
  }
  ptx::named_bar_sync(kBarExit, kExitThreads);
  if (ct == 0) {
    __threadfence();
    words[10] = atomicAdd(counters + kFinishedAt, 1) == ctas - 1;
  }
  ptx::named_bar_sync(kBarConsumers, kConsumerThreads);
  if (words[10]) {
    __threadfence();
    const int split_units = sched.split() > 1 ? sched.units() : 0;
    for (int u = ct; u < split_units; u += kConsumerThreads) {
      counters[kArriveAt + u] = 0;
      counters[kArriveAt + slots + u] = 0;
    }
    if (ct == 0) {
      counters[kQueueAt] = 0;
      counters[kFinishedAt] = 0;
    }
  }
#else
  __trap();  // sm_100a build: wgmma is sm_90a only (this entry exists so the build compiles)
#endif
}

}  // namespace kernrt::attention::prefill
