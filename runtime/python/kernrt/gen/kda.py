#!/usr/bin/env python3
"""KDA / GDN op generator: one profile -> kern schema-v4 ops over the kernels/kda cubins.

Owns: the kda ops (interface, launch geometry, the KdaStepParams / KdaChunkParams packs of
kernels/kda/params.h) for one profile (KDA or GDN, heads H and value heads HV, V, the dtypes
of g and beta, the in-kernel options), the per-sequence state layout they share (one region
per layer: the fp32 state [HV, V, K], then the verify record), complete serving manifests
(prefill -> decode -> verify -> commit over one state pool) with `@SHA256:<cubin>@`
placeholders, the committed examples examples/kda/*.json.in, and `check`, which refuses kda
calls whose buffers or pool cannot be right.
Refuses at generation: K != 128, V not 128 or 256, HV not a multiple of H, unknown dtypes,
lower_bound without the in-kernel gate, allow_neg_eigval without beta sigmoid, steps
outside 1..8. The manifests add what the runtime checks before a launch: every line table
is a domain `index_into` the pool (a line out of range is refused), accepted counts are a
domain 0..steps.

Does not check: kernel behaviour, the manifest rules (kernrt-verify does), cu_seqlens
contents beyond their domain. Python 3 standard library only.
"""

import argparse
import json
import os
import sys

K = 128                   # kernels/kda/params.h kHeadDim
MAX_STEPS = 8             # kMaxSteps
STEP_ROWS = 32            # kStepRows: value rows per decode/verify/commit block
STEP_THREADS = 128
STEP_PACK = 224           # sizeof(KdaStepParams)
CHUNK = 16                # kChunk: tokens per chunk of the prefill
VTILE = 128               # kVTile: value rows per prefill block
CHUNK_THREADS = 384       # kChunkThreads
CHUNK_SMEM = 171600       # kChunkSmemBytes (chunk_smem.cuh)
CHUNK_PACK = 256          # sizeof(KdaChunkParams)
COMBINE_THREADS = 256
FLAG_NO_OUTPUT = 128
FLAG_GATE, FLAG_LOWER_BOUND, FLAG_BETA_SIGMOID, FLAG_NEG_EIGVAL = 1, 2, 4, 8
FLAG_L2NORM, FLAG_G_F32, FLAG_BETA_F32 = 16, 32, 64
ESIZE = {"bf16": 2, "f32": 4, "i32": 4}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


class GenError(Exception):
    """A profile or manifest the kda kernels cannot serve; the message says what and why."""


def _align16(b):
    return (b + 15) // 16 * 16


