// Shared memory, barriers and the token span of one block of the KDA / GDN chunked forward
// (kda_chunk.cu). Owns the layout every role reads and writes, the named-barrier ids and the
// mapping of a block to its sequence (or context-parallel segment), head and value tile.
//
// Layout per block (dynamic shared memory, 171664 bytes):
//   raw[3]   the inputs of one chunk as loaded by cp.async (three chunks in flight)
//   prep     the prep warps' fp32 scratch: normalized q, k, alpha = exp(log decay), Akk,
//            the tf32 operands of KDA's tensor-core intra terms
//   op[2]    one chunk's tensor-core operands, double buffered between prep and state warps
//   ostage   per state warp, its 16 x 16 bf16 output tile on the way to a coalesced store
//   obase    the element offset of the block's output columns at token 0 of the span (read
//            at a fixed address after each chunk's barrier: held in registers through the
//            chunk it was the one spilled value of the state role at 128 registers)
// Rows are padded so that ldmatrix (8 rows of 16 bytes) and the prep's row accesses hit
// distinct banks: f16 rows of 128 channels are 272 bytes, fp32 rows 528 bytes, 16 x 16 f16
// tiles 48-byte rows.
//
// Not checked here: that dynamic shared memory is at least sizeof(ChunkSmem) (the manifest's
// shared_mem says so; the runtime checks it against the device limit at load).
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include "kda/params.h"

