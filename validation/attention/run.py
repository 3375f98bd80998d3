"""Decode attention on the H200 through the product path: correctness and speed vs FlashInfer.

Owns the family's device run. Every launch of ours goes through libkernrt: manifests come from
kernrt.gen.attention_manifest (pinned to the build's cubin), kernrt.load loads them, inputs are
written in place through the runtime's buffer views, the paged KV lives in the runtime's `kv`
state (filled with random bf16 in place), and programs are enqueued on torch's stream. Checks
(float32 torch reference; gates finite, rel L2 < 0.02, max abs < 0.02): page boundaries and
length 1, ragged batches (16, 200 sequences), peaky softmax, the seed example's lengths, pages
in order, empty sequences, equal lengths (4 x 8191, 100 x 64, 7 x 1: the kernel's static
plans), the 16-layer page stride (ragged and equal), splits 1 / 38 / shipped, and 1000
replays of the runtime's graph (ragged 12, equal 32 x 4095); every --variant entry runs the same
small cases. Benchmark: batch 1..32 at average KV 200k (batch 1 exactly 200k, batch > 1 evenly
150k-250k, not multiples of 64) and short-context probes (BxN), ours and FlashInfer 0.7.2.post1
(tensor-core paged decode on the same K/V views) in this process, each a CUDA graph of one
decode (ours: the runtime's own graph, replayed with rt.enqueue(graph=True); FlashInfer:
torch.cuda.graph), replays timed with events, rounds in alternating order, medians.
Then runs kv_append_check.py and program_io_check.py (the integration cases through the
product's CLI; --long adds batch 1-32 at 150k-250k) into the same directory. Writes
OUT/attention.jsonl, OUT/kv_append.jsonl, OUT/program_io.jsonl and prints a table last.
With --base STEM (another decode cubin in the build's cubins/run, e.g. the previous kernel that
KERNRT_BUILD_VARIANTS builds as attention_decode_base.sm90a) that cubin's shipped entry runs as
variant `base`, checked and timed like a --variant. Variants are checked before and after
their timing at every benchmark batch (their counters must come back to zero every replay).
Deliberately does not check: the old harness (gone; git history holds it).
"""
import argparse
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


def load_decode(cubins, max_seqs, layers, pool_pages, splits=None, max_context=262144, entry=None,
                variants=None):
    geometry = ao.load_geometry()
    if entry:  # a variant entry of the same cubin (a template instance of the shipped kernel)
        geometry = dict(geometry, entry=entry)
    m = am.decode_manifest(max_seqs, max_context, layers, geometry=geometry, splits=splits,
                           variants=variants)
    return kernrt.load(pin(m, cubins), cubins=[cubins], tokens=pool_pages * ao.PAGE)


def variant_overrides(args):
    """name -> geometry overrides: --variant entries of the shipped cubin, --base's cubin."""
    v = {}
    for spec in args.variant:
        name, entry = spec.split("=", 1)
        v[name] = {"entry": entry}
    if args.base:
        v["base"] = {"cubin": args.base + ".cubin"}
    return v


def run_ours(rt, bt, graph=False, poison=True):
    out = rt.buffer("out")
    if poison:
        out.fill_(float("nan"))
    bt.write(rt)
    rt.enqueue(f"decode_l{bt.layer}", graph=graph, vars=bt.vars())
    torch.cuda.synchronize()
    return out[:bt.bsz]


def run_variant(rt, bt, name):
    out = rt.buffer("out")
    out.fill_(float("nan"))
    rt.enqueue(f"decode_l{bt.layer}_{name}", graph=True, vars=bt.vars())
    torch.cuda.synchronize()
    return out[:bt.bsz].clone()


def gate(rec, case, out, ref, vs="float32 reference"):
    finite, rel, mx = bench.errors(out, ref)
    return rec.check(case, finite and rel < GATE and mx < GATE, vs=vs, error=rel, max_abs=mx,
                     finite=finite, gate=GATE)


