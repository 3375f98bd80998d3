"""The attention integration cases through program_io with generated manifests.

Owns: running build/bin/program_io (the product's CLI) on complete decode manifests from
kernrt.gen.attention_manifest (pinned to the cubin under --cubins; the KV a paged state sized
with --tokens and filled with --fill), with raw inputs written here (random bf16 Q, random
disjoint page tables, ragged lengths), in eager and CUDA-graph mode (1000 replays where
asked), and gating the output against the float32 torch reference: finite, rel L2 < 0.02,
max abs < 0.02. The long cases (--long: batch 1..32 at 150k-250k, 0.8-26 GB of KV) fill the
pool from a pattern of PATTERN_PAGES random pages that repeats (physical page p holds
pattern page p % PATTERN_PAGES; the reference reads the same repetition).
One JSONL line per case. Deliberately does not check: timings (run.py times the decode).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import bench  # noqa: E402  (puts runtime/python on sys.path)
import torch  # noqa: E402

from fixture import DIM, HEADS_KV, HEADS_Q, PAGE, Batch, fill_random  # noqa: E402
from kernrt.gen import attention_manifest as am  # noqa: E402
from kernrt.gen import pin  # noqa: E402
from run import GATE, bench_lens  # noqa: E402

log = bench.log
PATTERN_PAGES = 509  # prime, so pages a wrong index could reach almost never repeat content


def tofile(t, path):
    t.contiguous().cpu().view(torch.uint8).numpy().tofile(path)


def run_case(args, rec, name, lens, layers, layer, graph_iters, seed, repeat=False):
    seqs = len(lens)
    max_context = max(64, ((max(lens) + 63) // 64) * 64)
    pool = sum((n + 63) // 64 for n in lens) + 3
    content = min(PATTERN_PAGES, pool) if repeat else pool
    kv = torch.empty((content, layers, PAGE, HEADS_KV, 2, DIM), dtype=torch.bfloat16, device="cuda")
    fill_random(kv, seed)
    bt = Batch(kv, lens, layer, seed=seed + 1, max_pages=max_context // 64, pool_pages=pool)
    ref = bt.reference()
    work = os.path.join(args.work, f"case{seed}")
    os.makedirs(work, exist_ok=True)
    m = pin(am.decode_manifest(seqs, max_context, layers), args.cubins)
    with open(os.path.join(work, "m.json"), "w") as f:
        json.dump(m, f)
    tofile(bt.q, os.path.join(work, "q.bin"))
    tofile(kv, os.path.join(work, "kv.bin"))
    tofile(bt.table, os.path.join(work, "table.bin"))
    tofile(bt.seq_lens, os.path.join(work, "seq.bin"))
    tofile(torch.arange(seqs + 1, dtype=torch.int32), os.path.join(work, "cuq.bin"))
    del kv
    torch.cuda.empty_cache()
    ok = True
    modes = [("eager", [])] + ([("graph", ["--graph", "--iters", str(graph_iters)])] if graph_iters else [])
    for mode, extra in modes:
        out_path = os.path.join(work, f"out_{mode}.bin")
        cmd = [args.program_io, "--manifest", os.path.join(work, "m.json"), "--cubins", args.cubins,
               "--program", f"decode_l{layer}", "--vars", f"seqs={seqs}", "--vars", f"tokens={seqs}",
               "--tokens", str(pool * PAGE), "--fill", f"kv={os.path.join(work, 'kv.bin')}"] + extra
        for b in ("q", "table", "seq", "cuq"):
            cmd += ["--in", f"{b}={os.path.join(work, b + '.bin')}"]
        cmd += ["--out", f"out={out_path}"]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        log(f"program_io {mode} rc={p.returncode} in {time.time() - t0:.1f}s: "
            f"{(p.stdout + p.stderr).strip()[-300:]}")
        case = f"program_io {mode}{' x' + str(graph_iters) if extra else ''}: {name}"
        if p.returncode != 0:
            ok &= rec.check(case, False, note=(p.stdout + p.stderr).strip()[-300:])
            continue
        raw = torch.from_file(out_path, dtype=torch.bfloat16, size=seqs * HEADS_Q * DIM)
        out = raw.view(seqs, HEADS_Q, DIM).cuda()
        finite, rel, mx = bench.errors(out, ref)
        timing = re.search(r"median ([0-9.]+) us", p.stdout)
        more = {"program_io_median_us": float(timing.group(1))} if timing else {}
        ok &= rec.check(case, finite and rel < GATE and mx < GATE, vs="float32 reference", error=rel,
                        max_abs=mx, finite=finite, gate=GATE, batch=seqs, kv_tokens=sum(lens),
                        pattern_pages=content, **more)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program-io", required=True)
    ap.add_argument("--cubins", required=True)
    ap.add_argument("--work", default="/tmp/pio")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--long", action="store_true", help="add batch 1-32 at 150k-250k")
    ap.add_argument("--long-batches", default="1,2,4,8,16,32")
    ap.add_argument("--long-iters", type=int, default=100, help="graph replays of a long case")
    args = ap.parse_args()
    rec = bench.Recorder(args.out, "attention", args.commit)
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
            name = f"batch {b} lens {min(lens)}-{max(lens)}, KV pattern-filled (--tokens, --fill), layer 0/1"
            ok &= run_case(args, rec, name, lens, 1, 0, args.long_iters, seed=61 + i, repeat=True)
    print("PROGRAM_IO ALL PASS" if ok else "PROGRAM_IO SOME CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
