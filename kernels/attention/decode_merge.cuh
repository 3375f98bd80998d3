// The final merge of one (sequence, KV head) in the sm_90a decode kernel, run by the whole
// CTA whose partial completed the sequence's pages: O = sum_s O_s 2^(m_s - M) / L over the
// units that wrote a partial (bits of the contributor mask, in unit order), with
// M = max m_s and L = sum l_s 2^(m_s - M).
//
// The partials' rows 0-5 (6 KiB each, contiguous) stream into the three ring stages as two
// 48 KiB buffers of kMergeBatch partials by 1-D bulk copies while the weights are reduced into
// the (dead) Q tile: one SM's plain loads drew them at ~40 GB/s (5-6 us for 33 partials,
// validation/attention/notes.md run 15); the copy engine is not bound by a CTA's loads in
// flight. Deliberately does not check: that no TMA is in flight into the ring (the caller
// merges between segments), or that every contributor's partial is written (the caller
// acquired them through the done counter).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention/decode_shape.cuh"
#include "attention/params.h"
#include "common/ptx.cuh"

namespace kernrt::attention {

// Batch `b` (tid 0) of the partials listed in `list[0, count)`: their rows 0-5 into buffer
// `gb % 2` of the ring stages, completing on merge_bar[gb % 2] (gb = the CTA's batch number).
__device__ __forceinline__ void merge_issue(uint8_t* smem, uint64_t* merge_bar, const float* part,
                                            int64_t slot0, const int* list, int count, int b,
                                            uint32_t gb) {
  const int left = count - b * kMergeBatch;
  const int n = left < kMergeBatch ? left : kMergeBatch;
  uint8_t* dst = smem + (gb & 1) * kMergeBufBytes;
  ptx::mbarrier_arrive_expect_tx(&merge_bar[gb & 1], n * kMergeSplitBytes);
  for (int j = 0; j < n; ++j) {
    const int64_t row = (slot0 + list[b * kMergeBatch + j]) * 8;
    ptx::bulk_load(dst + j * kMergeSplitBytes, part + row * kHeadDim, kMergeSplitBytes,
                   &merge_bar[gb & 1]);
  }
}

// `mask` = the 3 contributor words of (seq, head); partial slot of unit u = slot0 + u (rows of
// 8 x 256 f32 O, 8 x 2 f32 stats). `batches` counts this CTA's merge batches across calls
// (barrier phases). Writes O's 6 x 256 bf16 rows at `out`.
__device__ __forceinline__ void merge_partials(const KernelParams& p, uint8_t* smem,
                                               uint64_t* merge_bar, uint32_t& batches, int* list,
                                               const int* mask, int64_t slot0,
                                               __nv_bfloat16* out, int tid, int warp, int lane) {
  const uint32_t w0 = static_cast<uint32_t>(__ldcg(mask));
  const uint32_t w1 = static_cast<uint32_t>(__ldcg(mask + 1));
  const uint32_t w2 = static_cast<uint32_t>(__ldcg(mask + 2));
  const int n0 = __popc(w0);
  const int n1 = __popc(w1);
  const int count = n0 + n1 + __popc(w2);
  if (warp < 3) {
    const uint32_t word = warp == 0 ? w0 : warp == 1 ? w1 : w2;
    if ((word >> lane) & 1u) {
      const int before = (warp > 0 ? n0 : 0) + (warp > 1 ? n1 : 0);
      list[before + __popc(word & ((1u << lane) - 1u))] = warp * 32 + lane;
    }
  }
  // The partials were acquired through the done counter (generic proxy) and the ring stages
  // were last touched by the warp merge: both ordered before the copy engine's accesses.
  ptx::fence_proxy_async();
  __syncthreads();
  const int nb = (count + kMergeBatch - 1) / kMergeBatch;
  if (tid == 0) {
    merge_issue(smem, merge_bar, p.ptr_partial_o, slot0, list, count, 0, batches);
    if (nb > 1) merge_issue(smem, merge_bar, p.ptr_partial_o, slot0, list, count, 1, batches + 1);
  }

  // Weights 2^(m_s - M) / L per (contributor, row) into the Q tile: warp w reduces rows w and
  // w + 4, lanes over contributors. An empty result (L = 0) gets weights 0, so O = 0.
  float* fac = reinterpret_cast<float*>(smem + kQOffset);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp + r * kWarps;
    if (row >= kGroup) continue;
    float ms[kMaxUnits / 32], ls[kMaxUnits / 32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxUnits / 32; ++i) {
      const int c = lane + 32 * i;
      ms[i] = -INFINITY;
      ls[i] = 0.f;
      if (c < count) {
        const float2 st = __ldcg(reinterpret_cast<const float2*>(
            p.ptr_partial_stats + ((slot0 + list[c]) * 8 + row) * 2));
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
      const int c = lane + 32 * i;
      if (c < count) fac[c * 8 + row] = ms[i] * inv;
    }
  }
  __syncthreads();

  // 6 rows x 64 float4 = 384 outputs, 3 per thread; output idx = row * 64 + dim / 4 is also
  // the float4 index inside one partial's 6 KiB in the buffer.
  constexpr int kPer = kGroup * kHeadDim / 4 / kThreads;
  static_assert(kPer * kThreads == kGroup * kHeadDim / 4, "outputs split evenly");
  float4 acc[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int b = 0; b < nb; ++b) {
    const uint32_t gb = batches + b;
    ptx::mbarrier_wait(&merge_bar[gb & 1], (gb >> 1) & 1);
    const float4* buf = reinterpret_cast<const float4*>(smem + (gb & 1) * kMergeBufBytes);
    const int left = count - b * kMergeBatch;
    const int n = left < kMergeBatch ? left : kMergeBatch;
    for (int j = 0; j < n; ++j) {
      const float* f = fac + (b * kMergeBatch + j) * 8;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int idx = tid + k * kThreads;
        const float wt = f[idx / (kHeadDim / 4)];
        const float4 x = buf[j * (kMergeSplitBytes / 16) + idx];
        acc[k].x += x.x * wt;
        acc[k].y += x.y * wt;
        acc[k].z += x.z * wt;
        acc[k].w += x.w * wt;
      }
    }
    if (b + 2 < nb) {
      __syncthreads();  // every thread is done with this buffer
      if (tid == 0) {
        ptx::fence_proxy_async_shared();
        merge_issue(smem, merge_bar, p.ptr_partial_o, slot0, list, count, b + 2, gb + 2);
      }
    }
  }
  batches += nb;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int idx = tid + k * kThreads;
    const int row = idx / (kHeadDim / 4);
    const int d = (idx % (kHeadDim / 4)) * 4;
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + row * kHeadDim + d);
    dst[0] = __floats2bfloat162_rn(acc[k].x, acc[k].y);
    dst[1] = __floats2bfloat162_rn(acc[k].z, acc[k].w);
  }
}

}  // namespace kernrt::attention
