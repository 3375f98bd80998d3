"""Diagnostics of the KDA / GDN kernels on the device (records nothing; run.py owns the
validation rows): the launches an Nsight Compute profile targets, and timings of variants that
place the chunk forward's time without counters (grid size, T, gate form, GDN).

Usage (after the build, from the repository root, PYTHONPATH as tools/device/run.sh sets it):
  ncu --clock-control none -k regex:kda_chunk_sm90a -c 1 --set full --import-source yes \
      -o chunk python3 validation/kda/kda_profile.py chunk [BUILD]
  ncu --clock-control none -k 'regex:kda_(decode|verify|commit)' --filter-mode per-launch-config \
      -c 1 --set full -o steps python3 validation/kda/kda_profile.py steps [BUILD]
  python3 validation/kda/kda_profile.py times [BUILD]          (prints "TIME <variant>: <us>")
  python3 validation/kda/kda_profile.py step_variants [BUILD]  (decode / verify entry variants)
  chunk: one eager prefill, KDA B8 T4096 H16 V128 (the first bench case);
  steps: one decode, verify and commit at B64 (the step benches' shapes).
BUILD defaults to build-h200. Every launch goes through the product path (fixture.py).
"""
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "validation", "common"))
import bench  # noqa: E402

BUILD = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(REPO, "build-h200"))
bench.use_build(BUILD)
import fixture as fx  # noqa: E402
import torch  # noqa: E402


def chunk():
    c = fx.Case(seed=100, B=8, T=4096, H=16, gates="init", g_dtype=torch.bfloat16)
    ours = fx.Prefill(c, BUILD)
    ours.write()
    ours.run(graph=False)


def steps(B=64):
    c = fx.Case(kind="kda", B=B, T=8, H=16, gates="init", gate="softplus", seed=7)
    srv = fx.Serving(c.profile(), BUILD, max_seqs=B, max_tokens=16, steps=8, extra_lines=B,
                     rotate=True)
    rt = srv.rt
    rt.buffer("lines")[0, :B].copy_(torch.arange(1, B + 1, dtype=torch.int32))
    rt.buffer("lines_b")[0, :B].copy_(torch.arange(B + 1, 2 * B + 1, dtype=torch.int32))
    rt.buffer("accepted")[:B].copy_(torch.randint(1, 9, (B,), dtype=torch.int32))
    srv.write_inputs("dec", c, t0=0)
    srv.write_inputs("ver", c, 0, 8)
    for prog in ("decode", "verify", "commit"):
        rt.enqueue(prog, vars={"seqs": B})
    torch.cuda.synchronize()


def times():
    big = dict(H=16, gates="init", g_dtype=torch.bfloat16)
    variants = [("kda B8 T4096", dict(B=8, T=4096, **big)),
                ("kda B1 T4096", dict(B=1, T=4096, **big)),
                ("kda B16 T4096", dict(B=16, T=4096, **big)),
                ("kda B8 T1024", dict(B=8, T=1024, **big)),
                ("kda B8 T4096 harsh", dict(B=8, T=4096, H=16, gates="harsh", g_dtype=torch.bfloat16)),
                ("kda B8 T4096 log-decay g f32", dict(B=8, T=4096, H=16, gates="init", gate=None)),
                ("kda B8 T4096 lower_bound", dict(B=8, T=4096, H=16, gate="lower_bound",
                                                  lower_bound=-5.0, g_dtype=torch.bfloat16)),
                ("gdn B8 T4096", dict(kind="gdn", B=8, T=4096, **big))]
    for name, kw in variants:
        try:
            ours = fx.Prefill(fx.Case(seed=100, **kw), BUILD)
            ours.write()
            ours.run(graph=True)
            us = statistics.median(bench.time_calls(ours.enqueue, 10))
            print(f"TIME {name}: {us:.1f} us", flush=True)
            ours.rt.close()
        except Exception as e:  # noqa: BLE001 - a diagnostic: report and go on
            print(f"TIME {name}: failed {e!r}"[:300], flush=True)
        torch.cuda.empty_cache()


def _serving(c, B, variant, modes):
    """fx.Serving with the step entries of `modes` replaced by their `variant` (e.g. _pf0; a
    dict: a variant per mode)."""
    plain = fx.gk.serving_manifest

    def patched(*a, **kw):
        m = plain(*a, **kw)
        for mode in modes:
            v = variant.get(mode, "") if isinstance(variant, dict) else variant
            for launch in m["ops"][mode]["impl"]["launches"]:
                launch["entry"] = launch["entry"].replace(f"_{mode}_", f"_{mode}{v}_")
        return m
    fx.gk.serving_manifest = patched
    try:
        srv = fx.Serving(c.profile(), BUILD, max_seqs=B, max_tokens=16, steps=8, extra_lines=B,
                         rotate=True)
    finally:
        fx.gk.serving_manifest = plain
    rt = srv.rt
    rt.buffer("lines")[0, :B].copy_(torch.arange(1, B + 1, dtype=torch.int32))
    rt.buffer("lines_b")[0, :B].copy_(torch.arange(B + 1, 2 * B + 1, dtype=torch.int32))
    gen = torch.Generator(device="cuda").manual_seed(1234)  # the same states for every variant
    rt.buffer("accepted")[:B].copy_(torch.randint(1, 9, (B,), dtype=torch.int32, generator=gen,
                                                  device="cuda"))
    for ln in range(1, 2 * B + 1):
        srv.line_state(ln).normal_(generator=gen)
    return srv


