// Prep role of the KDA / GDN chunked forward (kda_chunk.cu): the eight prep warps turn one
// chunk of 16 tokens into the tensor-core operands the state warps consume (chunk_smem.cuh
// Operands), everything that does not depend on the recurrent state:
//   1. cp.async of q, k, v, g (and a register prefetch of beta / GDN's g) two chunks ahead;
//   2. per token (16 threads a token, 8 channels a thread): q, k l2norm (eps inside the sqrt)
//      and scale, the log decay (gate in the kernel or given) and alpha = exp(log decay), beta
//      (sigmoid); past the span q = k = 0, alpha = 1, beta = 0, so padded tokens change nothing;
//   3. per key channel, two threads (prep threads c and 128 + c): the cumulative products
//      a_t = prod_{u<=t} alpha_u, b_t = prod_{u>t} alpha_u (never exp of a cumulative sum:
//      every factor is <= 1, so no gate overflows) and the f16 operands q^ a, k^ a, k^ b,
//      gamma = a_15, v^T in fp32 (the f16 half); KDA's tf32 intra operands (the tf32 half);
//   4. Aqk[i][j] = sum_c q^_i k^_j prod_{t=j+1..i} alpha_t (i >= j) and Akk (i > j, times
//      beta_i). KDA: on tensor cores (tf32) as (q f)(k / f)^T with f = exp(G - G_7) when
//      every channel's factors stay in fp32 range (fla-init and bounded gates), else pair by
//      pair in fp32 (kernel-fun's harsh gates; warp w takes columns j in {w, 15-w}, 17 pairs
//      each, lane l channels 4l..4l+3, one reduce-scatter of 32 partial sums per column).
//      GDN: bf16 Gram matrices on tensor cores times fp32 norms and decays;
//   5. Tm = (I + Akk)^-1 by forward substitution (warp 0, lane j = column j), Tm Diag(beta).
//
// Eight prep warps rather than four (the profile at 856ee7a: the four prep warps, one per
// scheduler, were the critical path, issuing ~1 instruction per 10 cycles each while the state
// warps waited 74 % of the time; 512 threads fit 128 registers without spills).
//
// Not checked here: what kda_chunk.cu guarantees (256 prep threads, span and stage indices).
#pragma once

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "kda/chunk_smem.cuh"
#include "kda/kda_vec.cuh"

