"""Device check of the 64-token chunk's design entries (kernels/kda/chunk64.md steps 1 and 2:
the state step kda_chunk64_state_sm90a_f16_k128 or the pipelined kda_chunk64_state2, and a prep
from raw inputs: prep v4 kda_chunk64_prep4_*), through the
product path, in its own process (a fault in an entry that no serving path uses must not take
run.py's results with it).

Usage: python3 validation/kda/check_chunk64.py --build BUILD [--out OUT --commit SHA] [--time]
       [--prep prep4]   (the default: prep v4, kda_chunk64_prep4.cu: raw inputs, its cases below)
       [--state state2] (every state step, alone and in forward64, on the pipelined entry
                         kda_chunk64_state2_sm90a_f16_k128 instead of kda_chunk64_state's; its o
                         is bf16 in the product layout [B, T, HV, V])
       ncu -k regex:kda_chunk64 -c 2 --set full python3 validation/kda/check_chunk64.py --build BUILD --profile
(The preps over prepared fp32 tokens, v2 and v3, and their --prep choices are deleted: git tag
kda6-chunk64-preps-v2-v3. GDN's prep writes no kq since its state entry scales the raw rows
itself, so validation/kda/checks.py checks it through the product's op; its former --prep gdn
and check_chunk64_gdn.py are in git history.)
Owns: per case (fla-init, harsh and bounded gates; V 128 and 256; B 2, T 200: 4 chunks, the
last padded; HV 2 over H 1), the operands chunk64_model.state_inputs prepares on the CPU (plan
"f16"), written into the buffers of a kernrt.gen.kda_chunk64 manifest pinned to
BUILD/cubins/run, outputs poisoned with NaN, program `state64` run by libkernrt; then
  - against the model's own state steps on the same operands (layouts, scales, signs):
    rel rms of o and of the final state <= 5e-4: the summation order alone moves them (the
    model's products accumulated in fp32 instead of float64, on the CPU: o up to 5.8e-5, the
    state up to 1.0e-4 at lower_bound -5, V 256; each f16 operand re-rounds what moved), while
    a wrong fragment, swizzle, scale or sign is O(1e-2) or more;
  - against the float64 token loop (kda_ref): o rounded to bf16 and the final state, <= 2e-3
    (the device gate of run.py);
  - with --state state2, against the reference entry kda_chunk64_state_sm90a_f16_k128 run on the
    same operands in the same process: both run the same wgmma chain (chunk64_state_step.cuh),
    so the state must be bit-identical and state2's bf16 o equal to the reference's fp32 o
    rounded to bf16 (nearest even) (reported as the largest |difference| and "bit-identical";
    a pipelining race or a wrong store place shows as a difference, a rel rms above 1e-6
    fails). state2's o is held to the model through the reference's o (rel rms <= 5e-4) and
    that equality; its own bf16 o against the model's rounded to bf16 is reported (<= 2e-3:
    one-ulp flips of the rounding, ~4e-4 at these cases).
Then the prep: prep v4 (--prep prep4) takes the raw inputs (bf16 q, k, raw g with A_log and
dt_bias, beta; cases: the softplus gate at fla-init V 128 / 256 and harsh V 128, the bounded
gate (lower_bound -5) with beta logits (FlashKDA's form, entry _lbgate_sigbeta_) at fla-init
V 128 and with direct beta (_lbgate_) at harsh V 256; B 2, T 200, HV 2 over H 1) into a
kernrt.gen.kda_chunk64 forward64 manifest, compared with the model fed by
chunk64_model.tokens64 (the token code in fp32 as the kernel forms it) under plan
chunk64_model.PREP4 (its diagonal tf32 operands round to even); program `prep64`: its operands
(kq, kbt, tmb, aqk, gamma) against the model's (rel rms <= 2e-3: f16 roundings of the same
values may flip by one ulp, the kernel's solve is fp32 where the model's rounds its products to
f16; a wrong index or decay is O(1)); program `forward64` (prep, then the state step): o and
the final state against the float64 loop (<= 2e-3, the gate) and against the model (<= 2e-3;
o of state2 as bf16 against the model's rounded).
Prints one line per case and a table; writes OUT/kda_chunk64.jsonl (DESIGN.md's schema, kind
"check") when --out is given; exit 0 when every check passed, 2 without a device.
With --time, also a diagnostic timing (records nothing) at B8 HV16 V128 NC64 (B8 T4096 H16) on
random operands, graph replay through libkernrt, printed as "TIME ...": the --state entry
alone (and the reference entry's after it when --state is another), then prep64 and forward64
(the --prep entry, then the --state entry); with --prep prep4 then forward64 on the bounded-gate
inputs of benches.py's FlashKDA case with FlashKDA (the carried peer, on PYTHONPATH) timed in
the same process on the same tensors (time_vs_flashkda: "ours X us, FlashKDA Y us, ratio").
Not part of run.py.
"""
import argparse
import datetime
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "runtime", "python"))
import chunk64_model as m  # noqa: E402
import chunk_model as cm  # noqa: E402
import kda_ref as ref  # noqa: E402
from test_chunk_model import inputs  # noqa: E402

