// Warpgroup math of the sm_90a prefill / verify attention kernel (attention_prefill.cu): the
// wgmma batches of one page (S = Q K^T, O += P V), the online softmax of one page in the
// registers of the wgmma accumulator layout, the rescale of O, the 16-byte output row store,
// and the broadcast that makes an item record warp-uniform for the compiler.
//
// Layouts (per consumer warpgroup of 128 threads, warp wi, lane = 4 g + t): accumulator rows
// 16 wi + g (register 4j + {0,1}) and 16 wi + g + 8 (4j + {2,3}), columns 8j + 2t + {0,1};
// the P fragments of the P V product are these accumulators as bf16x2 pairs (the wgmma A
// register layout equals the accumulator layout of m64nNk16).
// Deliberately does not check: that the 128 threads call together (wgmma is warpgroup-wide),
// or descriptor validity (the kernel's shared-memory map, prefill_shape.cuh).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention/prefill_shape.cuh"
#include "common/ptx/wgmma.cuh"

namespace kernrt::attention::prefill {

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// S (64 x 64) = Q rows (K-major, 4 chunks of 64 dims) x K tile^T (64 tokens x 256 dims): 16
// k-steps of 16 dims, advancing 32 bytes inside a 128-byte swizzled row, then a chunk. The
// descriptors are a base plus compile-time offsets (address field in 16-byte units, no carry
// out of its 14 bits below 256 KiB), so nothing but uniform adds sits between the wgmma.
__device__ __forceinline__ void issue_qk(float (&s)[32], uint64_t q_base, uint64_t k_base) {
  const uint64_t q_desc = ptx::wgmma_desc_uniform(q_base);
  const uint64_t k_desc = ptx::wgmma_desc_uniform(k_base);
#pragma unroll
  for (int kk = 0; kk < 16; ++kk) {
    const uint32_t qa = ((kk >> 2) * kQChunkBytes + (kk & 3) * 32) >> 4;
    const uint32_t kb = ((kk >> 2) * kBoxBytes + (kk & 3) * 32) >> 4;
    ptx::wgmma_m64n64k16_ss(s, q_desc + qa, k_desc + kb, kk > 0);
  }
}

// O (64 x 256) += P (64 x 64 keys, registers) x V tile (64 keys x 256 dims, MN-major): 4
// k-steps of 16 keys (2048 bytes of rows each); the 4 boxes of 64 dims are 8 KiB apart.
__device__ __forceinline__ void issue_pv(float (&o)[128], const uint32_t (&pa)[16],
                                         uint64_t v_base) {
  const uint64_t v_desc = ptx::wgmma_desc_uniform(v_base);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    ptx::wgmma_m64n256k16_rs(o, pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3],
                             v_desc + ((kk * 2048) >> 4), 1);
  }
}

// Online softmax of one page for the thread's rows a (s[4j], s[4j+1]: keys key0 + 8j + {0,1})
// and b (s[4j+2], s[4j+3]); keys >= the row's limit are masked when `mask`. Leaves P as the
// A fragments of the P V product (pa[2j] row a, pa[2j+1] row b) and the rescale of O.
__device__ __forceinline__ void softmax_page(float (&s)[32], uint32_t (&pa)[16], float (&m)[2],
                                             float (&l)[2], float (&alpha)[2], float scale,
                                             bool mask, int key0, int lim_a, int lim_b) {
  if (mask) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = key0 + 8 * j + e;
        if (key >= lim_a) s[4 * j + e] = -INFINITY;
        if (key >= lim_b) s[4 * j + 2 + e] = -INFINITY;
      }
    }
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
  float neg[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    const float m_new = fmaxf(m[i], mx[i] * scale);
    const float use = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet: no NaN
    alpha[i] = exp2f(m[i] - use);
    m[i] = m_new;
    neg[i] = -use;
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float p0 = exp2f(fmaf(s[4 * j], scale, neg[0]));
    const float p1 = exp2f(fmaf(s[4 * j + 1], scale, neg[0]));
    const float p2 = exp2f(fmaf(s[4 * j + 2], scale, neg[1]));
    const float p3 = exp2f(fmaf(s[4 * j + 3], scale, neg[1]));
    sum[0] += p0 + p1;
    sum[1] += p2 + p3;
    pa[2 * j] = pack_bf16x2(p0, p1);
    pa[2 * j + 1] = pack_bf16x2(p2, p3);
  }
  l[0] = l[0] * alpha[0] + sum[0];
  l[1] = l[1] * alpha[1] + sum[1];
}

