// The per-thread walk of the conv forward (conv_fwd.cu's ring consumers): state-line addressing,
// the running window (`Walk`), one row's output (`row_out`, `emit_row`), the window shift,
// the sequence switch, the final state after a sequence's last row (`write_final_after`),
// a block's span bounds (`locate`) and the window before a span (`enter_span`). A thread
// owns N consecutive channels.
//
// Not checked here: what conv_fwd.cu's header lists (alignment, D % 8, W <= 4, monotone
// cu_seqlens, non-overlapping initial and final states).
#pragma once

#include <stdint.h>

#include "conv/conv_vec.cuh"
#include "conv/params.h"

namespace kernrt::conv {

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

// Running state of one thread's walk.
template <int W, int N>
struct Walk {
  float w[W][N], b[N];
  float win[W - 1][N];  // win[j] = x~[t - (W-1) + j] before row t
  int n, end;           // current sequence and its end row
  bool silu;
  bool full;            // state lines are fla's [D, W] (kFlagStateFull)
};

template <int W, int N>
__device__ __forceinline__ void start_walk(const ConvFwdParams& p, Walk<W, N>& k, int c0) {
  load_weights<W, N>(p.weight, p.bias, (p.flags & kFlagWeightF32) != 0, c0, k.w, k.b);
  k.silu = (p.flags & kFlagSilu) != 0;
  k.full = (p.flags & kFlagStateFull) != 0;
}

// Window for a sequence start: slots from the initial state, or zeros.
template <typename E, int W, int N>
__device__ __forceinline__ void window_from_state(E tag, const ConvFwdParams& p, Walk<W, N>& k,
                                                  int c0) {
  const void* line = state_line(p.init_state, p.init_lines, p.init_stride, k.n);
  if (line != nullptr) {
    if (k.full) load_state<E, W, W - 1, N>(tag, line, c0, k.win);
    else load_state<E, W - 1, W - 1, N>(tag, line, c0, k.win);
  } else {
#pragma unroll
    for (int j = 0; j < W - 1; ++j)
#pragma unroll
      for (int c = 0; c < N; ++c) k.win[j][c] = 0.f;
  }
}

// Row t's activated outputs from its fp32 values (conv_dot's order, then act).
template <int W, int N>
__device__ __forceinline__ void row_out(const Walk<W, N>& k, const float (&cur)[N], float (&out)[N]) {
#pragma unroll
  for (int c = 0; c < N; ++c) out[c] = activate(conv_dot<W, N>(k.w, k.win, cur, k.b, c), k.silu);
}

// Row t's output from its fp32 values: y = act(z) (plus the residual row, when there is
// one). `y` and `res` point at the thread's channels of the batch row (dense) or row 0.
template <typename E, int W, int N>
__device__ __forceinline__ void emit_row(const ConvFwdParams& p, const Walk<W, N>& k,
                                         const float (&cur)[N], uint16_t* y,
                                         const uint16_t* res, int t) {
  const E tag{};
  float out[N];
  row_out(k, cur, out);
  if (res != nullptr) {  // fla: y = act(z) + residual in fp32, one rounding
    float r[N];
    unpack(tag, ld_nc<N>(res + static_cast<int64_t>(t) * p.res_stride_tok), r);
#pragma unroll
    for (int c = 0; c < N; ++c) out[c] += r[c];
  }
  st<N>(y + static_cast<int64_t>(t) * p.y_stride_tok, pack(tag, out));
}

template <int W, int N>
__device__ __forceinline__ void shift_window(Walk<W, N>& k, const float (&cur)[N]) {
#pragma unroll
  for (int j = 0; j + 1 < W - 1; ++j)
#pragma unroll
    for (int c = 0; c < N; ++c) k.win[j][c] = k.win[j + 1][c];
#pragma unroll
  for (int c = 0; c < N; ++c) k.win[W - 2][c] = cur[c];
}

// Moves the walk to the sequence that holds row t (varlen; t is a sequence end, empty
// sequences are skipped) and restarts its window from that sequence's initial state.
template <typename E, int W, int N>
__device__ __forceinline__ void next_sequence(const ConvFwdParams& p, Walk<W, N>& k, int c0, int t) {
  do {
    ++k.n;
    k.end = p.cu_seqlens[k.n + 1];
  } while (k.end == t);
  window_from_state(E{}, p, k, c0);
}

// The final state once the walk has passed its sequence's last row (the forward checks
// sequence ends per group, not per row): the window holds x~[end-W+1 ..
// end-1]; fla's full lines also take x~[end-W], reloaded here (x row, initial-state slot
// or zero). `x` points at the thread's channels.
template <typename E, int W, int N>
__device__ __forceinline__ void write_final_after(const ConvFwdParams& p, const Walk<W, N>& k,
                                                  const uint16_t* x, int c0, int start) {
  const E tag{};
  void* line = const_cast<void*>(state_line(p.final_state, p.final_lines, p.final_stride, k.n));
  if (line == nullptr) return;
  if (!k.full) {
    store_state<E, W - 1, N>(tag, line, c0, k.win);
    return;
  }
  float s[W][N];
#pragma unroll
  for (int j = 0; j < W - 1; ++j)
#pragma unroll
    for (int c = 0; c < N; ++c) s[j + 1][c] = k.win[j][c];
  const int r = k.end - W;
#pragma unroll
  for (int c = 0; c < N; ++c) s[0][c] = 0.f;
  if (r >= start) {
    unpack(tag, ld_nc<N>(x + static_cast<int64_t>(r) * p.x_stride_tok), s[0]);
  } else if (const void* init = state_line(p.init_state, p.init_lines, p.init_stride, k.n)) {
    // x~[r] is fla's initial slot q = W + (r - start) in 1 .. W-1: one 16-bit load per
    // channel (a runtime slot index into registers would go through local memory)
    const int q = W + r - start;
    const uint16_t* e = static_cast<const uint16_t*>(init) + static_cast<int64_t>(c0) * W + q;
#pragma unroll
    for (int c = 0; c < N; ++c) s[0][c] = to_f32(tag, e[c * W]);
  }
  store_state<E, W, N>(tag, line, c0, s);
}

// Span bounds of this block: which sequence holds row t0, where it starts and ends; x, y
// and res advanced to the batch row (dense). False if the span is empty (block-uniform).
template <int W, int N>
__device__ __forceinline__ bool locate(const ConvFwdParams& p, Walk<W, N>& k, int t0, int span,
                                       const uint16_t*& x, uint16_t*& y, const uint16_t*& res,
                                       int& start, int& stop) {
  int limit;
  x = static_cast<const uint16_t*>(p.x);
  y = static_cast<uint16_t*>(p.y);
  res = static_cast<const uint16_t*>(p.residual);
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
    if (res != nullptr) res += k.n * p.res_stride_seq;
  }
  stop = min(limit, t0 + span);
  return true;
}

// The window before t0: x rows inside the sequence (the previous span's rows: L2 hits, plain
// ld.global.nc, 1.8-3.0 % faster on the H200 than with .L1::no_allocate.L2::256B, notes.md),
// else initial-state slots / zeros. `x` points at the thread's channels.
template <typename E, int W, int N>
__device__ __forceinline__ void enter_span(const ConvFwdParams& p, Walk<W, N>& k,
                                           const uint16_t* x, int c0, int t0, int start) {
  constexpr int S = W - 1;
  const E tag{};
  if (t0 - S < start) window_from_state(tag, p, k, c0);
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int s = t0 - S + j;
    if (s >= start) {
      unpack(tag, ld_nc<N>(x + static_cast<int64_t>(s) * p.x_stride_tok), k.win[j]);
    } else if (s - start + S > j) {
      // The state slot that lands at window position j: slot (s - start + S) >= j.
#pragma unroll
      for (int i = 0; i < S; ++i)
        if (i == s - start + S)
#pragma unroll
          for (int c = 0; c < N; ++c) k.win[j][c] = k.win[i][c];
    }
  }
}

}  // namespace kernrt::conv
