"""Float64 reference of KDA and GDN (kernels/kda/README.md), independent of any kernel.

Owns the math: the per-token gated delta rule with one decay per key channel (KDA, g [..,HV,K])
or one per head (GDN, g [..,HV]); the in-kernel options (gate -exp(A_log)*softplus(g+dt_bias)
or lower_bound*sigmoid(exp(A_log)*(g+dt_bias)); beta sigmoid, x2 with allow_neg_eigval; q/k
l2norm with eps 1e-6 inside the sqrt; scale); GVA (value head hv reads q/k head
hv // (HV/H)); dense or varlen (B = 1 + cu_seqlens) batches; initial/final states in the
kernels' layout [N, HV, V, K] ("vk", FlashKDA's and vLLM's) or fla's [N, HV, K, V] ("kv").
Works on numpy arrays (CPU) and torch tensors (any device) alike, always in float64.

Per sequence and value head, with S a K x V matrix (row c = key channel c):
    S <- Diag(exp(g_t)) S;  r = v_t - S^T k_t;  S <- S + beta_t k_t r^T;  o_t = S^T (scale q_t)
Does not model the kernels' rounding (bf16 outputs, fp32 state): callers compare with a
relative rms (`rel_rms`).
"""
import math


class _Xp:
    """The few array operations the reference needs, for numpy or torch."""

    def __init__(self, like):
        self.torch = type(like).__module__.split(".")[0] == "torch"
        if self.torch:
            import torch
            self.m, self.dev = torch, like.device
        else:
            import numpy
            self.m, self.dev = numpy, None

    def f64(self, x):
        if x is None:
            return None
        if self.torch:
            return self.m.as_tensor(x, device=self.dev).to(self.m.float64)
        return self.m.asarray(x, dtype=self.m.float64)

    def zeros(self, shape):
        if self.torch:
            return self.m.zeros(shape, dtype=self.m.float64, device=self.dev)
        return self.m.zeros(shape, dtype=self.m.float64)

    def ints(self, x):
        if self.torch and hasattr(x, "tolist"):
            return [int(v) for v in x.tolist()]
        return [int(v) for v in x]

    def exp(self, x):
        return self.m.exp(x)

    def sqrt(self, x):
        return self.m.sqrt(x)

    def sigmoid(self, x):
        return 1.0 / (1.0 + self.m.exp(-x))

    def softplus(self, x):
        # log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)
        return self.m.maximum(x, x * 0) + self.m.log1p(self.m.exp(-abs(x)))

    def repeat_heads(self, x, rep, axis):
        if rep == 1:
            return x
        if self.torch:
            return self.m.repeat_interleave(x, rep, dim=axis)
        return self.m.repeat(x, rep, axis=axis)

    def einsum(self, spec, *a):
        return self.m.einsum(spec, *a)

    def sumsq(self, x):
        return (x * x).sum(-1, keepdim=True) if self.torch else (x * x).sum(-1, keepdims=True)

    def where(self, c, a, b):
        return self.m.where(c, a, b)

    def swap_last(self, x):
        return x.transpose(-1, -2) if self.torch else self.m.swapaxes(x, -1, -2)

    def index(self, rows):
        if self.torch:
            return self.m.tensor(rows, dtype=self.m.int64, device=self.dev)
        return self.m.array(rows, dtype=self.m.int64)

    def mask(self, lens, t):
        vals = [t < n for n in lens]
        if self.torch:
            return self.m.tensor(vals, device=self.dev)
        return self.m.array(vals)


def gate(xp, g, A_log=None, dt_bias=None, lower_bound=None):
    """Raw gate input g [.., HV, K] (KDA) or [.., HV] (GDN) -> log decay (float64, <= 0).
    dt_bias is [HV*K] (KDA, viewed [HV, K]) or [HV] (GDN); A_log is [HV]."""
    g = xp.f64(g)
    kda = g.ndim == 4
    hv = g.shape[2]
    x = g
    if dt_bias is not None:
        x = x + xp.f64(dt_bias).reshape((hv, -1) if kda else (hv,))
    a = xp.exp(xp.f64(A_log))
    a = a.reshape((hv, 1)) if kda else a
    if lower_bound is not None:
        return lower_bound * xp.sigmoid(a * x)
    return -a * xp.softplus(x)


def beta_eff(xp, beta, beta_sigmoid=False, allow_neg_eigval=False):
    b = xp.f64(beta)
    if beta_sigmoid:
        b = xp.sigmoid(b) * (2.0 if allow_neg_eigval else 1.0)
    return b


def l2norm(xp, x, eps=1e-6):
    x = xp.f64(x)
    return x / xp.sqrt(xp.sumsq(x) + eps)


