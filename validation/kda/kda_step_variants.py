"""Diagnostics of the KDA token-step entries on the device (records nothing; run.py owns the
validation rows): the shipped decode / verify / commit entries timed beside their live
alternatives (kernels/kda/kda_step.cu "entries": _base = the recurrent verify, the 8-channel
decode preparation and the single-chain dots of f0f40bd; _split = the spread decays without
the 4-way dots; the decode at 6 blocks per SM and with the L2 prefetch 256 blocks ahead lost in
s52 and are on tag kda-step-variants-2026-12b), each variant in its own runtime
in one process, interleaved (the step benches' inputs and programs: benches._decode_bench /
_verify_bench), with each variant's outputs and states diffed against the shipped entries'
on the same inputs, and the rollback checks of checks.py (float64, commit(n) = n decode steps
bit for bit) over every decode / verify / commit pairing timed here.

The decode prefetch placements and the 4-blocks-per-SM decode timed in s61 (all but the
shipped one lost) are on tag kda-step-variants-2026-12c. With a second build directory
PREV (its cubins/run holding an earlier kda_step cubin, the rest the same), the shipped
entries of PREV run beside ours as "prev" (KDA and GDN, decode and verify + commit): a
refactor's schedule change measured in one process.

Usage (after the build, from the repository root, PYTHONPATH as tools/device/run.sh sets it):
  python3 validation/kda/kda_step_variants.py [BUILD [PREV]]  (prints "TIME ..." and "CHECK ...")
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "validation", "common"))
import bench  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build-h200"))
PREV = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
bench.use_build(BUILD)
import fixture as fx  # noqa: E402
import torch  # noqa: E402

PLAIN = fx.gk.serving_manifest
DECODES = ("", "_split", "_base")
# (verify, commit) pairs for the round timing; decode pairs with commit by kTree
ROUNDS = (("", ""), ("", "_base"), ("_base", ""), ("_base", "_base"))
PAIRINGS = ({"decode": "_split", "commit": "_base"},
            {"decode": "_base", "verify": "_base", "commit": "_base"},
            {"verify": "_base"})


def _patched(modes):
    """serving_manifest with the entries of `modes` ({mode: suffix}) replaced."""
    def make(*a, **kw):
        m = PLAIN(*a, **kw)
        for mode, v in modes.items():
            for launch in m["ops"][mode]["impl"]["launches"]:
                launch["entry"] = launch["entry"].replace(f"_{mode}_", f"_{mode}{v}_")
        return m
    return make


def _serving(c, B, modes, build=BUILD):
    fx.gk.serving_manifest = _patched(modes)
    try:
        srv = fx.Serving(c.profile(), build, max_seqs=B, max_tokens=16, steps=8, extra_lines=B,
                         rotate=True)
    finally:
        fx.gk.serving_manifest = PLAIN
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
    """rel rms of each variant's last outputs and lines 1..2B against the shipped entries'."""
    base = runs["shipped"]
    rel = lambda a, b: float((a - b).float().pow(2).mean().sqrt() / b.float().pow(2).mean().sqrt())
    st = lambda r: torch.stack([r.line_state(ln) for ln in range(1, 2 * B + 1)])
    ref_o, ref_s = base.rt.buffer(out).float(), st(base)
    return {k: (rel(r.rt.buffer(out).float(), ref_o), rel(st(r), ref_s)) for k, r in runs.items()}


def _time(runs, program, B, per, out, label):
    cont = {k: (lambda r=r: r.rt.enqueue(program, graph=True, vars={"seqs": B}))
            for k, r in runs.items()}
    med = bench.interleaved(cont, 60, 3)
    torch.cuda.synchronize()
    diff = _diff(runs, out, B)
    for k, us in med.items():
        print(f"TIME {label} {k}: {us / per:.2f} us (vs shipped: o {diff[k][0]:.1e}, "
              f"states {diff[k][1]:.1e})", flush=True)
    for r in runs.values():
        r.rt.close()
    torch.cuda.empty_cache()


def _prev(c, B, runs, prefix, t0, t1=None):
    """The shipped entries of PREV beside ours (same inputs and states)."""
    if PREV is not None:
        srv = _serving(c, B, {}, PREV)
        srv.write_inputs(prefix, c, t0, t1)
        runs["prev"] = srv


def main():
    for kind in ("kda", "gdn"):
        for B in (64, 256):
            gate = "softplus" if kind == "kda" else None
            c = fx.Case(kind=kind, B=B, T=8, H=16, gates="init", gate=gate, seed=7)
            runs = {}
            for v in DECODES if kind == "kda" else ("",):
                srv = _serving(c, B, {"decode": v})
                srv.write_inputs("dec", c, t0=0)
                runs[v or "shipped"] = srv
            _prev(c, B, runs, "dec", 0)
            _time(runs, "decode_x8", B, 8, "dec_o", f"decode {kind} B{B}")
    c = fx.Case(kind="kda", B=64, T=8, H=16, gates="init", seed=8)
    runs = {}
    for ver, com in ROUNDS:
        srv = _serving(c, 64, {"verify": ver, "commit": com})
        srv.write_inputs("ver", c, 0, 8)
        runs[f"verify{ver or ''} commit{com or ''}" if ver or com else "shipped"] = srv
    _prev(c, 64, runs, "ver", 0, 8)
    _time(runs, "verify_commit_x4", 64, 4, "ver_o", "verify+commit kda B64")
    c = fx.Case(kind="gdn", B=64, T=8, H=16, gates="init", seed=8)
    runs = {"shipped": _serving(c, 64, {})}
    runs["shipped"].write_inputs("ver", c, 0, 8)
    _prev(c, 64, runs, "ver", 0, 8)
    _time(runs, "verify_commit_x4", 64, 4, "ver_o", "verify+commit gdn B64")
    import checks
    rec = bench.Recorder("/tmp/kda_step_variants.jsonl", "kda", "diagnostic")
    for modes in PAIRINGS:
        fx.gk.serving_manifest = _patched(modes)
        try:
            ok = checks._verify_rollback(rec, BUILD, "kda")
        except Exception as e:  # noqa: BLE001 - a diagnostic: report and go on
            ok = False
            print(f"CHECK rollback kda {modes}: exception {e!r}"[:300], flush=True)
        finally:
            fx.gk.serving_manifest = PLAIN
        print(f"CHECK rollback kda {modes}: {'PASS' if ok else 'FAIL'}", flush=True)


if __name__ == "__main__":
    main()
