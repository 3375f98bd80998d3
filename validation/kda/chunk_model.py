"""A numpy model of kernels/kda/kda_chunk.cu's algorithm, with the kernel's roundings.

Owns: the chunked forward exactly as the kernel orders it (kernels/kda/README.md "Chunked
forward"): chunks of 16 tokens; q/k l2norm and gate in fp32; per-channel decays as cumulative
products of alpha = exp(log decay) inside the chunk (never exp of a cumulative sum, so no
overflow under any gate); the intra-chunk matrices Aqk / Akk as tf32 products of q f and k / f
(f = exp(G - G_7)) when every channel's factors stay in [1e-30, 1e30], else pair by pair in
fp32 (KDA; GDN always pair by pair, see below); the unit
lower-triangular solve in fp32; the state pass in the residual form
    r = v - (k * a) X^T,  v_new = Tm Diag(beta) r,  o = (q * a) X^T + Aqk v_new,
    X <- X Diag(gamma) + v_new^T (k * b)
(r is the cancellation-prone difference; it is formed in fp32 before any rounding), with f16
tensor-core operands and fp32 accumulation; the three unbounded operands (the state X, r and
v_new) go through f16 with a power-of-two scale per 16 value rows (one warp's tile) that maps
the tile's largest magnitude near 2^14. Used by the CPU test to show the scheme meets the gate
against kda_ref (float64) under kernel-fun's harsh gates and fla's init gates before any device
run. GDN's kernel forms the same intra-chunk terms as bf16 Gram matrices on tensor cores
(exact products of the bf16 inputs, fp32 sums) times fp32 norms and decays: equal to this
model's fp32 pairs up to fp32 rounding. Does not model fp32 summation order or the fast-math
intrinsics (their errors are far below the f16 roundings modelled here).
"""
import numpy as np

C = 16  # tokens per chunk (kChunk)
PATHS = {"tf32": 0, "pairs": 0}  # chunks per intra-chunk path, for the tests


def bf16(x):
    """Round to bf16 (nearest even), returned as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return r.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def f16(x):
    """Round to f16 (nearest even, subnormals kept), returned as float32."""
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def scale_of(tile):
    """The kernel's power-of-two scale for one warp tile: max |x| lands in [2^14, 2^15)."""
    m = float(np.max(np.abs(tile))) if tile.size else 0.0
    if m == 0.0 or not np.isfinite(m):
        return 1.0
    return float(2.0 ** (14 - np.floor(np.log2(m))))


def f16_rows(x, rows=16, like=None):
    """f16 with a power-of-two scale per block of `rows` rows (scaled back, as float32); the
    scale of each block of `like` (same shape) instead of x's own when given."""
    out = np.empty_like(np.asarray(x, np.float32))
    src = x if like is None else like
    for r0 in range(0, x.shape[0], rows):
        s = scale_of(src[r0:r0 + rows])
        out[r0:r0 + rows] = f16(x[r0:r0 + rows] * s) / s
    return out