def _diff(runs, out, B):
    """rel rms of each variant's last outputs and its lines 1..2B against the shipped entry's
    (every runtime ran the same calls on the same inputs: only rounding may differ)."""
    base = runs["base"]
    rel = lambda a, b: float((a - b).float().pow(2).mean().sqrt() / b.float().pow(2).mean().sqrt())
    st = lambda r: torch.stack([r.line_state(ln) for ln in range(1, 2 * B + 1)])
    ref_o, ref_s = base.rt.buffer(out).float(), st(base)
    return {k: (rel(r.rt.buffer(out).float(), ref_o), rel(st(r), ref_s)) for k, r in runs.items()}


def step_variants():
    """decode_x8 (per call) of the decode entries' prefetch variants, KDA and GDN at B64 and
    B256, and verify_commit_x4 (per round) with the _pf0 verify / commit, interleaved in one
    process (the bench's inputs: benches._decode_bench / _verify_bench)."""
    for kind in ("kda", "gdn"):
        for B in (64, 256):
            c = fx.Case(kind=kind, B=B, T=8, H=16, gates="init",
                        gate="softplus" if kind == "kda" else None, seed=7)
            runs = {}
            for v in ("", "_pf0", "_pf512", "_wp", "_wppf0", "_wppf512", "_wpo6", "_wppf0o6"):
                srv = _serving(c, B, v, ["decode"])
                srv.write_inputs("dec", c, t0=0)
                runs[v or "base"] = srv
            cont = {k: (lambda r=r: r.rt.enqueue("decode_x8", graph=True, vars={"seqs": B}))
                    for k, r in runs.items()}
            med = bench.interleaved(cont, 60, 3)
            torch.cuda.synchronize()
            diff = _diff(runs, "dec_o", B)
            for k, us in med.items():
                print(f"TIME decode {kind} B{B} {k}: {us / 8:.2f} us (vs shipped: o {diff[k][0]:.1e}, "
                      f"states {diff[k][1]:.1e})", flush=True)
            for r in runs.values():
                r.rt.close()
            del runs, cont
            torch.cuda.empty_cache()
    c = fx.Case(kind="kda", B=64, T=8, H=16, gates="init", seed=8)
    runs = {}
    for v, modes in (("", {}), ("_pf0", {"verify": "_pf0", "commit": "_pf0"}),
                     ("_wp", {"verify": "_wp", "commit": "_wp"}),
                     ("_wppf0", {"verify": "_wp", "commit": "_wppf0"}),
                     ("_wppf0v", {"verify": "_wppf0", "commit": "_wppf0"})):
        srv = _serving(c, 64, modes, ["verify", "commit"])
        srv.write_inputs("ver", c, 0, 8)
        runs[v or "base"] = srv
    cont = {k: (lambda r=r: r.rt.enqueue("verify_commit_x4", graph=True, vars={"seqs": 64}))
            for k, r in runs.items()}
    med = bench.interleaved(cont, 60, 3)
    torch.cuda.synchronize()
    diff = _diff(runs, "ver_o", 64)
    for k, us in med.items():
        print(f"TIME verify+commit kda B64 {k}: {us / 4:.2f} us (vs shipped: o {diff[k][0]:.1e}, "
              f"states {diff[k][1]:.1e})", flush=True)
    # the rollback checks of checks.py (float64, commit(n) = n decode steps bit for bit) over
    # the warp-preparation entries
    import checks
    rec = bench.Recorder("/tmp/kda_step_variants.jsonl", "kda", "diagnostic")
    plain = fx.gk.serving_manifest
    for kind in ("kda", "gdn"):
        for modes in ({"decode": "_wp", "verify": "_wp", "commit": "_wp"},
                      {"decode": "_wppf0", "verify": "_wppf0", "commit": "_wppf0"}):
            def patched(*a, modes=modes, **kw):
                m = plain(*a, **kw)
                for mode, v in modes.items():
                    for launch in m["ops"][mode]["impl"]["launches"]:
                        launch["entry"] = launch["entry"].replace(f"_{mode}_", f"_{mode}{v}_")
                return m
            fx.gk.serving_manifest = patched
            try:
                ok = checks._verify_rollback(rec, BUILD, kind)
            finally:
                fx.gk.serving_manifest = plain
            print(f"CHECK rollback {kind} {modes}: {'PASS' if ok else 'FAIL'}", flush=True)


if __name__ == "__main__":
    {"chunk": chunk, "steps": steps, "times": times, "step_variants": step_variants}[sys.argv[1]]()