// The record with every field broadcast from lane 0: the compiler then knows that branches on
// it are warp-uniform (a divergent branch before a wgmma makes ptxas serialise them all).
__device__ __forceinline__ ItemInfo uniform(const ItemInfo& in) {
  ItemInfo it;
  it.seq = __shfl_sync(0xffffffffu, in.seq, 0);
  it.kvh = __shfl_sync(0xffffffffu, in.kvh, 0);
  it.tok_abs = __shfl_sync(0xffffffffu, in.tok_abs, 0);
  it.ntok = __shfl_sync(0xffffffffu, in.ntok, 0);
  it.lim0 = __shfl_sync(0xffffffffu, in.lim0, 0);
  it.page0 = __shfl_sync(0xffffffffu, in.page0, 0);
  it.page1 = __shfl_sync(0xffffffffu, in.page1, 0);
  it.unit = __shfl_sync(0xffffffffu, in.unit, 0);
  it.nchunks = __shfl_sync(0xffffffffu, in.nchunks, 0);
  it.slot = __shfl_sync(0xffffffffu, in.slot, 0);
  it.first_slot = __shfl_sync(0xffffffffu, in.first_slot, 0);
  it.kv_len = __shfl_sync(0xffffffffu, in.kv_len, 0);
  return it;
}

// Stores one normalised output row: the quad's 4 threads hold columns 8j + 2t, +1 of it (bf16x2
// words v_j); a 4x4 transpose inside the quad per 4 words (two butterfly stages of shuffles)
// gives thread t columns 32q + 8t .. +7, one 16-byte store per group q (16 per row instead of
// 64 four-byte ones).
__device__ __forceinline__ void store_row(__nv_bfloat16* row, const float (&o)[128], int half,
                                          float inv, int t, bool live) {
  const bool b0 = t & 1, b1 = t & 2;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    uint32_t a[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * q + i;
      a[i] = pack_bf16x2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
    }
    // Stage 1 (lanes t, t ^ 1): thread t then holds M(t & ~1 | {0,1}, (t & 1) + {0, 2}).
    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, b0 ? a[0] : a[1], 1);
    const uint32_t r1 = __shfl_xor_sync(0xffffffffu, b0 ? a[2] : a[3], 1);
    const uint32_t c0 = b0 ? r0 : a[0], c1 = b0 ? a[1] : r0;
    const uint32_t c2 = b0 ? r1 : a[2], c3 = b0 ? a[3] : r1;
    // Stage 2 (lanes t, t ^ 2): thread t then holds M(0..3, t).
    const uint32_t s0 = __shfl_xor_sync(0xffffffffu, b1 ? c0 : c2, 2);
    const uint32_t s1 = __shfl_xor_sync(0xffffffffu, b1 ? c1 : c3, 2);
    uint4 v;
    v.x = b1 ? s0 : c0;
    v.y = b1 ? s1 : c1;
    v.z = b1 ? c2 : s0;
    v.w = b1 ? c3 : s1;
    if (live) *reinterpret_cast<uint4*>(row + 32 * q + 8 * t) = v;
  }
}

__device__ __forceinline__ void rescale(float (&o)[128], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    o[4 * j] *= alpha[0];
    o[4 * j + 1] *= alpha[0];
    o[4 * j + 2] *= alpha[1];
    o[4 * j + 3] *= alpha[1];
  }
}

}  // namespace kernrt::attention::prefill
