// Historical variant of kernels/attention/attention_decode.cu kept for side-by-side timing in
// tools/device/attention.sh (same entry name; not built by CMake, not shipped):
// v1 (commit 0f68e4e): 1 CTA/SM, static page ranges per split.
// See validation/attention/notes.md for its measured results.
// Paged decode attention for sm_90a behind the TRTLLM-GEN 1280-byte parameter block.
//
// Shape (compiled in): BF16 Q/K/V/O, 24 query heads over 4 KV heads (GQA group 6), head dim
// 256, page 64, one query token per sequence. Reads the block at FlashInfer's offsets
// (params.h): tensormaps Q@0, K@128, V@384; ptr_o@912, split counter@984, page table@1000,
// partial O@1008, partial stats@1016, seq lens@1080, batch@1116, splits@1156, page-table row
// length@1160, softmax scale (log2 domain)@1220.
//
// Grid (splits, 4 KV heads, seqs), block 160 = 4 consumer warps + 1 producer warp.
// CTA (s, h, b) owns the contiguous page range [s*pps, min((s+1)*pps, pages)) of sequence b,
// pps = ceil(pages / splits); splits past the last non-empty one exit at once. Per page the
// producer brings K and V of head h (64 tokens x 256 dims each, 4 TMA boxes of 64x64, 128B
// swizzle) into one of 3 stages. Consumer warp w takes tokens [16w, 16w+16) of every page and
// keeps its own online softmax (rows = the 6 query heads padded to 16 for mma.m16n8k16):
// S = Q K^T (2 n-tiles x 16 k-steps), P = exp2(S*scale - m), O += P V (32 n-tiles).
// Epilogue: the 4 warps merge in shared memory; a sequence with one active split writes O
// directly, otherwise each split writes unnormalised O and (max, sum) to the partial scratch,
// and the last split to arrive on the (b, h) counter merges all of them, writes O and puts
// the counter back to zero for the next launch or graph replay.
//
// Shared memory: 3 stages x 64 KiB (K boxes 0-3, V boxes 4-7, each 8 KiB and 1024-byte
// aligned for the 128B swizzle) + 4 KiB Q (4 boxes of 6 rows, rows 6-7 zeroed) + barriers,
// 201,792 bytes with alignment slack (227 KiB opt-in limit on sm_90): 1 CTA per SM.
//
// Deliberately does not check: that the block's head counts, page size and head dim equal
// the compiled shape, that page indices are inside the pool the K/V tensormaps span, that
// splits <= kMaxSplits, or that the counter scratch was zero before the first launch.
// Tokens past a sequence's length inside its last page are masked (K) and zeroed (V) here.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention/params.h"
#include "attention/warp_mma.cuh"
#include "common/ptx.cuh"

namespace kernrt::attention {
namespace {

// ---- tile arithmetic ----------------------------------------------------------------------
constexpr int kHeadDim = 256;
constexpr int kPage = 64;               // tokens per page = rows of one K/V box
constexpr int kGroup = 6;               // query heads per KV head
constexpr int kHeadsKv = 4;
constexpr int kConsumerWarps = 4;
constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kTokensPerWarp = kPage / kConsumerWarps;
constexpr int kStages = 3;
constexpr int kBoxBytes = 64 * kPage * 2;          // 64 dims x 64 tokens bf16
constexpr int kBoxesPerTile = kHeadDim / 64;      // 4 boxes cover one head's 256 dims
constexpr int kStageBytes = 2 * kBoxesPerTile * kBoxBytes;
constexpr int kQBoxBytes = 64 * kGroup * 2;        // what one Q box transfers
constexpr int kQBytes = kBoxesPerTile * 1024;      // each Q box at its own 1024-byte slot
constexpr int kQOffset = kStages * kStageBytes;
constexpr int kBarOffset = kQOffset + kQBytes;
constexpr int kSmemBytes = kBarOffset + 64 + 1024; // + slack to align the base to 1024
constexpr int kMaxSplits = 128;
constexpr int kMergeStride = kHeadDim + 8;         // padded f32 row in the warp merge
static_assert(kTokensPerWarp == 16, "one m16n8k16 k-step of tokens per warp and page");
static_assert(kStageBytes == 65536, "K+V of one page and head");
static_assert(kSmemBytes <= 227 * 1024, "fits the sm_90 opt-in shared memory");
static_assert(kConsumerWarps * 8 * kMergeStride * 4 + kConsumerWarps * 16 * 4 <= kStageBytes,
              "warp merge fits in stage 0");
static_assert(kMaxSplits * 8 * 4 <= kStageBytes, "split factors fit in stage 1");

// Byte offset of the 16-byte chunk `chunk` (0..31 across a 256-dim row) of tile row `row`
// inside a tile of kBoxesPerTile swizzled boxes: TMA's 128B swizzle XORs the chunk index
// within a 128-byte row with (row % 8).
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kBoxBytes + row * 128 +
                               (((chunk & 7) ^ (row & 7)) << 4));
}

