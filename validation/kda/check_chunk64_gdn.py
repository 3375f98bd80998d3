"""The GDN cases and timing of check_chunk64.py --prep gdn (kernels/kda/chunk64_prep_gdn.md):
GDN's prep kda_chunk64_prep_gdn{,_sigbeta}_sm90a_f16_k128 on raw inputs, alone and chained
with the state step, through the product path (a kernrt.gen.kda_chunk64 forward64 manifest,
prep="gdn", pinned to BUILD/cubins/run).

Owns: CASES (B 2, T 200: 4 chunks, the last padded; HV 2 over H 1; V 128 and 256; the fla-init
and the harsh gate per value head, beta logits, and a saturating gate: raw g + 88, where 2^z
overflows fp32 and the kernel's clamp of the log2 decay at -64 acts), each compared as
check_chunk64.prep_results does: the operands (kq, kbt, tmb, aqk, gamma) against
chunk64_model.gdn_case's (tokens_gdn then prep64_gdn, plan "f16") at 2e-3 (f16 roundings of
the same values flip by one ulp; a wrong index, scale or decay is O(1)), o and the final state
of prep64 + state64 against the model and the float64 loop (kda_ref, gate 2e-3); time_gdn: the
prep alone and prep + state at B8 T4096 H16 V128 (graph replay, medians of 20, printed "TIME").
Does not record timings (check_chunk64.py writes the case rows).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chunk64_model as m  # noqa: E402

# (gates, V, beta logits, raw g shift)
CASES = (("init", 128, False, 0.0), ("harsh", 128, False, 0.0), ("init", 256, False, 0.0),
         ("init", 128, True, 0.0), ("harsh", 128, False, 88.0))


def label(gates, V, sig, shift, state):
    return (f"chunk64 gdn + {state} B2 T200 HV2 V{V} {gates}" + (" beta logits" if sig else "")
            + (f" g+{shift:g}" if shift else ""))


def run_gdn_case(build, gates, V, state="state2", beta_sigmoid=False, g_shift=0.0):
    """check_chunk64.prep_results' dict for one GDN case."""
    import torch
    import kernrt
    from kernrt.gen import kda_chunk64 as g64, pin
    from check_chunk64 import prep_results, v_of
    raw, s, _, o_ref, ht_ref = m.gdn_case(gates, V=V, beta_sigmoid=beta_sigmoid, g_shift=g_shift)
    B, T, H = raw["q"].shape[:3]
    HV, NC = raw["g"].shape[2], s["kq"].shape[2]
    cubins = os.path.join(build, "cubins", "run")
    rt = kernrt.load(pin(g64.forward64_manifest(B, HV, V, NC, "gdn", heads=H, tokens=T, state=state,
                                                beta="sigmoid" if beta_sigmoid else "direct"), cubins),
                     cubins=[cubins])
    for name in ("q", "k", "g", "beta", "a_log", "dt_bias"):
        dt = torch.bfloat16 if name in ("q", "k") else torch.float32
        rt.buffer(name).copy_(torch.from_numpy(np.ascontiguousarray(raw[name])).to(dt))
    rt.buffer("v").copy_(torch.from_numpy(v_of(s, state, T)).to(torch.bfloat16))
    rt.buffer("x0").copy_(torch.from_numpy(s["x0"]))
    return prep_results(rt, s, o_ref, ht_ref, B, NC, HV, V, state)


def time_gdn(build, state="state2", B=8, T=4096, H=16, V=128):
    """Median us of prep64 (the GDN prep alone) and forward64 (prep, then `state`) at B8 T4096
    H16 V128 on random raw inputs (decay exp(-4 softplus(g - 6)) ~ 0.99 per token, beta 0.5)."""
    import torch
    import kernrt
    from kernrt.gen import kda_chunk64 as g64, pin
    NC = -(-T // m.C)
    cubins = os.path.join(build, "cubins", "run")
    rt = kernrt.load(pin(g64.forward64_manifest(B, H, V, NC, "gdn", heads=H, tokens=T, state=state),
                         cubins), cubins=[cubins])
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name in ("q", "k", "g", "v"):
        b = rt.buffer(name)
        b.copy_(torch.randn(b.shape, generator=gen, device="cuda"))
    rt.buffer("a_log").fill_(float(np.log(4.0)))
    rt.buffer("dt_bias").fill_(-6.0)
    rt.buffer("beta").fill_(0.5)
    rt.buffer("x0").zero_()
    for prog in ("prep64", "forward64"):
        t = rt.time(prog, iters=20, graph=True, seqs=B)
        print(f"TIME chunk64 gdn {state} {prog} B{B} T{T} H{H} V{V}: {t['median_us']:.1f} us "
              f"(min {t['min_us']:.1f})", flush=True)
    print(f"TIME chunk64 gdn forward64: finite o {bool(torch.isfinite(rt.buffer('o').float()).all())}, "
          f"finite state {bool(torch.isfinite(rt.buffer('xt')).all())}", flush=True)
    rt.close()
