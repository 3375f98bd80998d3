"""Correctness cases of the KDA / GDN device validation (run.py calls them in order).

Owns every check of the issue's item 4 on our kernels through the product path, each against
kda_ref.py's float64 token loop on the device, with fla's error on the same inputs where fla
runs: o against the reference rounded to bf16 (the best answer bf16 can hold) and the final
state against the float64 state, both rel rms, gate <= 2e-3 and <= 1.25 x fla's + 1e-6.
Outputs and states are poisoned with NaN before every run, so unwritten elements fail.
Cases: fla-init gates, kernel-fun's harsh raw g, lower_bound -5 with beta logits (x2),
GVA 2x, T not a multiple of 64, varlen with 1- and 63-token sequences, GDN, context parallel
(4 segments), no initial state; state continuity (prefill then continued prefill), decode
after prefill, verify + commit rolled back to every prefix (also bit-exact against that many
decode steps), a null line and untouched lines, graph replay bit-identical to eager, and the
refusals (generator and runtime). Does not time anything (benches.py does).
"""
import time
import traceback

import torch

import fixture as fx
import kda_ref as ref
from kernrt.gen import kda as gk

GATE = 2e-3


def rr(got, want):
    return ref.rel_rms(got.double(), want)


def o_err(o, o64):
    return rr(o, o64.to(torch.bfloat16).double())


def gate(rec, name, o, ht, o64, ht64, peer=None, **extra):
    """Records one check of (o, ht) against the reference, with the peer's (o, ht) if any."""
    eo = o_err(o, o64)
    eh = rr(ht, ht64) if ht is not None else 0.0
    row = dict(error=max(eo, eh), error_o=eo, error_state=eh, gate=GATE,
               error_o_unrounded=rr(o, o64), **extra)
    ok = eo <= GATE and eh <= GATE
    if peer is not None:
        po = o_err(peer[0], o64)
        ph = rr(peer[1], ht64) if peer[1] is not None and ht is not None else 0.0
        row.update(peer_error=max(po, ph), peer_error_o=po, peer_error_state=ph)
        ok = ok and eo <= 1.25 * po + 1e-6 and eh <= 1.25 * ph + 1e-6
    return rec.check(name, ok, **row)


def reference(c, h0=None, cu=None, sl=None):
    q, k, v, g, b = c.q, c.k, c.v, c.g, c.beta
    if sl is not None:
        q, k, v, g, b = (x[:, sl] for x in (q, k, v, g, b))
    return ref.recurrent(q, k, v, g, b, scale=fx.K ** -0.5,
                         initial_state=c.h0 if h0 is None else h0,
                         cu_seqlens=c.cu if cu is None else cu, **c.ref_opts())


