#!/usr/bin/env python3
"""Merge the shipped GB300 fragments and call binding into the manifest they belong to.

Owns: one complete manifest at the model profile built from the shipped files, unchanged:
manifests/qwen3.8-27b-gb300/{decode-ops,prefill-ops}.json merged as `modules` + `ops`, plus
the declarations their interface needs (vars tokens <= 2048 and seqs <= 128, a 16-layer paged
KV state `kv` of 16 x 4096 bytes per token, and the buffers the call names) and two programs:
`decode` holding call-binding-example.json as shipped, and `prefill` holding the same binding
with the op changed to attn_prefill, as the source document says. With --verifier it runs
kernrt-verify on the result and returns its exit code, so ctest shows the fragments and the
call verify in context (the corpus notes allow either that or fragment mode).

Does not check: anything itself; the verifier does.
"""

import argparse
import copy
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = os.path.join(REPO, "manifests", "qwen3.8-27b-gb300")
KV_BYTES_PER_TOKEN = 16 * 4 * 2 * 256 * 2  # 16 layers x 4 heads x K/V x 256 x bf16


def load(name):
    with open(os.path.join(SHIPPED, name), encoding="utf-8") as f:
        return json.load(f)


def merged():
    decode, prefill = load("decode-ops.json"), load("prefill-ops.json")
    call = load("call-binding-example.json")
    prefill_call = copy.deepcopy(call)
    prefill_call["op"] = "attn_prefill"
    prefill_call["label"] = call["label"].replace(".decode", ".prefill")
    rows = ["tokens", 24, 256]
    return {
        "schema_version": 4,
        "model": "kernrt-qwen3.8-27b-gb300-attention",
        "vars": {"tokens": {"max": 2048}, "seqs": {"max": 128}},
        "states": {"kv": {"bytes_per_token": KV_BYTES_PER_TOKEN}},
        "buffers": {
            "q_n": {"dtype": "bf16", "shape": rows, "kind": "input"},
            "block_table": {"dtype": "i32", "shape": ["seqs", 4096], "kind": "input",
                            "domain": {"index_into": "kv", "stride": 64}},
            "seq_lens": {"dtype": "i32", "shape": ["seqs"], "kind": "input",
                         "domain": {"min": 1, "max": 262144}},
            "cu_seqlens_q": {"dtype": "i32", "shape": [129], "kind": "input",
                             "domain": {"min": 0, "max": "tokens", "monotone": True}},
            "attn_out": {"dtype": "bf16", "shape": rows, "kind": "output"},
        },
        "modules": {**decode["modules"], **prefill["modules"]},
        "ops": {**decode["ops"], **prefill["ops"]},
        "programs": {"decode": {"calls": [call]}, "prefill": {"calls": [prefill_call]}},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description="Merge the shipped fragments and call binding "
                                                 "into one model-profile manifest.")
    parser.add_argument("--output", "-o", required=True, help="write the manifest here")
    parser.add_argument("--verifier", help="then run this kernrt-verify on it")
    args = parser.parse_args(argv)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(merged(), f, indent=1)
        f.write("\n")
    if args.verifier:
        return subprocess.call([args.verifier, args.output])
    return 0


if __name__ == "__main__":
    sys.exit(main())
