// Vector helpers of the conv kernels: 16-byte global loads/stores and conversions between
// 8 packed 16-bit floats (bf16 or f16) and fp32 registers. Every index below is a
// compile-time constant after unrolling, so the arrays stay in registers.
//
// Not checked here: alignment (callers pass 16-byte aligned addresses; see README.md).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace kernrt_conv {

struct Bf16 {};  // x/y/state element tags
struct F16 {};

// Read-only 16-byte load that does not allocate in L1 (each x row is read once per
// thread; the W-1 halo rows of the next tile hit in L2) and asks L2 for 256-byte lines.
__device__ __forceinline__ uint4 ld_nc_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Plain 16-byte load (state lines: written by this kernel family, so no .nc).
__device__ __forceinline__ uint4 ld_v4(const void* p) {
  return *reinterpret_cast<const uint4*>(p);
}

// Streaming 16-byte store: y is written once and not re-read by this kernel.
__device__ __forceinline__ void st_cs_v4(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ void st_v4(void* p, uint4 v) {
  *reinterpret_cast<uint4*>(p) = v;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

__device__ __forceinline__ void set_word(uint4& v, int k, uint32_t w) {
  if (k == 0) v.x = w;
  else if (k == 1) v.y = w;
  else if (k == 2) v.z = w;
  else v.w = w;
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

// Element e (0..8N-1) of an array of N uint4 holding 16-bit floats.
template <int N>
__device__ __forceinline__ uint32_t elem16(const uint4 (&v)[N], int e) {
  const uint32_t w = word(v[e >> 3], (e >> 1) & 3);
  return (e & 1) ? (w >> 16) : (w & 0xffffu);
}

template <typename E>
__device__ __forceinline__ void unpack8(E tag, const uint4& v, float (&out)[8]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t w = word(v, k);
    out[2 * k] = to_f32(tag, w & 0xffffu);
    out[2 * k + 1] = to_f32(tag, w >> 16);
  }
}

template <typename E>
__device__ __forceinline__ uint4 pack8(E tag, const float (&in)[8]) {
  uint4 v;
#pragma unroll
  for (int k = 0; k < 4; ++k) set_word(v, k, from_f32(tag, in[2 * k]) | (from_f32(tag, in[2 * k + 1]) << 16));
  return v;
}

// Weights [D, W] for channels c0..c0+7 -> w[j][c] in fp32; bias [D] -> b[c] (0 without bias).
template <int W>
__device__ __forceinline__ void load_weights(const void* weight, const void* bias, bool f32,
                                             int c0, float (&w)[W][8], float (&b)[8]) {
  if (f32) {
    constexpr int kVec = 8 * W / 4;  // 16-byte vectors of fp32
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const float*>(weight) + c0 * W);
    uint4 v[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = __ldg(p + i);
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const int e = c * W + j;
        w[j][c] = __uint_as_float(word(v[e >> 2], e & 3));
      }
    if (bias != nullptr) {
      const uint4* q = reinterpret_cast<const uint4*>(static_cast<const float*>(bias) + c0);
      const uint4 b0 = __ldg(q), b1 = __ldg(q + 1);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        b[c] = __uint_as_float(word(b0, c));
        b[c + 4] = __uint_as_float(word(b1, c));
      }
    } else {
#pragma unroll
      for (int c = 0; c < 8; ++c) b[c] = 0.f;
    }
  } else {
    constexpr int kVec = 8 * W / 8;  // 16-byte vectors of bf16
    const uint4* p =
        reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(weight) + c0 * W);
    uint4 v[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = __ldg(p + i);
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
      for (int j = 0; j < W; ++j) w[j][c] = to_f32(Bf16{}, elem16(v, c * W + j));
    if (bias != nullptr) {
      float bb[8];
      unpack8(Bf16{}, __ldg(reinterpret_cast<const uint4*>(
                          static_cast<const __nv_bfloat16*>(bias) + c0)),
              bb);
#pragma unroll
      for (int c = 0; c < 8; ++c) b[c] = bb[c];
    } else {
#pragma unroll
      for (int c = 0; c < 8; ++c) b[c] = 0.f;
    }
  }
}

// State line [D, W-1] for channels c0..c0+7: S = W-1 vectors; s[j][c] = slot j of channel c.
template <typename E, int S>
__device__ __forceinline__ void load_state(E tag, const void* line, int c0, float (&s)[S][8]) {
  const uint4* p = reinterpret_cast<const uint4*>(static_cast<const char*>(line) + 2 * c0 * S);
  uint4 v[S];
#pragma unroll
  for (int i = 0; i < S; ++i) v[i] = ld_v4(p + i);
#pragma unroll
  for (int c = 0; c < 8; ++c)
#pragma unroll
    for (int j = 0; j < S; ++j) s[j][c] = to_f32(tag, elem16(v, c * S + j));
}

template <typename E, int S>
__device__ __forceinline__ void store_state(E tag, void* line, int c0, const float (&s)[S][8]) {
  uint4 v[S];
#pragma unroll
  for (int i = 0; i < S; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int e0 = 8 * i + 2 * k, e1 = e0 + 1;  // element e = c * S + j
      set_word(v[i], k, from_f32(tag, s[e0 % S][e0 / S]) | (from_f32(tag, s[e1 % S][e1 / S]) << 16));
    }
  }
  uint4* p = reinterpret_cast<uint4*>(static_cast<char*>(line) + 2 * c0 * S);
#pragma unroll
  for (int i = 0; i < S; ++i) st_v4(p + i, v[i]);
}

// Programmatic dependent launch (sm_90): a no-op unless the launch sets PDL. `wait` blocks
// until the previous grid in the stream has completed and its writes are visible; only
// weight reads come before it (the manifest's `pdl` promise). `launch_dependents` lets the
// next grid start its own prologue early.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// z = bias + sum_j w[j] x~[j] for channel c, in one fixed order: the products oldest input
// first (w[0] * x~[0], then one fma per newer input, the current row's last), the bias added
// after the sum, all in fp32: the order of fla's Triton forward (the W products, then `+ bias`),
// so both round alike (fla's update sums its taps across lanes: validation/conv/notes.md run 4).
template <int W>
__device__ __forceinline__ float conv_dot(const float (&w)[W][8], const float (&win)[W - 1][8],
                                          const float (&cur)[8], const float (&b)[8], int c) {
  static_assert(W >= 2, "one window slot at least");
  float z = w[0][c] * win[0][c];
#pragma unroll
  for (int j = 1; j < W - 1; ++j) z = fmaf(w[j][c], win[j][c], z);
  z = fmaf(w[W - 1][c], cur[c], z);
  return z + b[c];
}

// y = act(z): silu(z) = z / (1 + e^-z) with the fast exp and division (--use_fast_math).
__device__ __forceinline__ float activate(float z, bool silu) {
  return silu ? __fdividef(z, 1.f + __expf(-z)) : z;
}

}  // namespace kernrt_conv
