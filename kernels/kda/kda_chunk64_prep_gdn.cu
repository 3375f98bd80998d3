// GDN 64-token chunk: the prep from raw inputs (kernels/kda/chunk64_prep_gdn.md). GDN has one
// decay per (token, value head), so every decay factor of the chunk is a function of one
// scalar prefix G_t (log2 of the decay from the chunk's start to token t, inclusive):
// exp(G_i - G_j) is one 64 x 64 matrix E and the intra-chunk matrices are Gram matrices of the
// raw rows masked by it. Raw inputs in (Chunk64PrepGdnParams: bf16 q, k, fp32 g, A_log,
// dt_bias per value head, fp32 beta; GVA), the operands of kda_chunk64_state2.cu's GDN entry
// out: kq = [k^; q^] without the decay, the per-token decays a_t = 2^G_t, b_t = 2^(G_63 - G_t)
// (tok), tmb, aqk and gamma in prep v4's layouts, no (k b)^T (that entry applies a_t and b_t
// itself: 48.5 of the 64.5 KiB a chunk prep v4 writes; B1 T32768 H16 308 -> 260 us).
//
// One block per (chunk, value head, sequence); 256 threads:
//   0. the raw stage: q, k rows by cp.async (prep v4's copy, zero past T), threads 128..255
//      then ask L2 for a later block's rows (prefetch_ahead); beta by 64 threads;
//      the gate by warp 2 meanwhile: lg_t = max(-A log2(1 + 2^((g + dt_bias) log2 e)), -64)
//      (A = exp(A_log): -A softplus(g + dt_bias) in log2 units, 3 MUFU; 0 past T), its prefix
//      G by a warp scan over token pairs, 2^G_t, 2^(G_63 - G_t) and gamma = 2^G_63 (and the
//      chunk's transition bound for decay-bounded context parallel, when asked: gate_scan);
//   1. the l2 scales from the Gram diagonals (prep v4's gram_norms);
//   2. thread (sub-block I = warp / 2, channel pair cp): k^, q^ of its 16 tokens from the raw
//      stage and the scales, as f16x2 pairs of kq's rows; threads 0..63 the decays (write_tok);
//   3. the 10 blocks I >= J of both Gram matrices on mma m16n8k16 bf16 (raw rows: the products
//      exact in fp32, fp32 sums), block (I, J) by one warp for q k^T and k k^T together (the
//      k_J fragments shared): Aqk = S_qk (scale / |q_i|) (E_ij / |k_j|), Akk = S_kk (beta_i /
//      |k_i|) (E_ij / |k_j|), E_ij = 2^min(G_i - G_j, 0), masked on the diagonal blocks; Aqk f16
//      to global, Akk's diagonal blocks fp32 and the pairs f16 to shared memory;
//   4. the solve: prep v4's diagonal inverses and three levels (chunk64_prep_shared.cuh).
// The clamp of lg at -64 (a decay below 2^-64 is taken as 2^-64, a relative 5e-20 on the terms
// that cross it) keeps G finite (|G| <= 4096: its fp32 ulp moves E by <= 3.4e-4 relative, ~1e-5
// at the harsh gates' |G| ~ 200) where an infinite log decay would make G_i - G_j NaN.
//
// Entries: kda_chunk64_prep_gdn_sm90a_f16_k128 (beta effective) and _sigbeta_ (beta logits,
// sigmoid here), `const __grid_constant__ Chunk64PrepGdnParams`, grid as prep v4, 256 threads,
// 60480 bytes of dynamic shared memory: three blocks per SM, held to 80 registers by
// __launch_bounds__(256, 3), no spill.
// Not checked here: K = 128; HV a multiple of H; the buffers' extents; NC = ceil(T / 64).
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/tma.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk64_seqs.cuh"
#include "kda/chunk64_prep4_smem.cuh"
#include "kda/chunk64_prep_shared.cuh"

