// The work list of the sm_90a prefill / verify attention kernel: which items exist, in which
// order the CTAs take them, and how many KV chunks each unit is split into.
//
// A unit is (sequence b, KV head h, row block): up to 21 query tokens x the 6 query heads of
// h. Block k of a sequence with q_len rows covers tokens [21k, min(21k + 21, q_len)); its keys
// end at min(kv_len, kv_len - q_len + last token + 1) (bottom-right causal), i.e. P pages.
// Every unit has S item slots (chunks c = 0..S-1, pages [c P / Su, (c+1) P / Su) for
// Su = min(S, max(P, 1)) non-empty chunks; chunks c >= Su are skipped). Item order: sequences
// by decreasing page count, then blocks from the last (most keys) to the first, then KV head,
// then chunks: within a sequence the items come in decreasing size, so list scheduling ends on
// small ones (2048/2048: 60 page-times instead of 64 with KV head before block, simulated),
// and the CTAs running at one time read the same keys of one sequence in near lockstep.
//
// S is chosen once per launch, identically by every CTA, from the units' page counts: the
// smallest S in 1..32 (units x S <= partial slots) minimising the makespan estimate
// max(largest item, ceil(N / G) * W / N) (N items, W their pages plus a fixed cost per item,
// G CTAs). Splitting pays when units are few or equal (a 32k prefix, verify); with >= 4 G
// units S = 1 without rating.
//
// Deliberately does not check: batch <= kMaxSeqs (the kernel traps above it; the generator
// refuses such capacities), or that cu_seqlens_q is monotone and seq_lens >= 0 (a negative
// row count gives the sequence no items, a KV length <= 0 gives its rows zeros).
#pragma once

#include <cstdint>

#include "attention/params.h"
#include "attention/prefill_shape.cuh"

namespace kernrt::attention::prefill {

__device__ __forceinline__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Pages of keys that block `blk` of a sequence sees.
__device__ __forceinline__ int block_pages(int q_len, int kv_len, int blk) {
  const int last = min(kBlockTokens * blk + kBlockTokens, q_len);
  const int end = min(kv_len, kv_len - q_len + last);
  return end > 0 ? ceil_div(end, kPage) : 0;
}

struct Schedule {
  int* scalars;    // [0] items N, [1] chunks per unit S, [2] units, [3] batch
  int16_t* order;  // sequences in work order
  int* prefix;     // items before each position of `order`; prefix[batch] = N

  __device__ int items() const { return scalars[0]; }
  __device__ int split() const { return scalars[1]; }
  __device__ int units() const { return scalars[2]; }

