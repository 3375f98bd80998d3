// Paged decode attention for sm_90a behind the TRTLLM-GEN 1280-byte parameter block.
//
// Shape (compiled in, decode_shape.cuh): BF16 Q/K/V/O, 24 query heads over 4 KV heads (GQA
// group 6), head dim 256, page 64, one query token per sequence. Reads the block at
// FlashInfer's offsets (params.h): tensormaps Q@0, K@128, V@384; ptr_o@912, counters@984,
// page table@1000, partial O@1008, partial stats@1016, seq lens@1080, batch@1116, partial
// slots per (sequence, head)@1156, page-table row length@1160, softmax scale (log2)@1220.
//
// Schedule: one wave of persistent CTAs with work stealing. U = min(grid.x * grid.z, 2 per SM,
// slots@1156, 128) units per KV head work: the first 4U blocks in launch order, head =
// linear / U; the rest leave at once, before any load. Every working CTA derives its first
// sequence from the lengths (up to U sequences: consecutive units in proportion to the
// pages, so the sequences start with work in proportion; beyond: unit u starts at sequence
// u * B / U). The CTAs on one (sequence, head) take its pages one at a time from a shared
// counter, each claimed a page ahead (decode_feed.cuh), so faster CTAs take more; a CTA
// whose sequence runs dry joins the sequence with the most unclaimed pages (ties from its own
// start point on), until none is left. A CTA that did every page of a sequence writes the
// output itself; otherwise its partial takes the next slot of (b, head) (slot counter), so a
// group's partials are slots 0..n-1 from (head * B + b) * slots. The final merge of a group
// goes in parts (the whole group up to 16 partials, else by query-head row,
// decode_merge.cuh) claimed from a counter: by the CTA whose pages complete the group (done
// counter) and by CTAs with no stream work left, which also claim a part of a still-streaming
// group ahead and wait for it to complete, but only once every CTA of the head has started:
// then each group completes with running CTAs and its completer merges any part nobody
// claimed, so that wait ends. No other wait between CTAs exists. A CTA leaves once nothing
// is left to claim; the last CTA of a head to leave puts the head's counters back to zero
// for the next launch or graph replay.
//
// Per segment (one sequence): warp 0 loads Q (4 TMA boxes) and feeds a 3-stage ring of
// 32 KiB tiles alternating K and V of one page (lane 0 issues TMA); a sentinel tile (page -1)
// ends the segment. Warp w takes tokens [16w, 16w+16) of every page with its own online
// softmax (rows = the 6 query heads padded to 16 for mma.m16n8k16): S = Q K^T, P =
// exp2(S*scale - m) rounded to bf16, O += P V. Tokens past the length in the last page are
// masked in S and their V rows zeroed (no 0 * NaN from stale slots). The 4 warps merge in
// shared memory; the CTA writes its unnormalised O and (max, sum) to its slot.
//
// Deliberately does not check: that the pack's head counts, page size and head dim equal the
// compiled shape, that page indices are inside the pool the K/V tensormaps span, that the
// scratch holds seqs x 4 x slots partials and seqs x 24 counters that were zero before the
// first launch, or that the summation order is reproducible: which CTA takes which page
// depends on timing, so results may differ in the last bits between runs. An empty sequence
// (length <= 0) gets zeros.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention/decode_feed.cuh"
#include "attention/decode_merge.cuh"
#include "attention/decode_shape.cuh"
#include "attention/params.h"
#include "common/block.cuh"
#include "common/ptx.cuh"

namespace kernrt::attention {
namespace {

// Zeros for the 6 query-head rows of (seq, head): the output of an empty sequence.
__device__ __forceinline__ void zero_rows(const KernelParams& p, int seq, int head) {
  uint4* out = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.ptr_o) +
                                        (static_cast<int64_t>(seq) * p.num_hidden_elts_o +
                                         head * kGroup * kHeadDim));
  for (int i = 0; i < kGroup * kHeadDim * 2 / 16; ++i) out[i] = make_uint4(0, 0, 0, 0);
}

