// The work schedule of one CTA of the sm_90a decode kernel: which sequence it starts on, which
// it joins when its sequence runs dry, its arrival at a group, its part in the final merges,
// and its exit. The kernel (attention_decode.cu) calls
//   first -> [begin, end_segment, finish (result, then arrive), next]... -> drain -> leave
// and streams pages in between (decode_feed.cuh); the merges themselves are decode_merge.cuh.
//
// State: CTA-shared in DecodeShared (thread 0 decides, everyone reads after a __syncthreads);
// across CTAs in the pack's counter scratch, 24 ints per sequence b (decode_shape.cuh): per
// head h, pages whose results are counted (done), pages claimed (claim), partial slots handed
// out (alloc) and final-merge parts claimed (slice); and one word per head in sequence 0's row
// (bits 0-7 CTAs started, 8-15 CTAs finished). Every method is called by the whole CTA.
// Waiting between CTAs happens only in drain (see there); the last CTA of a head to leave
// puts the head's counters back to zero for the next launch or graph replay.
// Deliberately does not check: that the counters were zero before the first launch, or that
// the scratch holds the slots and counters the pack names (the generator sizes them).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention/decode_merge.cuh"
#include "attention/decode_shape.cuh"
#include "attention/params.h"
#include "common/block.cuh"
#include "common/ptx.cuh"

namespace kernrt::attention {

// Pages of a sequence of `len` tokens (0 for an empty one, len <= 0).
__device__ __forceinline__ int pages_of(int len) { return (max(len, 0) + kPage - 1) / kPage; }

struct Schedule {
  const KernelParams& p;
  DecodeShared* sh;
  int* tmp;       // 16 ints of reduction scratch
  int* counters;  // the pack's counter scratch
  int batch, units, unit, head;
  int tid, warp, lane;

  using FeedT = Feed;
  static constexpr bool kKeepsStage = false;  // segment flow (attention_decode.cu)
  static constexpr bool kAhead = false;

  // U = min(CTAs in the grid's x-z plane, 2 per SM, partial slots, 128) work units per KV head.
  // The workers are the first 4U blocks in launch order, head = linear / U, so the block
  // scheduler spreads them over the SMs (taken from blockIdx.x alone, half the SMs got two at
  // batch 1 and half none); the rest leave at once.
  template <int kHeadsKv>
  __device__ static __forceinline__ int work_units(const KernelParams& p) {
    const int grid_units = static_cast<int>(gridDim.x * gridDim.z);
    return min(min(grid_units, kCtasPerSm * ptx::nsmid() / kHeadsKv),
               min(p.max_num_ctas_kv, kMaxUnits));
  }

  // ---- first ---------------------------------------------------------------------------------
  // Thread 0, at barrier init: no sequence yet, and this CTA counted as started.
  __device__ __forceinline__ void enter() const {
    sh->seq = -1;  // stays -1 for a unit the start shares leave over: it joins at once
    atomicAdd(counters + kHeadAt + head, kStarted);
  }

  // The first sequence (-1: none, join at once), and zeros for empty sequences (sequence b by
  // unit b % U). Up to U sequences get consecutive units in proportion to their pages; beyond,
  // unit u starts at sequence u * B / U.
  // `len_t` is this thread's length (sequence tid; 0 past the batch), which the kernel read
  // for the choice of schedule; used only when batch <= kMaxRanked.
  __device__ __forceinline__ int first(int len_t) const {
    if (batch <= kMaxRanked) {
      const int pages_t = tid < batch ? pages_of(len_t) : 0;
      if (tid < batch && len_t <= 0 && tid % units == unit) zero_rows(tid);
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
        if (tid < batch && unit >= start && unit < start + n) sh->seq = tid;
      } else if (tid == 0) {
        sh->seq = static_cast<int>(static_cast<int64_t>(unit) * batch / units);
      }
    } else {
      for (int b = tid; b < batch; b += kThreads) {
        if (b % units == unit && p.ptr_seq_lens_kv[b] <= 0) zero_rows(b);
      }
      if (tid == 0) sh->seq = static_cast<int>(static_cast<int64_t>(unit) * batch / units);
    }
    __syncthreads();
    return sh->seq;
  }

