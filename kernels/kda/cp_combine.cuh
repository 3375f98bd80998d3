// The context-parallel scratch layout and state-row addressing the chunk kernel shares, and
// the context-parallel combine (between phases 1 and 3 of a context-parallel prefill, c16's and
// c64's alike): for each sequence, value head and 16 value rows, walks the segments in order:
// I_s = S, S <- S M_s + B_s (rows of S times the transition's [K, K] state, which is M^T in
// the math's K x V orientation), starting from S = B_0 (the first segment's true end state);
// the last S is the sequence's final state (with kFlagCpLastInPhase3 the walk ends at the last
// segment's I, and phase 3 writes the final state). fp32 FMA, each output summed over j = 0 .. K-1
// in order from B_s (the same order, so the same bits, as the one-row-a-warp loop it replaced).
//
// Block kCombineThreads = 8 warps: warp w owns rows 2w, 2w+1 of the block's 16, lane l the
// columns 4l .. 4l+3 (8 accumulators a thread, each M element loaded once for 2 rows); grid
// (V / 16, HV, Z), block z walking sequences z, z + Z, .. (Z: one wave of blocks,
// kda_cp_plan.combine_z), one block per SM (the shared memory). The transitions stream through
// shared memory: a segment's M (64 KiB, contiguous) arrives by one cp.async.bulk into one of two
// buffers while the previous segment is multiplied, and the next segment's B rows are loaded
// into registers meanwhile, so a step costs the FMA work instead of 128 dependent L2 loads. On
// the H200 the loop before that (one row a warp, M read from global memory by every warp) took
// ~22 us a segment at B1 T32768 H16; the 4-warp form (rows 4w .. 4w+3, B loaded at each segment's
// start) ran 36.2 us for that call's 7 products under ncu (call j1): one warp per scheduler
// at 3.58 cycles an instruction; in one process (call j2, bit-identical)
// B1 T32768 H16 KDA / GDN 965.9 / 848.9 us with it, 956.3 / 843.7 with 8 warps and the B
// prefetch, 979.5 / 865.3 with 16 warps (validation/kda/notes.md).
//
// Not checked here: V % 16 (the generator allows V 128 / 256), the dynamic shared memory
// being sizeof(CombineSmem) (the generator's COMBINE_SMEM), 16-byte alignment of the scratch.
#pragma once

#include <stdint.h>

#include "common/ptx/sync.cuh"
#include "common/ptx/tma.cuh"
#include "kda/params.h"

