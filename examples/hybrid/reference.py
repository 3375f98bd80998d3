"""PyTorch references of the hybrid stack (kernrt.gen.hybrid): the math the driver checks
every step against, and the peer stack it is timed against.

Owns:
- `load_weights`: the generator's safetensors file as torch tensors (no safetensors package).
- the op references in float32 / float64, each fed the very inputs kernrt's op read (the
  per-layer intermediates are `carry` buffers; the pre-step states are snapshots): GEMMs
  (float32 products of the bf16 operands, one rounding), the W-tap causal conv + silu
  (float32; its state = exact copies of the inputs), KDA (validation/kda/kda_ref.py's
  float64 token loop: gate -exp(A_log) softplus(g + dt_bias), q/k l2norm, beta sigmoid),
  causal GQA attention over the KV rows (float32), logits (float32).
- `PeerStack`: the same stack built from the peers for timing, a decode step at batch B over
  static state (fla 0.6.0 causal_conv1d_update and fused_recurrent_kda_fwd in place, torch
  SDPA over a dense per-sequence KV cache, torch GEMMs, argmax), capturable as one torch CUDA
  graph, and a varlen prefill (fla causal_conv1d and chunk_kda over cu_seqlens, SDPA per
  sequence). Falls back to nothing: a missing peer raises, the caller records why.
Does not check anything itself (the driver compares and gates).
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "validation", "kda"))
import kda_ref  # noqa: E402  (the float64 KDA token loop)

K = 128
HQ, HKV, HD = 24, 4, 256


def load_weights(path, device="cuda"):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        hdr = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, h in hdr.items():
        lo, hi = h["data_offsets"]
        raw = torch.frombuffer(data, dtype=torch.uint8, count=hi - lo, offset=lo)
        dt = torch.bfloat16 if h["dtype"] == "BF16" else torch.float32
        out[name] = raw.view(dt).view(h["shape"]).to(device)
    return out


# ---- op references (float32 / float64 on kernrt's own op inputs) ------------------------------


def gemm(a, w, c=None):
    """bf16(a . wᵀ [+ c]) with float32 products and sums (cuBLAS's contract)."""
    y = a.float() @ w.float().t()
    if c is not None:
        y = y + c.float()
    return y.bfloat16()


def conv(x, w, init):
    """x [T, C] bf16 (one sequence), w [C, W] f32, init [C, W-1] bf16 (zeros = fresh):
    (y [T, C] float32 before rounding, states [T, C, W-1]: the state after each token)."""
    W = w.shape[1]
    T = x.shape[0]
    xx = torch.cat([init.t(), x], 0)  # [W-1+T, C]
    xf = xx.float()
    z = sum(w[:, j].float() * xf[j:j + T] for j in range(W))
    y = z * torch.sigmoid(z)
    states = torch.stack([xx[t + 1:t + W].t() for t in range(T)], 0)
    return y, states


def kda(q, k, v, g, beta, A_log, dt_bias, h0):
    """One sequence: q/k [T, H, K], v [T, HV, V], g [T, HV, K], beta [T, HV] (bf16), h0
    [HV, V, K] f32 -> (o float64 [T, HV, V], states float64 [T, HV, V, K] after each token)."""
    states = []
    o_all = []
    S = h0.double()
    T = q.shape[0]
    # the loop of kda_ref one token at a time (each prefix's state is needed for rollback)
    for t in range(T):
        o, S = kda_ref.recurrent(q[None, t:t + 1], k[None, t:t + 1], v[None, t:t + 1],
                                 g[None, t:t + 1], beta[None, t:t + 1], scale=K ** -0.5,
                                 initial_state=S[None], l2norm_qk=True, gate_in_kernel=True,
                                 A_log=A_log, dt_bias=dt_bias, beta_sigmoid=True)
        S = S[0]
        o_all.append(o[0, 0])
        states.append(S)
    return torch.stack(o_all, 0), torch.stack(states, 0)


def kda_prefill(q, k, v, g, beta, A_log, dt_bias):
    """A fresh sequence's prefill: (o float64 [T, HV, V], final state float64 [HV, V, K])."""
    o, S = kda_ref.recurrent(q[None], k[None], v[None], g[None], beta[None], scale=K ** -0.5,
                             initial_state=None, l2norm_qk=True, gate_in_kernel=True,
                             A_log=A_log, dt_bias=dt_bias, beta_sigmoid=True)
    return o[0], S[0]


def attention(q, kc, vc):
    """q [r, HQ, HD] (the last r positions of the sequence), kc / vc [L, HKV, HD] -> float32
    [r, HQ, HD], causal."""
    r, L = q.shape[0], kc.shape[0]
    kk = kc.float().repeat_interleave(HQ // HKV, 1)  # [L, HQ, HD]
    vv = vc.float().repeat_interleave(HQ // HKV, 1)
    s = torch.einsum("rhd,lhd->hrl", q.float(), kk) / math.sqrt(HD)
    pos = torch.arange(L - r, L, device=q.device)[:, None]
    s = s.masked_fill(torch.arange(L, device=q.device)[None, :] > pos, float("-inf"))
    return torch.einsum("hrl,lhd->rhd", torch.softmax(s, -1), vv)


def rel_rms(got, ref):
    d = got.double() - ref.double()
    den = ref.double().pow(2).mean().sqrt().clamp_min(1e-300)
    e = (d.pow(2).mean().sqrt() / den).item()
    return e if math.isfinite(e) else float("inf")


# ---- the peer stack (timing) -----------------------------------------------------------------


class PeerStack:
    """The stack from the peers over static tensors, laid out as fla's KDA layer runs it
    (fla/layers/kda.py): separate q / k / v / g / beta projections (row blocks of the same
    fused weight, so no copy), one short convolution each for q, k and v, then the KDA
    kernel; attention projections, SDPA, and the output projections added to the residual.
    `decode()` is one step of B sequences at context L (graph-capturable), `prefill(tokens,
    cu, cu_cpu)` a varlen prefill (eager, no host sync)."""

    def __init__(self, d, w, B, L):
        from fla.modules.causal_conv1d import causal_conv1d, causal_conv1d_update
        from fla.ops.kda import chunk_kda
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd
        self.conv_fwd, self.conv_update = causal_conv1d, causal_conv1d_update
        self.chunk_kda, self.recurrent = chunk_kda, fused_recurrent_kda_fwd
        self.d, self.w, self.B, self.L = d, w, B, L
        dev = "cuda"
        kd = d.kda
        # row blocks of the fused weights: [q | k | v | g | beta]
        cuts = [("q", 0, kd.dqk), ("k", kd.dqk, 2 * kd.dqk), ("v", 2 * kd.dqk, kd.qkv),
                ("g", kd.g_at, kd.g_at + kd.dqk), ("beta", kd.beta_at, kd.beta_at + d.kda_heads)]
        self.proj = {i: {n: w[f"l{i}_in_proj"][a:b] for n, a, b in cuts}
                     for i, kind in enumerate(d.layers) if kind == "kda"}
        self.convw = {i: {n: w[f"l{i}_conv"][a:b] for n, a, b in cuts[:3]}
                      for i, kind in enumerate(d.layers) if kind == "kda"}
        self.tok = torch.randint(0, d.vocab, (B,), device=dev)
        self.cache = [{n: torch.randn(B, b - a, d.width, device=dev).bfloat16() for n, a, b in cuts[:3]}
                      for _ in range(d.n_kda)]
        self.kda_state = [torch.randn(B, d.kda_heads, d.head_v, K, device=dev) * 0.01
                          for _ in range(d.n_kda)]
        self.idx = torch.arange(B, device=dev, dtype=torch.int32)
        self.kc = [torch.randn(B, L + 1, HKV, HD, device=dev).bfloat16() for _ in range(d.n_attn)]
        self.vc = [torch.randn(B, L + 1, HKV, HD, device=dev).bfloat16() for _ in range(d.n_attn)]
        self.pos = torch.full((1,), L, device=dev, dtype=torch.long)

    def _kda_layer_decode(self, i, j, h):
        d, w, B, P, Wc = self.d, self.w, self.B, self.proj[i], self.convw[i]
        x = {n: F.linear(h, P[n]) for n in P}
        y = {n: self.conv_update(x[n], self.cache[j][n], weight=Wc[n], activation="silu")[0]
             for n in ("q", "k", "v")}
        H = d.kda_heads
        o, _ = self.recurrent(y["q"].view(B, 1, H, K), y["k"].view(B, 1, H, K),
                              y["v"].view(B, 1, H, d.head_v), x["g"].view(B, 1, H, K),
                              x["beta"].view(B, 1, H), A_log=w[f"l{i}_A_log"],
                              dt_bias=w[f"l{i}_dt_bias"], initial_state=self.kda_state[j],
                              scale=K ** -0.5, inplace_final_state=True, state_v_first=True,
                              ssm_state_indices=self.idx, use_qk_l2norm_in_kernel=True,
                              use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)
        return h + F.linear(o.view(B, -1), w[f"l{i}_out_proj"])

    def _attn_layer_decode(self, i, j, h):
        w, B = self.w, self.B
        q = F.linear(h, w[f"l{i}_q_proj"]).view(B, HQ, 1, HD)
        k = F.linear(h, w[f"l{i}_k_proj"]).view(B, 1, HKV, HD)
        v = F.linear(h, w[f"l{i}_v_proj"]).view(B, 1, HKV, HD)
        self.kc[j].index_copy_(1, self.pos, k)
        self.vc[j].index_copy_(1, self.pos, v)
        o = F.scaled_dot_product_attention(q, self.kc[j].transpose(1, 2), self.vc[j].transpose(1, 2),
                                           enable_gqa=True)
        return h + F.linear(o.reshape(B, HQ * HD), w[f"l{i}_o_proj"])

    def decode(self):
        d, w = self.d, self.w
        h = w["embed"][self.tok]
        for i, kind in enumerate(d.layers):
            j = d.index(i)
            h = self._kda_layer_decode(i, j, h) if kind == "kda" else self._attn_layer_decode(i, j, h)
        logits = F.linear(h, w["lm_head"]).float()
        self.next = logits.argmax(-1)
        return self.next

    def prefill(self, tokens, cu, cu_cpu, bounds):
        """tokens [T] (packed sequences), cu [N + 1] int64 on the device, its host copy, and
        the (start, end) row pairs as Python ints."""
        d, w = self.d, self.w
        T, H = tokens.shape[0], d.kda_heads
        h = w["embed"][tokens]
        for i, kind in enumerate(d.layers):
            if kind == "kda":
                P, Wc = self.proj[i], self.convw[i]
                x = {n: F.linear(h, P[n]) for n in P}
                y = {n: self.conv_fwd(x[n][None], Wc[n], activation="silu", cu_seqlens=cu,
                                      cu_seqlens_cpu=cu_cpu, output_final_state=True)[0]
                     for n in ("q", "k", "v")}
                o, _ = self.chunk_kda(y["q"].view(1, T, H, K), y["k"].view(1, T, H, K),
                                      y["v"].view(1, T, H, d.head_v), x["g"].view(1, T, H, K),
                                      x["beta"].view(1, T, H), scale=K ** -0.5, initial_state=None,
                                      output_final_state=True, use_qk_l2norm_in_kernel=True,
                                      use_gate_in_kernel=True, A_log=w[f"l{i}_A_log"],
                                      dt_bias=w[f"l{i}_dt_bias"], use_beta_sigmoid_in_kernel=True,
                                      cu_seqlens=cu, cu_seqlens_cpu=cu_cpu, state_v_first=True)
                h = h + F.linear(o.reshape(T, -1), w[f"l{i}_out_proj"])
            else:
                q = F.linear(h, w[f"l{i}_q_proj"]).view(T, HQ, HD)
                k = F.linear(h, w[f"l{i}_k_proj"]).view(T, HKV, HD)
                v = F.linear(h, w[f"l{i}_v_proj"]).view(T, HKV, HD)
                outs = [F.scaled_dot_product_attention(
                    q[s:e].transpose(0, 1)[None], k[s:e].transpose(0, 1)[None],
                    v[s:e].transpose(0, 1)[None], is_causal=True, enable_gqa=True)[0].transpose(0, 1)
                    for s, e in bounds]
                o = torch.cat(outs, 0)
                h = h + F.linear(o.reshape(T, HQ * HD), w[f"l{i}_o_proj"])
        logits = F.linear(h, w["lm_head"]).float()
        return logits[cu[1:] - 1].argmax(-1)