def small_cases(rec, cubins, shipped_splits, entry=None, tag=""):
    """The small cases through `entry` (None: the shipped one); case names start with `tag`."""
    ok = True
    rts = {sp: load_decode(cubins, 200, 2, 8192, splits=sp, entry=entry)
           for sp in sorted({shipped_splits, 1, 38})}
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
        ("equal lengths 4 x 8191, layer 1/2", [8191] * 4, 1, 1.0, {}),
        ("equal lengths 100 x 64, layer 0/2", [64] * 100, 0, 1.0, {}),
        ("equal lengths 7 x 1, layer 1/2", [1] * 7, 1, 1.0, {}),
    ]
    for name, lens, layer, qs, opt in cases:
        if lens is None:
            lens = torch.randint(1, opt.get("max", 20000) + 1, (opt["ragged"],), generator=gen).tolist()
        for sp, rt in rts.items():
            bt = Batch(kvs[sp], lens, layer, seed=len(name), q_scale=qs,
                       contiguous_pages=opt.get("contiguous", False))
            ok &= gate(rec, f"{tag}{name}, splits {sp}", run_ours(rt, bt), bt.reference())
    # 1000 replays of the runtime's graph (the merge counters must come back to zero each time,
    # or later replays would merge stale partials).
    # Ragged lengths (stealing), then equal ones (the kernel's static plans).
    rt, kv = rts[shipped_splits], kvs[shipped_splits]
    ragged = torch.randint(1, 30001, (12,), generator=gen).tolist()
    for what, lens in (("ragged 12", ragged), ("equal 32 x 4095", [4095] * 32)):
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
        ok &= rec.check(f"{tag}runtime graph replay x1000, {what}, splits {shipped_splits}",
                        worst < GATE, error=worst, gate=GATE)
        if what == "ragged 12":
            # The split merge's order follows the CTAs' timing, so two launches may differ in
            # the last bits (kernels/attention/README.md): eager and graph agree within bf16
            # rounding of each other, not bit for bit.
            eager = run_ours(rt, bt).clone()
            graph = run_ours(rt, bt, graph=True)
            _, rel, mx = bench.errors(graph, eager.float())
            ok &= rec.check(f"{tag}graph replay agrees with eager (within bf16 rounding)",
                            rel < 4e-3, error=rel, max_abs=mx, gate=4e-3)
    for r in rts.values():
        r.close()
    del rts, kvs
    torch.cuda.empty_cache()
    # The model geometry: 16 interleaved layers (page stride 4 MiB), last layer.
    rt = load_decode(cubins, 4, 16, 300, entry=entry)
    kv = kv_view(rt, 16)
    fill_random(kv, seed=12)
    for lens in ([700, 1300, 64 * 33 + 5, 64 * 100], [64 * 33 + 5] * 4):
        bt = Batch(kv, lens, 15, seed=3)
        ok &= gate(rec, f"{tag}16-layer stride, layer 15, lens {bt.lens}", run_ours(rt, bt),
                   bt.reference())
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
    ap.add_argument("--no-integration", action="store_true",
                    help="skip kv_append_check.py and program_io_check.py")
    ap.add_argument("--long", action="store_true", help="program_io at 150k-250k too")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ENTRY",
                    help="also check and time this entry of the decode cubin (a template "
                         "instance), side by side with the shipped one")
    ap.add_argument("--base", metavar="STEM",
                    help="also check and time the shipped entry of cubins/run/STEM.cubin (e.g. "
                         "attention_decode_base.sm90a) as variant `base`")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cubins = bench.use_build(args.build)
    rec = bench.Recorder(os.path.join(args.out, "attention.jsonl"), "attention", args.commit)
    peer_proc = None if args.no_peer else start_peer_warmup(args.out)
    ceilings = bench.floors(rec, skip_gemm=True)
    shipped = ao.default_splits("h200")
    ok = True
    if not args.skip_checks:
        ok &= small_cases(rec, cubins, shipped)
        for spec in args.variant:
            name, entry = spec.split("=", 1)
            ok &= small_cases(rec, cubins, shipped, entry=entry, tag=f"[{name}] ")
        log("small cases:", "PASS" if ok else "FAIL")

    batches = args.batches.split(",")
    max_b = max(len(lens_of(x)) for x in batches)
    pool = max(sum((n + 63) // 64 for n in lens_of(x)) for x in batches) + 64
    # Variants are ops of the same manifest over the same buffers and KV state (programs
    # decode_l1_<name>), so every contender reads the very same pages, timed the same way.
    variants = variant_overrides(args)
    rt = load_decode(cubins, max_b, 2, pool, variants=variants)
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
        for name in variants:
            vout = run_variant(rt, bt, name)
            ok &= gate(rec, f"[{name}] decode {lab} KV {min(bt.lens)}-{max(bt.lens)}", vout, ref)
            contenders[name] = (lambda n: lambda: rt.enqueue(f"decode_l1_{n}", graph=True,
                                                             vars=bt.vars()))(name)
        run_ours(rt, bt, graph=True)  # `out` holds the shipped entry's result again
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
        for name in variants:  # its counters came back to zero every replay
            ok &= gate(rec, f"[{name}] decode {lab} after timing", run_variant(rt, bt, name), ref)
        ok &= gate(rec, f"decode {lab} after timing", run_ours(rt, bt, graph=True), ref)
        floor = bt.kv_bytes / ceilings["copy_Bps"] * 1e6
        row = dict(case=f"decode {lab} avg KV {sum(bt.lens) // bt.bsz} single layer", kind="bench",
                   ours_us=med["ours"], floor_us=floor, frac_of_floor=floor / med["ours"],
                   batch=bt.bsz, kv_lens=[min(bt.lens), max(bt.lens)], splits=shipped,
                   replays=args.iters * args.rounds, path="kernrt.Runtime.enqueue(graph=True)")
        if "peer" in med:
            row.update(peer=f"flashinfer {fi.__version__} tensor-core decode (torch graph)",
                       peer_us=med["peer"], speedup_vs_peer=med["peer"] / med["ours"])
        table.append(rec.add(**row))
        for name in variants:
            rec.add(case=f"[{name}] decode {lab}", kind="bench", variant=name, ours_us=med[name],
                    floor_us=floor, frac_of_floor=floor / med[name], batch=bt.bsz,
                    vs_shipped=med["ours"] / med[name],
                    **({"peer_us": med["peer"], "speedup_vs_peer": med["peer"] / med[name]}
                       if "peer" in med else {}))
            log(f"[{name}] {lab}: {med[name]:.1f} us (shipped {med['ours']:.1f})")
        del peer, contenders
        torch.cuda.empty_cache()

    print("\n| batch | KV lens | ours us | flashinfer us | floor us | % floor | vs FI |")
    print("|---|---|---|---|---|---|---|")
    for r in table:
        print(f"| {r['batch']} | {r['kv_lens'][0]}-{r['kv_lens'][1]} | {r['ours_us']:.1f} | "
              f"{r.get('peer_us', float('nan')):.1f} | {r['floor_us']:.1f} | "
              f"{r['frac_of_floor'] * 100:.1f} | {r.get('speedup_vs_peer', float('nan')):.3f} |")
    if fi is None:
        print("peer missing:", reason)
    rt.close()
    del kv
    torch.cuda.empty_cache()
    if not args.no_integration:
        ok &= integration(args)
    print("ATTENTION ALL PASS" if ok else "ATTENTION SOME CHECK FAILED")
    return 0 if ok else 1


def integration(args):
    """KV append and program_io in their own processes (so the decode's memory is free)."""
    cubins = os.path.join(args.build, "cubins", "run")
    jobs = [[sys.executable, os.path.join(HERE, "kv_append_check.py"), "--build", args.build,
             "--out", os.path.join(args.out, "kv_append.jsonl"), "--commit", args.commit],
            [sys.executable, os.path.join(HERE, "program_io_check.py"), "--program-io",
             os.path.join(args.build, "bin", "program_io"), "--cubins", cubins,
             "--out", os.path.join(args.out, "program_io.jsonl"), "--commit", args.commit]
            + (["--long"] if args.long else [])]
    ok = True
    for cmd in jobs:
        p = subprocess.run(cmd, capture_output=True, text=True)
        tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
        log(f"{os.path.basename(cmd[1])}: exit {p.returncode}: " + " | ".join(tail))
        ok &= p.returncode == 0
    return ok


if __name__ == "__main__":
    sys.exit(main())
