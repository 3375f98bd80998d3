"""Decode attention on the H200 through the product path: correctness and speed vs FlashInfer.

Owns the family's device run. Every launch of ours goes through libkernrt: manifests come from
kernrt.gen.attention_manifest (pinned to the build's cubin), kernrt.load loads them, inputs are
written in place through the runtime's buffer views, the paged KV lives in the runtime's `kv`
state (filled with random bf16 in place), and programs are enqueued on torch's stream. Checks
(float32 torch reference; gates finite, rel L2 < 0.02, max abs < 0.02): page boundaries and
length 1, ragged batches (16, 200 sequences), peaky softmax, the seed example's lengths,
pages in order, empty sequences, the 16-layer page stride, splits 1 / 38 / shipped, and 1000
replays of the runtime's graph. Benchmark: batch 1..32 at average KV 200k (batch 1 exactly
200k, batch > 1 evenly 150k-250k, not multiples of 64) and short-context probes (BxN), ours and
FlashInfer 0.7.2.post1 (tensor-core paged decode on the same K/V views) in this process, each
a CUDA graph of one decode (ours: the runtime's own graph, replayed with rt.enqueue(graph=True);
FlashInfer: torch.cuda.graph), replays timed with events, rounds in alternating order, medians.
With --base STEM (a second decode cubin in the build's cubins/run, e.g. the previous kernel
built by KERNRT_BUILD_VARIANTS as attention_decode_base.sm90a) the benchmark also checks and
times that kernel in the same manifest (its own op over the same buffers and KV state) as a
third contender, `base`.
Writes OUT/attention.jsonl (one row per case) and prints a table last.
Deliberately does not check: program_io (program_io_check.py) or KV append (kv_append_check.py).
"""
import argparse
import copy
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import bench  # noqa: E402  (also puts runtime/python on sys.path)
import torch  # noqa: E402

import kernrt  # noqa: E402
from fixture import Batch, fill_random, kv_view  # noqa: E402
from kernrt.gen import attention as ao  # noqa: E402
from kernrt.gen import attention_manifest as am  # noqa: E402
from kernrt.gen import pin  # noqa: E402

GATE = 0.02
log = bench.log


def with_base(m, stem):
    """`m` plus the module `<module>_base` (cubin <stem>.cubin), the op `attn_decode_base` that
    launches it, and a program `decode_l<i>_base` per layer: the same calls on the same buffers
    and KV state, another kernel."""
    m = copy.deepcopy(m)
    (module, _), = m["modules"].items()
    m["modules"][module + "_base"] = {"source": stem + ".cubin", "sha256": f"@SHA256:{stem}@"}
    body = copy.deepcopy(m["ops"]["attn_decode"])
    for launch in body["impl"]["launches"]:
        launch["module"] = module + "_base"
    m["ops"]["attn_decode_base"] = body
    for name, prog in list(m["programs"].items()):
        m["programs"][name + "_base"] = {
            "calls": [dict(c, op="attn_decode_base", label=c["label"] + "_base")
                      for c in prog["calls"]]}
    return m


def load_decode(cubins, max_seqs, layers, pool_pages, splits=None, max_context=262144, base=None):
    m = am.decode_manifest(max_seqs, max_context, layers, splits=splits)
    if base:
        m = with_base(m, base)
    return kernrt.load(pin(m, cubins), cubins=[cubins], tokens=pool_pages * ao.PAGE)


def run_ours(rt, bt, graph=False, poison=True, program=""):
    out = rt.buffer("out")
    if poison:
        out.fill_(float("nan"))
    bt.write(rt)
    rt.enqueue(f"decode_l{bt.layer}{program}", graph=graph, vars=bt.vars())
    torch.cuda.synchronize()
    return out[:bt.bsz]


def gate(rec, case, out, ref, vs="float32 reference"):
    finite, rel, mx = bench.errors(out, ref)
    return rec.check(case, finite and rel < GATE and mx < GATE, vs=vs, error=rel, max_abs=mx,
                     finite=finite, gate=GATE)


