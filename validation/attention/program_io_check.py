"""The attention integration cases through program_io with generator-made manifests.

Owns: building complete schema-v4 decode manifests around tools/gen/attention_op.py's h200
`attn_decode` op (the geometry of kernels/attention/geometry.json, the module pinned to the
SHA-256 of the cubin under --cubins), writing raw inputs (random bf16 Q and paged KV,
randomized disjoint page tables, ragged lengths), running build/bin/program_io in eager and
CUDA-graph mode (1000 replays where asked), and gating its output against the float32 torch
reference: finite, rel L2 < 0.02, max abs < 0.02. One JSONL line per case.
The long-context cases (--long: batch 1..32 at 150k-250k, 0.8-26 GB of KV) declare the KV as
a paged `bytes_per_token` state, as serving manifests do, sized with program_io's --tokens and
filled with --fill from a pattern of PATTERN_PAGES random pages that repeats over the pool
(physical page p holds pattern page p % PATTERN_PAGES; the table's pages stay disjoint and
randomized, and the reference reads the same repetition).
Deliberately does not check: the manifest rules (kernrt-verify does) or timings beyond what
program_io prints (the side-by-side benchmark is run_attention.py).
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "gen"))

import attention_op as ao  # noqa: E402
import attn_harness as H  # noqa: E402
from run_attention import GATE, Recorder, bench_lens, log  # noqa: E402


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


PATTERN_PAGES = 509  # prime, so pages a wrong index could reach almost never repeat content
KV_BYTES_PER_TOKEN_LAYER = ao.HEADS_KV * 2 * ao.HEAD_DIM * 2  # K and V of 4 heads, bf16


def manifest(seqs, max_context, layers, layer, pool_pages, cubin_sha, kv_form="buf"):
    geometry = ao.load_geometry()
    splits = ao.default_splits("h200", geometry)
    cap = ao.Capacity(seqs, seqs, max_context, layers, splits)
    kv_param = ao.KV_STATE if kv_form == "state" else ao.KV_BUFFER
    op_name, launch, body = ao.op("decode", "h200", cap, kv_param, geometry)
    rows = ["tokens", ao.HEADS_Q, ao.HEAD_DIM]
    names = {"out": "out", "q": "q", "kv": "kv", "table": "table", "seq": "seq", "cuq": "cuq"}
    m = {
        "schema_version": 4,
        "model": "kernrt-attention-integration",
        "vars": {"tokens": {"max": seqs}, "seqs": {"max": seqs}},
        "buffers": {
            "q": {"dtype": "bf16", "shape": rows, "kind": "input"},
            "kv": {"dtype": "bf16", "shape": [pool_pages, layers, ao.PAGE, ao.HEADS_KV, 2,
                                              ao.HEAD_DIM], "kind": "input"},
            "table": {"dtype": "i32", "shape": ["seqs", cap.max_pages], "kind": "input",
                      "domain": {"index_into": "kv"}},
            "seq": {"dtype": "i32", "shape": ["seqs"], "kind": "input",
                    "domain": {"min": 1, "max": max_context}},
            "cuq": {"dtype": "i32", "shape": [seqs + 1], "kind": "input",
                    "domain": {"min": 0, "max": "tokens", "monotone": True}},
            "out": {"dtype": "bf16", "shape": rows, "kind": "output"},
        },
        "modules": {launch.module: {"source": launch.source, "sha256": cubin_sha}},
        "ops": {op_name: body},
        "programs": {"decode": {"calls": [ao.call("decode", f"attn_layer_{layer}.decode", layer,
                                                  names, kv_form=kv_form)]}},
    }
    if kv_form == "state":
        del m["buffers"]["kv"]
        m["states"] = {"kv": {"bytes_per_token": layers * KV_BYTES_PER_TOKEN_LAYER}}
        m["buffers"]["table"]["domain"] = {"index_into": "kv", "stride": ao.PAGE}
    return m, cap


def tofile(t, path):
    t.contiguous().cpu().view(torch.uint8).numpy().tofile(path)


def run_case(args, rec, name, lens, layers, layer, graph_iters, seed, paged_state=False):
    seqs = len(lens)
    pages = [(n + 63) // 64 for n in lens]
    max_context = max(64, ((max(lens) + 63) // 64) * 64)
    pool = sum(pages) + 3
    fx = H.Fixture(pool_pages=pool, layers=layers, seed=seed,
                   content_pages=min(PATTERN_PAGES, pool) if paged_state else None)
    bt = fx.batch(lens, layer, seed=seed + 1)
    ref = bt.reference()
    m, cap = manifest(seqs, max_context, layers, layer, pool, args.sha,
                      kv_form="state" if paged_state else "buf")
    work = os.path.join(args.work, f"case{seed}")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "m.json"), "w") as f:
        json.dump(m, f)
    tofile(bt.q, os.path.join(work, "q.bin"))
    tofile(fx.kv, os.path.join(work, "kv.bin"))
    kv_args = (["--tokens", str(pool * ao.PAGE), "--fill", f"kv={os.path.join(work, 'kv.bin')}"]
               if paged_state else ["--in", f"kv={os.path.join(work, 'kv.bin')}"])
    tofile(bt.table[:, :cap.max_pages], os.path.join(work, "table.bin"))
    tofile(bt.seq_lens, os.path.join(work, "seq.bin"))
    tofile(torch.arange(seqs + 1, dtype=torch.int32), os.path.join(work, "cuq.bin"))
    content_pages = fx.content_pages
    del fx
    torch.cuda.empty_cache()
    ok = True
    modes = [("eager", [])] + ([("graph", ["--graph", "--iters", str(graph_iters)])]
                               if graph_iters else [])
    for mode, extra in modes:
        out_path = os.path.join(work, f"out_{mode}.bin")
        cmd = [args.program_io, "--manifest", os.path.join(work, "m.json"), "--cubins",
               args.cubins, "--vars", f"seqs={seqs}", "--vars", f"tokens={seqs}"] + extra
        for b in ("q", "table", "seq", "cuq"):
            cmd += ["--in", f"{b}={os.path.join(work, b + '.bin')}"]
        cmd += kv_args + ["--out", f"out={out_path}"]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        log(f"program_io {mode} rc={p.returncode} in {time.time() - t0:.1f}s: "
            f"{(p.stdout + p.stderr).strip()[-400:]}")
        case = f"program_io {mode}{' x' + str(graph_iters) if extra else ''}: {name}"
        if p.returncode != 0:
            rec.add(case=case, kind="check", vs="float32 reference", gate=GATE, **{"pass": False},
                    note=(p.stdout + p.stderr).strip()[-300:])
            ok = False
            continue
        raw = torch.from_file(out_path, dtype=torch.bfloat16, size=seqs * ao.HEADS_Q * ao.HEAD_DIM)
        out = raw.view(seqs, ao.HEADS_Q, ao.HEAD_DIM).cuda()
        finite, rel, mx = H.errors(out, ref)
        good = finite and rel < GATE and mx < GATE
        timing = re.search(r"median ([0-9.]+) us", p.stdout)
        extra_fields = {"program_io_median_us": float(timing.group(1))} if timing else {}
        if paged_state:
            extra_fields.update(kv_state_bytes=pool * layers * H.LAYER_PAGE_BYTES,
                                pattern_pages=content_pages)
        rec.add(case=case, kind="check", vs="float32 reference", error=rel, max_abs=mx,
                finite=finite, gate=GATE, batch=seqs, kv_tokens=sum(lens), **extra_fields,
                **{"pass": good})
        log(f"{'PASS' if good else 'FAIL'} {case}: rel_l2={rel:.3e} max_abs={mx:.3e}")
        ok &= good
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program-io", required=True)
    ap.add_argument("--cubins", required=True)
    ap.add_argument("--work", default="/tmp/pio")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--long", action="store_true",
                    help="add the batch 1-32 cases at 150k-250k with the KV as a paged state")
    ap.add_argument("--long-batches", default="1,2,4,8,16,32")
    ap.add_argument("--long-iters", type=int, default=100, help="graph replays of a long case")
    args = ap.parse_args()
    args.sha = sha256(os.path.join(args.cubins, "attention_decode.sm90a.cubin"))
    rec = Recorder(args.out, args.commit)
    gen = torch.Generator().manual_seed(77)
    cases = [
        ("seed example shape: lens [385, 641], 2-layer KV, layer 1", [385, 641], 2, 1, 1000),
        ("page boundaries + length 1: [1, 63, 64, 65, 127, 128, 129, 4097], layer 1/2",
         [1, 63, 64, 65, 127, 128, 129, 4097], 2, 1, 1000),
        ("16-layer stride (page 4 MiB), layer 15, lens [700, 1300, 2117, 6400]",
         [700, 1300, 2117, 6400], 16, 15, 0),
        ("ragged batch 32 (1..3000), randomized disjoint pages, layer 0/2",
         torch.randint(1, 3001, (32,), generator=gen).tolist(), 2, 0, 1000),
    ]
    ok = True
    for i, (name, lens, layers, layer, iters) in enumerate(cases):
        ok &= run_case(args, rec, name, lens, layers, layer, iters, seed=31 + i)
    if args.long:
        for i, b in enumerate(int(x) for x in args.long_batches.split(",")):
            lens = bench_lens(b)
            name = (f"batch {b} lens {min(lens)}-{max(lens)}, KV as a paged state "
                    f"(--tokens, --fill), layer 0/1")
            ok &= run_case(args, rec, name, lens, 1, 0, args.long_iters, seed=61 + i,
                           paged_state=True)
    print("PROGRAM_IO ALL PASS" if ok else "PROGRAM_IO SOME CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
