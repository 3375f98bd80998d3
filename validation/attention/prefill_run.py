#!/usr/bin/env python3
"""H200 validation and benchmark of the sm90 prefill / verify attention kernel (issue 14).

  python3 validation/attention/prefill_run.py --build BUILD --out OUT --commit SHA [--quick]

Owns: the device run of the prefill family through the product path only: every case is a
generated manifest (prefill_cases.manifest around kernrt.gen.attention's h200 op), loaded with
kernrt.load, its inputs written in place through rt.buffer views, run with rt.enqueue on a
torch stream (eager, then as the runtime's cached CUDA graph). Three phases, each in a child
process with a timeout so that a hung kernel costs its phase, not the run:
  checks      correctness cases (prefill_cases.check_cases) against the float32 reference,
              eager and after graph replays (1000 for the seed's shapes); gates: finite,
              rel L2 < 0.02, max |err| < 0.02; output rows pre-filled with NaN so an unwritten
              row fails
  bench       issue 14's shapes: GEMM rate (torch.matmul bf16 8192^3) and copy rate measured
              first; ours, FlashInfer fa3 / fa2 (paged, same K/V views) and cuDNN SDPA
              (contiguous) timed as CUDA-graph replays with L2 flushed before each (events
              around the replay only), medians; every output checked against the reference
  program_io  the committed examples/h200/{prefill,verify}.json (pinned copies in BUILD) through
              BUILD/bin/program_io, eager and after 1000 graph replays, checked in torch
Writes OUT/attention_prefill.jsonl (DESIGN.md's row schema; peers' times under "peers") and
prints a table last. --dry-run (CPU only) generates and verifies every manifest with
BUILD/bin/kernrt-verify instead.

Deliberately does not check: the decode kernel (validation/attention/run.py), or FlashInfer's
own correctness beyond comparing its output with the same reference.
"""

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import prefill_cases as pc  # noqa: E402

GATE = 0.02
RESULTS = "attention_prefill.jsonl"
FAMILY = "attention-prefill"
SEED_REPLAYS = 1000
VARIANT_MAX_BYTES = 8 << 30  # bench cases with more K/V time the shipped entry alone


def recorder(args):
    """validation/common/bench.py's Recorder (imports torch: children only)."""
    import bench
    return bench.Recorder(os.path.join(args.out, RESULTS), FAMILY, args.commit)


