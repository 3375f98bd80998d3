#!/usr/bin/env python3
"""Write a large schema-v4 manifest in the seed's style for timing kernrt-verify.

A decode step of a LAYERS-layer model over one paged KV state: per layer an rmsnorm, a
qkv projection, rope + KV write, a paged attention op with its own 1280-byte pack (four
tensormaps, pointers, vars, an expression and ~25 literals, as the seed's TRTLLM-GEN ops
have), an output projection, a second rmsnorm, gate/up, silu-mul and down projections.
Each layer's four GEMMs are their own ops with a 512-byte pack of three tensormaps. Calls are unrolled (no repeat construct exists) and printed with
one-space indentation like the seed fragments, so 64 layers come to about 1 MB.

The manifest verifies; it does not fit a real kernel (hashes are synthetic). Usage:
  gen_manifest.py [--layers 64] OUT.json
"""
import argparse
import hashlib
import json

HIDDEN = 3072
HEADS, KV_HEADS, HEAD_DIM = 24, 4, 256
FFN = 8192
PAGE = 64
MAX_TOKENS, MAX_SEQS, PAGES_PER_SEQ = 2048, 128, 64
KV_LAYER_BYTES = 2 * KV_HEADS * HEAD_DIM * 2  # K and V of one token, bf16
QKV = (HEADS + 2 * KV_HEADS) * HEAD_DIM
# (tag, n, k, accumulate into C)
GEMMS = [("qkv", QKV, HIDDEN, False), ("o", HIDDEN, HEADS * HEAD_DIM, True),
         ("gate_up", 2 * FFN, HIDDEN, False), ("down", HIDDEN, FFN, True)]


def sha(name):
    return hashlib.sha256(name.encode()).hexdigest()


def kernel(module, entry, params, block, grid, args=None, shared_mem=None):
    launch = {"module": module, "entry": entry, "block": block, "grid": grid}
    if params is not None:
        launch["params"] = params
    if shared_mem is not None:
        launch["shared_mem"] = shared_mem
    if args is not None:
        launch["args"] = args
    return launch


def tensormap(param, dims, strides, box):
    return {"param": param, "dtype": "bf16", "dims": dims, "strides": strides, "box": box,
            "swizzle": 128, "l2_promotion": 128}


def attention_op(layer):
    """A per-layer paged decode op: the launch takes one bytes<1280> parameter block."""
    q_rows = HEADS * HEAD_DIM * 2
    fields = [
        {"at": 0, "tensormap": tensormap(1, [HEAD_DIM, HEADS, MAX_TOKENS], [512, q_rows], [64, 8, 1])},
        {"at": 128, "tensormap": tensormap(2, [HEAD_DIM, PAGE, KV_HEADS, 0], [4096, 1024, 4194304], [64, 64, 1, 1])},
        {"at": 384, "tensormap": tensormap(3, [HEAD_DIM, PAGE, KV_HEADS, 0], [4096, 1024, 4194304], [64, 64, 1, 1])},
        {"at": 512, "tensormap": tensormap(0, [HEAD_DIM, HEADS, MAX_TOKENS], [512, q_rows], [64, 8, 1])},
        {"at": 912, "param": 0},
        {"at": 1000, "param": 4},
        {"at": 1080, "param": 5},
        {"at": 1116, "param": 7},
        {"at": 1244, "param": 8},
        {"at": 984, "scratch": "counter"},
        {"at": 1008, "scratch": "partial"},
        {"at": 1152, "expr": {"ceil_div": ["tokens", 128]}},
    ]
    literals = [2147483647, 1, 262144, 38, 4096, KV_HEADS, HEADS, 6, 6, -1431655765, 2, 6144,
                1048576, 1, 6, 1, 1065353216, 1035512379, 1065353216, -1082130432, 256, layer]
    at = 1156
    for value in literals:
        if at == 1244:
            at += 4
        fields.append({"at": at, "i32": value})
        at += 4
    params = ["out buffer<bf16>", "in buffer<bf16>", "in state", "in state", "in buffer<i32>",
              "in buffer<i32>", "in buffer<i32>", "i32", "i32"]
    return {
        "params": params,
        "impl": {
            "scratch": {"counter": {"dtype": "i32", "shape": [3072]},
                        "partial": {"dtype": "f32", "shape": [MAX_SEQS, KV_HEADS, 38, 8, HEAD_DIM]}},
            "launches": [kernel("fmha", "fmha_decode_l%d" % layer, ["bytes<1280>"], [512, 1, 1],
                                [38, KV_HEADS, "seqs"],
                                [{"pack": {"size": 1280, "fields": fields}}], shared_mem=144992)],
        },
    }


