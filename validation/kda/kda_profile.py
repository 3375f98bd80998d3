"""Diagnostics of the KDA / GDN kernels on the device (records nothing; run.py owns the
validation rows): the launches an Nsight Compute profile targets, and timings of variants that
place the chunk forward's time without counters (grid size, T, gate form, GDN).

Usage (after the build, from the repository root, PYTHONPATH as tools/device/run.sh sets it):
  ncu --clock-control none -k regex:kda_chunk_sm90a -c 1 --set full --import-source yes \
      -o chunk python3 validation/kda/kda_profile.py chunk [BUILD [VARIANT]]
  ncu --clock-control none -k 'regex:kda_(cp_combine|chunk64_state2)' -c 3 --section SpeedOfLight \
      -o cp python3 validation/kda/kda_profile.py cpchunk [BUILD [VARIANT]]
  ncu --clock-control none -k 'regex:kda_(decode|verify|commit)' --filter-mode per-launch-config \
      -c 1 --set full -o steps python3 validation/kda/kda_profile.py steps [BUILD]
  python3 validation/kda/kda_profile.py times [BUILD]          (prints "TIME <variant>: <us>")
  python3 validation/kda/kda_profile.py cp [BUILD]             (B1 T32768 KDA and GDN at several
                                                               context-parallel splits, "TIME ...")
  python3 validation/kda/kda_profile.py kernels [BUILD]        (per kernel of the bench's dense,
                                                               context-parallel and varlen prefills,
                                                               "KERNEL ...")
  python3 validation/kda/kda_profile.py occupancy [BUILD]      (the dense KDA / GDN preps at fewer
                                                               blocks per SM, "OCC ...")
  python3 validation/kda/kda_profile.py variants [BUILD]       (the bench's prefills on each set of
                                                               candidate entries, VARIANTS, in
                                                               turn: "TIME ..." and "DIFF ...")
  chunk: one eager prefill, KDA B8 T4096 H16 V128 (the first bench case), the shipped entries or
         those of VARIANT; gdnchunk: the same for GDN;
  cpchunk: the same for KDA B1 T32768 H16 V128 with kda_cp_plan's context parallel (the
         bench's long sequence: phase 1, the combine, phase 3);
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
import benches  # noqa: E402
import fixture as fx  # noqa: E402
import torch  # noqa: E402
from kernrt.gen import kda_cp_plan  # noqa: E402

# B1 T32768 H16 V128, the bench's long sequence: 512 chunks, and the segments the plan gives it
LONG_CHUNKS = 32768 // 64
LONG_PLAN = kda_cp_plan.plan((LONG_CHUNKS,), 16, 1)
LONG_CP = dict(cp_segs=LONG_PLAN[0], seg_chunks=4 * LONG_PLAN[1])  # Prefill's arguments


def chunk(B=8, T=4096, kind="kda", **prefill_kw):
    # a third argument names a VARIANTS entry set (the candidate's kernels under ncu)
    entries = VARIANTS[sys.argv[3]] if len(sys.argv) > 3 else {}
    c = fx.Case(seed=100, kind=kind, B=B, T=T, H=16, gates="init", g_dtype=torch.bfloat16)
    ours = fx.Prefill(c, BUILD, entries=entries or None, **prefill_kw)
    ours.write()
    ours.run(graph=False)


def gdnchunk():
    chunk(kind="gdn")


def cpchunk():
    chunk(B=1, T=32768, **LONG_CP)


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
        time_prefill(name, fx.Case(seed=100, **kw))


def time_prefill(name, case, **prefill_kw):
    """Prints "TIME <name>: <us>" for our prefill of `case` (graph replay, median of 10)."""
    try:
        ours = fx.Prefill(case, BUILD, **prefill_kw)
        ours.write()
        ours.run(graph=True)
        us = statistics.median(bench.time_calls(ours.enqueue, 10))
        print(f"TIME {name}: {us:.1f} us", flush=True)
        ours.rt.close()
    except Exception as e:  # noqa: BLE001 - a diagnostic: report and go on
        print(f"TIME {name}: failed {e!r}"[:300], flush=True)
    torch.cuda.empty_cache()


def cp():
    """B1 T32768 H16 (the bench's long sequence, with state) at context-parallel splits: segments
    x 64-token chunks (segment 0 takes the chunks the others do not cover), kda_cp_plan's
    choice (9 x 55) first; each line prints the plan model's steps beside the time, so the
    model's calibration (3.83 us a step) can be read off."""
    big = dict(H=16, gates="init", g_dtype=torch.bfloat16)
    splits = [LONG_PLAN, (8, 64), (9, 50), (9, 60), (10, 50), (7, 70), (16, 32)]
    for kind in ("kda", "gdn"):
        c = fx.Case(seed=100, kind=kind, B=1, T=32768, **big)
        for segs, chunks in splits:
            model = kda_cp_plan.steps((LONG_CHUNKS,), 16, 1, segs, chunks)
            time_prefill(f"{kind} B1 T32768 cp {segs} x {64 * chunks} (model {model:.1f} steps)", c,
                         cp_segs=segs, seg_chunks=4 * chunks, chunk="c64")


def kernels(reps=10):
    """Where a prefill's time goes, per kernel (torch.profiler's CUDA activity, eager runs after
    a warm-up) for the bench's dense KDA and the KDA / GDN B1 T32768 with kda_cp_plan's context
    parallel. The kernels are launched with PDL, so a kernel's own span includes waiting for the one
    before it (griddepcontrol.wait): the figure printed is its share of the serial chain, end
    minus the previous kernel's end (or its start, if later), mean over the calls, and its span
    beside it: "KERNEL <case> | <name> | <us of the chain> (span <us>) x <launches a call>"."""
    big = dict(H=16, gates="init", g_dtype=torch.bfloat16)
    segs, L = LONG_PLAN
    entries = VARIANTS[sys.argv[3]] if len(sys.argv) > 3 else None  # a VARIANTS entry set
    gs, gl = GDN_PLAN
    lens16, cu16 = benches.varlen16()
    vs, vl = kda_cp_plan.plan(tuple(-(-n // 64) for n in lens16), 16, 1)
    cases = [("kda B8 T4096", dict(B=8, T=4096, **big), {}),
             (f"kda B1 T32768 cp {segs} x {L}", dict(B=1, T=32768, **big), LONG_CP),
             (f"gdn B1 T32768 cp {gs} x {gl}", dict(kind="gdn", B=1, T=32768, **big),
              dict(cp_segs=gs, seg_chunks=4 * gl)),
             ("gdn B1 T32768 cp 8 x 64", dict(kind="gdn", B=1, T=32768, **big), dict(cp_segs=8, seg_chunks=256)),
             # the varlen bench and its one pass beside
             (f"kda varlen 16 seqs cp {vs} x {vl}", dict(cu=cu16, **big), dict(cp_segs=vs, seg_chunks=4 * vl)),
             ("kda varlen 16 seqs one pass", dict(cu=cu16, **big), dict(chunk="c64"))]
    for name, kw, pk in cases:
        if entries and name.startswith("kda"):
            continue
        ours = fx.Prefill(fx.Case(seed=100, **kw), BUILD, entries=entries, **pk)
        ours.write()
        ours.run()
        share, span, count = kernel_shares(ours, reps)
        for k in share:
            print(f"KERNEL {name} | {k[:80]} | {share[k]:.1f} us (span {span[k]:.1f})"
                  f" x {count[k]:g}", flush=True)
        print(f"KERNEL {name} | all | {sum(share.values()):.1f} us", flush=True)
        ours.rt.close()
        torch.cuda.empty_cache()


def kernel_shares(ours, reps):
    """({kernel: its share of the serial chain}, {kernel: its span}, {kernel: launches}) of
    `ours`'s prefill, us a call: `reps` eager calls apart under torch.profiler (kernels())."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            ours.rt.enqueue("prefill", graph=False, vars=ours.vars)
            torch.cuda.synchronize()  # calls apart: the first kernel's share is its span
    evs = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                  and e.time_range.elapsed_us() > 0), key=lambda e: e.time_range.start)
    share, span, count, prev_end = {}, {}, {}, None
    per_call = len(evs) // reps
    for i, e in enumerate(evs):
        t0, t1 = e.time_range.start, e.time_range.end
        # a kernel launched twice a call (context parallel's phases 1 and 3): "name #2"
        k = sum(1 for x in evs[i - i % per_call:i] if x.name == e.name)
        name = e.name if k == 0 else f"{e.name} #{k + 1}"
        lo = t0 if prev_end is None else max(t0, prev_end)
        share[name] = share.get(name, 0.0) + (t1 - lo) / reps
        span[name] = span.get(name, 0.0) + (t1 - t0) / reps
        count[name] = count.get(name, 0) + 1 / reps
        prev_end = t1
    return share, span, count


# The preps' entries of the bench's dense cases and their blocks per SM as shipped (prep4: 128
# registers x 256 threads and 111,968 bytes, 2; GDN's: 80 registers and 60,480 bytes, 3)
PREP_NATIVE = {"kda_chunk64_prep4_sm90a_f16_k128": 2, "kda_chunk64_prep_gdn_sm90a_f16_k128": 3}
SM_SHARED = 233472  # bytes of shared memory per H200 SM, 1 KiB of it reserved per block


def occupancy(reps=10):
    """What a prep achieves at fewer blocks per SM (the fused kernel's question, chunk64.md
    step 3: one prep block beside the state warpgroups on each SM): the bench's dense KDA and
    GDN B8 T4096 H16 V128 with the prep launched at n blocks per SM (its dynamic shared memory
    padded so that n + 1 do not fit; the same entry, the same bits), per kernel as kernels()
    times them: "OCC <case> | prep n/SM | prep <us> | state <us> | prep per chunk and SM <us>"
    (the fused kernel's state step takes ~3.8 us a chunk: a prep slower than that at one block
    per SM bounds the fused kernel by the prep)."""
    big = dict(H=16, gates="init", g_dtype=torch.bfloat16)
    for name, kw, entry in (("kda B8 T4096", dict(B=8, T=4096, **big), "kda_chunk64_prep4_sm90a_f16_k128"),
                            ("gdn B8 T4096", dict(kind="gdn", B=8, T=4096, **big),
                             "kda_chunk64_prep_gdn_sm90a_f16_k128")):
        c = fx.Case(seed=100, **kw)
        chunks = c.B * (c.T // 64) * c.HV
        base = None
        for n in range(PREP_NATIVE[entry], 0, -1):
            pad = None if n == PREP_NATIVE[entry] else SM_SHARED // (n + 1) - 1023
            ours = fx.Prefill(c, BUILD, entries={entry: {"shared_mem": pad}} if pad else None)
            ours.write()
            o, h = ours.run()
            if base is None:
                base = (o, h)
            same = torch.equal(o.view(torch.int16), base[0].view(torch.int16)) and torch.equal(
                h.view(torch.int32), base[1].view(torch.int32))
            share, span, _ = kernel_shares(ours, reps)
            prep = sum(v for k, v in span.items() if "prep" in k)
            state = sum(v for k, v in share.items() if "state2" in k)
            print(f"OCC {name} | prep {n}/SM | prep {prep:.1f} us | state {state:.1f} us | prep per "
                  f"chunk and SM {prep * 132 / chunks:.2f} us | bit-identical {'yes' if same else 'no'}",
                  flush=True)
            ours.rt.close()
            torch.cuda.empty_cache()


# candidate entries timed against the generator's by `variants`: name -> {entry: candidate}
# (a candidate form of a kernel gets its own entry for the A / B; calls h1-h3 compared forms of
# the state step's scales, h6 the prep's range vote inside the diagonal rounds, i1 the solve's
# order, i2 the diagonal blocks by token halves, j2 the context-parallel combine's block,
# j3 its transposed rows swizzled; tag kda-gdn-candidates-2026-12b-runs the GDN state step's
# wgmma groups, the warm-start bound, the combine's zero skip and the GDN prep's store order;
# kda-gdn-lean-2026-12-runs the GDN step's instruction cuts; kda-state-candidates-2026-12e-runs
# v by ldmatrix, KDA's X packed once, GDN's vn' scale from r and X / cx, the preps' L2 prefetch)
VARIANTS = {"shipped": {}}
GDN_PLAN = kda_cp_plan.plan((LONG_CHUNKS,), 16, 1, bounded=True)  # the bench's (8 x 64)


def variants(rounds=3, reps=10):
    """The bench's prefills on each set of entries (VARIANTS; {}: the generator's),
    timed in turn over `rounds` rounds (graph replay, median of `reps` each), so drift hits them
    alike: "TIME <case> | <variant> | round r: <us>", then per variant its median over the
    rounds, and "DIFF <case> | <variant>: o <rel rms>, ht <rel rms> (bit-identical: yes|no)"
    against the generator's entry on the same inputs; a case none of whose launches names a
    candidate's entries skips it (SKIP). GDN's one case is its context-parallel bench (GDN's prep
    is another module: a GDN prep candidate adds its cases)."""
    import kda_ref as ref
    big = dict(H=16, gates="init", g_dtype=torch.bfloat16)
    segs, L = LONG_PLAN
    cases = [("kda B8 T4096 V128", dict(B=8, T=4096, **big), {}),
             ("kda B8 T4096 V128 lower_bound -5, beta logits", dict(
                 B=8, T=4096, H=16, gate="lower_bound", lower_bound=-5.0, beta="sigmoid",
                 g_dtype=torch.bfloat16), {}),
             ("kda B8 T4096 V256", dict(B=8, T=4096, V=256, **big), {}),
             (f"kda B1 T32768 cp {segs} x {L}", dict(B=1, T=32768, **big), LONG_CP),
             (f"gdn B1 T32768 cp {GDN_PLAN[0]} x {GDN_PLAN[1]}", dict(kind="gdn", B=1, T=32768, **big),
              dict(cp_segs=GDN_PLAN[0], seg_chunks=4 * GDN_PLAN[1])),
             ("gdn B1 T32768 cp 8 x 64", dict(kind="gdn", B=1, T=32768, **big), dict(cp_segs=8, seg_chunks=256)),
             # for the bits: harsh gates put sub-blocks on the fp32 pairs, T = 1000 a tail chunk;
             # T = 5000 in 3 segments of 20 chunks (segment 0 takes 39) for the combine's
             ("gdn B8 T4096 V128", dict(kind="gdn", B=8, T=4096, **big), {}),
             ("kda B2 T1000 H4 harsh", dict(B=2, T=1000, H=4, gates="harsh", g_dtype=torch.bfloat16), {}),
             ("gdn B2 T1000 H4 harsh", dict(kind="gdn", B=2, T=1000, H=4, gates="harsh",
                                            g_dtype=torch.bfloat16), {}),
             ("kda B2 T5000 H4 harsh cp 3 x 20", dict(B=2, T=5000, H=4, gates="harsh", g_dtype=torch.bfloat16),
              dict(cp_segs=3, seg_chunks=4 * 20))]
    for name, kw, pk in cases:
        c = fx.Case(seed=100, **kw)
        runs, out = {}, {}
        for var, entries in VARIANTS.items():
            try:
                ours = fx.Prefill(c, BUILD, entries=entries or None, **pk)
            except ValueError as e:  # no launch of this case names the candidate's entries
                print(f"SKIP {name} | {var}: {e}", flush=True)
                continue
            ours.write()
            out[var] = ours.run(graph=True)
            runs[var] = ours
        if len(runs) == 1 and len(VARIANTS) > 1:  # every candidate skipped: nothing to compare
            runs["shipped"].rt.close()
            continue
        o0, h0 = out["shipped"]
        for var, (o, h) in out.items():
            same = torch.equal(o.view(torch.int16), o0.view(torch.int16)) and torch.equal(
                h.view(torch.int32), h0.view(torch.int32))
            print(f"DIFF {name} ({runs[var].chunk}) | {var}: o {ref.rel_rms(o.double(), o0.double()):.2e}, ht "
                  f"{ref.rel_rms(h.double(), h0.double()):.2e} (bit-identical: "
                  f"{'yes' if same else 'no'})", flush=True)
        times = {var: [] for var in runs}
        for r in range(rounds):
            for var, ours in runs.items():
                us = statistics.median(bench.time_calls(ours.enqueue, reps))
                times[var].append(us)
                print(f"TIME {name} | {var} | round {r}: {us:.1f} us", flush=True)
        for var, ts in times.items():
            print(f"TIME {name} | {var} | median: {statistics.median(ts):.1f} us", flush=True)
        for ours in runs.values():
            ours.rt.close()
        del runs, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    {"chunk": chunk, "gdnchunk": gdnchunk, "cpchunk": cpchunk, "steps": steps, "times": times, "cp": cp, "kernels": kernels,
     "variants": variants, "occupancy": occupancy}[sys.argv[1]]()
