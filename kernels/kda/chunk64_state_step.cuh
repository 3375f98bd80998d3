// KDA / GDN 64-token chunk: one chunk's state step on wgmma (sm_90a) from operands already in
// shared memory, shared by the state-step entries of kernels/kda/chunk64.md (kda_chunk64_state.cu:
// synchronous copies, the numerics reference; kda_chunk64_state2.cu: pipelined stages). The math
// is the one kda_chunk64_state.cu's header describes (r', vn', o, X with per-warp power-of-two
// scales, plan "f16" of validation/kda/chunk64_model.py); both entries run exactly this code, so
// their o and state agree bit for bit when they see the same operands.
//
// Owns: the stage layout (Chunk64Stage: one chunk's operands, 128B-swizzled f16 tiles), the
// pack_x / x_products helpers, chunk64_step (one chunk: o of the chunk handed to the entry's store, the
// reference's fp32 form OutF32 here; X updated in registers), the state's load / store between
// registers and global memory.
// Deliberately does not check: that the stage holds the chunk's operands and is visible to the
// async proxy (the caller's fences and barriers), the thread's place (two warpgroups of 64 value
// rows: rows ra / rb of the block's 128), V % 128. Off sm_90a the wgmma wrappers trap.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/wgmma_f16.cuh"
#include "kda/chunk_state.cuh"
#include "kda/kda_vec.cuh"

namespace kernrt::kda::c64 {

constexpr int kC = 64;      // tokens per chunk
constexpr int kK = 128;     // key channels
constexpr int kVT = 128;    // value rows per block: two warpgroups of 64

// Shared memory: 64-element (128-byte) rows, 16-byte chunk j of row r stored at chunk
// j ^ (r % 8) (the wgmma 128B swizzle); tiles 1024-byte aligned.
struct Chunk64Stage {
  __half kq[2][2 * kC][64];   // [k a; q a], key channels 0..63 | 64..127
  __half kbt[kK][64];
  __half tmb[kC][64];
  __half aqk[kC][64];
  uint16_t v[kC][kVT];        // bf16, 16-byte chunk j of token row t at v_chunk(j, t)
  float gamma[kK];
  float eab[2][kC];           // kScalarDecay (GDN): a_t = 2^G_t, b_t = 2^(G_63 - G_t); kq
                              // then holds k^, q^ and kbt is not read
};
static_assert(sizeof(__half) * 2 * kC * 64 % 1024 == 0, "tiles stay 1024-byte aligned");
// Where v's 16-byte chunk j (value rows 8j..8j + 7) of token row t sits: an XOR within each
// group of 8, so that chunk64_step's ldmatrix.trans reads 8 token rows of a chunk without a
// bank conflict.
__device__ __forceinline__ int v_chunk(int j, int t) { return j ^ (t & 7); }
__device__ __forceinline__ uint64_t desc_of(const void* tile) {
  return ptx::wgmma_desc_sw128(ptx::smem_u32(tile), 16, 1024);
}

// max |x| over a 32-element fragment as a tree of depth 5.
__device__ __forceinline__ float frag_absmax(const float (&x)[32]) {
  float m[8];
#pragma unroll
  for (int j = 0; j < 8; ++j)
    m[j] = fmaxf(fmaxf(fabsf(x[4 * j]), fabsf(x[4 * j + 1])), fmaxf(fabsf(x[4 * j + 2]), fabsf(x[4 * j + 3])));
#pragma unroll
  for (int w = 4; w >= 1; w >>= 1)
#pragma unroll
    for (int j = 0; j < w; ++j) m[j] = fmaxf(m[j], m[j + w]);
  return m[0];
}

// The warp's scale for fragment x (and, when given, its second half xh: X's two key-channel
// halves): a power of two per 16 value rows (the model's "f16s").
template <bool kTree>
__device__ __forceinline__ Pow2 scale_of(const float (&x)[32], const float (*xh)[32] = nullptr) {
  if constexpr (kTree) {
    float m = frag_absmax(x);
    if (xh != nullptr) m = fmaxf(m, frag_absmax(*xh));
    return pow2_of(m);
  } else {
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) m = fmaxf(m, fabsf(x[i]));
    if (xh != nullptr)
#pragma unroll
      for (int i = 0; i < 32; ++i) m = fmaxf(m, fabsf((*xh)[i]));
    return pow2_of(m);
  }
}

