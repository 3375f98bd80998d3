// The split-merge math of the sm_90a decode kernel, written once: a set of online-softmax
// results (O_s unnormalised, m_s = max score in the log2 domain, l_s = sum of 2^(s - m_s))
// merges as O = sum_s O_s 2^(m_s - M) / L with M = max m_s and L = sum l_s 2^(m_s - M).
// Three merges use it: the 4 warps of a CTA at the end of a segment (write_segment), and the
// final merge of a (sequence, KV head) group's n partials (slots 0..n-1), by the whole group
// at once (GroupMerge::whole_group, n <= 16) or by query-head row (GroupMerge::one_row).
//
// The final merge goes in parts so that several CTAs can share it (the CTA that completes a
// group and CTAs with no stream work left claim parts from a counter, decode_schedule.cuh):
// one SM drew the partials at ~40-60 GB/s from L2 (validation/attention/notes.md, runs 16-18),
// so a whole group of 66 partials took one CTA 11 us. A part's partials (1 KiB rows) stream
// into the ring stages by 1-D bulk copies, 96 rows per batch, while the weights are reduced.
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

// 2^(m_s - M), the weight of a result with max m_s in a merge whose max is M; 0 for an empty
// result (m_s = -inf, no valid token), so that its stale O never meets a NaN.
__device__ __forceinline__ float merge_scale(float m_s, float m) {
  return m_s == -INFINITY ? 0.f : exp2f(m_s - m);
}

// The normalised weights 2^(m_s - M) / L of the results (m_s, l_s) a warp holds, N per lane,
// in place of ms; an empty merge (L = 0) gets weights 0. All 32 lanes call it.
template <int N>
__device__ __forceinline__ void warp_merge_weights(float (&ms)[N], const float (&ls)[N]) {
  float m = ms[0];
#pragma unroll
  for (int i = 1; i < N; ++i) m = fmaxf(m, ms[i]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float l = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    ms[i] = merge_scale(ms[i], m);
    l += ls[i] * ms[i];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) ms[i] *= inv;
}

// ---- end of a segment: the CTA's 4 warps merged --------------------------------------------
// Each warp put its rows' O (R rows x 256, row stride kMergeStride: R = 8 with the mma's
// padding rows, 6 without) and (max, sum) in `area` of the ring (no TMA is in flight
// there). The CTA's (m, l, O at dims d, d + 1) of query-head row `row`.
template <int R>
__device__ __forceinline__ void warps_merged(const uint8_t* area, int row, int d, float& m,
                                             float& l, float& ox, float& oy) {
  static_assert(R == 8 || R == kGroup, "rows per warp: all 8 of the mma, or the group's 6");
  const float* merge_o = reinterpret_cast<const float*>(area);
  const float* merge_ml = merge_o + kWarps * R * kMergeStride;  // [warp][row of 8][max, sum]
  m = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, merge_ml[(w * 8 + row) * 2]);
  l = ox = oy = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float f = merge_scale(merge_ml[(w * 8 + row) * 2], m);
    l += merge_ml[(w * 8 + row) * 2 + 1] * f;
    const float2 ow = *reinterpret_cast<const float2*>(merge_o + (w * R + row) * kMergeStride + d);
    ox += ow.x * f;
    oy += ow.y * f;
  }
}

// Output dims d, d + 1 of query-head row `row` of (seq, head): O / l in bf16 (l >= 1: the
// row's largest score adds 2^0).
__device__ __forceinline__ void store_out(const KernelParams& p, int seq, int head, int row, int d,
                                          float l, float ox, float oy) {
  const float inv = 1.f / l;
  *reinterpret_cast<__nv_bfloat162*>(
      static_cast<__nv_bfloat16*>(p.ptr_o) + static_cast<int64_t>(seq) * p.num_hidden_elts_o +
      (head * kGroup + row) * kHeadDim + d) = __floats2bfloat162_rn(ox * inv, oy * inv);
}

// The first of the 8 rows of partial slot `slot` of (seq, head) in the partial buffers.
__device__ __forceinline__ int64_t partial_row0(const KernelParams& p, int seq, int head,
                                                int slot) {
  return ((static_cast<int64_t>(head) * p.batch_size + seq) * p.max_num_ctas_kv + slot) * 8;
}

// Dims d, d + 1 of query-head row `row` of the partial at `row0` (partial_row0): unnormalised
// O, and (m, l) with d = 0.
__device__ __forceinline__ void store_partial(const KernelParams& p, int64_t row0, int row, int d,
                                              float m, float l, float ox, float oy) {
  __stcg(reinterpret_cast<float2*>(p.ptr_partial_o + (row0 + row) * kHeadDim + d),
         make_float2(ox, oy));
  if (d == 0) {
    __stcg(reinterpret_cast<float2*>(p.ptr_partial_stats + (row0 + row) * 2), make_float2(m, l));
  }
}

