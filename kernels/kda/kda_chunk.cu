// KDA / GDN chunked forward (prefill) for the H200 (sm_90a): outputs o and the final state of
// every sequence, from q, k, v, g, beta and an initial state (kernels/kda/README.md "Chunked
// forward"). One block per (value tile of 128 rows, value head, sequence or segment); it walks
// its span 16 tokens at a time with two roles:
//   prep warps (8, threads 256..511)  chunk_prep.cuh: loads, l2norm, gate, cumulative decays,
//                                     the intra-chunk matrices and their solve, two chunks
//                                     ahead of the state;
//   state warps (8, threads 0..255)   chunk_state.cuh: 16 value rows of the fp32 state each,
//                                     the state-dependent products on tensor cores, the outputs.
// Hand-off through named barriers: FULL[s] (prep arrives, state waits) and EMPTY[s] (state
// arrives, the prep threads that write the stage first wait) per operand stage s of two.
//
// Entries: kda_chunk_sm90a_bf16_k128 (a decay per key channel) and gdn_chunk_sm90a_bf16_k128
// (one per head), one `const __grid_constant__ KdaChunkParams`. Grid (V / 128, HV, seqs *
// segments), block 512 (128 registers), dynamic shared memory kChunkSmemBytes (168 KiB, one
// block per SM).
// Graph-safe: lengths come from cu_seqlens in device memory; a span of 0 tokens copies the
// initial state to the final state.
//
// Not checked here: K = 128, V % 128, HV % H, the pool lines (the manifest's domains), that
// initial and final states of one call do not overlap unless they are the same line (a block
// reads its rows of h0 before it writes the same rows of ht, so in place is safe).
#include "common/ptx/ldst.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/warpgroup.cuh"
#include "kda/chunk_prep.cuh"
#include "kda/chunk_smem.cuh"
#include "kda/chunk_state.cuh"
#include "kda/cp_combine.cuh"
#include "kda/params.h"

namespace kernrt::kda {

// Where a block's state rows come from and go to: the first of its 128 rows (row stride K
// floats) in a state line or in the context-parallel scratch; null `x0` reads zeros, null `x1`
// writes nothing; `identity` starts from X = I (a transition tile, whose rows are key rows).
struct TilePlan {
  const float* x0;
  float* x1;
  bool identity, out, zero_v, exit;
};

__device__ __forceinline__ void state_role(const KdaChunkParams& p, const Span& sp, ChunkSmem& sm,
                                           int nchunks, const TilePlan& plan) {
  StateWarp sw;
  sw.warp = threadIdx.x >> 5;
  sw.lane = threadIdx.x & 31;
  const int g = sw.lane >> 2, q = sw.lane & 3, hv = blockIdx.y;
  const int r0 = 16 * sw.warp + g;  // this lane's rows of the tile: r0 and r0 + 8

  // ---- initial state ---------------------------------------------------------------------
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r0 + 8 * h;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      const int c = 8 * n + 2 * q;
      float2 x = make_float2(0.f, 0.f);
      if (plan.x0 != nullptr) x = *reinterpret_cast<const float2*>(plan.x0 + r * kHeadDim + c);
      if (plan.identity) x = make_float2(r == c ? 1.f : 0.f, r == c + 1 ? 1.f : 0.f);
      sw.x[n][2 * h] = x.x, sw.x[n][2 * h + 1] = x.y;
    }
  }

  // ---- chunks ------------------------------------------------------------------------------
  uint16_t (&ost)[kChunk][kChunk] = sm.ostage[sw.warp];
  if (threadIdx.x == 0)  // read by every state warp after its first FULL barrier
    sm.obase = sp.off(p.o_stride_seq, p.o_stride_tok, 0) + int64_t(hv) * p.dim_v + blockIdx.x * kVTile;
  for (int c = 0; c < nchunks; ++c) {
    const int s = c % kOpStages;
    ptx::bar_sync(kBarFull + s, kChunkThreads);
    if (plan.out) {
      sw.apply<true>(sm.op[s], ost);
      __syncwarp();
      const int t = sw.lane >> 1, half = sw.lane & 1;
      if (c * kChunk + t < sp.len) {
        const uint4 v = *reinterpret_cast<const uint4*>(&ost[t][8 * half]);
        uint16_t* o = static_cast<uint16_t*>(p.o) + sm.obase + int64_t(c * kChunk + t) * p.o_stride_tok +
                      16 * sw.warp + 8 * half;
        *reinterpret_cast<uint4*>(o) = v;
      }
      __syncwarp();
    } else {
      sw.apply<false>(sm.op[s], ost);
    }
    if (c + kOpStages < nchunks) ptx::bar_arrive(kBarEmpty + s, kEmptyCount);
  }

  // ---- final state ---------------------------------------------------------------------------
  if (plan.x1 != nullptr) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * h;
#pragma unroll
      for (int n = 0; n < 16; ++n)
        *reinterpret_cast<float2*>(plan.x1 + r * kHeadDim + 8 * n + 2 * q) =
            make_float2(sw.x[n][2 * h], sw.x[n][2 * h + 1]);
    }
  }
}