def prefill_cases(quick):
    """(name, Case kwargs, Prefill kwargs): each kernel on its own cases (chunk c16:
    kda_chunk.cu; c64: the 64-token chunk kernels, which take KDA's g in bf16)."""
    cu_var = [0, 1, 64, 127, 190, 253, 700, 701, 764]  # 1, 63 x 4, 447, 1, 63 tokens
    cu_cp = [0]
    for n in (63, 1, 700, 2500, 64, 130, 5000, 900):
        cu_cp.append(cu_cp[-1] + n)
    bf = dict(g_dtype=torch.bfloat16)
    c16, c64 = dict(chunk="c16"), dict(chunk="c64")
    cs = [
        ("kda fla-init gates", dict(gates="init"), c16),
        ("kda harsh raw g (kernel-fun)", dict(gates="harsh"), c16),
        ("kda lower_bound -5, beta logits x2, bf16 g, V256",
         dict(T=777, V=256, gate="lower_bound", lower_bound=-5.0, beta="logit2", g_dtype=torch.bfloat16), c16),
        ("kda context parallel 4 x 1024", dict(B=1, T=4096), dict(cp_segs=4, seg_chunks=64, **c16)),
        ("c64 kda fla-init gates, bf16 g", dict(gates="init", **bf), c64),
        ("c64 kda harsh raw g, bf16 g", dict(gates="harsh", **bf), c64),
        ("c64 kda lower_bound -5, beta logits, bf16 g, V256",
         dict(T=777, V=256, gate="lower_bound", lower_bound=-5.0, beta="sigmoid", **bf), c64),
        ("kda GVA 2x", dict(T=600, H=2, HV=4), c16),
        ("kda varlen with 1- and 63-token sequences", dict(gates="harsh", cu=cu_var), c16),
        ("gdn in-kernel gate, GVA 2x", dict(kind="gdn", H=4, HV=8), c16),
        ("gdn varlen, log-decay g", dict(kind="gdn", gate=None, cu=cu_var), c16),
        ("kda no initial state", dict(T=300, init=False), c16),
        ("gdn context parallel 4 x 1024, harsh", dict(kind="gdn", B=1, T=4096, gates="harsh"),
         dict(cp_segs=4, seg_chunks=64)),
        ("c64 kda GVA 2x, bf16 g", dict(T=600, H=2, HV=4, **bf), c64),
        ("c64 kda varlen with 1- and 63-token sequences, bf16 g", dict(gates="harsh", cu=cu_var, **bf), c64),
        ("c64 kda no initial state, bf16 g", dict(T=300, init=False, **bf), c64),
        ("c64 gdn in-kernel gate, GVA 2x", dict(kind="gdn", H=4, HV=8), c64),
        ("c64 gdn varlen, harsh, beta logits", dict(kind="gdn", gates="harsh", beta="sigmoid", cu=cu_var), c64),
        ("c64 gdn V256 T777, GVA 2x", dict(kind="gdn", T=777, H=2, HV=4, V=256), c64),
        ("c64 gdn harsh raw g + 88 (exp overflows: the gate's clamp)",
         dict(kind="gdn", T=300, gates="harsh", g_shift=88.0), c64),
        ("c64 kda context parallel 4 x 1024, bf16 g", dict(B=1, T=4096, **bf),
         dict(cp_segs=4, seg_chunks=64, **c64)),
        # fla-init gates: the state carried across segments matters (under harsh gates it decays
        # to nothing within a segment, and context parallel equals the one pass bit for bit)
        ("c64 gdn context parallel 4 x 1024", dict(kind="gdn", B=1, T=4096, gates="init"),
         dict(cp_segs=4, seg_chunks=64, **c64)),
        # GDN's context parallel is decay-bounded (kda_chunk64_state2.cu warm_start): at H16 and
        # 512-token segments fla's init gates mix heads whose segments run their trailing chunks
        # alone with heads that stay exact; the weak gates keep every segment exact
        ("c64 gdn context parallel 8 x 512, H16, decay-bounded and exact heads",
         dict(kind="gdn", B=1, T=4096, H=16, gates="init"), dict(cp_segs=8, seg_chunks=32, **c64)),
        ("c64 gdn context parallel 4 x 1024, weak decay (every segment exact)",
         dict(kind="gdn", B=1, T=4096, gates="weak"), dict(cp_segs=4, seg_chunks=64, **c64)),
        ("c64 kda context parallel 4 x 768, B2 T4000 (segment 0 takes the 15 chunks past 4 x 12)",
         dict(B=2, T=4000, gates="init", **bf), dict(cp_segs=4, seg_chunks=48, **c64)),
        ("c64 kda context parallel 4 x 768, B3 T2350 (segment 0 one chunk: transitions first)",
         dict(B=3, T=2350, gates="init", **bf), dict(cp_segs=4, seg_chunks=48, **c64)),
        ("c64 kda varlen context parallel 4 x 256 (segments past short sequences)",
         dict(cu=[0, 100, 1300, 1301, 3000], gates="init", **bf), dict(cp_segs=4, seg_chunks=16, **c64)),
        # segments counted from each sequence's end (cp_segment): 11 and 15 chunks split 3 + 8 and
        # 7 + 8, 40 and 79 chunks 24 / 63 + 8 + 8, the rest whole; KDA's phase 1 in the order
        # kda_chunk64_cp_order_sm90a writes, GDN's decay-bounded in grid order
        ("c64 kda varlen context parallel 3 x 512 (segment 0 takes the rest)",
         dict(cu=cu_cp, gates="init", **bf), dict(cp_segs=3, seg_chunks=32, **c64)),
        ("c64 gdn varlen context parallel 3 x 512 (segment 0 takes the rest)",
         dict(kind="gdn", cu=cu_cp, H=4, gates="init"), dict(cp_segs=3, seg_chunks=32, **c64)),
    ]
    return cs[:7] if quick else cs