def gemm_op(layer, tag, n, k, acc):
    """A per-layer GEMM C[tokens, n] (+)= A[tokens, k] W[n, k]^T through three TMA descriptors."""
    def tma(param, inner, outer):
        return {"param": param, "dtype": "bf16", "dims": [inner, outer], "strides": [inner * 2],
                "box": [64, 128], "swizzle": 128}
    fields = [{"at": 0, "tensormap": tma(0, k, MAX_TOKENS)},
              {"at": 128, "tensormap": tma(1, k, n)},
              {"at": 256, "tensormap": tma(2, n, MAX_TOKENS)},
              {"at": 384, "var": "tokens"}, {"at": 388, "i32": n}, {"at": 392, "i32": k},
              {"at": 396, "i32": 1 if acc else 0}, {"at": 400, "expr": {"ceil_div": ["tokens", 128]}},
              {"at": 408, "param": 2}, {"at": 416, "i64": layer}]
    params = ["in buffer<bf16>", "in buffer<bf16>", "inout buffer<bf16>" if acc else "out buffer<bf16>"]
    grid = [{"ceil_div": [n, 128]}, {"ceil_div": ["tokens", 128]}, 1]
    launch = kernel("gemm", "gemm_bf16_tn_%s" % tag, ["bytes<512>"], [384, 1, 1], grid,
                    [{"pack": {"size": 512, "fields": fields}}], shared_mem=196608)
    launch["cluster"] = [1, 1, 1]
    return {"params": params, "impl": {"launches": [launch]}}


def shared_ops():
    row = {"ceil_div": ["tokens", 4]}
    return {
        "embed": {"params": ["in buffer<i32>", "in buffer<bf16>", "out buffer<bf16>", "i32"],
                  "impl": {"launches": [kernel("norm", "embed_rows", None, [256, 1, 1], [row, 1, 1])]}},
        "rmsnorm": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "f32"],
                    "impl": {"launches": [kernel("norm", "rmsnorm_rows", None, [256, 1, 1], [row, 1, 1])]}},
        "rope_kv": {"params": ["in buffer<bf16>", "in buffer<i32>", "in buffer<i64>", "out buffer<bf16>",
                               "inout state", "i32"],
                    "impl": {"launches": [kernel("rope", "rope_write_kv", None, [128, 1, 1], ["tokens", HEADS, 1])]}},
        "silu_mul": {"params": ["in buffer<bf16>", "out buffer<bf16>", "i32"],
                     "impl": {"launches": [kernel("act", "silu_mul", None, [256, 1, 1], [row, 8, 1])]}},
        "argmax": {"params": ["in buffer<bf16>", "out buffer<i32>", "i32"],
                   "impl": {"launches": [kernel("act", "argmax_rows", None, [1024, 1, 1], ["seqs", 1, 1])]}},
    }


def buf(name):
    return {"buf": name}


def layer_calls(i):
    w = "layers.%d." % i
    kv = {"state": "kv", "offset": i * KV_LAYER_BYTES}
    kv_v = {"state": "kv", "offset": i * KV_LAYER_BYTES + KV_HEADS * HEAD_DIM * 2}
    tok = {"var": "tokens"}
    gemm = lambda a, tag, c: {"label": w + tag, "op": "gemm_l%d_%s" % (i, tag), "args": [buf(a), buf(w + tag), buf(c)]}
    return [
        {"label": w + "ln1", "op": "rmsnorm", "args": [buf("hidden"), buf(w + "ln1"), buf("normed"), tok, {"f32": 1e-6}]},
        gemm("normed", "qkv", "qkv"),
        {"label": w + "rope", "op": "rope_kv", "args": [buf("qkv"), buf("positions"), buf("slot_mapping"), buf("q"), kv, tok]},
        {"label": w + "attn", "op": "attn_l%d" % i, "args": [buf("attn_out"), buf("q"), kv, kv_v, buf("block_table"),
                                                          buf("seq_lens"), buf("cu_seqlens"), {"var": "seqs"}, tok]},
        gemm("attn_out", "o", "hidden"),
        {"label": w + "ln2", "op": "rmsnorm", "args": [buf("hidden"), buf(w + "ln2"), buf("normed"), tok, {"f32": 1e-6}]},
        gemm("normed", "gate_up", "gate_up"),
        {"label": w + "act", "op": "silu_mul", "args": [buf("gate_up"), buf("act"), tok]},
        gemm("act", "down", "hidden"),
    ]


