"""Benchmark of the kernrt conv cubins vs fla vs the bandwidth floor, in one process.

Owns the timing method of validation/conv/notes.md: random inputs, several input/output
sets rotated so that one round touches > 120 MB (twice the 60 MB L2), CUDA events around
each call (forward, eager, no host sync between calls) or around graph replays of K calls
(decode: per call = replay time / K), median over many samples. Floor = (bytes read once +
bytes written once) / 4.275 TB/s; the forward also times torch's copy of the same bytes
(x -> y) in the same process, the measured ceiling. Appends one JSONL record per case as
it is measured, then prints a table.
Usage: python3 bench.py --cubins DIR --out bench.jsonl [--fla] [--variants DIR] [--extra-spans 64]
       [--extra-ctas 528]
"""
import argparse
import json
import statistics

import torch

import cubin_launch as kl

BW = 4.275e12  # B/s, device-to-device copy measured on the H200 (validation/conv/notes.md)
L2_ROT = 128 << 20


def safe(fn, *args, **kw):
    """A variant that fails to run is reported as NaN, never the end of the bench."""
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001
        print(f"bench variant failed: {e}", flush=True)
        return float("nan")


def sets_for(bytes_per_call):
    return max(2, -(-L2_ROT // max(bytes_per_call, 1)))


def time_eager(fn, nsets, iters=60, warm=5):
    for i in range(warm):
        fn(i % nsets)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    torch.cuda._sleep(60_000_000)  # ~30 ms of GPU wait: the host queues every call before any runs,
    # so host-side launch cost (Python, autotune dispatch) never shows as GPU idle time
    for i, (a, b) in enumerate(ev):
        a.record()
        fn(i % nsets)
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev) * 1e3


def time_graph(fn, nsets, reps=30, calls=64):
    """Capture one graph of `calls` calls cycling over the sets, time replays (the host
    queues all replays behind a GPU sleep), per-call median = replay time / calls."""
    calls = max(calls, nsets)
    for i in range(nsets):
        fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(nsets):  # warm the capture stream too
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i % nsets)
    g.replay()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    torch.cuda._sleep(20_000_000)
    for a, b in ev:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 / calls for a, b in ev)


def bench_fwd(mods, use_fla, B, T, D, W=4, dtype=torch.bfloat16):
    xb = B * T * D * 2
    nbytes = 2 * xb  # read x once, write y once (weights are D*W*4, negligible)
    nsets = sets_for(nbytes)
    xs = [torch.randn(B, T, D, device="cuda").to(dtype) for _ in range(nsets)]
    ys = [torch.empty_like(x) for x in xs]
    w = ((torch.rand(D, W, device="cuda") * 2 - 1) / W ** 0.5).float()
    res = {}
    for label, (mod, span, block) in mods.items():  # span < 0: -span = CTAs of one wave
        geo = dict(ctas=-span) if span < 0 else dict(span=span)
        res[label] = safe(time_eager, lambda i: kl.fwd(mod, xs[i], w, ys[i], silu=True, block=block, **geo), nsets)
    # The copy ceiling in the same process: the same bytes through torch's device copy.
    res["torch_copy"] = safe(time_eager, lambda i: ys[i].copy_(xs[i]), nsets)
    if use_fla:
        from fla.modules.causal_conv1d import causal_conv1d
        res["fla"] = safe(time_eager, lambda i: causal_conv1d(xs[i], w, None, activation="silu"), nsets)
    return f"fwd B{B} T{T} D{D} W{W} silu bf16 wf32", nbytes, res


