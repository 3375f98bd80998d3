// The static schedule of the sm_90a decode kernel: when every sequence of the batch has the
// same length and an even split of the pages over the units is short, each CTA knows its
// pages from (batch, units, its unit, the length) alone, so it streams them without a claim,
// reads their page-table entries before the lengths arrive, and leaves without the stealing
// schedule's drain and exit counters. Kernel call order as for `Schedule`
// (attention_decode.cu): first -> [begin, end_segment, finish, next]...; `advance` is the
// producer's step into the unit's next segment, a segment ahead of the consumers.
//
// Plans (all CTA-uniform, decided by every CTA from the same lengths):
//   split  (batch <= units): k = min(units / batch, kWholeMergeMax, pages) units per
//          sequence; unit u takes pages r, r + k, r + 2k, ... of sequence u / k (r = u % k),
//          so its first page does not depend on the length. k = 1: the unit writes the
//          output; else a partial in slot r, and the last of the k to arrive merges the
//          group whole (k <= 16 partials, decode_merge.cuh) and puts the group's counter
//          back to zero. Units u >= k * batch leave.
//   whole  (batch > units): unit u takes sequences u, u + units, u + 2 units, ... whole,
//          each written by the unit itself (no partial, no counter).
// Taken when the busiest unit has at most kStaticMaxPages pages and at most one page more
// than an even split of all pages over the units; else the stealing schedule runs.
// Measured against the stealing schedule in one process: 4 x 8192 43.8 against 48.0 us,
// 32 x 2048 71.9 against 80.7, 128 x 1024 141.2 against 157.6 (validation/attention/notes.md).
//
// State: the pack's counter scratch, only `done` of (sequence, head) in the split plan with
// k >= 2 (back to zero when the group's merge starts); no other counter is touched, so the
// stealing schedule finds every counter at zero in the next launch either way.
// Deliberately does not check: that the counters were zero at launch (the stealing
// schedule's last CTA and the split plan's merger leave them so), or that the page table
// holds `pages` valid entries per sequence (the kernel trusts the table).
#pragma once

#include <cstdint>

#include "attention/decode_merge.cuh"
#include "attention/decode_schedule.cuh"
#include "attention/decode_shape.cuh"
#include "attention/params.h"

namespace kernrt::attention {

// The busiest unit's pages up to which the static plans may run: per-CTA costs (claims,
// partials, merges) dominate short work; long work keeps the stealing schedule, whose
// page-by-page balance absorbs the SMs' unequal read rates (validation/attention/notes.md).
// 32 pages: one page-table entry per lane of warp 0 for a segment.
constexpr int kStaticMaxPages = 32;

// Warp 0's page feed for a static segment: pages first, first + stride, ... (count of them),
// their page-table entries one per lane, loaded before the segment (at the kernel's start for
// the first segment, a segment ahead for the next).
struct StaticFeed {
  int entry, ahead;          // lane i: physical page of the i-th page of the segment / the next
  int seq;                   // the segment's sequence
  int first, stride, count;  // its pages
  int pos;                   // the next one to hand out

  // Lane i's page-table entry for page f0 + st * i of sequence s (0 past the table's row).
  __device__ static __forceinline__ int load(const KernelParams& p, int s, int f0, int st,
                                             int lane) {
    const int pg = f0 + st * lane;
    return pg < p.max_num_pages_per_seq_kv
               ? p.ptr_page_idx_kv[static_cast<int64_t>(s) * p.max_num_pages_per_seq_kv + pg]
               : 0;
  }
  // Next (logical page, physical page), or logical -1 when the segment's pages are gone.
  __device__ __forceinline__ int next(int& phys) {
    if (pos == count) return -1;
    phys = __shfl_sync(0xffffffffu, entry, pos);
    return first + stride * pos++;
  }
};

// What the kernel's start needs before the lengths arrive.
struct StaticPlan {
  // The split plan's units per sequence before the length is known (the whole plan: 0):
  // what the kernel's start loads page-table entries for.
  __device__ static __forceinline__ int split_of(int batch, int units) {
    return batch <= units ? min(units / batch, kWholeMergeMax) : 0;
  }

  // Warp 0 at the kernel's start, before the lengths arrive: the first segment's entries
  // (and, in the whole plan, the second's), for split_of's k.
  __device__ static __forceinline__ void prefetch(const KernelParams& p, StaticFeed& f,
                                                  int batch, int units, int unit, int lane) {
    f.count = f.pos = 0;
    const int k = split_of(batch, units);
    if (k > 0) {
      f.entry = unit < k * batch ? StaticFeed::load(p, unit / k, unit % k, k, lane) : 0;
    } else {
      f.entry = StaticFeed::load(p, unit, 0, 1, lane);
      f.ahead = unit + units < batch ? StaticFeed::load(p, unit + units, 0, 1, lane) : 0;
    }
  }
};

template <int kHeadsKv>
struct StaticSchedule {
  const KernelParams& p;
  DecodeShared* sh;
  int unit, head, tid;
  int len;  // every sequence's length
  int k;    // split plan: units per sequence; whole plan: 0