  __device__ __forceinline__ int length(int seq) const { return p.ptr_seq_lens_kv[seq]; }

  // Warp 0 at a segment's start: the page feed of (seq, head), claims from its counter.
  __device__ __forceinline__ void begin(Feed& feed, int seq, int len) const {
    feed.init(p.ptr_page_idx_kv + static_cast<int64_t>(seq) * p.max_num_pages_per_seq_kv,
              counters + seq * kCounterStride + kClaimAt + head, pages_of(len));
  }

  // Pipelined segments are for static schedules only (decode_static.cuh).
  __device__ __forceinline__ bool advance(Feed&) const { return false; }

  // ---- a segment's end -----------------------------------------------------------------------
  // Thread 0, once the segment's pages are streamed: their count, and this CTA's partial slot
  // in the group unless it did every page (`alone`: it writes the output itself, so the group's
  // partial count stays 0, and 0 partials make no merge part). One slot per CTA and sequence:
  // a CTA never returns to a sequence it left, whose pages were gone.
  __device__ __forceinline__ void end_segment(int npages, bool alone) const {
    sh->pages = npages;
    if (!alone) sh->slot = atomicAdd(counters + sh->seq * kCounterStride + kAllocAt + head, 1);
  }

  // The segment's result from the warp merge in `area` (rows per warp R), then the arrival.
  template <int R>
  __device__ __forceinline__ void finish(const uint8_t* area, int seq, int npages, bool alone,
                                         GroupMerge& merge) const {
    write_segment<R>(p, area, seq, sh->slot, head, alone, tid);
    arrive(seq, npages, alone, merge);
  }

