// Split-KV merge of the sm_90a prefill / verify attention kernel: a unit whose keys were split
// into nchunks items gets one partial per chunk (unnormalised O in f32 and the rows' (max,
// sum)); once every chunk arrived, the unit's rows are merged in up to kMaxParts row parts,
// each claimed from a counter by whoever merges: the CTA whose chunk arrived last claims parts
// until none is left, and CTAs with no work left that wrote a chunk of the unit wait for it to
// complete and claim parts too (so a one-wave verify merges its units on many SMs at once).
// Merged rows go to O as bf16: O = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s, M = max m_s.
//
// All functions are called by the 256 consumer threads together (named barrier kBarConsumers).
// Deliberately does not check: that the slots hold this launch's partials (the arrival count
// says so), or the counter scratch layout (prefill_shape.cuh). `bank` is the launch's counter
// bank.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention/params.h"
#include "attention/prefill_shape.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/warpgroup.cuh"

namespace kernrt::attention::prefill {

__device__ __forceinline__ __nv_bfloat16* out_row(const KernelParams& p, const ItemInfo& it,
                                                  int row) {
  return static_cast<__nv_bfloat16*>(p.ptr_o) +
         (static_cast<int64_t>(it.tok_abs + row / kGroup) * p.num_hidden_elts_o +
          (it.kvh * kGroup + row % kGroup) * kHeadDim);
}

// Rows [r0, r1) of the unit: 64 threads per row (4 columns each), 4 rows at a time.
__device__ __forceinline__ void merge_part(const KernelParams& p, const ItemInfo& it, int part,
                                           int ct) {
  const int rows = kGroup * it.ntok;
  const int parts = min(it.nchunks, kMaxParts);
  const int per = (rows + parts - 1) / parts;
  const int r1 = min(rows, (part + 1) * per);
  const int c = (ct & 63) * 4;
  const int n = it.nchunks;
  for (int r = part * per + (ct >> 6); r < r1; r += kConsumerThreads / 64) {
    const float* st = p.ptr_partial_stats + static_cast<int64_t>(it.first_slot) * kStatsFloats + 2 * r;
    float mx = -INFINITY;
    for (int s = 0; s < n; ++s) mx = fmaxf(mx, __ldcg(st + s * kStatsFloats));
    float sum = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (mx != -INFINITY) {
      const float* po = p.ptr_partial_o + static_cast<int64_t>(it.first_slot) * kPartialFloats +
                        r * kHeadDim + c;
#pragma unroll 4
      for (int s = 0; s < n; ++s) {
        const float2 ml = __ldcg(reinterpret_cast<const float2*>(st + s * kStatsFloats));
        const float w = exp2f(ml.x - mx);  // 0 for a chunk that saw no key of this row
        const float4 v =
            __ldcg(reinterpret_cast<const float4*>(po + static_cast<int64_t>(s) * kPartialFloats));
        sum += w * ml.y;
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
      }
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    __nv_bfloat162 hi = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
    uint2 packed;
    packed.x = *reinterpret_cast<uint32_t*>(&lo);
    packed.y = *reinterpret_cast<uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(out_row(p, it, r) + c) = packed;
  }
}

// Rows [r0, r1) of the unit with every partial load of a batch in flight at once (one L2
// round trip per batch instead of two per row group): a thread holds R rows (4 apart) x C
// chunks per batch, merged online across batches (rescaled by the running max), so R x C
// float4 + float2 loads are issued before the first use. merge_part above waits twice per 4
// rows (stats, then O 4 chunks at a time): 64 dependent rounds for a 126-row unit of 4 chunks,
// 8 with R = 4, C = 4 here; a 16-chunk verify row takes 1 instead of 5.
template <int R, int C>
__device__ __forceinline__ void merge_rows(const KernelParams& p, const ItemInfo& it, int r_lo,
                                          int r1, int ct) {
  const int c = (ct & 63) * 4;
  const int n = it.nchunks;
  const float* st0 = p.ptr_partial_stats + static_cast<int64_t>(it.first_slot) * kStatsFloats;
  const float* po0 = p.ptr_partial_o + static_cast<int64_t>(it.first_slot) * kPartialFloats + c;
  for (int rb = r_lo + (ct >> 6); rb < r1; rb += 4 * R) {
    float mx[R], sum[R];
    float4 acc[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      mx[i] = -INFINITY;
      sum[i] = 0.f;
      acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int s0 = 0; s0 < n; s0 += C) {
      float2 ml[R][C];
      float4 v[R][C];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int r = rb + 4 * i;
#pragma unroll
        for (int k = 0; k < C; ++k) {
          const int s = s0 + k;
          ml[i][k] = make_float2(-INFINITY, 0.f);
          v[i][k] = make_float4(0.f, 0.f, 0.f, 0.f);
          if (r < r1 && s < n) {
            ml[i][k] = __ldcg(reinterpret_cast<const float2*>(st0 + s * kStatsFloats + 2 * r));
            v[i][k] = __ldcg(reinterpret_cast<const float4*>(
                po0 + static_cast<int64_t>(s) * kPartialFloats + r * kHeadDim));
          }
        }
      }
#pragma unroll
      for (int i = 0; i < R; ++i) {
        float m_new = mx[i];
#pragma unroll
        for (int k = 0; k < C; ++k) m_new = fmaxf(m_new, ml[i][k].x);
        if (m_new == -INFINITY) continue;  // no chunk so far saw a key of this row
        const float f = exp2f(mx[i] - m_new);  // 0 while mx was -inf
        sum[i] *= f;
        acc[i].x *= f;
        acc[i].y *= f;
        acc[i].z *= f;
        acc[i].w *= f;
#pragma unroll
        for (int k = 0; k < C; ++k) {
          const float w = exp2f(ml[i][k].x - m_new);  // 0 for a chunk without a key here
          sum[i] += w * ml[i][k].y;
          acc[i].x += w * v[i][k].x;
          acc[i].y += w * v[i][k].y;
          acc[i].z += w * v[i][k].z;
          acc[i].w += w * v[i][k].w;
        }
        mx[i] = m_new;
      }
    }
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int r = rb + 4 * i;
      if (r >= r1) continue;
      const float inv = sum[i] > 0.f ? 1.f / sum[i] : 0.f;
      __nv_bfloat162 lo = __floats2bfloat162_rn(acc[i].x * inv, acc[i].y * inv);
      __nv_bfloat162 hi = __floats2bfloat162_rn(acc[i].z * inv, acc[i].w * inv);
      uint2 packed;
      packed.x = *reinterpret_cast<uint32_t*>(&lo);
      packed.y = *reinterpret_cast<uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(out_row(p, it, r) + c) = packed;
    }
  }
}

