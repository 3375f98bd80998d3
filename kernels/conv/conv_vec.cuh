// Vector helpers of the conv kernels: a thread owns N consecutive channels (N = 8: one
// 16-byte vector of 16-bit floats per row; N = 4: one 8-byte vector), loads and stores them
// as one vector, and converts between the packed 16-bit floats (bf16 or f16) and fp32
// registers. Also the weights, the state-line chunks and the per-output arithmetic
// (`conv_dot`, `activate`) every entry shares, so that all of them round alike. Every index
// below is a compile-time constant after unrolling, so the arrays stay in registers.
//
// Not checked here: alignment (callers pass addresses aligned to the vector size; see
// README.md) and N in {4, 8}.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "common/ptx/ldst.cuh"

namespace kernrt::conv {

struct Bf16 {};  // x/y/state element tags
struct F16 {};

// N 16-bit elements as one vector.
template <int N>
struct VecOf;
template <>
struct VecOf<8> {
  using type = uint4;
};
template <>
struct VecOf<4> {
  using type = uint2;
};
template <int N>
using Vec = typename VecOf<N>::type;

__device__ __forceinline__ uint32_t word(const uint4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
__device__ __forceinline__ uint32_t word(const uint2& v, int k) { return k == 0 ? v.x : v.y; }
__device__ __forceinline__ void set_word(uint4& v, int k, uint32_t w) {
  if (k == 0) v.x = w;
  else if (k == 1) v.y = w;
  else if (k == 2) v.z = w;
  else v.w = w;
}
__device__ __forceinline__ void set_word(uint2& v, int k, uint32_t w) {
  if (k == 0) v.x = w;
  else v.y = w;
}

// Read-only vector load (x rows, weights: never written by the grid that reads them):
// plain ld.global.nc (LDG.E.CONSTANT). On the H200 it ran 2.5-2.9 % faster than with the
// `.L1::no_allocate.L2::256B` hints in every copy schedule measured (notes.md).
template <int N>
__device__ __forceinline__ Vec<N> ld_nc(const void* p) {
  return __ldg(reinterpret_cast<const Vec<N>*>(p));
}
// Plain vector load (state lines: written by this kernel family, so no .nc).
template <int N>
__device__ __forceinline__ Vec<N> ld(const void* p) {
  return *reinterpret_cast<const Vec<N>*>(p);
}
// Plain vector store (one instruction, see common/ptx/ldst.cuh): 0.6-0.8 % faster than
// st.global.cs for y on the H200 (notes.md).
__device__ __forceinline__ void st_vec(void* p, const uint4& v) { ptx::st_global_v4_b32(p, v); }
__device__ __forceinline__ void st_vec(void* p, const uint2& v) { ptx::st_global_v2_b32(p, v); }
template <int N>
__device__ __forceinline__ void st(void* p, const Vec<N>& v) {
  st_vec(p, v);
}

// 16-bit float <-> fp32. bf16 -> f32 is exact (a shift); f32 -> 16-bit rounds to nearest even.
__device__ __forceinline__ float to_f32(Bf16, uint32_t bits) {
  return __uint_as_float(bits << 16);
}
__device__ __forceinline__ float to_f32(F16, uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}
__device__ __forceinline__ uint32_t from_f32(Bf16, float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
__device__ __forceinline__ uint32_t from_f32(F16, float f) {
  return __half_as_ushort(__float2half_rn(f));
}

// Element e (0 .. N*M-1) of M vectors of N 16-bit floats.
template <int N, int M>
__device__ __forceinline__ uint32_t elem16(const Vec<N> (&v)[M], int e) {
  const uint32_t w = word(v[e / N], (e % N) >> 1);
  return (e & 1) ? (w >> 16) : (w & 0xffffu);
}

template <typename E, int N>
__device__ __forceinline__ void unpack(E tag, const Vec<N>& v, float (&out)[N]) {
#pragma unroll
  for (int k = 0; k < N / 2; ++k) {
    const uint32_t w = word(v, k);
    out[2 * k] = to_f32(tag, w & 0xffffu);
    out[2 * k + 1] = to_f32(tag, w >> 16);
  }
}

template <typename E, int N>
__device__ __forceinline__ Vec<N> pack(E tag, const float (&in)[N]) {
  Vec<N> v;
#pragma unroll
  for (int k = 0; k < N / 2; ++k)
    set_word(v, k, from_f32(tag, in[2 * k]) | (from_f32(tag, in[2 * k + 1]) << 16));
  return v;
}

// S slots per channel of N channels, channel-major 16-bit values at p (S vectors of N), the K
// newest of each channel as fp32: s[j][c] = slot S-K+j of channel c. kReadOnly: through the
// read-only path (data no kernel writes while this one runs: weights), else plain loads
// (state lines, which an earlier kernel of the stream may have written).
template <bool kReadOnly, typename E, int S, int K, int N>
__device__ __forceinline__ void load_slots(E tag, const char* p, float (&s)[K][N]) {
  static_assert(K <= S, "slots taken from a line");
  Vec<N> v[S];
#pragma unroll
  for (int i = 0; i < S; ++i) v[i] = kReadOnly ? ld_nc<N>(p + i * 2 * N) : ld<N>(p + i * 2 * N);
#pragma unroll
  for (int c = 0; c < N; ++c)
#pragma unroll
    for (int j = 0; j < K; ++j) s[j][c] = to_f32(tag, elem16<N, S>(v, c * S + S - K + j));
}

// Weights [D, W] for channels c0 .. c0+N-1 -> w[j][c] in fp32; bias [D] -> b[c] (0 without
// a bias). f32: N*W floats = N*W/4 16-byte vectors; bf16: W vectors of N.
template <int W, int N>
__device__ __forceinline__ void load_weights(const void* weight, const void* bias, bool f32,
                                             int c0, float (&w)[W][N], float (&b)[N]) {
  if (f32) {
    constexpr int kVec = N * W / 4;
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const float*>(weight) + c0 * W);
    uint4 v[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = __ldg(p + i);
#pragma unroll
    for (int c = 0; c < N; ++c)
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const int e = c * W + j;
        w[j][c] = __uint_as_float(word(v[e >> 2], e & 3));
      }
    if (bias != nullptr) {
      const uint4* q = reinterpret_cast<const uint4*>(static_cast<const float*>(bias) + c0);
#pragma unroll
      for (int i = 0; i < N / 4; ++i) {
        const uint4 bv = __ldg(q + i);
#pragma unroll
        for (int c = 0; c < 4; ++c) b[4 * i + c] = __uint_as_float(word(bv, c));
      }
    } else {
#pragma unroll
      for (int c = 0; c < N; ++c) b[c] = 0.f;
    }
  } else {
    load_slots<true, Bf16, W, W, N>(Bf16{}, static_cast<const char*>(weight) + 2 * c0 * W, w);
    if (bias != nullptr) {
      unpack(Bf16{}, ld_nc<N>(static_cast<const char*>(bias) + 2 * c0), b);
    } else {
#pragma unroll
      for (int c = 0; c < N; ++c) b[c] = 0.f;
    }
  }
}

// A state line's chunk for channels c0 .. c0+N-1: S slots per channel, channel-major, so
// S vectors of N at line + 2*c0*S bytes. load_state takes the K newest slots (K <= S):
// s[j][c] = slot S-K+j of channel c (lines: S = K = W-1; fla's full lines: S = W, K = W-1).
template <typename E, int S, int K, int N>
__device__ __forceinline__ void load_state(E tag, const void* line, int c0, float (&s)[K][N]) {
  load_slots<false, E, S, K, N>(tag, static_cast<const char*>(line) + 2 * c0 * S, s);
}

// Writes all S slots of the chunk: s[j][c] is slot j of channel c.
template <typename E, int S, int N>
__device__ __forceinline__ void store_state(E tag, void* line, int c0, const float (&s)[S][N]) {
  Vec<N> v[S];
#pragma unroll
  for (int i = 0; i < S; ++i) {
#pragma unroll
    for (int k = 0; k < N / 2; ++k) {
      const int e0 = N * i + 2 * k, e1 = e0 + 1;  // element e = c * S + j
      set_word(v[i], k, from_f32(tag, s[e0 % S][e0 / S]) | (from_f32(tag, s[e1 % S][e1 / S]) << 16));
    }
  }
  char* p = static_cast<char*>(line) + 2 * c0 * S;
#pragma unroll
  for (int i = 0; i < S; ++i) st<N>(p + i * 2 * N, v[i]);
}

// z = bias + sum_j w[j] x~[j] for channel c, in one fixed order: the products oldest input
// first (w[0] * x~[0], then one fma per newer input, the current row's last), the bias added
// after the sum, all in fp32: the order of fla's Triton forward (the W products, then
// `+ bias`), so both round alike (fla's update sums its taps across lanes: see
// conv_update.cu's dot_update).
template <int W, int N>
__device__ __forceinline__ float conv_dot(const float (&w)[W][N], const float (&win)[W - 1][N],
                                          const float (&cur)[N], const float (&b)[N], int c) {
  static_assert(W >= 2, "one window slot at least");
  float z = w[0][c] * win[0][c];
#pragma unroll
  for (int j = 1; j < W - 1; ++j) z = fmaf(w[j][c], win[j][c], z);
  z = fmaf(w[W - 1][c], cur[c], z);
  return z + b[c];
}

// y = act(z): silu(z) = z / (1 + e^-z) with the fast exp and division (--use_fast_math):
// two MUFU ops (ex2, rcp), accurate to a few fp32 ulp. One tanh.approx (kernel-fun's
// sigmoid) is half the MUFU work but has a 2^-11 relative error, against a bf16 ulp of
// 2^-8: by that estimate some percent of the outputs would round to the other neighbour,
// where fla's error (about 1e-5) means one in tens of thousands.
__device__ __forceinline__ float activate(float z, bool silu) {
  return silu ? __fdividef(z, 1.f + __expf(-z)) : z;
}

}  // namespace kernrt::conv
