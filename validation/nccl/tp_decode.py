"""Tensor-parallel decode through the product path (issue 17's example): each rank holds 2 of
the 4 KV heads (its own KV pages) and 12 of the 24 query heads, runs the q12kv2 decode entry,
and the ranks all-gather their outputs; the result is compared with the single-GPU decode
(TP = 1, the q24kv4 entry over the whole KV) and with the float32 reference, eagerly and after
graph replays.

Usage: python3 validation/nccl/tp_decode.py --build BUILD --out OUT --commit SHA [--replays N]
With 2 or more GPUs: two worker processes (GPUs 0 and 1) load kernrt.gen.tp_decode's manifest
with their rank and one fresh rendezvous directory (the NCCL all-gather is part of the program).
With one GPU: both ranks' halves run on it as single-rank manifests (the same q12kv2 op, no
topology, no all-gather) and their outputs are put together on the host; this checks the
kernel and the head split, not the collective. The inputs are one seeded batch (ragged lengths
over random disjoint pages of validation/attention's fixture), made on the CPU so every rank
holds the same numbers; each rank copies its heads' slice into its buffers and its KV state in
place. Gate: the decode gate (finite, rel L2 < 0.02, max |err| < 0.02) against TP = 1 and
against the reference. Writes OUT/tp_decode.jsonl (rank 0).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "runtime", "python"))
sys.path.insert(0, os.path.join(REPO, "validation", "common"))
sys.path.insert(0, os.path.join(REPO, "validation", "attention"))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

LENS = [1000, 4097, 8000, 64, 2500, 1]  # ragged, page boundaries, one token
MAX_CONTEXT = 8192
GATE = 0.02


def setup(a):
    """(the build's cubin directory, KV pages, the KV on the device, the seeded batch): the
    same numbers in every process (made on the CPU, then copied)."""
    import torch
    import bench
    from kernrt.gen import attention as ao
    import fixture

    cubins = bench.use_build(a.build)
    b = len(LENS)
    pages = sum((n + ao.PAGE - 1) // ao.PAGE for n in LENS) + 8
    g = torch.Generator().manual_seed(11)
    full_kv = torch.randn((pages, 1, ao.PAGE, ao.HEADS_KV, 2, ao.HEAD_DIM), generator=g).to(torch.bfloat16)
    q = torch.randn((b, ao.HEADS_Q, ao.HEAD_DIM), generator=g).to(torch.bfloat16)
    kv_dev = full_kv.cuda()
    batch = fixture.Batch(kv_dev, LENS, 0, seed=1, max_pages=MAX_CONTEXT // ao.PAGE)
    batch.q = q.cuda()
    return cubins, pages, kv_dev, batch


def rank_runtime(manifest, rank, cubins, pages, kv_dev, batch, **load):
    """A runtime of `manifest` holding rank `rank`'s heads of the batch (KV pages and queries)."""
    import torch
    import kernrt
    from kernrt.gen import attention as ao
    from kernrt.gen import pin
    from kernrt.gen import tp_decode as tp

    b = batch.bsz
    qh, kvh = tp.rank_heads(rank)
    rt = kernrt.load(pin(manifest, cubins), tokens=pages * ao.PAGE, **load)
    raw = rt.state("kv")
    per_page = ao.PAGE * tp.HEADS_KV_PER_RANK * 2 * ao.HEAD_BYTES
    mine = raw[:pages * per_page].view(torch.bfloat16).view(pages, 1, ao.PAGE, tp.HEADS_KV_PER_RANK, 2,
                                                           ao.HEAD_DIM)
    mine.copy_(kv_dev[:, :, :, kvh.start:kvh.stop])
    rt.buffer("q")[:b].copy_(batch.q[:, qh.start:qh.stop])
    rt.buffer("table")[:b].copy_(batch.table[:, :rt.buffer("table").shape[1]])
    rt.buffer("seq")[:b].copy_(batch.seq_lens)
    rt.buffer("cuq")[:b + 1].copy_(torch.arange(b + 1, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    return rt


def decode(rt, out, b, graph, replays=1):
    """Program decode_l0 with `out` poisoned first (an element nobody writes stays NaN)."""
    import torch
    rt.buffer(out).fill_(float("nan"))
    torch.cuda.synchronize()
    for _ in range(replays):
        rt.run("decode_l0", graph=graph, seqs=b, tokens=b)
    torch.cuda.synchronize()
    return rt.buffer(out)


def compare(a, batch, cubins, pages, kv_dev, forms, label):
    """Rows of `forms` ((name, [tokens][24][256] result), ...) against TP = 1 and the reference."""
    import torch
    import bench
    import fixture
    import kernrt
    from kernrt.gen import attention as ao
    from kernrt.gen import attention_manifest as am
    from kernrt.gen import pin

    b = batch.bsz
    tp1_rt = kernrt.load(pin(am.decode_manifest(b, MAX_CONTEXT, 1), cubins), gpu=0,
                         tokens=pages * ao.PAGE)
    fixture.kv_view(tp1_rt, 1)[:pages].copy_(kv_dev)
    batch.write(tp1_rt)
    torch.cuda.synchronize()
    tp1 = decode(tp1_rt, "out", b, False)[:b].float()
    ref = batch.reference()
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
            "gpu_serial": bench.gpu_serial(), "commit": a.commit, "family": "nccl"}
    rows = []
    for form, out in forms:
        for against, want in (("TP=1", tp1), ("float32 reference", ref)):
            finite, err, max_abs = bench.errors(out, want)
            rows.append(dict(meta, case=f"decode {label} vs {against} [{form}]", kind="check",
                             error=err, max_abs=max_abs, gate=GATE,
                             **{"pass": bool(finite and err < GATE and max_abs < GATE)}))
    with open(os.path.join(a.out, "tp_decode.jsonl"), "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
            print(("PASS " if r["pass"] else "FAIL ") + r["case"], f"error={r['error']:.3e}",
                  f"max_abs={r['max_abs']:.3e}")
    return 0 if all(r["pass"] for r in rows) else 1


def worker(a):
    """One rank of the two-GPU run (a process of its own on GPU `a.rank`)."""
    import torch
    from kernrt.gen import tp_decode as tp

    torch.cuda.set_device(a.rank)
    cubins, pages, kv_dev, batch = setup(a)
    b = batch.bsz
    rt = rank_runtime(tp.tp_manifest(b, MAX_CONTEXT), a.rank, cubins, pages, kv_dev, batch,
                      gpu=a.rank, ranks={"tp": a.rank}, rendezvous=a.rendezvous)
    eager = tp.full_heads(decode(rt, "gathered", b, False), b).float()
    graph = tp.full_heads(decode(rt, "gathered", b, True, a.replays), b).float()
    if a.rank != 0:
        return 0
    return compare(a, batch, cubins, pages, kv_dev,
                   (("eager", eager), (f"graph x{a.replays}", graph)), "TP=2")


def one_gpu(a):
    """Both ranks' halves on one GPU as single-rank manifests (no all-gather)."""
    import torch
    from kernrt.gen import attention_manifest as am
    from kernrt.gen import tp_decode as tp

    cubins, pages, kv_dev, batch = setup(a)
    b = batch.bsz
    halves = {"eager": [], f"graph x{a.replays}": []}
    for rank in range(tp.RANKS):
        m = am.decode_manifest(b, MAX_CONTEXT, 1, "h200", splits=128, heads_kv=tp.HEADS_KV_PER_RANK,
                               model=f"kernrt-tp2-rank{rank}-one-gpu")
        rt = rank_runtime(m, rank, cubins, pages, kv_dev, batch, gpu=0)
        for form, graph, replays in (("eager", False, 1), (f"graph x{a.replays}", True, a.replays)):
            out = decode(rt, "out", b, graph, replays)
            halves[form].append(out[:b].reshape(b, tp.HEADS_Q_PER_RANK, -1).float())
    forms = [(form, torch.cat(parts, dim=1)) for form, parts in halves.items()]
    return compare(a, batch, cubins, pages, kv_dev, forms, "TP=2 halves on one GPU (q12kv2, no all-gather)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory")
    ap.add_argument("--out", required=True, help="directory for tp_decode.jsonl")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--replays", type=int, default=100, help="graph replays before the graph check")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--rendezvous", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank >= 0:
        return worker(a)
    os.makedirs(a.out, exist_ok=True)
    import torch
    gpus = torch.cuda.device_count()
    if gpus == 0:
        print("no GPU visible: nothing run")
        return 0
    if gpus < 2:
        print(f"{gpus} GPU visible: both ranks' halves on it, the all-gather not run")
        return one_gpu(a)
    with tempfile.TemporaryDirectory(prefix="kernrt-tp-") as rv:
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--build", a.build,
                                   "--out", a.out, "--commit", a.commit, "--replays", str(a.replays),
                                   "--rank", str(r), "--rendezvous", rv]) for r in range(2)]
        codes = [p.wait(timeout=600) for p in procs]
    print(f"ranks exited {codes}")
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