template <bool kKda>
__device__ __forceinline__ void prep_role(const KdaChunkParams& p, const Span& sp, ChunkSmem& sm,
                                          int nchunks, const PrepThread<kKda>& th, bool zero_v) {
  if (nchunks == 0) return;
  const int hv = blockIdx.y, vt = blockIdx.x;
  // Column sets of the pairwise step: 17 pairs per warp.
  const int cols[2] = {th.warp, 15 - th.warp};
  const bool f16_half = th.tid < kHeadDim;  // prep_channel_f16; the others prep_channel_tf32
  float b_pend = 0.f, g_pend = 0.f, b_new = 0.f, g_new = 0.f;
  const SpanBase sb = span_base(p, sp, hv, vt, kKda);
  prep_issue<kKda>(p, sp, sb, 0, sm.raw[0], th, b_new, g_new, zero_v);
  if (th.tid < kChunk) sm.raw[0].beta[th.tid] = b_new, sm.raw[0].gs[th.tid] = g_new;
  if (nchunks > 1) {
    prep_issue<kKda>(p, sp, sb, 1, sm.raw[1], th, b_pend, g_pend, zero_v);
  } else {
    ptx::cp_async_commit_group();
  }
  for (int c = 0; c < nchunks; ++c) {
    const int st = c % kRawStages, s = c % kOpStages;
    if (c + 2 < nchunks) {
      prep_issue<kKda>(p, sp, sb, c + 2, sm.raw[(c + 2) % kRawStages], th, b_new, g_new, zero_v);
    } else {
      ptx::cp_async_commit_group();
    }
    ptx::cp_async_wait_group<2>();
    ptx::bar_sync(kBarPrep, kPrepThreads);
    prep_tokens<kKda>(p, sp, c, sm.raw[st], sm.prep, th);
    ptx::bar_sync(kBarPrep, kPrepThreads);
    Operands& op = sm.op[s];
    if (f16_half) {
      if (c >= kOpStages) ptx::bar_sync(kBarEmpty + s, kEmptyCount);
      prep_channel_f16(sm.raw[st], sm.prep, op, th.tid);
    } else if constexpr (kKda) {
      const bool wsafe = __all_sync(0xffffffffu, prep_channel_tf32(sm.prep, th.tid - kHeadDim));
      if (th.lane == 0) sm.prep.safe[th.warp - kHeadDim / 32] = wsafe;
    }
    if constexpr (kKda) {
      ptx::bar_sync(kBarPrep, kPrepThreads);  // the operands of both halves and the flags
      bool fast = true;
#pragma unroll
      for (int w = 0; w < kHeadDim / 32; ++w) fast = fast && sm.prep.safe[w] != 0;
      if (fast) {
        prep_intra_tf32(sm.prep, op, th.warp, th.lane);
      } else {
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int j = cols[jj];
          float v;
          prep_column(sm.prep, j, th.lane, v);
          if (th.lane < kChunk) {
            op.aqk[th.lane][j] = __float2half_rn(th.lane >= j ? v : 0.f);
          } else {
            const int i = th.lane - kChunk;
            sm.prep.akk[i][j] = i > j ? v * sm.prep.beta[i] : 0.f;
          }
        }
      }
    } else {
      prep_gram(sm.raw[st], sm.prep, op, th.warp, th.lane);
    }
    ptx::bar_sync(kBarPrep, kPrepThreads);
    if (th.warp == 0) prep_solve(sm.prep, op, th.lane);
    if (th.tid < kChunk && c + 1 < nchunks) {
      sm.raw[(c + 1) % kRawStages].beta[th.tid] = b_pend;
      sm.raw[(c + 1) % kRawStages].gs[th.tid] = g_pend;
    }
    b_pend = b_new, g_pend = g_new;
    ptx::bar_arrive(kBarFull + s, kChunkThreads);
  }
}

