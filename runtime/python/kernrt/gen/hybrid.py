"""Hybrid serving manifest: a Kimi-Linear-like stack of KDA and full-attention layers, one
complete kern schema-v4 manifest with `prefill`, `decode`, `verify` and `commit` programs.

Owns: the description (`Desc`: layer kinds, hidden size, KDA heads, attention profile, vocab,
max sequences / tokens / context, page size, verify steps) and its refusals, the buffer
names, and `manifest(desc)`, which composes the ops of the families' generators (gemm
built-ins, kernrt.gen.conv, kernrt.gen.kda_ops, kernrt.gen.kv_append, kernrt.gen.attention)
and kernels/serve/serve_io.cu (embedding rows in, greedy argmax out) into one manifest.
Per step:  hidden = embed[token];  per KDA layer l:
    proj = hidden . in_projᵀ  [rows, q 2048 | k 2048 | v 2048 | g 2048 | beta 16]  (gemm)
    qkv  = silu(causal_conv1d_W4(proj[:, :6144]))  one depthwise conv over q|k|v    (conv)
    o    = kda(qkv, g = proj[:, 6144:8192], beta = proj[:, 8192:], A_log, dt_bias)   (kda: gate,
           l2norm and beta sigmoid in the kernel; state pool `kda`)
    hidden += o . out_projᵀ                                                          (gemm acc)
per attention layer: q/k/v = hidden . W{q,k,v}ᵀ; kv_append(k, v) at `slot`; attention over
the paged `kv` state (decode kernel for decode, prefill kernel for prefill and verify);
hidden += o . o_projᵀ. Then logits = hidden . lm_headᵀ (f32) and the argmax: each
sequence's last row (prefill), every row (decode, verify).
States: `kv` (paged, 4096 B per token per attention layer), `conv` (per sequence: one
[6144, W-1] bf16 line per KDA layer), `kda` (per sequence: fp32 [HV, V, K] state + verify
record per KDA layer). Line tables: conv_lines / kda_lines [1, seqs], conv_steps
[steps, seqs] (the conv verify's per-token lines: rollback = the caller's line swap);
`commit` (no batch) replays `accepted` verify tokens into the KDA states.
Serving-protocol fills: token, slot, seq_len, cu_seqlens in; tokens out (next_token,
verify_tokens). Weights: the names `weight_shapes(desc)` lists (hybrid_weights writes them).
Does not check: kernel behaviour, the manifest rules (kernrt-verify does). Python 3 stdlib.
"""
import os
import sys

from . import attention as ao
from . import files as _files
from . import conv as gconv
from . import conv_params as cvp
from . import kda_ops
from . import kv_append as gkv
from .attention_params import GenError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
SERVE_MODULE = {"source": "serve_io.sm90a.cubin", "sha256": "@SHA256:serve_io.sm90a@"}


