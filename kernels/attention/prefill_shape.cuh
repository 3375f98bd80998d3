// Shape, shared-memory map, scratch layout and the work-item record of the sm_90a prefill /
// verify attention kernel (attention_prefill.cu, prefill_schedule.cuh, prefill_merge.cuh).
//
// Deliberately does not check: that the pack's head counts, head dim and page size equal the
// compiled shape below (the kernel trusts the pack), or that the scratch the generator sizes
// (counter / partial / stats, kernrt/gen/attention.py) matches the slot count at pack@1156.
#pragma once

#include <cstdint>

namespace kernrt::attention::prefill {

// ---- compiled shape ------------------------------------------------------------------------
constexpr int kHeadDim = 256;
constexpr int kPage = 64;     // tokens per page = key rows of one K/V tile
constexpr int kGroup = 6;     // query heads per KV head
constexpr int kHeadsKv = 4;
// A work item is up to 21 query tokens of one sequence times the 6 query heads of one KV head:
// 126 rows r = 6 * token + head of one M = 128 tile (rows 126, 127 are zero padding). The Q
// tensormap's box is edited on the device to [64, 1, 6, 21] so that one box loads exactly
// those rows (prefill_schedule.cuh, q_map).
constexpr int kBlockTokens = 21;
constexpr int kItemRows = kBlockTokens * kGroup;  // 126
constexpr int kTileRows = 128;
constexpr int kWgRows = 64;  // rows of one consumer warpgroup (wgmma M)
static_assert(kItemRows <= kTileRows && kTileRows == 2 * kWgRows, "two consumer warpgroups");

// ---- threads -----------------------------------------------------------------------------------
// Warpgroup 0: warp 0 produces (TMA of Q, K, V, page-table reads, work claims), warps 1-3 leave
// after the setup. Warpgroups 1 and 2 consume rows 0-63 and 64-127 of every item.
constexpr int kThreads = 384;
constexpr int kConsumerThreads = 256;
constexpr int kProducerRegs = 40;   // setmaxnreg: 128 x 40 + 256 x 232 = 64512 <= 65536
constexpr int kConsumerRegs = 232;
static_assert(128 * kProducerRegs + kConsumerThreads * kConsumerRegs <= 65536, "register file");
constexpr uint32_t kBarConsumers = 1;  // named barrier: the 256 consumer threads
constexpr uint32_t kBarExit = 2;       // named barrier: consumers + the producer warp
constexpr uint32_t kBarWarpgroup = 3;  // named barriers 3, 4: one consumer warpgroup
constexpr int kExitThreads = kConsumerThreads + 32;

// ---- shared memory (from a 1024-byte aligned base) ----------------------------------------------
// [0, 64 KiB)        Q: 4 chunks of 128 rows x 64 dims (one per 64-dim TMA box), 128B swizzle
// [64, 224 KiB)      ring of 5 tiles, K or V of one page: 4 boxes of 64 tokens x 64 dims
// [224 KiB, +1280)   barriers, the edited Q tensormap, two item records, the schedule tables
// 229376 + 1280 + 1023 (base alignment) = 231679 bytes <= the 232448-byte (227 KiB) opt-in.
constexpr int kBoxBytes = 64 * kPage * 2;          // 8 KiB
constexpr int kBoxesPerTile = kHeadDim / 64;       // 4
constexpr int kTileBytes = kBoxesPerTile * kBoxBytes;  // 32 KiB
constexpr int kQChunkBytes = kTileRows * 128;      // 16 KiB
constexpr int kQBytes = kBoxesPerTile * kQChunkBytes;  // 64 KiB
constexpr int kQBoxBytes = kItemRows * 128;        // 16128: what one Q box transfers
constexpr int kStages = 5;
constexpr int kQOffset = 0;
constexpr int kRingOffset = kQBytes;
constexpr int kSmallOffset = kRingOffset + kStages * kTileBytes;
constexpr int kMaxSeqs = 128;  // sequences per launch (the generator refuses more)
// Small area, byte offsets from kSmallOffset.
constexpr int kBarFullAt = 0;                      // kStages mbarriers
constexpr int kBarEmptyAt = kBarFullAt + 8 * kStages;
constexpr int kBarQFullAt = kBarEmptyAt + 8 * kStages;
constexpr int kBarQEmptyAt = kBarQFullAt + 8;
constexpr int kTmapAt = 128;                       // 128-byte aligned CUtensorMap staging
constexpr int kInfoAt = 256;                       // two ItemInfo records
constexpr int kSchedAt = 384;                      // Schedule scalars (16 ints)
constexpr int kOrderAt = 448;                      // kMaxSeqs int16: sequences, work order
constexpr int kPrefixAt = kOrderAt + 2 * kMaxSeqs;  // kMaxSeqs + 1 ints: items before each
constexpr int kSmallBytes = kPrefixAt + 4 * (kMaxSeqs + 1);
static_assert(kBarQEmptyAt + 8 <= kTmapAt, "barriers fit before the tensormap");
static_assert(kSmallBytes <= 1280, "small area");
constexpr int kSmemBytes = 1023 + kSmallOffset + 1280;
static_assert(kSmemBytes <= 232448, "227 KiB opt-in shared memory per block on sm_90");
static_assert(kTileBytes == 32768 && kQBytes == 65536, "tile arithmetic");

// ---- barrier arrival counts ---------------------------------------------------------------------
// Each of the 8 consumer warps releases a ring tile and the Q tile once it has waited for its
// own wgmma reading them, so a release never precedes any warp's reads.
constexpr uint32_t kConsumerWarps = kConsumerThreads / 32;

// ---- schedule limits and cost model -------------------------------------------------------------
constexpr int kMaxSplit = 32;         // KV chunks per unit (one lane of warp 0 rates each count)
constexpr int kMaxParts = 16;         // a split unit's merge goes in up to this many row parts
constexpr float kItemCostPages = 2.f;   // Q load, claim, output write of one item, in pages
constexpr float kSplitCostPages = 2.f;  // partial write and merge share of a split item

// ---- scratch -------------------------------------------------------------------------------------
// counter (i32): two banks of bank_words(slots) words, then from tmap_word(slots) one 128-byte
// Q tensormap per CTA. A bank: [0] work queue, [1] CTAs finished, then per split unit u its
// chunk arrivals at kArriveAt + u and merge-part claims at kArriveAt + slots + u. Entries
// without kEpoch use bank 0 only, and the last CTA to finish puts it back to zero. kEpoch
// entries: word kTicketAt of bank 0 hands out launch tickets (never reset); a launch whose
// tickets are [0, G) uses bank 0, one with [G, 2G) bank 1, and each launch zeroes the other
// bank while it runs (the launch that used it has completed). partial (f32): [slots][128
// rows][256]; stats (f32): [slots][128 rows][2] = (running max in the log2 domain, sum).
constexpr int kQueueAt = 0;
constexpr int kFinishedAt = 1;
constexpr int kTicketAt = 2;
constexpr int kArriveAt = 16;
__host__ __device__ constexpr int bank_words(int slots) { return kArriveAt + 2 * slots; }
__host__ __device__ constexpr int tmap_word(int slots) {
  return (2 * bank_words(slots) + 31) / 32 * 32;
}
constexpr int kPartialFloats = kTileRows * kHeadDim;
constexpr int kStatsFloats = kTileRows * 2;

// One work item as the producer hands it to the consumers (64 bytes in shared memory).
struct ItemInfo {
  int seq;       // sequence index in the batch
  int kvh;       // KV head
  int tok_abs;   // row of Q / O holding the item's first token
  int ntok;      // tokens in the item (1..21); 0 marks the end of the work
  int lim0;      // keys visible to the first token: positions < lim0 (+1 per later token)
  int page0;     // first page of this item's KV chunk (page index within the sequence)
  int page1;     // one past its last page
  int unit;      // split unit (sequence, KV head, row block) for the merge counters
  int nchunks;   // chunks of the unit that carry pages; 1 = the item writes O itself
  int slot;      // partial slot of this chunk; the unit's chunks are slots unit*S .. +nchunks-1
  int first_slot;  // the unit's chunk 0
  int kv_len;      // keys of the sequence: rows of its last page past it hold stale data
  int pad[4];
};
static_assert(sizeof(ItemInfo) == 64, "two records in 128 bytes");

}  // namespace kernrt::attention::prefill
