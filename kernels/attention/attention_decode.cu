// Paged decode attention for sm_90a behind the TRTLLM-GEN 1280-byte parameter block.
//
// Shape (compiled in, decode_shape.cuh): BF16 Q/K/V/O, 24 query heads over 4 KV heads (GQA
// group 6), head dim 256, page 64, one query token per sequence. Reads the block at
// FlashInfer's offsets (params.h): tensormaps Q@0, K@128, V@384; ptr_o@912, counters@984,
// page table@1000, partial O@1008, partial stats@1016, seq lens@1080, batch@1116, partial
// slots per (sequence, head)@1156, page-table row length@1160, softmax scale (log2)@1220.
//
// Schedule: every CTA reads the lengths first. When all are equal and an even split of the
// pages over the units is short (the busiest unit at most 32 pages and at most one above an
// even split), a static plan runs (decode_static.cuh, a `StaticSchedule`): each CTA knows its
// pages from the batch, the length and its unit alone, so it streams them without claims and
// leaves without a drain. Else (ragged batches, long contexts) the stealing schedule runs
// (decode_schedule.cuh, a `Schedule` over the CTA-shared `DecodeShared`): one wave of
// persistent CTAs with work stealing.
// Both: U = min(grid.x * grid.z, 2 per SM, slots@1156, 128) units per KV head work: the first
// 4U blocks in launch order, head = linear / U; the rest leave at once, before any load.
// Stealing: every working CTA derives its first sequence from the lengths (first: up to U
// sequences get consecutive units in proportion to their pages; beyond, unit u starts at
// sequence u * B / U). The CTAs on one (sequence, head) take its pages one at a time from a
// shared counter, each claimed a page ahead (decode_feed.cuh), so faster CTAs take more; a
// CTA whose sequence runs dry joins the sequence with the most unclaimed pages (next: ties
// from its own start point on), until none is left. A CTA that did every page of a sequence
// writes the output itself; otherwise its partial takes the next slot of (b, head), so a
// group's partials are slots 0..n-1 from (head * B + b) * slots. The final merge of a group
// goes in parts (the whole group up to 16 partials, else by query-head row, decode_merge.cuh)
// claimed from a counter: by the CTA whose pages complete the group (arrive) and by CTAs with
// no stream work left (drain), which also claim a part of a still-streaming group ahead and
// wait for it to complete, but only once every CTA of the head has started: then each group
// completes with running CTAs and its completer merges any part nobody claimed, so that wait
// ends. No other wait between CTAs exists. A CTA leaves once nothing is left to claim (leave:
// the last CTA of a head puts the head's counters back to zero for the next launch or graph
// replay).
//
// Per segment (one sequence): warp 0 loads Q (4 TMA boxes) and feeds a 3-stage ring of
// 32 KiB tiles alternating K and V of one page (lane 0 issues TMA); a sentinel tile (page -1)
// ends the segment. Warp w takes tokens [16w, 16w+16) of every page with its own online
// softmax (rows = the 6 query heads padded to 16 for mma.m16n8k16): S = Q K^T, P =
// exp2(S*scale - m) rounded to bf16, O += P V. Tokens past the length in the last page are
// masked in S and their V rows zeroed (no 0 * NaN from stale slots). The 4 warps merge in
// shared memory; the CTA writes its unnormalised O and (max, sum) to its slot, or the output.
// The body reads: setup (units, smem, barriers) -> segments (first, then next) -> drain ->
// leave.
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
#include "attention/decode_schedule.cuh"
#include "attention/decode_shape.cuh"
#include "attention/decode_static.cuh"
#include "attention/params.h"
#include "common/ptx.cuh"