// Merges part `part` of the `parts` = merge_parts(n) of the final merge of (seq, head), whose
// n partials are written: the whole group when it is one part, else query-head row `part`.
__device__ __forceinline__ void merge_part(const KernelParams& p, uint8_t* smem, uint64_t* bar,
                                           uint32_t& phase, int seq, int head, int n, int parts,
                                           int part, int tid, int warp, int lane) {
  const int64_t slot0 = (static_cast<int64_t>(head) * p.batch_size + seq) * p.max_num_ctas_kv;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.ptr_o) +
                       (static_cast<int64_t>(seq) * p.num_hidden_elts_o + head * kGroup * kHeadDim);
  if (parts == 1) {
    merge_whole(p, smem, bar, phase, slot0, n, out, tid, warp, lane);
  } else {
    merge_slice(p, smem, bar, phase, slot0, n, part, out + part * kHeadDim, tid, warp, lane);
  }
}

// Claims parts of the final merge of (seq, head) until none is left and merges each (whole
// CTA).
__device__ __forceinline__ void merge_rows(const KernelParams& p, uint8_t* smem, uint64_t* bar,
                                           uint32_t& phase, int* flag, int seq, int head,
                                           int tid, int warp, int lane) {
  int* ctr = p.ptr_multi_ctas_kv_counter + seq * kCounterStride;
  const int n = __ldcg(ctr + kAllocAt + head);
  const int parts = merge_parts(n);
  for (;;) {
    if (tid == 0) *flag = atomicAdd(ctr + kSliceAt + head, 1) & 0xff;
    __syncthreads();
    const int part = *flag;
    if (part >= parts) break;
    merge_part(p, smem, bar, phase, seq, head, n, parts, part, tid, warp, lane);
    if (part == parts - 1) break;  // parts go out in order: none is left after the last
  }
  __syncthreads();  // every thread has read the flag
}