class Desc:
    """One model and capacity. The attention profile (Q24/KV4/D256, page 64) and the KDA
    head dims (K = V = 128) are those the kernels are built for; others are refused."""

    def __init__(self, layers=("kda", "kda", "kda", "attn"), hidden=2048, kda_heads=16,
                 head_k=128, head_v=128, conv_width=4, heads_q=24, heads_kv=4, head_dim=256,
                 page=64, vocab=4096, max_seqs=32, max_tokens=1024, max_context=4096, steps=8):
        self.layers = tuple(layers)
        if not self.layers or any(k not in ("kda", "attn") for k in self.layers):
            raise GenError(f"layers {list(self.layers)}: each must be `kda` or `attn`")
        if "attn" not in self.layers:
            raise GenError("the stack needs an attention layer: its KV append carries the "
                           "`slot` fill")
        if (heads_q, heads_kv, head_dim, page) != (ao.HEADS_Q, ao.HEADS_KV, ao.HEAD_DIM, ao.PAGE):
            raise GenError(f"attention Q{heads_q}/KV{heads_kv}/D{head_dim} page {page}: the "
                           f"kernels serve Q{ao.HEADS_Q}/KV{ao.HEADS_KV}/D{ao.HEAD_DIM} page {ao.PAGE}")
        if head_k != kda_ops.K or head_v not in (128, 256):
            raise GenError(f"KDA K{head_k} V{head_v}: the kernels serve K {kda_ops.K}, V 128 or 256")
        for name, v in (("hidden", hidden), ("vocab", vocab), ("max_seqs", max_seqs),
                        ("max_tokens", max_tokens), ("max_context", max_context),
                        ("kda_heads", kda_heads)):
            if not isinstance(v, int) or v < 1:
                raise GenError(f"`{name}` must be a positive integer, got {v!r}")
        if hidden % 8 or vocab % 8:
            raise GenError(f"hidden {hidden} and vocab {vocab} must be multiples of 8 (16-byte rows)")
        if not isinstance(steps, int) or not 2 <= steps <= kda_ops.MAX_STEPS:
            raise GenError(f"verify steps {steps}: expected 2..{kda_ops.MAX_STEPS}")
        if max_seqs * steps > max_tokens:
            raise GenError(f"a verify of {max_seqs} x {steps} rows exceeds max_tokens {max_tokens}")
        self.hidden, self.kda_heads, self.head_v, self.width = hidden, kda_heads, head_v, conv_width
        self.vocab, self.max_seqs, self.max_tokens = vocab, max_seqs, max_tokens
        self.max_context, self.steps = max_context, steps
        self.kda = Kda(self)
        self.conv = gconv.Profile(self.kda.qkv, width=conv_width, x_row=self.kda.proj,
                                  y_row=self.kda.qkv)
        self.cap = ao.Capacity(max_tokens, max_seqs, max_context, self.n_attn,
                               ao.default_splits("h200"))

    @property
    def n_kda(self):
        return sum(k == "kda" for k in self.layers)

    @property
    def n_attn(self):
        return sum(k == "attn" for k in self.layers)

    def index(self, layer):
        """The layer's index among the layers of its kind (its region in the states)."""
        return sum(k == self.layers[layer] for k in self.layers[:layer])

    @property
    def conv_slot(self):
        return self.n_kda * self.conv.line_bytes

    @property
    def kda_region(self):
        return self.kda.p.region_bytes(verify=True)

    @property
    def kda_slot(self):
        return self.n_kda * self.kda_region