namespace kernrt::kda {

// Per-thread constants of the prep role: its token row (tid / 16) and channels (sub = tid % 16:
// 64 j + 4 sub + e, j 0..1, e 0..3) for step 2, the gate's exp(A_log) and dt_bias of those
// channels.
constexpr int kTokCh = 8;   // key channels per prep thread in step 2
template <bool kKda>
struct PrepThread {
  int tid, lane, warp, row, sub;
  float a;                  // exp(A_log[hv])
  float dtb[kTokCh];        // dt_bias of channels 64 j + 4 sub + e (KDA), dtb[0] (GDN)
};
__device__ __forceinline__ int tok_channel(int i, int sub) { return 64 * (i / 4) + 4 * sub + i % 4; }

// Element offsets of token 0 of the block's span (its head and value tile included) for every
// input, computed once per block: a chunk's loads then add only tok * stride_tok (the
// division by HV / H, the varlen select and 64-bit products of Span::off were ~40 % of the
// load step's instructions in the profile).
struct SpanBase {
  int64_t qk, v, g, beta;   // element offsets of token 0 (g: KDA row start / GDN head)
};

__device__ __forceinline__ SpanBase span_base(const KdaChunkParams& p, const Span& sp, int hv,
                                              int vt, bool kda) {
  const int h = hv / (p.value_heads / p.heads);
  SpanBase b;
  b.qk = sp.off(p.qk_stride_seq, p.qk_stride_tok, 0) + int64_t(h) * kHeadDim;
  b.v = sp.off(p.v_stride_seq, p.v_stride_tok, 0) + int64_t(hv) * p.dim_v + vt * kVTile;
  b.g = sp.off(p.g_stride_seq, p.g_stride_tok, 0) + int64_t(hv) * (kda ? kHeadDim : 1);
  b.beta = sp.off(p.beta_stride_seq, p.beta_stride_tok, 0) + hv;
  return b;
}

// cp.async of chunk `c` of the span into raw stage `st` (zero fill past the span), and the
// register prefetch of beta (and GDN's g) for it.
template <bool kKda>
__device__ __forceinline__ void prep_issue(const KdaChunkParams& p, const Span& sp,
                                           const SpanBase& sb, int c, RawStage& st,
                                           const PrepThread<kKda>& th, float& beta_raw,
                                           float& gs_raw, bool zero_v) {
  const int tok0 = c * kChunk;
  // q, k, v: 16 rows x 16 vectors of 16 bytes each; thread i does row i / 16.
  static_assert(kChunk * 16 == kPrepThreads, "one q, k, v vector per prep thread");
  {
    const int t = th.tid / 16, col = (th.tid % 16) * 8;
    const bool ok = tok0 + t < sp.len;
    const int64_t tt = ok ? tok0 + t : 0;
    const int64_t qk = sb.qk + tt * p.qk_stride_tok + col;
    ptx::cp_async_cg_16_zfill(&st.q[t][col], static_cast<const uint16_t*>(p.q) + qk, ok ? 16 : 0);
    ptx::cp_async_cg_16_zfill(&st.k[t][col], static_cast<const uint16_t*>(p.k) + qk, ok ? 16 : 0);
    if (!zero_v) {
      const uint16_t* v = static_cast<const uint16_t*>(p.v) + sb.v + tt * p.v_stride_tok + col;
      ptx::cp_async_cg_16_zfill(&st.v[t][col], v, ok ? 16 : 0);
    } else {
      ptx::cp_async_cg_16_zfill(&st.v[t][col], p.q, 0);  // context-parallel transition tile: v = 0
    }
  }
  const bool gf32 = (p.flags & kFlagGF32) != 0;
  if (kKda) {
    // g: 16 rows x 512 (f32) or 256 (bf16) bytes.
    const int vecs = gf32 ? 32 : 16;
#pragma unroll
    for (int r = 0; r < kChunk * 32 / kPrepThreads; ++r) {
      const int i = th.tid + kPrepThreads * r;
      const int t = i / vecs, col = (i % vecs) * (gf32 ? 4 : 8);
      if (t < kChunk) {
        const bool ok = tok0 + t < sp.len;
        const int64_t tt = ok ? tok0 + t : 0;
        const int64_t e = sb.g + tt * p.g_stride_tok + col;
        const void* src = gf32 ? static_cast<const void*>(static_cast<const float*>(p.g) + e)
                               : static_cast<const void*>(static_cast<const uint16_t*>(p.g) + e);
        char* dst = reinterpret_cast<char*>(&st.g[t][0]) + (gf32 ? col * 4 : col * 2);
        ptx::cp_async_cg_16_zfill(dst, src, ok ? 16 : 0);
      }
    }
  }
  ptx::cp_async_commit_group();
  // beta (and GDN's g): one scalar per token, by threads 0..15, held in registers until the
  // end of the current chunk's prep (its latency hides behind that work).
  beta_raw = 0.f, gs_raw = 0.f;
  if (th.tid < kChunk && tok0 + th.tid < sp.len) {
    const int64_t t = tok0 + th.tid;
    beta_raw = load1(p.beta, sb.beta + t * p.beta_stride_tok, (p.flags & kFlagBetaF32) != 0);
    if (!kKda) gs_raw = load1(p.g, sb.g + t * p.g_stride_tok, gf32);
  }
}

// alpha = exp(log decay) of the thread's 16 channels of token row `t` (1 past the span), the
// gate form and g's dtype as template parameters: straight-line code over the 16 elements,
// so their latencies overlap (kGate 0: g is the log decay, 1: softplus gate, 2: lower_bound).
// Past the span g was zero-filled (finite log decay) and `live` = 0 makes it exp(0) = 1: a
// product rather than a select, which the compiler would turn into a branch per element.
template <int kGate, bool kGF32>
__device__ __forceinline__ void token_alphas(const RawStage& st, int t, int sub,
                                             const float (&dtb)[kTokCh], float a, float lb,
                                             float live, float (&al)[kTokCh]) {
#pragma unroll
  for (int i = 0; i < kTokCh; ++i) {
    const int ch = tok_channel(i, sub);
    const float g = kGF32 ? st.g[t][ch] : bf16_f32(reinterpret_cast<const uint16_t*>(&st.g[t][0])[ch]);
    float x = g;
    if (kGate == 1) x = -a * softplus(g + dtb[i]);
    if (kGate == 2) x = __fdividef(lb, 1.f + __expf(-a * (g + dtb[i])));
    al[i] = __expf(x * live);
  }
}

// Sum over the 16 threads of one token (a half warp; every lane ends with the same bits).
__device__ __forceinline__ float token16_sum(float x) {
#pragma unroll
  for (int w = 1; w < 16; w <<= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
  return x;
}

// Step 2: normalize q, k, gate -> alpha, beta; writes prep.qh / kh / al / beta.
template <bool kKda>
__device__ __forceinline__ void prep_tokens(const KdaChunkParams& p, const Span& sp, int c,
                                            const RawStage& st, PrepScratch& ps,
                                            const PrepThread<kKda>& th) {
  const int t = th.row;
  const bool ok = c * kChunk + t < sp.len;
  float q[kTokCh], k[kTokCh];
#pragma unroll
  for (int j = 0; j < kTokCh / 4; ++j) {
    const uint2 x = *reinterpret_cast<const uint2*>(&st.q[t][tok_channel(4 * j, th.sub)]);
    const uint2 y = *reinterpret_cast<const uint2*>(&st.k[t][tok_channel(4 * j, th.sub)]);
    q[4 * j] = bf16_lo(x.x), q[4 * j + 1] = bf16_hi(x.x), q[4 * j + 2] = bf16_lo(x.y), q[4 * j + 3] = bf16_hi(x.y);
    k[4 * j] = bf16_lo(y.x), k[4 * j + 1] = bf16_hi(y.x), k[4 * j + 2] = bf16_lo(y.y), k[4 * j + 3] = bf16_hi(y.y);
  }
  float qs = 0.f, ks = 0.f;
#pragma unroll
  for (int i = 0; i < kTokCh; ++i) qs = fmaf(q[i], q[i], qs), ks = fmaf(k[i], k[i], ks);
  float rq = 1.f, rk = 1.f;
  if (p.flags & kFlagL2norm) rq = l2_rscale(token16_sum(qs)), rk = l2_rscale(token16_sum(ks));
  rq = ok ? rq * p.scale : 0.f;
  rk = ok ? rk : 0.f;
  float al[kTokCh];
  if constexpr (kKda) {
    // one uniform branch per chunk instead of one per element
    const bool gf32 = (p.flags & kFlagGF32) != 0;
    const int gate = (p.flags & kFlagGate) ? ((p.flags & kFlagLowerBound) ? 2 : 1) : 0;
    const float lb = p.lower_bound, live = ok ? 1.f : 0.f;
    if (gate == 1) {
      if (gf32) token_alphas<1, true>(st, t, th.sub, th.dtb, th.a, lb, live, al);
      else token_alphas<1, false>(st, t, th.sub, th.dtb, th.a, lb, live, al);
    } else if (gate == 2) {
      if (gf32) token_alphas<2, true>(st, t, th.sub, th.dtb, th.a, lb, live, al);
      else token_alphas<2, false>(st, t, th.sub, th.dtb, th.a, lb, live, al);
    } else {
      if (gf32) token_alphas<0, true>(st, t, th.sub, th.dtb, th.a, lb, live, al);
      else token_alphas<0, false>(st, t, th.sub, th.dtb, th.a, lb, live, al);
    }
  } else {
    const float gs = __expf(log_decay(st.gs[t], th.dtb[0], th.a, p.flags, p.lower_bound));
#pragma unroll
    for (int i = 0; i < kTokCh; ++i) al[i] = ok ? gs : 1.f;
  }
#pragma unroll
  for (int j = 0; j < kTokCh / 4; ++j) {
    const int ch = tok_channel(4 * j, th.sub);
    *reinterpret_cast<float4*>(&ps.qh[t][ch]) =
        make_float4(q[4 * j] * rq, q[4 * j + 1] * rq, q[4 * j + 2] * rq, q[4 * j + 3] * rq);
    *reinterpret_cast<float4*>(&ps.kh[t][ch]) =
        make_float4(k[4 * j] * rk, k[4 * j + 1] * rk, k[4 * j + 2] * rk, k[4 * j + 3] * rk);
    *reinterpret_cast<float4*>(&ps.al[t][ch]) =
        make_float4(al[4 * j], al[4 * j + 1], al[4 * j + 2], al[4 * j + 3]);
  }
  if (th.sub == 0) {
    ps.beta[t] = ok ? beta_of(st.beta[t], p.flags) : 0.f;
    ps.rq[t] = rq, ps.rk[t] = rk;
  }
}

// Step 3, the f16 half (prep threads 0..127, `ch` = key channel and value column): cumulative
// products, the f16 operands of its column, gamma, v^T.
__device__ __forceinline__ void prep_channel_f16(const RawStage& st, const PrepScratch& ps,
                                                 Operands& op, int ch) {
  float a[kChunk], b[kChunk];
  float run = 1.f;
#pragma unroll
  for (int t = 0; t < kChunk; ++t) run *= ps.al[t][ch], a[t] = run;
  run = 1.f;
#pragma unroll
  for (int t = kChunk - 1; t >= 0; --t) {
    b[t] = run;
    run *= ps.al[t][ch];
  }
#pragma unroll
  for (int t = 0; t < kChunk; ++t) {
    const float qh = ps.qh[t][ch], kh = ps.kh[t][ch];
    op.qt[t][ch] = __float2half_rn(qh * a[t]);
    op.kw[t][ch] = __float2half_rn(kh * a[t]);
    op.kt[t][ch] = __float2half_rn(kh * b[t]);
  }
  op.gamma[ch] = a[kChunk - 1];
  float4* vt = reinterpret_cast<float4*>(&op.vt[ch][0]);
#pragma unroll
  for (int t = 0; t < kChunk; t += 4)
    vt[t / 4] = make_float4(bf16_f32(st.v[t][ch]), bf16_f32(st.v[t + 1][ch]),
                            bf16_f32(st.v[t + 2][ch]), bf16_f32(st.v[t + 3][ch]));
}

// Step 3, the tf32 half (prep threads 128..255, KDA only): the tf32 operands of the
// tensor-core intra terms, with f_t = exp(G_t - G_ref) as products of alphas from the
// reference token (forward: f_t = prod_{ref<u<=t} alpha_u <= 1; backward: f_t = 1 /
// prod_{t<u<=ref} alpha_u >= 1); returns whether both stay within [1e-30, 1e30] (then q f
// and k / f hold every pair's exp(G_i - G_j) in fp32 range; alpha_0 enters no pair).
__device__ __forceinline__ bool prep_channel_tf32(PrepScratch& ps, int ch) {
  constexpr int kRef = 7;
  float f[kChunk], inv[kChunk];
  float P = 1.f;
  f[kRef] = inv[kRef] = 1.f;
#pragma unroll
  for (int t = kRef - 1; t >= 0; --t) P *= ps.al[t + 1][ch], inv[t] = P, f[t] = __fdividef(1.f, P);
  const float p0 = P;
  float F = 1.f;
#pragma unroll
  for (int t = kRef + 1; t < kChunk; ++t) F *= ps.al[t][ch], f[t] = F, inv[t] = __fdividef(1.f, F);
  const bool safe = p0 >= 1e-30f && F >= 1e-30f;
#pragma unroll
  for (int t = 0; t < kChunk; ++t) {
    const float qh = ps.qh[t][ch], kh = ps.kh[t][ch];
    ps.qf[t][ch] = tf32_rna(qh * f[t]);
    ps.kf[t][ch] = tf32_rna(kh * f[t]);
    ps.ki[t][ch] = tf32_rna(kh * inv[t]);
  }
  return safe;
}

// Step 4, KDA when every channel is in range: Aqk = (q f)(k / f)^T (warps 0, 1) and Akk =
// beta (k f)(k / f)^T (warps 2, 3), 16 x 16 x 128 on tensor cores (tf32, fp32 sums); warp w
// takes the 8 columns 8 (w % 2) .. + 7 (16 mma in two chains).
__device__ __forceinline__ void prep_intra_tf32(PrepScratch& ps, Operands& op, int warp, int lane) {
  if (warp > 3) return;
  const bool qk = warp < 2;
  const int n = warp & 1;
  const float (*A)[kRowF] = qk ? ps.qf : ps.kf;
  const int g = lane >> 2, q = lane & 3;
  float acc[2][4] = {};  // two chains (even / odd k steps) of 8 mma each
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 8; ++ks) {
    const int c = 8 * ks + q;
    ptx::mma_m16n8k8_tf32(acc[ks & 1], __float_as_uint(A[g][c]), __float_as_uint(A[g + 8][c]),
                          __float_as_uint(A[g][c + 4]), __float_as_uint(A[g + 8][c + 4]),
                          __float_as_uint(ps.ki[8 * n + g][c]), __float_as_uint(ps.ki[8 * n + g][c + 4]));
  }
  {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = g + 8 * (e >> 1), j = 8 * n + 2 * q + (e & 1);
      const float v = acc[0][e] + acc[1][e];
      if (qk) {
        op.aqk[i][j] = __float2half_rn(i >= j ? v : 0.f);
      } else {
        ps.akk[i][j] = i > j ? v * ps.beta[i] : 0.f;
      }
    }
  }
}