namespace kernrt::kda::c64p4::gdn {

struct SmemGdn {
  SolveTiles sv;                    // phase 4
  __half akh[6][kSub][kRowB];       // Akk of pair p (I > J), f16
  float akd[4][kSub * kSub + 4];    // Akk diagonal blocks, fp32
  float beta[kC];
  float G[kC];                      // log2 decay from the chunk's start to token t, inclusive
  float ea[kC];                     // 2^G_t
  float eb[kC];                     // 2^(G_63 - G_t)
  uint32_t rq[kC][kRawW];           // the raw stage (prep v4's rows)
  uint32_t rk[kC][kRawW];
  float2 rs[kC];                    // per token the l2 scales (q's times scale, k's)
};

constexpr int kChunk64PrepGdnSmem = 60480;
static_assert(int(sizeof(SmemGdn)) == kChunk64PrepGdnSmem, "kChunk64PrepGdnSmem is the layout");
static_assert(3 * (kChunk64PrepGdnSmem + 1024) <= 228 * 1024, "three blocks per SM (1 KiB reserved each)");
static_assert(offsetof(SmemGdn, akh) % 16 == 0 && offsetof(SmemGdn, akd) % 16 == 0,
              "ldmatrix rows of akh, float4 rows of akd");
static_assert(offsetof(SmemGdn, rq) % 16 == 0 && offsetof(SmemGdn, rk) % 16 == 0,
              "cp.async destinations and ldmatrix rows of the raw stage");
static_assert(offsetof(SmemGdn, rs) % 16 == 0 && offsetof(SmemGdn, G) % 8 == 0,
              "rs read as float4 (two tokens' scales), G as float2");
static_assert(kThreads == 4 * kC, "thread = (sub-block, channel pair)");

// The gate of the chunk by one warp: lane l takes tokens 2l, 2l + 1 (lg 0 past T), an inclusive
// scan of the pair sums, G_{2l+1} = the scan, G_{2l} = the scan - lg_{2l+1}; then 2^G, 2^(G_63 -
// G) to shared memory and gamma (2^G_63 on the 128 key channels, a float4 per lane) to global;
// with p.bound, G_63 + sum log2 max(1, |1 - beta|) over the live tokens (the chunk's transition
// bound, Chunk64PrepGdnParams::bound; the clamp below only raises it; a NaN beta makes it NaN,
// which no segment's sum passes: that segment stays exact). Beta logits give beta in (0, 1):
// no term.
template <bool kBetaSigmoid>
__device__ __forceinline__ void gate_scan(const Chunk64PrepGdnParams& p, SmemGdn& sm, int lane,
                                          int64_t row0, int hv, int HV, int live, int64_t chunk) {
  const float A = __expf(p.a_log[hv]), dtl = p.dt_bias[hv] * kLog2e;
  float lg[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int t = 2 * lane + u;
    const int64_t i = (row0 + t) * HV + hv;
    const float x = t < live ? c64::token_scalar(p.g, i, p.flags & kPrepGBf16) : 0.f;
    // 2^z = inf gives -inf: the clamp keeps G finite (header)
    lg[u] = t < live ? fmaxf(-A * __log2f(1.f + exp2f(fmaf(x, kLog2e, dtl))), -64.f) : 0.f;
  }
  float s = lg[0] + lg[1];
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, s, d);
    if (lane >= d) s += y;
  }
  const float G0 = s - lg[1], Gend = __shfl_sync(0xffffffffu, s, 31);
  *reinterpret_cast<float2*>(&sm.G[2 * lane]) = make_float2(G0, s);
  *reinterpret_cast<float2*>(&sm.ea[2 * lane]) = make_float2(exp2f(G0), exp2f(s));
  *reinterpret_cast<float2*>(&sm.eb[2 * lane]) = make_float2(exp2f(Gend - G0), exp2f(Gend - s));
  const float gm = exp2f(Gend);
  reinterpret_cast<float4*>(p.gamma + chunk * kK)[lane] = make_float4(gm, gm, gm, gm);
  if (p.bound == nullptr) return;
  float e = 0.f;
  if (!kBetaSigmoid) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int t = 2 * lane + u;
      const float d = t < live ? fabsf(1.f - c64::token_scalar(p.beta, (row0 + t) * HV + hv,
                                                                p.flags & kPrepBetaBf16))
                               : 0.f;
      e += d <= 1.f ? 0.f : __log2f(d);  // NaN: log2 of NaN
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) e += __shfl_xor_sync(0xffffffffu, e, d);
  }
  if (lane == 0) p.bound[chunk] = Gend + e;
}

// Step 2, thread (sub-block I, channel pair cp): k^ and q^ rows (tokens 16 I ..) of kq, f16
// pairs, without the decay (the GDN state entry applies 2^G_t and 2^(G_63 - G_t) per token:
// write_tok), and no (k b)^T: that entry reads k^'s rows transposed.
__device__ __forceinline__ void state_rows(const Chunk64PrepGdnParams& p, const SmemGdn& sm,
                                           int64_t chunk, int I, int cp) {
  const int r0 = kSub * I;
  __half* kq = p.kq + chunk * 2 * kC * kK + r0 * kK + 2 * cp;
#pragma unroll
  for (int t = 0; t < kSub; ++t) {
    const int r = r0 + t;
    const float2 sc = sm.rs[r];
    const float2 q = scl2(bf2(sm.rq[r][cp]), sc.x), k = scl2(bf2(sm.rk[r][cp]), sc.y);
    stg_h2(kq + t * kK, k.x, k.y);
    stg_h2(kq + (kC + t) * kK, q.x, q.y);
  }
}