// s X as f16 pairs, both halves (16 A registers each), once per step: X (k a)^T and X (q a)^T
// read the same registers (packing for each product cost 64 FMUL + 32 F2FP a step).
__device__ __forceinline__ void pack_x(const float (&xl)[32], const float (&xh)[32], float s,
                                       uint32_t (&ax)[2][16]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float(&xs)[32] = h ? xh : xl;
#pragma unroll
    for (int i = 0; i < 16; ++i) ax[h][i] = ptx::pack_f16x2(xs[2 * i] * s, xs[2 * i + 1] * s);
  }
}

// acc (+)= (s X) B^T over the 128 key channels for a 64-row B tile (k a or q a) of the
// swizzled [k a; q a] tile at descriptor `desc` (key channels 0..63 in the first atom column,
// 64..127 in the second, 2 x 64 rows further), from pack_x's registers, both halves in one
// wgmma group; kFresh: acc's prior contents not read.
template <bool kFresh>
__device__ __forceinline__ void x_products(uint32_t (&ax)[2][16], float (&acc)[32],
                                                  uint64_t desc) {
  ptx::wgmma_fence();
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int k = 0; k < 4; ++k)
      ptx::wgmma_m64n64k16_rs_f16<1>(acc, ax[h][4 * k], ax[h][4 * k + 1], ax[h][4 * k + 2],
                                      ax[h][4 * k + 3], desc + ((h * 2 * kC * 128 + k * 32) >> 4),
                                      !kFresh || h > 0 || k > 0);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  ptx::fence_registers(acc);
  ptx::fence_registers(ax[0]);
  ptx::fence_registers(ax[1]);
}

// The reference entries' o store: fp32 [64 tokens][V] at `ob` (this block's value rows), from
// the accumulator layout (o[4j + e]: token 8j + 2q + (e & 1), row ra for e < 2, else rb).
struct OutF32 {
  float* ob;
  int V, ra, rb, q;
  __device__ __forceinline__ void operator()(const float (&o)[32]) const {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = 8 * j + 2 * q + (e & 1);
        ob[int64_t(t) * V + (e < 2 ? ra : rb)] = o[4 * j + e];
      }
  }
};

// One chunk: o (handed to `store_o` in the accumulator layout, fp32, final: OutF32 is the
// reference form; kOut false: no o, neither its products nor the q a / Aqk operands are read,
// and X's update is the same instructions) and X <- X Diag(gamma) - vn' (k b), from the
// operands in `sm`. xl / xh: this thread's X rows ra / rb (x[4j + {0,1}] row ra, x[4j +
// {2,3}] row rb, channels 8j + 2q + {0,1}; xl channels 0..63, xh 64..127). Every wgmma that
// reads `sm` has completed when it returns (wgmma_wait_group<0> after each group).
// `rest` runs after the first product (X (k a)^T, which reads v and k a only) and before any
// other operand is read: the pipelined entry waits there for the stage's remaining copies.
struct NoWait {
  __device__ __forceinline__ void operator()() const {}
};
// kTree: the scales' largest |x| as trees of FMNMX, else one serial chain (64 / 32 / 32
// dependent FMNMX a chunk); the max is exact in any order, so both give the same bits (which
// one a caller takes is a timing choice: kda_chunk64_state2.cu's consume).
// kScalarDecay (GDN: one decay per token): kq holds k^ and q^ without the decay and eab the
// per-token a_t, b_t, exact in fp32 where they are applied: X (k a)^T = (X k^T) Diag(a) and
// X (q a)^T likewise on the accumulator columns, vn' (k b) = (vn' Diag(b)) k^ with b on vn'
// before its f16 rounding and k^'s rows of kq read transposed (MN-major) instead of kbt.
template <class StoreO, bool kOut = true, bool kTree = true, bool kScalarDecay = false,
          class Rest = NoWait>