// One step of the reduce-scatter below: values x[0 .. 2S) -> x[0 .. S).
template <int S>
__device__ __forceinline__ void scatter_step(float (&x)[2 * kChunk], int lane) {
  const bool up = (lane & S) != 0;
#pragma unroll
  for (int i = 0; i < S; ++i) {
    const float send = up ? x[i] : x[i + S];
    const float keep = up ? x[i + S] : x[i];
    x[i] = keep + __shfl_xor_sync(0xffffffffu, send, S);
  }
}

// Step 4: the pairs of column j; lane l holds channels 4l..4l+3. Lane l < 16 ends with
// Aqk[l][j], lane l >= 16 with Akk[l - 16][j] (before beta).
__device__ __forceinline__ void prep_column(const PrepScratch& ps, int j, int lane, float& out) {
  float x[2 * kChunk];
#pragma unroll
  for (int i = 0; i < 2 * kChunk; ++i) x[i] = 0.f;
  const int c = 4 * lane;
  float4 z = *reinterpret_cast<const float4*>(&ps.kh[j][c]);
  {
    const float4 qv = *reinterpret_cast<const float4*>(&ps.qh[j][c]);
    float s = qv.x * z.x;
    s = fmaf(qv.y, z.y, s), s = fmaf(qv.z, z.z, s), s = fmaf(qv.w, z.w, s);
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      if (i == j) x[i] = s;
  }
#pragma unroll
  for (int i = 1; i < kChunk; ++i) {
    if (i > j) {
      const float4 al = *reinterpret_cast<const float4*>(&ps.al[i][c]);
      const float4 qv = *reinterpret_cast<const float4*>(&ps.qh[i][c]);
      const float4 kv = *reinterpret_cast<const float4*>(&ps.kh[i][c]);
      z.x *= al.x, z.y *= al.y, z.z *= al.z, z.w *= al.w;
      float sq = qv.x * z.x, sk = kv.x * z.x;
      sq = fmaf(qv.y, z.y, sq), sq = fmaf(qv.z, z.z, sq), sq = fmaf(qv.w, z.w, sq);
      sk = fmaf(kv.y, z.y, sk), sk = fmaf(kv.z, z.z, sk), sk = fmaf(kv.w, z.w, sk);
      x[i] = sq, x[kChunk + i] = sk;
    }
  }
  // Reduce-scatter over the warp: after the step of width s a lane keeps the half of its
  // values whose index bit s equals its lane bit s, plus its partner's copy of that half.
  scatter_step<16>(x, lane);
  scatter_step<8>(x, lane);
  scatter_step<4>(x, lane);
  scatter_step<2>(x, lane);
  scatter_step<1>(x, lane);
  out = x[0];
}