class Profile:
    """What one family of kda ops computes and how its inputs are typed."""

    def __init__(self, kind="kda", heads=16, value_heads=None, dim_k=K, dim_v=128, g="f32",
                 beta="f32", gate=None, lower_bound=None, beta_sigmoid=False,
                 neg_eigval=False, l2norm=True, scale=None):
        value_heads = heads if value_heads is None else value_heads
        if kind not in ("kda", "gdn"):
            raise GenError(f"kind `{kind}` is not supported: expected kda (a decay per key "
                           f"channel) or gdn (one decay per head)")
        if dim_k != K:
            raise GenError(f"K = {dim_k} is not supported: the kda kernels are built for K = {K}")
        if dim_v not in (128, 256):
            raise GenError(f"V = {dim_v} is not supported: expected 128 or 256")
        if not isinstance(heads, int) or heads <= 0 or not isinstance(value_heads, int) \
                or value_heads <= 0 or value_heads % heads:
            raise GenError(f"HV = {value_heads} is not a multiple of H = {heads} (GVA maps "
                           f"value head hv to q/k head hv // (HV / H))")
        for name, dt in (("g", g), ("beta", beta)):
            if dt not in ("bf16", "f32"):
                raise GenError(f"{name} dtype `{dt}` is not supported: expected bf16 or f32")
        if gate not in (None, "softplus", "lower_bound"):
            raise GenError(f"gate `{gate}` is not supported: expected softplus or lower_bound")
        if (gate == "lower_bound") != (lower_bound is not None):
            raise GenError("lower_bound needs gate = `lower_bound` (and the other way round)")
        if lower_bound is not None and not lower_bound < 0:
            raise GenError(f"lower_bound = {lower_bound} must be negative")
        if neg_eigval and not beta_sigmoid:
            raise GenError("allow_neg_eigval needs the in-kernel beta sigmoid")
        self.kind, self.heads, self.value_heads, self.dim_v = kind, heads, value_heads, dim_v
        self.g, self.beta, self.gate, self.lower_bound = g, beta, gate, lower_bound
        self.beta_sigmoid, self.neg_eigval, self.l2norm = beta_sigmoid, neg_eigval, l2norm
        self.scale = K ** -0.5 if scale is None else float(scale)

    @property
    def tag(self):
        return f"{self.kind}_h{self.heads}_hv{self.value_heads}_v{self.dim_v}"

    @property
    def flags(self):
        f = FLAG_GATE if self.gate else 0
        f |= FLAG_LOWER_BOUND if self.gate == "lower_bound" else 0
        f |= FLAG_BETA_SIGMOID if self.beta_sigmoid else 0
        f |= FLAG_NEG_EIGVAL if self.neg_eigval else 0
        f |= FLAG_L2NORM if self.l2norm else 0
        f |= FLAG_G_F32 if self.g == "f32" else 0
        f |= FLAG_BETA_F32 if self.beta == "f32" else 0
        return f

    @property
    def g_width(self):
        """Elements of g per token and value head."""
        return K if self.kind == "kda" else 1

    @property
    def state_bytes(self):
        """One sequence's fp32 state [HV, V, K]."""
        return self.value_heads * self.dim_v * K * 4

    def record(self):
        """Offsets of the verify record (params.h step_record): alpha, beta, v, bytes."""
        kh = _align16(MAX_STEPS * self.heads * K * 4)
        al = _align16(MAX_STEPS * self.value_heads * self.g_width * 4)
        be = _align16(MAX_STEPS * self.value_heads * 4)
        vv = _align16(MAX_STEPS * self.value_heads * self.dim_v * 2)
        return {"alpha": kh, "beta": kh + al, "v": kh + al + be, "bytes": kh + al + be + vv}

    def region_bytes(self, verify=True):
        """Bytes of one layer in a sequence's slot: the state, then the verify record."""
        return self.state_bytes + (self.record()["bytes"] if verify else 0)

    def entry(self, mode):
        return f"{self.kind}_{mode}_sm90a_bf16_k128"

    def head(self):
        """Interface params every token op starts with: q, k, v, g, beta, [A_log, dt_bias], o."""
        p = ["in buffer<bf16>"] * 3 + [f"in buffer<{self.g}>", f"in buffer<{self.beta}>"]
        if self.gate:
            p += ["in buffer<f32>", "in buffer<f32>"]
        return p + ["out buffer<bf16>"]

    def shapes(self, lead):
        """Buffer shapes of the head params for leading extents `lead` (e.g. ["seqs", 4])."""
        s = [lead + [self.heads, K], lead + [self.heads, K], lead + [self.value_heads, self.dim_v],
             lead + ([self.value_heads, K] if self.kind == "kda" else [self.value_heads]),
             lead + [self.value_heads]]
        if self.gate:
            s += [[self.value_heads], [self.value_heads * self.g_width]]
        return s + [lead + [self.value_heads, self.dim_v]]


def _launch(module, entry, size, fields, grid, threads):
    fields = sorted(fields, key=lambda f: f["at"])
    return {"module": module, "entry": entry, "params": [f"bytes<{size}>"],
            "block": [threads, 1, 1], "grid": grid, "pdl": True,
            "args": [{"pack": {"size": size, "fields": fields}}]}