MODEL_TOL, GATE = 5e-4, 2e-3
SAME_TOL = 1e-6  # state2 against the reference entry: the same products, so 0 is expected
STATE_ENTRIES = ("state", "state2")
CASES = (("init", None, 128), ("harsh", None, 128), ("init", -5.0, 256))
# prep v4: (gates, lower_bound, V, beta logits); the bounded cases take its lbgate entries, the
# first FlashKDA's inputs (bounded gate -5, beta logits)
PREP4_CASES = (("init", None, 128, False), ("harsh", None, 128, False), ("init", None, 256, False),
               ("init", -5.0, 128, True), ("harsh", -5.0, 256, False))


def case_inputs(gates, lb, V, B=2, T=200, H=1, HV=2, seed=0):
    rng = np.random.default_rng(seed)
    parts = [inputs(rng, T, H, HV, V, gates) for _ in range(B)]
    q, k, v, g, beta = (np.concatenate([p[i] for p in parts]) for i in range(5))
    A_log, dt = parts[0][5], parts[0][6]
    h0 = np.concatenate([p[7] for p in parts])
    opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt, lower_bound=lb)
    o, ht = ref.recurrent(q, k, v, g, beta, initial_state=h0, **opts)
    return ref.prepare(q, k, v, g, beta, None, **opts), h0, o, ht


def tokens_of(o, state, T):
    """o of a state entry as [B, T, HV, V] float32: the reference's fp32 chunk rows
    [B, HV, NC, 64, V] permuted, state2's bf16 product layout as it is."""
    if state == "state2":
        return o[:, :T]
    B, HV, NC, C, V = o.shape
    return o.transpose(0, 2, 3, 1, 4).reshape(B, NC * C, HV, V)[:, :T]


def v_of(s, state, T=None):
    """v for a state entry from the model's chunk rows [B, HV, NC, 64, V]: as they are for the
    reference entry, state2's product layout [B, T, HV, V] (T default NC * 64)."""
    v = s["v"]
    if state != "state2":
        return v
    B, HV, NC, C, V = v.shape
    return np.ascontiguousarray(v.transpose(0, 2, 3, 1, 4).reshape(B, NC * C, HV, V)[:, :T or NC * C])


def run_state(build, s, B, HV, V, NC, state, T=None):
    """Program state64 of the `state` entry on the model's operands `s` (T tokens per sequence,
    default NC * 64): (o, xt) as numpy (o in the entry's layout, tokens_of)."""
    import torch
    import kernrt
    from kernrt.gen import kda_chunk64 as g64, pin
    cubins = os.path.join(build, "cubins", "run")
    rt = kernrt.load(pin(g64.state64_manifest(B, HV, V, NC, state, tokens=T), cubins), cubins=[cubins])
    dt = {"kq": torch.float16, "kbt": torch.float16, "tmb": torch.float16,
          "aqk": torch.float16, "v": torch.bfloat16}
    for name in ("kq", "kbt", "tmb", "aqk", "gamma", "v", "x0"):
        x = v_of(s, state, T) if name == "v" else s[name]
        rt.buffer(name).copy_(torch.from_numpy(x).to(dt.get(name, torch.float32)))
    rt.buffer("o").fill_(float("nan"))
    rt.buffer("xt").fill_(float("nan"))
    rt.run("state64", seqs=B)
    out = rt.buffer("o").float().cpu().numpy(), rt.buffer("xt").float().cpu().numpy()
    rt.close()
    return out