__device__ __forceinline__ void chunk64_step(float (&xl)[32], float (&xh)[32], const Chunk64Stage& sm,
                                             const StoreO& store_o, int ra, int rb, int q,
                                             const Rest& rest = Rest{}) {
  // ---- D = sx X [k a | q a]^T - [sx v^T | 0] -------------------------------------------
  const Pow2 sx = scale_of<kTree>(xl, &xh);
  // ---- r = sx (X (k a)^T - v^T) = sx r' ------------------------------------------------
  // X's 32 packed registers stay live until X (q a)^T (GDN: a_t's 16 besides), inside the
  // pipelined consumers' 232 (setmaxnreg) with no spill
  float r[32];
  const uint64_t dkq = desc_of(sm.kq);
  // v^T by 4 ldmatrix.x4.trans from the tile's swizzled rows (Chunk64Stage::v), against 32
  // LDS.U16 with 4-way bank conflicts before: the same bits, KDA B8 T4096 V128 652.4 -> 638.9 us,
  // GDN B1 T32768 H16 529.3 -> 504.7 us. vp[2j + h]: row ra (h 0) / rb (h 1), tokens 8j + 2q, + 1.
  // Instruction u, matrix m = lane / 8: token block j = 2u + m / 2, rows ra - g + 8 (m % 2) ..;
  // lane l the address of token 8j + l % 8 (ldmatrix's row); .trans: lane (g, q) gets the
  // column g = its row, rows 2q, 2q + 1 = its tokens.
  uint32_t vp[16];
  {
    const int lane = threadIdx.x & 31, m = lane >> 3, c0 = (ra - (lane >> 2)) >> 3;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int t = 8 * (2 * u + (m >> 1)) + (lane & 7), c = c0 + (m & 1);
      ptx::ldmatrix_x4_trans(vp[4 * u], vp[4 * u + 1], vp[4 * u + 2], vp[4 * u + 3],
                             ptx::smem_u32(&sm.v[t][8 * v_chunk(c, t)]));
    }
  }
  const auto v_of = [&](int j, int e) {
    const uint32_t w = vp[2 * j + (e >> 1)];
    return e & 1 ? bf16_hi(w) : bf16_lo(w);
  };
  // X packed once for X (k a)^T and X (q a)^T (pack_x: 64 FMUL + 32 F2FP fewer a chunk; KDA
  // B8 T4096 V128 638.9 -> 638.2 us, the same bits). kScalarDecay (GDN): a_t read once for r'
  // and o with sx.inv folded in, gamma one scalar (the loop's SASS 1214 -> 1143 instructions,
  // B1 T32768 H16 540.6 -> 530.8 us, the same bits; the step is issue-bound: 8 consumer warps
  // on 4 schedulers)
  uint32_t ax[2][16];
  float2 ea[8];
  pack_x(xl, xh, sx.s, ax);
  if constexpr (kScalarDecay) {  // r' = (X k^T) Diag(a) - v^T, sx.inv folded into a_t
    x_products<true>(ax, r, dkq);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // fmaf(r, a sx.inv, -v) is fmaf(r, a, -sx.s v) sx.inv exactly: sx.s, sx.inv are powers of 2
      ea[j] = *reinterpret_cast<const float2*>(&sm.eab[0][8 * j + 2 * q]);
      const float ax0 = ea[j].x * sx.inv, ax1 = ea[j].y * sx.inv;
#pragma unroll
      for (int e = 0; e < 4; ++e) r[4 * j + e] = fmaf(r[4 * j + e], e & 1 ? ax1 : ax0, -v_of(j, e));
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) r[4 * j + e] = -sx.s * v_of(j, e);
    x_products<false>(ax, r, dkq);
  }
  rest();

  // ---- vn' = r' (Tm Diag(beta))^T, into r's registers -----------------------------------
  if constexpr (!kScalarDecay)