def bench_update(mods, use_fla, N, D, W=4, dtype=torch.bfloat16):
    line = D * (W - 1) * 2
    nbytes = 2 * N * D * 2 + 2 * N * line  # x, y, state read + written
    nsets = min(64, sets_for(nbytes))
    xs = [torch.randn(N, 1, D, device="cuda").to(dtype) for _ in range(nsets)]
    ys = [torch.empty_like(x) for x in xs]
    pools = [torch.randn(N + 2, D, W - 1, device="cuda").to(dtype) for _ in range(nsets)]
    lines = [(torch.randperm(N + 1, device="cuda")[:N] + 1).int() for _ in range(nsets)]
    w = ((torch.rand(D, W, device="cuda") * 2 - 1) / W ** 0.5).float()
    res = {}
    for label, (mod, spt, block, pdl) in mods.items():
        res[label] = safe(time_graph, lambda i: kl.update(mod, xs[i], w, ys[i], pools[i].view(torch.uint8),
                                                    lines=lines[i], state_stride=line, silu=True,
                                                    block=block, seqs_per_thread=spt, pdl=pdl), nsets)
    if use_fla:
        from fla.modules.causal_conv1d import causal_conv1d_update
        caches = [torch.randn(N, D, W, device="cuda").to(dtype) for _ in range(nsets)]
        res["fla"] = safe(time_graph, lambda i: causal_conv1d_update(xs[i][:, 0], caches[i], weight=w,
                                                               activation="silu"), nsets)
    return f"update B{N} D{D} W{W} silu bf16 wf32 (graph)", nbytes, res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubins", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--fla", action="store_true")
    ap.add_argument("--variants", default="")
    ap.add_argument("--meta", default="{}")
    ap.add_argument("--peer", default="fla")
    ap.add_argument("--span", type=int, default=32, help="rows per block of the fwd cubin")
    ap.add_argument("--extra-spans", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                    help="comma list: also bench the shipped fwd cubin at these spans")
    ap.add_argument("--extra-ctas", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                    help="comma list: also bench the shipped fwd cubin with grid.y sized to this many CTAs")
    ap.add_argument("--spt", type=int, default=4, help="sequences per thread of the update cubin")
    ap.add_argument("--no-pdl", action="store_true", help="launch the update without PDL")
    a = ap.parse_args()
    torch.manual_seed(99)
    ours_fwd = kl.Module(f"{a.cubins}/conv_fwd.sm90a.cubin")
    fwd_mods = {"ours": (ours_fwd, a.span, 128)}
    for span in a.extra_spans:  # the shipped ring takes any grid.y: other spans, same cubin
        fwd_mods[f"ours_s{span}"] = (ours_fwd, span, 128)
    for ctas in a.extra_ctas:  # one wave of long contiguous spans (span = ceil(T / grid.y))
        fwd_mods[f"ours_c{ctas}"] = (ours_fwd, -ctas, 128)
    upd_mods = {"ours": (kl.Module(f"{a.cubins}/conv_update.sm90a.cubin"), a.spt, 64, not a.no_pdl)}
    if a.variants:  # files named conv_fwd_<tag>_{s<span>|c<ctas>}.sm90a.cubin / conv_update_s<n>*.sm90a.cubin
        import glob
        import os
        import re
        for path in sorted(glob.glob(f"{a.variants}/conv_fwd_*_[sc]*.sm90a.cubin")):
            tag = os.path.basename(path).split(".")[0][len("conv_fwd_"):]
            m = re.search(r"_([sc])(\d+)$", tag)
            if m:
                fwd_mods[tag] = (kl.Module(path), int(m.group(2)) * (1 if m.group(1) == "s" else -1), 128)
        for path in sorted(glob.glob(f"{a.variants}/conv_update_s*.sm90a.cubin")):
            tag = os.path.basename(path).split(".")[0][len("conv_update_"):]
            m = kl.Module(path)
            for blk in (64, 128):
                upd_mods[f"{tag}b{blk}pdl"] = (m, int(tag[1]), blk, True)
    meta = json.loads(a.meta)
    lines = []

    def emit(case, nbytes, res):
        """Append the case's record at once (a run cut short keeps what it measured)."""
        floor = nbytes / BW * 1e6
        ours = res["ours"]
        peer = res.get("fla")
        rec = dict(meta, case=case, kind="bench", ours_us=round(ours, 2), floor_us=round(floor, 2),
                   frac_of_floor=round(floor / ours, 3))
        if peer is not None:
            rec.update(peer=a.peer, peer_us=round(peer, 2), speedup_vs_peer=round(peer / ours, 2))
        var = {k: round(v, 2) for k, v in res.items() if k not in ("ours", "fla")}
        if var:
            rec["variants_us"] = var
        with open(a.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        line = (f"{case:<44} {ours:8.2f} {peer if peer else float('nan'):8.2f} {floor:7.2f} "
                f"{(peer / ours) if peer else float('nan'):6.2f} {100 * floor / ours:6.1f}%  "
                + " ".join(f"{k}={v}" for k, v in var.items()))
        print(line, flush=True)
        lines.append(line)

    with torch.no_grad():
        for shape in [(8, 4096, 2048), (8, 4096, 4096), (16, 8192, 2048), (1, 32768, 4096)]:
            emit(*bench_fwd(fwd_mods, a.fla, *shape))
            torch.cuda.empty_cache()
        for shape in [(64, 4096), (256, 8192)]:
            emit(*bench_update(upd_mods, a.fla, *shape))
    print(f"\n{'case':<44} {'ours us':>8} {'fla us':>8} {'floor':>7} {'x fla':>6} {'floor%':>7}  variants")
    print("\n".join(lines))

if __name__ == "__main__":
    main()