namespace kernrt::kda {

// State rows of the block's tile in a state line: row v of head hv at byte
// ((hv * V + v) * K) * 4 from the line.
__device__ __forceinline__ float* state_row(void* base, int64_t line, int64_t stride, int hv,
                                            int dim_v, int v) {
  return reinterpret_cast<float*>(static_cast<char*>(base) + line * stride) +
         (int64_t(hv) * dim_v + v) * kHeadDim;
}

// The context-parallel scratch of a call: per (sequence, segment, value head) the segment's
// state from zero (B, [V, K]), its transition (M, the final state of X = I with v = 0, [K, K])
// and, after the combine, its true initial state (I, [V, K]).
struct CpScratch {
  float *b, *m, *init;
};

__device__ __forceinline__ CpScratch cp_scratch(const KdaChunkParams& p, int segs) {
  float* base = static_cast<float*>(p.cp_scratch);
  const int64_t units = int64_t(p.seqs) * segs * p.value_heads;
  return CpScratch{base, base + units * p.dim_v * kHeadDim,
                   base + units * (p.dim_v + kHeadDim) * kHeadDim};
}

constexpr int kCombineRows = 16, kCombineThreads = 256;

struct CombineSmem {
  float m[2][kHeadDim * kHeadDim];   // M_s of two segments in turn
  float srow[kHeadDim][kCombineRows];  // S of the block's rows, transposed: srow[j][r]
  uint64_t full[2];
};
static_assert(sizeof(CombineSmem) == 139280, "the generator's COMBINE_SMEM");

constexpr int kCombineWarpRows = kCombineRows / (kCombineThreads / 32);  // 2: rows a thread
static_assert(kCombineWarpRows == 2, "the srow pairs below are two rows");

// srow[j]'s column of the row pair (r, r + 1) (r even): pair r / 2 XOR (j / 4) % 8, so the
// transposed write of a segment's S (lane l: keys j = 4l .. 4l + 3, its pair as one float2)
// spreads a warp's 32 lanes over 16 banks instead of one (the unswizzled scalar writes were
// 32-way conflicted: call j3, one process, bit-identical, B1 T32768 H16 KDA / GDN 963.3 /
// 847.5 -> 960.4 / 845.1 us); the product's read of srow[j] (one float2, the same address for
// every lane: a broadcast) is unchanged.
__device__ __forceinline__ int srow_col(int j, int r) { return 2 * ((r >> 1) ^ ((j >> 2) & 7)); }

// Sequence n's populated segments (the last covers the rest), as the phases cut them.
__device__ __forceinline__ int cp_seq_segments(const KdaChunkParams& p, int n, int seg_len,
                                               int segs) {
  const int len = p.cu_seqlens != nullptr ? p.cu_seqlens[n + 1] - p.cu_seqlens[n] : p.tokens;
  const int nseg = len <= 0 ? 1 : (len + seg_len - 1) / seg_len;
  return nseg < segs ? nseg : segs;
}

// warp w rows 2w, 2w + 1, lane l columns 4l .. 4l + 3; the next segment's B rows are loaded into
// registers while this segment's product runs (the form before waited for them at each
// segment's first FMA).
// kZeroSkip (decay-bounded context parallel, whose dropped transitions phase 1 writes as zeros):
// a transition that landed all zero (+-0) is not multiplied, S M + B being B (GDN B1 T32768 H16:
// the combine 21.2 -> 7.1 us; on exact transitions the test alone costs ~1 us a segment).
template <bool kZeroSkip>
__device__ __forceinline__ void cp_combine(const KdaChunkParams& p, CombineSmem& sm) {
  constexpr int K = kHeadDim;
  constexpr int kR = kCombineWarpRows;
  constexpr uint32_t kMBytes = K * K * sizeof(float);
  const int hv = blockIdx.y, r0 = kR * (threadIdx.x >> 5), c = 4 * (threadIdx.x & 31);
  const int v0 = blockIdx.x * kCombineRows + r0;  // this thread's first row
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&sm.full[0], 1);
    ptx::mbarrier_init(&sm.full[1], 1);
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  ptx::griddepcontrol_wait();
  const int seg_len = p.seg_chunks * kChunk;
  const int segs = p.cp_segs;
  const CpScratch cs = cp_scratch(p, segs);
  // kFlagCpLastInPhase3: the last segment has no transition; its initial state is the last I
  const bool last_in_phase3 = (p.flags & kFlagCpLastInPhase3) != 0;
  // The block walks sequences blockIdx.z, + gridDim.z, ...: one wave of blocks walking them all
  // (kda_cp_plan.combine_z) instead of a block a sequence, which cost ~2.5 us even with nothing to
  // multiply, in 16 waves at one block per SM for the varlen bench's 16 sequences (its combine
  // 22.4 -> 13.1 us of the chain on the H100, the same bits). Product k of the block (counted
  // over its sequences) uses M buffer k % 2 in that buffer's phase k / 2.
  // The segment counts of the walk's next 256 sequences arrive in one load a thread, not in
  // one dependent load a sequence.
  __shared__ int nseg_of[kCombineThreads];
  int k0 = 0;
  for (int first = blockIdx.z; first < p.seqs; first += kCombineThreads * int(gridDim.z)) {
    __syncthreads();  // the previous round is done with nseg_of
    const int mine = first + int(threadIdx.x) * int(gridDim.z);
    nseg_of[threadIdx.x] = mine < p.seqs ? cp_seq_segments(p, mine, seg_len, segs) : 0;
    __syncthreads();
    for (int t = 0; t < kCombineThreads; ++t) {
      const int n = first + t * int(gridDim.z);
      if (n >= p.seqs) break;
      const int nseg = nseg_of[t];
      const int nmul = last_in_phase3 ? nseg - 1 : nseg;  // segments 1 .. nmul - 1 are multiplied
      if (nmul <= 0) continue;  // one segment, run whole in phase 1: nothing to combine
      const int64_t unit0 = int64_t(n) * segs * p.value_heads + hv;
      auto row = [&](const float* base, int seg, int i) {
        return base + ((unit0 + int64_t(seg) * p.value_heads) * p.dim_v + v0 + i) * K + c;
      };
      auto ask = [&](int seg) {  // thread 0: M_seg into its product's buffer
        const int k = k0 + seg - 1;
        uint64_t* bar = &sm.full[k & 1];
        ptx::mbarrier_arrive_expect_tx(bar, kMBytes);
        ptx::bulk_load(sm.m[k & 1], cs.m + (unit0 + int64_t(seg) * p.value_heads) * K * K, kMBytes,
                       bar);
      };
      if (threadIdx.x == 0)
        for (int sg = 1; sg < nmul && sg < 3; ++sg) ask(sg);
      float4 acc[kR], nb[kR];
#pragma unroll
      for (int i = 0; i < kR; ++i) acc[i] = *reinterpret_cast<const float4*>(row(cs.b, 0, i));
      if (nmul > 1)
#pragma unroll
        for (int i = 0; i < kR; ++i) nb[i] = *reinterpret_cast<const float4*>(row(cs.b, 1, i));
      for (int sg = 1; sg < nseg; ++sg) {
        const int k = k0 + sg - 1, buf = k & 1;
#pragma unroll
        for (int i = 0; i < kR; ++i)
          *reinterpret_cast<float4*>(const_cast<float*>(row(cs.init, sg, i))) = acc[i];
        if (sg == nmul) break;  // the last segment's initial state is written; phase 3 runs it
        {
          const int col = srow_col(c, r0);  // the same for c .. c + 3
          *reinterpret_cast<float2*>(&sm.srow[c][col]) = make_float2(acc[0].x, acc[1].x);
          *reinterpret_cast<float2*>(&sm.srow[c + 1][col]) = make_float2(acc[0].y, acc[1].y);
          *reinterpret_cast<float2*>(&sm.srow[c + 2][col]) = make_float2(acc[0].z, acc[1].z);
          *reinterpret_cast<float2*>(&sm.srow[c + 3][col]) = make_float2(acc[0].w, acc[1].w);
        }
#pragma unroll
        for (int i = 0; i < kR; ++i) acc[i] = nb[i];
        if (sg + 1 < nmul)
#pragma unroll
          for (int i = 0; i < kR; ++i)
            nb[i] = *reinterpret_cast<const float4*>(row(cs.b, sg + 1, i));
        __syncthreads();
        ptx::mbarrier_wait(&sm.full[buf], (k >> 1) & 1);
        const float* m = sm.m[buf] + c;
        bool nonzero = true;
        if constexpr (kZeroSkip) {
          const uint4* mw = reinterpret_cast<const uint4*>(sm.m[buf]);
          uint32_t any = 0u;
#pragma unroll 4
          for (int i = threadIdx.x; i < K * K / 4; i += kCombineThreads) {
            const uint4 w = mw[i];
            any |= (w.x | w.y | w.z | w.w) << 1;  // the sign bits out: -0 is a zero
          }
          nonzero = __syncthreads_or(any != 0u) != 0;
        }
#pragma unroll 4
        for (int j = 0; nonzero && j < K; ++j) {
          const float2 x2 = *reinterpret_cast<const float2*>(&sm.srow[j][srow_col(j, r0)]);
          const float xs[kR] = {x2.x, x2.y};
          const float4 mj = *reinterpret_cast<const float4*>(m + j * K);
#pragma unroll
          for (int i = 0; i < kR; ++i) {
            acc[i].x = fmaf(xs[i], mj.x, acc[i].x), acc[i].y = fmaf(xs[i], mj.y, acc[i].y);
            acc[i].z = fmaf(xs[i], mj.z, acc[i].z), acc[i].w = fmaf(xs[i], mj.w, acc[i].w);
          }
        }
        __syncthreads();  // every warp is done with this buffer and with srow
        if (threadIdx.x == 0 && sg + 2 < nmul) ask(sg + 2);
      }
      k0 += nmul - 1;  // this sequence's products (segments 1 .. nmul - 1)
      const int64_t l1 = p.ht_lines != nullptr ? p.ht_lines[n] : n;
      if (p.ht != nullptr && !last_in_phase3 && (p.ht_lines == nullptr || l1 != 0))
#pragma unroll
        for (int i = 0; i < kR; ++i)
          *reinterpret_cast<float4*>(state_row(p.ht, l1, p.ht_stride, hv, p.dim_v, v0 + i) + c) =
              acc[i];
    }
  }
  ptx::griddepcontrol_launch_dependents();
}

}  // namespace kernrt::kda