#pragma unroll
    for (int i = 0; i < 32; ++i) r[i] *= sx.inv;
  const Pow2 sr = scale_of<kTree>(r);
  uint32_t ar[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) ar[i] = ptx::pack_f16x2(r[2 * i] * sr.s, r[2 * i + 1] * sr.s);
  const uint64_t dtm = desc_of(sm.tmb);
  ptx::wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s)
    ptx::wgmma_m64n64k16_rs_f16<1>(r, ar[4 * s], ar[4 * s + 1], ar[4 * s + 2], ar[4 * s + 3],
                                    dtm + ((s * 32) >> 4), s > 0);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  ptx::fence_registers(r);
  ptx::fence_registers(ar);
#pragma unroll
  for (int i = 0; i < 32; ++i) r[i] *= sr.inv;
  const Pow2 sv = scale_of<kTree>(r);
  uint32_t av[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) av[i] = ptx::pack_f16x2(r[2 * i] * sv.s, r[2 * i + 1] * sv.s);
  uint32_t avb[kScalarDecay ? 16 : 1];  // kScalarDecay: sv vn' Diag(b), the A of vn' (k b)
  if constexpr (kScalarDecay) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 b = *reinterpret_cast<const float2*>(&sm.eab[1][8 * j + 2 * q]);
      const float bx = b.x * sv.s, by = b.y * sv.s;
      avb[2 * j] = ptx::pack_f16x2(r[4 * j] * bx, r[4 * j + 1] * by);
      avb[2 * j + 1] = ptx::pack_f16x2(r[4 * j + 2] * bx, r[4 * j + 3] * by);
    }
  }

  // ---- o = X (q a)^T - vn' Aqk^T: sv (-vn' Aqk^T), rescaled to sx, + sx X (q a)^T --------
  if constexpr (kOut && kScalarDecay) {
    // sv (X q^T) Diag(a), then - sv vn' Aqk^T on top, rescaled to o
    float o[32];
    x_products<true>(ax, o, dkq + ((kC * 128) >> 4));  // q^: rows 64..127
    const float f = sv.s * sx.inv;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float fx = ea[j].x * f, fy = ea[j].y * f;
      o[4 * j] *= fx, o[4 * j + 1] *= fy, o[4 * j + 2] *= fx, o[4 * j + 3] *= fy;
    }
    const uint64_t daq = desc_of(sm.aqk);
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      ptx::wgmma_m64n64k16_rs_f16<-1>(o, av[4 * s], av[4 * s + 1], av[4 * s + 2], av[4 * s + 3],
                                       daq + ((s * 32) >> 4), 1);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_registers(o);
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] *= sv.inv;
    store_o(o);
  } else if constexpr (kOut) {
    float o[32];  // first wgmma with scale-d = 0: its prior contents are not read
    const uint64_t daq = desc_of(sm.aqk);
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      ptx::wgmma_m64n64k16_rs_f16<-1>(o, av[4 * s], av[4 * s + 1], av[4 * s + 2], av[4 * s + 3],
                                       daq + ((s * 32) >> 4), s > 0);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_registers(o);
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] = o[i] * sv.inv * sx.s;
    x_products<false>(ax, o, dkq + ((kC * 128) >> 4));  // q a: rows 64..127 of the tile

    // o is final here: stored before the X update, so that its registers are free for u
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] *= sx.inv;
    store_o(o);
  }

  // ---- X = X Diag(gamma) - vn' (k b) -----------------------------------------------------
  // both halves of 64 key channels into fresh accumulators u[0], u[1] in one wgmma group (one
  // wait instead of two: GDN B1 T32768 H16 568.5 -> 561.5 us, KDA within +-1.5 us, the same bits;
  // X 64 + u 64 + av / avb 32 registers live, inside the pipelined consumers' 232), added to X
  // by FMA: X itself is never a wgmma accumulator (as one, ptxas moves it between register
  // blocks and spills at the 168-register budget)
  const uint64_t dkb = desc_of(sm.kbt);
  // kScalarDecay: k^'s rows (kq rows 0..63 of each half) as an MN-major B, 16 tokens (2048
  // bytes of rows) a k-step; the halves' 64-channel blocks 2 x 64 rows apart
  const uint64_t dkt = ptx::wgmma_desc_sw128(ptx::smem_u32(sm.kq), 2 * kC * 128, 1024);
  float u[2][32];  // as o
  ptx::wgmma_fence();
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if constexpr (kScalarDecay)
        ptx::wgmma_m64n64k16_rs_f16<-1, 1>(u[h], avb[4 * s], avb[4 * s + 1], avb[4 * s + 2],
                                            avb[4 * s + 3], dkt + ((h * 2 * kC * 128 + s * 2048) >> 4), s > 0);
      else
        ptx::wgmma_m64n64k16_rs_f16<-1>(u[h], av[4 * s], av[4 * s + 1], av[4 * s + 2],
                                         av[4 * s + 3], dkb + ((h * kC * 128 + s * 32) >> 4), s > 0);
    }
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  ptx::fence_registers(u[0]);
  ptx::fence_registers(u[1]);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float(&xs)[32] = h ? xh : xl;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // GDN's gamma is one scalar on every channel (its prep writes 2^G_63 on all 128)
      const float2 gm = kScalarDecay ? make_float2(sm.gamma[0], sm.gamma[0])
                                     : *reinterpret_cast<const float2*>(&sm.gamma[64 * h + 8 * j + 2 * q]);
      xs[4 * j] = fmaf(u[h][4 * j], sv.inv, xs[4 * j] * gm.x);
      xs[4 * j + 1] = fmaf(u[h][4 * j + 1], sv.inv, xs[4 * j + 1] * gm.y);
      xs[4 * j + 2] = fmaf(u[h][4 * j + 2], sv.inv, xs[4 * j + 2] * gm.x);
      xs[4 * j + 3] = fmaf(u[h][4 * j + 3], sv.inv, xs[4 * j + 3] * gm.y);
    }
  }
  ptx::fence_registers(av);
  if constexpr (kScalarDecay) ptx::fence_registers(avb);
}

