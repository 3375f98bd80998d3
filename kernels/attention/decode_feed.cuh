// Warp 0's page feed for one (sequence, KV head) segment of the sm_90a decode kernel: pages
// handed out one at a time by an atomic counter shared by every CTA working on the same
// (sequence, head).
//
// A CTA holds as little unissued work as hides the claim: when the K tile of page k is
// issued, the page after it is claimed; when its V tile is issued (half a page later), the
// claim is read and that page's table entry loaded, to be used at the next K tile. So when
// the counter runs dry, a CTA has at most the ring plus one claimed page left, and the CTAs
// of a group end within about one page of each other (three pages with chunk-ahead claims,
// validation/attention/notes.md). A segment starts with two pages from one atomic, so the
// ring fills without waiting for a claim.
//
// Deliberately does not check: that page-table entries are inside the pool the K/V
// tensormaps span (the kernel trusts the table), or that the counter starts at zero (the
// last CTA of the head puts it back at the end of a launch).
#pragma once

#include <cstdint>

#include "attention/decode_shape.cuh"

namespace kernrt::attention {

struct Feed {
  static constexpr int kNone = -1;     // no page: the segment's work is done
  static constexpr int kPending = -2;  // claimed; the claim is read at the V tile
  static constexpr int kUsed = -3;     // the segment's second start page was taken

  const int32_t* table;  // this sequence's page-table row
  int* claims;           // per-(seq, head) page counter
  int pages;             // pages of the sequence
  int page;              // the page the next K tile takes, or kNone / kPending
  int second;            // the second start page (or kNone), until taken (kUsed)
  int pg, second_pg;     // lane 0: their page-table entries (loads in flight until used)
  int claim;             // lane 0: the page its outstanding atomicAdd claimed
  int lane;

  __device__ __forceinline__ int valid(int c) const { return c < pages ? c : kNone; }

  // Two pages from one atomic, their table entries loaded together.
  __device__ __forceinline__ void init(const int32_t* row, int* counter, int n_pages) {
    table = row;
    claims = counter;
    pages = n_pages;
    int c = 0;
    if (lane == 0) c = atomicAdd(claims, 2);
    c = __shfl_sync(0xffffffffu, c, 0);
    page = valid(c);
    second = valid(c + 1);
    if (lane == 0) {
      pg = page >= 0 ? table[page] : 0;
      second_pg = second >= 0 ? table[second] : 0;
    }
  }
  // At a K tile: this CTA's next (logical page, physical page), or logical kNone when the
  // work is gone. Claims the page after it unless the second start page is still there.
  __device__ __forceinline__ int next(int& phys) {
    if (page < 0) return kNone;
    const int now = page;
    phys = __shfl_sync(0xffffffffu, pg, 0);
    if (second != kUsed) {
      page = second;
      pg = second_pg;
      second = kUsed;
    } else {
      if (lane == 0) claim = atomicAdd(claims, 1);
      page = kPending;
    }
    return now;
  }
  // At the V tile of the page `next` returned: reads the claim, loads the page-table entry.
  __device__ __forceinline__ void mid() {
    if (page != kPending) return;
    page = valid(__shfl_sync(0xffffffffu, claim, 0));
    if (lane == 0 && page >= 0) pg = table[page];
  }
};

}  // namespace kernrt::attention