def small_cases(rec, cubins, shipped_splits):
    ok = True
    rts = {sp: load_decode(cubins, 200, 2, 8192, splits=sp) for sp in sorted({shipped_splits, 1, 38})}
    kvs = {sp: kv_view(rt, 2) for sp, rt in rts.items()}
    for sp, kv in kvs.items():
        fill_random(kv, seed=11)
    bounds = [1, 63, 64, 65, 127, 128, 129, 191, 192, 4095, 4096, 4097]
    gen = torch.Generator().manual_seed(5)
    cases = [
        ("page boundaries + length 1, layer 1/2", bounds, 1, 1.0, {}),
        ("ragged batch 16 (1..20000), layer 0/2", None, 0, 1.0, {"ragged": 16}),
        ("peaky softmax q*8, ragged 8, layer 1/2", None, 1, 8.0, {"ragged": 8}),
        ("seed decode example lens [385, 641], layer 1/2", [385, 641], 1, 1.0, {}),
        ("pages in order lens [5000, 3], layer 1/2", [5000, 3], 1, 1.0, {"contiguous": True}),
        ("empty sequences (length 0) in a batch [0, 100, 0, 70]", [0, 100, 0, 70], 1, 1.0, {}),
        ("ragged batch 200 (1..3000), layer 0/2", None, 0, 1.0, {"ragged": 200, "max": 3000}),
    ]
    for name, lens, layer, qs, opt in cases:
        if lens is None:
            lens = torch.randint(1, opt.get("max", 20000) + 1, (opt["ragged"],), generator=gen).tolist()
        for sp, rt in rts.items():
            bt = Batch(kvs[sp], lens, layer, seed=len(name), q_scale=qs,
                       contiguous_pages=opt.get("contiguous", False))
            ok &= gate(rec, f"{name}, splits {sp}", run_ours(rt, bt), bt.reference())
    # 1000 replays of the runtime's graph (the merge counters must come back to zero each time,
    # or later replays would merge stale partials).
    rt, kv = rts[shipped_splits], kvs[shipped_splits]
    lens = torch.randint(1, 30001, (12,), generator=gen).tolist()
    bt = Batch(kv, lens, 1, seed=99)
    ref = bt.reference()
    out = run_ours(rt, bt, graph=True)
    worst = 0.0
    for i in range(1000):
        if i % 250 == 0:
            out.fill_(float("nan"))
        rt.enqueue("decode_l1", graph=True, vars=bt.vars())
        if i % 250 == 249:
            torch.cuda.synchronize()
            finite, rel, _ = bench.errors(out, ref)
            worst = max(worst, rel if finite else float("inf"))
    ok &= rec.check(f"runtime graph replay x1000, ragged 12, splits {shipped_splits}", worst < GATE,
                    error=worst, gate=GATE)
    eager = run_ours(rt, bt).clone()
    graph = run_ours(rt, bt, graph=True)
    ok &= rec.check("graph replay bit-identical to eager", torch.equal(eager.view(torch.int16),
                                                                        graph.view(torch.int16)))
    for r in rts.values():
        r.close()
    del rts, kvs
    torch.cuda.empty_cache()
    # The model geometry: 16 interleaved layers (page stride 4 MiB), last layer.
    rt = load_decode(cubins, 4, 16, 300)
    kv = kv_view(rt, 16)
    fill_random(kv, seed=12)
    bt = Batch(kv, [700, 1300, 64 * 33 + 5, 64 * 100], 15, seed=3)
    ok &= gate(rec, f"16-layer stride, layer 15, lens {bt.lens}", run_ours(rt, bt), bt.reference())
    rt.close()
    return ok


def bench_lens(b):
    if b == 1:
        return [200000]
    step = 100000 / (b - 1)
    return [int(round(150000 + i * step)) + (i % 3) * 17 for i in range(b)]


def lens_of(spec):
    if "x" in spec:
        b, n = spec.split("x")
        return [int(n)] * int(b)
    return bench_lens(int(spec))