def run_prefill_checks(rec, build, peers, quick, deadline, only=None):
    """Each prefill case (only: a compiled regex, the cases whose names it finds)."""
    ok = True
    for i, (name, kw, cp) in enumerate(prefill_cases(quick)):
        if only is not None and not only.search(name):
            continue
        try:
            c = fx.Case(seed=10 + i, **kw)
            ours = fx.Prefill(c, build, **cp)
            assert ours.chunk == cp.get("chunk", ours.chunk), (ours.chunk, cp)
            ours.write()
            o, ht = ours.run()
            o64, ht64 = reference(c)
            peer = None
            mod = peers.get("fla_kda" if c.kind == "kda" else "fla_gdn")
            if mod is not None and time.time() > deadline:
                rec.add(case=f"prefill {name}: fla", kind="note", note="fla skipped: time budget")
            elif mod is not None:
                try:
                    po, ph = fx.fla_prefill(c, kda_mod=peers.get("fla_kda"), gdn_mod=peers.get("fla_gdn"))()
                    peer = (po, ph)
                except Exception as e:  # noqa: BLE001 - fla failing is recorded, not fatal
                    rec.add(case=f"prefill {name}: fla", kind="note", note=f"fla failed: {e!r}"[:300])
            ok &= gate(rec, f"prefill {c.label()}: {name}", o, ht, o64, ht64, peer,
                       peer_name="fla 0.6.0" if peer else None, chunk=ours.chunk,
                       **({"cp": cp} if "cp_segs" in cp else {}))
            if i == 0 or "c64" in name:  # graph replay, bit for bit the eager result
                og, hg = ours.run(graph=True)
                same = torch.equal(og.view(torch.int16), o.view(torch.int16)) and torch.equal(
                    hg.view(torch.int32), ht.view(torch.int32))
                ok &= rec.check(f"prefill {c.label()}: {name}: graph replay bit-identical to eager", same)
            if "cp_segs" in cp:  # the context-parallel result against the one-pass kernel
                one = fx.Prefill(c, build, chunk=ours.chunk)
                one.write()
                o1, h1 = one.run()
                ok &= rec.check(f"prefill {c.label()}: {name}: context parallel vs one pass",
                                o_err(o, o1.double()) <= GATE and rr(ht, h1.double()) <= GATE,
                                error=max(o_err(o, o1.double()), rr(ht, h1.double())), gate=GATE)
                one.rt.close()
            ours.rt.close()
        except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
            traceback.print_exc()
            ok &= rec.check(f"prefill {name}", False, exception=repr(e)[:300])
        torch.cuda.empty_cache()
    return ok


def _pack(c, lens, start):
    """Rows of the packed batch c (B = 1 varlen) taking lens[n] tokens of sequence n from
    offset start[n] within it -> (index tensor, cu list)."""
    idx, cu = [], [0]
    for n, L in enumerate(lens):
        b = c.cu[n] + start[n]
        idx += list(range(b, b + L))
        cu.append(cu[-1] + L)
    return torch.tensor(idx, device="cuda", dtype=torch.long), cu


class Sub:
    """A varlen Case restricted to some tokens of each sequence (same gates and weights)."""

    def __init__(self, c, lens, start, h0=None):
        idx, cu = _pack(c, lens, start)
        self.__dict__.update({k: v for k, v in c.__dict__.items()})
        for name in ("q", "k", "v", "g", "beta"):
            setattr(self, name, getattr(c, name)[:, idx])
        self.cu, self.T, self.N = cu, cu[-1], len(lens)
        self.cu_t = torch.tensor(cu, dtype=torch.int32, device="cuda")
        self.h0 = h0
        self.ref_opts = c.ref_opts


def run_serving_checks(rec, build, peers, quick):
    ok = True
    for g_dtype in (torch.float32, torch.bfloat16):  # the prefill on c16, then on c64
        try:
            ok &= _continuity_and_decode(rec, build, g_dtype)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            ok &= rec.check(f"serving: continuity / decode after prefill (g {g_dtype})", False,
                            exception=repr(e)[:300])
    for kind in ("kda",) if quick else ("kda", "gdn"):
        try:
            ok &= _verify_rollback(rec, build, kind)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            ok &= rec.check(f"serving {kind}: verify rollback", False, exception=repr(e)[:300])
    try:
        ok &= _refusals(rec, build)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        ok &= rec.check("refusals", False, exception=repr(e)[:300])
    return ok


