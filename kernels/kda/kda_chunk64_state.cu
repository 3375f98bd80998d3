// KDA / GDN 64-token chunk: the state step alone, on wgmma (sm_90a), from operands prepared
// elsewhere. Step 1 of kernels/kda/chunk64.md ("Order of work"): it checks the wgmma layouts,
// the per-warp power-of-two scales and the folded signs against validation/kda/chunk64_model.py
// (plan "f16"), whose prepared operands a validation script writes to global memory (passes
// on the H200: check_chunk64.py). Not the shipped forward (kda_chunk.cu is); only the design
// manifests of kernrt.gen.kda_chunk64 select it.
//
// Per (sequence, value head, 128 value rows) block, X = S^T [V, K] fp32 in the registers of
// two warpgroups (64 value rows each), for every chunk c of 64 tokens (r' = -r, vn' = -vn):
//   r'  = (sx X (k a)^T - sx v^T) / sx              wgmma m64n64k16 x 8 (two halves of K)
//   vn' = (sr r') (Tm Diag(beta))^T / sr             m64n64k16 x 4
//   o   = ((-(sv vn') Aqk^T) / sv * sx + sx X (q a)^T) / sx     x 4, then x 8
//   X   = X Diag(gamma) + (-(sv vn') (k b)) / sv     2 x (m64n64k16 x 4), added by FMA
// Only n64 accumulators of 32 registers, and X is never one: that is what fits the plan's
// 168-register state role (chunk64.md; an n128 accumulator or X as one made ptxas move or
// spill registers there).
// X, r', vn' are f16 A fragments from registers (an accumulator's layout is the next
// product's A layout), each with a power-of-two scale per warp (pow2_of: largest magnitude
// in [2^14, 2^15)), exactly the model's f16_rows over 16 value rows; B operands are f16 tiles
// in shared memory, K-major with the 128-byte swizzle.
//
// Entry: kda_chunk64_state_sm90a_f16_k128, one `const __grid_constant__ Chunk64StateParams`;
// grid (V / 128, HV, N), block 256, dynamic shared memory kChunk64StateSmem. The operands of
// a chunk are copied into shared memory by all threads before its step (no pipeline: this
// entry checks numerics, it is not timed). Off sm_90a it traps (NV_HAS_FEATURE_SM_90a).
//
// Not checked here: V % 128, the operand layouts below, that NC chunks of operands exist;
// tails are the caller's (padded tokens: k a = q a = k b = 0, Tm Diag(beta) column 0).
#include <cuda_fp16.h>
#include <nv/target>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/wgmma_f16.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk_state.cuh"
#include "kda/kda_vec.cuh"

namespace kernrt::kda::c64 {

constexpr int kC = 64;      // tokens per chunk
constexpr int kK = 128;     // key channels
constexpr int kVT = 128;    // value rows per block: two warpgroups of 64
constexpr int kThreads = 256;

using kernrt::kda::Chunk64StateParams;  // chunk64_params.h: the layouts of the operands

// Shared memory: 64-element (128-byte) rows, 16-byte chunk j of row r stored at chunk
// j ^ (r % 8) (the wgmma 128B swizzle); tiles 1024-byte aligned.
struct Smem {
  __half kq[2][2 * kC][64];   // [k a; q a], key channels 0..63 | 64..127
  __half kbt[kK][64];
  __half tmb[kC][64];
  __half aqk[kC][64];
  uint16_t v[kC][kVT];        // bf16, plain rows
  float gamma[kK];
};
static_assert(sizeof(__half) * 2 * kC * 64 % 1024 == 0, "tiles stay 1024-byte aligned");
// dynamic shared memory: the layout + the alignment of the base (the generator reads the literal)
constexpr int kChunk64StateSmem = 83456;
static_assert(int(sizeof(Smem)) + 1024 == kChunk64StateSmem, "kChunk64StateSmem is the layout + 1024");
static_assert(kChunk64StateSmem <= 232448, "one block fits the opt-in shared memory");

// Copy a [rows][64-element] f16 row block (global row stride `ld` elements) into a swizzled
// shared tile.
__device__ __forceinline__ void copy_sw128(__half (*dst)[64], const __half* src, int rows,
                                           int ld) {
#pragma unroll 1
  for (int i = threadIdx.x; i < rows * 8; i += kThreads) {
    const int r = i >> 3, j = i & 7;
    const uint4 w = *reinterpret_cast<const uint4*>(src + int64_t(r) * ld + 8 * j);
    *reinterpret_cast<uint4*>(&dst[r][8 * (j ^ (r & 7))]) = w;
  }
}

__device__ __forceinline__ uint64_t desc_of(const void* tile) {
  return ptx::wgmma_desc_sw128(ptx::smem_u32(tile), 16, 1024);
}

// acc += s X B^T over the 128 key channels for a 64-row B tile (k a or q a) of the
// swizzled [k a; q a] tile at descriptor `desc` (key channels 0..63 in the first atom column,
// 64..127 in the second, 2 x 64 rows further): two halves of 4 k-steps, 16 A registers each.
__device__ __forceinline__ void x_products(const float (&xl)[32], const float (&xh)[32], float s,
                                           float (&acc)[32], uint64_t desc) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float(&xs)[32] = h ? xh : xl;
    uint32_t ax[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) ax[i] = ptx::pack_f16x2(xs[2 * i] * s, xs[2 * i + 1] * s);
    ptx::wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k)
      ptx::wgmma_m64n64k16_rs_f16<1>(acc, ax[4 * k], ax[4 * k + 1], ax[4 * k + 2], ax[4 * k + 3],
                                      desc + ((h * 2 * kC * 128 + k * 32) >> 4), 1);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_registers(acc);
    ptx::fence_registers(ax);
  }
}