def start_peer_warmup(out_dir):
    """FlashInfer's import (and any JIT build) in its own process, overlapping our checks."""
    cmd = [sys.executable, os.path.join(HERE, "warm_flashinfer.py")]
    return subprocess.Popen(cmd, stdout=open(os.path.join(out_dir, "fi_warm.log"), "w"),
                            stderr=subprocess.STDOUT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory (cubins/run)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--batches", default="1,2,4,8,16,32,128x1024,32x2048,4x8192")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--peer-deadline", type=float, default=240.0)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--skip-checks", action="store_true", help="benchmark only")
    ap.add_argument("--base", help="also time this decode cubin (stem in cubins/run, e.g. "
                                   "attention_decode_base.sm90a) as contender `base`")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cubins = os.path.join(args.build, "cubins", "run")
    rec = bench.Recorder(os.path.join(args.out, "attention.jsonl"), "attention", args.commit)
    peer_proc = None if args.no_peer else start_peer_warmup(args.out)
    ceilings = bench.floors(rec, skip_gemm=True)
    shipped = ao.default_splits("h200")
    ok = True
    if not args.skip_checks:
        ok &= small_cases(rec, cubins, shipped)
        log("small cases:", "PASS" if ok else "FAIL")

    batches = args.batches.split(",")
    max_b = max(len(lens_of(x)) for x in batches)
    pool = max(sum((n + 63) // 64 for n in lens_of(x)) for x in batches) + 64
    rt = load_decode(cubins, max_b, 2, pool, base=args.base)
    kv = kv_view(rt, 2)
    fill_random(kv, seed=21)
    log(f"benchmark pool: {pool} pages x 2 layers = {kv.numel() * 2 / 1e9:.1f} GB in the runtime's kv state")

    fi, reason = None, "--no-peer"
    if peer_proc is not None:
        deadline = bench.T0 + args.peer_deadline
        while peer_proc.poll() is None and time.time() < deadline:
            time.sleep(2)
        if peer_proc.poll() is None:
            peer_proc.kill()
            reason = "flashinfer warm-up still running at the deadline"
        elif peer_proc.returncode != 0:
            reason = f"flashinfer warm-up exit {peer_proc.returncode} (fi_warm.log)"
        else:
            try:
                import peer_flashinfer as P
                fi = P.import_flashinfer()
                reason = ""
            except Exception as e:
                reason = f"flashinfer import failed: {e!r}"
        log("flashinfer:", fi.__version__ if fi else reason)

    table = []
    for x in batches:
        bt = Batch(kv, lens_of(x), 1, seed=100 + len(x))
        lab = f"B{bt.bsz}" + (f" x{x.split('x')[1]}" if "x" in x else "")
        ref = bt.reference()
        out = run_ours(rt, bt, graph=True)
        ok &= gate(rec, f"decode {lab} KV {min(bt.lens)}-{max(bt.lens)}", out, ref)
        contenders = {"ours": lambda: rt.enqueue("decode_l1", graph=True, vars=bt.vars())}
        if args.base:
            out_base = run_ours(rt, bt, graph=True, program="_base")
            ok &= gate(rec, f"decode {lab} base {args.base}", out_base, ref)
            contenders["base"] = lambda: rt.enqueue("decode_l1_base", graph=True, vars=bt.vars())
            out = run_ours(rt, bt, graph=True)
        peer = None
        if fi is not None:
            import peer_flashinfer as P
            peer = P.FlashInferDecode(fi, bt)
            peer.run()
            torch.cuda.synchronize()
            ok &= gate(rec, f"decode {lab} flashinfer", peer.out, ref)
            ok &= gate(rec, f"decode {lab} ours vs flashinfer", out, peer.out.float(), vs="flashinfer")
            g = bench.torch_graph(peer.run)
            contenders["peer"] = g.replay
        med = bench.interleaved(contenders, args.iters, args.rounds)
        ok &= gate(rec, f"decode {lab} after timing", out, ref)
        floor = bt.kv_bytes / ceilings["copy_Bps"] * 1e6
        row = dict(case=f"decode {lab} avg KV {sum(bt.lens) // bt.bsz} single layer", kind="bench",
                   ours_us=med["ours"], floor_us=floor, frac_of_floor=floor / med["ours"],
                   batch=bt.bsz, kv_lens=[min(bt.lens), max(bt.lens)], splits=shipped,
                   replays=args.iters * args.rounds, path="kernrt.Runtime.enqueue(graph=True)")
        if "base" in med:
            row.update(base=args.base, base_us=med["base"], speedup_vs_base=med["base"] / med["ours"])
        if "peer" in med:
            row.update(peer=f"flashinfer {fi.__version__} tensor-core decode (torch graph)",
                       peer_us=med["peer"], speedup_vs_peer=med["peer"] / med["ours"])
        table.append(rec.add(**row))
        del peer, contenders
        torch.cuda.empty_cache()

    print("\n| batch | KV lens | ours us | base us | flashinfer us | floor us | % floor | vs base "
          "| vs FI |")
    print("|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for r in table:
        print(f"| {r['batch']} | {r['kv_lens'][0]}-{r['kv_lens'][1]} | {r['ours_us']:.1f} | "
              f"{r.get('base_us', nan):.1f} | {r.get('peer_us', nan):.1f} | {r['floor_us']:.1f} | "
              f"{r['frac_of_floor'] * 100:.1f} | {r.get('speedup_vs_base', nan):.3f} | "
              f"{r.get('speedup_vs_peer', nan):.3f} |")
    if fi is None:
        print("peer missing:", reason)
    print("ATTENTION ALL PASS" if ok else "ATTENTION SOME CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
