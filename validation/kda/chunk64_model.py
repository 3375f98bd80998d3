"""A numpy model of a 64-token-chunk KDA / GDN forward for Hopper wgmma (a design study;
kernels/kda/chunk64.md is the plan, kda_chunk64_state.cu its state step), with its roundings.

Owns: the algorithm and where each rounding sits, per chunk of 64 tokens in 4 sub-blocks of 16:
- per key channel, products of alphas only (never exp of a cumulative sum): a_t = prod_{u<=t}
  alpha_u over the chunk, b_t = prod_{u>t} alpha_u, gamma = a_63; inside sub-block I,
  la_t = prod_{u=16I..t} alpha_u and lb_t = prod_{u=t+1..16I+15} alpha_u; dec_I = la of its
  last token. Every factor is <= 1, so no gate of any magnitude overflows (underflow to 0 only
  where the true term is below fp32's range);
- the diagonal 16 x 16 blocks of Aqk / Akk exactly as the shipped 16-token kernel
  (chunk_model.intra16: tf32 relative to token 7 when in range, else fp32 pairs; the "fp32"
  plan always takes the pairs; the tf32 operands round ties away, plan["diag"] "tf32", or to
  even, "tf32rn": PREP4, prep v4's plan);
- the off-diagonal blocks (I > J) through the boundary before sub-block I:
      exp(G_i - G_j) = la_i * (lb_j * prod_{M=J+1..I-1} dec_M)
  both factors <= 1: Aqk[I, J] = (q_I la_I)(k_J lb_J D_JI)^T, Akk likewise times beta_i, as
  GEMMs with operands rounded by plan["intra"] (GDN: the same with scalar decays, fp32);
- Tm = (I + Akk)^-1 by plan["solve"]: "fp32" forward substitution over 64 rows, or blocked
  (the 16 x 16 diagonal inverses in fp32, T_IJ = -T_II sum_M A_IM T_MJ with rounded operands);
- the state pass in the shipped kernel's residual form, one step per 64 tokens (X = S^T [V, K]):
      r^T = v^T - X (k a)^T,  vn^T = r^T (Tm Diag(beta))^T,  o^T = X (q a)^T + vn^T Aqk^T,
      X <- X Diag(gamma) + vn^T (k b)
  each product one GEMM with fp32 accumulation; operands rounded per plan: X, r, vn by
  plan["state"], plan["r"], plan["vn"] ("f16s" = f16 with a power-of-two scale per 16 value
  rows, one warp's rows of a wgmma m64 tile; "bf16", "tf32", "f16", "fp32"), k a, q a, k b by
  plan["qk"], Tm Diag(beta) by plan["tm"], Aqk by plan["aqk"].
prep64 forms one chunk's operands, step64 applies one state step; state_inputs lays out the
operands of the state-step entry (kernels/kda/chunk64_params.h) with the model's results for
them, for validation/kda/check_chunk64.py. tokens64 is prep v4's token code (the raw inputs to
q^, k^, alpha in fp32 as kda_chunk64_prep4.cu forms them: l2norm, scale, the softplus or the
bounded gate in log2 units, beta direct or from logits); its outputs go into state_inputs (alpha= given) in place of kda_ref.prepare's.
Does not model fp32 summation order, fast-math intrinsics or the gate's own rounding (the same
as chunk_model; those errors are far below the operand roundings). `python3 chunk64_model.py`
prints the precision table of kernels/kda/chunk64.md (a minute on 2 cores); test_chunk64_model.py is fast.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunk_model as cm  # noqa: E402

C = 64   # tokens per chunk
SUB = 16  # tokens per sub-block (the exact diagonal blocks)
ROUND = {"fp32": lambda x: np.asarray(x, np.float32), "tf32": cm.tf32, "tf32rn": cm.tf32_rn,
         "bf16": cm.bf16, "f16": cm.f16, "f16s": cm.f16_rows}

# operand plans; "f16" is the one kernels/kda/chunk64.md builds (every product f16 in, fp32
# accumulate, but the diagonal blocks' tf32 / fp32 pairs); the others change one operand class
F16 = dict(state="f16s", r="f16s", vn="f16s", qk="f16", tm="f16", aqk="f16", intra="f16",
           solve="f16")
PLANS = {
    "fp32": {key: "fp32" for key in F16},
    "f16": F16,
    "f16, tf32 intra + solve": dict(F16, intra="tf32", solve="tf32"),
    "f16, tf32 state": dict(F16, state="tf32"),
    "f16, bf16 k a / q a / k b": dict(F16, qk="bf16"),
    "f16, bf16 Tm Diag(beta)": dict(F16, tm="bf16"),
    "f16, bf16 state": dict(F16, state="bf16"),
    "bf16": {key: "bf16" for key in F16},
    "tf32": {key: "tf32" for key in F16},
}
# prep v4 (kda_chunk64_prep4.cu): the "f16" plan with the diagonal blocks' tf32 operands rounded
# to nearest even (cvt.rn.tf32.f32) where the others round ties away ("diag", default "tf32")
PREP4 = dict(F16, diag="tf32rn")
STATS = {"max_tm": 0.0}  # largest |Tm Diag(beta)| seen (f16 operands need it below 65504)


LOG2E = np.float32(1.4426950408889634)


def tokens64(q, k, g, beta, A_log, dt_bias, scale=None, lower_bound=None, beta_sigmoid=False):
    """prep v4's token code in fp32 (kernels/kda/kda_chunk64_prep4.cu), for q, k [B, T, H, K]
    and raw g [B, T, HV, K] (bf16 values), beta [B, T, HV] (effective, or logits with
    `beta_sigmoid`), A_log [HV], dt_bias [HV * K] or [HV, K]: (q^, k^, alpha [B, T, HV, K],
    beta [B, T, HV]) float32, value head hv reading q, k head hv // (HV / H).
    q^ = q (scale / sqrt(sum q^2 + 1e-6)) (the scale on the norm's factor first),
    k^ = k / sqrt(sum k^2 + 1e-6); with A = exp(A_log), dtl = dt_bias log2 e (the kernel's
    gate_alpha, in log2 units):
      softplus gate (lower_bound None): alpha = 2^(-A log2(1 + 2^z)), z = g log2 e + dtl:
        exp(-A softplus(g + dt_bias)) (2^z = inf gives alpha = 0);
      bounded gate: alpha = 2^(lower_bound log2 e / (1 + 2^z)), z = g (-A log2 e) + dtl (-A):
        exp(lower_bound sigmoid(A (g + dt_bias))) (2^z = inf gives alpha = 1);
    beta_sigmoid: beta = 1 / (1 + 2^(-beta log2 e)). Sums in fp32 in numpy's order (the
    kernel's are the tensor cores'), exp2 / log2 exact where the kernel's MUFU are approximate,
    and products and sums rounded apart where the kernel fuses them (FFMA)."""
    f = np.float32
    q, k, g = np.asarray(q, f), np.asarray(k, f), np.asarray(g, f)
    B, T, HV, K = g.shape
    rep = HV // q.shape[2]
    scale = f(K ** -0.5 if scale is None else scale)

    def rscale(x):
        return (f(1) / np.sqrt((x * x).sum(-1, dtype=f) + f(1e-6))).astype(f)

    qh = np.repeat(q * (rscale(q) * scale)[..., None], rep, 2)
    kh = np.repeat(k * rscale(k)[..., None], rep, 2)
    A = np.exp(np.asarray(A_log, f).astype(np.float64)).astype(f)[:, None]  # the kernel reads f32
    dtl = np.asarray(dt_bias, f).reshape(HV, K) * LOG2E
    with np.errstate(over="ignore"):
        if lower_bound is None:
            alpha = np.exp2(-A * np.log2(f(1) + np.exp2(g * LOG2E + dtl)))
        else:
            z = g * (-A * LOG2E) + dtl * (-A)
            alpha = np.exp2((f(lower_bound) * LOG2E) / (f(1) + np.exp2(z)))
        b = np.asarray(beta, f)
        if beta_sigmoid:
            b = f(1) / (f(1) + np.exp2(-b * LOG2E))
    return qh.astype(f), kh.astype(f), alpha.astype(f), b.astype(f)


def tokens_gdn(q, k, g, beta, A_log, dt_bias, scale=None, beta_sigmoid=False):
    """The GDN prep's token code in fp32 (kernels/kda/kda_chunk64_prep_gdn.cu): q^, k^ as
    tokens64 (value head hv reading head hv // (HV / H)), and per (token, value head) the log2
    decay lg = max(-A log2(1 + 2^z), -64), z = g log2 e + dt_bias log2 e (A = exp(A_log): fla's
    GDN gate -exp(A_log) softplus(g + dt_bias) in log2 units, a decay below 2^-64 taken as 2^-64:
    the kernel's clamp keeps its prefix finite where 2^z = inf), for raw g [B, T, HV],
    A_log, dt_bias [HV]; beta as tokens64. Returns (q^, k^ [B, T, HV, K], lg [B, T, HV], beta)."""
    f = np.float32
    HV = np.shape(g)[2]
    K = np.shape(q)[3]
    zeros = np.zeros(np.shape(g) + (K,), f)  # tokens64 with a KDA gate of the right shape
    qh, kh, _, b = tokens64(q, k, zeros, beta, np.zeros(HV), np.zeros((HV, K)), scale,
                            beta_sigmoid=beta_sigmoid)
    A = np.exp(np.asarray(A_log, f).astype(np.float64)).astype(f)
    dtl = np.asarray(dt_bias, f).reshape(HV) * LOG2E
    with np.errstate(over="ignore"):
        lg = np.maximum(-A * np.log2(f(1) + np.exp2(np.asarray(g, f) * LOG2E + dtl)), f(-64))
    return qh, kh, lg.astype(f), b


def prep64_gdn(qc, kc, vc, lgc, bc, plan=F16, split=False):
    """The GDN prep's operands of one chunk (kda_chunk64_prep_gdn.cu; prep64's dict): from the
    chunk's log2 decays lgc [64] (0 on padded tokens) the inclusive prefix G (fp32), and every
    decay factor one exp2 of a difference that is <= 0 where it is used:
      Aqk = lower((q^ k^T) o E), Akk = Diag(beta) strict_lower((k^ k^T) o E),
      E_ij = 2^(G_i - G_j) (i >= j); the Gram products unrounded in fp32 (the kernel: bf16 raw
      rows on mma, exact products, fp32 sums, times the fp32 l2 scales), Aqk rounded by
      plan["aqk"], Akk's off-diagonal blocks by plan["solve"] inside solve64 (the kernel's f16
      akh), its diagonal blocks fp32;
      k a = k^ 2^G_t, q a = q^ 2^G_t, k b = k^ 2^(G_63 - G_t) rounded by plan["qk"],
      gamma = 2^G_63 on every key channel, Tm Diag(beta) by plan["solve"] then plan["tm"].
    split (the shipped prep since 362fa29, for the state step's kScalarDecay): kw = k^, qt = q^
    rounded by plan["qk"] without the decay, and a_t, b_t (fp32 [64]) for step64 to apply; no
    kt.
    Not modelled: the kernel's prefix is a warp scan (fp32, another summation order), its exp2
    and log2 are MUFU approximations, and it scales the Gram sums where this scales the rows
    (fp32 roundings, ~1e-7 relative, far below the f16 operands)."""
    f = np.float32
    Rqk, Rtm, Ra = ROUND[plan["qk"]], ROUND[plan["tm"]], ROUND[plan["aqk"]]
    G = np.cumsum(np.asarray(lgc, f), dtype=f)
    d = G[:, None] - G[None, :]
    low = np.tri(C, dtype=bool)
    E = np.where(low, np.exp2(np.minimum(d, f(0))), f(0)).astype(f)
    Aqk = (cm.mm(qc, kc.T) * E).astype(f)
    Akk = (bc[:, None] * np.tril(cm.mm(kc, kc.T) * E, -1)).astype(f)
    Tmb = (solve64(Akk, plan["solve"]) * bc[None, :]).astype(f)
    STATS["max_tm"] = max(STATS["max_tm"], float(np.max(np.abs(Tmb))))
    a = np.exp2(G).astype(f)[:, None]
    b = np.exp2(G[-1] - G).astype(f)[:, None]
    gamma = np.full(kc.shape[1], np.exp2(G[-1]), f)
    if split:
        return dict(kw=Rqk(kc), qt=Rqk(qc), a=a[:, 0], b=b[:, 0], tmb=Rtm(Tmb), aqk=Ra(Aqk),
                    gamma=gamma, v=vc)
    return dict(kw=Rqk(kc * a), qt=Rqk(qc * a), kt=Rqk(kc * b), tmb=Rtm(Tmb), aqk=Ra(Aqk),
                gamma=gamma, v=vc)


def sub_products(ac):
    """la (inclusive prefix) and lb (exclusive suffix) products of alphas inside each sub-block."""
    la = np.empty_like(ac)
    lb = np.empty_like(ac)
    for s0 in range(0, C, SUB):
        la[s0:s0 + SUB] = np.cumprod(ac[s0:s0 + SUB], 0, dtype=np.float32)
        lb[s0 + SUB - 1] = 1
        for t in range(s0 + SUB - 2, s0 - 1, -1):
            lb[t] = lb[t + 1] * ac[t + 1]
    return la, lb


def intra64(qc, kc, ac, bc, kda, plan):
    """Aqk (lower incl. diagonal) and Akk (beta_i-scaled, strictly lower) of one 64-token chunk."""
    R = ROUND[plan["intra"] if kda else "fp32"]
    la, lb = sub_products(ac)
    Aqk = np.zeros((C, C), np.float32)
    Akk = np.zeros((C, C), np.float32)
    for I in range(C // SUB):
        sI = slice(I * SUB, I * SUB + SUB)
        Aqk[sI, sI], Akk[sI, sI] = cm.intra16(qc[sI], kc[sI], ac[sI], bc[sI], kda,
                                                 tf32_ok=plan["intra"] != "fp32",
                                                 rnd=ROUND[plan.get("diag", "tf32")])
        lq, lk = R(qc[sI] * la[sI]), R(kc[sI] * la[sI])
        D = np.ones(kc.shape[1], np.float32)
        for J in range(I - 1, -1, -1):
            sJ = slice(J * SUB, J * SUB + SUB)
            right = R(kc[sJ] * lb[sJ] * D)
            Aqk[sI, sJ] = cm.mm(lq, right.T)
            Akk[sI, sJ] = bc[sI, None] * cm.mm(lk, right.T)
            D = D * la[J * SUB + SUB - 1]
    return Aqk, Akk


def forward_subst(A):
    """(I + A)^-1 for strictly lower A, fp32."""
    n = A.shape[0]
    T = np.eye(n, dtype=np.float32)
    for i in range(1, n):
        T[i, :i] = -(A[i, :i] @ T[:i, :i]).astype(np.float32)
    return T


def solve64(Akk, how):
    """Tm = (I + Akk)^-1: fp32 forward substitution, or blocked with `how`-rounded products."""
    if how == "fp32":
        return forward_subst(Akk)
    R = ROUND[how]
    n = C // SUB
    blk = lambda M, I, J: M[I * SUB:I * SUB + SUB, J * SUB:J * SUB + SUB]
    T = np.zeros((C, C), np.float32)
    for I in range(n):
        blk(T, I, I)[:] = forward_subst(blk(Akk, I, I))
    for J in range(n):
        for I in range(J + 1, n):
            acc = np.zeros((SUB, SUB), np.float32)
            for M in range(J, I):
                acc += cm.mm(R(blk(Akk, I, M)), R(blk(T, M, J)))
            blk(T, I, J)[:] = -cm.mm(R(blk(T, I, I)), R(acc))
    return T


def prep64(qc, kc, vc, ac, bc, kda, plan):
    """One chunk's state-step operands (padded to 64 tokens), rounded as `plan` says:
    dict kw = k a, qt = q a, kt = k b ([64, K]), tmb = Tm Diag(beta), aqk ([64, 64]),
    gamma [K] (fp32), v [64, V] (the bf16 values, fp32)."""
    Rqk, Rtm, Ra = ROUND[plan["qk"]], ROUND[plan["tm"]], ROUND[plan["aqk"]]
    a = np.cumprod(ac, 0, dtype=np.float32)
    b = np.ones_like(ac)
    for t in range(C - 2, -1, -1):
        b[t] = b[t + 1] * ac[t + 1]
    Aqk, Akk = intra64(qc, kc, ac, bc, kda, plan)
    Tmb = (solve64(Akk, plan["solve"]) * bc[None, :]).astype(np.float32)
    STATS["max_tm"] = max(STATS["max_tm"], float(np.max(np.abs(Tmb))))
    return dict(kw=Rqk(kc * a), qt=Rqk(qc * a), kt=Rqk(kc * b), tmb=Rtm(Tmb), aqk=Ra(Aqk),
                gamma=a[C - 1].copy(), v=vc)


def step64(X, op, plan):
    """The state step of one chunk: (o [64, V] fp32, X' [V, K]). With a_t, b_t in `op`
    (prep64_gdn's split, chunk64_state_step.cuh kScalarDecay) the decays are applied in fp32 on
    the products' token columns and to vn before its rounding, k^ serving as k b's rows."""
    Rx, Rr, Rv = ROUND[plan["state"]], ROUND[plan["r"]], ROUND[plan["vn"]]
    Xh = Rx(X)
    if "a" in op:
        a, b = op["a"][None, :], op["b"][None, :]
        rT = op["v"].T - cm.mm(Xh, op["kw"].T) * a
        vn = cm.mm(Rr(rT), op["tmb"].T)
        oT = cm.mm(Xh, op["qt"].T) * a + cm.mm(Rv(vn), op["aqk"].T)
        # vn Diag(b) rounded with vn's own scale, as the state step packs it
        vb = cm.f16_rows(vn * b, like=vn) if plan["vn"] == "f16s" else Rv(vn * b)
        return oT.T, X * op["gamma"][None, :] + cm.mm(vb, op["kw"])
    rT = op["v"].T - cm.mm(Xh, op["kw"].T)
    vnh = Rv(cm.mm(Rr(rT), op["tmb"].T))
    oT = cm.mm(Xh, op["qt"].T) + cm.mm(vnh, op["aqk"].T)
    return oT.T, X * op["gamma"][None, :] + cm.mm(vnh, op["kt"])


def chunks64(q, k, v, alpha, beta):
    """The 64-token chunks of one sequence and head, padded (chunk_model.chunks)."""
    return cm.chunks(q, k, v, alpha, beta, C)


def chunk64_head(q, k, v, alpha, beta, X0, kda=True, plan=PLANS["f16"], ops=None):
    """chunk_model.chunk_head's contract with 64-token chunks under an operand plan; `ops`, a
    list, receives every chunk's prep64 operands."""
    X = X0.astype(np.float32).copy()
    o = np.zeros((k.shape[0], v.shape[1]), np.float32)
    for c0, n, qc, kc, vc, ac, bc in chunks64(q, k, v, alpha, beta):
        op = prep64(qc, kc, vc, ac, bc, kda, plan)
        if ops is not None:
            ops.append(op)
        oc, X = step64(X, op, plan)
        o[c0:c0 + n] = oc[:n]
    return o, X


def forward(xp_inputs, init=None, cu=None, plan=PLANS["f16"], head=None):
    """chunk_model.forward with the 64-token model (or `head`, e.g. chunk_model.chunk_head)."""
    return cm.forward(xp_inputs, init, cu,
                      head=head or (lambda *args, kda: chunk64_head(*args, kda=kda, plan=plan)))


def state_inputs(xp_inputs, init, plan=PLANS["f16"], alpha=None, lg=None, split=False):
    """Dense kda_ref.prepare outputs ([B, T, ..]; with `alpha` [B, T, HV, K] given, gl is not
    read: tokens64's outputs; with `lg` [B, T, HV] given, GDN's log2 decays (tokens_gdn), each
    chunk's operands are prep64_gdn's) -> the operands of the state-step entry
    kda_chunk64_state (kernels/kda/chunk64_params.h layouts; float32 arrays holding f16 / bf16
    values exactly: the caller casts kq, kbt, tmb, aqk to f16 and v to bf16), with what the
    model's state steps give for them: o [B, HV, NC, 64, V] fp32 and the final X [B, HV, V, K].
    split: prep64_gdn's split operands (kq k^, q^; kbt zeros), as the shipped GDN path."""
    _, q, k, v, gl, beta = xp_inputs
    B, T, HV, K = k.shape
    V, NC = v.shape[3], -(-T // C)
    kda = lg is None and (alpha is not None or gl.shape[-1] != 1)
    out = {"kq": np.zeros((B, HV, NC, 2 * C, K), np.float32),
           "kbt": np.zeros((B, HV, NC, K, C), np.float32),
           "tmb": np.zeros((B, HV, NC, C, C), np.float32),
           "aqk": np.zeros((B, HV, NC, C, C), np.float32),
           "gamma": np.zeros((B, HV, NC, K), np.float32),
           "v": np.zeros((B, HV, NC, C, V), np.float32),
           "x0": np.asarray(init, np.float32).copy(),
           "o": np.zeros((B, HV, NC, C, V), np.float32),
           "xt": np.zeros((B, HV, V, K), np.float32)}
    if lg is not None:  # chunks64's alphas unused: prep64_gdn takes the log2 decays, 0 past T
        alpha = np.ones((B, T, HV, 1), np.float32)
    alpha = np.exp(gl).astype(np.float32) if alpha is None else np.asarray(alpha, np.float32)
    for b in range(B):
        for h in range(HV):
            X = out["x0"][b, h].copy()
            for c, (c0, n, qc, kc, vc, ac, bc) in enumerate(chunks64(
                    q[b, :, h].astype(np.float32), k[b, :, h].astype(np.float32),
                    v[b, :, h].astype(np.float32), alpha[b, :, h],
                    beta[b, :, h].astype(np.float32))):
                if lg is None:
                    op = prep64(qc, kc, vc, ac, bc, kda, plan)
                else:
                    lgc = np.zeros(C, np.float32)
                    lgc[:n] = lg[b, c0:c0 + n, h]
                    op = prep64_gdn(qc, kc, vc, lgc, bc, plan, split)
                out["kq"][b, h, c] = np.concatenate([op["kw"], op["qt"]])
                if "kt" in op:
                    out["kbt"][b, h, c] = op["kt"].T
                for name in ("tmb", "aqk", "gamma", "v"):
                    out[name][b, h, c] = op[name]
                out["o"][b, h, c], X = step64(X, op, plan)
            out["xt"][b, h] = X
    return out


def gdn_case(gates, V=128, B=2, T=200, H=1, HV=2, seed=0, plan=F16, beta_sigmoid=False, g_shift=0.0,
             split=False):
    """A GDN case for the GDN prep (kda_chunk64_prep_gdn.cu): test_chunk_model.inputs' draw per
    sequence (fla-init or harsh gates per value head; `g_shift` added to raw g: a saturating
    gate), beta logits drawn after the rest with `beta_sigmoid`. Returns (raw inputs: q, k
    [B, T, H, K], g, beta [B, T, HV], a_log, dt_bias [HV] float32; state_inputs' dict on
    tokens_gdn's tokens under `plan` (split: prep64_gdn's split form); h0; the float64 loop's
    o and final state)."""
    import kda_ref as ref
    from test_chunk_model import inputs
    rng = np.random.default_rng(seed)
    parts = [inputs(rng, T, H, HV, V, gates, kda=False) for _ in range(B)]
    q, k, v, g, beta = (np.concatenate([p[i] for p in parts]) for i in range(5))
    g = (g + np.float32(g_shift)).astype(np.float32)
    if beta_sigmoid:
        beta = cm.bf16(2 * rng.standard_normal(beta.shape)).astype(np.float32)
    A_log, dt = parts[0][5], parts[0][6]
    h0 = np.concatenate([p[7] for p in parts])
    opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt, beta_sigmoid=beta_sigmoid)
    o, ht = ref.recurrent(q, k, v, g, beta, initial_state=h0, **opts)
    xp = ref.prepare(q, k, v, g, beta, None, **opts)
    qh, kh, lg, bt = tokens_gdn(q, k, g, beta, A_log, dt, beta_sigmoid=beta_sigmoid)
    s = state_inputs((xp[0], qh, kh, xp[3], None, bt), h0, plan=plan, lg=lg, split=split)
    raw = {"q": q, "k": k, "g": g, "beta": np.asarray(beta, np.float32),
           "a_log": np.asarray(A_log, np.float32), "dt_bias": np.asarray(dt, np.float32)}
    return raw, s, h0, o, ht


def tokens_of(o, T):
    """state_inputs' o [B, HV, NC, 64, V] as [B, T, HV, V]."""
    B, HV, NC, _, V = o.shape
    return o.transpose(0, 2, 3, 1, 4).reshape(B, NC * C, HV, V)[:, :T]


def errors(gates, T, HV, lb=None, plans=PLANS, seed=0, kda=True):
    """{name: (o error, state error)} for every plan and the shipped 16-token model ("chunk16")."""
    import kda_ref as ref
    from test_chunk_model import inputs
    rng = np.random.default_rng(seed)
    q, k, v, g, beta, A_log, dt, h0 = inputs(rng, T, HV, HV, 128, gates, kda)
    opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt, lower_bound=lb)
    o, ht = ref.recurrent(q, k, v, g, beta, initial_state=h0, **opts)
    xp = ref.prepare(q, k, v, g, beta, None, **opts)
    ob = cm.bf16(o.astype(np.float32))
    runs = {name: forward(xp, init=h0, plan=p) for name, p in plans.items()}
    runs["chunk16"] = forward(xp, init=h0, head=cm.chunk_head)
    return {name: (ref.rel_rms(cm.bf16(om), ob), ref.rel_rms(hm, ht)) for name, (om, hm) in runs.items()}


if __name__ == "__main__":
    T = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    cases = [("init", None), ("harsh", None), ("init", -5.0)]
    res = {c: errors(c[0], T, 4, c[1]) for c in cases}
    print(f"T {T}, HV 4, V 128, K 128; o / final state rel rms (gate 2e-3); max |Tm Diag(beta)| "
          f"{STATS['max_tm']:.3g}")
    print("| plan | " + " | ".join(f"{g}{'' if lb is None else f' lb {lb:g}'}" for g, lb in cases) + " |")
    for name in list(PLANS) + ["chunk16"]:
        print(f"| {name} | " + " | ".join("%.2e / %.2e" % res[c][name] for c in cases) + " |")