def tf32(x):
    """Round to tf32 (10-bit mantissa, nearest, ties away: cvt.rna), returned as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32).reshape(np.shape(x))


def tf32_rn(x):
    """Round to tf32, nearest, ties to even (cvt.rn.tf32.f32: prep v4's diagonal operands),
    returned as float32; differs from tf32 only at exact ties (low 13 bits 0x1000)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    odd = (u >> np.uint64(13)) & np.uint64(1)
    return ((u + np.uint64(0xFFF) + odd) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32).reshape(np.shape(x))


def mm(a, b):
    """f16-rounded operands (already rounded by the caller) -> fp32 accumulate."""
    return (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)


def intra16(qc, kc, ac, bc, kda=True, tf32_ok=True, rnd=tf32):
    """The intra-chunk matrices of one 16-token block (prepared fp32 q, k [16, K], alphas [16, K],
    betas [16]): Aqk (lower incl. the diagonal) and Akk (beta_i-scaled, strictly lower), on tensor
    cores (tf32) relative to token 7 when every channel's factors stay within [1e-30, 1e30], else
    pair by pair in fp32 (the kernel's choice; GDN always pair by pair; tf32_ok=False: always
    pairs, for chunk64_model's unrounded plan; rnd: the tf32 operands' rounding, tf32 or
    tf32_rn). Counts the path in PATHS."""
    C, K = kc.shape
    ref_t = 7
    f = np.ones_like(ac)
    inv = np.ones_like(ac)
    P = np.ones(K, np.float32)
    F = np.ones(K, np.float32)
    with np.errstate(over="ignore", divide="ignore"):  # unused when out of range
        for t in range(ref_t - 1, -1, -1):
            P = P * ac[t + 1]
            inv[t], f[t] = P, np.float32(1) / P
        for t in range(ref_t + 1, C):
            F = F * ac[t]
            f[t], inv[t] = F, np.float32(1) / F
    if kda and tf32_ok and np.all(P >= 1e-30) and np.all(F >= 1e-30):
        PATHS["tf32"] += 1
        ki = rnd(kc * inv)
        with np.errstate(over="ignore"):  # f_i / f_j above the diagonal may overflow: masked
            Aqk = np.tril(mm(rnd(qc * f), ki.T))
            Akk = (bc[:, None] * np.tril(mm(rnd(kc * f), ki.T), -1)).astype(np.float32)
    else:
        PATHS["pairs"] += 1
        Aqk = np.zeros((C, C), np.float32)
        Akk = np.zeros((C, C), np.float32)
        for j in range(C):
            z = kc[j].copy()
            Aqk[j, j] = np.dot(qc[j], z)
            for i in range(j + 1, C):
                z = z * ac[i]
                Aqk[i, j] = np.dot(qc[i], z)
                Akk[i, j] = bc[i] * np.dot(kc[i], z)
    return Aqk, Akk


def chunks(q, k, v, alpha, beta, size):
    """The `size`-token chunks of one sequence and head, padded (alpha 1, beta 0, q k v 0):
    (first token, real tokens, q, k, v, alpha [size, K], beta) per chunk."""
    T, K = k.shape
    for c0 in range(0, T, size):
        n = min(size, T - c0)
        qc = np.zeros((size, K), np.float32)
        kc = np.zeros((size, K), np.float32)
        vc = np.zeros((size, v.shape[1]), np.float32)
        ac = np.ones((size, K), np.float32)
        bc = np.zeros(size, np.float32)
        qc[:n], kc[:n], vc[:n] = q[c0:c0 + n], k[c0:c0 + n], v[c0:c0 + n]
        ac[:n] = np.broadcast_to(alpha[c0:c0 + n], (n, K))
        bc[:n] = beta[c0:c0 + n]
        yield c0, n, qc, kc, vc, ac, bc


def chunk_head(q, k, v, alpha, beta, X0, kda=True):
    """One sequence, one value head, prepared fp32 inputs: q (scaled, normalized) [T, K],
    k [T, K], v [T, V] (bf16 values), alpha [T, K] or [T, 1], beta [T]; X0 the state [V, K]
    fp32. Returns (o [T, V] fp32 before the output rounding, X [V, K])."""
    T, K = k.shape
    X = X0.astype(np.float32).copy()
    o = np.zeros((T, v.shape[1]), np.float32)
    for c0, n, qc, kc, vc, ac, bc in chunks(q, k, v, alpha, beta, C):
        # cumulative products: a_t = prod_{u<=t} alpha_u, b_t = prod_{u>t} alpha_u
        a = np.cumprod(ac, 0, dtype=np.float32)
        b = np.ones_like(ac)
        for t in range(C - 2, -1, -1):
            b[t] = b[t + 1] * ac[t + 1]
        gamma = a[C - 1]
        Aqk, Akk = intra16(qc, kc, ac, bc, kda)
        # Tm = (I + Akk)^-1 by forward substitution (fp32), then Tm * Diag(beta)
        Tm = np.eye(C, dtype=np.float32)
        for i in range(1, C):
            Tm[i, :i] = -(Akk[i, :i] @ Tm[:i, :i]).astype(np.float32)
        Tmb = f16(Tm * bc[None, :])          # Tm Diag(beta)
        kw = f16(kc * a)                     # k * a  (k * exp(G))
        qt = f16(qc * a)
        kt = f16(kc * b)
        Aqk = f16(Aqk)
        # state pass (transposed: X is [V, K])
        Xh = f16_rows(X)
        rT = vc.T - mm(Xh, kw.T)             # r^T = v^T - X (k * a)^T, fp32
        vnT = mm(f16_rows(rT), Tmb.T)        # v_new^T = r^T (Tm Diag(beta))^T
        vnh = f16_rows(vnT)
        oT = mm(Xh, qt.T) + mm(vnh, Aqk.T)
        X = X * gamma[None, :] + mm(vnh, kt)
        o[c0:c0 + n] = oT.T[:n]
    return o, X


def forward(xp_inputs, init=None, cu=None, head=None):
    """kda_ref.prepare(...) outputs (float64) -> model (o [B,T,HV,V] fp32, finals [N,HV,V,K])
    with the kernel's input roundings (q, k normalized in fp32 from bf16 inputs). `head`: the
    model of one sequence and value head, chunk_head's contract (default chunk_head)."""
    head = head or chunk_head
    _, q, k, v, gl, beta = xp_inputs
    B, T, HV, K = k.shape
    segs = [(b, 0, T) for b in range(B)] if cu is None else [(0, cu[n], cu[n + 1]) for n in range(len(cu) - 1)]
    o = np.zeros(v.shape, np.float32)
    finals = np.zeros((len(segs), HV, v.shape[3], K), np.float32)
    alpha = np.exp(gl).astype(np.float32)
    for n, (b, s, e) in enumerate(segs):
        for h in range(HV):
            X0 = np.zeros((v.shape[3], K), np.float32) if init is None else init[n, h]
            o[b, s:e, h], finals[n, h] = head(
                q[b, s:e, h].astype(np.float32), k[b, s:e, h].astype(np.float32),
                v[b, s:e, h].astype(np.float32), alpha[b, s:e, h], beta[b, s:e, h].astype(np.float32), X0,
                kda=gl.shape[-1] != 1)
    return o, finals