namespace kernrt::attention {

// One thread: the 4 Q boxes of (seq, head) into the Q tile, completing on q_bar.
__device__ __forceinline__ void load_q(const KernelParams& p, DecodeShared* sh, uint8_t* q_tile,
                                       int seq, int head) {
  ptx::mbarrier_arrive_expect_tx(&sh->q_bar, kBoxesPerTile * kQBoxBytes);
  for (int j = 0; j < kBoxesPerTile; ++j) {
    ptx::tma_load_4d(q_tile + j * 1024, &p.tma_q, &sh->q_bar, j * 64, 0, head, seq);
  }
}

// ---- segments: stream this CTA's segments of (sequence, head) -------------------------------
// `seq` is the first sequence (-1: none); `feed` is warp 0's page feed of the schedule's type
// (a static feed holds the first segment's page-table entries already). Two flows, by the
// schedule's type:
//   Sched::kKeepsStage false (stealing): the consumers give the sentinel's stage back at once
//     and merge their warps in stages 0-1 of the drained ring; warp 0 starts every segment.
//   true (static): the consumers keep the sentinel's stage for the warp merge (6 rows) and
//     give it back after the epilogue; warp 0 starts a segment the producer did not start.
//     With Sched::kAhead the producer starts the next segment right after a sentinel (its
//     Q once the 4 warps read the last one, q_free), so its first page streams while the
//     consumers merge.
template <class Sched>
__device__ __forceinline__ void stream_segments(const KernelParams& p, const Sched& sched,
                                                typename Sched::FeedT& feed, GroupMerge& merge,
                                                uint8_t* smem, DecodeShared* sh, int seq,
                                                int head, int tid, int warp, int lane) {
  uint8_t* q_tile = smem + kQOffset;
  const int g = lane >> 2;  // fragment row: query head within the group
  const int t = lane & 3;
  const float scale = p.scale_softmax_log2;
  const uint32_t smem_base = ptx::smem_u32(smem);
  constexpr bool kKeep = Sched::kKeepsStage;
  int issued = 0, seg_first = 0, cur_phys = 0, cur_logical = 0;  // warp 0
  int feed_done = kKeep ? 1 : 0;  // warp 0; kKeep: no segment started yet
  uint32_t q_issued = 1;  // warp 0, kAhead: Q loads issued (the first segment's by the loop)
  int cons = 0;       // the next ring tile the consumers take
  uint32_t seg = 0;   // segments started (Q barrier phase)

  // Issues tiles up to index `upto` (K at even offsets from the segment's first tile, V of
  // the same page at odd ones). With kAhead, a sentinel is followed by the next segment's Q
  // (once the 4 warps read the last one) and tiles. Warp 0 only.
  auto produce = [&](int upto) {
    while (!feed_done && issued <= upto) {
      const int ti = issued;
      const int stage = ti % kStages;
      const bool is_k = ((ti - seg_first) & 1) == 0;
      if (is_k) cur_logical = feed.next(cur_phys);
      if (lane == 0) {
        if (ti >= kStages) ptx::mbarrier_wait(&sh->empty[stage], ((ti / kStages) - 1) & 1);
        if (cur_logical < 0) {
          sh->tile_page[stage] = -1;  // sentinel: consumers stop here
          ptx::mbarrier_arrive(&sh->full[stage]);
        } else {
          sh->tile_page[stage] = cur_logical;
          uint8_t* dst = smem + stage * kTileBytes;
          const CUtensorMap* map = is_k ? &p.tma_k : &p.tma_v;
          ptx::mbarrier_arrive_expect_tx(&sh->full[stage], kTileBytes);
          for (int j = 0; j < kBoxesPerTile; ++j) {
            ptx::tma_load_4d(dst + j * kBoxBytes, map, &sh->full[stage], j * 64, 0, head, cur_phys);
          }
        }
      }
      if (cur_logical < 0) {
        feed_done = 1;
        if constexpr (Sched::kAhead) {
          if (sched.advance(feed)) {
            if (lane == 0) {
              ptx::mbarrier_wait(&sh->q_free, (q_issued - 1) & 1);
              load_q(p, sh, q_tile, feed.seq, head);
            }
            ++q_issued;
            seg_first = ti + 1;
            feed_done = 0;
          }
        }
      }
      ++issued;
      __syncwarp();
    }
  };

  do {
    if (seq >= 0) {
      // ---- one segment: this CTA's pages of (seq, head) -------------------------------------
      const int len = sched.length(seq);
      if (warp == 0 && (!kKeep || feed_done)) {
        if (lane == 0) load_q(p, sh, q_tile, seq, head);
        sched.begin(feed, seq, len);
        seg_first = issued;
        feed_done = 0;
      }
      ptx::mbarrier_wait(&sh->q_bar, seg & 1);
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
      if constexpr (Sched::kAhead) {  // the producer may load the next segment's Q now
        __syncwarp();
        if (lane == 0) ptx::mbarrier_arrive(&sh->q_free);
      }
      float o[32][4];
#pragma unroll
      for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
      float row_max = -INFINITY;  // log2 domain, quad-uniform
      float row_sum = 0.f;        // this thread's share of the row's sum
      int npages = 0;
      int sentinel_stage = 0;

      // ---- main loop: one page (K tile then V tile) per iteration -------------------------
      for (;;) {
        const int tk = cons;
        const int sk = tk % kStages;
        if (warp == 0) produce(tk + 2);
        ptx::mbarrier_wait(&sh->full[sk], (tk / kStages) & 1);
        const int logical = sh->tile_page[sk];
        if (logical < 0) {
          // Drained ring: the sentinel's slot goes back to the producer at once. kKeep: the
          // warp merge uses it first (the next segment's tiles may fill the other stages).
          if constexpr (!kKeep) {
            __syncwarp();
            if (lane == 0) ptx::mbarrier_arrive(&sh->empty[sk]);
          }
          sentinel_stage = sk;
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
        if (lane == 0) ptx::mbarrier_arrive(&sh->empty[sk]);

        const int tv = tk + 1;
        const int sv = tv % kStages;
        if (warp == 0) produce(tv + 2);
        ptx::mbarrier_wait(&sh->full[sv], (tv / kStages) & 1);
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
        if (lane == 0) ptx::mbarrier_arrive(&sh->empty[sv]);
        cons = tk + 2;
        ++npages;
      }

      if (npages > 0) {
        // ---- epilogue: merge the 4 warps in shared memory (no TMA writes the area) ----------
        // Drained ring: stages 0-1 with the mma's 8 rows per warp; kKeep: the sentinel's
        // stage with the group's 6.
        constexpr int kRows = kKeep ? kGroup : 8;
        uint8_t* area = smem + (kKeep ? sentinel_stage * kTileBytes : 0);
        const bool alone = npages == pages_of(len);
        if (tid == 0) sched.end_segment(npages, alone);
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
        __syncthreads();  // every warp is past its last ldmatrix
        if (kRows == 8 || g < kRows) {
          float* dst = reinterpret_cast<float*>(area) + (warp * kRows + g) * kMergeStride + 2 * t;
#pragma unroll
          for (int j = 0; j < 32; ++j) {
            *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[j][0], o[j][1]);
          }
          float* merge_ml = reinterpret_cast<float*>(area) + kWarps * kRows * kMergeStride;
          if (t == 0) {
            merge_ml[(warp * 8 + g) * 2] = row_max;
            merge_ml[(warp * 8 + g) * 2 + 1] = row_sum;
          }
        }
        __syncthreads();
        // The sequence and slot again from shared memory: holding them in registers across
        // the main loop costs the loop some.
        // ---- the result, then the arrival: the CTA that completes the group merges --------
        sched.template finish<kRows>(area, sh->seq, npages, alone, merge);
        // The warp merge and the weights wrote ring stages and the Q tile through the generic
        // proxy; the next segment's TMA writes them (the argmax in next synchronises).
        ptx::fence_proxy_async_shared();
      }
      if constexpr (kKeep) {  // the sentinel's stage back to the producer
        __syncthreads();
        if (lane == 0) ptx::mbarrier_arrive(&sh->empty[sentinel_stage]);
      }
    }
  } while (sched.next(seq));
}

template <int kHeadsKv>
__device__ __forceinline__ void decode(const KernelParams& p) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int tid = threadIdx.x;
  const int batch = p.batch_size;
  const int units = Schedule::work_units<kHeadsKv>(p);
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
  DecodeShared* sh = reinterpret_cast<DecodeShared*>(smem + kBarOffset);
  int* tmp = reinterpret_cast<int*>(smem + kTmpOffset);
  const Schedule sched{p, sh, tmp, p.ptr_multi_ctas_kv_counter, batch, units, unit,
                       head, tid, warp, lane};
  GroupMerge merge{p, smem, &sh->merge_bar, 0u, tid, warp, lane};