  using FeedT = StaticFeed;
  // Segment flow (attention_decode.cu): the warp merge in the sentinel's stage, the producer
  // starts the next segment (advance). A variant that drained the ring between segments
  // instead made ptxas spill 24 bytes (nvcc 13.0) and was dropped.
  static constexpr bool kKeepsStage = true;
  static constexpr bool kAhead = true;

  // Read again where used, from the parameter block: fewer live registers across the loop.
  __device__ __forceinline__ int batch() const { return p.batch_size; }
  __device__ __forceinline__ int units() const { return Schedule::work_units<kHeadsKv>(p); }
  __device__ __forceinline__ int pages() const { return (len + kPage - 1) / kPage; }
  __device__ static __forceinline__ int split_of(int batch, int units) {
    return StaticPlan::split_of(batch, units);
  }

  // Whether a static plan runs for sequences of `len0` tokens each (the caller checked that
  // every length equals len0); sets len and k. The same answer in every CTA.
  __device__ __forceinline__ bool init(int len0) {
    len = len0;
    const int batch = this->batch(), units = this->units();
    const int pages = (max(len0, 0) + kPage - 1) / kPage;
    if (pages < 1) return false;
    int busiest;
    if (batch <= units) {
      k = min(split_of(batch, units), pages);
      busiest = (pages + k - 1) / k;
    } else {
      k = 0;
      busiest = (batch + units - 1) / units * pages;
    }
    return busiest <= kStaticMaxPages &&
           static_cast<int64_t>(busiest - 1) * units <= static_cast<int64_t>(batch) * pages;
  }

  // ---- first ---------------------------------------------------------------------------------
  // The unit's first sequence, or -1: it has none and leaves.
  __device__ __forceinline__ int first() const {
    const int s = k > 0 ? (unit < k * batch() ? unit / k : -1) : unit;
    if (tid == 0) sh->seq = s;
    return s;
  }

  __device__ __forceinline__ int length(int) const { return len; }

  // Warp 0 at a segment's start: its pages and their entries (the prefetched ones unless the
  // length cut k below split_of's; the whole plan's later segments from `ahead`, which then
  // takes the segment after).
  __device__ __forceinline__ void begin(StaticFeed& f, int seq, int) const {
    const int lane = threadIdx.x & 31;
    f.seq = seq;
    f.pos = 0;
    if (k > 0) {
      f.first = unit % k;
      f.stride = k;
      f.count = (pages() - f.first + k - 1) / k;
      if (k != split_of(batch(), units())) f.entry = StaticFeed::load(p, seq, f.first, k, lane);
    } else {
      f.first = 0;
      f.stride = 1;
      f.count = pages();
      if (seq != unit) {
        const int s2 = seq + units();
        f.entry = f.ahead;
        if (s2 < batch()) f.ahead = StaticFeed::load(p, s2, 0, 1, lane);
      }
    }
  }

  // Warp 0, the producer of pipelined segments, once the current segment's pages are handed
  // out: moves the feed to the unit's next segment (whole plan), loading the entries of the
  // one after; false when there is none. The consumers follow with `next`.
  __device__ __forceinline__ bool advance(StaticFeed& f) const {
    if (k > 0 || f.seq + units() >= batch()) return false;
    begin(f, f.seq + units(), len);
    return true;
  }

  // ---- a segment's end -----------------------------------------------------------------------
  // Thread 0: the partial slot (the split plan's r; unused when the unit wrote the output).
  __device__ __forceinline__ void end_segment(int, bool) const { sh->slot = k > 0 ? unit % k : 0; }

  // The segment's result from the warp merge in `area` (rows per warp R), then the arrival.
  template <int R>
  __device__ __forceinline__ void finish(const uint8_t* area, int seq, int npages, bool alone,
                                         GroupMerge& merge) const {
    write_segment<R>(p, area, seq, sh->slot, head, alone, tid);
    arrive(seq, npages, alone, merge);
  }

  // After the segment's result is written. The split plan's k partials of a group: the last
  // to arrive puts the counter back to zero (every other arrival is counted by then) and
  // merges the group whole. No TMA is in flight: the split plan has one segment per unit.
  __device__ __forceinline__ void arrive(int seq, int, bool alone, GroupMerge& merge) const {
    if (alone) return;
    int* done = p.ptr_multi_ctas_kv_counter + seq * kCounterStride + kDoneAt + head;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const bool last = atomicAdd(done, 1) == k - 1;
      if (last) *reinterpret_cast<volatile int*>(done) = 0;
      sh->flag = last;
    }
    __syncthreads();
    const bool last = sh->flag;
    __syncthreads();  // every thread has read the flag
    if (last) {
      __threadfence();
      merge.part(seq, head, k, merge_parts(k), 0);
    }
  }

  // ---- next ----------------------------------------------------------------------------------
  // The whole plan's next sequence of this unit; the split plan has one.
  __device__ __forceinline__ bool next(int& seq) const {
    if (k > 0 || seq < 0 || seq + units() >= batch()) return false;
    seq += units();
    __syncthreads();  // every thread read the last segment's sequence
    if (tid == 0) sh->seq = seq;
    return true;
  }
};

}  // namespace kernrt::attention
