"""Validation and benchmark of kernrt's sm90 paged decode attention on the H200.

Owns the device run: correctness cases (page boundaries, length 1, splits > pages, nonzero
layer offsets at the 2-layer and 16-layer strides, ragged batches, randomized disjoint pages,
peaky softmax, 1000 graph replays with the counter left at zero) against a float32 torch
reference; then batch 1..32 at average KV 200k (batch 1 exactly 200k, batch > 1 spanning
150k-250k), each checked against the reference and FlashInfer and timed side by side under
CUDA graph replay (median of CUDA-event-timed replays, --rounds rounds with the order of the
contenders reversed every other round; every replay streams >= 600 MB of KV, 10x the 60 MB
L2). Writes one JSONL line per case and a table.
Deliberately does not check: anything about program_io (program_io_check.py runs the
manifest path separately), or FlashInfer's availability: without it the peer columns are
left out and the reason is printed.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import torch

import attn_harness as H

GATE = 0.02
FLOOR_BPS = 4.275e12
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def gpu_serial():
    """The board's serial number: ratios near 1.0 move by ~1 % from one lent H200 to the next
    (notes.md, runs 9-11), so every row says which machine measured it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=serial", "--format=csv,noheader", "-i",
                              "0"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


class Recorder:
    def __init__(self, path, commit):
        self.path, self.commit = path, commit
        self.base = {"date": datetime.date.today().isoformat(),
                     "gpu": torch.cuda.get_device_name(0), "gpu_serial": gpu_serial(),
                     "commit": commit, "family": "attention"}
        self.rows = []

    def add(self, **kw):
        row = dict(self.base)
        row.update(kw)
        self.rows.append(row)
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
        return row


def check(rec, case, out, ref, vs="float32 reference"):
    finite, rel, mx = H.errors(out, ref)
    ok = finite and rel < GATE and mx < GATE
    rec.add(case=case, kind="check", vs=vs, error=rel, max_abs=mx, finite=finite, gate=GATE,
            **{"pass": ok})
    log(f"{'PASS' if ok else 'FAIL'} {case} vs {vs}: rel_l2={rel:.3e} max_abs={mx:.3e} "
        f"finite={finite}")
    return ok


class Variant:
    """One build of our kernel: cubin, dynamic smem, threads per CTA, split count."""

    def __init__(self, spec):
        self.name, cubin, smem, threads, splits = spec.split(":")
        self.smem, self.threads, self.splits = int(smem), int(threads), int(splits)
        self.kernel = H.Kernel(cubin, "attention_decode_sm90a_bf16_q24kv4d256p64", self.smem)
        # A timing probe (name "probe-..."): a build that leaves a stage out on purpose, so
        # its results are wrong and are not checked: only its time is recorded.
        self.probe = self.name.startswith("probe")


def run_ours(var, batch, splits=None, poison=True):
    dec = H.Decode(var.kernel, batch, splits or var.splits, var.threads)
    if poison:
        dec.out.fill_(float("nan"))
    dec.run()
    torch.cuda.synchronize()
    return dec


def capture(fn):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def replay_times(g, iters):
    """CUDA-event time of `iters` replays of graph `g`, in us, after 3 warm-up replays."""
    for _ in range(3):
        g.replay()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(iters)]
    for s, e in ev:
        s.record()
        g.replay()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1000.0 for s, e in ev]