def run_case(build, gates, lb, V, state="state"):
    xp, h0, o_ref, ht_ref = case_inputs(gates, lb, V)
    s = m.state_inputs(xp, h0)
    B, HV, NC = s["kq"].shape[:3]
    T = o_ref.shape[1]
    o, xt = run_state(build, s, B, HV, V, NC, state, T)
    o_tok, om_tok = tokens_of(o, state, T), tokens_of(s["o"], "state", T)
    r = {"o vs model": ref.rel_rms(o, s["o"]) if state == "state" else
         ref.rel_rms(o_tok, cm.bf16(om_tok)),
         "state vs model": ref.rel_rms(xt, s["xt"]),
         "o vs float64": ref.rel_rms(cm.bf16(o_tok), cm.bf16(o_ref.astype(np.float32))),
         "state vs float64": ref.rel_rms(xt, ht_ref),
         "finite": bool(np.isfinite(o).all() and np.isfinite(xt).all())}
    if state != "state":
        # the reference entry on the same operands: its fp32 o against the model at MODEL_TOL,
        # and state2's bf16 o must be that o rounded to bf16 (nearest even), the state equal
        o0, xt0 = run_state(build, s, B, HV, V, NC, "state")
        o0b = cm.bf16(tokens_of(o0, "state", T))
        r["reference o vs model"] = ref.rel_rms(o0, s["o"])
        r["o vs state"], r["state vs state"] = ref.rel_rms(o_tok, o0b), ref.rel_rms(xt, xt0)
        r["max |o - state's bf16|"] = float(np.nanmax(np.abs(o_tok - o0b)))
        r["max |xt - state's|"] = float(np.nanmax(np.abs(xt - xt0)))
        r["bit-identical"] = bool(np.array_equal(o_tok, o0b) and np.array_equal(xt, xt0))
    return r


def raw_case(gates, V, B=2, T=200, H=1, HV=2, seed=0, lb=None, beta_sigmoid=False):
    """Prep v4's raw inputs of a case (case_inputs' draw; the softplus gate, or the bounded one
    with `lb`; beta effective, or bf16 logits drawn after the rest with `beta_sigmoid`), the
    model's operands and results on chunk64_model.tokens64's tokens (state_inputs' dict), h0,
    and the float64 loop's o and final state."""
    rng = np.random.default_rng(seed)
    parts = [inputs(rng, T, H, HV, V, gates) for _ in range(B)]
    q, k, v, g, beta = (np.concatenate([p[i] for p in parts]) for i in range(5))
    if beta_sigmoid:  # logits as FlashKDA takes them (bf16 values)
        beta = cm.bf16(2 * rng.standard_normal(beta.shape)).astype(np.float32)
    A_log, dt = parts[0][5], parts[0][6]
    h0 = np.concatenate([p[7] for p in parts])
    opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt, lower_bound=lb,
                beta_sigmoid=beta_sigmoid)
    o, ht = ref.recurrent(q, k, v, g, beta, initial_state=h0, **opts)
    xp = ref.prepare(q, k, v, g, beta, None, **opts)
    qh, kh, al, bt = m.tokens64(q, k, g, beta, A_log, dt, lower_bound=lb, beta_sigmoid=beta_sigmoid)
    s = m.state_inputs((xp[0], qh, kh, xp[3], None, bt), h0, plan=m.PREP4, alpha=al)
    raw = {"q": q, "k": k, "g": g, "beta": np.asarray(beta, np.float32),
           "a_log": np.asarray(A_log, np.float32), "dt_bias": np.asarray(dt, np.float32).reshape(HV, -1)}
    return raw, s, h0, o, ht


