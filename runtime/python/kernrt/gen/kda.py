#!/usr/bin/env python3
"""KDA / GDN op generator: one profile -> kern schema-v4 manifests over the kernels/kda cubins.

Owns: complete manifests built from the ops of kda_ops.py (re-exported here with the profile
and the constants): the serving chain (prefill -> decode -> verify -> commit over one state
pool, one region per layer and sequence: the fp32 state [HV, V, K], then the verify record),
the dense and varlen prefills and the dense decode the drop-ins and the device validation
load, all with `@SHA256:<cubin>@` placeholders; the committed examples examples/kda/*.json.in;
`check`, which refuses kda calls whose buffers or pool cannot be right; the CLI (write, diff,
check).
Refuses at generation: K != 128, V not 128 or 256, HV not a multiple of H, unknown dtypes,
lower_bound without the in-kernel gate, allow_neg_eigval without beta sigmoid, steps
outside 1..8. The manifests add what the runtime checks before a launch: every line table
is a domain `index_into` the pool (a line out of range is refused), accepted counts are a
domain 0..steps.

Does not check: kernel behaviour, the manifest rules (kernrt-verify does), cu_seqlens
contents beyond their domain. Python 3 standard library only.
"""

import os
import sys

from . import files as _files
from .kda_ops import (  # noqa: F401  (the ops and constants, re-exported)
    K, MAX_STEPS, STEP_ROWS, STEP_THREADS, STEP_PACK, CHUNK,
    VTILE, CHUNK_THREADS, CHUNK_SMEM, CHUNK_PACK, COMBINE_THREADS, FLAG_NO_OUTPUT,
    FLAG_GATE, FLAG_LOWER_BOUND, FLAG_BETA_SIGMOID, FLAG_NEG_EIGVAL, FLAG_L2NORM, FLAG_G_F32,
    FLAG_BETA_F32, ESIZE, GenError, Profile, step_op, commit_op,
    prefill_op, MODULES, modules_of, _align16)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


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
                     rotate=False, chunk="auto"):
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
    pre_kw = dict(slot_bytes=slot, cp_segs=cp_segs, seg_chunks=seg_chunks, max_tokens=max_tokens,
                  max_seqs=max_seqs, chunk=chunk)
    ops = {"prefill": prefill_op(p, "pool", init=False, **pre_kw),
           "prefill_cont": prefill_op(p, "pool", init=True, **pre_kw),
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
            "buffers": bufs, "modules": modules_of(ops), "ops": ops, "programs": programs}


def dense_prefill_manifest(p, batch, tokens, init=True, final=True, cp_segs=0, seg_chunks=0,
                           chunk="auto"):
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
                    cp_segs=cp_segs, seg_chunks=seg_chunks, chunk=chunk)
    return {"schema_version": 4, "model": f"kernrt-kda-prefill-{p.tag}-b{batch}-t{tokens}",
            "vars": {"tokens": {"max": tokens}, "seqs": {"max": batch}},
            "buffers": bufs, "modules": modules_of({"prefill": op}),
            "ops": {"prefill": op}, "programs": {"prefill": {"calls": [{"op": "prefill", "args": args}]}}}


def varlen_prefill_manifest(p, max_tokens, max_seqs, init=True, final=True, cp_segs=0,
                            seg_chunks=0, chunk="auto"):
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
                    seg_chunks=seg_chunks, max_tokens=max_tokens, max_seqs=max_seqs, chunk=chunk)
    return {"schema_version": 4, "model": f"kernrt-kda-varlen-{p.tag}",
            "vars": {"tokens": {"max": max_tokens}, "seqs": {"max": max_seqs}},
            "buffers": bufs, "modules": modules_of({"prefill": op}),
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
    each of 2 sequences into 4 segments of 64 tokens). kda_chain's prefills run on the 64-token
    chunk kernels (bf16 g), gdn_chain's (the bounded gate) and kda_cp's on kda_chunk.cu."""
    kda = Profile("kda", heads=2, value_heads=4, dim_v=128, g="bf16", gate="softplus",
                  beta="bf16", beta_sigmoid=True)
    gdn = Profile("gdn", heads=2, value_heads=2, dim_v=256, g="bf16", gate="lower_bound",
                  lower_bound=-5.0)
    return {"kda_chain": serving_manifest(kda, 4, 160, steps=4, model="kernrt-kda-example"),
            "gdn_chain": serving_manifest(gdn, 4, 160, steps=3, model="kernrt-gdn-example"),
            "kda_cp": serving_manifest(kda, 2, 512, steps=2, model="kernrt-kda-cp-example",
                                       cp_segs=4, seg_chunks=4, chunk="c16")}

# ---- check: kda calls whose buffers or pool cannot be right -----------------------------------


from .files import field as _field  # noqa: E402


def check(m):
    """Problems (pointer, message) of every kda step call in a complete manifest: a pool slot
    smaller than the layer's region (state + record) at the call's offset, offsets not
    16-byte aligned, head buffers whose shapes differ from the op's."""
    out = []
    bufs, states = m.get("buffers", {}), m.get("states", {})
    for here, call, op in _files.calls(m):
        launches = op.get("impl", {}).get("launches", [])
        if len(launches) != 1 or launches[0].get("module") != "kda_step":
            continue
        fields = launches[0]["args"][0]["pack"]["fields"]
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
            shape = [_files.extent(m, e) for e in b["shape"]]
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


dump = _files.dump


def outputs():
    """Every generated file, path relative to the repository -> text."""
    return _files.checked_examples(examples(), check, "examples/kda", GenError)


def main(argv=None):
    return _files.main(argv, prog="kda_op.py", description=__doc__.split("\n")[0], outputs=outputs,
                       check=check, error=GenError, repo=REPO, what="the examples")


if __name__ == "__main__":
    sys.exit(main())