__device__ void state_steps(const Chunk64StateParams& p, Smem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  const int wg = tid >> 7, wi = (tid >> 5) & 3;
  const int ra = 64 * wg + 16 * wi + (lane >> 2), rb = ra + 8;  // this thread's tile rows
  const int hv = blockIdx.y, n = blockIdx.z, V = p.dim_v, v0 = kVT * blockIdx.x;
  const int64_t head = int64_t(n) * gridDim.y + hv;

  // X rows ra / rb: x[4j + {0,1}] row ra, x[4j + {2,3}] row rb, channels 8j + 2q + {0,1};
  // the accumulator halves xl = x[0..31], xh = x[32..63] (channels 0..63 | 64..127)
  float xl[32], xh[32];
#define X(i) ((i) < 32 ? xl[(i)] : xh[(i)-32])
  const float* x0a = p.x0 + (head * V + v0 + ra) * kK;
  const float* x0b = p.x0 + (head * V + v0 + rb) * kK;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const float2 a = *reinterpret_cast<const float2*>(x0a + 8 * j + 2 * q);
    const float2 b = *reinterpret_cast<const float2*>(x0b + 8 * j + 2 * q);
    X(4 * j) = a.x, X(4 * j + 1) = a.y, X(4 * j + 2) = b.x, X(4 * j + 3) = b.y;
  }

  for (int c = 0; c < p.chunks; ++c) {
    const int64_t ch = head * p.chunks + c;
    __syncthreads();  // the previous chunk's wgmma have read shared memory (waited below)
    copy_sw128(sm.kq[0], p.kq + ch * 2 * kC * kK, 2 * kC, kK);
    copy_sw128(sm.kq[1], p.kq + ch * 2 * kC * kK + 64, 2 * kC, kK);
    copy_sw128(sm.kbt, p.kbt + ch * kK * kC, kK, kC);
    copy_sw128(sm.tmb, p.tmb + ch * kC * kC, kC, kC);
    copy_sw128(sm.aqk, p.aqk + ch * kC * kC, kC, kC);
#pragma unroll 1
    for (int i = tid; i < kC * kVT / 8; i += kThreads) {
      const int t = i / (kVT / 8), j = i % (kVT / 8);
      *reinterpret_cast<uint4*>(&sm.v[t][8 * j]) =
          *reinterpret_cast<const uint4*>(p.v + (ch * kC + t) * V + v0 + 8 * j);
    }
    if (tid < kK) sm.gamma[tid] = p.gamma[ch * kK + tid];
    ptx::fence_proxy_async_shared();  // generic stores before the async proxy's wgmma reads
    __syncthreads();

    // ---- D = sx X [k a | q a]^T - [sx v^T | 0] -------------------------------------------
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < 64; ++i) m = fmaxf(m, fabsf(X(i)));
    const Pow2 sx = pow2_of(m);
    // ---- r = sx (X (k a)^T - v^T) = sx r' ------------------------------------------------
    // in two halves of 64 key channels (16 A registers live); at most x 64 + one 32-register
    // accumulator (r, then vn' in the same registers, then o) + 2 x 16 A registers are live,
    // which is what lets the state role fit 168 registers (chunk64.md)
    float r[32];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        r[4 * j + e] = -sx.s * bf16_f32(sm.v[8 * j + 2 * q + (e & 1)][e < 2 ? ra : rb]);
    const uint64_t dkq = desc_of(sm.kq);
    x_products(xl, xh, sx.s, r, dkq);

    // ---- vn' = r' (Tm Diag(beta))^T, into r's registers -----------------------------------
    m = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) r[i] *= sx.inv, m = fmaxf(m, fabsf(r[i]));
    const Pow2 sr = pow2_of(m);
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
    m = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) r[i] *= sr.inv, m = fmaxf(m, fabsf(r[i]));
    const Pow2 sv = pow2_of(m);
    uint32_t av[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) av[i] = ptx::pack_f16x2(r[2 * i] * sv.s, r[2 * i + 1] * sv.s);

    // ---- o = X (q a)^T - vn' Aqk^T: sv (-vn' Aqk^T), rescaled to sx, + sx X (q a)^T --------
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
    x_products(xl, xh, sx.s, o, dkq + ((kC * 128) >> 4));  // q a: rows 64..127 of the tile

    // o is final here: stored before the X update, so that its registers are free for u
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] *= sx.inv;
    float* ob = p.o + ch * kC * V + v0;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = 8 * j + 2 * q + (e & 1);
        ob[int64_t(t) * V + (e < 2 ? ra : rb)] = o[4 * j + e];
      }

    // ---- X = X Diag(gamma) - vn' (k b) -----------------------------------------------------
    // per half of 64 key channels into a fresh accumulator u, added to X by FMA: X itself is
    // never a wgmma accumulator (as one, ptxas moves it between register blocks and spills at
    // the 168-register budget)
    const uint64_t dkb = desc_of(sm.kbt);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float(&xs)[32] = h ? xh : xl;
      float u[32];  // as o
      ptx::wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s)
        ptx::wgmma_m64n64k16_rs_f16<-1>(u, av[4 * s], av[4 * s + 1], av[4 * s + 2],
                                         av[4 * s + 3], dkb + ((h * kC * 128 + s * 32) >> 4), s > 0);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
      ptx::fence_registers(u);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float2 gm = *reinterpret_cast<const float2*>(&sm.gamma[64 * h + 8 * j + 2 * q]);
        xs[4 * j] = fmaf(u[4 * j], sv.inv, xs[4 * j] * gm.x);
        xs[4 * j + 1] = fmaf(u[4 * j + 1], sv.inv, xs[4 * j + 1] * gm.y);
        xs[4 * j + 2] = fmaf(u[4 * j + 2], sv.inv, xs[4 * j + 2] * gm.x);
        xs[4 * j + 3] = fmaf(u[4 * j + 3], sv.inv, xs[4 * j + 3] * gm.y);
      }
    }
    ptx::fence_registers(av);
  }

  float* xta = p.xt + (head * V + v0 + ra) * kK;
  float* xtb = p.xt + (head * V + v0 + rb) * kK;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    *reinterpret_cast<float2*>(xta + 8 * j + 2 * q) = make_float2(X(4 * j), X(4 * j + 1));
    *reinterpret_cast<float2*>(xtb + 8 * j + 2 * q) = make_float2(X(4 * j + 2), X(4 * j + 3));
  }
#undef X
}

}  // namespace kernrt::kda::c64

extern "C" __global__ void __launch_bounds__(kernrt::kda::c64::kThreads, 1)
    kda_chunk64_state_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64StateParams p) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // aligned by an offset from the shared array itself (not through an integer), so that the
    // compiler keeps the shared address space: LDS / STS, not generic loads
    const uint32_t pad = (1024u - (kernrt::ptx::smem_u32(smem_raw) & 1023u)) & 1023u;
    kernrt::kda::c64::state_steps(p, *reinterpret_cast<kernrt::kda::c64::Smem*>(smem_raw + pad));
  ), (__trap();))
}