OPERANDS = ("kq", "kbt", "tmb", "aqk", "gamma")


def run_prep4_case(build, gates, V, state="state", lb=None, beta_sigmoid=False):
    """prep_results of prep v4 on one case: the raw inputs in (the bounded gate with `lb`, beta
    logits with `beta_sigmoid`: the entry of that form), the model on tokens64's tokens."""
    import torch
    import kernrt
    from kernrt.gen import kda_chunk64 as g64, pin
    raw, s, h0, o_ref, ht_ref = raw_case(gates, V, lb=lb, beta_sigmoid=beta_sigmoid)
    B, T, H = raw["q"].shape[:3]
    HV, NC = raw["g"].shape[2], s["kq"].shape[2]
    cubins = os.path.join(build, "cubins", "run")
    form = dict(gate="softplus" if lb is None else "lower_bound",
                beta="sigmoid" if beta_sigmoid else "direct", lower_bound=lb)
    rt = kernrt.load(pin(g64.forward64_manifest(B, HV, V, NC, "prep4", heads=H, tokens=T,
                                                state=state, **form), cubins), cubins=[cubins])
    for name in ("q", "k", "g", "beta", "a_log", "dt_bias"):
        dt = torch.bfloat16 if name in ("q", "k", "g") else torch.float32
        rt.buffer(name).copy_(torch.from_numpy(np.ascontiguousarray(raw[name])).to(dt))
    rt.buffer("v").copy_(torch.from_numpy(v_of(s, state, T)).to(torch.bfloat16))
    rt.buffer("x0").copy_(torch.from_numpy(s["x0"]))
    return prep_results(rt, s, o_ref, ht_ref, B, NC, HV, V, state)


def prep_results(rt, s, o_ref, ht_ref, B, NC, HV, V, state="state"):
    """Programs prep64 and forward64 on the loaded inputs (outputs poisoned first): the
    operands against the model's `s`, o and the final state against the model and float64
    (state2's bf16 o against the model's rounded to bf16)."""
    for name in OPERANDS + ("o", "xt"):
        rt.buffer(name).fill_(float("nan"))
    rt.run("prep64", seqs=B)
    r = {f"{name} vs model": ref.rel_rms(rt.buffer(name).float().cpu().numpy(), s[name])
         for name in OPERANDS}
    for name in OPERANDS + ("o", "xt"):
        rt.buffer(name).fill_(float("nan"))
    rt.run("forward64", seqs=B)
    o = rt.buffer("o").float().cpu().numpy()
    xt = rt.buffer("xt").float().cpu().numpy()
    T = o_ref.shape[1]
    o_tok = tokens_of(o, state, T)
    om = s["o"] if state == "state" else cm.bf16(tokens_of(s["o"], "state", T))
    r.update({"o vs model": ref.rel_rms(o if state == "state" else o_tok, om),
              "state vs model": ref.rel_rms(xt, s["xt"]),
              "o vs float64": ref.rel_rms(cm.bf16(o_tok), cm.bf16(o_ref.astype(np.float32))),
              "state vs float64": ref.rel_rms(xt, ht_ref)})
    r["finite"] = bool(np.isfinite(o).all() and np.isfinite(xt).all())
    return r


