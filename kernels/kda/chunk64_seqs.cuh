// Sequences and operand slots of the 64-token chunk ops (chunk64_params.h, the slot comment
// above its prep blocks), in one place so that the preps and the state step address the same
// slot. Dense (cu_seqlens null): sequence n is rows n T .., chunk c of value head hv at slot
// (n HV + hv) NC + c. Varlen: rows cu[n] .., slot (floor(cu[n] / 64) + n + c) HV + hv.
#pragma once

#include <stdint.h>

#include "common/ptx/sync.cuh"

namespace kernrt::kda::c64 {

constexpr int kChunkTokens = 64;

// Sequence n's rows and its chunks' slots for value head hv: chunk c at slot0 + c * step.
struct SeqChunks {
  int64_t row0;   // row of the sequence's token 0
  int len;        // its tokens
  int64_t slot0;
  int step;
};

__device__ __forceinline__ SeqChunks seq_chunks(const int32_t* cu, int n, int T, int NC, int hv,
                                                int HV) {
  if (cu == nullptr) return {int64_t(n) * T, T, (int64_t(n) * HV + hv) * NC, 1};
  const int bos = cu[n];
  return {bos, cu[n + 1] - bos, (int64_t(bos / kChunkTokens) + n) * HV + hv, HV};
}

// Context parallel's segments of one sequence of nc chunks (cp_segs segs, L chunks each): the
// last nseg - 1 segments take L chunks each, counted from the sequence's end, and segment 0 the
// rest (1 .. L chunks where nseg < segs, L + the chunks past segs L otherwise). Segment 0 runs
// for real in phase 1 while the others' phase-1 blocks compute transitions, so it is the one
// that may be short or long; every later segment is L, which keeps phase 3's blocks equal.
// kernrt.gen.kda_cp_plan.segments is the same rule.
struct CpSegment {
  int c0, c1;  // its chunks [c0, c1)
  int nseg;    // the sequence's populated segments
};

__device__ __forceinline__ CpSegment cp_segment(int nc, int segs, int L, int seg) {
  const int nseg = nc <= 0 ? 1 : min(segs, (nc + L - 1) / L);
  const int first = nc - (nseg - 1) * L;  // segment 0's chunks
  const int c0 = seg == 0 ? 0 : first + (seg - 1) * L;
  return {c0, seg == 0 ? first : min(nc, c0 + L), nseg};
}

// The chunk a prep block serves: its first row, the tokens of the sequence from there (>= 64:
// a whole chunk) and its operand slot.
struct PrepChunk {
  int64_t row0;
  int live;
  int64_t slot;
};

// Varlen: the largest n < seqs with floor(cu[n] / 64) + n <= s (the keys rise by >= 1 a
// sequence), found by one warp in ceil(log32 seqs) rounds of 32 coalesced probes, then the
// chunk s - key(n) of it. Every warp of a block runs it for itself (the same answer, no
// barrier). False when slot s maps to no chunk (a hole after a short last chunk, or past the
// last sequence): the block then has nothing to do.
__device__ __forceinline__ bool varlen_prep_chunk(const int32_t* cu, int seqs, int s, int hv,
                                                  int HV, int lane, PrepChunk& out) {
  int lo = 0, hi = seqs;
  while (hi - lo > 1) {
    const int step = (hi - lo + 31) / 32, m = lo + lane * step;
    const bool le = m < hi && cu[m] / kChunkTokens + m <= s;
    const unsigned b = __ballot_sync(0xffffffffu, le);
    if (b == 0u) return false;  // s is below key(lo) (cu[0] > 0)
    lo += (31 - __clz(b)) * step;
    hi = min(hi, lo + step);
  }
  if (seqs <= 0) return false;
  const int bos = cu[lo], len = cu[lo + 1] - bos, c = s - (bos / kChunkTokens + lo);
  if (c < 0 || kChunkTokens * c >= len) return false;
  out = {int64_t(bos) + kChunkTokens * c, len - kChunkTokens * c, int64_t(s) * HV + hv};
  return true;
}

// Dense: chunk x of sequence n.
__device__ __forceinline__ PrepChunk dense_prep_chunk(int n, int x, int T, int NC, int hv, int HV) {
  return {int64_t(n) * T + kChunkTokens * x, T - kChunkTokens * x,
          (int64_t(n) * HV + hv) * NC + x};
}

// A prep block's start, for both preps (their packs name these fields alike): PDL (the state
// step may launch now and waits for this grid; the inputs are read after the previous grid
// completed), then the block's chunk. False: its slot maps to no chunk, nothing to do.
template <class Params>
__device__ __forceinline__ bool prep_block_chunk(const Params& p, int hv, int HV, int lane,
                                                 PrepChunk& pc) {
  ptx::griddepcontrol_launch_dependents();
  ptx::griddepcontrol_wait();
  if (p.cu_seqlens != nullptr) return varlen_prep_chunk(p.cu_seqlens, p.seqs, blockIdx.x, hv, HV, lane, pc);
  pc = dense_prep_chunk(blockIdx.z, blockIdx.x, p.tokens, p.chunks, hv, HV);
  return true;
}

// A per-token scalar (beta, GDN's g) at element i of an fp32 or (bf16 != 0) bf16 array.
__device__ __forceinline__ float token_scalar(const void* base, int64_t i, int bf16) {
  if (bf16) return __uint_as_float(uint32_t(static_cast<const uint16_t*>(base)[i]) << 16);
  return static_cast<const float*>(base)[i];
}

}  // namespace kernrt::kda::c64