  // After the segment's result is written: counts this CTA's pages; the CTA whose pages
  // complete the group claims and merges parts of its final merge.
  __device__ __forceinline__ void arrive(int seq, int npages, bool alone, GroupMerge& merge) const {
    if (alone) {
      // Nothing to publish: the count only tells the other CTAs the group is complete.
      if (tid == 0) atomicAdd(counters + seq * kCounterStride + kDoneAt + head, npages);
      return;
    }
    int* ctr = counters + seq * kCounterStride;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const int done = sh->pages;
      sh->flag = atomicAdd(ctr + kDoneAt + head, done) + done == pages_of(p.ptr_seq_lens_kv[seq]);
    }
    __syncthreads();
    const bool completes = sh->flag;
    __syncthreads();  // every thread has read the flag before merge_claimed reuses it
    if (completes) {
      __threadfence();
      merge_claimed(seq, merge);
    }
  }

  // ---- next ----------------------------------------------------------------------------------
  // The sequence with the most unclaimed pages into `seq`, or false once none has one (claims
  // are never handed back, so once none is left none comes back). Ties go to the first
  // sequence from this unit's own start point on, so that CTAs running dry together spread
  // over equally long sequences instead of all joining the lowest-numbered one.
  __device__ __forceinline__ bool next(int& seq) const {
    const int from = static_cast<int>(static_cast<int64_t>(unit) * batch / units);
    int best = 0, best_at = batch;  // best_at: the sequence's place counted from `from`
    for (int b = tid; b < batch; b += kThreads) {
      const int* ctr = counters + b * kCounterStride;
      const int left = (pages_of(p.ptr_seq_lens_kv[b]) + kChunkPages - 1) / kChunkPages -
                       __ldcg(ctr + kClaimAt + head);
      const int at = b >= from ? b - from : b - from + batch;
      if (left > best || (left == best && left > 0 && at < best_at)) {
        best = left;
        best_at = at;
      }
    }
    const int at = block::argmax<kWarps>(best, best_at, tmp, warp, lane);
    if (at >= batch) return false;
    seq = at + from < batch ? at + from : at + from - batch;
    if (tid == 0) sh->seq = seq;
    __syncthreads();  // the argmax scratch and the sequence before their next use
    return true;
  }

  // ---- drain ---------------------------------------------------------------------------------
  // No stream work left: one pass over the head's counters decides. Claim parts of a complete
  // group's final merge; else, if waiting is safe, claim a part of a still-streaming group's
  // merge ahead and wait for it (merge_ahead), or just wait while a group streams; else leave
  // (the claimers finish the merges). Waiting is safe only once every CTA of the head has
  // started: then each group completes (its pages are with running CTAs) and its completer
  // merges whatever parts are unclaimed. The counters are read in one round trip: at the end
  // of a launch each round trip from the last arrival to the last exit is on the critical path.
  __device__ __forceinline__ void drain(GroupMerge& merge) const {
    for (;;) {
      int ready = 0, ready_seq = batch, ahead = 0, ahead_seq = batch;
      bool streaming = false;
      if (tid == 0) sh->flag = (__ldcg(counters + kHeadAt + head) & 0xff) == units;
      for (int b = tid; b < batch; b += kThreads) {
        const int pages_b = pages_of(p.ptr_seq_lens_kv[b]);
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
      const bool may_wait = sh->flag;
      // Also orders every read of the flag and the argmax scratch before their next use.
      const bool any_streaming = __syncthreads_or(streaming);
      if (help < batch) {
        __threadfence();
        merge_claimed(help, merge);
        continue;
      }
      if (!may_wait || !any_streaming) break;
      if (early < batch && merge_ahead(early, merge)) continue;
      __nanosleep(256);
    }
  }

  // ---- leave ---------------------------------------------------------------------------------
  // The last CTA of the head to leave puts the head's counters back to zero.
  __device__ __forceinline__ void leave() const {
    if (tid == 0) {
      sh->flag = ((atomicAdd(counters + kHeadAt + head, kFinished) >> 8) & 0xff) + 1 == units;
    }
    __syncthreads();
    if (sh->flag) {
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

  // ---- merge claims --------------------------------------------------------------------------
  // Zeros for the 6 query-head rows of (seq, head): the output of an empty sequence.
  __device__ __forceinline__ void zero_rows(int seq) const {
    uint4* out = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.ptr_o) +
                                          (static_cast<int64_t>(seq) * p.num_hidden_elts_o +
                                           head * kGroup * kHeadDim));
    for (int i = 0; i < kGroup * kHeadDim * 2 / 16; ++i) out[i] = make_uint4(0, 0, 0, 0);
  }

  // Claims parts of the final merge of (seq, head), a complete group, until none is left and
  // merges each.
  __device__ __forceinline__ void merge_claimed(int seq, GroupMerge& merge) const {
    int* ctr = counters + seq * kCounterStride;
    const int n = __ldcg(ctr + kAllocAt + head);
    const int parts = merge_parts(n);
    for (;;) {
      if (tid == 0) sh->flag = atomicAdd(ctr + kSliceAt + head, 1) & 0xff;
      __syncthreads();
      const int part = sh->flag;
      if (part >= parts) break;
      merge.part(seq, head, n, parts, part);
      if (part == parts - 1) break;  // parts go out in order: none is left after the last
    }
    __syncthreads();  // every thread has read the flag
  }

  // Claims a part of the final merge of (seq, head) while the group still streams, waits for
  // the group to complete and merges the part: the merge then starts one poll after the last
  // arrival, not after the arrival's claim round trips. Claims are indices: which part one
  // means (the whole group, or a query-head row) is known once the group is complete and its
  // partials counted; a claim past the parts merges nothing. Only when waiting is safe (see
  // drain). Returns whether the claim was one of the parts.
  __device__ __forceinline__ bool merge_ahead(int seq, GroupMerge& merge) const {
    int* ctr = counters + seq * kCounterStride;
    if (tid == 0) {
      const int row = atomicAdd(ctr + kSliceAt + head, 1) & 0xff;
      int n = 0;
      if (row < kMergeSlices) {
        const int pages = pages_of(p.ptr_seq_lens_kv[seq]);
        while (__ldcg(ctr + kDoneAt + head) != pages) __nanosleep(32);
        __threadfence();
        n = __ldcg(ctr + kAllocAt + head);
      }
      sh->flag = row;
      sh->merge_n = n;
    }
    __syncthreads();
    const int row = sh->flag;
    const int n = sh->merge_n;
    __syncthreads();  // both read before either is reused
    const int parts = merge_parts(n);
    if (row >= parts) return false;
    merge.part(seq, head, n, parts, row);
    return true;
  }
};

}  // namespace kernrt::attention