namespace kernrt::kda {

constexpr int kRowH = kHeadDim + 8;   // f16 / bf16 row of K channels, padded (272 B)
constexpr int kRowF = kHeadDim + 4;   // fp32 row, padded (528 B)
constexpr int kTileH = kChunk + 8;    // 16 x 16 f16 tile row (48 B)
constexpr int kVtRow = kChunk + 4;    // fp32 row of the transposed values (80 B)
constexpr int kStateWarps = 8;
constexpr int kPrepWarps = 8;
constexpr int kPrepThreads = 32 * kPrepWarps;
constexpr int kRawStages = 3;
constexpr int kOpStages = 2;
static_assert(kChunkThreads == 32 * (kStateWarps + kPrepWarps), "block = state + prep warps");
static_assert(kVTile == 16 * kStateWarps, "a state warp owns 16 value rows");
static_assert(kPrepThreads == 2 * kHeadDim && kHeadDim == kVTile,
              "two prep threads per key channel (and value column)");
constexpr int kStateThreads = 32 * kStateWarps;
// setmaxnreg per warpgroup (launched at 128 each): the state role's 128 registers left one
// value spilled, the prep role fits in fewer. 256 x 136 + 256 x 120 = 65536.
constexpr int kStateRegs = 136;
constexpr int kPrepRegs = 120;
static_assert(kStateThreads * kStateRegs + kPrepThreads * kPrepRegs <= 65536, "register file");

// Named barriers (0 is __syncthreads).
constexpr uint32_t kBarPrep = 1;                // the 128 prep threads
constexpr uint32_t kBarFull = 2;                // + stage: prep -> state, operands ready
constexpr uint32_t kBarEmpty = 2 + kOpStages;   // + stage: state -> prep, operands consumed
// EMPTY[s] joins the state threads (arrive) and the prep threads that write the stage's
// operands first (the f16 half of prep_channel, threads 0..127 of the prep role; the tf32
// half writes only the prep scratch and passes a prep barrier after them before it touches
// op[s]).
constexpr int kEmptyCount = kStateThreads + kHeadDim;

struct RawStage {
  uint16_t q[kChunk][kRowH];        // bf16
  uint16_t k[kChunk][kRowH];
  uint16_t v[kChunk][kRowH];        // the block's kVTile value columns
  float g[kChunk][kRowF];           // f32, or bf16 in the first 256 bytes of each row
  float beta[kChunk];               // raw beta (bf16 widened)
  float gs[kChunk];                 // GDN: raw per-head g (bf16 widened)
};

struct PrepScratch {
  float qh[kChunk][kRowF];          // scale * l2norm(q), 0 past the span
  float kh[kChunk][kRowF];          // l2norm(k), 0 past the span
  float al[kChunk][kRowF];          // exp(log decay), 1 past the span
  float akk[kChunk][kChunk];        // beta_i sum_c k_i k_j prod alpha (strictly lower)
  float beta[kChunk];               // effective beta, 0 past the span
  float rq[kChunk];                 // GDN: scale / |q_t| (0 past the span)
  float rk[kChunk];                 // GDN: 1 / |k_t| (0 past the span)
  // KDA's tensor-core intra terms when every channel's decay over the chunk is moderate:
  // f_t = exp(G_t - G_7) relative to token 7, tf32-rounded operands
  float qf[kChunk][kRowF];          // q^_t f_t
  float kf[kChunk][kRowF];          // k^_t f_t
  float ki[kChunk][kRowF];          // k^_t / f_t
  int32_t safe[kHeadDim / 32];      // per tf32-half prep warp: its channels' factors in range
};

struct Operands {
  __half qt[kChunk][kRowH];         // q^ * a,  a_t = prod_{u <= t} alpha_u
  __half kw[kChunk][kRowH];         // k^ * a
  __half kt[kChunk][kRowH];         // k^ * b,  b_t = prod_{u > t} alpha_u
  __half aqk[kChunk][kTileH];       // lower triangle incl. the diagonal
  __half tmb[kChunk][kTileH];       // (I + Akk)^-1 Diag(beta)
  float vt[kVTile][kVtRow];         // v transposed, fp32
  float gamma[kHeadDim];            // a_15: the chunk's decay of every key channel
};

struct ChunkSmem {
  RawStage raw[kRawStages];
  PrepScratch prep;
  Operands op[kOpStages];
  uint16_t ostage[kStateWarps][kChunk][kChunk];
  int64_t obase;
  int64_t pad;
};
// The manifests' shared_mem (kernrt/gen/kda.py CHUNK_SMEM, checked against this line by
// the generator's ctest).
constexpr int kChunkSmemBytes = 171616;
static_assert(sizeof(ChunkSmem) == kChunkSmemBytes, "dynamic shared memory of the chunk kernel");
static_assert(kChunkSmemBytes <= 227 * 1024, "227 KiB of opt-in shared memory on sm_90");
static_assert(sizeof(RawStage) % 16 == 0 && sizeof(PrepScratch) % 16 == 0 &&
                  sizeof(Operands) % 16 == 0,
              "16-byte aligned parts (cp.async, ldmatrix)");

// The tokens one block walks: `len` tokens from element offsets computed by `row`.
struct Span {
  int n;            // sequence
  int seg;          // context-parallel segment (0 without)
  int t0;           // first token of the span within its sequence
  int len;          // tokens in the span (may be 0)
  int seq_len;      // tokens in the sequence
  int64_t base;     // row index of token 0 of the sequence (varlen) or the batch row (dense)
  bool varlen;

  // Element offset of token t (relative to the span) for strides (seq, tok).
  __device__ __forceinline__ int64_t off(int64_t stride_seq, int64_t stride_tok, int t) const {
    const int64_t tok = t0 + t;
    return varlen ? (base + tok) * stride_tok : base * stride_seq + tok * stride_tok;
  }
};

__device__ __forceinline__ Span block_span(const KdaChunkParams& p) {
  Span s;
  const int segs = p.seg_chunks > 0 ? p.cp_segs : 1;
  s.n = blockIdx.z / segs;
  s.seg = blockIdx.z % segs;
  s.varlen = p.cu_seqlens != nullptr;
  if (s.varlen) {
    const int b = p.cu_seqlens[s.n];
    s.base = b;
    s.seq_len = p.cu_seqlens[s.n + 1] - b;
  } else {
    s.base = s.n;
    s.seq_len = p.tokens;
  }
  const int seg_len = p.seg_chunks > 0 ? p.seg_chunks * kChunk : s.seq_len;
  s.t0 = s.seg * seg_len;
  const int rest = s.seq_len - s.t0;
  // the last segment takes whatever is left, so no sequence is ever cut short
  s.len = rest < 0 ? 0 : (rest < seg_len || s.seg == segs - 1 ? rest : seg_len);
  return s;
}

}  // namespace kernrt::kda