struct Range {
  int pages;   // pages of this CTA
  int first;   // first page index (within the sequence)
  int active;  // non-empty splits of this sequence
};

__device__ __forceinline__ Range split_range(int len, int splits, int s) {
  const int pages = (len + kPage - 1) / kPage;
  Range r{0, 0, 0};
  if (pages == 0) return r;
  const int pps = (pages + splits - 1) / splits;
  r.active = (pages + pps - 1) / pps;
  r.first = s * pps;
  r.pages = r.first < pages ? min(pps, pages - r.first) : 0;
  return r;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    attention_decode_sm90a_bf16_q24kv4d256p64(const __grid_constant__ KernelParams p) {
  const int split = blockIdx.x;
  const int head = blockIdx.y;
  const int seq = blockIdx.z;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (seq >= p.batch_size) return;

  const int len = p.ptr_seq_lens_kv[seq];
  const int splits = p.max_num_ctas_kv;
  const Range range = split_range(len, splits, split);
  const int hq0 = head * kGroup;  // first query head of this group
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.ptr_o) +
                       (static_cast<int64_t>(seq) * p.num_hidden_elts_o + hq0 * kHeadDim);
  if (range.pages == 0) {
    // An empty sequence still gets a defined output (zeros) from split 0.
    if (range.active == 0 && split == 0) {
      for (int i = threadIdx.x; i < kGroup * kHeadDim; i += kThreads) out[i] = __float2bfloat16(0.f);
    }
    return;
  }

  // ---- smem layout ------------------------------------------------------------------------
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint8_t* q_tile = smem + kQOffset;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOffset);
  uint64_t* empty = full + kStages;
  uint64_t* q_bar = empty + kStages;
  int* last_flag = reinterpret_cast<int*>(q_bar + 1);

  // ---- barrier init -----------------------------------------------------------------------
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      ptx::mbarrier_init(&full[i], 1);
      ptx::mbarrier_init(&empty[i], kConsumerWarps);
    }
    ptx::mbarrier_init(q_bar, 1);
    ptx::fence_mbarrier_init();
  }
  // Rows 6 and 7 of each Q box are padding rows of the mma; TMA writes rows 0-5 only.
  if (threadIdx.x < kBoxesPerTile * 16) {
    const int box = threadIdx.x >> 4;
    const int word = threadIdx.x & 15;
    reinterpret_cast<uint4*>(q_tile + box * 1024 + kGroup * 128)[word] = make_uint4(0, 0, 0, 0);
  }
  __syncthreads();

  // ---- producer: Q once, then K and V of every page into the stage ring ---------------------
  if (warp == kConsumerWarps) {
    const int32_t* table = p.ptr_page_idx_kv +
                           static_cast<int64_t>(seq) * p.max_num_pages_per_seq_kv + range.first;
    if (lane == 0) {
      ptx::prefetch_tensormap(&p.tma_k);
      ptx::prefetch_tensormap(&p.tma_v);
      ptx::mbarrier_arrive_expect_tx(q_bar, kBoxesPerTile * kQBoxBytes);
      for (int j = 0; j < kBoxesPerTile; ++j) {
        ptx::tma_load_4d(q_tile + j * 1024, &p.tma_q, q_bar, j * 64, 0, head, seq);
      }
    }
    int page_idx = 0;
    for (int i = 0; i < range.pages; ++i) {
      // The warp reads 32 page-table entries at once; lane 0 picks them up by shuffle.
      if ((i & 31) == 0) page_idx = i + lane < range.pages ? table[i + lane] : 0;
      const int page = __shfl_sync(0xffffffffu, page_idx, i & 31);
      if (lane == 0) {
        const int stage = i % kStages;
        if (i >= kStages) ptx::mbarrier_wait(&empty[stage], ((i / kStages) - 1) & 1);
        uint8_t* dst = smem + stage * kStageBytes;
        ptx::mbarrier_arrive_expect_tx(&full[stage], kStageBytes);
        for (int j = 0; j < kBoxesPerTile; ++j) {
          ptx::tma_load_4d(dst + j * kBoxBytes, &p.tma_k, &full[stage], j * 64, 0, head, page);
        }
        for (int j = 0; j < kBoxesPerTile; ++j) {
          ptx::tma_load_4d(dst + (kBoxesPerTile + j) * kBoxBytes, &p.tma_v, &full[stage], j * 64,
                           0, head, page);
        }
      }
      __syncwarp();
    }
    return;
  }

  // ---- consumers: Q fragments (rows = query heads, only a0/a2 non-zero) --------------------
  const int g = lane >> 2;  // fragment row: query head within the group
  const int t = lane & 3;
  ptx::mbarrier_wait(q_bar, 0);
  uint32_t qa[16][2];
  {
    const uint32_t q_base = ptx::smem_u32(q_tile);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const int chunk = 4 * q + (lane >> 3);
      const int row = lane & 7;
      const uint32_t addr = q_base + (chunk >> 3) * 1024 + row * 128 + (((chunk & 7) ^ row) << 4);
      ldmatrix_x4(qa[2 * q][0], qa[2 * q][1], qa[2 * q + 1][0], qa[2 * q + 1][1], addr);
    }
  }

  float o[32][4];
