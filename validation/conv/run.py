#!/usr/bin/env python3
"""The conv family's device entry: timing and correctness through the product path, one call.

Usage: python3 validation/conv/run.py --build BUILD --out OUT --commit SHA [--quick]
           [--budget SECONDS]

Owns the run order, the floors and the records. 1. timing (timing.py): the decode update
at B64 D4096 and B256 D8192 (c4s2p over our pool lines, c4p over fla's [N, D, W] cache, the
drop-in's form; each also at one sequence, the per-call latency floor) next to fla 0.6.0's
causal_conv1d_update, then the four forward shapes (B8 T4096 D2048 / D4096, B16 T8192
D2048, B1 T32768 D4096; W4 silu bf16, f32 weight) for the shipped forward (ring8x4h, spans
16 / 24 / 32) next to fla's causal_conv1d and kernel-fun's cconv.causal_conv1d. Every
floor is the bytes the call must move (forward: x read + y written; decode: state read + written, x, y)
at the copy rate of validation/common's 4 GB device copy, measured at the start of this
call. Beside each floor, copies of exactly those bytes timed the same way: torch's copy of
the same buffers (`copy_us`, the driver's memcpy; captured, 512 MiB tensors ran at 2.7 TB/s
where this rate was 4.23) and an SM copy kernel (sm_copy.py, `sm_copy_us`, the faster of
two program shapes; decode rows over our lines). 2. correctness (cases.py) for the shipped
entries, fla's forward pinned to one Triton config first (its per-output arithmetic does
not depend on the config; without it a fresh machine autotunes every check shape). Writes OUT/conv.jsonl (one row per case: DESIGN.md's schema) as it goes and
prints the table last. Peers import lazily; a missing or failing one is recorded as "peer
unavailable: <why>", and kernel-fun's is_supported reason when it would fall back to fla
(then its column is fla's kernel, and the row says so).
A watchdog thread ends the process at --budget + 60 s whatever it is stuck in (rows
already written stay); the phases themselves stop starting work at the budget. Expect
60-90 s with a warm TRITON_CACHE_DIR (fla's compiles and autotune results, kernel-fun's
compiles; kernel-fun re-benchmarks its 18 configs per shape, ~2-3 s each), about a minute
more on a cold one.

Does not build anything (BUILD must hold lib/libkernrt.so and cubins/run/), install peers
(PYTHONPATH must have them), or compare with earlier runs.
"""
import argparse
import datetime
import faulthandler
import json
import os
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

FWD_SHAPES = [(8, 4096, 2048), (8, 4096, 4096), (16, 8192, 2048), (1, 32768, 4096)]
UPDATE_SHAPES = [(64, 4096), (256, 8192)]
FWD_LOADERS = ["ring8x4h"]   # the loaders checked and timed: kernrt.gen.conv's FWD_KERNELS
UPDATE_LOADERS = {"lines": ["c4s2p"], "fla": ["c4p"]}  # and UPDATE_KERNELS, per state layout


def fwd_candidates(g):
    """label -> loader of every forward timing."""
    return {k: k for k in FWD_LOADERS}


def update_candidates():
    """label -> (layout, loader) of every decode timing: our lines and fla's cache."""
    return {(k if layout == "lines" else f"{k}_fla"): (layout, k)
            for layout, ks in UPDATE_LOADERS.items() for k in ks}


def sm_copy_fields(res, floor):
    """Row fields of the fastest same-bytes SM copy in res (sm_copy.py), or {}."""
    cs = {k.split(":", 1)[1]: v for k, v in res.items() if k.startswith("sm_copy:") and v}
    if not cs:
        return {}
    best = min(cs, key=cs.get)
    return {"sm_copy_us": _r(cs[best]), "sm_copy_config": best, "sm_copy_frac_of_floor": round(floor / cs[best], 3),
            "sm_copy_candidates_us": {k: _r(v) for k, v in cs.items()}}


