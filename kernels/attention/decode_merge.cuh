// One row slice of the final merge of a (sequence, KV head) in the sm_90a decode kernel: for
// query-head row r, O_r = sum_s O_s,r 2^(m_s,r - M) / L over the n partials of the group
// (slots 0..n-1), with M = max m_s,r and L = sum l_s,r 2^(m_s,r - M).
//
// The merge goes by rows so that several CTAs can share it (the CTA that completes a group
// and CTAs with no stream work left claim rows from a counter): one SM drew the partials at
// ~40-60 GB/s from L2 (validation/attention/notes.md, runs 16-18), so a whole group of 66
// partials took one CTA 11 us. A row's partials (1 KiB each) stream into the ring stages by
// 1-D bulk copies, 96 per batch, while warp 0 reduces the row's weights.
// Deliberately does not check: that no TMA is in flight into the ring (callers merge between
// segments), or that the n partials are written (callers acquired them through the done
// counter).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention/decode_shape.cuh"
#include "attention/params.h"
#include "common/ptx.cuh"

namespace kernrt::attention {

// Row `row` of partials [first, first + n) of the group at `slot0` into the ring (tid 0),
// completing on `bar`.
__device__ __forceinline__ void slice_issue(uint8_t* smem, uint64_t* bar, const float* part,
                                            int64_t slot0, int row, int first, int n) {
  ptx::mbarrier_arrive_expect_tx(bar, n * kSliceBytes);
  for (int j = 0; j < n; ++j) {
    const int64_t at = ((slot0 + first + j) * 8 + row) * kHeadDim;
    ptx::bulk_load(smem + j * kSliceBytes, part + at, kSliceBytes, bar);
  }
}

// Merges row `row` of the group whose n partials start at slot `slot0` and writes its 256
// bf16 outputs at `out_row`. `phase` counts this CTA's waits on `bar` across calls. The whole
// CTA calls it; it starts and ends with a __syncthreads.
__device__ __forceinline__ void merge_slice(const KernelParams& p, uint8_t* smem, uint64_t* bar,
                                            uint32_t& phase, int64_t slot0, int n, int row,
                                            __nv_bfloat16* out_row, int tid, int warp,
                                            int lane) {
  float* fac = reinterpret_cast<float*>(smem + kFacOffset);
  float4* half = reinterpret_cast<float4*>(smem + kHalfOffset);
  // The partials were acquired through the done counter (generic proxy) and the ring was
  // last touched through the generic proxy (warp merge, an earlier slice): both ordered
  // before the copy engine's accesses.
  ptx::fence_proxy_async();
  __syncthreads();
  if (tid == 0) slice_issue(smem, bar, p.ptr_partial_o, slot0, row, 0, min(n, kSliceBatch));
  if (warp == 0) {
    // Weights 2^(m_s - M) / L, lanes over partials. An empty result (L = 0) gets weights 0.
    float ms[kMaxUnits / 32], ls[kMaxUnits / 32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxUnits / 32; ++i) {
      const int j = lane + 32 * i;
      ms[i] = -INFINITY;
      ls[i] = 0.f;
      if (j < n) {
        const float2 st = __ldcg(
            reinterpret_cast<const float2*>(p.ptr_partial_stats + ((slot0 + j) * 8 + row) * 2));
        ms[i] = st.x;
        ls[i] = st.y;
      }
      m = fmaxf(m, ms[i]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float l = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxUnits / 32; ++i) {
      ms[i] = ms[i] == -INFINITY ? 0.f : exp2f(ms[i] - m);
      l += ls[i] * ms[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int i = 0; i < kMaxUnits / 32; ++i) {
      const int j = lane + 32 * i;
      if (j < n) fac[j] = ms[i] * inv;
    }
  }
  __syncthreads();

  // Thread tid sums output float4 tid % 64 over the partials of its parity (tid / 64).
  const int col = tid & 63;
  const int par = tid >> 6;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const float4* buf = reinterpret_cast<const float4*>(smem);
  for (int first = 0; first < n; first += kSliceBatch) {
    const int cnt = min(n - first, kSliceBatch);
    ptx::mbarrier_wait(bar, phase & 1);
    ++phase;
    for (int j = par; j < cnt; j += 2) {
      const float w = fac[first + j];
      const float4 x = buf[j * (kSliceBytes / 16) + col];
      acc.x += x.x * w;
      acc.y += x.y * w;
      acc.z += x.z * w;
      acc.w += x.w * w;
    }
    if (first + kSliceBatch < n) {
      __syncthreads();  // every thread is done with the batch
      if (tid == 0) {
        ptx::fence_proxy_async_shared();
        slice_issue(smem, bar, p.ptr_partial_o, slot0, row, first + kSliceBatch,
                    min(n - first - kSliceBatch, kSliceBatch));
      }
    }
  }
  if (par == 1) half[col] = acc;
  __syncthreads();
  if (par == 0) {
    const float4 h = half[col];
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out_row + col * 4);
    dst[0] = __floats2bfloat162_rn(acc.x + h.x, acc.y + h.y);
    dst[1] = __floats2bfloat162_rn(acc.z + h.z, acc.w + h.w);
  }
  __syncthreads();
}

// Small groups (n <= kWholeMergeMax partials) merge all 6 rows in one pass by one CTA: the
// per-row passes' fixed costs (a bulk-copy round trip each) outweigh splitting 12-96 KiB.
// Same contract as merge_slice; writes the 6 x 256 outputs at `out`.
__device__ __forceinline__ void merge_whole(const KernelParams& p, uint8_t* smem, uint64_t* bar,
                                            uint32_t& phase, int64_t slot0, int n,
                                            __nv_bfloat16* out, int tid, int warp, int lane) {
  float* fac = reinterpret_cast<float*>(smem + kFacOffset);  // [partial][8 rows]
  ptx::fence_proxy_async();
  __syncthreads();
  if (tid == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, n * kGroup * kSliceBytes);
    for (int j = 0; j < n; ++j) {
      ptx::bulk_load(smem + j * kGroup * kSliceBytes, p.ptr_partial_o + (slot0 + j) * 8 * kHeadDim,
                     kGroup * kSliceBytes, bar);
    }
  }
  // Weights: warp w reduces rows w and w + 4, lanes over partials.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp + r * kWarps;
    if (row >= kGroup) continue;
    float m = -INFINITY, ms = -INFINITY, ls = 0.f;
    if (lane < n) {
      const float2 st = __ldcg(
          reinterpret_cast<const float2*>(p.ptr_partial_stats + ((slot0 + lane) * 8 + row) * 2));
      ms = st.x;
      ls = st.y;
    }
    m = ms;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float f = ms == -INFINITY ? 0.f : exp2f(ms - m);
    float l = ls * f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane < n) fac[lane * 8 + row] = l > 0.f ? f / l : 0.f;
  }
  __syncthreads();
  constexpr int kPer = kGroup * kHeadDim / 4 / kThreads;  // 3 float4 outputs per thread
  static_assert(kPer * kThreads == kGroup * kHeadDim / 4, "outputs split evenly");
  ptx::mbarrier_wait(bar, phase & 1);
  ++phase;
  const float4* buf = reinterpret_cast<const float4*>(smem);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int idx = tid + k * kThreads;  // row * 64 + dim / 4, also the float4 in a partial
    const int row = idx / (kHeadDim / 4);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int j = 0; j < n; ++j) {
      const float w = fac[j * 8 + row];
      const float4 x = buf[j * (kGroup * kSliceBytes / 16) + idx];
      acc.x += x.x * w;
      acc.y += x.y * w;
      acc.z += x.z * w;
      acc.w += x.w * w;
    }
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + idx * 4);
    dst[0] = __floats2bfloat162_rn(acc.x, acc.y);
    dst[1] = __floats2bfloat162_rn(acc.z, acc.w);
  }
  __syncthreads();
}

}  // namespace kernrt::attention
