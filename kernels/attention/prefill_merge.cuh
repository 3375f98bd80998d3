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
// says so), or the counter scratch layout (prefill_shape.cuh).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention/params.h"
#include "attention/prefill_shape.cuh"
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

// Counts this CTA's chunk of the unit as written; true for the chunk that completed it. The
// caller's partial stores precede it in every thread.
__device__ __forceinline__ bool arrive_chunk(const KernelParams& p, const ItemInfo& it, int* word,
                                             int ct) {
  __threadfence();
  ptx::named_bar_sync(kBarConsumers, kConsumerThreads);
  if (ct == 0) *word = atomicAdd(p.ptr_multi_ctas_kv_counter + kArriveAt + it.unit, 1);
  ptx::named_bar_sync(kBarConsumers, kConsumerThreads);
  return *word == it.nchunks - 1;
}

// Waits until every chunk of the unit arrived (the caller's chunk did, and the others are held
// by running CTAs: the queue is empty when this is called).
__device__ __forceinline__ void wait_unit(const KernelParams& p, const ItemInfo& it, int ct) {
  if (ct == 0) {
    const int* arrived = p.ptr_multi_ctas_kv_counter + kArriveAt + it.unit;
    while (ptx::ld_acquire_gpu(arrived) < it.nchunks) __nanosleep(128);
  }
  ptx::named_bar_sync(kBarConsumers, kConsumerThreads);
  __threadfence();
}

// Claims row parts of the complete unit until none is left and merges each.
__device__ __forceinline__ void merge_claims(const KernelParams& p, const ItemInfo& it, int* word,
                                             int ct) {
  int* claims = p.ptr_multi_ctas_kv_counter + kArriveAt + p.max_num_ctas_kv + it.unit;
  const int parts = min(it.nchunks, kMaxParts);
  for (;;) {
    if (ct == 0) *word = atomicAdd(claims, 1);
    ptx::named_bar_sync(kBarConsumers, kConsumerThreads);
    const int part = *word;
    ptx::named_bar_sync(kBarConsumers, kConsumerThreads);  // read before the next claim
    if (part >= parts) break;
    merge_part(p, it, part, ct);
  }
}

}  // namespace kernrt::attention::prefill