def _continuity_and_decode(rec, build, g_dtype):
    """prefill T1 then prefill_cont T2 equals one prefill of T1 + T2; a decode after a prefill
    of T equals the prefill of T + 1. Three sequences in pool lines 3, 1, 2. g in f32 runs the
    prefills on c16 (kda_chunk.cu), in bf16 on c64 (the 64-token chunk kernels)."""
    ok = True
    full = [634, 242, 47]
    part = [300, 177, 45]
    c = fx.Case(cu=[0, full[0], full[0] + full[1], sum(full)], H=4, gates="init", init=False, seed=31,
                g_dtype=g_dtype)
    srv = fx.Serving(c.profile(), build, max_seqs=4, max_tokens=1024, steps=4)
    want = "c64" if g_dtype == torch.bfloat16 else "c16"
    assert srv.chunk == want, (srv.chunk, want)
    tag = f"serving kda ({srv.chunk})"
    lines = [3, 1, 2]
    srv.set_lines(lines)
    for ln in range(srv.rt.states["kda"]["bytes"] // srv.slot):
        srv.line_state(ln).fill_(fx.NAN) if ln in lines else srv.line_state(ln).fill_(0.5)
    a = Sub(c, part, [0, 0, 0])
    srv.write_inputs("pre", a)
    srv.rt.buffer("cu_seqlens")[:4].copy_(a.cu_t)
    srv.rt.buffer("pre_o").fill_(fx.NAN)
    srv.rt.enqueue("prefill", vars={"seqs": 3, "tokens": a.T})
    torch.cuda.synchronize()
    h1 = torch.stack([srv.line_state(ln).clone() for ln in lines])
    o1 = srv.rt.buffer("pre_o")[:a.T].clone().unsqueeze(0)
    rest = [f - p - 1 for f, p in zip(full, part)]
    # decode of token part[n] of every sequence, from the prefill's states
    d = Sub(c, [1, 1, 1], part)
    for name in ("q", "k", "v", "g", "beta"):
        setattr(d, name, getattr(d, name).transpose(0, 1))  # [seqs, 1, ...] as a batch
    d.B = 3
    srv.write_inputs("dec", d, t0=0)
    srv.rt.buffer("dec_o").fill_(fx.NAN)
    srv.rt.enqueue("decode", vars={"seqs": 3})
    torch.cuda.synchronize()
    od = srv.rt.buffer("dec_o")[:3].clone()
    h2 = torch.stack([srv.line_state(ln).clone() for ln in lines])
    # continued prefill of the rest
    b = Sub(c, rest, [p + 1 for p in part])
    srv.write_inputs("pre", b)
    srv.rt.buffer("cu_seqlens")[:4].copy_(b.cu_t)
    srv.rt.buffer("pre_o").fill_(fx.NAN)
    srv.rt.enqueue("prefill_cont", vars={"seqs": 3, "tokens": b.T})
    torch.cuda.synchronize()
    o3 = srv.rt.buffer("pre_o")[:b.T].clone().unsqueeze(0)
    h3 = torch.stack([srv.line_state(ln).clone() for ln in lines])
    # references: one pass over each whole sequence, cut at the same places
    o64, ht64 = reference(c, h0=None)
    oa, ha = reference(a, h0=None, cu=a.cu)
    T1 = [p + 1 for p in part]
    ab = Sub(c, T1, [0, 0, 0])
    o_ab, h_ab = reference(ab, h0=None, cu=ab.cu)
    ok &= gate(rec, f"{tag}: prefill of T into pool lines 3, 1, 2", o1, h1, oa, ha)
    ends = [ab.cu[n + 1] - 1 for n in range(3)]
    ok &= gate(rec, f"{tag}: decode after a prefill of T equals the prefill of T + 1",
               od.unsqueeze(0), h2, o_ab[:, ends].view(1, 3, c.HV, c.V), h_ab)
    idx, _ = _pack(c, rest, [p + 1 for p in part])
    ok &= gate(rec, f"{tag}: prefill T1 then continued prefill T2 equals one prefill of T1+T2",
               o3, h3, o64[:, idx], ht64)
    others = [ln for ln in range(srv.rt.states["kda"]["bytes"] // srv.slot) if ln not in lines]
    untouched = all(bool((srv.line_state(ln) == 0.5).all()) for ln in others)
    ok &= rec.check(f"{tag}: lines of other sequences untouched (bit-identical)", untouched)
    srv.rt.close()
    return ok


def _verify_rollback(rec, build, kind):
    """9 sequences at lines 1..9 with random states; verify 8 tokens; commit accepted[n] = n
    (every prefix 0..8 at once); each line against the reference after n tokens and bit for
    bit against n decode steps; plus a sequence on the null line."""
    ok = True
    N, S = 9, 8
    c = fx.Case(kind=kind, B=N, T=S, H=4, HV=8 if kind == "gdn" else 4, gates="harsh", seed=41)
    srv = fx.Serving(c.profile(), build, max_seqs=N + 1, max_tokens=64, steps=S)
    lines = list(range(1, N + 1))
    srv.set_lines(lines)
    for n, ln in enumerate(lines):
        srv.line_state(ln).copy_(c.h0[n])
    srv.write_inputs("ver", c, 0, S)
    srv.rt.buffer("ver_o").fill_(fx.NAN)
    srv.rt.enqueue("verify", vars={"seqs": N})
    torch.cuda.synchronize()
    ov = srv.rt.buffer("ver_o")[:N].clone()
    o64, _ = reference(c)
    ok &= gate(rec, f"serving {kind}: verify 8 tokens x {N} sequences (outputs)", ov, None, o64, None)
    same_pre = all(torch.equal(srv.line_state(ln), c.h0[n]) for n, ln in enumerate(lines))
    ok &= rec.check(f"serving {kind}: verify leaves the state lines as they were", same_pre)
    pool0 = srv.pool().clone()
    srv.rt.buffer("accepted")[:N].copy_(torch.arange(N, dtype=torch.int32))
    srv.rt.enqueue("commit", vars={"seqs": N})
    torch.cuda.synchronize()
    committed = [srv.line_state(ln).clone() for ln in lines]
    worst = 0.0
    for n in range(N):
        _, hn = reference(c, sl=slice(0, n)) if n else (None, c.h0.double())
        worst = max(worst, rr(committed[n], hn[n]))
    ok &= rec.check(f"serving {kind}: commit rolls back to every prefix 0..8 (vs float64)",
                    worst <= GATE, error=worst, gate=GATE)
    # the same prefixes by decode steps, from the same starting states
    srv.pool().copy_(pool0)
    chain = [c.h0[0].clone()] + [None] * (N - 1)
    for t in range(S):
        srv.write_inputs("dec", c, t0=t)
        srv.rt.enqueue("decode", vars={"seqs": N})
        torch.cuda.synchronize()
        if t + 1 < N:
            chain[t + 1] = srv.line_state(lines[t + 1]).clone()
    bitwise = all(torch.equal(chain[n].view(torch.int32), committed[n].view(torch.int32)) for n in range(N))
    ok &= rec.check(f"serving {kind}: commit(n) bit-identical to n decode steps", bitwise)
    # a sequence on the null line reads zeros and writes nothing
    srv.pool().copy_(pool0)
    srv.set_lines([0] + lines[1:])
    srv.write_inputs("dec", c, t0=0)
    srv.rt.buffer("dec_o").fill_(fx.NAN)
    srv.rt.enqueue("decode", vars={"seqs": N})
    torch.cuda.synchronize()
    z = fx.Case(kind=kind, B=N, T=S, H=4, HV=c.HV, gates="harsh", seed=41)
    z.h0 = torch.zeros_like(c.h0)
    oz, _ = reference(z, sl=slice(0, 1))
    od = srv.rt.buffer("dec_o")[:1].clone().unsqueeze(1)
    ok &= gate(rec, f"serving {kind}: decode on the null line (zero state, nothing written)",
               od, None, oz[:1], None)
    ok &= rec.check(f"serving {kind}: null line 0 never written",
                    torch.equal(srv.line_state(0), pool0[:srv.p.state_bytes].view(torch.float32).view_as(srv.line_state(0))))
    srv.rt.close()
    return ok


def _refusals(rec, build):
    """Bad calls are refused before launch with a clear error, nothing written."""
    ok = True
    for name, kw, want in (("K = 64", dict(dim_k=64), "K = 64 is not supported"),
                           ("V = 64", dict(dim_v=64), "V = 64 is not supported"),
                           ("HV not a multiple of H", dict(heads=16, value_heads=24), "not a multiple")):
        try:
            gk.Profile(**kw)
            ok &= rec.check(f"refusal: generator refuses {name}", False)
        except gk.GenError as e:
            ok &= rec.check(f"refusal: generator refuses {name}", want in str(e), message=str(e))
    p = gk.Profile(heads=2, value_heads=2)
    m = gk.serving_manifest(p, 2, 64, steps=2)
    m["states"]["kda"]["bytes_per_seq"] = p.state_bytes  # no room for the verify record
    probs = gk.check(m)
    ok &= rec.check("refusal: a pool slot too small for the layer is refused", bool(probs),
                    message=probs[0][1] if probs else "")
    srv = fx.Serving(p, build, max_seqs=2, max_tokens=64, steps=2)
    before = srv.pool().clone()
    try:
        import numpy as np
        srv.rt.write("lines", np.array([[1, 10 ** 6]], dtype=np.int32).tobytes())
        ok &= rec.check("refusal: a state line out of range is refused by the runtime", False)
    except Exception as e:  # noqa: BLE001 - the runtime's error class is the point
        ok &= rec.check("refusal: a state line out of range is refused by the runtime",
                        "kernrt" in type(e).__module__ and torch.equal(before, srv.pool()),
                        message=str(e)[:200])
    srv.rt.close()
    return ok


def run_dropin_checks(rec, peers):
    """kernrt.ops.kda with fla's signatures and fla's [N, HV, K, V] state layout: a chunked
    call and a one-token fused_recurrent call against the reference, and the forwarding of an
    unsupported call (requires_grad) to fla."""
    ok = True
    try:
        from kernrt.ops import kda as ops
        c = fx.Case(B=2, T=333, H=4, HV=8, gates="init", seed=51)
        h0_kv = c.h0.transpose(-1, -2).contiguous()
        o, ht = ops.chunk_kda(c.q, c.k, c.v, c.g, c.beta, initial_state=h0_kv,
                              output_final_state=True, use_qk_l2norm_in_kernel=True,
                              use_gate_in_kernel=True, A_log=c.A_log, dt_bias=c.dt_bias)
        torch.cuda.synchronize()
        o64, ht64 = reference(c)
        ok &= gate(rec, "drop-in kernrt.ops.kda.chunk_kda (fla layout states)", o,
                   ht.transpose(-1, -2), o64, ht64)
        cb = fx.Case(B=2, T=333, H=4, HV=8, gates="init", seed=53, g_dtype=torch.bfloat16)
        ob, htb = ops.chunk_kda(cb.q, cb.k, cb.v, cb.g, cb.beta,
                                initial_state=cb.h0.transpose(-1, -2).contiguous(),
                                output_final_state=True, use_qk_l2norm_in_kernel=True,
                                use_gate_in_kernel=True, A_log=cb.A_log, dt_bias=cb.dt_bias)
        torch.cuda.synchronize()
        ob64, htb64 = reference(cb)
        ok &= gate(rec, "drop-in kernrt.ops.kda.chunk_kda, bf16 g (the 64-token chunk kernels)",
                   ob, htb.transpose(-1, -2), ob64, htb64)
        one = fx.Case(B=5, T=1, H=4, gates="harsh", seed=52)
        o1, h1 = ops.fused_recurrent_kda(one.q, one.k, one.v, one.g, one.beta, one.A_log,
                                         one.dt_bias, initial_state=one.h0.transpose(-1, -2).contiguous(),
                                         output_final_state=True, use_qk_l2norm_in_kernel=True,
                                         use_gate_in_kernel=True)
        torch.cuda.synchronize()
        r1, rh1 = reference(one)
        ok &= gate(rec, "drop-in kernrt.ops.kda.fused_recurrent_kda T=1 (decode kernel)", o1,
                   h1.transpose(-1, -2), r1, rh1)
        ok_sup, why = ops.is_supported(c.q.requires_grad_(True), c.k, c.v, c.g, c.beta,
                                       use_gate_in_kernel=True, A_log=c.A_log, dt_bias=c.dt_bias)
        ok &= rec.check("drop-in forwards requires_grad to fla with the reason",
                        not ok_sup and "requires grad" in why, message=why)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        ok &= rec.check("drop-in kernrt.ops.kda", False, exception=repr(e)[:300])
    return ok
