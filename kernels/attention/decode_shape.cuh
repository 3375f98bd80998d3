// Shape, shared-memory map and scratch-counter layout of the sm_90a paged decode kernel
// (attention_decode.cu, decode_feed.cuh, decode_merge.cuh).
//
// Deliberately does not check: that the pack's head counts, head dim and page size equal the
// compiled shape below (the kernel trusts the pack), or that the counter scratch holds
// seqs x 24 ints that were zero before the first launch (the manifest generator sizes it as
// FlashInfer does: batch x heads_q).
#pragma once

#include <cstdint>

namespace kernrt::attention {

// ---- compiled shape ------------------------------------------------------------------------
constexpr int kHeadDim = 256;
constexpr int kPage = 64;               // tokens per page = rows of one K/V box
constexpr int kGroup = 6;               // query heads per KV head
// KV heads are a template parameter of the kernel (the entries: 4 for the whole model, 2 for
// one rank of two in tensor parallel); the counter scratch's layout has room for 4.
constexpr int kMaxHeadsKv = 4;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTokensPerWarp = kPage / kWarps;
static_assert(kTokensPerWarp == 16, "one m16n8k16 k-step of tokens per warp and page");

// ---- shared memory -------------------------------------------------------------------------
// [0, 96 KiB) three ring stages of one K or V tile (64 tokens x 256 dims, 4 boxes of 64 x 64
// with the 128B swizzle); [96, 100 KiB) Q (4 boxes of 6 rows in 1 KiB slots, rows 6-7 zero);
// 128 bytes of DecodeShared (barriers, the schedule's shared state); the merge's weights,
// half-sums and reduction ints.
constexpr int kStages = 3;
constexpr int kBoxBytes = 64 * kPage * 2;
constexpr int kBoxesPerTile = kHeadDim / 64;
constexpr int kTileBytes = kBoxesPerTile * kBoxBytes;
constexpr int kQBoxBytes = 64 * kGroup * 2;  // what one Q box transfers
constexpr int kQOffset = kStages * kTileBytes;
constexpr int kBarOffset = kQOffset + kBoxesPerTile * 1024;
constexpr int kListOffset = kBarOffset + 128;
constexpr int kListInts = 128 + 256 + 16;  // the merge's weights, half-sums, reduction ints
constexpr int kSmemBytes = kListOffset + kListInts * 4 + 1024;  // + slack to align the base
static_assert(kTileBytes == 32768, "K (or V) of one page and head");
static_assert(2 * (kSmemBytes + 1024) <= 228 * 1024, "two CTAs per SM");

// The CTA's barriers and the state its threads share, at kBarOffset. Thread 0 writes what
// the schedule decides; everyone reads it after the next __syncthreads.
struct DecodeShared {
  uint64_t full[kStages];   // ring stage holds its tile (TMA bytes or the sentinel's arrival)
  uint64_t empty[kStages];  // ring stage released by the 4 warps
  uint64_t q_bar;           // the segment's Q boxes landed
  uint64_t merge_bar;       // the final merge's bulk copies landed
  int tile_page[kStages];   // logical page of the stage's tile, or -1: the segment's end
  int flag;                 // a CTA-wide decision
  int seq;                  // the segment's sequence; -1 before the first: join at once
  int pages;                // pages this CTA did in the segment
  int slot;                 // this CTA's partial slot in the segment's group
  int merge_n;              // partials of the group whose merge part was claimed ahead
  uint64_t q_free;          // the 4 warps read the segment's Q (pipelined segments)
};
static_assert(sizeof(DecodeShared) <= kListOffset - kBarOffset, "barrier area");

// ---- schedule constants ----------------------------------------------------------------------
// One page per claim (run 25: -1.3 to -3.8 us at batch 1-8 against 4-page chunks); two CTAs
// per SM also for a single sequence (one per SM measured 197.1 vs 203.9 us at 200k,
// validation/attention/notes.md). Both were compile-time knobs until tag decode-knobs-2026-11.
constexpr int kChunkPages = 1;  // pages per work claim
constexpr int kCtasPerSm = 2;
static_assert(kChunkPages >= 1 && kChunkPages <= 32, "a chunk's page indices live one per lane");

// ---- schedule and merge limits -------------------------------------------------------------
constexpr int kMaxRanked = kThreads;  // batches up to this get length-proportional start shares
constexpr int kMaxUnits = 128;        // CTAs per KV head (8-bit counts, 4 weights per lane)
constexpr int kMergeStride = kHeadDim + 8;             // padded f32 row, warp merge
constexpr int kMergeSlices = kGroup;                   // the final merge goes by query-head row
constexpr int kSliceBytes = kHeadDim * 4;              // one row of one partial
constexpr int kSliceBatch = kStages * kTileBytes / kSliceBytes;  // partial rows per batch: 96
constexpr int kWholeMergeMax = 16;  // groups up to this many partials merge in one pass
static_assert(kWholeMergeMax * kGroup * kSliceBytes <= kStages * kTileBytes, "one batch");
static_assert(kWholeMergeMax <= 32 && kWholeMergeMax * 8 <= kMaxUnits, "weights per lane");
// Claims of a group's final merge: rows one by one for large groups, the whole at once else.
// No partials (the group's one CTA wrote the output itself): nothing to merge.
__device__ __forceinline__ int merge_parts(int n) {
  return n == 0 ? 0 : n <= kWholeMergeMax ? 1 : kMergeSlices;
}
static_assert(kWarps * 8 * kMergeStride * 4 + kWarps * 16 * 4 <= 2 * kTileBytes,
              "warp merge fits in stages 0-1");
static_assert(kWarps * kGroup * kMergeStride * 4 + kWarps * 16 * 4 <= kTileBytes,
              "warp merge without the padding rows fits in one stage");

// ---- merge scratch after the barriers: weights, the half-sums, reduction ints --------------
constexpr int kFacOffset = kListOffset;                        // kMaxUnits floats
constexpr int kHalfOffset = kFacOffset + kMaxUnits * 4;        // 64 float4 of one half
constexpr int kTmpOffset = kHalfOffset + (kHeadDim / 4) * 16;  // 16 ints
static_assert(kTmpOffset + 16 * 4 <= kListOffset + kListInts * 4, "merge scratch fits");

// ---- counter scratch: 24 ints per sequence b (FlashInfer's batch x heads_q) -----------------
// Per (b, h): pages whose partials are written, chunks handed out, partial slots handed out,
// and the final merge's rows claimed. Per head h, one word in
// sequence 0's row: bits 0-7 CTAs started, 8-15 CTAs finished.
constexpr int kCounterStride = 24;
constexpr int kDoneAt = 0;
constexpr int kClaimAt = 4;
constexpr int kAllocAt = 8;
constexpr int kSliceAt = 12;
constexpr int kHeadAt = 20;
static_assert(kSliceAt + kMaxHeadsKv <= kHeadAt && kHeadAt + kMaxHeadsKv <= kCounterStride,
              "counters fit in 24 ints per sequence");
constexpr int kStarted = 1;
constexpr int kFinished = 1 << 8;

// Byte offset of the 16-byte chunk `chunk` (0..31 across a 256-dim row) of tile row `row`
// inside a tile of kBoxesPerTile swizzled boxes: TMA's 128B swizzle XORs the chunk index
// within a 128-byte row with (row % 8).
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kBoxBytes + row * 128 +
                               (((chunk & 7) ^ (row & 7)) << 4));
}

}  // namespace kernrt::attention