// Writes the CTA's result for (seq, head) from the warp merge in `area`: the normalised
// output when the CTA did every page of the sequence (`alone`), else its unnormalised partial
// O and (m, l) in partial slot `slot`. The whole CTA calls it.
template <int R>
__device__ __forceinline__ void write_segment(const KernelParams& p, const uint8_t* area, int seq,
                                              int slot, int head, bool alone, int tid) {
  const int64_t row0 = partial_row0(p, seq, head, slot);
  // Each thread owns dim pairs; 6 rows x 128 pairs = 768 pairs, 6 per thread.
  for (int pair = tid; pair < kGroup * kHeadDim / 2; pair += kThreads) {
    const int row = pair / (kHeadDim / 2);
    const int d = (pair % (kHeadDim / 2)) * 2;
    float m, l, ox, oy;
    warps_merged<R>(area, row, d, m, l, ox, oy);
    if (alone) {
      store_out(p, seq, head, row, d, l, ox, oy);
      continue;
    }
    store_partial(p, row0, row, d, m, l, ox, oy);
  }
}

// Row `row` of partials [first, first + n) of the group at `slot0` into the ring (tid 0),
// completing on `bar`.
__device__ __forceinline__ void issue_row(uint8_t* smem, uint64_t* bar, const float* part,
                                          int64_t slot0, int row, int first, int n) {
  ptx::mbarrier_arrive_expect_tx(bar, n * kSliceBytes);
  for (int j = 0; j < n; ++j) {
    const int64_t at = ((slot0 + first + j) * 8 + row) * kHeadDim;
    ptx::bulk_load(smem + j * kSliceBytes, part + at, kSliceBytes, bar);
  }
}

// ---- the final merge of a group --------------------------------------------------------------
// One CTA's view: the ring (smem), the barrier its bulk copies complete on, and how many waits
// on that barrier it made so far (across every part it merges). The whole CTA calls each
// method; each starts and ends with a __syncthreads.
struct GroupMerge {
  const KernelParams& p;
  uint8_t* smem;
  uint64_t* bar;
  uint32_t phase;
  int tid, warp, lane;

  // Merges part `which` of the `parts` = merge_parts(n) of the final merge of (seq, head),
  // whose n partials are written: the whole group when it is one part, else query-head row
  // `which`.
  __device__ __forceinline__ void part(int seq, int head, int n, int parts, int which) {
    const int64_t slot0 = (static_cast<int64_t>(head) * p.batch_size + seq) * p.max_num_ctas_kv;
    __nv_bfloat16* out =
        static_cast<__nv_bfloat16*>(p.ptr_o) +
        (static_cast<int64_t>(seq) * p.num_hidden_elts_o + head * kGroup * kHeadDim);
    if (parts == 1) {
      whole_group(slot0, n, out);
    } else {
      one_row(slot0, n, which, out + which * kHeadDim);
    }
  }

  // Merges row `row` of the group whose n partials start at slot `slot0` and writes its 256
  // bf16 outputs at `out_row`.
  __device__ __forceinline__ void one_row(int64_t slot0, int n, int row, __nv_bfloat16* out_row) {
    float* fac = reinterpret_cast<float*>(smem + kFacOffset);
    float4* half = reinterpret_cast<float4*>(smem + kHalfOffset);
    // The partials were acquired through the done counter (generic proxy) and the ring was
    // last touched through the generic proxy (warp merge, an earlier row): both ordered
    // before the copy engine's accesses.
    ptx::fence_proxy_async();
    __syncthreads();
    if (tid == 0) issue_row(smem, bar, p.ptr_partial_o, slot0, row, 0, min(n, kSliceBatch));
    if (warp == 0) {
      // Weights, lanes over partials (4 per lane).
      float ms[kMaxUnits / 32], ls[kMaxUnits / 32];
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
      }
      warp_merge_weights(ms, ls);
#pragma unroll
      for (int i = 0; i < kMaxUnits / 32; ++i) {
        const int j = lane + 32 * i;
        if (j < n) fac[j] = ms[i];
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
          issue_row(smem, bar, p.ptr_partial_o, slot0, row, first + kSliceBatch,
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
  // Writes the 6 x 256 outputs at `out`.
  __device__ __forceinline__ void whole_group(int64_t slot0, int n, __nv_bfloat16* out) {
    float* fac = reinterpret_cast<float*>(smem + kFacOffset);  // [partial][8 rows]
    ptx::fence_proxy_async();
    __syncthreads();
    if (tid == 0) {
      ptx::mbarrier_arrive_expect_tx(bar, n * kGroup * kSliceBytes);
      for (int j = 0; j < n; ++j) {
        ptx::bulk_load(smem + j * kGroup * kSliceBytes,
                       p.ptr_partial_o + (slot0 + j) * 8 * kHeadDim, kGroup * kSliceBytes, bar);
      }
    }
    // Weights: warp w reduces rows w and w + 4, lanes over partials (one per lane).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = warp + r * kWarps;
      if (row >= kGroup) continue;
      float ms[1] = {-INFINITY}, ls[1] = {0.f};
      if (lane < n) {
        const float2 st = __ldcg(
            reinterpret_cast<const float2*>(p.ptr_partial_stats + ((slot0 + lane) * 8 + row) * 2));
        ms[0] = st.x;
        ls[0] = st.y;
      }
      warp_merge_weights(ms, ls);
      if (lane < n) fac[lane * 8 + row] = ms[0];
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
};

}  // namespace kernrt::attention