// The per-token decays of the chunk (Chunk64PrepGdnParams::tok), by threads 0..63.
__device__ __forceinline__ void write_tok(float* tok, const SmemGdn& sm, int t) {
  tok[t] = sm.ea[t], tok[kC + t] = sm.eb[t];
}

// Step 3, block u of the 10 with I >= J (u < 4: the diagonal block (u, u); else pair p = u - 4,
// (pair_i(p), pair_j(p))): S_qk = q_I k_J^T and S_kk = k_I k_J^T of the raw bf16 rows (gram_norms'
// fragment map: A from rows 16 I + .., B from rows 16 J + ..), 8 k-steps x 4 mma, then the
// scales and E per element of the accumulators (rows i = 16 I + g, + 8; columns j = 16 J +
// 8 nt + 2 qd, + 1).
__device__ __forceinline__ void gram_block(SmemGdn& sm, __half* aqk, int u, int lane) {
  const int g = lane >> 2, qd = lane & 3, p = u - 4;
  const bool diag = u < 4;
  const int bI = diag ? u : pair_i(p), bJ = diag ? u : pair_j(p);
  const int ra = kSub * bI + (lane & 7) + 8 * ((lane >> 3) & 1), rb = kSub * bJ + (lane & 7) + 8 * (lane >> 4);
  const uint32_t pq = smem_u32(&sm.rq[ra][0]) + 16 * (lane >> 4);
  const uint32_t pk = smem_u32(&sm.rk[ra][0]) + 16 * (lane >> 4);
  const uint32_t pb = smem_u32(&sm.rk[rb][0]) + 16 * ((lane >> 3) & 1);
  float sq[2][4] = {}, sk[2][4] = {};
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    uint32_t fq[4], fk[4], fb[4];
    ptx::ldmatrix_x4(fq[0], fq[1], fq[2], fq[3], pq + 32 * ks);
    ptx::ldmatrix_x4(fk[0], fk[1], fk[2], fk[3], pk + 32 * ks);
    ptx::ldmatrix_x4(fb[0], fb[1], fb[2], fb[3], pb + 32 * ks);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      ptx::mma_m16n8k16_bf16(sq[nt], fq[0], fq[1], fq[2], fq[3], fb[2 * nt], fb[2 * nt + 1]);
      ptx::mma_m16n8k16_bf16(sk[nt], fk[0], fk[1], fk[2], fk[3], fb[2 * nt], fb[2 * nt + 1]);
    }
  }
  const int i0 = kSub * bI + g;
  const float2 si[2] = {sm.rs[i0], sm.rs[i0 + 8]};
  const float Gi[2] = {sm.G[i0], sm.G[i0 + 8]};
  const float kb[2] = {si[0].y * sm.beta[i0], si[1].y * sm.beta[i0 + 8]};  // beta_i / |k_i|
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int jl = 8 * nt + 2 * qd, j = kSub * bJ + jl;  // columns j, j + 1
    const float4 sj = *reinterpret_cast<const float4*>(&sm.rs[j]);
    const float2 Gj = *reinterpret_cast<const float2*>(&sm.G[j]);
    float vq[4], vk[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e >> 1, c = e & 1, il = g + 8 * h;
      const float w = (c ? sj.w : sj.y) * exp2f(fminf(Gi[h] - (c ? Gj.y : Gj.x), 0.f));
      vq[e] = sq[nt][e] * si[h].x * w;
      vk[e] = sk[nt][e] * kb[h] * w;
      if (diag) {
        vq[e] = il >= jl + c ? vq[e] : 0.f;
        vk[e] = il > jl + c ? vk[e] : 0.f;
      }
    }
    stg_h2(aqk + i0 * kC + j, vq[0], vq[1]);
    stg_h2(aqk + (i0 + 8) * kC + j, vq[2], vq[3]);
    if (diag) {
      *reinterpret_cast<float2*>(&sm.akd[bI][g * kSub + jl]) = make_float2(vk[0], vk[1]);
      *reinterpret_cast<float2*>(&sm.akd[bI][(g + 8) * kSub + jl]) = make_float2(vk[2], vk[3]);
    } else {
      stg_h2(&sm.akh[p][g][jl], vk[0], vk[1]);
      stg_h2(&sm.akh[p][g + 8][jl], vk[2], vk[3]);
    }
  }
}

