// The per-thread walk of the conv forward (conv_fwd.cu), shared by all its walks: state-line
// addressing, the running window (`Walk`), one row's output step (`step_row`: sequence
// switch, y, window shift, final state), a block's span bounds (`locate`) and the window
// before a span (`enter_span`). y's store: KERNRT_CONV_STORE 1 plain st.global (default:
// run 9's copy probes and ring variants ran 0.6-0.8 % faster with it than with .cs), 0
// st.global.cs (runs 1-8), 2 st.global.L1::no_allocate. The W-1 rows before a span:
// KERNRT_CONV_HALO_NC 1 plain ld.global.nc (default since run 10: 1.8-3.0 % faster in run 9),
// 0 ld_nc_v4 (.L1::no_allocate.L2::256B, runs 3-9). Measurement switches:
// KERNRT_CONV_IDENTITY (y = x) and KERNRT_CONV_TANH_SILU (silu through one tanh.approx).
//
// Not checked here: what conv_fwd.cu's header lists (alignment, D % 8, W <= 4, monotone
// cu_seqlens, non-overlapping initial and final states).
#pragma once

#include <stdint.h>

#include "conv/conv_vec.cuh"
#include "conv/params.h"

#ifndef KERNRT_CONV_IDENTITY
#define KERNRT_CONV_IDENTITY 0
#endif
#ifndef KERNRT_CONV_TANH_SILU
#define KERNRT_CONV_TANH_SILU 0
#endif
#ifndef KERNRT_CONV_STORE
#define KERNRT_CONV_STORE 1
#endif
#ifndef KERNRT_CONV_HALO_NC
#define KERNRT_CONV_HALO_NC 1
#endif

namespace kernrt_conv {

// ---- state addressing ------------------------------------------------------------------
__device__ __forceinline__ const void* state_line(const void* base, const int32_t* lines,
                                                  int64_t stride, int n) {
  if (base == nullptr) return nullptr;
  int64_t line = n;
  if (lines != nullptr) {
    line = lines[n];
    if (line == 0) return nullptr;  // null line: no state
  }
  return static_cast<const char*>(base) + line * stride;
}

// Window for a sequence start: slots from the initial state, or zeros.
template <typename E, int S>
__device__ __forceinline__ void window_from_state(E tag, const ConvFwdParams& p, int n, int c0,
                                                  float (&win)[S][8]) {
  const void* line = state_line(p.init_state, p.init_lines, p.init_stride, n);
  if (line != nullptr) {
    load_state(tag, line, c0, win);
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j)
#pragma unroll
      for (int c = 0; c < 8; ++c) win[j][c] = 0.f;
  }
}

__device__ __forceinline__ float act_fwd(float z, bool silu) {
#if KERNRT_CONV_TANH_SILU
  if (!silu) return z;
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(0.5f * z));
  const float h = 0.5f * z;
  return fmaf(h, t, h);
#else
  return activate(z, silu);
#endif
}

// One output row's 16-byte vector, with the store hint KERNRT_CONV_STORE picks.
__device__ __forceinline__ void st_y_v4(void* p, uint4 v) {
#if KERNRT_CONV_STORE == 1
  st_v4(p, v);
#elif KERNRT_CONV_STORE == 2
  asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#else
  st_cs_v4(p, v);
#endif
}

// ---- the walk ----------------------------------------------------------------------------
// Running state of one thread's walk.
template <int W>
struct Walk {
  float w[W][8], b[8];
  float win[W - 1][8];  // win[j] = x~[t - (W-1) + j] before row t
  int n, end;           // current sequence and its end row
  bool silu;
};

// The current row in fp32: unpacked from its 16-byte vector (walks 0-3), or already
// unpacked (walk 4 unpacks first so the vector's registers take the next load).
template <typename E>
__device__ __forceinline__ void row_f32(E tag, const uint4& v, float (&cur)[8]) {
  unpack8(tag, v, cur);
}
template <typename E>
__device__ __forceinline__ void row_f32(E, const float (&v)[8], float (&cur)[8]) {
#pragma unroll
  for (int c = 0; c < 8; ++c) cur[c] = v[c];
}