def _step_fields(p, steps, state_stride, record_offset):
    """The KdaStepParams fields every step op shares (strides of contiguous [.., steps, heads,
    dim] buffers, geometry, flags, scale)."""
    hk, vv, gw = p.heads * K, p.value_heads * p.dim_v, p.value_heads * p.g_width
    f = [{"at": 88, "i64": steps * hk}, {"at": 96, "i64": hk},
         {"at": 104, "i64": steps * vv}, {"at": 112, "i64": vv},
         {"at": 120, "i64": steps * gw}, {"at": 128, "i64": gw},
         {"at": 136, "i64": steps * p.value_heads}, {"at": 144, "i64": p.value_heads},
         {"at": 152, "i64": steps * vv}, {"at": 160, "i64": vv},
         {"at": 168, "i64": state_stride}, {"at": 176, "i64": record_offset},
         {"at": 184, "i32": p.heads}, {"at": 188, "i32": p.value_heads},
         {"at": 192, "i32": p.dim_v}, {"at": 196, "var": "seqs"}, {"at": 200, "i32": steps},
         {"at": 204, "i32": p.flags}, {"at": 208, "f32": p.scale}]
    if p.lower_bound is not None:
        f.append({"at": 212, "f32": float(p.lower_bound)})
    return f


def _head_fields(p):
    """Pointer fields of q, k, v, g, beta, [A_log, dt_bias], o (params 0..)."""
    at = [0, 8, 16, 24, 32] + ([40, 48] if p.gate else []) + [56]
    return [{"at": a, "param": i} for i, a in enumerate(at)]


