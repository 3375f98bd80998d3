#!/usr/bin/env python3
"""Run the conv example manifests through program_io (eager and graph) and check them.

Owns: seeded random inputs for each pinned example (build/examples/conv/*.json), one eager
and one graph run of program_io per example (two processes, each from freshly zeroed
state), the bit-identity of their outputs and state dumps, and a float64 numpy reference
of the conv math (kernels/conv/README.md): outputs within rms 1e-3 of the correctly
rounded reference, state lines bit-exact. Appends one JSONL line per example.
Does not check: timing beyond one informational `--iters` graph run, or any manifest rule.
Usage: run_examples.py --program-io BIN --cubins DIR --manifests DIR --work DIR [--jsonl F]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

GATE = 1e-3


def to_bf16_bits(a):
    """float -> bf16 bit patterns (uint16), round to nearest even."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


class Dt:
    """Codec of one 16-bit float dtype: bits <-> float64."""

    def __init__(self, name):
        self.name = name

    def enc(self, a):
        if self.name == "bf16":
            return to_bf16_bits(a)
        return np.asarray(a, dtype=np.float16).view(np.uint16)

    def dec(self, bits):
        if self.name == "bf16":
            return from_bf16_bits(bits).astype(np.float64)
        return bits.view(np.float16).astype(np.float64)

    def round(self, a):
        return self.dec(self.enc(a))


def conv_seq(x, w, b, silu, init):
    """x [T, D] f64, w [D, W], init [D, W-1] -> (y [T, D], final [D, W-1])."""
    T, D = x.shape
    W = w.shape[1]
    xp = np.concatenate([init.T, x], 0)
    z = np.zeros((T, D)) + (b if b is not None else 0.0)
    for j in range(W):
        z += w[:, j] * xp[j:j + T]
    y = z / (1.0 + np.exp(-z)) if silu else z
    return y, xp[T:T + W - 1].T.copy()


def rel_rms(got, want_rounded, want):
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.sqrt(np.mean((got - want_rounded) ** 2)) / max(np.sqrt(np.mean(want ** 2)), 1e-30))


def run_pio(args, manifest, vars_, ins, outs, dumps, graph, work, tag, iters=0):
    cmd = [args.program_io, "--manifest", manifest, "--cubins", args.cubins]
    for k, v in vars_.items():
        cmd += ["--vars", f"{k}={v}"]
    for k, arr in ins.items():
        path = os.path.join(work, f"{tag}.in.{k}.bin")
        arr.tofile(path)
        cmd += ["--in", f"{k}={path}"]
    paths = {}
    for k in outs + dumps:
        paths[k] = os.path.join(work, f"{tag}.{'graph' if graph else 'eager'}.{k}.bin")
        cmd += ["--out" if k in outs else "--dump", f"{k}={paths[k]}"]
    if graph:
        cmd.append("--graph")
    if iters:
        cmd += ["--iters", str(iters), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"program_io exit {p.returncode}: {p.stderr.strip()[:600]}")
    return paths, p.stdout.strip()


def example_prefill(rng, m, verify):
    D = m["buffers"]["x"]["shape"][1]
    W = m["buffers"]["weight"]["shape"][1]
    dt = Dt(m["buffers"]["x"]["dtype"])
    lens = [3, 25, 1, 40] if verify else [1, 2, 40, 30]
    cu = np.array([0] + list(np.cumsum(lens)), dtype=np.int32)
    T, N = int(cu[-1]), len(lens)
    per_seq = m["states"]["conv"]["bytes_per_seq"]
    line_bytes = D * (W - 1) * 2
    lpslot = per_seq // line_bytes
    slots = [4, 1, 3, 2]
    lines = np.array([[s * lpslot for s in slots]], dtype=np.int32)
    xb = dt.enc(rng.standard_normal((T, D)))
    w = ((rng.random((D, W)) * 2 - 1) / np.sqrt(W)).astype(np.float32)
    ins = {"x": xb, "cu_seqlens": cu, "lines": lines, "weight": w}
    x = dt.dec(xb)
    ref, finals = {}, []
    y = np.zeros((T, D))
    for n in range(N):
        y[cu[n]:cu[n + 1]], f = conv_seq(x[cu[n]:cu[n + 1]], w.astype(np.float64), None, True,
                                         np.zeros((D, W - 1)))
        finals.append(f)
    ref["y"] = (y, (T, D))
    states = {int(lines[0, n]): dt.round(finals[n]) for n in range(N)}
    if verify:
        steps = m["buffers"]["xv"]["shape"][1]
        step_lines = np.array([[s * lpslot + 1 + k for s in slots] for k in range(steps)], dtype=np.int32)
        xvb = dt.enc(rng.standard_normal((N, steps, D)))
        ins.update(xv=xvb, step_lines=step_lines)
        xv = dt.dec(xvb)
        yv = np.zeros((N, steps, D))
        for n in range(N):
            init = dt.dec(dt.enc(finals[n]))
            yv[n], f = conv_seq(xv[n], w.astype(np.float64), None, True, init)
            for k in range(steps):
                states[int(step_lines[k, n])] = dt.round(conv_seq(xv[n, :k + 1], w.astype(np.float64), None, True, init)[1])
            states[int(lines[0, n])] = dt.round(f)
        ref["yv"] = (yv, (N, steps, D))
    else:
        for i in (1, 2):
            xdb = dt.enc(rng.standard_normal((N, D)))
            ins[f"xd{i}"] = xdb
            xd = dt.dec(xdb)
            yd = np.zeros((N, D))
            for n in range(N):
                l = int(lines[0, n])
                yd[n:n + 1], f = conv_seq(xd[n:n + 1], w.astype(np.float64), None, True, states[l])
                states[l] = dt.round(f)
            ref[f"yd{i}"] = (yd, (N, D))
    return {"tokens": T, "seqs": N}, ins, ref, states, dt, line_bytes