// Claims a part of the final merge of (seq, head) while the group still streams, waits for
// the group to complete and merges the part: the merge then starts one poll after the last
// arrival, not after the arrival's claim round trips. Claims are indices: which part one
// means (the whole group, or a query-head row) is known once the group is complete and its
// partials counted; a claim past the parts merges nothing. Only when waiting is safe (see
// the caller). Returns whether the claim was one of the parts.
__device__ __forceinline__ bool merge_part_ahead(const KernelParams& p, uint8_t* smem,
                                                 uint64_t* bar, uint32_t& phase, int* flag,
                                                 int* n_at, int seq, int head, int tid, int warp,
                                                 int lane) {
  int* ctr = p.ptr_multi_ctas_kv_counter + seq * kCounterStride;
  if (tid == 0) {
    const int row = atomicAdd(ctr + kSliceAt + head, 1) & 0xff;
    int n = 0;
    if (row < kMergeSlices) {
      const int pages = (max(p.ptr_seq_lens_kv[seq], 0) + kPage - 1) / kPage;
      while (__ldcg(ctr + kDoneAt + head) != pages) __nanosleep(32);
      __threadfence();
      n = __ldcg(ctr + kAllocAt + head);
    }
    *flag = row;
    *n_at = n;
  }
  __syncthreads();
  const int row = *flag;
  const int n = *n_at;
  __syncthreads();  // both read before either is reused
  const int parts = merge_parts(n);
  if (row >= parts) return false;
  merge_part(p, smem, bar, phase, seq, head, n, parts, row, tid, warp, lane);
  return true;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_decode_sm90a_bf16_q24kv4d256p64(const __grid_constant__ KernelParams p) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int tid = threadIdx.x;
  const int batch = p.batch_size;
  const int slots = p.max_num_ctas_kv;
  const int grid_units = static_cast<int>(gridDim.x * gridDim.z);
  const int units = min(min(grid_units, kCtasPerSm * ptx::nsmid() / kHeadsKv), min(slots, kMaxUnits));
  // The workers are the first 4U blocks in launch order, so the block scheduler spreads them
  // over the SMs (taken from blockIdx.x alone, half the SMs got two at batch 1 and half none).
  const int linear =
      static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  if (linear >= kHeadsKv * units || batch <= 0) return;
  const int head = linear / units;
  const int unit = linear % units;

  // ---- smem layout ------------------------------------------------------------------------
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint8_t* q_tile = smem + kQOffset;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOffset);
  uint64_t* empty = full + kStages;
  uint64_t* q_bar = empty + kStages;
  uint64_t* merge_bar = q_bar + 1;                         // the final merge's bulk copies
  int* tile_page = reinterpret_cast<int*>(merge_bar + 1);  // [stage]: logical page or -1
  int* flag = tile_page + kStages;                         // a CTA-wide decision
  int* pick = flag + 1;  // [0] sequence, [1] pages done here, [2] partial slot, [3] a merge's
                        // partials
  static_assert(2 * kStages * 8 + 2 * 8 + (kStages + 5) * 4 <= 128, "barrier area");
  int* tmp = reinterpret_cast<int*>(smem + kTmpOffset);  // 16 ints of reduction scratch

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
    ptx::mbarrier_init(merge_bar, 1);
    ptx::fence_mbarrier_init();
    pick[0] = -1;  // stays -1 for a unit the start shares leave over: it joins at once
    atomicAdd(p.ptr_multi_ctas_kv_counter + kHeadAt + head, kStarted);
  }

  // ---- first sequence; zeros for empty sequences (sequence b by unit b % U) ----------------
  if (batch <= kMaxRanked) {
    const int len_t = tid < batch ? p.ptr_seq_lens_kv[tid] : 0;
    const int pages_t = tid < batch ? (max(len_t, 0) + kPage - 1) / kPage : 0;
    if (tid < batch && len_t <= 0 && tid % units == unit) zero_rows(p, tid, head);
    if (batch <= units) {
      // Nearest share (at least 1); if those overshoot the units, floor shares of what is
      // left after one unit each, which never do.
      const int total = block::sum<kWarps>(pages_t, tmp, warp, lane);
      int n = 0;
      if (tid < batch) {
        const int64_t near =
            total > 0 ? (2 * static_cast<int64_t>(pages_t) * units + total) / (2 * total) : 1;
        n = static_cast<int>(near < 1 ? 1 : near);
      }
      if (block::sum<kWarps>(n, tmp + kWarps, warp, lane) > units && tid < batch) {
        n = 1 + static_cast<int>(static_cast<int64_t>(pages_t) * (units - batch) / total);
      }
      const int start = block::exclusive_scan<kWarps>(n, tmp + 2 * kWarps, warp, lane);
      if (tid < batch && unit >= start && unit < start + n) pick[0] = tid;
    } else if (tid == 0) {
      pick[0] = static_cast<int>(static_cast<int64_t>(unit) * batch / units);
    }
  } else {
    for (int b = tid; b < batch; b += kThreads) {
      if (b % units == unit && p.ptr_seq_lens_kv[b] <= 0) zero_rows(p, b, head);
    }
    if (tid == 0) pick[0] = static_cast<int>(static_cast<int64_t>(unit) * batch / units);
  }
  // Rows 6 and 7 of each Q box are padding rows of the mma; TMA writes rows 0-5 only.
  if (tid < kBoxesPerTile * 16) {
    reinterpret_cast<uint4*>(q_tile + (tid >> 4) * 1024 + kGroup * 128)[tid & 15] =
        make_uint4(0, 0, 0, 0);
  }
  __syncthreads();

  const int g = lane >> 2;  // fragment row: query head within the group
  const int t = lane & 3;
  const float scale = p.scale_softmax_log2;
  const uint32_t smem_base = ptx::smem_u32(smem);
  int* counters = p.ptr_multi_ctas_kv_counter;
  Feed feed;
  feed.lane = lane;
  feed.claim = 0;
  int issued = 0, seg_first = 0, feed_done = 0, cur_phys = 0, cur_logical = 0;  // warp 0
  int cons = 0;       // the next ring tile the consumers take
  uint32_t seg = 0;   // segments started (Q barrier phase)
  uint32_t merge_phase = 0;  // waits on merge_bar so far

  // Issues tiles up to index `upto` (K at even offsets from the segment's first tile, V of
  // the same page at odd ones). Warp 0 only.
  auto produce = [&](int upto) {
    while (!feed_done && issued <= upto) {
      const int ti = issued;
      const int stage = ti % kStages;
      const bool is_k = ((ti - seg_first) & 1) == 0;
      if (is_k) cur_logical = feed.next(cur_phys);
      if (lane == 0) {
        if (ti >= kStages) ptx::mbarrier_wait(&empty[stage], ((ti / kStages) - 1) & 1);
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

  for (int seq = pick[0];;) {
    if (seq >= 0) {
      // ---- one segment: this CTA's pages of (seq, head) -------------------------------------
      const int len = p.ptr_seq_lens_kv[seq];
      if (warp == 0) {
        if (lane == 0) {
          ptx::mbarrier_arrive_expect_tx(q_bar, kBoxesPerTile * kQBoxBytes);
          for (int j = 0; j < kBoxesPerTile; ++j) {
            ptx::tma_load_4d(q_tile + j * 1024, &p.tma_q, q_bar, j * 64, 0, head, seq);
          }
        }
        feed.init(p.ptr_page_idx_kv + static_cast<int64_t>(seq) * p.max_num_pages_per_seq_kv,
                  counters + seq * kCounterStride + kClaimAt + head,
                  (max(len, 0) + kPage - 1) / kPage);
        seg_first = issued;
        feed_done = 0;
      }
      ptx::mbarrier_wait(q_bar, seg & 1);
      ++seg;
      uint32_t qa[16][2];  // Q fragments (rows = query heads, only a0/a2 non-zero)
      {
        const uint32_t q_base = ptx::smem_u32(q_tile);
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const int chunk = 4 * q + (lane >> 3);
          const int row = lane & 7;
          const uint32_t addr =
              q_base + (chunk >> 3) * 1024 + row * 128 + (((chunk & 7) ^ row) << 4);
          ptx::ldmatrix_x4(qa[2 * q][0], qa[2 * q][1], qa[2 * q + 1][0], qa[2 * q + 1][1], addr);
        }
      }
      float o[32][4];
#pragma unroll
      for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
      float row_max = -INFINITY;  // log2 domain, quad-uniform
      float row_sum = 0.f;        // this thread's share of the row's sum
      int npages = 0;

      // ---- main loop: one page (K tile then V tile) per iteration -------------------------
      for (;;) {
        const int tk = cons;
        const int sk = tk % kStages;
        if (warp == 0) produce(tk + 2);
        ptx::mbarrier_wait(&full[sk], (tk / kStages) & 1);
        const int logical = tile_page[sk];
        if (logical < 0) {  // the sentinel's slot goes back to the producer too
          __syncwarp();
          if (lane == 0) ptx::mbarrier_arrive(&empty[sk]);
          cons = tk + 1;
          break;
        }
        const int tok0 = logical * kPage + warp * kTokensPerWarp;
        const bool live = tok0 < len;  // warp-uniform: a valid token in this warp's slice
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
              ptx::ldmatrix_x4(b0, b1, b2, b3, k_base + swz(row, 4 * q + (lane >> 3)));
              ptx::mma_m16n8k16_bf16(s[nt], qa[2 * q][0], 0u, qa[2 * q][1], 0u, b0, b1);
              ptx::mma_m16n8k16_bf16(s[nt], qa[2 * q + 1][0], 0u, qa[2 * q + 1][1], 0u, b2, b3);
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
          pa0 = ptx::pack_bf16x2(pr[0], pr[1]);  // tokens 2t, 2t+1
          pa2 = ptx::pack_bf16x2(pr[2], pr[3]);  // tokens 8+2t, 8+2t+1
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
            // Chunks are claimed in order, so no later TMA of this segment writes this stage
            // before the consumers release it.
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
            ptx::ldmatrix_x4_trans(b0, b1, b2, b3, v_base + swz(row, 2 * q + (mi >> 1)));
            ptx::mma_m16n8k16_bf16(o[2 * q], pa0, 0u, pa2, 0u, b0, b1);
            ptx::mma_m16n8k16_bf16(o[2 * q + 1], pa0, 0u, pa2, 0u, b2, b3);
          }
        }
        __syncwarp();
        if (lane == 0) ptx::mbarrier_arrive(&empty[sv]);
        cons = tk + 2;
        ++npages;
      }

      if (npages > 0) {
        // ---- epilogue: merge the 4 warps in shared memory (no TMA is in flight) -----------
        // A CTA that did every page of the sequence writes the output itself: no partial and
        // no merge (the group's partial count stays 0, and 0 partials make no merge part).
        const bool alone = npages == (max(len, 0) + kPage - 1) / kPage;
        if (tid == 0) {
          // This CTA's partial slot in the group (one per CTA and sequence: a CTA never
          // returns to a sequence it left, whose chunks were gone).
          if (!alone) pick[2] = atomicAdd(counters + pick[0] * kCounterStride + kAllocAt + head, 1);
        }
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
        float* merge_o = reinterpret_cast<float*>(smem);
        float* merge_ml = merge_o + kWarps * 8 * kMergeStride;  // [warp][row][max, sum]
        __syncthreads();  // every warp is past its last ldmatrix
        {
          float* dst = merge_o + (warp * 8 + g) * kMergeStride + 2 * t;
#pragma unroll
          for (int j = 0; j < 32; ++j) {
            *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[j][0], o[j][1]);
          }
          if (t == 0) {
            merge_ml[(warp * 8 + g) * 2] = row_max;
            merge_ml[(warp * 8 + g) * 2 + 1] = row_sum;
          }
        }
        if (tid == 0) pick[1] = npages;
        __syncthreads();
        // The sequence and counts again from shared memory and parameter space: holding them
        // in registers across the main loop costs the loop some.
        const int seq_e = pick[0];
        const int64_t slot0 =
            (static_cast<int64_t>(head) * p.batch_size + seq_e) * p.max_num_ctas_kv;
        const int64_t part_row0 = (slot0 + pick[2]) * 8;
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
            const float2 ow =
                *reinterpret_cast<const float2*>(merge_o + (w * 8 + row) * kMergeStride + d);
            ox += ow.x * f;
            oy += ow.y * f;
          }
          if (alone) {
            const float inv = 1.f / l;  // l >= 1: the row's largest score adds 2^0
            *reinterpret_cast<__nv_bfloat162*>(
                static_cast<__nv_bfloat16*>(p.ptr_o) + static_cast<int64_t>(seq_e) *
                p.num_hidden_elts_o + (head * kGroup + row) * kHeadDim + d) =
                __floats2bfloat162_rn(ox * inv, oy * inv);
            continue;
          }
          __stcg(reinterpret_cast<float2*>(p.ptr_partial_o + (part_row0 + row) * kHeadDim + d),
                 make_float2(ox, oy));
          if (d == 0) {
            __stcg(reinterpret_cast<float2*>(p.ptr_partial_stats + (part_row0 + row) * 2),
                   make_float2(m, l));
          }
        }

        // ---- arrival: count this CTA's pages; the one that completes the group merges -----
        if (alone) {
          // Nothing to publish: the count only tells the other CTAs the group is complete.
          if (tid == 0) atomicAdd(counters + seq_e * kCounterStride + kDoneAt + head, npages);
        } else {
          int* ctr = counters + seq_e * kCounterStride;
          __threadfence();
          __syncthreads();
          if (tid == 0) {
            const int done = pick[1];
            const int pages = (max(p.ptr_seq_lens_kv[seq_e], 0) + kPage - 1) / kPage;
            *flag = atomicAdd(ctr + kDoneAt + head, done) + done == pages;
          }
          __syncthreads();
          const bool completes = *flag;
          __syncthreads();  // every thread has read the flag before merge_rows reuses it
          if (completes) {
            __threadfence();
            merge_rows(p, smem, merge_bar, merge_phase, flag, seq_e, head, tid, warp, lane);
          }
        }
        // The warp merge and the weights wrote ring stages and the Q tile through the generic
        // proxy; the next segment's TMA writes them (the argmax below synchronises).
        ptx::fence_proxy_async_shared();
      }
    }

    // ---- next: the sequence with the most unclaimed pages, while any has one ----------------
    // (Claims are never handed back, so once none is left none comes back.) Ties go to the
    // first sequence from this unit's own start point on, so that CTAs running dry together
    // spread over equally long sequences instead of all joining the lowest-numbered one.
    const int from = static_cast<int>(static_cast<int64_t>(unit) * batch / units);
    int best = 0, best_at = batch;  // best_at: the sequence's place counted from `from`
    for (int b = tid; b < batch; b += kThreads) {
      const int pages_b = (max(p.ptr_seq_lens_kv[b], 0) + kPage - 1) / kPage;
      const int* ctr = counters + b * kCounterStride;
      const int left = (pages_b + kChunkPages - 1) / kChunkPages - __ldcg(ctr + kClaimAt + head);
      const int at = b >= from ? b - from : b - from + batch;
      if (left > best || (left == best && left > 0 && at < best_at)) {
        best = left;
        best_at = at;
      }
    }
    const int at = block::argmax<kWarps>(best, best_at, tmp, warp, lane);
    if (at >= batch) break;
    seq = at + from < batch ? at + from : at + from - batch;
    if (tid == 0) pick[0] = seq;
    __syncthreads();  // the argmax scratch and pick[0] before their next use
  }

  // ---- no stream work left: one pass over the head's counters decides ----------------------
  // Claim parts of a complete group's final merge; else, if waiting is safe, claim a part of a
  // still-streaming group's merge ahead and wait for it (merge_part_ahead), or just wait while
  // a group streams; else leave (the claimers finish the merges). Waiting is safe only once
  // every CTA of the head has started: then each group completes (its pages are with running
  // CTAs) and its completer merges whatever parts are unclaimed. The counters are read in one
  // round trip: at the end of a launch each round trip from the last arrival to the last exit
  // is on the critical path.
  for (;;) {
    int ready = 0, ready_seq = batch, ahead = 0, ahead_seq = batch;
    bool streaming = false;
    if (tid == 0) *flag = (__ldcg(counters + kHeadAt + head) & 0xff) == units;
    for (int b = tid; b < batch; b += kThreads) {
      const int pages_b = (max(p.ptr_seq_lens_kv[b], 0) + kPage - 1) / kPage;
      const int* ctr = counters + b * kCounterStride;
      const int done = __ldcg(ctr + kDoneAt + head);
      const int rows = __ldcg(ctr + kSliceAt + head) & 0xff;
      const int slots_b = __ldcg(ctr + kAllocAt + head);  // final once the group is complete
      if (pages_b > 0 && done != pages_b) {
        streaming = true;
        if (!ahead && rows < kMergeSlices) {
          ahead = 1;
          ahead_seq = b;
        }
      } else if (pages_b > 0 && !ready && rows < merge_parts(slots_b)) {
        ready = 1;
        ready_seq = b;
      }
    }
    const int help = block::argmax<kWarps>(ready, ready_seq, tmp, warp, lane);
    const int early = block::argmax<kWarps>(ahead, ahead_seq, tmp + 2 * kWarps, warp, lane);
    const bool may_wait = *flag;
    // Also orders every read of the flag and the argmax scratch before their next use.
    const bool any_streaming = __syncthreads_or(streaming);
    if (help < batch) {
      __threadfence();
      merge_rows(p, smem, merge_bar, merge_phase, flag, help, head, tid, warp, lane);
      continue;
    }
    if (!may_wait || !any_streaming) break;
    if (early < batch &&
        merge_part_ahead(p, smem, merge_bar, merge_phase, flag, pick + 3, early, head, tid, warp,
                         lane)) {
      continue;
    }
    __nanosleep(256);
  }

  // ---- exit: the last CTA of the head puts the head's counters back to zero ----------------
  if (tid == 0) {
    *flag = ((atomicAdd(counters + kHeadAt + head, kFinished) >> 8) & 0xff) + 1 == units;
  }
  __syncthreads();
  if (*flag) {
    __threadfence();
    for (int b = tid; b < batch; b += kThreads) {
      int* ctr = counters + b * kCounterStride;
      ctr[kDoneAt + head] = 0;
      ctr[kClaimAt + head] = 0;
      ctr[kAllocAt + head] = 0;
      ctr[kSliceAt + head] = 0;
    }
    __syncthreads();
    if (tid == 0) counters[kHeadAt + head] = 0;
  }
}

}  // namespace kernrt::attention