def step_op(p, mode, steps=1, slot_bytes=None, dense=False):
    """decode (steps 1) or verify (steps 1..8) over the pool (`inout state` + lines), or a
    dense decode (dense=True: `in buffer<f32>` h0 [seqs, HV, V, K] and `out buffer<f32>` ht).
    slot_bytes: the pool's bytes_per_seq (the line stride)."""
    if mode not in ("decode", "verify"):
        raise GenError(f"step mode `{mode}` is not supported: expected decode or verify")
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS or (mode == "decode" and steps != 1):
        raise GenError(f"steps = {steps} is not supported: decode takes 1, verify 1..{MAX_STEPS}")
    n = len(p.head())
    fields = _head_fields(p)
    if dense:
        if mode != "decode":
            raise GenError("a dense state serves decode only (verify records live in the pool)")
        params = p.head() + ["in buffer<f32>", "out buffer<f32>"]
        fields += [{"at": 64, "param": n}, {"at": 216, "param": n + 1}]
        fields += _step_fields(p, steps, p.state_bytes, 0)
    else:
        params = p.head() + ["inout state", "in buffer<i32>"]
        fields += [{"at": 64, "param": n}, {"at": 72, "param": n + 1}]
        fields += _step_fields(p, steps, slot_bytes, p.state_bytes)
    grid = [p.dim_v // STEP_ROWS, p.value_heads, "seqs"]
    return {"params": params, "impl": {"launches": [
        _launch("kda_step", p.entry(mode), STEP_PACK, fields, grid, STEP_THREADS)]}}


def commit_op(p, steps, slot_bytes):
    """Replays the first accepted[i] (0..steps) tokens of the last verify into the pool line."""
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise GenError(f"steps = {steps} is not supported: expected 1..{MAX_STEPS}")
    params = ["inout state", "in buffer<i32>", "in buffer<i32>"]  # pool, lines, accepted
    fields = [{"at": 64, "param": 0}, {"at": 72, "param": 1}, {"at": 80, "param": 2}]
    fields += _step_fields(p, steps, slot_bytes, p.state_bytes)
    grid = [p.dim_v // STEP_ROWS, p.value_heads, "seqs"]
    return {"params": params, "impl": {"launches": [
        _launch("kda_step", p.entry("commit"), STEP_PACK, fields, grid, STEP_THREADS)]}}


def prefill_op(p, state="pool", init=False, final=True, varlen=True, max_tokens=None,
               slot_bytes=None, cp_segs=0, seg_chunks=0):
    """The chunked forward as one op.
    state="pool": `inout state` + lines [1, seqs] (slot_bytes: the pool's bytes_per_seq);
    init reads each sequence's line first (a continued prefill), else sequences start from
    zero; the final state replaces the line. state="dense": `in buffer<f32>` h0 (init) and
    `out buffer<f32>` ht (final), [seqs, HV, V, K].
    varlen: q.. are [tokens, heads, dim] with cu_seqlens [seqs + 1] i32 (param after o); else
    dense [seqs, max_tokens, heads, dim] with T = the `tokens` var.
    cp_segs >= 2: context parallel, each sequence cut into cp_segs segments of seg_chunks
    chunks (three launches: transitions, combine, outputs; scratch `cp`)."""
    if state not in ("pool", "dense"):
        raise GenError(f"state `{state}` is not supported: expected pool or dense")
    if not varlen and not max_tokens:
        raise GenError("a dense prefill needs max_tokens (the row stride of its buffers)")
    if state == "pool" and not slot_bytes:
        raise GenError("a pool prefill needs slot_bytes (the pool's bytes_per_seq)")
    if cp_segs and (cp_segs < 2 or seg_chunks < 1):
        raise GenError(f"context parallel needs >= 2 segments of >= 1 chunk, got {cp_segs} x {seg_chunks}")
    params = list(p.head())
    fields = _head_fields(p)
    n = len(params)
    if varlen:
        params.append("in buffer<i32>")
        fields.append({"at": 96, "param": n})
        n += 1
    if state == "pool":
        params += ["inout state", "in buffer<i32>"]
        if init:
            fields += [{"at": 64, "param": n}, {"at": 80, "param": n + 1}]
        if final:
            fields += [{"at": 72, "param": n}, {"at": 88, "param": n + 1}]
        stride = slot_bytes
    else:
        if init:
            params.append("in buffer<f32>")
            fields.append({"at": 64, "param": n})
            n += 1
        if final:
            params.append("out buffer<f32>")
            fields.append({"at": 72, "param": n})
        stride = p.state_bytes
    hk, vv, gw = p.heads * K, p.value_heads * p.dim_v, p.value_heads * p.g_width
    T = 0 if varlen else max_tokens
    strides = [T * hk, hk, T * vv, vv, T * gw, gw, T * p.value_heads, p.value_heads, T * vv, vv]
    fields += [{"at": 112 + 8 * i, "i64": v} for i, v in enumerate(strides)]
    fields += [{"at": 192, "i64": stride if init else 0}, {"at": 200, "i64": stride if final else 0},
               {"at": 208, "i32": 0} if varlen else {"at": 208, "var": "tokens"},
               {"at": 212, "var": "seqs"}, {"at": 216, "i32": p.heads},
               {"at": 220, "i32": p.value_heads}, {"at": 224, "i32": p.dim_v},
               {"at": 228, "i32": p.flags}, {"at": 232, "f32": p.scale}]
    if p.lower_bound is not None:
        fields.append({"at": 236, "f32": float(p.lower_bound)})
    entry = f"{p.kind}_chunk_sm90a_bf16_k128"
    nt = p.dim_v // VTILE
    if not cp_segs:
        ln = _launch("kda_chunk", entry, CHUNK_PACK, fields, [nt, p.value_heads, "seqs"], CHUNK_THREADS)
        ln["shared_mem"] = CHUNK_SMEM
        return {"params": params, "impl": {"launches": [ln]}}
    cp = [{"at": 104, "scratch": "cp"}, {"at": 240, "i32": seg_chunks}, {"at": 248, "i32": cp_segs}]
    z = {"mul": ["seqs", cp_segs]}
    ph1 = _launch("kda_chunk", entry, CHUNK_PACK, fields + cp + [{"at": 244, "i32": 1}],
                  [nt + 1, p.value_heads, z], CHUNK_THREADS)
    comb = _launch("kda_chunk", "kda_cp_combine_sm90a_f32_k128", CHUNK_PACK,
                   fields + cp + [{"at": 244, "i32": 2}], [p.dim_v // 8, p.value_heads, "seqs"],
                   COMBINE_THREADS)
    ph3 = _launch("kda_chunk", entry, CHUNK_PACK, fields + cp + [{"at": 244, "i32": 3}],
                  [nt, p.value_heads, z], CHUNK_THREADS)
    ph1["shared_mem"] = ph3["shared_mem"] = CHUNK_SMEM
    scratch = {"cp": {"dtype": "f32", "shape": ["seqs", cp_segs * p.value_heads * (2 * p.dim_v + K) * K]}}
    return {"params": params, "impl": {"scratch": scratch, "launches": [ph1, comb, ph3]}}


MODULES = {
    "kda_step": {"source": "kda_step.sm90a.cubin", "sha256": "@SHA256:kda_step.sm90a@"},
    "kda_chunk": {"source": "kda_chunk.sm90a.cubin", "sha256": "@SHA256:kda_chunk.sm90a@"},
}

# ---- complete manifests ----------------------------------------------------------------------


def _buf(dtype, shape, kind, **kw):
    b = {"dtype": dtype, "shape": shape, "kind": kind}
    b.update(kw)
    return b


HEAD_NAMES = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "o")


def _head_bufs(p, prefix, lead, bufs):
    """Declares the head buffers of one call (A_log / dt_bias shared) -> call args."""
    names = [n for n in HEAD_NAMES if p.gate or n not in ("A_log", "dt_bias")]
    dtypes = ["bf16", "bf16", "bf16", p.g, p.beta] + (["f32", "f32"] if p.gate else []) + ["bf16"]
    args = []
    for name, dt, shape in zip(names, dtypes, p.shapes(lead)):
        shared = name in ("A_log", "dt_bias")
        bname = name if shared else f"{prefix}_{name}"
        bufs.setdefault(bname, _buf(dt, shape, "output" if name == "o" else "input"))
        args.append({"buf": bname})
    return args


def serving_manifest(p, max_seqs, max_tokens, steps=4, model=None, cp_segs=0, seg_chunks=0,
                     rotate=False):
    """A prefill -> decode -> verify -> commit chain over one pool `kda` (one layer: state +
    verify record per slot). Programs: prefill (packed fresh sequences, final states into
    their lines), prefill_cont (continues each line's state), decode, verify, commit (one
    call each) and main (prefill, decode, verify, commit in order); rotate adds decode_x8 and
    verify_commit_x4 over two line tables (`lines`, `lines_b`)."""
    slot = p.region_bytes(verify=True)
    bufs = {"lines": _buf("i32", [1, "seqs"], "input", domain={"index_into": "kda", "stride": slot}),
            "accepted": _buf("i32", ["seqs"], "input", domain={"min": 0, "max": steps}),
            "cu_seqlens": _buf("i32", [max_seqs + 1], "input", fill="cu_seqlens",
                               domain={"min": 0, "max": "tokens", "monotone": True})}
    ops = {"prefill": prefill_op(p, "pool", init=False, slot_bytes=slot, cp_segs=cp_segs,
                                 seg_chunks=seg_chunks),
           "prefill_cont": prefill_op(p, "pool", init=True, slot_bytes=slot, cp_segs=cp_segs,
                                      seg_chunks=seg_chunks),
           "decode": step_op(p, "decode", 1, slot), "verify": step_op(p, "verify", steps, slot),
           "commit": commit_op(p, steps, slot)}
    pool = [{"state": "kda"}, {"buf": "lines"}]
    pre = _head_bufs(p, "pre", ["tokens"], bufs) + [{"buf": "cu_seqlens"}] + pool
    calls = {
        "prefill": {"label": "prefill", "op": "prefill", "args": pre},
        "prefill_cont": {"label": "prefill_cont", "op": "prefill_cont", "args": pre},
        "decode": {"label": "decode", "op": "decode", "args": _head_bufs(p, "dec", ["seqs"], bufs) + pool},
        "verify": {"label": "verify", "op": "verify",
                   "args": _head_bufs(p, "ver", ["seqs", steps], bufs) + pool},
        "commit": {"label": "commit", "op": "commit", "args": pool + [{"buf": "accepted"}]},
    }
    programs = {name: {"calls": [c]} for name, c in calls.items()}
    programs["main"] = {"calls": [calls[c] for c in ("prefill", "decode", "verify", "commit")]}
    if rotate:
        # Benchmark programs: 8 decode steps / 4 verify + commit rounds alternating two line
        # tables (two pools' worth of state, so a round trip leaves the 60 MB L2).
        bufs["lines_b"] = dict(bufs["lines"])
        alt = lambda c, i: dict(c, args=[dict(a, buf="lines_b") if a.get("buf") == "lines" and i % 2
                                         else a for a in c["args"]], label=f"{c['label']}{i}")
        programs["decode_x8"] = {"calls": [alt(calls["decode"], i) for i in range(8)]}
        programs["verify_commit_x4"] = {"calls": [alt(calls[n], i) for i in range(4)
                                                  for n in ("verify", "commit")]}
    return {"schema_version": 4, "model": model or f"kernrt-kda-{p.tag}",
            "vars": {"tokens": {"max": max_tokens}, "seqs": {"max": max_seqs}},
            "states": {"kda": {"bytes_per_seq": slot}},
            "buffers": bufs, "modules": dict(MODULES), "ops": ops, "programs": programs}


def dense_prefill_manifest(p, batch, tokens, init=True, final=True, cp_segs=0, seg_chunks=0):
    """One dense prefill of exactly [batch, tokens] (program `prefill`): buffers q, k, v, g,
    beta, [A_log, dt_bias], o, and h0 / ht [batch, HV, V, K] (the drop-in's and the bench's
    form; strides are those of contiguous tensors of this shape)."""
    bufs = {}
    args = _head_bufs(p, "x", ["seqs", tokens], bufs)
    bufs = {k[2:] if k.startswith("x_") else k: v for k, v in bufs.items()}
    args = [{"buf": a["buf"][2:] if a["buf"].startswith("x_") else a["buf"]} for a in args]
    for name, on in (("h0", init), ("ht", final)):
        if on:
            bufs[name] = _buf("f32", ["seqs", p.value_heads, p.dim_v, K],
                              "input" if name == "h0" else "output")
            args.append({"buf": name})
    op = prefill_op(p, "dense", init=init, final=final, varlen=False, max_tokens=tokens,
                    cp_segs=cp_segs, seg_chunks=seg_chunks)
    return {"schema_version": 4, "model": f"kernrt-kda-prefill-{p.tag}-b{batch}-t{tokens}",
            "vars": {"tokens": {"max": tokens}, "seqs": {"max": batch}},
            "buffers": bufs, "modules": {"kda_chunk": MODULES["kda_chunk"]},
            "ops": {"prefill": op}, "programs": {"prefill": {"calls": [{"op": "prefill", "args": args}]}}}


def varlen_prefill_manifest(p, max_tokens, max_seqs, init=True, final=True, cp_segs=0,
                            seg_chunks=0):
    """One packed prefill: q.. [tokens, heads, dim], cu_seqlens [max_seqs + 1] i32, h0 / ht
    [seqs, HV, V, K] dense (program `prefill`)."""
    bufs = {}
    args = _head_bufs(p, "x", ["tokens"], bufs)
    bufs = {k[2:] if k.startswith("x_") else k: v for k, v in bufs.items()}
    args = [{"buf": a["buf"][2:] if a["buf"].startswith("x_") else a["buf"]} for a in args]
    bufs["cu_seqlens"] = _buf("i32", [max_seqs + 1], "input", fill="cu_seqlens",
                              domain={"min": 0, "max": "tokens", "monotone": True})
    args.append({"buf": "cu_seqlens"})
    for name, on in (("h0", init), ("ht", final)):
        if on:
            bufs[name] = _buf("f32", ["seqs", p.value_heads, p.dim_v, K],
                              "input" if name == "h0" else "output")
            args.append({"buf": name})
    op = prefill_op(p, "dense", init=init, final=final, varlen=True, cp_segs=cp_segs,
                    seg_chunks=seg_chunks)
    return {"schema_version": 4, "model": f"kernrt-kda-varlen-{p.tag}",
            "vars": {"tokens": {"max": max_tokens}, "seqs": {"max": max_seqs}},
            "buffers": bufs, "modules": {"kda_chunk": MODULES["kda_chunk"]},
            "ops": {"prefill": op}, "programs": {"prefill": {"calls": [{"op": "prefill", "args": args}]}}}


def dense_decode_manifest(p, max_seqs):
    """One decode step on caller state buffers h0 -> ht [seqs, HV, V, K] (the drop-in's form:
    fla's fused_recurrent_kda returns a new state), program `decode`."""
    bufs = {"h0": _buf("f32", ["seqs", p.value_heads, p.dim_v, K], "input"),
            "ht": _buf("f32", ["seqs", p.value_heads, p.dim_v, K], "output")}
    args = _head_bufs(p, "dec", ["seqs"], bufs) + [{"buf": "h0"}, {"buf": "ht"}]
    return {"schema_version": 4, "model": f"kernrt-kda-dense-decode-{p.tag}",
            "vars": {"seqs": {"max": max_seqs}}, "buffers": bufs,
            "modules": {"kda_step": MODULES["kda_step"]},
            "ops": {"decode": step_op(p, "decode", 1, dense=True)},
            "programs": {"decode": {"calls": [{"op": "decode", "args": args}]}}}


def examples():
    """name -> manifest of the committed examples (small: 4 sequences, H 2; kda_cp splits
    each of 2 sequences into 4 segments of 64 tokens)."""
    kda = Profile("kda", heads=2, value_heads=4, dim_v=128, gate="softplus", beta="bf16",
                  beta_sigmoid=True)
    gdn = Profile("gdn", heads=2, value_heads=2, dim_v=256, g="bf16", gate="lower_bound",
                  lower_bound=-5.0)
    return {"kda_chain": serving_manifest(kda, 4, 160, steps=4, model="kernrt-kda-example"),
            "gdn_chain": serving_manifest(gdn, 4, 160, steps=3, model="kernrt-gdn-example"),
            "kda_cp": serving_manifest(kda, 2, 512, steps=2, model="kernrt-kda-cp-example",
                                       cp_segs=4, seg_chunks=4)}

# ---- check: kda calls whose buffers or pool cannot be right -----------------------------------


def _field(fields, at):
    for f in fields:
        if f["at"] == at:
            return f
    return None


def check(m):
    """Problems (pointer, message) of every kda step call in a complete manifest: a pool slot
    smaller than the layer's region (state + record) at the call's offset, offsets not
    16-byte aligned, head buffers whose shapes differ from the op's."""
    out = []
    bufs, states, vars_ = m.get("buffers", {}), m.get("states", {}), m.get("vars", {})

    def extent(e):
        return vars_[e]["max"] if isinstance(e, str) else e

    for pname, prog in sorted(m.get("programs", {}).items()):
        for ci, call in enumerate(prog.get("calls", [])):
            op = m.get("ops", {}).get(call.get("op"), {})
            launches = op.get("impl", {}).get("launches", [])
            if len(launches) != 1 or launches[0].get("module") != "kda_step":
                continue
            fields = launches[0]["args"][0]["pack"]["fields"]
            here = f"/programs/{pname}/calls/{ci}/args"
            args = call.get("args", [])
            H, HV, V = (_field(fields, a)["i32"] for a in (184, 188, 192))
            steps = _field(fields, 200)["i32"]
            rec = _field(fields, 176)["i64"]
            kda = launches[0]["entry"].startswith("kda_")
            verify = "_verify_" in launches[0]["entry"] or "_commit_" in launches[0]["entry"]
            for i, a in enumerate(args):
                if a.get("offset", 0) % 16:
                    out.append((f"{here}/{i}", f"offset {a['offset']} is not 16-byte aligned"))
            st = _field(fields, 64)
            si = st["param"] if st and "param" in st else None
            if si is not None and si < len(args) and "state" in args[si]:
                name = args[si]["state"]
                per = states.get(name, {}).get("bytes_per_seq", 0)
                need = args[si].get("offset", 0) + HV * V * K * 4
                if verify:
                    need = args[si].get("offset", 0) + rec + _record_bytes(kda, H, HV, V)
                if need > per:
                    out.append((f"{here}/{si}", f"state `{name}` has {per} bytes per sequence, "
                                f"the layer needs {need} (offset + state {HV * V * K * 4} B"
                                f"{' + verify record' if verify else ''})"))
            lead = ([] if steps == 1 else [steps])
            want = {0: [H, K], 8: [H, K], 16: [HV, V], 24: [HV, K] if kda else [HV], 32: [HV],
                    56: [HV, V]}
            for at, tail in want.items():
                f = _field(fields, at)
                if not f or "param" not in f or f["param"] >= len(args) or "buf" not in args[f["param"]]:
                    continue
                b = bufs.get(args[f["param"]]["buf"])
                if b is None:
                    continue
                shape = [extent(e) for e in b["shape"]]
                if shape[-len(tail):] != tail or (lead and shape[-len(tail) - 1] != steps):
                    out.append((f"{here}/{f['param']}", f"`{args[f['param']]['buf']}` has shape "
                                f"{shape}, the op reads [seqs{', ' + str(steps) if lead else ''}, "
                                f"{', '.join(map(str, tail))}]"))
    return out


def _record_bytes(kda, H, HV, V):
    kh = _align16(MAX_STEPS * H * K * 4)
    return kh + _align16(MAX_STEPS * HV * (K if kda else 1) * 4) + _align16(MAX_STEPS * HV * 4) \
        + _align16(MAX_STEPS * HV * V * 2)

# ---- files -----------------------------------------------------------------------------------


def _fmt(o, ind):
    """JSON with short values on one line (<= 96 columns), longer ones expanded."""
    flat = json.dumps(o)
    if not isinstance(o, (dict, list)) or len(flat) + ind <= 96:
        return flat
    pad = " " * (ind + 2)
    if isinstance(o, dict):
        items = [f"{pad}{json.dumps(k)}: {_fmt(v, ind + 2)}" for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * ind + "}"
    return "[\n" + ",\n".join(pad + _fmt(v, ind + 2) for v in o) + "\n" + " " * ind + "]"


def dump(obj):
    return _fmt(obj, 0) + "\n"


def outputs():
    """Every generated file, path relative to the repository -> text."""
    files = {}
    for name, m in examples().items():
        problems = check(m)
        if problems:
            raise GenError(f"example `{name}`: " + "; ".join(f"{p}: {msg}" for p, msg in problems))
        files[f"examples/kda/{name}.json.in"] = dump(m)
    return files


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write the examples into the repository")
    w.add_argument("--root", default=REPO)
    d = sub.add_parser("diff", help="exit 1 if a committed generated file differs from the generator")
    d.add_argument("--root", default=REPO)
    c = sub.add_parser("check", help="refuse kda calls whose buffers or pool cannot match the op")
    c.add_argument("manifests", nargs="+")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "check":
            bad = 0
            for path in a.manifests:
                for ptr, msg in check(json.load(open(path))):
                    print(f"{path}: {ptr}: {msg}", file=sys.stderr)
                    bad += 1
            return 1 if bad else 0
        stale = 0
        for rel, text in sorted(outputs().items()):
            path = os.path.join(a.root, rel)
            if a.cmd == "write":
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            elif not os.path.exists(path) or open(path).read() != text:
                print(f"{rel}: differs from `kda_op.py write`", file=sys.stderr)
                stale += 1
        return 1 if stale else 0
    except GenError as e:
        print(f"kda_op: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