def manifest(layers):
    bf16 = lambda shape, kind: {"dtype": "bf16", "shape": shape, "kind": kind}
    buffers = {
        "token_ids": {"dtype": "i32", "shape": ["tokens"], "kind": "input", "fill": "token"},
        "positions": {"dtype": "i32", "shape": ["tokens"], "kind": "input", "fill": "position"},
        "slot_mapping": {"dtype": "i64", "shape": ["tokens"], "kind": "input", "fill": "slot",
                         "domain": {"index_into": "kv"}},
        "seq_lens": {"dtype": "i32", "shape": ["seqs"], "kind": "input", "fill": "seq_len"},
        "cu_seqlens": {"dtype": "i32", "shape": [MAX_SEQS + 1], "kind": "input", "fill": "cu_seqlens"},
        "block_table": {"dtype": "i32", "shape": ["seqs", PAGES_PER_SEQ], "kind": "input",
                        "domain": {"index_into": "kv", "stride": PAGE}},
        "next_token": {"dtype": "i32", "shape": ["seqs"], "kind": "output", "fill": "tokens"},
        "embed_w": bf16([151936, HIDDEN], "weight"),
        "hidden": bf16(["tokens", HIDDEN], "workspace"),
        "normed": bf16(["tokens", HIDDEN], "workspace"),
        "qkv": bf16(["tokens", (HEADS + 2 * KV_HEADS) * HEAD_DIM], "workspace"),
        "q": bf16(["tokens", HEADS * HEAD_DIM], "workspace"),
        "attn_out": bf16(["tokens", HEADS * HEAD_DIM], "workspace"),
        "gate_up": bf16(["tokens", 2 * FFN], "workspace"),
        "act": bf16(["tokens", FFN], "workspace"),
    }
    ops = shared_ops()
    calls = [{"label": "embed", "op": "embed", "args": [buf("token_ids"), buf("embed_w"), buf("hidden"), {"var": "tokens"}]}]
    for i in range(layers):
        w = "layers.%d." % i
        buffers[w + "ln1"] = bf16([HIDDEN], "weight")
        buffers[w + "ln2"] = bf16([HIDDEN], "weight")
        buffers[w + "qkv"] = bf16([(HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN], "weight")
        buffers[w + "o"] = bf16([HIDDEN, HEADS * HEAD_DIM], "weight")
        buffers[w + "gate_up"] = bf16([2 * FFN, HIDDEN], "weight")
        buffers[w + "down"] = bf16([HIDDEN, FFN], "weight")
        ops["attn_l%d" % i] = attention_op(i)
        for tag, n, k, acc in GEMMS:
            ops["gemm_l%d_%s" % (i, tag)] = gemm_op(i, tag, n, k, acc)
        calls += layer_calls(i)
    calls.append({"label": "sample", "op": "argmax", "args": [buf("hidden"), buf("next_token"), {"var": "seqs"}]})
    modules = {name: {"source": name + ".cubin", "sha256": sha(name)} for name in ("fmha", "gemm", "norm", "rope", "act")}
    return {
        "schema_version": 4,
        "model": "verifier-speed-%dl" % layers,
        "vars": {"tokens": {"max": MAX_TOKENS}, "seqs": {"max": MAX_SEQS}},
        "states": {"kv": {"bytes_per_token": layers * KV_LAYER_BYTES}},
        "buffers": buffers,
        "modules": modules,
        "ops": ops,
        "programs": {"decode": {"batch": {"groups": MAX_SEQS, "rows": 1}, "calls": calls}},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=64, help="number of layers to unroll")
    ap.add_argument("out", help="file to write")
    a = ap.parse_args()
    with open(a.out, "w") as f:
        json.dump(manifest(a.layers), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