def time_forward(build, B=8, HV=16, V=128, NC=64, profile=False, state="state"):
    """Median us of prep v4's prep64 and forward64 at B8 T4096 H16 V128 on random raw inputs;
    with `profile`, one eager forward64 instead (the launches an Nsight Compute profile targets)."""
    import torch
    import kernrt
    from kernrt.gen import kda_chunk64 as g64, pin
    cubins = os.path.join(build, "cubins", "run")
    # B8 T4096 H16: no GVA
    rt = kernrt.load(pin(g64.forward64_manifest(B, HV, V, NC, "prep4", heads=HV, state=state), cubins),
                     cubins=[cubins])
    gen = torch.Generator(device="cuda").manual_seed(0)
    # raw inputs; alpha = exp(-4 softplus(g - 6)) ~ 0.99: the tf32 path
    for name in ("q", "k", "g"):
        b = rt.buffer(name)
        b.copy_(torch.randn(b.shape, generator=gen, device="cuda"))
    rt.buffer("a_log").fill_(float(np.log(4.0)))
    rt.buffer("dt_bias").fill_(-6.0)
    rt.buffer("beta").fill_(0.5)
    rt.buffer("v").copy_(torch.randn(rt.buffer("v").shape, generator=gen, device="cuda"))
    rt.buffer("x0").zero_()
    if profile:
        rt.run("forward64", seqs=B)
        rt.close()
        return
    for prog in ("prep64", "forward64"):
        t = rt.time(prog, iters=20, graph=True, seqs=B)
        print(f"TIME chunk64 prep4 {state} {prog} B{B} HV{HV} V{V} NC{NC}: {t['median_us']:.1f} us "
              f"(min {t['min_us']:.1f})", flush=True)
    print(f"TIME chunk64 forward64: finite o {bool(torch.isfinite(rt.buffer('o')).all())}, "
          f"finite state {bool(torch.isfinite(rt.buffer('xt')).all())}", flush=True)
    rt.close()


def time_state(build, B=8, HV=16, V=128, NC=64, state="state"):
    """Median us of the `state` entry at B8 T4096 H16 V128 on random bounded operands."""
    import torch
    import kernrt
    from kernrt.gen import kda_chunk64 as g64, pin
    cubins = os.path.join(build, "cubins", "run")
    rt = kernrt.load(pin(g64.state64_manifest(B, HV, V, NC, state), cubins), cubins=[cubins])
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, sc in (("kq", 0.08), ("kbt", 0.08), ("tmb", 0.1), ("aqk", 0.1), ("v", 1.0)):
        b = rt.buffer(name)
        b.copy_(torch.randn(b.shape, generator=gen, device="cuda") * sc)
    rt.buffer("gamma").fill_(0.5)
    rt.buffer("x0").zero_()
    t = rt.time("state64", iters=20, graph=True, seqs=B)
    print(f"TIME chunk64 {state} step B{B} HV{HV} V{V} NC{NC}: {t['median_us']:.1f} us "
          f"(min {t['min_us']:.1f}); finite o {bool(torch.isfinite(rt.buffer('o')).all())}",
          flush=True)
    rt.close()