def timeline(dec):
    """Probe 3's stamps after one more launch: per partial (its CTA's entry, stream end, arrival,
    merge end or 0) as %globaltimer low words in stats rows 6-7; a summary in us from the first
    entry."""
    st = dec.stats.view(torch.int32).view(-1, 8, 2)  # [slot][row][max, sum]
    st[:, 6:8, :].zero_()
    dec.run()
    torch.cuda.synchronize()
    rows = st[:, 6, :].cpu().tolist()
    more = st[:, 7, :].cpu().tolist()
    stamps = [(a[0] & 0xFFFFFFFF, a[1] & 0xFFFFFFFF, b[0] & 0xFFFFFFFF, b[1] & 0xFFFFFFFF)
              for a, b in zip(rows, more) if a[0] != 0]
    if not stamps:
        return None
    ref = min(t[0] for t in stamps)

    def rel(t):
        return ((t - ref) & 0xFFFFFFFF) / 1000.0

    entry = sorted(rel(t[0]) for t in stamps)
    end = sorted(rel(t[1]) for t in stamps)
    arrive = sorted(rel(t[2]) for t in stamps)
    merges = [(rel(t[2]), rel(t[3])) for t in stamps if t[3] != 0]
    dur = sorted(b - a for a, b in merges)
    return dict(partials=len(stamps), entry_max=entry[-1], stream_end_min=end[0],
                stream_end_med=end[len(end) // 2], stream_end_max=end[-1],
                arrive_max=arrive[-1], merges=len(dur), merge_us_med=dur[len(dur) // 2],
                merge_us_max=dur[-1], last_merge_end=max(b for _, b in merges))


def small_cases(var, rec):
    splits = var.splits
    ok = True
    fx = H.Fixture(pool_pages=8192, layers=2, seed=11)
    bounds = [1, 63, 64, 65, 127, 128, 129, 191, 192, 4095, 4096, 4097]
    cases = [
        ("page boundaries + length 1 + empty splits, layer 1/2", bounds, 1, 1.0, {}),
        ("ragged batch 16 (1..20000), layer 0/2", None, 0, 1.0, {"ragged": 16}),
        ("peaky softmax q*8, ragged 8, layer 1/2", None, 1, 8.0, {"ragged": 8}),
        ("seed decode example lens [385, 641], layer 1/2", [385, 641], 1, 1.0, {}),
        ("pages in order (not shuffled) lens [5000, 3], layer 1/2", [5000, 3], 1, 1.0,
         {"contiguous": True}),
        ("empty sequences (length 0) in a batch [0, 100, 0, 70]", [0, 100, 0, 70], 1, 1.0, {}),
        # More sequences than the 128 that get start shares (v8: unit u starts at u * B / U).
        ("ragged batch 200 (1..3000), layer 0/2", None, 0, 1.0, {"ragged": 200, "max": 3000}),
    ]
    gen = torch.Generator().manual_seed(5)
    for name, lens, layer, qs, opt in cases:
        if lens is None:
            lens = torch.randint(1, opt.get("max", 20000) + 1, (opt["ragged"],),
                                 generator=gen).tolist()
        bt = fx.batch(lens, layer, seed=len(name), q_scale=qs,
                      contiguous_pages=opt.get("contiguous", False))
        ref = bt.reference()
        for sp in sorted({splits, 1, 38}):
            dec = run_ours(var, bt, sp)
            ok &= check(rec, f"[{var.name}] {name}, splits {sp}", dec.out, ref)
            zero = int(dec.counter.abs().sum().item()) == 0
            ok &= zero
            if not zero:
                log(f"FAIL counter not zero after {name} splits {sp}")
    del fx
    # The model geometry: 16 interleaved layers (page stride 4 MiB), last layer.
    fx16 = H.Fixture(pool_pages=300, layers=16, seed=12)
    bt = fx16.batch([700, 1300, 64 * 33 + 5, 64 * 100], 15, seed=3)
    ref = bt.reference()
    dec = run_ours(var, bt)
    ok &= check(rec, f"[{var.name}] 16-layer stride, layer 15, lens {bt.lens}, splits {splits}", dec.out, ref)
    # 1000 graph replays: the counter must come back to zero every time.
    fx = H.Fixture(pool_pages=8192, layers=2, seed=13)
    lens = torch.randint(1, 30001, (12,), generator=gen).tolist()
    bt = fx.batch(lens, 1, seed=99)
    ref = bt.reference()
    dec = H.Decode(var.kernel, bt, splits, var.threads)
    dec.out.fill_(float("nan"))
    g = torch.cuda.CUDAGraph()
    dec.run()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        dec.run()
    worst = 0.0
    for i in range(1000):
        if i % 250 == 0:
            dec.out.fill_(float("nan"))
        g.replay()
        if i % 250 == 249:
            torch.cuda.synchronize()
            finite, rel, mx = H.errors(dec.out, ref)
            worst = max(worst, rel if finite else float("inf"))
    zero = int(dec.counter.abs().sum().item()) == 0
    ok &= check(rec, f"[{var.name}] graph replay x1000 ragged 12, splits {splits} (counter zero: {zero})",
                dec.out, ref) and zero and worst < GATE
    return ok


def bench_lens(b):
    if b == 1:
        return [200000]
    step = 100000 / (b - 1)
    lens = [int(round(150000 + i * step)) for i in range(b)]
    return [n + (i % 3) * 17 for i, n in enumerate(lens)]  # not multiples of 64


def wait_peer(proc, deadline):
    while proc.poll() is None and time.time() < deadline:
        time.sleep(2)
    if proc.poll() is None:
        return False, "flashinfer JIT build still running at the deadline"
    return proc.returncode == 0, f"flashinfer warm-up exit {proc.returncode}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True,
                    help="name:cubin:smem:threads:splits (the first one is the shipped kernel)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--batches", default="1,2,4,8,16,32",
                    help="batch sizes; a trailing d (e.g. 4d) gives the same lengths longest "
                         "first; BxN (e.g. 4x64) gives B sequences of N tokens, a probe of the "
                         "fixed cost per launch")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=1,
                    help="timing rounds per batch, the order of the contenders reversed every "
                         "other round; the median is over all rounds' replays")
    ap.add_argument("--peer-deadline", type=float, default=200.0)
    ap.add_argument("--warm-cmd", default="")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    peer_proc = None
    if args.warm_cmd:
        peer_proc = subprocess.Popen(args.warm_cmd, shell=True,
                                     stdout=open(os.path.join(args.out, "fi_warm.log"), "w"),
                                     stderr=subprocess.STDOUT)
    rec = Recorder(os.path.join(args.out, "attention.jsonl"), args.commit)
    variants = [Variant(v) for v in args.variant]
    all_ok = True
    for var in variants:
        if var.probe:
            continue
        ok = small_cases(var, rec)
        log(f"[{var.name}] small cases:", "PASS" if ok else "FAIL")
        all_ok &= ok

    batches = args.batches.split(",")  # "4": lengths ascending, "4d": descending, "4x64"
    size = {x: int(x.rstrip("d").split("x")[0]) for x in batches}
    label = {x: f"B{size[x]}" + (" desc" if x.endswith("d") else "") +
             (f" x{x.split('x')[1]}" if "x" in x else "") for x in batches}

    def lens_of(x):
        if "x" in x:
            return [int(x.split("x")[1])] * size[x]
        lens = bench_lens(size[x])
        return lens[::-1] if x.endswith("d") else lens

    total_pages = max(sum((n + 63) // 64 for n in lens_of(x)) for x in batches) + 64
    fx = H.Fixture(pool_pages=total_pages, layers=2, seed=21)
    log(f"fixture {total_pages} pages x 2 layers = {fx.kv.numel() * 2 / 1e9:.1f} GB")

    results = {}
    for x in batches:
        b, lab = size[x], label[x]
        bt = fx.batch(lens_of(x), 1, seed=100 + b)
        ref = bt.reference()
        decs = []
        for var in variants:
            dec = run_ours(var, bt)
            all_ok &= var.probe or check(rec, f"[{var.name}] decode {lab} KV {min(bt.lens)}-{max(bt.lens)}",
                            dec.out, ref)
            decs.append(dec)
        results[x] = (bt, ref, decs)

    fi, reason = None, "flashinfer not requested"
    if peer_proc is not None:
        ok, reason = wait_peer(peer_proc, T0 + args.peer_deadline)
        log(reason)
        if ok:
            try:
                import peer_flashinfer as P
                fi = P.import_flashinfer()
                log("flashinfer", fi.__version__, "stubbed:", P.STUBBED)
            except Exception as e:  # record why the peer is missing, keep our numbers
                reason = f"flashinfer import failed: {e!r}"
                log(reason)

    peer_name = f"flashinfer {fi.__version__} tensor-core decode" if fi else None
    table = []
    for x in batches:
        b, lab = size[x], label[x]
        bt, ref, decs = results[x]
        floor = bt.kv_bytes / FLOOR_BPS * 1e6
        graphs = {}  # contender -> captured graph; "peer" is FlashInfer
        peer = None
        if fi is not None:
            try:
                import peer_flashinfer as P
                peer = P.FlashInferDecode(fi, bt)
                peer.run()
                torch.cuda.synchronize()
                all_ok &= check(rec, f"decode {lab} flashinfer", peer.out, ref)
                for var, dec in zip(variants, decs):
                    all_ok &= var.probe or check(rec, f"[{var.name}] decode {lab}", dec.out,
                                    peer.out.float(), vs="flashinfer")
                graphs["peer"] = capture(peer.run)
            except Exception as e:
                log(f"flashinfer {lab} failed: {e!r}")
        for var, dec in zip(variants, decs):
            graphs[var.name] = capture(dec.run)
        samples = {k: [] for k in graphs}
        order = list(graphs)
        for r in range(args.rounds):
            for k in (order if r % 2 == 0 else order[::-1]):
                samples[k] += replay_times(graphs[k], args.iters)
        peer_us = statistics.median(samples["peer"]) if "peer" in samples else None
        del graphs, peer
        for var, dec in zip(variants, decs):
            ours_us = statistics.median(samples[var.name])
            all_ok &= var.probe or check(rec, f"[{var.name}] decode {lab} after graph timing", dec.out, ref)
            row = dict(case=f"[{var.name}] decode {lab} avg KV {sum(bt.lens) // b} single layer",
                       kind="bench", variant=var.name, ours_us=ours_us, floor_us=floor,
                       frac_of_floor=floor / ours_us, batch=b,
                       kv_lens=[min(bt.lens), max(bt.lens)], splits=var.splits,
                       replays=len(samples[var.name]),
                       order="descending" if x.endswith("d") else "ascending")
            if peer_us is not None:
                row.update(peer=peer_name, peer_us=peer_us, speedup_vs_peer=peer_us / ours_us)
            if var.name.startswith("probe-timeline"):
                tl = timeline(dec) or {}
                log(f"[timeline] {lab}: " + json.dumps(
                    {k: round(v, 2) if isinstance(v, float) else v for k, v in tl.items()}))
                row.update(timeline=tl)
            rec.add(**row)
            table.append(row)
            log(f"[{var.name}] {lab}: ours {ours_us:.1f} us ({row['frac_of_floor'] * 100:.1f}% of "
                f"floor {floor:.1f} us)" + (f", flashinfer {peer_us:.1f} us, "
                                            f"x{row['speedup_vs_peer']:.2f}" if peer_us else ""))
        torch.cuda.empty_cache()

    print("\n| variant | batch | KV lens | ours us | flashinfer us | floor us | % floor | vs FI |")
    print("|---|---|---|---|---|---|---|---|")
    for r in table:
        desc = " desc" if r["order"] == "descending" else ""
        print(f"| {r['variant']} | {r['batch']}{desc} | {r['kv_lens'][0]}-{r['kv_lens'][1]} | "
              f"{r['ours_us']:.1f} | {r.get('peer_us', float('nan')):.1f} | {r['floor_us']:.1f} | "
              f"{r['frac_of_floor'] * 100:.1f} | {r.get('speedup_vs_peer', float('nan')):.2f} |")
    if fi is None:
        print("peer missing:", reason)
    print("ALL PASS" if all_ok else "SOME CHECK FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