  // ---- barrier init -----------------------------------------------------------------------
  if (tid == 0) {
    ptx::prefetch_tensormap(&p.tma_q);
    ptx::prefetch_tensormap(&p.tma_k);
    ptx::prefetch_tensormap(&p.tma_v);
    for (int i = 0; i < kStages; ++i) {
      ptx::mbarrier_init(&sh->full[i], 1);
      ptx::mbarrier_init(&sh->empty[i], kWarps);
    }
    ptx::mbarrier_init(&sh->q_bar, 1);
    ptx::mbarrier_init(&sh->merge_bar, 1);
    ptx::mbarrier_init(&sh->q_free, kWarps);
    ptx::fence_mbarrier_init();
  }
  // Rows 6 and 7 of each Q box are padding rows of the mma; TMA writes rows 0-5 only.
  if (tid < kBoxesPerTile * 16) {
    reinterpret_cast<uint4*>(q_tile + (tid >> 4) * 1024 + kGroup * 128)[tid & 15] =
        make_uint4(0, 0, 0, 0);
  }

  // ---- static or stealing: every CTA decides the same from the lengths --------------------
  // Warp 0 loads the static plan's first page-table entries while the lengths are read: their
  // round trip is off the first page's path.
  StaticFeed sfeed;
  if (warp == 0) StaticPlan::prefetch(p, sfeed, batch, units, unit, lane);
  const int len_t = batch <= kMaxRanked && tid < batch ? p.ptr_seq_lens_kv[tid] : 0;
  const int len0 = p.ptr_seq_lens_kv[0];
  const bool equal = batch <= kMaxRanked && !__syncthreads_or(tid < batch && len_t != len0);
  StaticSchedule<kHeadsKv> st{p, sh, unit, head, tid, 0, 0};
  if (!equal || !st.init(len0)) {
    if (tid == 0) sched.enter();
    Feed feed;
    feed.lane = lane;
    feed.claim = 0;
    stream_segments(p, sched, feed, merge, smem, sh, sched.first(len_t), head, tid, warp, lane);
    sched.drain(merge);
    sched.leave();
    return;
  }
  stream_segments(p, st, sfeed, merge, smem, sh, st.first(), head, tid, warp, lane);
}

// ---- entry -------------------------------------------------------------------------------------
// The name manifests pin (geometry.json); the parameter block, grid, block and shared memory
// are the op's.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_decode_sm90a_bf16_q24kv4d256p64(const __grid_constant__ KernelParams p) {
  decode<4>(p);
}

// One rank of two in tensor parallel: 12 query heads over its 2 KV heads, the pack's Q, K/V
// and O maps over that rank's heads (grid.y = 2). Not yet run on a device.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_decode_sm90a_bf16_q12kv2d256p64(const __grid_constant__ KernelParams p) {
  decode<2>(p);
}

}  // namespace kernrt::attention