def parent_row(args, case, note):
    """A row written without torch (the parent never touches the GPU)."""
    row = {"date": datetime.date.today().isoformat(), "gpu": "NVIDIA H200", "commit": args.commit,
           "family": FAMILY, "case": case, "kind": "check", "note": note, "pass": False}
    with open(os.path.join(args.out, RESULTS), "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


# ---- the product path ---------------------------------------------------------------------

def load_case(kernrt, gen, args, case, variant=None):
    """A loaded runtime for `case` with its inputs written in place; returns (rt, inputs)."""
    import torch
    m = gen.pin(pc.manifest(case, variant), args.cubins)
    rt = kernrt.load(m, cubins=[args.cubins])
    kv = rt.buffer("kv")
    seed = zlib.crc32(case.name.encode())
    pc.fill_kv(kv, seed=seed & 0xFFFF)
    inputs = pc.make_inputs(case, seed=seed >> 16)
    rt.buffer("q")[:case.tokens].copy_(inputs["q"])
    rt.buffer("table")[:case.seqs].copy_(inputs["table"])
    rt.buffer("seq")[:case.seqs].copy_(inputs["seq"])
    rt.buffer("cuq")[:case.seqs + 1].copy_(inputs["cuq"])
    torch.cuda.synchronize()
    return rt, inputs


def run_ours(rt, case, stream, graph):
    rt.enqueue(pc.PROGRAM, stream=stream, graph=graph, tokens=case.tokens, seqs=case.seqs)


def poison(out):
    """NaN in every output row, so a row the kernel never writes fails the finite gate."""
    import torch
    out.view(torch.int16).fill_(0x7FC0)


# ---- phase: checks ----------------------------------------------------------------------------

def phase_checks(args):
    import torch
    import bench
    import kernrt
    from kernrt import gen
    rec = recorder(args)
    stream = torch.cuda.Stream()
    for case in pc.check_cases(args.quick):
        t0 = time.time()
        rt, inputs = load_case(kernrt, gen, args, case)
        ref = pc.reference(case, inputs, rt.buffer("kv"))
        out = rt.buffer("out")
        replays = SEED_REPLAYS if "seed" in case.name and not args.quick else 3
        for mode in ("eager", f"graph x{replays}"):
            poison(out)
            torch.cuda.synchronize()
            with torch.cuda.stream(stream):
                for _ in range(1 if mode == "eager" else replays):
                    run_ours(rt, case, stream, graph=mode != "eager")
            stream.synchronize()
            finite, rel, mx = bench.errors(out[:case.tokens], ref)
            ok = finite and rel < GATE and mx < GATE
            extra = {} if ok else {"diag": pc.diagnose(case, out[:case.tokens], ref)}
            rec.check(f"{case.name} [{mode}]", ok, shape=case.describe(), error=rel, max_abs=mx,
                      finite=finite, gate=GATE, vs="float32 reference",
                      secs=round(time.time() - t0, 2), **extra)
            if extra:
                bench.log(f"  diag {json.dumps(extra['diag'])}")
        rt.close()
        for v in ([] if args.no_variants else sorted(pc.VARIANTS)):
            vrt, _ = load_case(kernrt, gen, args, case, v)  # the same seeded inputs
            vout = vrt.buffer("out")
            poison(vout)
            with torch.cuda.stream(stream):
                run_ours(vrt, case, stream, graph=True)
            stream.synchronize()
            finite, rel, mx = bench.errors(vout[:case.tokens], ref)
            ok = finite and rel < GATE and mx < GATE
            extra = {} if ok else {"diag": pc.diagnose(case, vout[:case.tokens], ref)}
            rec.check(f"{case.name} [variant {v}]", ok, shape=case.describe(), error=rel,
                      max_abs=mx, finite=finite, gate=GATE, vs="float32 reference", **extra)
            vrt.close()
        del rt, out, inputs, ref
        torch.cuda.empty_cache()


# ---- phase: bench ---------------------------------------------------------------------------

def phase_bench(args):
    import torch
    import bench
    import kernrt
    from kernrt import gen
    import prefill_peers as pp
    rec = recorder(args)
    flush = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")  # > the 60 MB L2
    ceil = bench.floors(rec)
    rate_f, rate_b = ceil["gemm_flops"], ceil["copy_Bps"]
    try:
        fi = pp.flashinfer(args.peer_dir, args.allow_jit)
        fi_reason = None
    except pp.PeerUnavailable as e:
        fi, fi_reason = None, str(e)
        bench.log(f"flashinfer unavailable: {fi_reason}")
    stream = torch.cuda.current_stream()
    for case in pc.bench_cases(args.quick):
        if args.bench and not any(part in case.name for part in args.bench.split(",")):
            continue
        rt, inputs = load_case(kernrt, gen, args, case)
        kv = rt.buffer("kv")
        index, ref = pc.reference(case, inputs, kv, rows=pc.sample_rows(case))
        out = rt.buffer("out")
        poison(out)
        run_ours(rt, case, stream, graph=True)
        torch.cuda.synchronize()
        finite, rel, mx = bench.errors(out[index], ref)
        finite = finite and bool(torch.isfinite(out[:case.tokens].float()).all())
        ours_out = out[:case.tokens].clone()  # every row, against each peer below
        contenders = {"ours": lambda: run_ours(rt, case, stream, True)}
        peers, notes, keep = {}, {}, []
        variants = {}
        big = case.bytes() > VARIANT_MAX_BYTES  # each variant runtime holds its own KV copy
        if big and not args.no_variants:
            notes["variants"] = f"not run: K/V over {VARIANT_MAX_BYTES >> 30} GiB per runtime"
        for v in ([] if args.no_variants or big else sorted(pc.VARIANTS)):
            try:
                vrt, _ = load_case(kernrt, gen, args, case, v)
                vout = vrt.buffer("out")
                poison(vout)
                run_ours(vrt, case, stream, graph=True)
                torch.cuda.synchronize()
                v_fin, v_rel, v_max = bench.errors(vout[index], ref)
                notes["ours-" + v] = f"rel L2 {v_rel:.2e} max {v_max:.2e}" + ("" if v_fin else " NaN")
                if v_fin and v_rel < GATE and v_max < GATE:
                    contenders["ours-" + v] = (lambda r=vrt: run_ours(r, case, stream, True))
                variants[v] = vrt
            except Exception as e:  # noqa: BLE001 - a variant failing is a result
                notes["ours-" + v] = f"variant failed: {type(e).__name__}: {str(e)[:200]}"
        makers = [("flashinfer-fa3", lambda: pp.FlashInferPrefill(fi, "fa3", case, inputs, kv)),
                  ("flashinfer-fa2", lambda: pp.FlashInferPrefill(fi, "fa2", case, inputs, kv)),
                  ("cudnn-sdpa", lambda: pp.CudnnSdpa(case, inputs, kv))]
        for name, make in makers:
            if fi is None and name.startswith("flashinfer"):
                notes[name] = f"peer unavailable: {fi_reason}"
                continue
            try:
                peer = make()
                got = peer.output() if hasattr(peer, "output") else peer.out
                p_fin, p_rel, p_max = bench.errors(got[index], ref)
                _, a_rel, a_max = bench.errors(ours_out, got[:case.tokens])
                notes[name] = (f"vs reference rel L2 {p_rel:.2e} max {p_max:.2e}"
                               + ("" if p_fin else " NaN")
                               + f"; ours vs it (every row) rel L2 {a_rel:.2e} max {a_max:.2e}")
                contenders[name] = bench.torch_graph(peer.run).replay
                keep.append(peer)
            except pp.PeerUnavailable as e:
                notes[name] = f"peer unavailable: {e}"
            except Exception as e:  # noqa: BLE001 - a peer failing is a result, not a crash
                notes[name] = f"peer failed: {type(e).__name__}: {str(e)[:200]}"
            torch.cuda.synchronize()
        # L2 flushed before each call outside the events (a 128 MB memset: every case then
        # reads its K/V from HBM, as a serving step would)
        cold = dict(warmup=1, before=flush.zero_)
        est = statistics_median(bench.time_calls(contenders["ours"], 3, **cold))
        iters = max(5, min(40, int(1.0e6 / max(est, 1.0) / len(contenders) / 2)))
        times = bench.interleaved(contenders, iters, 2, **cold)
        ours = times.pop("ours")
        peers = times
        flop_us, byte_us = case.flops() / rate_f * 1e6, case.bytes() / rate_b * 1e6
        fi_best = min(((peers[n], n) for n in peers if n.startswith("flashinfer")), default=None)
        ours_variants = {n: peers.pop(n) for n in list(peers) if n.startswith("ours-")}
        r = dict(case=case.name, kind="bench", shape=case.describe(), ours_us=ours,
                 floor_us=max(flop_us, byte_us), floor="flops" if flop_us > byte_us else "bytes",
                 flop_floor_us=flop_us, byte_floor_us=byte_us, tflops=case.flops() / ours / 1e6,
                 frac_of_floor=max(flop_us, byte_us) / ours, peers=peers, peer_notes=notes,
                 variants_us=ours_variants, error=rel, max_abs=mx, gate=GATE, iters=iters,
                 **{"pass": finite and rel < GATE and mx < GATE})
        if fi_best:
            r.update(peer=fi_best[1], peer_us=fi_best[0], speedup_vs_peer=fi_best[0] / ours)
        if "cudnn-sdpa" in peers:
            r["vs_cudnn"] = peers["cudnn-sdpa"] / ours
        rec.add(**r)
        bench.log(f"{case.name}: ours {ours:.1f} us ({r['tflops']:.0f} TF/s), peers "
                  f"{ {k: round(v, 1) for k, v in peers.items()} }, floor {r['floor_us']:.1f}")
        del contenders, keep, ours_out
        for vrt in variants.values():
            vrt.close()
        rt.close()
        del rt, kv, out, inputs, ref, index
        torch.cuda.empty_cache()


def statistics_median(xs):
    import statistics
    return statistics.median(xs)


# ---- phase: program_io ------------------------------------------------------------------------

def phase_program_io(args):
    import torch
    import bench
    rec = recorder(args)
    program_io = os.path.join(args.build, "bin", "program_io")
    sys.path.insert(0, os.path.join(pc.REPO, "tools", "gen"))
    import example_io
    for name in ("prefill", "verify"):
        manifest = os.path.join(args.build, "examples", "h200", f"{name}.json")
        if not os.access(program_io, os.X_OK) or not os.path.exists(manifest):
            rec.check(f"program_io examples/h200/{name}.json", False,
                      note="not run: program_io or the pinned example is not built")
            continue
        with tempfile.TemporaryDirectory(prefix="kernrt-prefill-") as work:
            info = example_io.write_inputs(manifest, work)
            ref = reference_from_files(example_io, manifest, work)
            for mode in ([], ["--graph", "--iters", str(SEED_REPLAYS)]):
                cmd = [program_io, "--manifest", manifest, "--cubins", args.cubins]
                for var, value in sorted(info["vars"].items()):
                    cmd += ["--vars", f"{var}={value}"]
                for inp in example_io.INPUTS:
                    cmd += ["--in", f"{inp}={os.path.join(work, inp + '.bin')}"]
                cmd += ["--out", f"out={os.path.join(work, 'out.bin')}"] + mode
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                label = f"program_io examples/h200/{name}.json [{'graph' if mode else 'eager'}]"
                if done.returncode != 0:
                    rec.check(label, False, note=done.stderr[-400:])
                    continue
                raw = open(os.path.join(work, "out.bin"), "rb").read()
                got = torch.frombuffer(bytearray(raw), dtype=torch.bfloat16)[:ref.numel()]
                finite, rel, mx = bench.errors(got.cuda().view_as(ref), ref)
                rec.check(label, finite and rel < GATE and mx < GATE, error=rel, max_abs=mx,
                          finite=finite, gate=GATE, vs="float32 reference")


def reference_from_files(example_io, manifest, work):
    """The float32 reference of a committed example from the .bin inputs example_io wrote."""
    import torch
    d = example_io.describe(manifest)
    rd = lambda n, t: torch.frombuffer(bytearray(open(os.path.join(work, n + ".bin"), "rb").read()),
                                       dtype=t)
    seqs, q_len = d["vars"]["seqs"], d["q_len"]
    lens = rd("seq", torch.int32).tolist()
    case = pc.Case("example", [q_len] * seqs, lens, layers=d["layers"],
                   layer=d["k_offset"] * 2 // (pc.PAGE * pc.HEADS_KV * 2 * pc.DIM * 2))
    kv = rd("kv", torch.bfloat16).cuda().view(d["pages"], d["layers"], pc.PAGE, pc.HEADS_KV, 2,
                                              pc.DIM)
    inputs = {"q": rd("q", torch.bfloat16).cuda().view(-1, pc.HEADS_Q, pc.DIM),
              "table": rd("table", torch.int32).cuda().view(seqs, -1),
              "cuq": rd("cuq", torch.int32).cuda()}
    return pc.reference(case, inputs, kv)


# ---- driver -----------------------------------------------------------------------------------

def dry_run(args):
    """CPU only: every case's manifest, pinned when the cubin is built, through kernrt-verify."""
    from kernrt import gen
    verifier = os.path.join(args.build, "bin", "kernrt-verify")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="kernrt-prefill-dry-") as work:
        for i, case in enumerate(pc.check_cases() + pc.bench_cases()):
            m = pc.manifest(case)
            if os.path.exists(os.path.join(args.cubins, "attention_prefill.sm90a.cubin")):
                m = gen.pin(m, args.cubins)
            path = os.path.join(work, f"case{i}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(m, f)
            done = subprocess.run([verifier, "--cubins", args.cubins, path], capture_output=True,
                                  text=True)
            ok = "verified" in done.stdout
            failed += not ok
            print(f"{case.name:36s} {'verified' if ok else 'REJECTED ' + done.stdout + done.stderr}")
    return 1 if failed else 0


def table(args):
    rows = [json.loads(x) for x in open(os.path.join(args.out, RESULTS), encoding="utf-8")]
    checks = [r for r in rows if r["kind"] == "check"]
    print(f"\nchecks: {sum(r['pass'] for r in checks)}/{len(checks)} pass")
    for r in checks:
        if not r["pass"]:
            print(f"  FAIL {r['case']}: {r.get('error', '')} {r.get('note', '')}")
    print(f"\n{'case':34s} {'ours us':>9s} {'TF/s':>6s} {'fa3':>9s} {'fa2':>9s} {'cudnn':>9s} "
          f"{'floor':>9s} {'vs FI':>6s} {'of floor':>8s}  variants")
    for r in rows:
        if r["kind"] != "bench":
            continue
        p = r["peers"]
        f = lambda n: f"{p[n]:9.1f}" if n in p else f"{'-':>9s}"
        sp = f"{r['speedup_vs_peer']:6.3f}" if "speedup_vs_peer" in r else f"{'-':>6s}"
        print(f"{r['case']:34s} {r['ours_us']:9.1f} {r['tflops']:6.0f} {f('flashinfer-fa3')} "
              f"{f('flashinfer-fa2')} {f('cudnn-sdpa')} {r['floor_us']:9.1f} {sp} "
              f"{100 * r['frac_of_floor']:7.1f}%{'' if r['pass'] else '  WRONG'}  "
              + " ".join(f"{k} {v:.1f}" for k, v in r.get("variants_us", {}).items()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory")
    ap.add_argument("--out", required=True, help="directory for attention_prefill.jsonl")
    ap.add_argument("--commit", default="unknown", help="commit the build is from")
    ap.add_argument("--quick", action="store_true", help="fewer cases and replays")
    ap.add_argument("--peer-dir", default=os.path.join(pc.REPO, ".peer", "flashinfer"),
                    help="FlashInfer's prebuilt modules (see .peer/README.txt)")
    ap.add_argument("--allow-jit", action="store_true", help="let FlashInfer JIT-compile")
    ap.add_argument("--dry-run", action="store_true", help="CPU only: verify the manifests")
    ap.add_argument("--no-variants", action="store_true",
                    help="time only the shipped entry (not the live alternatives beside it)")
    ap.add_argument("--bench", default="",
                    help="time only the bench cases whose name holds one of these comma-separated "
                         "parts (an experiment; a record times every case)")
    ap.add_argument("--phase", choices=("checks", "bench", "program_io"), help=argparse.SUPPRESS)
    ap.add_argument("--timeouts", default="150,300,120", help="seconds per phase")
    args = ap.parse_args(argv)
    args.build = os.path.abspath(args.build)
    args.cubins = os.path.join(args.build, "cubins", "run")
    # bench.use_build's pointers, set here because this parent process never imports torch
    os.environ["KERNRT_LIBRARY"] = os.path.join(args.build, "lib", "libkernrt.so")
    os.environ["KERNRT_CUBINS"] = args.cubins
    if args.dry_run:
        return dry_run(args)
    os.makedirs(args.out, exist_ok=True)
    if args.phase:
        {"checks": phase_checks, "bench": phase_bench, "program_io": phase_program_io}[
            args.phase](args)
        return 0
    open(os.path.join(args.out, RESULTS), "w").close()
    for phase, limit in zip(("checks", "bench", "program_io"),
                            (int(x) for x in args.timeouts.split(","))):
        cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase] + \
              [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--dry-run"]
        t0 = time.time()
        try:
            rc = subprocess.run(cmd, timeout=limit).returncode
            print(f"phase {phase}: exit {rc} after {time.time() - t0:.0f} s", flush=True)
        except subprocess.TimeoutExpired:
            print(f"phase {phase}: TIMED OUT after {limit} s (hang?)", flush=True)
            parent_row(args, f"phase {phase}", f"timed out after {limit} s")
    table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
