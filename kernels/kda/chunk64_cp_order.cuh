// Exact context parallel's phase-1 order for the 64-token state step (kda_chunk64_state2.cu).
// Blocks start in grid order as multiprocessors free up, so listing the longest first makes the
// grid a longest-processing-time schedule. Phase 1 holds every sequence's segment 0 (its chunks,
// run for real) and the transitions of the segments between (L chunks each, without o: ~0.68
// of a step with o, kernrt.gen.kda_cp_plan.PHASE1_STEP); phase 3's blocks are all L chunks and
// need no order, only varlen's empty ones (segment 0, segments past a sequence's end) moved
// behind the working ones. Two forms of one rule (items by descending key: segment 0's chunks,
// 0.68 L for a transition):
//   varlen: cp_order_block (entry kda_chunk64_cp_order_sm90a, grid 1, block 1024, launched
//     before phase 1) counting-sorts the items into Chunk64State2Params::cp_order, and packs
//     phase 3's working items after them (cp_item). B1 T32768 H16 16 sequences of 106..6200
//     tokens: 97 chunk steps in one pass, 72 modelled with this order, 84 in sequence order
//     (kda_cp_plan.steps); 767.6 -> 732.9 us measured (H200). Phase 3 from the list instead of
//     in grid order (its 640 empty blocks among 128 working ones): 151.4 -> 145.3 us of the
//     chain (H100, torch.profiler; the whole prefill 772.4 -> 768.3 us as a graph).
//   dense: every sequence has the same segments, so the order is arithmetic (dense_item): no
//     launch and no scratch (one launch fewer on B1 T32768's critical path).
// Within a key the order is free (the atomics'): each item computes the same bits on any block.
#pragma once

#include <cub/block/block_scan.cuh>

#include "common/ptx/sync.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk64_seqs.cuh"

namespace kernrt::kda::c64 {

constexpr int kOrderThreads = 1024, kOrderKeys = 2048, kPhase1StepPct = 68;

// An item's sort key: segment 0's chunks (c1), or a transition's 0.68 L; the keys past
// kOrderKeys share the last.
__device__ __forceinline__ int seg0_key(const CpSegment& s0) { return min(kOrderKeys - 1, s0.c1); }
__device__ __forceinline__ int transition_key(int L) {
  return min(kOrderKeys - 1, (L * kPhase1StepPct + 50) / 100);
}

__device__ __forceinline__ int seq_chunk_count(const Chunk64State2Params& p, int n) {
  if (p.cu_seqlens == nullptr) return p.chunks;
  return (p.cu_seqlens[n + 1] - p.cu_seqlens[n] + kChunkTokens - 1) / kChunkTokens;
}

// Dense: phase-1 block z's item (n cp_segs + s, or -1 past the last). The segment 0s of all
// sequences, then their transitions sequence by sequence; the transitions first where a
// segment 0 is the shorter (nseg < segs leaves it 1 .. L chunks).
__device__ __forceinline__ int dense_item(const Chunk64State2Params& p, int z) {
  const int segs = p.cp_segs;
  const CpSegment s0 = cp_segment(p.chunks, segs, p.seg_chunks, 0);
  const int mid = max(0, s0.nseg - 2);  // transitions a sequence (the last segment is phase 3's)
  const int firsts = p.seqs, transitions = p.seqs * mid;
  if (seg0_key(s0) >= transition_key(p.seg_chunks)) {  // the segment 0s first
    if (z < firsts) return z * segs;
    z -= firsts;
  } else if (z >= transitions) {  // the transitions first
    z -= transitions;
    return z < firsts ? z * segs : -1;
  }
  return z < transitions ? (z / mid) * segs + 1 + z % mid : -1;  // transition z
}

__device__ __forceinline__ void cp_order_block(const Chunk64State2Params& p) {
  using Scan = cub::BlockScan<int, kOrderThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int next[kOrderKeys];  // a key's count, then its next free place
  __shared__ int phase3_count, phase3_next;
  ptx::griddepcontrol_launch_dependents();
  ptx::griddepcontrol_wait();  // cu_seqlens may come from the grid before
  const int segs = p.cp_segs, tid = threadIdx.x, items = p.seqs * segs;
  const int tkey = transition_key(p.seg_chunks);
  for (int k = tid; k < kOrderKeys; k += kOrderThreads) next[k] = 0;
  if (tid == 0) phase3_count = 0, phase3_next = 0;
  __syncthreads();
  for (int n = tid; n < p.seqs; n += kOrderThreads) {
    const CpSegment s0 = cp_segment(seq_chunk_count(p, n), segs, p.seg_chunks, 0);
    atomicAdd(&next[seg0_key(s0)], 1);
    if (s0.nseg > 2) atomicAdd(&next[tkey], s0.nseg - 2);  // the last segment runs in phase 3
    if (s0.nseg > 1) atomicAdd(&phase3_count, s0.nseg - 1);
  }
  __syncthreads();
  // places in descending key order: thread t holds keys K - 1 - 2t and K - 2 - 2t
  static_assert(kOrderKeys == 2 * kOrderThreads, "two keys a thread");
  const int hi = kOrderKeys - 1 - 2 * tid, a = next[hi], b = next[hi - 1];
  int first, total;
  Scan(scan).ExclusiveSum(a + b, first, total);
  __syncthreads();
  next[hi] = first, next[hi - 1] = first + a;
  __syncthreads();
  for (int n = tid; n < p.seqs; n += kOrderThreads) {
    const CpSegment s0 = cp_segment(seq_chunk_count(p, n), segs, p.seg_chunks, 0);
    p.cp_order[atomicAdd(&next[seg0_key(s0)], 1)] = n * segs;
    for (int s = 1; s < s0.nseg - 1; ++s) p.cp_order[atomicAdd(&next[tkey], 1)] = n * segs + s;
    if (s0.nseg > 1) {  // phase 3's items: all L chunks, so in any order, packed
      const int at = items + atomicAdd(&phase3_next, s0.nseg - 1) - 1;
      for (int s = 1; s < s0.nseg; ++s) p.cp_order[at + s] = n * segs + s;
    }
  }
  for (int i = total + tid; i < items; i += kOrderThreads) p.cp_order[i] = -1;
  for (int i = phase3_count + tid; i < items; i += kOrderThreads) p.cp_order[items + i] = -1;
}

// Block z's item in a context-parallel phase. Phase 1: cp_order's (varlen), dense_item (dense
// exact), or z itself (the decay-bounded form keeps grid order). Phase 3: cp_order's second
// half where the launch passes it (varlen exact: the working items first), else z itself.
__device__ __forceinline__ int cp_item(const Chunk64State2Params& p, int z) {
  if (p.cp_phase == 3) return p.cp_order != nullptr ? p.cp_order[p.seqs * p.cp_segs + z] : z;
  if (p.cp_order != nullptr) return p.cp_order[z];
  if (p.bound == nullptr && p.cu_seqlens == nullptr) return dense_item(p, z);
  return z;
}

}  // namespace kernrt::kda::c64