def time_vs_flashkda(build, state="state2", iters=20, rounds=4):
    """forward64 (prep v4's lbgate_sigbeta entry, then `state`) against FlashKDA in this process
    on the same tensors: benches.py's FlashKDA case (B8 T4096 H16 V128, lower_bound -5, beta
    logits in bf16 values, bf16 g, an initial state; fixture.Case seed 100), v copied once into
    the chunk layout the state step reads. Both timed as graph replays behind a GPU sleep,
    alternating rounds, medians (bench.interleaved, as benches.py); prints one TIME line with
    the ratio and ours against FlashKDA's outputs (information: FlashKDA's running state is
    bf16)."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
    import bench
    import fixture as fx
    from kernrt.gen import kda_chunk64 as g64
    c = fx.Case(seed=100, B=8, T=4096, H=16, gate="lower_bound", lower_bound=-5.0, beta="sigmoid",
                g_dtype=torch.bfloat16)
    c.beta = c.beta.bfloat16().float()  # FlashKDA takes bf16 logits: the same values for both
    B, T, HV, V = c.B, c.T, c.HV, c.V
    NC = -(-T // m.C)
    rt = fx.load(g64.forward64_manifest(B, HV, V, NC, "prep4", heads=c.H, tokens=T, state=state,
                                        gate="lower_bound", beta="sigmoid", lower_bound=c.lower_bound),
                 build)
    for name, t in (("q", c.q), ("k", c.k), ("g", c.g), ("beta", c.beta), ("a_log", c.A_log),
                    ("dt_bias", c.dt_bias.view(HV, -1)), ("x0", c.h0)):
        rt.buffer(name).copy_(t)
    if state == "state2":
        rt.buffer("v").copy_(c.v)  # the product layout, as FlashKDA reads it
    else:
        rt.buffer("v").copy_(c.v.view(B, NC, m.C, HV, V).permute(0, 3, 1, 2, 4))
    ours = lambda: rt.enqueue("forward64", graph=True, vars={"seqs": B})
    rt.buffer("o").fill_(float("nan"))
    ours()
    torch.cuda.synchronize()
    o = rt.buffer("o")
    if state != "state2":
        o = o.permute(0, 2, 3, 1, 4).reshape(B, NC * m.C, HV, V)[:, :T]
    contenders, info = {"ours": ours}, {}
    mod, why = fx.import_peer("flash_kda")
    if mod is not None:
        try:
            fn = fx.flash_kda_prefill(c, mod)
            po, ph = fn()
            torch.cuda.synchronize()
            info["ours vs FlashKDA o"] = ref.rel_rms(o.double(), po.double())
            info["state"] = ref.rel_rms(rt.buffer("xt").double(), ph.double())
            contenders["FlashKDA"] = bench.torch_graph(fn).replay
        except Exception as e:  # noqa: BLE001 - recorded, ours is still timed
            why = f"FlashKDA failed: {type(e).__name__}: {e}"[:200]
    med = bench.interleaved(contenders, iters, rounds)
    finite = bool(torch.isfinite(o.float()).all() and torch.isfinite(rt.buffer("xt")).all())
    tail = (f"FlashKDA {med['FlashKDA']:.1f} us, ratio {med['FlashKDA'] / med['ours']:.3f}"
            if "FlashKDA" in med else f"FlashKDA unavailable ({why})")
    print(f"TIME chunk64 forward64 prep4-lbgate-sigbeta + {state} vs FlashKDA B{B} T{T} H{c.H} V{V} "
          f"lower_bound -5 beta logits: ours {med['ours']:.1f} us, {tail}; finite {finite}"
          + "".join(f", {k} {v:.3g}" for k, v in info.items()), flush=True)
    rt.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--out")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--time", action="store_true", help="also time the entry (diagnostic)")
    ap.add_argument("--prep", default="prep4", choices=("prep4",),
                    help="the prep under test: v4 (kda_chunk64_prep4.cu)")
    ap.add_argument("--state", default="state", choices=STATE_ENTRIES,
                    help="the state step under test: kda_chunk64_state.cu (synchronous copies, the "
                         "reference) or kda_chunk64_state2.cu (pipelined; also compared with the reference)")
    ap.add_argument("--profile", action="store_true",
                    help="only one eager forward64 of prep v4 at B8 HV16 V128 NC64 "
                         "(for ncu -k regex:kda_chunk64)")
    args = ap.parse_args()
    import kernrt
    if not kernrt.device_available():
        print("check_chunk64: no CUDA device: nothing checked")
        return 2
    if args.profile:
        time_forward(args.build, profile=True, state=args.state)
        return 0
    import torch
    rows, ok = [], True
    for gates, lb, V in CASES:
        label = f"chunk64 {args.state} step B2 T200 HV2 V{V} {gates}" + ("" if lb is None else f" lb {lb:g}")
        try:
            r = run_case(args.build, gates, lb, V, args.state)
        except Exception as e:  # a refusal or a fault: recorded, the next case still runs
            print(f"{label}: FAILED to run: {type(e).__name__}: {e}")
            rows.append({"case": label, "kind": "check", "pass": False, "error_text": str(e)})
            ok = False
            continue
        # state2's o is bf16: held to the model through the reference entry's fp32 o (MODEL_TOL)
        # and its equality with that o rounded; its own bf16 against the model's rounded at GATE
        o_model_ok = r["o vs model"] <= MODEL_TOL if args.state == "state" else \
            r["reference o vs model"] <= MODEL_TOL and r["o vs model"] <= GATE
        good = r["finite"] and o_model_ok and r["state vs model"] <= MODEL_TOL \
            and r["o vs float64"] <= GATE and r["state vs float64"] <= GATE \
            and r.get("o vs state", 0.0) <= SAME_TOL and r.get("state vs state", 0.0) <= SAME_TOL
        ok &= good
        print(f"{label}: " + ", ".join(f"{k} {v:.3g}" for k, v in r.items()
                                       if k not in ("finite", "bit-identical"))
              + f", finite {r['finite']}" + (f", bit-identical {r['bit-identical']}" if "bit-identical" in r else "")
              + f": {'pass' if good else 'FAIL'}")
        row = {"case": label, "kind": "check", "error": r["o vs float64"],
               "error_state": r["state vs float64"], "error_vs_model": r["o vs model"],
               "error_state_vs_model": r["state vs model"], "gate": GATE,
               "gate_vs_model": MODEL_TOL, "pass": good}
        if "bit-identical" in r:
            row.update({"error_vs_model_reference_entry": r["reference o vs model"],
                        "o_bf16_product_layout": True,
                        "error_vs_reference_entry": r["o vs state"],
                        "error_state_vs_reference_entry": r["state vs state"],
                        "gate_vs_reference_entry": SAME_TOL, "bit_identical": r["bit-identical"]})
        rows.append(row)
    jobs = []  # (label, the case's run): the prep's cases
    for gates, lb, V, sig in PREP4_CASES:
        jobs.append((f"chunk64 prep4 + {args.state} B2 T200 HV2 V{V} {gates}"
                     + ("" if lb is None else f" lb {lb:g}") + (" beta logits" if sig else ""),
                     lambda c=(gates, V, args.state, lb, sig): run_prep4_case(args.build, *c)))
    for label, run in jobs:
        try:
            r = run()
        except Exception as e:  # a refusal or a fault: recorded, the next case still runs
            print(f"{label}: FAILED to run: {type(e).__name__}: {e}")
            rows.append({"case": label, "kind": "check", "pass": False, "error_text": str(e)})
            ok = False
            continue
        good = r["finite"] and all(r[f"{n} vs model"] <= GATE for n in OPERANDS) \
            and r["o vs model"] <= GATE and r["state vs model"] <= GATE \
            and r["o vs float64"] <= GATE and r["state vs float64"] <= GATE
        ok &= good
        print(f"{label}: " + ", ".join(f"{k} {v:.3g}" for k, v in r.items() if k != "finite")
              + f", finite {r['finite']}: {'pass' if good else 'FAIL'}")
        rows.append({"case": label, "kind": "check", "error": r["o vs float64"],
                     "error_state": r["state vs float64"], "error_vs_model": r["o vs model"],
                     "error_state_vs_model": r["state vs model"], "gate": GATE,
                     "gate_vs_model": GATE, "pass": good,
                     "operands_vs_model": {n: r[f"{n} vs model"] for n in OPERANDS}})
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        base = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
                "commit": args.commit, "family": "kda"}
        with open(os.path.join(args.out, "kda_chunk64.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps({**base, **r}) + "\n")
    print("\n| case | o vs model | state vs model | o vs float64 | state vs float64 | pass |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | {r['error_vs_model']:.2e} | {r['error_state_vs_model']:.2e} | "
                  f"{r['error']:.2e} | {r['error_state']:.2e} | {r['pass']} |")
        else:
            print(f"| {r['case']} | - | - | - | - | False (did not run) |")
    if args.time:
        try:
            time_state(args.build, state=args.state)
            if args.state != "state":  # the reference entry in the same process, for the ratio
                time_state(args.build, state="state")
            time_forward(args.build, state=args.state)
        except Exception as e:  # noqa: BLE001 - a diagnostic: report it
            print(f"TIME chunk64 state step: failed {type(e).__name__}: {e}"[:300])
        try:
            time_vs_flashkda(args.build, state=args.state)
        except Exception as e:  # noqa: BLE001 - a diagnostic: report it
            print(f"TIME chunk64 vs FlashKDA: failed {type(e).__name__}: {e}"[:300])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