def example_dense(rng, m):
    proj = m["buffers"]["proj"]
    S, Tm, R = proj["shape"]
    S = m["vars"]["seqs"]["max"]
    Tm = proj["shape"][1]
    R = proj["shape"][2]
    D, W = m["buffers"]["weight"]["shape"]
    dt = Dt(proj["dtype"])
    off = m["programs"]["main"]["calls"][0]["args"][0].get("offset", 0) // 2
    T = Tm - 3
    pb = dt.enc(rng.standard_normal((S, Tm, R)))
    w = (rng.random((D, W)) * 2 - 1) / np.sqrt(W)
    b = rng.standard_normal(D) * 0.5
    wb, bb = to_bf16_bits(w), to_bf16_bits(b)  # weight and bias are bf16 in this example
    wf, bf = from_bf16_bits(wb).astype(np.float64), from_bf16_bits(bb).astype(np.float64)
    x = dt.dec(pb)[:, :, off:off + D]
    y = np.zeros((S, T, D))
    for s in range(S):
        y[s], _ = conv_seq(x[s, :T], wf, bf, False, np.zeros((D, W - 1)))
    return {"tokens": T, "seqs": S}, {"proj": pb, "weight": wb, "bias": bb}, {"y": (y, None)}, {}, dt, 0


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
    rng = np.random.default_rng(7)
    fails = 0
    for name in ("prefill_decode", "prefill_verify", "dense_strided"):
        path = os.path.join(args.manifests, f"{name}.json")
        m = json.load(open(path))
        try:
            if name == "dense_strided":
                vars_, ins, ref, states, dt, line_bytes = example_dense(rng, m)
            else:
                vars_, ins, ref, states, dt, line_bytes = example_prefill(rng, m, name == "prefill_verify")
            outs, dumps = list(ref), (["conv"] if states else [])
            pe, _ = run_pio(args, path, vars_, ins, outs, dumps, False, args.work, name)
            pg, _ = run_pio(args, path, vars_, ins, outs, dumps, True, args.work, name)
            same = all(open(pe[k], "rb").read() == open(pg[k], "rb").read() for k in outs + dumps)
            errs = {}
            for k, (want, shape) in ref.items():
                raw = np.fromfile(pe[k], dtype=np.uint16)
                if name == "dense_strided":
                    S, T, D = want.shape
                    R = m["buffers"]["y"]["shape"][2]
                    got = dt.dec(raw).reshape(S, -1, R)[:, :T, :D]
                else:
                    got = dt.dec(raw[:int(np.prod(shape))]).reshape(shape)
                errs[k] = rel_rms(got, dt.round(want), want)
            state_ok = True
            if states:
                pool = np.fromfile(pe["conv"], dtype=np.uint8)
                for line, want in states.items():
                    seg = pool[line * line_bytes:(line + 1) * line_bytes].view(np.uint16)
                    state_ok &= bool(np.array_equal(seg, dt.enc(want).reshape(-1)))
            _, timing = run_pio(args, path, vars_, ins, [], [], True, args.work, name + "_t", iters=200)
            med = json.loads(timing)["timing"]["median_us"]
            ok = same and state_ok and all(e <= GATE for e in errs.values())
        except Exception as e:  # noqa: BLE001 - report every example
            ok, same, state_ok, errs, med = False, False, False, {"exception": str(e)[:300]}, None
        fails += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'}  program_io {name:<16} eager==graph {same}  states exact "
              f"{state_ok}  err {errs}  graph program median {med} us", flush=True)
        if args.jsonl:
            rec = dict(json.loads(args.meta), case=f"program_io {name} eager+graph", kind="check",
                       error=max([v for v in errs.values() if isinstance(v, float)] or [float("inf")]),
                       gate=GATE, eager_graph_identical=same, states_exact=state_ok,
                       graph_program_us=med, **{"pass": ok})
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(rec) + "\n")
    print(f"{3 - fails} passed, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
