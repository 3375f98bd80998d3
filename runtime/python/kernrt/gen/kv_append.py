"""KV append op generator: the ops that write a step's new K/V rows into the paged KV state.

Owns: the `kv_append` (i32 slots) and `kv_append_i64` (i64 slots) ops over kernels/kv_append
for a KV pool of `layers` interleaved layers (page stride layers x 262144 bytes, a literal of
the launch), the shipped 16-layer fragment kernels/kv_append/kv_append_ops.json, and a
complete manifest (k, v, slots inputs; the `kv` paged state; one program per layer and slot
type) for checks and examples. Interface: k, v [tokens, 4, 256] bf16, the KV state (called
with offset layer * 262144), slots [tokens] (page * 64 + offset; negative = padding), tokens.
Does not check: slots against the pool (the kernel skips negatives and trusts the rest; the
manifest's domain bounds them). Python 3 standard library only.
"""
from . import attention as ao
from .attention_params import GenError

MODULE = "kv_append"
THREADS = 256  # one CTA per token, 16 bytes per thread of a 4096-byte slot


def op(layers, index="i32"):
    if index not in ("i32", "i64"):
        raise GenError(f"slot index dtype `{index}` is not supported: expected i32 or i64")
    if not isinstance(layers, int) or layers < 1:
        raise GenError(f"`layers` must be a positive integer, got {layers!r}")
    iface = ["in buffer<bf16>", "in buffer<bf16>", "inout state", f"in buffer<{index}>", "i32"]
    return {"params": iface,
            "impl": {"launches": [{
                "module": MODULE, "entry": f"kv_append_sm90a_bf16_kv4d256p64_{index}",
                "params": iface + ["i32"], "block": [THREADS, 1, 1], "grid": ["tokens", 1, 1],
                "args": [{"param": i} for i in range(5)] + [{"i32": layers * ao.LAYER_PAGE_BYTES}]}]}}


def fragment(layers=16):
    """modules + ops (the shipped kernels/kv_append/kv_append_ops.json at 16 layers)."""
    return {"modules": {MODULE: {"source": "kv_append.sm90a.cubin", "sha256": "@SHA256:kv_append.sm90a@"}},
            "ops": {"kv_append": op(layers, "i32"), "kv_append_i64": op(layers, "i64")}}


def manifest(layers, max_tokens, pool_tokens_hint=None):
    """A complete manifest: programs `append_i32_l<layer>` / `append_i64_l<layer>`."""
    frag = fragment(layers)
    rows = ["tokens", ao.HEADS_KV, ao.HEAD_DIM]
    buffers = {"k": {"dtype": "bf16", "shape": rows, "kind": "input"},
               "v": {"dtype": "bf16", "shape": rows, "kind": "input"}}
    programs = {}
    for index, op_name in (("i32", "kv_append"), ("i64", "kv_append_i64")):
        buffers[f"slots_{index}"] = {"dtype": index, "shape": ["tokens"], "kind": "input",
                                     "domain": {"min": -1}}
        for layer in range(layers):
            programs[f"append_{index}_l{layer}"] = {"calls": [{"op": op_name, "args": [
                {"buf": "k"}, {"buf": "v"}, {"state": "kv", "offset": layer * ao.LAYER_PAGE_BYTES},
                {"buf": f"slots_{index}"}, {"var": "tokens"}]}]}
    return {"schema_version": 4, "model": "kernrt-kv-append",
            "vars": {"tokens": {"max": max_tokens}},
            "states": {"kv": {"bytes_per_token": layers * ao.SLOT_BYTES}},
            "buffers": buffers, "modules": frag["modules"], "ops": frag["ops"],
            "programs": programs}


def dumps(obj):
    import json
    return json.dumps(obj, indent=2) + "\n"