class Kda:
    """The KDA layer's profile and its fused projection row [q | k | v | g | beta]."""

    def __init__(self, d):
        self.p = kda_ops.Profile("kda", heads=d.kda_heads, dim_v=d.head_v, g="bf16", beta="bf16",
                                 gate="softplus", beta_sigmoid=True, l2norm=True)
        self.dqk = d.kda_heads * kda_ops.K
        self.dv = d.kda_heads * d.head_v
        self.qkv = 2 * self.dqk + self.dv  # the conv's channels and the qkv row
        self.g_at = 2 * self.dqk + self.dv
        self.beta_at = self.g_at + self.dqk
        self.proj = -(-(self.beta_at + d.kda_heads) // 8) * 8  # rows stay 16-byte aligned


def weight_shapes(d):
    """name -> (dtype, shape) of every weight buffer (what the safetensors file holds)."""
    w = {"embed": ("bf16", [d.vocab, d.hidden]), "lm_head": ("bf16", [d.vocab, d.hidden])}
    for i, kind in enumerate(d.layers):
        if kind == "kda":
            w[f"l{i}_in_proj"] = ("bf16", [d.kda.proj, d.hidden])
            w[f"l{i}_conv"] = ("f32", [d.conv.dim, d.width])
            w[f"l{i}_A_log"] = ("f32", [d.kda_heads])
            w[f"l{i}_dt_bias"] = ("f32", [d.kda_heads * kda_ops.K])
            w[f"l{i}_out_proj"] = ("bf16", [d.hidden, d.kda.dv])
        else:
            hq, hkv = ao.HEADS_Q * ao.HEAD_DIM, ao.HEADS_KV * ao.HEAD_DIM
            w[f"l{i}_q_proj"] = ("bf16", [hq, d.hidden])
            w[f"l{i}_k_proj"] = ("bf16", [hkv, d.hidden])
            w[f"l{i}_v_proj"] = ("bf16", [hkv, d.hidden])
            w[f"l{i}_o_proj"] = ("bf16", [d.hidden, hq])
    return w


# ---- ops -------------------------------------------------------------------------------------


def gemm_op(kind, n, k):
    """C[m, n] (=|+=) A[m, k] . W[n, k]ᵀ, m = the call's i32; n and k literals."""
    entry, c = {"bf16": ("extern:cublaslt_bf16_tn", "out buffer<bf16>"),
                "acc": ("extern:cublaslt_bf16_tn_acc", "inout buffer<bf16>"),
                "f32": ("extern:cublas_bf16_tn_f32", "out buffer<f32>")}[kind]
    iface = ["in buffer<bf16>", "in buffer<bf16>", c, "i32"]
    return {"params": iface, "impl": {"launches": [{
        "entry": entry, "params": iface + ["i32", "i32"],
        "args": [{"param": i} for i in range(4)] + [{"i32": n}, {"i32": k}]}]}}


def serve_ops(d):
    embed = {"params": ["in buffer<i32>", "in buffer<bf16>", "out buffer<bf16>"],
             "impl": {"launches": [{
                 "module": "serve_io", "entry": "serve_embed_sm90a_bf16",
                 "params": ["in buffer<i32>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32"],
                 "block": [256, 1, 1], "grid": ["tokens", 1, 1],
                 "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"i32": d.hidden // 8},
                          {"i32": d.vocab}]}]}}
    rows = {"params": ["in buffer<f32>", "out buffer<i32>"],
            "impl": {"launches": [{
                "module": "serve_io", "entry": "serve_argmax_rows_sm90a_f32",
                "params": ["in buffer<f32>", "out buffer<i32>", "i32"],
                "block": [256, 1, 1], "grid": ["tokens", 1, 1],
                "args": [{"param": 0}, {"param": 1}, {"i32": d.vocab}]}]}}
    last = {"params": ["in buffer<f32>", "in buffer<i32>", "out buffer<i32>"],
            "impl": {"launches": [{
                "module": "serve_io", "entry": "serve_argmax_last_sm90a_f32",
                "params": ["in buffer<f32>", "in buffer<i32>", "out buffer<i32>", "i32"],
                "block": [256, 1, 1], "grid": ["seqs", 1, 1],
                "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"i32": d.vocab}]}]}}
    return {"embed": embed, "argmax_rows": rows, "argmax_last": last}


def _set_fields(op, values):
    """Replaces the literal of the pack field at each byte offset in `values` (every launch)."""
    for ln in op["impl"]["launches"]:
        for f in ln["args"][0]["pack"]["fields"]:
            if f["at"] in values:
                (kind,) = [k for k in f if k != "at" and k != "width"]
                if kind not in ("i32", "i64"):
                    raise GenError(f"pack field at {f['at']} is a {kind}, not a literal")
                f[kind] = values[f["at"]]
    return op


def conv_ops(d):
    """The fused q|k|v conv over proj rows (x_row = proj, y = qkv rows), its lines one slot
    of the `conv` pool apart (every KDA layer's line sits in one slot)."""
    p, slot, U, F = d.conv, d.conv_slot, cvp.UPDATE, cvp.FWD
    pre = _set_fields(gconv.prefill_op(p), {F["final_stride"]: slot})
    dec = _set_fields(gconv.update_op(p), {U["state_stride"]: slot})
    ver = _set_fields(gconv.update_op(p, steps=d.steps, step_lines=True, max_seqs=d.max_seqs),
                      {U["state_stride"]: slot})
    return {"conv_prefill": pre, "conv_decode": dec, "conv_verify": ver}


def kda_ops_of(d):
    """KDA prefill (fresh sequences), decode, verify and commit over the `kda` pool, reading
    q/k/v from the conv's qkv rows and g/beta from the projection rows."""
    p, k, slot = d.kda.p, d.kda, d.kda_slot
    qkv, pr, s = k.qkv, k.proj, d.steps

    def step(steps):
        return {88: steps * qkv, 96: qkv, 104: steps * qkv, 112: qkv,
                120: steps * pr, 128: pr, 136: steps * pr, 144: pr}
    # c16: the 64-token chunk kernels read contiguous q, k, v rows, these are the conv's qkv rows
    pre = _set_fields(kda_ops.prefill_op(p, "pool", init=False, slot_bytes=slot, chunk="c16"),
                      {112: 0, 120: qkv, 128: 0, 136: qkv, 144: 0, 152: pr, 160: 0, 168: pr})
    return {"kda_prefill": pre,
            "kda_decode": _set_fields(kda_ops.step_op(p, "decode", 1, slot), step(1)),
            "kda_verify": _set_fields(kda_ops.step_op(p, "verify", s, slot), step(s)),
            "kda_commit": kda_ops.commit_op(p, s, slot)}


def attn_ops(d):
    out = {}
    for kind in ("decode", "prefill"):
        name, launch, body = ao.op(kind, "h200", d.cap, ao.KV_STATE,
                                   None if kind == "decode" else ao.load_prefill_geometry())
        out[name] = (launch, body)
    return out


# ---- calls -----------------------------------------------------------------------------------


def _b(name, offset=0):
    return {"buf": name, "offset": offset} if offset else {"buf": name}


def _gemm(op, a, w, c, label, a_off=0, c_off=0):
    return {"label": label, "op": op, "args": [_b(a, a_off), _b(w), _b(c, c_off), {"var": "tokens"}]}


def kda_layer(d, i, mode):
    """Calls of KDA layer i in program `mode` (prefill | decode | verify)."""
    k, j = d.kda, d.index(i)
    pre = f"l{i}_"
    conv_pool = {"state": "conv", "offset": j * d.conv.line_bytes} if j else {"state": "conv"}
    kda_pool = {"state": "kda", "offset": j * d.kda_region} if j else {"state": "kda"}
    calls = [_gemm(f"gemm_{k.proj}x{d.hidden}", "hidden", pre + "in_proj", pre + "proj",
                   f"{pre}in_proj")]
    conv = [_b(pre + "proj"), _b(pre + "conv"), _b(pre + "qkv")]
    if mode == "prefill":
        conv += [_b("cu_seqlens"), conv_pool, _b("conv_lines")]
    else:
        conv += [conv_pool, _b("conv_lines")] + ([_b("conv_steps")] if mode == "verify" else [])
    calls.append({"label": f"{pre}conv", "op": f"conv_{mode}", "args": conv})
    heads = [_b(pre + "qkv"), _b(pre + "qkv", 2 * k.dqk), _b(pre + "qkv", 4 * k.dqk),
             _b(pre + "proj", 2 * k.g_at), _b(pre + "proj", 2 * k.beta_at),
             _b(pre + "A_log"), _b(pre + "dt_bias"), _b(pre + "o")]
    tail = ([_b("cu_seqlens")] if mode == "prefill" else []) + [kda_pool, _b("kda_lines")]
    calls.append({"label": f"{pre}kda", "op": f"kda_{mode}", "args": heads + tail})
    calls.append(_gemm(f"gemm_acc_{d.hidden}x{k.dv}", pre + "o", pre + "out_proj", "hidden",
                       f"{pre}out_proj"))
    return calls


def attn_layer(d, i, mode):
    pre, j = f"l{i}_", d.index(i)
    hq, hkv = ao.HEADS_Q * ao.HEAD_DIM, ao.HEADS_KV * ao.HEAD_DIM
    calls = [_gemm(f"gemm_{hq}x{d.hidden}", "hidden", pre + "q_proj", pre + "q", f"{pre}q_proj"),
             _gemm(f"gemm_{hkv}x{d.hidden}", "hidden", pre + "k_proj", pre + "k", f"{pre}k_proj"),
             _gemm(f"gemm_{hkv}x{d.hidden}", "hidden", pre + "v_proj", pre + "v", f"{pre}v_proj"),
             {"label": f"{pre}kv_append", "op": "kv_append",
              "args": [_b(pre + "k"), _b(pre + "v"),
                       {"state": "kv", "offset": j * ao.LAYER_PAGE_BYTES} if j else {"state": "kv"},
                       _b("slot"), {"var": "tokens"}]}]
    names = {"out": pre + "o", "q": pre + "q", "kv": "kv", "table": "pages", "seq": "seq_len",
             "cuq": "cu_seqlens"}
    calls.append(ao.call("decode" if mode == "decode" else "prefill", f"{pre}attn", j, names))
    calls.append(_gemm(f"gemm_acc_{d.hidden}x{hq}", pre + "o", pre + "o_proj", "hidden",
                       f"{pre}o_proj"))
    return calls


def program(d, mode):
    calls = [{"label": "embed", "op": "embed", "args": [_b("token"), _b("embed"), _b("hidden")]}]
    for i, kind in enumerate(d.layers):
        calls += kda_layer(d, i, mode) if kind == "kda" else attn_layer(d, i, mode)
    calls.append(_gemm(f"gemm_f32_{d.vocab}x{d.hidden}", "hidden", "lm_head", "logits", "lm_head"))
    if mode == "prefill":
        calls.append({"label": "argmax", "op": "argmax_last",
                      "args": [_b("logits"), _b("cu_seqlens"), _b("next_token")]})
    else:
        calls.append({"label": "argmax", "op": "argmax_rows",
                      "args": [_b("logits"), _b("next_token" if mode == "decode" else "verify_tokens")]})
    batch = {"prefill": {"groups": 1, "rows": "tokens"},
             "decode": {"groups": d.max_seqs, "rows": 1},
             "verify": {"groups": d.max_seqs, "rows": d.steps}}[mode]
    return {"batch": batch, "calls": calls}


# ---- the manifest ----------------------------------------------------------------------------


def _buf(dtype, shape, kind, **kw):
    b = {"dtype": dtype, "shape": shape, "kind": kind}
    b.update(kw)
    return b


def buffers(d):
    T, S = "tokens", "seqs"
    b = {
        "token": _buf("i32", [T], "input", fill="token", domain={"min": 0, "max": d.vocab - 1}),
        "slot": _buf("i32", [T], "input", fill="slot", domain={"index_into": "kv"}),
        "seq_len": _buf("i32", [S], "input", fill="seq_len", domain={"min": 1, "max": d.max_context}),
        "cu_seqlens": _buf("i32", [d.max_seqs + 1], "input", fill="cu_seqlens",
                           domain={"min": 0, "max": T, "monotone": True}),
        "pages": _buf("i32", [S, d.cap.max_pages], "input",
                      domain={"index_into": "kv", "stride": ao.PAGE}),
        "conv_lines": _buf("i32", [1, S], "input", domain={"index_into": "conv", "stride": d.conv_slot}),
        "conv_steps": _buf("i32", [d.steps, S], "input",
                           domain={"index_into": "conv", "stride": d.conv_slot}),
        "kda_lines": _buf("i32", [1, S], "input", domain={"index_into": "kda", "stride": d.kda_slot}),
        "accepted": _buf("i32", [S], "input", domain={"min": 0, "max": d.steps}),
        "hidden": _buf("bf16", [T, d.hidden], "output"),
        "logits": _buf("f32", [T, d.vocab], "output"),
        "next_token": _buf("i32", [S], "output", fill="tokens"),
        "verify_tokens": _buf("i32", [S, d.steps], "output", fill="tokens"),
    }
    for name, (dtype, shape) in weight_shapes(d).items():
        b[name] = _buf(dtype, shape, "weight")
    for i, kind in enumerate(d.layers):
        pre = f"l{i}_"
        if kind == "kda":
            b[pre + "proj"] = _buf("bf16", [T, d.kda.proj], "carry")
            b[pre + "qkv"] = _buf("bf16", [T, d.conv.dim], "carry")
            b[pre + "o"] = _buf("bf16", [T, d.kda_heads, d.head_v], "carry")
        else:
            b[pre + "q"] = _buf("bf16", [T, ao.HEADS_Q, ao.HEAD_DIM], "carry")
            b[pre + "k"] = _buf("bf16", [T, ao.HEADS_KV, ao.HEAD_DIM], "carry")
            b[pre + "v"] = _buf("bf16", [T, ao.HEADS_KV, ao.HEAD_DIM], "carry")
            b[pre + "o"] = _buf("bf16", [T, ao.HEADS_Q, ao.HEAD_DIM], "carry")
    return b


def manifest(d, model="kernrt-hybrid", op_programs=()):
    """The complete manifest as a dict; local modules carry `@SHA256:<cubin>@` placeholders
    (kernrt.gen.pin replaces them). op_programs: modes whose every call also becomes a
    program `<mode>_c<i>` of its own (no batch), to time each op alone on the same memory
    (the per-layer intermediates are `carry` buffers, so a lone call reads what the last
    whole step left there)."""
    ops = dict(serve_ops(d))
    modules = {"serve_io": dict(SERVE_MODULE)}
    hq, hkv = ao.HEADS_Q * ao.HEAD_DIM, ao.HEADS_KV * ao.HEAD_DIM
    shapes = {("f32", d.vocab, d.hidden)}
    if d.n_kda:
        ops.update(conv_ops(d))
        kops = kda_ops_of(d)
        ops.update(kops)
        modules.update(gconv.MODULES)
        modules.update(kda_ops.modules_of(kops))
        shapes |= {("bf16", d.kda.proj, d.hidden), ("acc", d.hidden, d.kda.dv)}
    if d.n_attn:
        ops["kv_append"] = gkv.op(d.n_attn, "i32")
        modules[gkv.MODULE] = {"source": "kv_append.sm90a.cubin", "sha256": "@SHA256:kv_append.sm90a@"}
        for name, (launch, body) in attn_ops(d).items():
            ops[name] = body
            modules[launch.module] = {"source": launch.source, "sha256": launch.sha256}
        shapes |= {("bf16", hq, d.hidden), ("bf16", hkv, d.hidden), ("acc", d.hidden, hq)}
    for kind, n, k in sorted(shapes):
        ops[f"gemm_{'' if kind == 'bf16' else kind + '_'}{n}x{k}"] = gemm_op(kind, n, k)
    states = {}
    if d.n_attn:
        states["kv"] = {"bytes_per_token": d.n_attn * ao.SLOT_BYTES}
    if d.n_kda:
        states["conv"] = {"bytes_per_seq": d.conv_slot}
        states["kda"] = {"bytes_per_seq": d.kda_slot}
    programs = {mode: program(d, mode) for mode in ("prefill", "decode", "verify")}
    if d.n_kda:
        programs["commit"] = {"calls": [
            {"label": f"l{i}_commit", "op": "kda_commit",
             "args": [{"state": "kda", "offset": d.index(i) * d.kda_region} if d.index(i)
                      else {"state": "kda"}, _b("kda_lines"), _b("accepted")]}
            for i, kind in enumerate(d.layers) if kind == "kda"]}
    for mode in op_programs:
        for i, c in enumerate(programs[mode]["calls"]):
            programs[f"{mode}_c{i}"] = {"calls": [c]}
    bufs = buffers(d)
    if op_programs:  # a lone call may read the step's outputs too
        for n in ("hidden", "logits"):
            bufs[n]["kind"] = "carry"
    if not d.n_kda:
        for n in ("conv_lines", "conv_steps", "kda_lines", "accepted"):
            del bufs[n]
    return {"schema_version": 4, "model": model,
            "vars": {"tokens": {"max": d.max_tokens}, "seqs": {"max": d.max_seqs}},
            "states": states, "buffers": bufs, "modules": modules, "ops": ops,
            "programs": programs}


def desc_args(ap):
    """The description's command-line options."""
    ap.add_argument("--layers", default="kda,kda,kda,attn", help="layer kinds, comma-separated")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--kda-heads", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--max-seqs", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=1024, help="rows of a prefill call")
    ap.add_argument("--max-context", type=int, default=4096, help="tokens per sequence (x page)")
    ap.add_argument("--page", type=int, default=ao.PAGE)
    ap.add_argument("--steps", type=int, default=8, help="tokens of a verify round")


def desc_of(a):
    return Desc(layers=a.layers.split(","), hidden=a.hidden, kda_heads=a.kda_heads, vocab=a.vocab,
                max_seqs=a.max_seqs, max_tokens=a.max_tokens, max_context=a.max_context,
                page=a.page, steps=a.steps)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="Write the hybrid serving manifest (and, with "
                                             "--weights, its random safetensors weights).")
    desc_args(ap)
    ap.add_argument("--cubins", help="pin the local modules to the cubins in this directory")
    ap.add_argument("--weights", help="also write random weights to this safetensors file")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--output", "-o", help="write the manifest here instead of stdout")
    a = ap.parse_args(argv)
    try:
        d = desc_of(a)
        m = manifest(d)
        if a.cubins:
            from . import pin
            m = pin(m, a.cubins)
        if a.weights:
            from . import hybrid_weights
            hybrid_weights.write(d, a.weights, seed=a.seed)
    except Exception as e:  # GenError, PinError, OSError: a message for the user, exit 2
        print(f"hybrid_op.py: error: {e}", file=sys.stderr)
        return 2
    _files.emit(m, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