// Dense grids (NC, HV, N): thread t of 128 asks L2 for one 256-byte raw q (t < 64) or k row of
// the block kPrefetchAhead places later in launch order (x fastest), whose own cp.async then
// finds it there. The prep's DRAM ran at ~61 % of the copy rate (ncu), each block's raw load
// exposed at its start: 198 ahead (half of the 396 resident blocks of 132 SMs) took GDN B1
// T32768 H16 with state 529.3 -> 510.2 us and B8 T4096 462.8 -> 441.4 us, the same bits; 396
// ahead gained 3 us. KDA's prep v4 lost 28 us the same way (two blocks an SM, g rows too).
constexpr int kPrefetchAhead = 198;
__device__ __forceinline__ void prefetch_ahead(const Chunk64PrepGdnParams& p, int t) {
  const int64_t nb = int64_t(gridDim.x) * gridDim.y * gridDim.z;
  const int64_t L = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z) +
                    kPrefetchAhead;
  if (L >= nb) return;
  const int x = int(L % gridDim.x);
  const int64_t yz = L / gridDim.x;
  const int y = int(yz % gridDim.y), z = int(yz / gridDim.y), r = t & (kC - 1);
  if (kC * x + r >= p.tokens) return;
  const int64_t row = int64_t(z) * p.tokens + kC * x + r;
  ptx::bulk_prefetch_l2((t < kC ? p.q : p.k) + (row * p.heads + y / p.group) * kK, kK * 2);
}

template <bool kBetaSigmoid>
__device__ void prep_gdn(const Chunk64PrepGdnParams& p, SmemGdn& sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int I = warp >> 1, cp = tid & (kC - 1);
  const int hv = blockIdx.y, HV = gridDim.y;
  const int h = int(__fdividef(float(hv) + 0.5f, float(p.group)));  // hv / group, exact (prep v4)
  // PDL, then the chunk (chunk64_seqs.cuh): live = its tokens before the sequence's end
  c64::PrepChunk pc;
  if (!c64::prep_block_chunk(p, hv, HV, lane, pc)) return;
  const int live = pc.live;
  const int64_t row0 = pc.row0, chunk = pc.slot;
  __half* aqk = p.aqk + chunk * kC * kC;
  __half* tmb = p.tmb + chunk * kC * kC;

  // ---- 0. raw stage, beta, the gate (warp 2, while the copies land) ---------------------------
  if (live >= kC) qk_stage<false>(p, sm, tid, row0, h, live);
  else qk_stage<true>(p, sm, tid, row0, h, live);
  ptx::cp_async_commit_group();
  if (p.cu_seqlens == nullptr && tid >= 2 * kC) prefetch_ahead(p, tid - 2 * kC);
  if (tid < kC) {  // kBetaSigmoid: beta logits, beta = 1 / (1 + 2^(-x log2 e)) (2 MUFU); 0 past T
    const int64_t i = (row0 + tid) * HV + hv;
    const float x = tid < live ? c64::token_scalar(p.beta, i, p.flags & kPrepBetaBf16) : 0.f;
    sm.beta[tid] = !kBetaSigmoid ? x : (tid < live ? __fdividef(1.f, 1.f + exp2f(-x * kLog2e)) : 0.f);
  }
  if (warp == 2) gate_scan<kBetaSigmoid>(p, sm, lane, row0, hv, HV, live, chunk);
  ptx::cp_async_wait_group<0>();
  __syncthreads();

  // ---- 1. the l2 scales ---------------------------------------------------------------------
  gram_norms(sm, p.scale, I, warp, lane);
  __syncthreads();

  // ---- 2. the state operands; 3. the Gram blocks (warps 0, 1 take two), the zero blocks -------
  state_rows(p, sm, chunk, I, cp);
  if (tid < kC) write_tok(p.tok + chunk * 2 * kC, sm, tid);
  gram_block(sm, aqk, warp, lane);
  if (warp < 2) gram_block(sm, aqk, warp + 8, lane);
  else if (warp >= 6) zero_upper(aqk, tmb, warp - 6, lane);
  __syncthreads();

  // ---- 4. Tm = (I + Akk)^-1: diagonal inverses in fp32, then three levels on mma ------------
  if (tid < 4 * kSub) solve_diag(sm, tmb, tid);
  __syncthreads();
  if (warp < 6) solve_level<1>(sm, tmb, warp, lane);
  __syncthreads();
  if (warp < 4) solve_level<2>(sm, tmb, warp, lane);
  __syncthreads();
  if (warp < 2) solve_level<3>(sm, tmb, warp, lane);
}

template <bool kBetaSigmoid>
__device__ __forceinline__ void entry(const Chunk64PrepGdnParams& p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  prep_gdn<kBetaSigmoid>(p, *reinterpret_cast<SmemGdn*>(smem_raw));
}

}  // namespace kernrt::kda::c64p4::gdn

// One entry per beta form; the generator selects it (kernrt.gen.kda_chunk64 PREP_GDN_ENTRIES).
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64p4::kThreads, 3)
    kda_chunk64_prep_gdn_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64PrepGdnParams p) {
  kernrt::kda::c64p4::gdn::entry<false>(p);
}
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64p4::kThreads, 3)
    kda_chunk64_prep_gdn_sigbeta_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64PrepGdnParams p) {
  kernrt::kda::c64p4::gdn::entry<true>(p);
}