// Row t (v: its vector or its fp32 values): y, the window shift, a sequence switch before
// it and the final state after it.
template <typename E, int W, typename Row>
__device__ __forceinline__ void step_row(const ConvFwdParams& p, Walk<W>& k, const Row& v,
                                         uint16_t* y, int c0, int t) {
  constexpr int S = W - 1;
  const E tag{};
  if (t == k.end) {  // next packed sequence (varlen only): restart the window
    do {
      ++k.n;
      k.end = p.cu_seqlens[k.n + 1];
    } while (k.end == t);
    window_from_state(tag, p, k.n, c0, k.win);
  }
  float cur[8], out[8];
  row_f32(tag, v, cur);
#pragma unroll
  for (int c = 0; c < 8; ++c) {
#if KERNRT_CONV_IDENTITY
    out[c] = cur[c];
#else
    out[c] = act_fwd(conv_dot<W>(k.w, k.win, cur, k.b, c), k.silu);
#endif
  }
  st_y_v4(y + static_cast<int64_t>(t) * p.y_stride_tok, pack8(tag, out));
#pragma unroll
  for (int j = 0; j + 1 < S; ++j)
#pragma unroll
    for (int c = 0; c < 8; ++c) k.win[j][c] = k.win[j + 1][c];
#pragma unroll
  for (int c = 0; c < 8; ++c) k.win[S - 1][c] = cur[c];
  if (t == k.end - 1 && p.final_state != nullptr) {
    void* line = const_cast<void*>(state_line(p.final_state, p.final_lines, p.final_stride, k.n));
    if (line != nullptr) store_state(tag, line, c0, k.win);
  }
}

// Span bounds of this block: which sequence holds row t0, where it starts and ends; x/y
// advanced to the batch row (dense). False if the span is empty (block-uniform).
template <int W>
__device__ __forceinline__ bool locate(const ConvFwdParams& p, Walk<W>& k, int t0, int span,
                                       const uint16_t*& x, uint16_t*& y, int& start,
                                       int& stop) {
  int limit;
  x = static_cast<const uint16_t*>(p.x);
  y = static_cast<uint16_t*>(p.y);
  if (p.cu_seqlens != nullptr) {
    const int32_t* cu = p.cu_seqlens;
    limit = cu[p.seqs];
    if (t0 >= limit) return false;
    int lo = 0, hi = p.seqs - 1;  // largest n with cu[n] <= t0 (skips empty sequences)
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (cu[mid] <= t0) lo = mid;
      else hi = mid - 1;
    }
    k.n = lo;
    start = cu[k.n];
    k.end = cu[k.n + 1];
  } else {
    limit = p.tokens;
    if (t0 >= limit) return false;
    k.n = blockIdx.z;
    start = 0;
    k.end = limit;
    x += k.n * p.x_stride_seq;
    y += k.n * p.y_stride_seq;
  }
  stop = min(limit, t0 + span);
  return true;
}

// The window before t0: x rows inside the sequence, else initial-state slots / zeros.
// `x` points at the thread's channels.
template <typename E, int W>
__device__ __forceinline__ void enter_span(const ConvFwdParams& p, Walk<W>& k,
                                           const uint16_t* x, int c0, int t0, int start) {
  constexpr int S = W - 1;
  const E tag{};
  if (t0 - S < start) window_from_state(tag, p, k.n, c0, k.win);
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int s = t0 - S + j;
    if (s >= start) {
#if KERNRT_CONV_HALO_NC
      const uint16_t* row = x + static_cast<int64_t>(s) * p.x_stride_tok;
      unpack8(tag, __ldg(reinterpret_cast<const uint4*>(row)), k.win[j]);
#else
      unpack8(tag, ld_nc_v4(x + static_cast<int64_t>(s) * p.x_stride_tok), k.win[j]);
#endif
    } else if (s - start + S > j) {
      // The state slot that lands at window position j: slot (s - start + S) >= j.
#pragma unroll
      for (int i = 0; i < S; ++i)
        if (i == s - start + S)
#pragma unroll
          for (int c = 0; c < 8; ++c) k.win[j][c] = k.win[i][c];
    }
  }
}

}  // namespace kernrt_conv
