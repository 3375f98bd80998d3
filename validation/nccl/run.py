"""NCCL collectives across ranks through the product path: a topology manifest's all-reduce
against torch.distributed's (NCCL) in the same processes, one process per GPU.

Usage: python3 validation/nccl/run.py --build BUILD --out OUT --commit SHA [--ranks N]
       [--mib 64] [--quick] [--dry-run]
Owns issue 17's all-reduce figure: N worker processes (one per GPU, default every visible GPU
up to 8), each loading the same generated manifest (group `tp` of N ranks, one
`extern:nccl_allreduce_bf16` over a bf16 buffer of --mib MiB) with its rank and one fresh
rendezvous directory; the runtime compares the manifest's hash, passes NCCL's unique id and
joins the communicator. Checks first: rank r writes r + 1 everywhere, so every element of
the sum is N (N + 1) / 2, exact in bf16 for N <= 8; eager and as the runtime's graph. Then
timing: kernrt's graph replay and torch.distributed.all_reduce on a tensor of the same size
(eager, its own NCCL communicator), CUDA events, medians, interleaved rounds; bus bandwidth
= 2 (N - 1) / N x bytes / time, as nccl-tests count it. Rank 0 writes OUT/nccl.jsonl.
With fewer than 2 GPUs it records that it did not run and exits 0 (this is a two-GPU check);
--dry-run verifies the manifest on the CPU. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
Then runs tp_decode.py (the tensor-parallel decode example; on one GPU its two halves).
Status: written for the two-GPU machine; not yet run there.
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
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


def manifest(ranks, elems):
    """The all-reduce manifest: x (input) summed over group `tp` into y (output)."""
    return {
        "schema_version": 4, "model": f"kernrt-nccl-allreduce-{ranks}",
        "topology": {"groups": {"tp": ranks}},
        "buffers": {"x": {"dtype": "bf16", "shape": [elems], "kind": "input"},
                    "y": {"dtype": "bf16", "shape": [elems], "kind": "output"}},
        "modules": {},
        "ops": {"all_reduce": {
            "params": ["in buffer<bf16>", "out buffer<bf16>", "i64"],
            "impl": {"launches": [{"entry": "extern:nccl_allreduce_bf16",
                                   "params": ["in buffer<bf16>", "out buffer<bf16>", "i64", "i32"],
                                   "args": [{"param": 0}, {"param": 1}, {"param": 2},
                                            {"rank": "tp"}]}]}}},
        "programs": {"all_reduce": {"calls": [{"op": "all_reduce", "args": [
            {"buf": "x"}, {"buf": "y"}, {"i64": elems}]}]}},
    }


def worker(a):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, os.path.join(REPO, "validation", "common"))
    import bench
    bench.use_build(a.build)
    import kernrt

    rank, n, elems = a.rank, a.ranks, a.mib * (1 << 20) // 2
    torch.cuda.set_device(rank)
    rt = kernrt.load(manifest(n, elems), gpu=rank, ranks={"tp": rank}, rendezvous=a.rendezvous)
    xv, yv = rt.buffer("x"), rt.buffer("y")  # zero-copy torch views of the runtime's buffers
    xv.fill_(float(rank + 1))
    want = float(n * (n + 1) // 2)
    rows = []
    for graph in (False, True):
        yv.fill_(float("nan"))  # poisoned: an element the collective misses stays NaN
        torch.cuda.synchronize()
        rt.run("all_reduce", graph=graph)
        bad = int((yv != want).sum())
        rows.append({"case": f"all_reduce {n} ranks {a.mib} MiB bf16 [{'graph' if graph else 'eager'}]",
                     "kind": "check", "pass": bad == 0,
                     "note": f"{bad} of {elems} elements differ from {want}"})
    dist.init_process_group("nccl", init_method=f"file://{a.rendezvous}/torch.init",
                            world_size=n, rank=rank)
    t = torch.full((elems,), float(rank + 1), dtype=torch.bfloat16, device=f"cuda:{rank}")
    stream = torch.cuda.current_stream()
    iters = 10 if a.quick else 30
    contenders = {
        "kernrt": lambda: rt.enqueue("all_reduce", stream=stream, graph=True),
        "torch.distributed": lambda: dist.all_reduce(t),
    }
    med = bench.interleaved(contenders, iters, 2 if a.quick else 4)
    nbytes = elems * 2
    bus = {k: 2 * (n - 1) / n * nbytes / (v * 1e-6) for k, v in med.items()}
    rows.append({"case": f"all_reduce {n} ranks {a.mib} MiB bf16", "kind": "bench",
                 "ours_us": med["kernrt"], "peer": "torch.distributed (NCCL)",
                 "peer_us": med["torch.distributed"],
                 "speedup_vs_peer": med["torch.distributed"] / med["kernrt"],
                 "bus_bytes_per_s": bus["kernrt"], "peer_bus_bytes_per_s": bus["torch.distributed"],
                 "gate": 0.95, "pass": med["torch.distributed"] / med["kernrt"] >= 0.95})
    dist.destroy_process_group()
    if rank == 0:
        meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
                "gpu_serial": bench.gpu_serial(), "commit": a.commit, "family": "nccl"}
        with open(os.path.join(a.out, "nccl.jsonl"), "a") as f:
            for r in rows:
                f.write(json.dumps(dict(meta, **r)) + "\n")
        for r in rows:
            print(r["case"], "PASS" if r["pass"] else "FAIL",
                  f"{r.get('ours_us', 0):.1f} us vs {r.get('peer_us', 0):.1f} us" if "ours_us" in r else r["note"])
    return 0 if all(r["pass"] for r in rows) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory")
    ap.add_argument("--out", required=True, help="directory for nccl.jsonl")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--ranks", type=int, default=0, help="processes (default: visible GPUs, <= 8)")
    ap.add_argument("--mib", type=int, default=64, help="MiB of bf16 per all-reduce")
    ap.add_argument("--quick", action="store_true", help="fewer timing rounds")
    ap.add_argument("--dry-run", action="store_true", help="CPU only: verify the manifests")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--rendezvous", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank >= 0:
        return worker(a)
    import kernrt
    if a.dry_run:
        problems = [(n, p) for n in (1, 2, 8) for p in kernrt.verify(manifest(n, a.mib << 19))]
        for n, p in problems:
            print(f"{n} ranks: {p.path}: {p.message}")
        print("nccl manifests: " + ("verified" if not problems else f"{len(problems)} problems"))
        return 1 if problems else 0
    os.makedirs(a.out, exist_ok=True)
    status = all_reduce(a)
    # The family's second check: issue 17's tensor-parallel decode example (its own process).
    tp = subprocess.run([sys.executable, os.path.join(HERE, "tp_decode.py"), "--build", a.build,
                         "--out", a.out, "--commit", a.commit], timeout=900)
    return status or tp.returncode


def all_reduce(a):
    """The all-reduce check and benchmark over every visible GPU (a row saying why not on one)."""
    import torch
    gpus = torch.cuda.device_count()
    n = a.ranks or min(gpus, 8)
    if n < 2 or gpus < n:
        row = {"date": datetime.date.today().isoformat(), "commit": a.commit, "family": "nccl",
               "case": "all_reduce across ranks", "kind": "check", "pass": None,
               "note": f"not run: needs 2 or more GPUs, {gpus} visible"}
        with open(os.path.join(a.out, "nccl.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        print(row["note"])
        return 0
    with tempfile.TemporaryDirectory(prefix="kernrt-nccl-") as rv:
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--build", a.build,
                                   "--out", a.out, "--commit", a.commit, "--ranks", str(n),
                                   "--mib", str(a.mib), "--rank", str(r), "--rendezvous", rv]
                                  + (["--quick"] if a.quick else []))
                 for r in range(n)]
        codes = [p.wait(timeout=600) for p in procs]
    print(f"ranks exited {codes}")
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