#pragma unroll
  for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float row_max = -INFINITY;  // log2 domain, quad-uniform
  float row_sum = 0.f;        // this thread's share of the row's sum
  const float scale = p.scale_softmax_log2;
  const uint32_t smem_base = ptx::smem_u32(smem);

  // ---- consumers: main loop over pages -----------------------------------------------------
  for (int i = 0; i < range.pages; ++i) {
    const int stage = i % kStages;
    ptx::mbarrier_wait(&full[stage], (i / kStages) & 1);
    const int tok0 = (range.first + i) * kPage + warp * kTokensPerWarp;
    if (tok0 < len) {  // warp-uniform: at least one valid token in this warp's slice
      const uint32_t k_base = smem_base + stage * kStageBytes;
      const uint32_t v_base = k_base + kBoxesPerTile * kBoxBytes;
      uint8_t* v_tile = smem + stage * kStageBytes + kBoxesPerTile * kBoxBytes;
      if (tok0 + kTokensPerWarp > len) {
        // Tail slice: zero V rows past the length so that P = 0 never meets a NaN there.
        // This is the sequence's last page, so no later TMA writes this stage in this CTA.
        for (int idx = lane; idx < kTokensPerWarp * 32; idx += 32) {
          const int r = idx >> 5;
          if (tok0 + r >= len) {
            const int row = warp * kTokensPerWarp + r;
            const int chunk = idx & 31;
            *reinterpret_cast<uint4*>(v_tile + swz(row, chunk)) = make_uint4(0, 0, 0, 0);
          }
        }
        __syncwarp();
      }

      // S = Q K^T for tokens [16w, 16w+16): n-tile nt holds tokens 8nt..8nt+7.
      float s[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int row = warp * kTokensPerWarp + nt * 8 + (lane & 7);
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4(b0, b1, b2, b3, k_base + swz(row, 4 * q + (lane >> 3)));
          mma_m16n8k16_bf16(s[nt], qa[2 * q][0], 0u, qa[2 * q][1], 0u, b0, b1);
          mma_m16n8k16_bf16(s[nt], qa[2 * q + 1][0], 0u, qa[2 * q + 1][1], 0u, b2, b3);
        }
      }

      // Online softmax over row g (values d0, d1 of both n-tiles; rows g+8 are padding).
      float v[4];
      float mx = -INFINITY;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tok = tok0 + (e >> 1) * 8 + 2 * t + (e & 1);
        v[e] = tok < len ? s[e >> 1][e & 1] * scale : -INFINITY;
        mx = fmaxf(mx, v[e]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max, mx);  // finite: the slice has a valid token
      const float alpha = exp2f(row_max - m_new);
      float pr[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) pr[e] = exp2f(v[e] - m_new);
      row_sum = row_sum * alpha + (pr[0] + pr[1]) + (pr[2] + pr[3]);
      if (__any_sync(0xffffffffu, alpha != 1.f)) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          o[j][0] *= alpha;
          o[j][1] *= alpha;
        }
      }
      row_max = m_new;
      const uint32_t pa0 = pack_bf16x2(pr[0], pr[1]);  // tokens 2t, 2t+1
      const uint32_t pa2 = pack_bf16x2(pr[2], pr[3]);  // tokens 8+2t, 8+2t+1

      // O += P V: matrices (tokens 0-7 | 8-15) x (dims 16q..16q+7 | 16q+8..16q+15).