def peers():
    """(fla namespace or None, {name: fwd fn or None}, fla update fn or None, notes)."""
    notes = {}
    fla = fla_update = None
    fwd = {}
    try:
        from fla.modules.causal_conv1d import causal_conv1d, causal_conv1d_update
        import fla as fla_pkg
        fla = types.SimpleNamespace(causal_conv1d=causal_conv1d, causal_conv1d_update=causal_conv1d_update,
                                    version=getattr(fla_pkg, "__version__", "?"))
        fwd["fla"] = lambda x, w: causal_conv1d(x, w, None, activation="silu")[0]
        fla_update = causal_conv1d_update
    except Exception as e:  # noqa: BLE001
        notes["fla"] = f"peer unavailable: {type(e).__name__}: {e}"[:200]
    try:
        import kernel_fun
        from kernel_fun import cconv
        kf_version = getattr(kernel_fun, "__version__", "?")
        fwd["kernel-fun"] = lambda x, w: cconv.causal_conv1d(x=x, weight=w, activation="silu")[0]
        fwd["_kf_supported"] = cconv.is_supported
        try:  # evidence that its own kernel ran: its autotuner learns one key per new shape
            from kernel_fun.cconv._kernels import strip
            fwd["_kf_keys"] = lambda: len(getattr(strip.cconv_fwd_strip, "cache", {}))
        except Exception:  # noqa: BLE001
            pass
        notes["kernel-fun-version"] = kf_version
    except Exception as e:  # noqa: BLE001
        notes["kernel-fun"] = f"peer unavailable: {type(e).__name__}: {e}"[:200]
    return fla, fwd, fla_update, notes


