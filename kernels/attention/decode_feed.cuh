// Warp 0's page feed for one (sequence, KV head) segment of the sm_90a decode kernel: chunks
// of kChunkPages pages handed out by an atomic counter shared by every CTA working on the
// same (sequence, head), with the page-table entries of a chunk loaded one per lane.
//
// Deliberately does not check: that page-table entries are inside the pool the K/V
// tensormaps span (the kernel trusts the table), or that the counter starts at zero (the
// last CTA of the head puts it back at the end of a launch).
#pragma once

#include <cstdint>

#include "attention/decode_shape.cuh"

namespace kernrt::attention {

// Warp 0's view of the work: the current and the next claimed chunk (page indices one per
// lane), and lane 0's pending claim of the chunk after them. A CTA's chunks increase, so a
// chunk past the end means every later one is too.
struct Feed {
  const int32_t* table;  // this sequence's page-table row
  int* claims;           // per-(seq, head) chunk counter
  int pages;             // pages of the sequence
  int cur_chunk, cur_n, cur_pos, cur_pg;
  int nxt_chunk, nxt_n, nxt_pg;
  int claim;             // lane 0: the chunk its outstanding atomicAdd claimed
  int lane;

  __device__ __forceinline__ int chunk_len(int c) const {
    return max(0, min(kChunkPages, pages - c * kChunkPages));
  }
  __device__ __forceinline__ int load(int c, int n) const {
    return lane < n ? table[c * kChunkPages + lane] : 0;
  }
  // Two chunks with one atomic (one round trip before the first page), the third right after.
  __device__ __forceinline__ void init(const int32_t* row, int* counter, int n_pages) {
    table = row;
    claims = counter;
    pages = n_pages;
    int first = 0;
    if (lane == 0) first = atomicAdd(claims, 2);
    first = __shfl_sync(0xffffffffu, first, 0);
    cur_chunk = first;
    cur_n = chunk_len(first);
    cur_pos = 0;
    cur_pg = load(first, cur_n);
    nxt_chunk = first + 1;
    nxt_n = chunk_len(nxt_chunk);
    nxt_pg = load(nxt_chunk, nxt_n);
    if (nxt_n > 0 && lane == 0) claim = atomicAdd(claims, 1);
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
      if (nxt_n > 0 && lane == 0) claim = atomicAdd(claims, 1);
    }
    phys = __shfl_sync(0xffffffffu, cur_pg, cur_pos);
    return cur_chunk * kChunkPages + cur_pos++;
  }
};

}  // namespace kernrt::attention
