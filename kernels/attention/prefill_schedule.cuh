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
// units S = 1 without rating. Tail split (the shipped entry): with G <= units < 4 G the rule
// also rates keeping the first U1 = G floor(units / G) units of the work order unsplit (whole
// waves of one item each) and splitting only the rest in S; it wins where strictly cheaper.
// 1536/32768 (296 units of 489-512 pages): every unit in 4 gives 1184 items, 9 per CTA, each
// with a partial write and a merge share (estimate 1161 page-times); the tail form splits 32
// units (264 + 128 items, estimate 1131) and writes a ninth of the partials.
// Balanced split (kBalanced, balance() below): a verify launch whose units fit one wave may
// instead give each sequence its own chunk count, in proportion to its pages.
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
  int* scalars;    // [0] items N, [1] chunks per split unit S (balanced: the most of any
                   // sequence), [2] units, [3] batch, [4] unsplit units U1 (the first U1
                   // units in work order have one chunk), [6] balanced split (below)
  int16_t* order;  // sequences in work order
  int* prefix;     // units before each position of `order`; prefix[batch] = units
                   // (balanced: items before each position; prefix[batch] = items)

  __device__ int items() const { return scalars[0]; }
  __device__ int split() const { return scalars[1]; }
  __device__ int units() const { return scalars[2]; }

  // The balanced split's lower bound on its estimate, from the pages per KV head of the
  // one-block sequences, the largest of them and the chunks per KV head (G / 4): the
  // largest sequence unsplit, or an even share of the pages split.
  static __device__ __forceinline__ float balance_bound(int pages, int pmax, int budget) {
    return fminf(static_cast<float>(pmax) + kItemCostPages,
                 static_cast<float>(max(ceil_div(pages, budget), 1)) + kItemCostPages +
                     kSplitCostPages);
  }

  // Balanced one-wave split, warp 0 (every lane calls it): when every sequence has at most
  // one row block (<= 21 new rows: verify) and at most G / 4 have one, sequence b gets c_b
  // chunks for each KV head (4 sum c_b <= G: one wave, CTA c runs item c alone), c_b in
  // [1, min(max(P_b, 1), kMaxSplit)], so that the largest chunk max ceil(P_b / c_b) is small:
  // one chunk each, the rest of the G / 4 in proportion to the pages (rounded down), then one
  // more at a time to the sequence whose chunk is largest. Writes c_b to chunks[b] (0 for a
  // sequence without rows) and returns the largest c_b, 0 where the launch does not qualify
  // or cannot beat `beat`, the rated S's estimate (unsplit, its estimate is the longest
  // sequence's pages + 2; split, at least one KV head's pages over G / 4 CTAs + 4); `largest`
  // gets the largest chunk in pages. Equal-S splits leave the longest sequences' chunks
  // larger than the rest: 4 x 8 rows over 150k-250k at S = 16 has 256 items of 146-244
  // pages, two per CTA on 124 CTAs (up to 423 pages where a 244 meets a 179), where this
  // split gives 132 items of 358-391 pages.
  static __device__ __forceinline__ int balance(const int* qlen, const int* kvlen,
                                                const int* nblk, int* chunks, int batch, int ctas,
                                                int lane, float beat, int& largest) {
    constexpr int kPer = kMaxSeqs / 32;  // sequences per lane: b = lane + 32 j
    int pg[kPer], c[kPer];
    bool multi = false;
    int active = 0, pages = 0, pmax = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int b = lane + 32 * j;
      const int nb = b < batch ? nblk[b] : 0;
      multi |= nb > 1;
      active += nb == 1;
      pg[j] = nb == 1 ? block_pages(qlen[b], kvlen[b], 0) : 0;
      pages += pg[j];
      pmax = max(pmax, pg[j]);
    }
    multi = __any_sync(0xffffffffu, multi);
    active = __reduce_add_sync(0xffffffffu, active);
    pages = __reduce_add_sync(0xffffffffu, pages);
    pmax = __reduce_max_sync(0xffffffffu, pmax);
    const int budget = ctas / kHeadsKv;
    largest = 0;
    if (multi || active == 0 || active > budget) return 0;
    if (balance_bound(pages, pmax, budget) >= beat) return 0;
    const int rest = budget - active;
    int used = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int b = lane + 32 * j;
      const bool on = b < batch && nblk[b] == 1;
      const int cap = min(max(pg[j], 1), kMaxSplit);
      c[j] = !on ? 0 : pages > 0 ? min(cap, 1 + static_cast<int>(
                                            static_cast<int64_t>(rest) * pg[j] / pages)) : 1;
      used += c[j];
    }
    used = __reduce_add_sync(0xffffffffu, used);
    for (; used < budget; ++used) {
      // Key: the chunk's pages, then the lower sequence index.
      unsigned best = 0;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int b = lane + 32 * j;
        if (c[j] > 0 && c[j] < min(max(pg[j], 1), kMaxSplit)) {
          best = max(best, static_cast<unsigned>(ceil_div(pg[j], c[j])) << 8 |
                               static_cast<unsigned>(255 - b));
        }
      }
      best = __reduce_max_sync(0xffffffffu, best);
      if (best == 0) break;  // every sequence at its cap
      const int winner = 255 - static_cast<int>(best & 255);
