"""Complete, runnable paged-decode manifests around the attention op, for any capacity.

Owns: the whole serving-shaped decode manifest (vars, buffers with domains, the paged KV as a
`bytes_per_token` state, the module, the `attn_decode` op of kernrt.gen.attention and one
program per KV layer) from one description: max sequences, max context, layers, target.
Buffers: q [tokens, 24, 256] bf16 and out (output), table [seqs, max_context/64] i32 pages
(index_into the KV state, stride 64 tokens), seq [seqs] i32 in [1, max_context], cuq
[max_seqs + 1] i32 monotone in [0, tokens]. Programs `decode_l<layer>` attend over KV layer
<layer> (K at layer * 262144 bytes into a page, V 512 bytes after it). The KV state holds
`layers` * 4096 bytes per token, so `tokens` of load options sizes the pool.
`variants` (name -> geometry overrides, e.g. {"entry": ...} or {"cubin": ...}) adds one op
`attn_decode_<name>` per variant over the same buffers and KV state, and programs
`decode_l<layer>_<name>`: kernels timed side by side read the very same memory.
Does not check: the manifest rules (kernrt-verify / kernrt.verify do) or kernel behaviour.
Python 3 standard library only.
"""
from . import attention as ao
from . import files as _files
from .attention_params import GenError

KV_BYTES_PER_TOKEN_LAYER = ao.SLOT_BYTES  # K and V of 4 heads, bf16


def decode_manifest(max_seqs, max_context, layers, target="h200", geometry=None, splits=None,
                    model="kernrt-paged-decode", variants=None, heads_kv=ao.HEADS_KV):
    """The manifest as a dict; the h200 module's sha256 is the `@SHA256:<cubin>@` placeholder
    (kernrt.gen.pin replaces it). heads_kv=2: one rank of two in tensor parallel (its 12
    query heads, its KV pages of 2 heads, the q12kv2 entry)."""
    if not isinstance(layers, int) or layers < 1:
        raise GenError(f"`layers` must be a positive integer, got {layers!r}")
    if target == "h200" and geometry is None:
        geometry = ao.load_geometry()
        if heads_kv != ao.HEADS_KV:
            geometry = dict(geometry, entry=ao.TP2_DECODE_ENTRY)
    cap = ao.Capacity(max_seqs, max_seqs, max_context, layers,
                      splits if splits is not None else ao.default_splits(target, geometry),
                      heads_kv=heads_kv)
    op_name, launch, body = ao.op("decode", target, cap, ao.KV_STATE, geometry)
    rows = ["tokens", cap.heads_q, ao.HEAD_DIM]
    names = {"out": "out", "q": "q", "kv": "kv", "table": "table", "seq": "seq", "cuq": "cuq"}
    modules = {launch.module: {"source": launch.source, "sha256": launch.sha256}}
    ops = {op_name: body}
    programs = {f"decode_l{layer}": {"calls": [ao.call("decode", f"attn_layer_{layer}.decode",
                                                       layer, names, kv_form="state")]}
                for layer in range(layers)}
    for name, overrides in sorted((variants or {}).items()):
        vg = dict(geometry or {}, **overrides)
        if "cubin" in overrides and "module" not in overrides:
            vg["module"] = overrides["cubin"].split(".")[0]
        _, vlaunch, vbody = ao.op("decode", target, cap, ao.KV_STATE, vg)
        modules[vlaunch.module] = {"source": vlaunch.source, "sha256": vlaunch.sha256}
        ops[f"{op_name}_{name}"] = vbody
        for layer in range(layers):
            call = ao.call("decode", f"attn_layer_{layer}.decode_{name}", layer, names, kv_form="state")
            call["op"] = f"{op_name}_{name}"
            programs[f"decode_l{layer}_{name}"] = {"calls": [call]}
    return {
        "schema_version": 4,
        "model": model,
        "vars": {"tokens": {"max": max_seqs}, "seqs": {"max": max_seqs}},
        "states": {"kv": {"bytes_per_token": layers * cap.slot_bytes}},
        "buffers": {
            "q": {"dtype": "bf16", "shape": rows, "kind": "input"},
            "table": {"dtype": "i32", "shape": ["seqs", cap.max_pages], "kind": "input",
                      "domain": {"index_into": "kv", "stride": ao.PAGE}},
            "seq": {"dtype": "i32", "shape": ["seqs"], "kind": "input",
                    "domain": {"min": 1, "max": max_context}},
            "cuq": {"dtype": "i32", "shape": [max_seqs + 1], "kind": "input",
                    "domain": {"min": 0, "max": "tokens", "monotone": True}},
            "out": {"dtype": "bf16", "shape": rows, "kind": "output"},
        },
        "modules": modules,
        "ops": ops,
        "programs": programs,
    }


def main(argv=None):
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="Write a complete paged-decode manifest "
                                             "(KV as a paged state) for one capacity.")
    ap.add_argument("--max-seqs", type=int, required=True, help="sequences per call")
    ap.add_argument("--max-context", type=int, required=True, help="tokens per sequence (x64)")
    ap.add_argument("--layers", type=int, default=1, help="KV layers interleaved in a page")
    ap.add_argument("--target", choices=ao.TARGETS, default="h200")
    ap.add_argument("--splits", type=int, help="override the decode launch's KV splits")
    ap.add_argument("--cubins", help="pin the module to the cubin in this directory")
    ap.add_argument("--output", "-o", help="write here instead of stdout")
    a = ap.parse_args(argv)
    try:
        m = decode_manifest(a.max_seqs, a.max_context, a.layers, a.target, splits=a.splits)
        if a.cubins:
            from . import pin
            m = pin(m, a.cubins)
    except Exception as e:  # GenError, PinError: a message for the user, exit 2
        print(f"decode_manifest: error: {e}", file=sys.stderr)
        return 2
    _files.emit(m, a.output)
    return 0
