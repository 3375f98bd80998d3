#!/usr/bin/env python3
"""Run the kda example manifests through program_io (eager and graph) and check them.

Owns: seeded random inputs for each pinned example (build/examples/kda/*.json), one eager and
one graph run of program_io's `main` program (prefill of packed fresh sequences into pool
lines -> decode -> verify -> commit of a per-sequence accepted count; two processes, each from
zeroed state), the bit-identity of their outputs and state dumps, and kda_ref.py's float64
reference (numpy) of the whole chain: outputs within rel rms 2e-3 of the bf16-rounded
reference, the pool lines' final states within 2e-3 of the float64 states. Appends one JSONL
line per example. Does not check timing or any manifest rule.
Usage: run_examples.py --program-io BIN --cubins DIR --manifests DIR --work DIR [--jsonl F]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "validation", "kda"))
import kda_ref as ref  # noqa: E402

GATE = 2e-3
K = 128


def bf16_bits(a):
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_val(b):
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def op_fields(m, op):
    ln = m["ops"][op]["impl"]["launches"][0]
    return {f["at"]: f for f in ln["args"][0]["pack"]["fields"]}, ln["entry"]


def profile_of(m):
    """(kind, H, HV, V, flags, scale, lower_bound, steps) from the decode and verify packs."""
    f, entry = op_fields(m, "verify")
    return (entry.split("_")[0], f[184]["i32"], f[188]["i32"], f[192]["i32"], f[204]["i32"],
            f[208]["f32"], f.get(212, {}).get("f32"), f[200]["i32"])


def make_inputs(rng, m):
    kind, H, HV, V, flags, scale, lb, steps = profile_of(m)
    bufs = m["buffers"]
    gate = bool(flags & 1)
    # 4 sequences of 1 .. 63 tokens; for the context-parallel example (2 sequences, 4 segments
    # of 64 tokens) one that overflows into the last segment
    lens = [37, 1, 63, 16] if m["vars"]["seqs"]["max"] >= 4 else [300, 77]
    N = len(lens)
    cu = np.array([0] + list(np.cumsum(lens)), dtype=np.int32)
    T = int(cu[-1])
    slots = list(range(1, N + 1))[::-1]
    ins, vals = {}, {}

    def tensor(name, shape, kind_):
        dt = bufs[name]["dtype"]
        if kind_ == "g":
            x = rng.standard_normal(shape)
            if not gate:
                x = -np.abs(x) * 0.3
        elif kind_ == "beta":
            x = rng.standard_normal(shape) if flags & 4 else 2 / (1 + np.exp(-rng.standard_normal(shape)))
        else:
            x = rng.standard_normal(shape)
        if dt == "bf16":
            b = bf16_bits(x)
            return b, bf16_val(b)
        f = np.asarray(x, np.float32)
        return f, f.astype(np.float64)

    gw = K if kind == "kda" else 1
    for pre, lead in (("pre", [1, T]), ("dec", [N, 1]), ("ver", [N, steps])):
        shapes = {"q": lead + [H, K], "k": lead + [H, K], "v": lead + [HV, V],
                  "g": lead + ([HV, K] if kind == "kda" else [HV]), "beta": lead + [HV]}
        for name, shape in shapes.items():
            raw, val = tensor(f"{pre}_{name}", shape, "g" if name == "g" else ("beta" if name == "beta" else "x"))
            ins[f"{pre}_{name}"], vals[f"{pre}_{name}"] = raw, val
    if gate:
        ins["A_log"] = np.log(rng.uniform(1, 16, HV)).astype(np.float32)
        ins["dt_bias"] = (0.5 * rng.standard_normal(HV * gw)).astype(np.float32)
    ins["cu_seqlens"] = cu
    ins["lines"] = np.array([slots], dtype=np.int32)
    ins["accepted"] = np.array([(3 * n + 1) % (steps + 1) for n in range(N)], dtype=np.int32)
    opts = dict(l2norm_qk=bool(flags & 16), gate_in_kernel=gate, A_log=ins.get("A_log"),
                dt_bias=ins.get("dt_bias"), lower_bound=lb, beta_sigmoid=bool(flags & 4),
                allow_neg_eigval=bool(flags & 8))
    return dict(N=N, T=T, cu=cu, slots=slots, steps=steps, H=H, HV=HV, V=V, scale=scale,
                opts=opts), ins, vals


def reference(meta, vals, accepted):
    """Expected outputs and per-line states of main = prefill, decode, verify, commit."""
    N, cu, sc, opts = meta["N"], meta["cu"], meta["scale"], meta["opts"]
    run = lambda pre, sl, h0, cu_=None: ref.recurrent(
        *(vals[f"{pre}_{n}"][sl] for n in ("q", "k", "v", "g", "beta")), scale=sc,
        initial_state=h0, cu_seqlens=cu_, **opts)
    o_pre, s1 = run("pre", slice(None), None, list(cu))
    o_dec, s2 = run("dec", slice(None), s1)
    o_ver, _ = run("ver", slice(None), s2)
    s3 = s2.copy()
    for n in range(N):
        a = int(accepted[n])
        if a:
            _, sn = run("ver", (slice(n, n + 1), slice(0, a)), s2[n:n + 1])
            s3[n] = sn[0]
    return {"pre_o": o_pre[0], "dec_o": o_dec[:, 0], "ver_o": o_ver}, s3


def run_pio(args, manifest, vars_, ins, outs, dump, graph, tag):
    cmd = [args.program_io, "--manifest", manifest, "--cubins", args.cubins, "--program", "main"]
    for k, v in vars_.items():
        cmd += ["--vars", f"{k}={v}"]
    for k, arr in ins.items():
        path = os.path.join(args.work, f"{tag}.in.{k}.bin")
        np.ascontiguousarray(arr).tofile(path)
        cmd += ["--in", f"{k}={path}"]
    paths = {}
    for k in outs + [dump]:
        paths[k] = os.path.join(args.work, f"{tag}.{'graph' if graph else 'eager'}.{k}.bin")
        cmd += ["--out" if k in outs else "--dump", f"{k}={paths[k]}"]
    if graph:
        cmd.append("--graph")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"program_io exit {p.returncode}: {p.stderr.strip()[:600]}")
    return paths


def check_example(args, name, rng):
    path = os.path.join(args.manifests, f"{name}.json")
    m = json.load(open(path))
    meta, ins, vals = make_inputs(rng, m)
    outs = ["pre_o", "dec_o", "ver_o"]
    vars_ = {"seqs": meta["N"], "tokens": meta["T"]}
    pe = run_pio(args, path, vars_, ins, outs, "kda", False, name)
    pg = run_pio(args, path, vars_, ins, outs, "kda", True, name)
    same = all(open(pe[k], "rb").read() == open(pg[k], "rb").read() for k in outs + ["kda"])
    want, states = reference(meta, vals, ins["accepted"])
    errs = {}
    for k in outs:
        shape = want[k].shape
        got = bf16_val(np.fromfile(pe[k], dtype=np.uint16)[:int(np.prod(shape))]).reshape(shape)
        errs[k] = ref.rel_rms(got, bf16_val(bf16_bits(want[k])))
    pool = np.fromfile(pe["kda"], dtype=np.uint8)
    slot = m["states"]["kda"]["bytes_per_seq"]
    sb = meta["HV"] * meta["V"] * K * 4
    for n, ln in enumerate(meta["slots"]):
        got = pool[ln * slot: ln * slot + sb].view(np.float32).reshape(meta["HV"], meta["V"], K)
        errs[f"state line {ln}"] = ref.rel_rms(got.astype(np.float64), states[n])
    ok = same and all(e <= GATE for e in errs.values())
    return ok, same, errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program-io", required=True)
    ap.add_argument("--cubins", required=True)
    ap.add_argument("--manifests", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--jsonl", default="")
    ap.add_argument("--meta", default="{}")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(11)
    fails = 0
    names = ("kda_chain", "gdn_chain", "kda_cp")
    for name in names:
        try:
            ok, same, errs = check_example(args, name, rng)
        except Exception as e:  # noqa: BLE001 - report every example
            ok, same, errs = False, False, {"exception": str(e)[:300]}
        fails += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'}  program_io {name:<10} eager==graph {same}  err "
              f"{ {k: (round(v, 6) if isinstance(v, float) else v) for k, v in errs.items()} }", flush=True)
        if args.jsonl:
            num = [v for v in errs.values() if isinstance(v, float)]
            rec = dict(json.loads(args.meta), case=f"program_io {name} main eager+graph", kind="check",
                       error=max(num) if num else float("inf"), gate=GATE,
                       eager_graph_identical=same, **{"pass": ok})
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(rec) + "\n")
    print(f"{len(names) - fails} passed, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