// Step 4 for GDN (one decay per head): the Gram matrices of the raw bf16 q, k on tensor cores
// (exact products, fp32 sums; warp 0: q k^T, warp 1: k k^T), then per element the l2norm
// factors, beta and E[i][j] = prod_{t=j+1..i} alpha_t in fp32. Warps 0, 1: q k^T, warps 2, 3:
// k k^T; warp w the 8 columns 8 (w % 2) .. + 7.
__device__ __forceinline__ void prep_gram(const RawStage& st, PrepScratch& ps, Operands& op,
                                          int warp, int lane) {
  if (warp > 3) return;
  const bool qk = warp < 2;
  const int nn = warp & 1;
  const uint16_t* a_tile = qk ? &st.q[0][0] : &st.k[0][0];
  float acc[4] = {};
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    uint32_t a[4], b[4];
    const int r = (lane & 7) + ((lane >> 4) << 3), c = 16 * ks + (((lane >> 3) & 1) << 3);
    ptx::ldmatrix_x4(a[0], a[1], a[2], a[3], ptx::smem_u32(a_tile + r * kRowH + c));
    ptx::ldmatrix_x4(b[0], b[1], b[2], b[3], ptx::smem_u32(&st.k[0][0] + r * kRowH + c));
    // A fragment (lo,lo) (hi,lo) (lo,hi) (hi,hi): ldmatrix registers 0, 2, 1, 3.
    ptx::mma_m16n8k16_bf16(acc, a[0], a[2], a[1], a[3], nn ? b[2] : b[0], nn ? b[3] : b[1]);
  }
  const int g = lane >> 2, q = lane & 3;
  {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = g + 8 * (e >> 1), j = 8 * nn + 2 * q + (e & 1);
      float E = 1.f;
      for (int t = j + 1; t <= i; ++t) E *= ps.al[t][0];
      const float base = acc[e] * ps.rk[j] * E;
      if (qk) {
        op.aqk[i][j] = __float2half_rn(i >= j ? base * ps.rq[i] : 0.f);
      } else {
        ps.akk[i][j] = i > j ? base * ps.rk[i] * ps.beta[i] : 0.f;
      }
    }
  }
}

// Step 5: column j = lane (< 16) of (I + Akk)^-1 by forward substitution, times beta_j.
__device__ __forceinline__ void prep_solve(const PrepScratch& ps, Operands& op, int lane) {
  if (lane >= kChunk) return;
  const int j = lane;
  float x[kChunk];
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    float s = 0.f;
#pragma unroll
    for (int m = 0; m < i; ++m) s = fmaf(ps.akk[i][m], x[m], s);
    x[i] = i < j ? 0.f : (i == j ? 1.f : -s);
  }
  const float bj = ps.beta[j];
#pragma unroll
  for (int i = 0; i < kChunk; ++i) op.tmb[i][j] = __float2half_rn(x[i] * bj);
}

}  // namespace kernrt::kda