// The block's initial state x0 rows ra / rb ([V][K] fp32 per head at `x0`) into xl / xh.
__device__ __forceinline__ void chunk64_load_state(float (&xl)[32], float (&xh)[32], const float* x0,
                                                   int ra, int rb, int q) {
#define X(i) ((i) < 32 ? xl[(i)] : xh[(i)-32])
  const float* x0a = x0 + int64_t(ra) * kK;
  const float* x0b = x0 + int64_t(rb) * kK;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const float2 a = *reinterpret_cast<const float2*>(x0a + 8 * j + 2 * q);
    const float2 b = *reinterpret_cast<const float2*>(x0b + 8 * j + 2 * q);
    X(4 * j) = a.x, X(4 * j + 1) = a.y, X(4 * j + 2) = b.x, X(4 * j + 3) = b.y;
  }
#undef X
}

// xl / xh into the final state rows ra / rb at `xt` (as chunk64_load_state).
__device__ __forceinline__ void chunk64_store_state(const float (&xl)[32], const float (&xh)[32],
                                                    float* xt, int ra, int rb, int q) {
#define X(i) ((i) < 32 ? xl[(i)] : xh[(i)-32])
  float* xta = xt + int64_t(ra) * kK;
  float* xtb = xt + int64_t(rb) * kK;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    *reinterpret_cast<float2*>(xta + 8 * j + 2 * q) = make_float2(X(4 * j), X(4 * j + 1));
    *reinterpret_cast<float2*>(xtb + 8 * j + 2 * q) = make_float2(X(4 * j + 2), X(4 * j + 3));
  }
#undef X
}

}  // namespace kernrt::kda::c64