def pin_fla_forward_config():
    """fla's forward kernel on its first autotune config from now on (checks only)."""
    import fla.modules.causal_conv1d.ops as ops
    from triton.runtime.autotuner import Autotuner
    tuner = getattr(ops, "causal_conv1d_fwd_kernel", None)
    while tuner is not None and not isinstance(tuner, Autotuner):  # under @heuristics
        tuner = getattr(tuner, "fn", None)
    if tuner is not None:
        tuner.configs = list(tuner.configs[:1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory")
    ap.add_argument("--out", required=True, help="directory for conv.jsonl")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer timing reps")
    ap.add_argument("--checks-only", action="store_true",
                    help="no timing: the correctness cases and the program_io examples only")
    ap.add_argument("--timing-only", action="store_true",
                    help="no checks and no program_io examples: the timing phase only")
    ap.add_argument("--no-peers", action="store_true",
                    help="do not import fla or kernel-fun (ours and the copies only: a quick "
                         "comparison of candidates)")
    ap.add_argument("--shapes", nargs="+", default=None, metavar="TEXT",
                    help="time only the shapes whose label contains one of these texts "
                         "(labels: 'update B256 D8192', 'fwd B8 T4096 D2048', ...)")
    ap.add_argument("--fwd-calls", type=int, default=8, metavar="K",
                    help="forward calls per timed graph, ours, the peers and the copies alike "
                         "(per call = replay / K; a larger K leaves less of a replay's start and "
                         "end to each call: for attributing fixed costs, the record keeps 8)")
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds after which no new shape or case starts (the watchdog ends the "
                         "process 60 s later)")
    a = ap.parse_args()
    if a.fwd_calls < 1:
        ap.error(f"--fwd-calls {a.fwd_calls}: needs at least one call per graph")
    t0 = time.monotonic()
    deadline = t0 + a.budget
    faulthandler.dump_traceback_later(a.budget + 60, exit=True)
    build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(REPO, "runtime", "python"))
    sys.path.insert(0, os.path.join(REPO, "validation", "common"))
    sys.path.insert(0, HERE)
    import torch
    import bench as common  # validation/common: use_build, the copy ceiling, the GPU serial
    cubins = common.use_build(build)
    import kernrt
    from kernrt.gen import conv as g
    import cases
    import timing

    if not kernrt.device_available():
        print("conv run: no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    out_path = os.path.join(a.out, "conv.jsonl")
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
            "gpu_serial": common.gpu_serial(), "commit": a.commit, "family": "conv"}
    out = open(out_path, "a")

    def emit(row):
        out.write(json.dumps(dict(meta, **row)) + "\n")
        out.flush()

    if a.no_peers:
        fla, fwd_peers, fla_update, notes = None, {}, None, {"peers": "not imported (--no-peers)"}
    else:
        fla, fwd_peers, fla_update, notes = peers()
    kf_ok = fwd_peers.pop("_kf_supported", None)
    kf_keys = fwd_peers.pop("_kf_keys", None)
    print(f"gpu={meta['gpu']} fla={getattr(fla, 'version', None)} kernel-fun={notes.get('kernel-fun-version')} "
          f"{ {k: v for k, v in notes.items() if 'unavailable' in v} }", flush=True)
    table = []
    reps = 10 if a.quick else 20
    ceiling = common.copy_rate()  # 4 GB device copy, read + write: every floor's rate
    emit({"case": "ceiling: device-to-device copy 4 GB (read + write)", "kind": "ceiling",
          "bytes_per_s": ceiling})
    print(f"copy ceiling {ceiling / 1e12:.3f} TB/s", flush=True)

    # ---- 1. timing ---------------------------------------------------------------------
    ucands = update_candidates()
    def wanted(label):
        return not a.checks_only and (a.shapes is None or any(t in label for t in a.shapes))

    for N, D in [(N, D) for N, D in UPDATE_SHAPES if wanted(f"update B{N} D{D}")]:
        if time.monotonic() > deadline - 10:
            print(f"SKIP update B{N} D{D}: out of time", flush=True)
            continue
        pc = ucands
        with torch.no_grad():
            res, why, ours_bytes, fla_bytes = timing.update_shape(cubins, pc, fla_update, N, D, reps=reps)
        torch.cuda.empty_cache()
        rate = ceiling
        lines_c = [k for k in pc if pc[k][0] == "lines" and res.get(k)]
        fla_c = [k for k in pc if pc[k][0] == "fla" and res.get(k)]
        for layout, cs, nb in (("our lines", lines_c, ours_bytes), ("fla cache", fla_c, fla_bytes)):
            if not cs:
                continue
            best = min(cs, key=lambda k: res[k])
            floor = nb / rate * 1e6
            case = f"update B{N} D{D} W4 silu bf16 wf32 ({layout}, graph)"
            row = {"case": case, "kind": "bench", "candidates_us": {k: _r(res[k]) for k in cs}, "ours": best,
                   "ours_us": _r(res[best]), "floor_us": _r(floor), "frac_of_floor": round(floor / res[best], 3),
                   "floor_nominal_us": _r(nb / timing.NOMINAL_BW * 1e6), "floor_rate_tbs": round(rate / 1e12, 3)}
            if res.get("fla"):
                row.update(peer=f"fla {getattr(fla, 'version', '')}", peer_us=_r(res["fla"]),
                           speedup_vs_peer=round(res["fla"] / res[best], 3))
            row["candidates_seqs1_us"] = {k: _r(res.get(f"{k}@1")) for k in cs}
            if res.get(f"{best}@1"):
                row["ours_seqs1_us"] = _r(res[f"{best}@1"])
            if res.get("fla@1"):
                row["peer_seqs1_us"] = _r(res["fla@1"])
            if layout == "our lines":  # the copy moves our lines' bytes
                row.update(sm_copy_fields(res, floor))
            if why:
                row["notes"] = why
            emit(row)
            table.append(row)
        print(f"update B{N} D{D}: " + " ".join(f"{k}={_r(v)}" for k, v in res.items()), flush=True)


    cands = fwd_candidates(g)
    for B, T, D in [(B, T, D) for B, T, D in FWD_SHAPES if wanted(f"fwd B{B} T{T} D{D}")]:
        if time.monotonic() > deadline - 15:
            print(f"SKIP fwd B{B} T{T} D{D}: out of time", flush=True)
            continue
        shape_peers = dict(fwd_peers)
        kf_note = None
        if kf_ok is not None and "kernel-fun" in shape_peers:
            ok, why = kf_ok(torch.empty(1, 8, D, device="cuda", dtype=torch.bfloat16),
                            torch.empty(D, 4, device="cuda", dtype=torch.float32), activation="silu")
            if not ok:
                kf_note = f"kernel-fun falls back to fla here: {why}"
                shape_peers.pop("kernel-fun")
        pc = cands
        keys0 = kf_keys() if kf_keys else None
        with torch.no_grad():
            res, why, nbytes = timing.fwd_shape(cubins, pc, shape_peers, B, T, D, calls=a.fwd_calls,
                                                reps=reps)
        torch.cuda.empty_cache()
        if kf_keys and res.get("kernel-fun") and kf_keys() <= keys0:
            kf_note = "kernel-fun's autotuner learnt no key here: its own kernel may not have run"
        best = min((k for k in pc if res.get(k)), key=lambda k: res[k], default=None)
        case = f"fwd B{B} T{T} D{D} W4 silu bf16 wf32"
        floor = nbytes / ceiling * 1e6
        row = {"case": case, "kind": "bench", "calls_per_graph": a.fwd_calls,
               "candidates_us": {k: _r(res.get(k)) for k in pc},
               "floor_us": _r(floor), "floor_rate_tbs": round(ceiling / 1e12, 3),
               "floor_nominal_us": _r(nbytes / timing.NOMINAL_BW * 1e6),
               "copy_us": _r(res.get("copy"))}
        if res.get("copy"):
            row["copy_frac_of_floor"] = round(floor / res["copy"], 3)
        row.update(sm_copy_fields(res, floor))
        if best:
            row.update(ours=best, ours_us=_r(res[best]))
            row["frac_of_floor"] = round(floor / res[best], 3)
        for peer in ("kernel-fun", "fla"):
            if res.get(peer):
                row[f"{peer}_us"] = _r(res[peer])
                if best:
                    row[f"speedup_vs_{peer}"] = round(res[peer] / res[best], 3)
        if res.get("kernel-fun") or res.get("fla"):
            pk = "kernel-fun" if res.get("kernel-fun") else "fla"
            row.update(peer=f"{pk} {notes.get('kernel-fun-version') if pk == 'kernel-fun' else getattr(fla, 'version', '')}",
                       peer_us=_r(res[pk]), speedup_vs_peer=row.get(f"speedup_vs_{pk}"))
        notes_here = {k: v for k, v in why.items()}
        if kf_note:
            notes_here["kernel-fun"] = kf_note
        for k in ("fla", "kernel-fun"):
            if k in notes and "unavailable" in notes[k]:
                notes_here[k] = notes[k]
        if notes_here:
            row["notes"] = notes_here
        emit(row)
        table.append(row)
        print(f"{case}: " + " ".join(f"{k}={_r(v)}" for k, v in res.items()), flush=True)

    if a.timing_only:
        print_table(table)
        return 0

    # ---- 2. correctness ----------------------------------------------------------------
    if fla is not None:
        try:
            pin_fla_forward_config()
        except Exception as e:  # noqa: BLE001
            print(f"fla forward config not pinned: {e}", flush=True)
    ck = cases.Checker(cubins, emit, fla, deadline)
    cases.run_all(ck, FWD_LOADERS, UPDATE_LOADERS["lines"], UPDATE_LOADERS["fla"], a.quick)
    print(f"\nchecks: {ck.passed} passed, {ck.failed} failed; failing per candidate: {ck.failing or 'none'}")

    # ---- 3. the pinned examples through program_io (eager and graph, two processes) -----
    pio, pinned = os.path.join(build, "bin", "program_io"), os.path.join(build, "examples", "conv")
    if os.path.isfile(pio) and os.path.isdir(pinned) and time.monotonic() < deadline:
        import subprocess
        cmd = [sys.executable, os.path.join(REPO, "examples", "conv", "run_examples.py"), "--program-io", pio,
               "--cubins", cubins, "--manifests", pinned, "--work", os.path.join(a.out, "pio"),
               "--jsonl", out_path, "--meta", json.dumps(meta)]
        os.makedirs(os.path.join(a.out, "pio"), exist_ok=True)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            print("program_io examples:", r.stdout.strip().splitlines()[-1:] or r.stderr.strip()[-300:], flush=True)
            if r.returncode != 0:
                ck.failed += 1
        except subprocess.TimeoutExpired:
            print("program_io examples: timed out after 30 s", flush=True)
            ck.failed += 1

    print_table(table)
    print(f"\n{ck.passed} passed, {ck.failed} failed ({time.monotonic() - t0:.0f} s)")
    return 0 if ck.failed == 0 else 1


def print_table(table):
    print(f"\n{'case':<52} {'ours':>10} {'us':>8} {'floor':>7} {'%floor':>7} {'x kf':>6} {'x fla':>6} "
          f"{'smcopy':>7} {'%floor':>7} {'memcpy':>7}")
    for r in table:
        print(f"{r['case']:<52} {r.get('ours', '-'):>10} {r.get('ours_us') or float('nan'):8.2f} "
              f"{r.get('floor_us') or float('nan'):7.2f} {100 * (r.get('frac_of_floor') or float('nan')):6.1f}% "
              f"{r.get('speedup_vs_kernel-fun') or float('nan'):6.2f} "
              f"{r.get('speedup_vs_fla') or r.get('speedup_vs_peer') or float('nan'):6.2f} "
              f"{r.get('sm_copy_us') or float('nan'):7.2f} {100 * (r.get('sm_copy_frac_of_floor') or float('nan')):6.1f}% "
              f"{r.get('copy_us') or float('nan'):7.2f}")
        print("    " + " ".join(f"{k}={v}" for k, v in r.get("candidates_us", {}).items())
              + "".join(f"  [{k}: {v}]" for k, v in r.get("notes", {}).items()))


def _r(v):
    return None if v is None else round(v, 2)


if __name__ == "__main__":
    sys.exit(main())