  // Builds the tables; every thread of the block calls it. `tmp` is >= 4 * kMaxSeqs + 64 ints
  // of shared memory free until the return.
  __device__ void build(const KernelParams& p, int* tmp, int tid) {
    const int batch = p.batch_size;
    if (batch > kMaxSeqs) __trap();
    int* qlen = tmp;
    int* kvlen = tmp + kMaxSeqs;
    int* nblk = tmp + 2 * kMaxSeqs;
    int* key = tmp + 3 * kMaxSeqs;
    int* red = tmp + 4 * kMaxSeqs;  // reduction words
    const int warp = tid >> 5, lane = tid & 31;
    int units_t = 0;
    if (tid < batch) {
      const int ql = p.ptr_cum_seq_lens_q[tid + 1] - p.ptr_cum_seq_lens_q[tid];
      const int kv = p.ptr_seq_lens_kv[tid];
      const int nb = ql > 0 ? ceil_div(ql, kBlockTokens) : 0;
      qlen[tid] = ql;
      kvlen[tid] = kv;
      nblk[tid] = nb;
      key[tid] = nb > 0 ? (kv > 0 ? ceil_div(kv, kPage) : 0) : -1;
      units_t = kHeadsKv * nb;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) units_t += __shfl_xor_sync(0xffffffffu, units_t, o);
    if (lane == 0) red[warp] = units_t;
    __syncthreads();
    int units = 0;
    for (int w = 0; w < kThreads / 32; ++w) units += red[w];
    // Work order: decreasing page count, ties by index (a rank per sequence).
    if (tid < batch) {
      const int mine = key[tid];
      int rank = 0;
      for (int b = 0; b < batch; ++b) {
        const int other = key[b];
        rank += other > mine || (other == mine && b < tid);
      }
      order[rank] = static_cast<int16_t>(tid);
    }
    // Chunks per unit: lane l of warp 0 rates S = l + 1.
    const int slots = p.max_num_ctas_kv;
    const int ctas = static_cast<int>(gridDim.x);
    if (warp == 0) {
      int best_s = 1;
      if (units > 0 && units < 4 * ctas && 2 * units <= slots) {
        const int s = lane + 1;
        float cost = 3.4e38f;
        if (s * units <= slots) {
          int n = 0, pages = 0, pmax = 0;
          for (int b = 0; b < batch; ++b) {
            const int nb = nblk[b], ql = qlen[b], kv = kvlen[b];
            for (int k = 0; k < nb; ++k) {
              const int pk = block_pages(ql, kv, k);
              n += min(s, max(pk, 1));
              pages += pk;
              pmax = max(pmax, pk);
            }
          }
          const float over = kItemCostPages + (s > 1 ? kSplitCostPages : 0.f);
          const float items = static_cast<float>(kHeadsKv * n);
          const float work = static_cast<float>(kHeadsKv * pages) + over * items;
          const float largest = static_cast<float>(ceil_div(pmax, min(s, max(pmax, 1)))) + over;
          const float waves = static_cast<float>(ceil_div(kHeadsKv * n, ctas));
          cost = fmaxf(largest, waves * work / items);
        }
        // Smallest cost, ties to the smaller S.
        float c = cost;
        int at = s;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          const float c2 = __shfl_xor_sync(0xffffffffu, c, o);
          const int at2 = __shfl_xor_sync(0xffffffffu, at, o);
          if (c2 < c || (c2 == c && at2 < at)) {
            c = c2;
            at = at2;
          }
        }
        best_s = at;
      }
      if (lane == 0) {
        scalars[1] = best_s;
        scalars[2] = units;
        scalars[3] = batch;
      }
    }
    __syncthreads();
    // Items before each position: warp 0 scans 4 positions per lane.
    if (warp == 0) {
      const int s = scalars[1];
      int cnt[4];
      int sum = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * lane + j;
        cnt[j] = k < batch ? kHeadsKv * nblk[order[k]] * s : 0;
        sum += cnt[j];
      }
      int incl = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
      }
      int run = incl - sum;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * lane + j;
        if (k < batch) prefix[k] = run;
        run += cnt[j];
      }
      if (lane == 31) {
        prefix[batch] = incl;
        scalars[0] = incl;
      }
    }
    __syncthreads();
  }

  // Fills `it` for item i < items(); false for a chunk past its unit's non-empty ones.
  __device__ bool decode(const KernelParams& p, int i, ItemInfo& it) const {
    const int batch = scalars[3];
    const int s = scalars[1];
    int lo = 0, hi = batch;  // prefix[lo] <= i < prefix[hi]
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (prefix[mid] <= i) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const int b = order[lo];
    const int j = i - prefix[lo];
    const int q0 = p.ptr_cum_seq_lens_q[b];
    const int ql = p.ptr_cum_seq_lens_q[b + 1] - q0;
    const int kv = p.ptr_seq_lens_kv[b];
    const int nb = ceil_div(ql, kBlockTokens);
    const int us = j / s;
    const int c = j - us * s;
    const int blk = nb - 1 - us / kHeadsKv;
    const int kvh = us % kHeadsKv;
    const int first = kBlockTokens * blk;
    const int pages = block_pages(ql, kv, blk);
    const int su = min(s, max(pages, 1));
    if (c >= su) return false;
    it.seq = b;
    it.kvh = kvh;
    it.tok_abs = q0 + first;
    it.ntok = min(kBlockTokens, ql - first);
    it.lim0 = kv - ql + first + 1;
    it.page0 = c * pages / su;
    it.page1 = (c + 1) * pages / su;
    it.unit = i / s;
    it.nchunks = su;
    it.slot = i;
    it.first_slot = i - c;
    it.kv_len = kv;
    return true;
  }
};

}  // namespace kernrt::attention::prefill