#pragma unroll
      for (int j = 0; j < kPer; ++j) c[j] += lane + 32 * j == winner;
    }
    int most = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int b = lane + 32 * j;
      if (b < batch) chunks[b] = c[j];
      if (c[j] > 0) largest = max(largest, ceil_div(pg[j], c[j]));
      most = max(most, c[j]);
    }
    largest = __reduce_max_sync(0xffffffffu, largest);
    return __reduce_max_sync(0xffffffffu, most);
  }

  // balance() as a call (kLazyBalance): its code sits outside the setup path, which a launch
  // that does not take it then runs without a jump over it. Returns (largest c_b, largest).
  static __device__ __noinline__ int2 balance_far(const int* qlen, const int* kvlen,
                                                  const int* nblk, int* chunks, int batch,
                                                  int ctas, int lane, float beat) {
    int largest = 0;
    const int most = balance(qlen, kvlen, nblk, chunks, batch, ctas, lane, beat, largest);
    return make_int2(most, largest);
  }

  // Builds the tables; every thread of the block calls it. `tmp` is >= 5 * kMaxSeqs + 16 ints
  // of shared memory free until the return. kTailSplit: also rate leaving the first whole
  // waves of units unsplit and splitting only the rest (the unit order is known then);
  // kSplitCap: the largest S rated; kBalanced: also rate the balanced split (balance()) and
  // take it where its estimate is strictly below the rated S's.
  // kLazyBalance: balance() runs only where its bound can beat the rated S, judged from the
  // rating's own page sums (the same numbers balance() derives first), and as a call
  // (balance_far), so that the path of a launch that does not take it stays straight-line.
  template <bool kTailSplit, int kSplitCap, bool kBalanced, bool kLazyBalance>
  __device__ void build(const KernelParams& p, int* tmp, int tid) {
    static_assert(kSplitCap >= 1 && kSplitCap <= kMaxSplit, "one lane of warp 0 per S");
    const int batch = p.batch_size;
    if (batch > kMaxSeqs) __trap();
    int* qlen = tmp;
    int* kvlen = tmp + kMaxSeqs;
    int* nblk = tmp + 2 * kMaxSeqs;
    int* key = tmp + 3 * kMaxSeqs;
    int* red = tmp + 4 * kMaxSeqs;  // reduction words
    int* chunks = tmp + 4 * kMaxSeqs + 16;  // balanced split: chunks per KV head of each sequence
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
    const int slots = p.max_num_ctas_kv;
    const int ctas = static_cast<int>(gridDim.x);
    const bool rate = units > 0 && units < 4 * ctas && 2 * units <= slots;
    // Tail split: the first U1 = whole waves of units (in work order) stay unsplit.
    const int head = kTailSplit && rate && units >= ctas ? units / ctas * ctas : 0;
    if (head > 0) __syncthreads();  // the order is read below (uniform: every thread agrees)
    // Chunks per unit: lane l of warp 0 rates S = l + 1, for every unit split (cost) and, with
    // a head, for the tail units only (cost_t).
    if (warp == 0) {
      int best_s = 1, best_head = 0;
      float best_cost = 3.4e38f;
      // Lane 0's (S = 1) sums over the sequences for the balanced split's bound: pages and the
      // largest unit per KV head, any sequence with more than one block, sequences with one.
      int r_pages = 0, r_pmax = 0, r_active = 0;
      bool r_multi = false;
      if (rate) {
        const int s = lane + 1;
        float cost = 3.4e38f, cost_t = 3.4e38f;
        if (s <= kSplitCap && s * units <= slots) {
          int n = 0, pages = 0, pmax = 0;        // every unit split in s
          int n_t = 0, pages_t = 0, pmax_t = 0;  // tail units split in s
          int pages_h = 0;                       // head units unsplit
          int pos = 0;
          for (int q = 0; q < batch; ++q) {
            const int b = head > 0 ? order[q] : q;
            const int nb = nblk[b], ql = qlen[b], kv = kvlen[b];
            r_multi |= nb > 1;
            r_active += nb == 1;
            for (int k = nb - 1; k >= 0; --k, pos += kHeadsKv) {
              const int pk = block_pages(ql, kv, k);
              const int su = min(s, max(pk, 1));
              n += su;
              pages += pk;
              pmax = max(pmax, pk);
              const int hc = min(max(head - pos, 0), kHeadsKv);  // units of block k in the head
              pages_h += hc * pk;
              if (hc < kHeadsKv) {
                n_t += (kHeadsKv - hc) * su;
                pages_t += (kHeadsKv - hc) * pk;
                pmax_t = max(pmax_t, ceil_div(pk, su));
              }
            }
          }
          r_pages = pages;
          r_pmax = pmax;
          const float over = kItemCostPages + (s > 1 ? kSplitCostPages : 0.f);
          const float items = static_cast<float>(kHeadsKv * n);
          const float work = static_cast<float>(kHeadsKv * pages) + over * items;
          const float largest = static_cast<float>(ceil_div(pmax, min(s, max(pmax, 1)))) + over;
          const float waves = static_cast<float>(ceil_div(kHeadsKv * n, ctas));
          cost = fmaxf(largest, waves * work / items);
          if (head > 0 && n_t > 0) {
            // Head: head / ctas waves of unsplit units; tail: its own waves of s-chunk items;
            // the largest head unit bounds the makespan from below.
            const float head_w = static_cast<float>(pages_h) + kItemCostPages * head;
            const float tail_w = static_cast<float>(pages_t) + over * n_t;
            const float tail_waves = static_cast<float>(ceil_div(n_t, ctas));
            cost_t = fmaxf(static_cast<float>(pmax) + kItemCostPages,
                           head_w / ctas + tail_waves * tail_w / n_t);
            cost_t = fmaxf(cost_t, static_cast<float>(pmax_t) + over);
          }
        }
        // Smallest cost, ties to the smaller S and to every unit split (the tail form only
        // where it is strictly cheaper).
        const bool tail = cost_t < cost;
        float c = tail ? cost_t : cost;
        int at = tail ? s + 64 : s;  // key: cost, then every unit split before tail, then S
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          const float c2 = __shfl_xor_sync(0xffffffffu, c, o);
          const int at2 = __shfl_xor_sync(0xffffffffu, at, o);
          if (c2 < c || (c2 == c && at2 < at)) {
            c = c2;
            at = at2;
          }
        }
        best_s = at & 63;
        best_head = at >= 64 ? head : 0;
        best_cost = c;
      }
      int bal = 0;
      bool try_balance = kBalanced && rate && units <= ctas && ctas <= slots;
      if (kLazyBalance && try_balance) {
        // balance()'s own early exits, from lane 0's sums (S = 1 always rates: 2 units <= slots).
        const int pages = __shfl_sync(0xffffffffu, r_pages, 0);
        const int pmax = __shfl_sync(0xffffffffu, r_pmax, 0);
        const int active = __shfl_sync(0xffffffffu, r_active, 0);
        const bool multi = __shfl_sync(0xffffffffu, r_multi, 0);
        const int budget = ctas / kHeadsKv;
        const float bound = balance_bound(pages, pmax, budget);
        try_balance = !multi && active > 0 && active <= budget && bound < best_cost;
      }
      if (try_balance) {
        int largest = 0, most = 0;
        if constexpr (kLazyBalance) {
          const int2 r = balance_far(qlen, kvlen, nblk, chunks, batch, ctas, lane, best_cost);
          most = r.x;
          largest = r.y;
        } else {
          most = balance(qlen, kvlen, nblk, chunks, batch, ctas, lane, best_cost, largest);
        }
        const float over = kItemCostPages + (most > 1 ? kSplitCostPages : 0.f);
        if (most > 0 && static_cast<float>(largest) + over < best_cost) {
          bal = 1;
          best_s = most;
          best_head = 0;
        }
      }
      if (lane == 0) {
        scalars[1] = best_s;
        scalars[2] = units;
        scalars[3] = batch;
        scalars[4] = best_head;
        if (kBalanced) scalars[6] = bal;
      }
    }
    __syncthreads();
    // Units before each position: warp 0 scans 4 positions per lane.
    if (warp == 0) {
      const int s = scalars[1];
      const int u1 = scalars[4];
      const bool bal = kBalanced && scalars[6] != 0;  // counts items, not units
      int cnt[4];
      int sum = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * lane + j;
        cnt[j] = k < batch ? kHeadsKv * (bal ? chunks[order[k]] : nblk[order[k]]) : 0;
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
        scalars[0] = bal ? incl : u1 + (incl - u1) * s;
      }
    }
    __syncthreads();
  }

  // The position lo of `order` whose run holds x: prefix[lo] <= x < prefix[lo + 1].
  __device__ __forceinline__ int position_of(int x, int batch) const {
    int lo = 0, hi = batch;
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (prefix[mid] <= x) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Fills `it` for item i < items(); false for a chunk past its unit's non-empty ones. Items
  // [0, U1) are the head units unsplit, then S items per tail unit; balanced: the c_b x 4
  // items of each sequence in work order (KV head, then chunk), unit 4 x position + KV head
  // (the sequences with rows come first in work order, each one unit per KV head).
  // kBalanced: the schedule was built with it (only then is [6] written).
  template <bool kBalanced>
  __device__ bool decode(const KernelParams& p, int i, ItemInfo& it) const {
    const int batch = scalars[3];
    if (kBalanced && scalars[6] != 0) {
      const int lo = position_of(i, batch);
      const int b = order[lo];
      const int per = (prefix[lo + 1] - prefix[lo]) / kHeadsKv;  // c_b
      const int j = i - prefix[lo];
      const int kvh = j / per;
      const int c = j - kvh * per;
      const int q0 = p.ptr_cum_seq_lens_q[b];
      const int ql = p.ptr_cum_seq_lens_q[b + 1] - q0;
      const int kv = p.ptr_seq_lens_kv[b];
      const int pages = block_pages(ql, kv, 0);
      it.seq = b;
      it.kvh = kvh;
      it.tok_abs = q0;
      it.ntok = ql;
      it.lim0 = kv - ql + 1;
      it.page0 = c * pages / per;
      it.page1 = (c + 1) * pages / per;
      it.unit = kHeadsKv * lo + kvh;
      it.nchunks = per;
      it.slot = i;
      it.first_slot = i - c;
      it.kv_len = kv;
      return true;
    }
    const int s = scalars[1];
    const int u1 = scalars[4];
    const int u = i < u1 ? i : u1 + (i - u1) / s;
    const int c = i < u1 ? 0 : (i - u1) - (u - u1) * s;
    const int lo = position_of(u, batch);
    const int b = order[lo];
    const int j = u - prefix[lo];
    const int q0 = p.ptr_cum_seq_lens_q[b];
    const int ql = p.ptr_cum_seq_lens_q[b + 1] - q0;
    const int kv = p.ptr_seq_lens_kv[b];
    const int nb = ceil_div(ql, kBlockTokens);
    const int blk = nb - 1 - j / kHeadsKv;
    const int kvh = j % kHeadsKv;
    const int first = kBlockTokens * blk;
    const int pages = block_pages(ql, kv, blk);
    const int su = u < u1 ? 1 : min(s, max(pages, 1));
    if (c >= su) return false;
    it.seq = b;
    it.kvh = kvh;
    it.tok_abs = q0 + first;
    it.ntok = min(kBlockTokens, ql - first);
    it.lim0 = kv - ql + first + 1;
    it.page0 = c * pages / su;
    it.page1 = (c + 1) * pages / su;
    it.unit = u;
    it.nchunks = su;
    it.slot = i;
    it.first_slot = i - c;
    it.kv_len = kv;
    return true;
  }
};

}  // namespace kernrt::attention::prefill
