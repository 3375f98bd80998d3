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

// Warp 0's view of the work: the current chunk (page indices one per lane) and one more:
// claimed by lane 0's atomicAdd when the current chunk starts, settled (and its table entries
// loaded) at the current chunk's second page, so each CTA holds at most two chunks and the
// last ones spread finely over the CTAs. A CTA's chunks increase, so a chunk past the end
// means every later one is too.
struct Feed {
  const int32_t* table;  // this sequence's page-table row
  int* claims;           // per-(seq, head) chunk counter
  int pages;             // pages of the sequence
  int cur_chunk, cur_n, cur_pos, cur_pg;
  int nxt_chunk, nxt_n, nxt_pg;
  int claim;             // lane 0: the chunk its outstanding atomicAdd claimed
  bool pending;          // a claim is in flight
  int lane;

  __device__ __forceinline__ int chunk_len(int c) const {
    return max(0, min(kChunkPages, pages - c * kChunkPages));
  }
  __device__ __forceinline__ int load(int c, int n) const {
    return lane < n ? table[c * kChunkPages + lane] : 0;
  }
  __device__ __forceinline__ void start_chunk(int c) {
    cur_chunk = c;
    cur_n = chunk_len(c);
    cur_pos = 0;
    cur_pg = load(c, cur_n);
    pending = cur_n > 0;
    if (pending && lane == 0) claim = atomicAdd(claims, 1);
  }
  // The first chunk costs one round trip before the first page.
  __device__ __forceinline__ void init(const int32_t* row, int* counter, int n_pages) {
    table = row;
    claims = counter;
    pages = n_pages;
    int first = 0;
    if (lane == 0) first = atomicAdd(claims, 1);
    start_chunk(__shfl_sync(0xffffffffu, first, 0));
    nxt_n = 0;
  }
  // Next (logical page, physical page) of this CTA, or logical -1 when the work is gone.
  __device__ __forceinline__ int next(int& phys) {
    if (cur_pos == cur_n) {
      if (nxt_n == 0) return -1;
      cur_chunk = nxt_chunk;  // its table entries were loaded a page or more ago
      cur_n = nxt_n;
      cur_pg = nxt_pg;
      cur_pos = 0;
      nxt_n = 0;
      pending = true;
      if (lane == 0) claim = atomicAdd(claims, 1);
    }
    if (pending && cur_pos == min(1, cur_n - 1)) {
      const int c = __shfl_sync(0xffffffffu, claim, 0);
      nxt_chunk = c;
      nxt_n = chunk_len(c);
      nxt_pg = load(c, nxt_n);
      pending = false;
    }
    phys = __shfl_sync(0xffffffffu, cur_pg, cur_pos);
    return cur_chunk * kChunkPages + cur_pos++;
  }
};

}  // namespace kernrt::attention