#pragma unroll
      for (int q = 0; q < 16; ++q) {
        const int mi = lane >> 3;
        const int row = warp * kTokensPerWarp + (mi & 1) * 8 + (lane & 7);
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3, v_base + swz(row, 2 * q + (mi >> 1)));
        mma_m16n8k16_bf16(o[2 * q], pa0, 0u, pa2, 0u, b0, b1);
        mma_m16n8k16_bf16(o[2 * q + 1], pa0, 0u, pa2, 0u, b2, b3);
      }
    }
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&empty[stage]);
  }

  // ---- epilogue: merge the 4 warps in shared memory (stage 0 is free now) ------------------
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
  float* merge_o = reinterpret_cast<float*>(smem);
  float* merge_ml = merge_o + kConsumerWarps * 8 * kMergeStride;  // [warp][row][max, sum]
  bar_sync(1, kConsumerWarps * 32);  // every warp is past its last ldmatrix of stage 0
  {
    float* dst = merge_o + (warp * 8 + g) * kMergeStride + 2 * t;
#pragma unroll
    for (int j = 0; j < 32; ++j) *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[j][0], o[j][1]);
    if (t == 0) {
      merge_ml[(warp * 8 + g) * 2] = row_max;
      merge_ml[(warp * 8 + g) * 2 + 1] = row_sum;
    }
  }
  bar_sync(1, kConsumerWarps * 32);

  const int tid = threadIdx.x;  // 0..127
  const bool direct = range.active == 1;
  const int64_t part_row0 =
      ((static_cast<int64_t>(seq) * kHeadsKv + head) * splits + split) * 8;  // [b][h][s][8]
  // Each thread owns dim pairs; 6 rows x 128 pairs = 768 pairs, 6 per thread.
  for (int pair = tid; pair < kGroup * kHeadDim / 2; pair += kConsumerWarps * 32) {
    const int row = pair / (kHeadDim / 2);
    const int d = (pair % (kHeadDim / 2)) * 2;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) m = fmaxf(m, merge_ml[(w * 8 + row) * 2]);
    float l = 0.f, ox = 0.f, oy = 0.f;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) {
      const float mw = merge_ml[(w * 8 + row) * 2];
      const float f = mw == -INFINITY ? 0.f : exp2f(mw - m);
      l += merge_ml[(w * 8 + row) * 2 + 1] * f;
      const float2 ow = *reinterpret_cast<const float2*>(merge_o + (w * 8 + row) * kMergeStride + d);
      ox += ow.x * f;
      oy += ow.y * f;
    }
    if (direct) {
      const float inv = 1.f / l;
      *reinterpret_cast<__nv_bfloat162*>(out + row * kHeadDim + d) =
          __floats2bfloat162_rn(ox * inv, oy * inv);
    } else {
      float* po = p.ptr_partial_o + (part_row0 + row) * kHeadDim + d;
      __stcg(reinterpret_cast<float2*>(po), make_float2(ox, oy));
      if (d == 0) __stcg(reinterpret_cast<float2*>(p.ptr_partial_stats + (part_row0 + row) * 2),
                         make_float2(m, l));
    }
  }
  if (direct) return;

  // ---- epilogue: the last split of (seq, head) merges all partials --------------------------
  __threadfence();
  bar_sync(1, kConsumerWarps * 32);
  int* counter = p.ptr_multi_ctas_kv_counter + seq * kHeadsKv + head;
  if (tid == 0) *last_flag = atomicAdd(counter, 1) == range.active - 1;
  bar_sync(1, kConsumerWarps * 32);
  if (!*last_flag) return;
  __threadfence();

  const int64_t seq_row0 = (static_cast<int64_t>(seq) * kHeadsKv + head) * splits * 8;
  float* factor = reinterpret_cast<float*>(smem + kStageBytes);  // [split][8] weights
  if (tid < kGroup) {
    const int row = tid;
    float m = -INFINITY;
    for (int sp = 0; sp < range.active; ++sp) {
      m = fmaxf(m, __ldcg(p.ptr_partial_stats + (seq_row0 + sp * 8 + row) * 2));
    }
    float l = 0.f;
    for (int sp = 0; sp < range.active; ++sp) {
      const float2 st = __ldcg(reinterpret_cast<const float2*>(p.ptr_partial_stats +
                                                               (seq_row0 + sp * 8 + row) * 2));
      const float f = exp2f(st.x - m);
      factor[sp * 8 + row] = f;
      l += st.y * f;
    }
    const float inv = 1.f / l;
    for (int sp = 0; sp < range.active; ++sp) factor[sp * 8 + row] *= inv;
  }
  bar_sync(1, kConsumerWarps * 32);
  // 6 rows x 64 float4 = 384 float4 outputs, 3 per thread.
  for (int idx = tid; idx < kGroup * kHeadDim / 4; idx += kConsumerWarps * 32) {
    const int row = idx / (kHeadDim / 4);
    const int d = (idx % (kHeadDim / 4)) * 4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4* src =
        reinterpret_cast<const float4*>(p.ptr_partial_o + (seq_row0 + row) * kHeadDim + d);
    const int64_t step = 8 * kHeadDim / 4;  // one split, in float4
#pragma unroll 4
    for (int sp = 0; sp < range.active; ++sp) {
      const float4 x = __ldcg(src + sp * step);
      const float f = factor[sp * 8 + row];
      acc.x += x.x * f;
      acc.y += x.y * f;
      acc.z += x.z * f;
      acc.w += x.w * f;
    }
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + row * kHeadDim + d);
    dst[0] = __floats2bfloat162_rn(acc.x, acc.y);
    dst[1] = __floats2bfloat162_rn(acc.z, acc.w);
  }
  if (tid == 0) *counter = 0;  // ready for the next launch or graph replay
}

}  // namespace kernrt::attention