// merge_part with merge_rows: many chunks (verify) one row x 16 chunks per round, few chunks
// (a split prefill unit) 4 rows x 4 chunks.
__device__ __forceinline__ void merge_part_batched(const KernelParams& p, const ItemInfo& it,
                                                   int part, int ct) {
  const int rows = kGroup * it.ntok;
  const int parts = min(it.nchunks, kMaxParts);
  const int per = (rows + parts - 1) / parts;
  const int r0 = part * per;
  const int r1 = min(rows, r0 + per);
  if (it.nchunks > 4) {
    merge_rows<1, 16>(p, it, r0, r1, ct);
  } else {
    merge_rows<4, 4>(p, it, r0, r1, ct);
  }
}

template <bool kBatched>
__device__ __forceinline__ void merge_one(const KernelParams& p, const ItemInfo& it, int part,
                                         int ct) {
  if constexpr (kBatched) {
    merge_part_batched(p, it, part, ct);
  } else {
    merge_part(p, it, part, ct);
  }
}

// Counts this CTA's chunk of the unit as written; true for the chunk that completed it. The
// caller's partial stores precede it in every thread. kLean: no per-thread fence; the
// consumers' barrier, then one acq_rel add by thread 0 publishes the CTA's stores (without
// kLean every thread fences first).
template <bool kLean>
__device__ __forceinline__ bool arrive_chunk(const ItemInfo& it, int* bank, int* word, int ct) {
  int* arrived = bank + kArriveAt + it.unit;
  if constexpr (!kLean) __threadfence();
  ptx::bar_sync(kBarConsumers, kConsumerThreads);
  if (ct == 0) *word = kLean ? ptx::atom_add_acq_rel_gpu(arrived, 1) : atomicAdd(arrived, 1);
  ptx::bar_sync(kBarConsumers, kConsumerThreads);
  return *word == it.nchunks - 1;
}

// Waits until every chunk of the unit arrived (the caller's chunk did, and the others are held
// by running CTAs: the queue is empty when this is called). kLean: thread 0's acquire and the
// barrier order every thread's partial loads after the writers' releases (no fence after it),
// and the spin does not sleep (the wait is short: the unit's chunks run together).
template <bool kLean>
__device__ __forceinline__ void wait_unit(const ItemInfo& it, const int* bank, int ct) {
  if (ct == 0) {
    const int* arrived = bank + kArriveAt + it.unit;
    while (ptx::ld_acquire_gpu(arrived) < it.nchunks) {
      if constexpr (!kLean) __nanosleep(128);
    }
  }
  ptx::bar_sync(kBarConsumers, kConsumerThreads);
  if constexpr (!kLean) __threadfence();
}

// Claims row parts of the complete unit until none is left and merges each.
template <bool kBatched>
__device__ __forceinline__ void merge_claims(const KernelParams& p, const ItemInfo& it, int* bank,
                                             int* word, int ct) {
  int* claims = bank + kArriveAt + p.max_num_ctas_kv + it.unit;
  const int parts = min(it.nchunks, kMaxParts);
  for (;;) {
    if (ct == 0) *word = atomicAdd(claims, 1);
    ptx::bar_sync(kBarConsumers, kConsumerThreads);
    const int part = *word;
    ptx::bar_sync(kBarConsumers, kConsumerThreads);  // read before the next claim
    if (part >= parts) break;
    merge_one<kBatched>(p, it, part, ct);
  }
}

}  // namespace kernrt::attention::prefill