__device__ __forceinline__ TilePlan tile_plan(const KdaChunkParams& p, const Span& sp) {
  const int hv = blockIdx.y, vt = blockIdx.x;
  const bool mtile = vt * kVTile >= p.dim_v;  // the transition tile of phase 1
  TilePlan t{nullptr, nullptr, false, (p.flags & kFlagNoOutput) == 0, false, false};
  const int64_t l0 = p.h0_lines != nullptr ? p.h0_lines[sp.n] : sp.n;
  const int64_t l1 = p.ht_lines != nullptr ? p.ht_lines[sp.n] : sp.n;
  const float* h0 = p.h0 != nullptr && (p.h0_lines == nullptr || l0 != 0)
                        ? state_row(const_cast<void*>(p.h0), l0, p.h0_stride, hv, p.dim_v, vt * kVTile)
                        : nullptr;
  float* ht = p.ht != nullptr && (p.ht_lines == nullptr || l1 != 0)
                  ? state_row(p.ht, l1, p.ht_stride, hv, p.dim_v, vt * kVTile)
                  : nullptr;
  if (sp.seg > 0 && sp.len <= 0) {  // a segment past its sequence's end
    t.exit = true;
    return t;
  }
  if (p.cp_phase == 0) {
    t.x0 = h0, t.x1 = ht;
    return t;
  }
  const int segs = p.cp_segs;
  const CpScratch cs = cp_scratch(p, segs);
  const int64_t unit = (int64_t(sp.n) * segs + sp.seg) * p.value_heads + hv;
  float* b = cs.b + (unit * p.dim_v + vt * kVTile) * kHeadDim;
  if (p.cp_phase == 1) {
    if (sp.seg == 0) {  // the first segment runs for real; its end state goes to B
      t.exit = mtile, t.x0 = h0, t.x1 = b;
    } else if (mtile) {
      t.identity = true, t.zero_v = true, t.out = false;
      t.x1 = cs.m + unit * kHeadDim * kHeadDim;
    } else {
      t.out = false, t.x1 = b;
    }
    return t;
  }
  // phase 3: segments 1.. from their combined initial states (the combine wrote ht)
  t.exit = sp.seg == 0 || mtile;
  t.x0 = cs.init + (unit * p.dim_v + vt * kVTile) * kHeadDim;
  return t;
}

template <bool kKda>
__device__ __forceinline__ void kda_chunk(const KdaChunkParams& p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  ChunkSmem& sm = *reinterpret_cast<ChunkSmem*>(smem_raw);
  const int warp = threadIdx.x >> 5;
  const bool prep = warp >= kStateWarps;

  // ---- gate parameters (weights: read before the PDL wait) ---------------------------------
  PrepThread<kKda> th;
  if (prep) {
    th.tid = threadIdx.x - 32 * kStateWarps;
    th.lane = threadIdx.x & 31;
    th.warp = th.tid >> 5;
    th.row = th.tid >> 4;
    th.sub = th.tid & 15;
    th.a = 1.f;
#pragma unroll
    for (int i = 0; i < kTokCh; ++i) th.dtb[i] = 0.f;
    if (p.flags & kFlagGate) {
      const int hv = blockIdx.y;
      if (p.A_log != nullptr) th.a = __expf(p.A_log[hv]);
      if (p.dt_bias != nullptr) {
        if (kKda) {
#pragma unroll
          for (int j = 0; j < kTokCh / 4; ++j) {
            const uint4 x = ptx::ld_global_nc_v4(p.dt_bias + hv * kHeadDim + tok_channel(4 * j, th.sub));
            th.dtb[4 * j] = __uint_as_float(x.x), th.dtb[4 * j + 1] = __uint_as_float(x.y);
            th.dtb[4 * j + 2] = __uint_as_float(x.z), th.dtb[4 * j + 3] = __uint_as_float(x.w);
          }
        } else {
          th.dtb[0] = p.dt_bias[hv];
        }
      }
    }
  }
  ptx::griddepcontrol_wait();

  const Span sp = block_span(p);
  const TilePlan plan = tile_plan(p, sp);
  if (plan.exit) return;
  const int nchunks = (sp.len + kChunk - 1) / kChunk;
  if (prep) {
    ptx::setmaxnreg_dec<kPrepRegs>();
    prep_role<kKda>(p, sp, sm, nchunks, th, plan.zero_v);
  } else {
    ptx::setmaxnreg_inc<kStateRegs>();
    state_role(p, sp, sm, nchunks, plan);
  }
  ptx::griddepcontrol_launch_dependents();
}

}  // namespace kernrt::kda

// ---- entries -------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(kernrt::kda::kChunkThreads, 1)
    kda_chunk_sm90a_bf16_k128(const __grid_constant__ kernrt::kda::KdaChunkParams p) {
  kernrt::kda::kda_chunk<true>(p);
}

extern "C" __global__ void __launch_bounds__(kernrt::kda::kChunkThreads, 1)
    gdn_chunk_sm90a_bf16_k128(const __grid_constant__ kernrt::kda::KdaChunkParams p) {
  kernrt::kda::kda_chunk<false>(p);
}

// Shared by KDA and GDN (the transitions already hold the decays); _bounded_: decay-bounded
// context parallel's, which skips the transitions phase 1 dropped (cp_combine kZeroSkip).
extern "C" __global__ void __launch_bounds__(kernrt::kda::kCombineThreads)
    kda_cp_combine_sm90a_f32_k128(const __grid_constant__ kernrt::kda::KdaChunkParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  kernrt::kda::cp_combine<false>(p, *reinterpret_cast<kernrt::kda::CombineSmem*>(smem_raw));
}
extern "C" __global__ void __launch_bounds__(kernrt::kda::kCombineThreads)
    kda_cp_combine_bounded_sm90a_f32_k128(const __grid_constant__ kernrt::kda::KdaChunkParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  kernrt::kda::cp_combine<true>(p, *reinterpret_cast<kernrt::kda::CombineSmem*>(smem_raw));
}
