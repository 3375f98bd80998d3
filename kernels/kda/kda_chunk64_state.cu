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
// entry is the numerics reference; kda_chunk64_state2.cu runs the same chunk code pipelined,
// 3.4x faster). Off sm_90a it traps (NV_HAS_FEATURE_SM_90a).
//
// Not checked here: V % 128, the operand layouts below, that NC chunks of operands exist;
// tails are the caller's (padded tokens: k a = q a = k b = 0, Tm Diag(beta) column 0).
#include <cuda_fp16.h>
#include <nv/target>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/sync.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk64_state_step.cuh"

namespace kernrt::kda::c64 {

constexpr int kThreads = 256;

using kernrt::kda::Chunk64StateParams;  // chunk64_params.h: the layouts of the operands

// Shared memory: one stage (chunk64_state_step.cuh: 64-element rows, 128B swizzle, tiles
// 1024-byte aligned), filled by all threads before each chunk.
using Smem = Chunk64Stage;
// dynamic shared memory: the layout + the alignment of the base (the generator reads the literal)
constexpr int kChunk64StateSmem = 83968;
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

__device__ void state_steps(const Chunk64StateParams& p, Smem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  const int wg = tid >> 7, wi = (tid >> 5) & 3;
  const int ra = 64 * wg + 16 * wi + (lane >> 2), rb = ra + 8;  // this thread's tile rows
  const int hv = blockIdx.y, n = blockIdx.z, V = p.dim_v, v0 = kVT * blockIdx.x;
  const int64_t head = int64_t(n) * gridDim.y + hv;

  float xl[32], xh[32];  // X rows ra / rb (chunk64_state_step.cuh)
  chunk64_load_state(xl, xh, p.x0 + (head * V + v0) * kK, ra, rb, q);

  for (int c = 0; c < p.chunks; ++c) {
    const int64_t ch = head * p.chunks + c;
    __syncthreads();  // the previous chunk's wgmma have read shared memory (waited in the step)
    copy_sw128(sm.kq[0], p.kq + ch * 2 * kC * kK, 2 * kC, kK);
    copy_sw128(sm.kq[1], p.kq + ch * 2 * kC * kK + 64, 2 * kC, kK);
    copy_sw128(sm.kbt, p.kbt + ch * kK * kC, kK, kC);
    copy_sw128(sm.tmb, p.tmb + ch * kC * kC, kC, kC);
    copy_sw128(sm.aqk, p.aqk + ch * kC * kC, kC, kC);
#pragma unroll 1
    for (int i = tid; i < kC * kVT / 8; i += kThreads) {
      const int t = i / (kVT / 8), j = i % (kVT / 8);
      *reinterpret_cast<uint4*>(&sm.v[t][8 * v_chunk(j, t)]) =
          *reinterpret_cast<const uint4*>(p.v + (ch * kC + t) * V + v0 + 8 * j);
    }
    if (tid < kK) sm.gamma[tid] = p.gamma[ch * kK + tid];
    ptx::fence_proxy_async_shared();  // generic stores before the async proxy's wgmma reads
    __syncthreads();
    chunk64_step(xl, xh, sm, OutF32{p.o + ch * kC * V + v0, V, ra, rb, q}, ra, rb, q);
  }
  chunk64_store_state(xl, xh, p.xt + (head * V + v0) * kK, ra, rb, q);
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
