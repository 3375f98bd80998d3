"""Tensor-parallel decode over two GPUs through the product path (issue 17's example): each rank
holds 2 of the 4 KV heads (its own KV pages) and 12 of the 24 query heads, runs the q12kv2
decode entry, and the ranks all-gather their outputs; rank 0 compares the gathered result with
the single-GPU decode (TP = 1, the q24kv4 entry over the whole KV) and with the float32
reference, eagerly and after graph replays.

Usage: python3 validation/nccl/tp_decode.py --build BUILD --out OUT --commit SHA [--replays N]
Two worker processes (GPUs 0 and 1) load kernrt.gen.tp_decode's manifest with their rank and
one fresh rendezvous directory. The inputs are one seeded batch (ragged lengths over random
disjoint pages of validation/attention's fixture), made on the CPU so both ranks hold the same
numbers; each rank copies its heads' slice into its buffers and its KV state in place.
Gate: the decode gate (finite, rel L2 < 0.02, max |err| < 0.02) against TP = 1 and against
the reference. Rank 0 writes OUT/tp_decode.jsonl. With fewer than 2 GPUs it records that it did
not run and exits 0. Status: written for the two-GPU machine; not yet run there.
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


def worker(a):
    import torch
    import bench
    cubins = bench.use_build(a.build)
    import kernrt
    from kernrt.gen import attention as ao
    from kernrt.gen import attention_manifest as am
    from kernrt.gen import pin
    from kernrt.gen import tp_decode as tp
    import fixture

    rank, b = a.rank, len(LENS)
    torch.cuda.set_device(rank)
    pages = sum((n + ao.PAGE - 1) // ao.PAGE for n in LENS) + 8
    g = torch.Generator().manual_seed(11)
    full_kv = torch.randn((pages, 1, ao.PAGE, ao.HEADS_KV, 2, ao.HEAD_DIM), generator=g).to(torch.bfloat16)
    q = torch.randn((b, ao.HEADS_Q, ao.HEAD_DIM), generator=g).to(torch.bfloat16)
    kv_dev = full_kv.cuda()
    batch = fixture.Batch(kv_dev, LENS, 0, seed=1, max_pages=MAX_CONTEXT // ao.PAGE)
    batch.q = q.cuda()

    qh, kvh = tp.rank_heads(rank)
    rt = kernrt.load(pin(tp.tp_manifest(b, MAX_CONTEXT), cubins), gpu=rank, ranks={"tp": rank},
                     rendezvous=a.rendezvous, tokens=pages * ao.PAGE)
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

    def tp2(graph, replays=1):
        rt.buffer("gathered").fill_(float("nan"))  # an element nobody writes stays NaN
        torch.cuda.synchronize()
        for _ in range(replays):
            rt.run("decode_l0", graph=graph, seqs=b, tokens=b)
        return tp.full_heads(rt.buffer("gathered"), b).float()

    eager = tp2(False)
    graph = tp2(True, a.replays)
    if rank != 0:
        return 0
    one = kernrt.load(pin(am.decode_manifest(b, MAX_CONTEXT, 1), cubins), gpu=0, tokens=pages * ao.PAGE)
    fixture.kv_view(one, 1)[:pages].copy_(kv_dev)
    batch.write(one)
    torch.cuda.synchronize()
    one.run("decode_l0", seqs=b, tokens=b)
    tp1 = one.buffer("out")[:b].float()
    ref = batch.reference()
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
            "gpu_serial": bench.gpu_serial(), "commit": a.commit, "family": "nccl"}
    rows = []
    for form, out in (("eager", eager), (f"graph x{a.replays}", graph)):
        for against, want in (("TP=1", tp1), ("float32 reference", ref)):
            finite, err, max_abs = bench.errors(out, want)
            rows.append(dict(meta, case=f"decode TP=2 vs {against} [{form}]", kind="check",
                             error=err, max_abs=max_abs, gate=GATE,
                             **{"pass": bool(finite and err < GATE and max_abs < GATE)}))
    with open(os.path.join(a.out, "tp_decode.jsonl"), "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
            print(("PASS " if r["pass"] else "FAIL ") + r["case"], f"error={r['error']:.3e}",
                  f"max_abs={r['max_abs']:.3e}")
    return 0 if all(r["pass"] for r in rows) else 1


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
    if gpus < 2:
        row = {"date": datetime.date.today().isoformat(), "commit": a.commit, "family": "nccl",
               "case": "decode TP=2", "kind": "check", "pass": None,
               "note": f"not run: needs 2 GPUs, {gpus} visible"}
        with open(os.path.join(a.out, "tp_decode.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        print(row["note"])
        return 0
    with tempfile.TemporaryDirectory(prefix="kernrt-tp-") as rv:
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--build", a.build,
                                   "--out", a.out, "--commit", a.commit, "--replays", str(a.replays),
                                   "--rank", str(r), "--rendezvous", rv]) for r in range(2)]
        codes = [p.wait(timeout=600) for p in procs]
    print(f"ranks exited {codes}")
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
