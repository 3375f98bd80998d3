"""KDA / GDN on the H200 through the product path: correctness and speed vs fla, flash-qla and
FlashKDA, in one process.

Usage: python3 validation/kda/run.py --build BUILD --out OUT --commit SHA [--quick]
       [--budget SECONDS] [--no-peer | --peers NAME,...] [--checks-only | --benches-only]
       [--only REGEX]
Owns the family's device run: the ceilings (copy, GEMM) measured first; the correctness cases
of checks.py (prefill, serving chain, rollback, refusals) against the float64 reference with
fla's error beside ours; the benchmarks of benches.py (prefill shapes of the issue, decode
B64 / B256, verify 8 tokens + commit at B64). Every launch of ours goes through libkernrt:
kernrt.gen.kda manifests pinned to BUILD/cubins/run, kernrt.load, inputs written in place
through the runtime's buffer views, programs enqueued on torch's stream (graph=True for
timing). Peers are imported lazily (PYTHONPATH set by the device script); a missing one is
recorded as "peer unavailable: <why>". Peers' JIT and autotune run inside the time budget:
once it is spent, the remaining peer runs are skipped (recorded), ours still run.
Writes OUT/kda.jsonl (one row per case, DESIGN.md's schema) and prints a table last; exit 0
when every check passed.
"""
import argparse
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("FLA_FLASH_KDA", "0")  # fla's own kernels as the fla peer; FlashKDA apart

import fixture as fx  # noqa: E402  (sets up sys.path for bench and kernrt)
import bench  # noqa: E402
import benches  # noqa: E402
import checks  # noqa: E402
import torch  # noqa: E402


PEERS = ("fla_kda", "fla_kda_recurrent", "fla_gdn", "flash_qla", "flash_kda")


def import_peers(no_peer, only=None):
    """Imports the peers (all, none with no_peer, or the names in `only`); the others are
    recorded with the reason they did not run."""
    peers, why = {}, {}
    for name in PEERS:
        if no_peer or (only is not None and name not in only):
            peers[name], why[name] = None, "--no-peer" if no_peer else "not in --peers"
            continue
        t = time.time()
        peers[name], why[name] = fx.import_peer(name)
        bench.log(f"peer {name}: {'ok' if peers[name] else why[name]} ({time.time() - t:.1f} s)")
    return peers, why


def table(rows):
    print("\n| case | ours us | peer | peer us | x peer | floor us | % floor |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if not r or "ours_us" not in r:
            continue
        print(f"| {r['case']} | {r['ours_us']:.1f} | {r.get('peer', '-')} | "
              f"{r.get('peer_us', float('nan')):.1f} | {r.get('speedup_vs_peer', float('nan')):.2f} | "
              f"{r['floor_us']:.1f} | {r['frac_of_floor'] * 100:.0f} |")


def program_io_examples(args):
    """The pinned example chains (prefill -> decode -> verify -> commit) through program_io,
    eager and --graph in two processes: outputs and state dumps bit-identical, float64 reference."""
    import subprocess
    pio = os.path.join(args.build, "bin", "program_io")
    if not os.path.exists(pio):
        bench.log("program_io examples: no program_io in the build")
        return False
    cmd = [sys.executable, os.path.join(bench.REPO, "examples", "kda", "run_examples.py"), "--program-io", pio,
           "--cubins", os.path.join(args.build, "cubins", "run"),
           "--manifests", os.path.join(args.build, "examples", "kda"), "--work", "/tmp/kda-pio",
           "--jsonl", os.path.join(args.out, "kda.jsonl"),
           "--meta", '{"commit": "%s", "family": "kda"}' % args.commit]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        bench.log("program_io examples: timed out after 60 s")
        return False
    bench.log("program_io examples: exit", p.returncode, " | ".join((p.stdout + p.stderr).strip().splitlines()[-3:]))
    return p.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory (cubins/run)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--quick", action="store_true", help="a subset of cases and benches")
    ap.add_argument("--budget", type=float, default=150.0, help="seconds before peers are skipped")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--peers", type=lambda t: t.split(","), default=None, metavar="NAME,...",
                    help="only these peers (of %s); fla's JIT and autotune are the slow ones" % ", ".join(PEERS))
    ap.add_argument("--benches-only", action="store_true", help="skip the correctness cases")
    ap.add_argument("--checks-only", action="store_true",
                    help="skip the benchmarks (the checks and program_io examples run)")
    ap.add_argument("--only", type=re.compile, default=None, metavar="REGEX",
                    help="only the prefill checks and prefill benches whose names match (no "
                         "serving or drop-in checks, step benches or program_io examples)")
    args = ap.parse_args()
    unknown = sorted(set(args.peers or ()) - set(PEERS))
    if unknown:
        ap.error(f"--peers: unknown {', '.join(unknown)} (known: {', '.join(PEERS)})")
    if args.no_peer and args.peers:
        ap.error("--no-peer and --peers exclude each other")
    if args.checks_only and args.benches_only:
        ap.error("--checks-only and --benches-only exclude each other")
    bench.use_build(args.build)  # the build's libkernrt.so and cubins (the drop-ins use them too)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "kda.jsonl")
    if os.path.exists(path):
        os.remove(path)
    rec = bench.Recorder(path, "kda", args.commit)
    deadline = bench.T0 + args.budget * 0.8
    ceil = bench.floors(rec)
    peers, why = import_peers(args.no_peer, args.peers)

    ok = True
    if not args.benches_only:
        ok = checks.run_prefill_checks(rec, args.build, peers, args.quick, bench.T0 + args.budget * 0.5,
                                       args.only)
        bench.log("prefill checks:", "PASS" if ok else "FAIL")
        if args.only is None:
            ok &= checks.run_serving_checks(rec, args.build, peers, args.quick)
            ok &= checks.run_dropin_checks(rec, peers)
            bench.log("serving and drop-in checks:", "PASS" if ok else "FAIL")

    rows = []
    if not args.checks_only:
        rows = benches.run_prefill_benches(rec, args.build, peers, why, ceil, args.iters, args.rounds,
                                           deadline, args.quick, args.only)
        if args.only is None:
            rows += benches.run_step_benches(rec, args.build, peers, ceil, 3 * args.iters, args.rounds,
                                             deadline, args.quick, why)
        table(rows)
    if args.only is None:
        ok &= program_io_examples(args)
    for name, w in why.items():
        if w:
            print(f"{name}: {w}")
    failed = [r["case"] for r in rec.rows if r.get("kind") == "check" and not r.get("pass")]
    print(f"{len([r for r in rec.rows if r.get('kind') == 'check'])} checks, {len(failed)} failed")
    for f in failed:
        print("FAILED:", f)
    print("KDA ALL PASS" if ok and not failed else "KDA SOME CHECK FAILED",
          f"({time.time() - bench.T0:.0f} s)")
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    torch.backends.cuda.matmul.allow_tf32 = False
    sys.exit(main())