def prepare(q, k, v, g, beta, scale=None, l2norm_qk=False, gate_in_kernel=False, A_log=None,
            dt_bias=None, lower_bound=None, beta_sigmoid=False, allow_neg_eigval=False):
    """Inputs as the kernels see them, float64, q/k expanded to the HV value heads:
    (xp, q*scale [B,T,HV,K], k [B,T,HV,K], v [B,T,HV,V], log decay [B,T,HV,K|1], beta [B,T,HV])."""
    xp = _Xp(q)
    H, HV, K = q.shape[2], v.shape[2], q.shape[3]
    if HV % H:
        raise ValueError(f"HV = {HV} is not a multiple of H = {H}")
    scale = K ** -0.5 if scale is None else scale
    qf, kf = (l2norm(xp, q), l2norm(xp, k)) if l2norm_qk else (xp.f64(q), xp.f64(k))
    qf = xp.repeat_heads(qf, HV // H, 2) * scale
    kf = xp.repeat_heads(kf, HV // H, 2)
    gl = gate(xp, g, A_log, dt_bias, lower_bound) if gate_in_kernel else xp.f64(g)
    if gl.ndim == 3:
        gl = gl.reshape(gl.shape + (1,))
    return xp, qf, kf, xp.f64(v), gl, beta_eff(xp, beta, beta_sigmoid, allow_neg_eigval)


def _segments(xp, B, T, cu_seqlens):
    """[(batch row, start, end)] per sequence."""
    if cu_seqlens is None:
        return [(b, 0, T) for b in range(B)]
    if B != 1:
        raise ValueError(f"varlen input must have B = 1, got {B}")
    cu = xp.ints(cu_seqlens)
    return [(0, cu[n], cu[n + 1]) for n in range(len(cu) - 1)]


def recurrent(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None,
              state_layout="vk", **opts):
    """The token loop. q, k [B,T,H,K]; v [B,T,HV,V]; g [B,T,HV,K] or [B,T,HV]; beta [B,T,HV];
    initial_state [N,HV,V,K] ("vk") or [N,HV,K,V] ("kv") or None (zeros).
    opts: l2norm_qk, gate_in_kernel, A_log, dt_bias, lower_bound, beta_sigmoid, allow_neg_eigval.
    Returns (o float64 [B,T,HV,V], final state float64 [N,...] in state_layout)."""
    xp, qf, kf, vf, gl, bf = prepare(q, k, v, g, beta, scale, **opts)
    B, T, HV, K = kf.shape
    V = vf.shape[3]
    segs = _segments(xp, B, T, cu_seqlens)
    N = len(segs)
    S = xp.zeros((N, HV, K, V))
    if initial_state is not None:
        s0 = xp.f64(initial_state)
        S = S + (xp.swap_last(s0) if state_layout == "vk" else s0)
    lens = [e - s for _, s, e in segs]
    tmax = max(lens) if lens else 0
    # padded per-sequence views [N, tmax, ...]: finished sequences repeat their last token
    # (masked out below), empty ones read token 0 and never update
    ib = [[b] * tmax for b, _, _ in segs]
    it = [[s + min(t, max(e - s - 1, 0)) for t in range(tmax)] for _, s, e in segs]
    ib, it = xp.index(ib), xp.index(it)
    qp, kp, vp, ap, bp = qf[ib, it], kf[ib, it], vf[ib, it], xp.exp(gl[ib, it]), bf[ib, it]
    op = xp.zeros((N, tmax, HV, V))
    for t in range(tmax):
        Sd = S * ap[:, t, ..., None]
        r = vp[:, t] - xp.einsum("nhkv,nhk->nhv", Sd, kp[:, t])
        Sn = Sd + bp[:, t, :, None, None] * kp[:, t, ..., None] * r[..., None, :]
        op[:, t] = xp.einsum("nhkv,nhk->nhv", Sn, qp[:, t])
        S = xp.where(xp.mask(lens, t).reshape((N, 1, 1, 1)), Sn, S)
    o = xp.zeros((B, T, HV, V))
    for n, (b, s, e) in enumerate(segs):
        o[b, s:e] = op[n, :e - s]
    return o, (xp.swap_last(S) if state_layout == "vk" else S)


def rel_rms(got, ref):
    """rms(got - ref) / rms(ref) in float64 (fla's err_ratio without its +1e-8); NaN -> inf."""
    xp = _Xp(ref)
    d = xp.f64(got) - xp.f64(ref)
    num = float(((d * d).mean()) ** 0.5)
    den = float(((xp.f64(ref) ** 2).mean()) ** 0.5)
    err = num / max(den, 1e-300)
    return err if math.isfinite(err) else float("inf")
