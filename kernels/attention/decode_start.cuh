// Where the working CTAs ("units", U per KV head) of the sm_90a decode kernel start, and the
// chunks they take without a claim.
//
// Up to U sequences get start shares in proportion to their pages (consecutive units); more
// sequences than units go round robin (unit u starts at sequence u * B / U). Starter r of a
// sequence with n starters takes chunks kStartChunks * r .. kStartChunks * (r + 1) - 1 without
// an atomic, so its first page waits for one page-table load only; the sequence's claim
// counter then hands out chunks from kStartChunks * n on. A CTA joining the sequence later
// recomputes n from the lengths (the same integer arithmetic every CTA does at the start).
//
// Deliberately does not check: that the lengths do not change during a launch (every CTA
// must derive the same shares from them).
#pragma once

#include <cstdint>

#include "attention/decode_shape.cuh"

namespace kernrt::attention {

constexpr int kStartChunks = 2;  // chunks a starter takes without a claim
static_assert(kMaxUnits <= kThreads, "start shares: one thread per sequence");

// Units that start on sequence `threadIdx.x` when batch <= units (<= kThreads): the nearest
// share of the pages, at least 1; if those overshoot the units, one each plus the floor share
// of the rest, which never do. Block-wide; 0 for threads past the batch. Uses tmp[0, 2 kWarps).
__device__ __forceinline__ int start_share(int pages_t, int batch, int units, int* tmp,
                                           int warp, int lane) {
  const bool mine = static_cast<int>(threadIdx.x) < batch;
  const int total = block_sum(pages_t, tmp, warp, lane);
  int n = 0;
  if (mine) {
    const int64_t near =
        total > 0 ? (2 * static_cast<int64_t>(pages_t) * units + total) / (2 * total) : 1;
    n = static_cast<int>(near < 1 ? 1 : near);
  }
  if (block_sum(n, tmp + kWarps, warp, lane) > units && mine) {
    n = 1 + static_cast<int>(static_cast<int64_t>(pages_t) * (units - batch) / total);
  }
  return n;
}

// Round robin (batch > units): the first unit that starts at sequence b, and how many do.
__device__ __forceinline__ int first_unit_rr(int b, int batch, int units) {
  return static_cast<int>((static_cast<int64_t>(b) * units + batch - 1) / batch);
}
__device__ __forceinline__ int starters_rr(int b, int batch, int units) {
  return first_unit_rr(b + 1, batch, units) - first_unit_rr(b, batch, units);
}

}  // namespace kernrt::attention
