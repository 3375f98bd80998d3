"""Benchmarks of the KDA / GDN device validation (run.py calls them after the checks).

Owns the timed cases of the issue's Done-when list, ours and the peers in this process: ours
is the runtime's own CUDA graph of the program (rt.enqueue(graph=True) on torch's stream),
each peer a torch.cuda.graph of its call; CUDA events around each replay behind a GPU sleep,
alternating rounds, medians (validation/common/bench.py). Prefill inputs are hundreds of MB
(beyond the 60 MB L2); decode and verify alternate two line tables / pools. Floors: bytes read
and written once at the copy rate and FLOPs at the GEMM rate, both measured in this call,
floor = the larger. Each bench also records ours against the peer's output (information).
Does not check against the reference (checks.py does).
"""
import time
import traceback

import torch

import bench
import fixture as fx
from kernrt.gen import kda_cp_plan as cp_plan
import kda_ref as ref

K = fx.K
# Seconds a peer's warm-up may take, required before the deadline when it starts: a peer
# started too late blocks past the family's time share and the run loses our rows too (at
# 6a5f4ff fla 0.6.0's first call at B8 T4096 H16, Triton autotuning the new shapes after its
# JIT in the checks, was still running 73 s later when run.sh stopped the run).
PREFILL_PEER_WARMUP_S = 90.0
STEP_PEER_WARMUP_S = 30.0


def prefill_bytes(c):
    e = lambda t: t.numel() * t.element_size()
    b = e(c.q) + e(c.k) + 2 * e(c.v) + e(c.g) + e(c.beta)  # o like v
    if c.h0 is not None:
        b += 2 * e(c.h0)
    return b


def prefill_flops(c):
    """Tensor-core work of our chunked form per token and value head: the three K x V
    state products, the 16-token intra terms and the solve."""
    per = 3 * K * c.V + 17 * K + 24 * c.V
    return 2 * per * c.B * c.T * c.HV


def floor_us(ceil, nbytes, flops):
    t = nbytes / ceil["copy_Bps"]
    if flops and ceil.get("gemm_flops"):
        t = max(t, flops / ceil["gemm_flops"])
    return t * 1e6


def varlen16():
    """The varlen bench's sequences: (token counts, cu_seqlens), 16 sequences of 106..6200
    tokens, 32768 in all (the last one takes the rest: 462)."""
    lens16 = [106, 6200, 1530, 3100, 420, 2890, 980, 4000, 260, 1780, 3640, 720, 2150, 3900, 630, 0]
    lens16[-1] = 32768 - sum(lens16[:-1])
    assert min(lens16) >= 106 and max(lens16) <= 6200, lens16
    cu16 = [0]
    for L in lens16:
        cu16.append(cu16[-1] + L)
    return lens16, cu16


def cases(quick):
    lens16, cu16 = varlen16()
    big = dict(H=16, gates="init", g_dtype=torch.bfloat16)
    # B1 T32768 H16 V128: the geometry the drop-ins pick (kernrt.gen.kda_cp_plan; 9 x 55
    # chunks, segment 0 taking 72)
    segs, L = cp_plan.plan((32768 // 64,), 16, 1)
    cp = dict(cp_segs=segs, seg_chunks=4 * L)
    segs, L = cp_plan.plan((32768 // 64,), 16, 1, bounded=True)  # GDN's: decay-bounded (8 x 64)
    cp_gdn = dict(cp_segs=segs, seg_chunks=4 * L)
    # varlen: the sequences over L chunks split from their ends (3 x 32: 97 -> 72 modelled steps)
    segs, L = cp_plan.plan(tuple(-(-n // 64) for n in lens16), 16, 1)
    cp_var = dict(cp_segs=segs, seg_chunks=4 * L)
    out = [
        ("kda B8 T4096 H16 V128", dict(B=8, T=4096, **big), {}, "fla_kda", 1845.0),
        ("kda B8 T4096 H16 V256", dict(B=8, T=4096, V=256, **big), {}, "fla_kda", 2324.0),
        ("kda B1 T32768 H16 V128 with state", dict(B=1, T=32768, **big), cp, "fla_kda", 2420.0),
        ("kda varlen 16 seqs 106-6200 (32768) with state", dict(cu=cu16, **big), cp_var, "fla_kda",
         2007.0),
        ("gdn B1 T32768 H16 V128 with state", dict(kind="gdn", B=1, T=32768, **big), cp_gdn,
         "flash_qla", 524.5),
        ("kda B8 T4096 H16 V128 lower_bound -5, beta logits (FlashKDA's form)",
         dict(B=8, T=4096, H=16, gate="lower_bound", lower_bound=-5.0, beta="sigmoid",
              g_dtype=torch.bfloat16), {}, "flash_kda", None),
    ]
    return out[:1] + out[2:3] if quick else out


def run_prefill_benches(rec, build, peers, why, ceil, iters, rounds, deadline, quick, only=None):
    """Each prefill bench (only: a compiled regex, the benches whose names it finds)."""
    table = []
    for name, kw, cp, peer_name, issue_peer in cases(quick):
        if only is not None and not only.search(name):
            continue
        try:
            c = fx.Case(seed=100, **kw)
            if c.beta_mode == "sigmoid":
                c.beta = c.beta.bfloat16().float()  # FlashKDA takes bf16 logits: the same values
            ours = fx.Prefill(c, build, **cp)
            ours.write()
            o, ht = ours.run(graph=True)
            contenders = {"ours": ours.enqueue}
            peer_row = {"chunk": ours.chunk}
            alts = []
            if cp and ours.chunk == "c64":  # beside c64's context parallel: its one pass and,
                # for the long sequence, the uniform 8 x 64 chunks (the geometry before
                # kda_cp_plan) and c16's CP
                alt_kw = (("c64 one pass", dict(chunk="c64")),
                          ("c64 context parallel 8 x 64", dict(chunk="c64", cp_segs=8, seg_chunks=256)),
                          ("c16 context parallel", dict(chunk="c16", **cp)))
                if "cu" in kw:  # varlen: the one pass
                    alt_kw = alt_kw[:1]
                for lab, akw in alt_kw:
                    alt = fx.Prefill(c, build, **akw)
                    alt.write()
                    oa, ha = alt.run(graph=True)
                    contenders[f"ours {lab}"] = alt.enqueue
                    peer_row[f"{lab.replace(' ', '_')}_vs_ours"] = max(
                        ref.rel_rms(oa.double(), o.double()), ref.rel_rms(ha.double(), ht.double()))
                    alts.append(alt)
            runs = {}
            if peer_name == "flash_kda" and peers.get("fla_kda") is not None:
                runs["fla 0.6.0 (safe_gate)"] = fx.fla_prefill(c, kda_mod=peers["fla_kda"])
            if peer_name == "flash_qla" and peers.get("fla_gdn") is not None:
                runs["fla 0.6.0"] = fx.fla_prefill(c, gdn_mod=peers["fla_gdn"])
            mod = peers.get(peer_name)
            label = {"fla_kda": "fla 0.6.0", "flash_qla": "flash-qla 0.1.3", "flash_kda": "FlashKDA"}[peer_name]
            if mod is not None:
                runs[label] = {"fla_kda": lambda: fx.fla_prefill(c, kda_mod=mod),
                               "flash_qla": lambda: fx.flash_qla_prefill(c, mod),
                               "flash_kda": lambda: fx.flash_kda_prefill(c, mod)}[peer_name]()
            else:
                peer_row["peer_unavailable"] = why.get(peer_name, "not imported")
            for lab, fn in list(runs.items()):
                if time.time() + PREFILL_PEER_WARMUP_S > deadline:
                    peer_row[f"skipped {lab}"] = (f"time budget (a warm-up needs up to "
                                                  f"{PREFILL_PEER_WARMUP_S:.0f} s before the deadline)")
                    del runs[lab]
                    continue
                try:
                    po, ph = fn()  # warm-up (JIT, autotune) outside the graph
                    torch.cuda.synchronize()
                    peer_row[f"ours_vs_{lab}"] = ref.rel_rms(o.double(), po.double())
                    contenders[lab] = bench.torch_graph(fn).replay
                except Exception as e:  # noqa: BLE001
                    peer_row[f"failed {lab}"] = repr(e)[:200]
            med = bench.interleaved(contenders, iters, rounds)
            fl = floor_us(ceil, prefill_bytes(c), prefill_flops(c))
            row = dict(case=f"prefill {name}", kind="bench", ours_us=med["ours"], floor_us=fl,
                       frac_of_floor=fl / med["ours"], issue_peer_us=issue_peer,
                       path="kernrt.Runtime.enqueue(graph=True)",
                       cp=cp or None, **peer_row)
            main = label if label in med else next((k for k in med if not k.startswith("ours")), None)
            if main:
                row.update(peer=main, peer_us=med[main], speedup_vs_peer=med[main] / med["ours"])
            for k, v in med.items():
                if k not in ("ours", main):
                    row[f"{k}_us"] = v
            table.append(rec.add(**row))
            peer_txt = (f"{main} {med[main]:.1f} us" if main else "no peer (" + "; ".join(
                f"{k}: {v}" for k, v in peer_row.items()
                if k.startswith(("skipped", "failed", "peer_unavailable"))) + ")")
            bench.log(f"bench {name}: ours {med['ours']:.1f} us, {peer_txt}, floor {fl:.1f} us")
            ours.rt.close()
            for alt in alts:
                alt.rt.close()
            del ours, alts, contenders, runs
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rec.add(case=f"prefill {name}", kind="bench", error_note=repr(e)[:300])
        torch.cuda.empty_cache()
    return table


def step_bytes(prof, seqs, steps, states_rw):
    """Bytes of a decode / verify call: the state lines read (and written) once, the token
    vectors, the outputs."""
    st = prof.state_bytes * seqs * states_rw
    tok = seqs * steps * (2 * prof.heads * K * 2 + prof.value_heads * prof.dim_v * 2 * 2 +
                          prof.value_heads * prof.g_width * 4 + prof.value_heads * 4)
    return st + tok


def run_step_benches(rec, build, peers, ceil, iters, rounds, deadline, quick, why=None):
    """Decode B64 / B256 (KDA, GDN) and verify 8 tokens + commit at B64 (KDA), per call."""
    table = []
    specs = [("kda", 64), ("kda", 256), ("gdn", 64), ("gdn", 256)]
    if quick:
        specs = specs[:1]
    for kind, B in specs:
        try:
            table.append(_decode_bench(rec, build, peers, ceil, iters, rounds, deadline, kind, B,
                                       why or {}))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rec.add(case=f"decode {kind} B{B}", kind="bench", error_note=repr(e)[:300])
        torch.cuda.empty_cache()
    try:
        table.append(_verify_bench(rec, build, peers, ceil, iters, rounds, deadline, why or {}))
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        rec.add(case="verify kda B64 8 tokens", kind="bench", error_note=repr(e)[:300])
    return table


def _decode_bench(rec, build, peers, ceil, iters, rounds, deadline, kind, B, why):
    gate = "softplus" if kind == "kda" else None  # fla's GDN recurrent takes the log decay
    c = fx.Case(kind=kind, B=B, T=8, H=16, gates="init", gate=gate, seed=7)
    srv = fx.Serving(c.profile(), build, max_seqs=B, max_tokens=16, steps=8, extra_lines=B,
                     rotate=True)
    rt = srv.rt
    rt.buffer("lines")[0, :B].copy_(torch.arange(1, B + 1, dtype=torch.int32))
    rt.buffer("lines_b")[0, :B].copy_(torch.arange(B + 1, 2 * B + 1, dtype=torch.int32))
    for ln in range(1, 2 * B + 1):
        srv.line_state(ln).normal_()
    srv.write_inputs("dec", c, t0=0)
    contenders = {"ours": lambda: rt.enqueue("decode_x8", graph=True, vars={"seqs": B})}
    row = {}
    if time.time() + STEP_PEER_WARMUP_S < deadline:
        try:
            if kind == "kda" and peers.get("fla_kda_recurrent") is not None:
                mod = peers["fla_kda_recurrent"]
                pool = torch.randn(2 * B + 1, c.HV, c.V, K, device="cuda")
                ia = torch.arange(1, B + 1, device="cuda", dtype=torch.int32)
                ib = torch.arange(B + 1, 2 * B + 1, device="cuda", dtype=torch.int32)
                fa = fx.fla_decode_inplace(c, pool, ia, 0, mod)
                fb = fx.fla_decode_inplace(c, pool, ib, 0, mod)
                fn = lambda: [f() for f in (fa, fb, fa, fb, fa, fb, fa, fb)]
                contenders["fla 0.6.0"] = bench.torch_graph(fn).replay
            elif kind == "gdn" and peers.get("fla_gdn") is not None:
                from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule_fwd as frg
                hs = [torch.randn(B, c.HV, c.V, K, device="cuda") for _ in range(2)]
                q, k, v, g, b = (x[:, :1] for x in (c.q, c.k, c.v, c.g, c.beta))
                call = lambda h: frg(q, k, v, g=g, beta=b, scale=K ** -0.5, initial_state=h,
                                     output_final_state=True, use_qk_l2norm_in_kernel=True,
                                     state_v_first=True)
                fn = lambda: [call(hs[i % 2]) for i in range(8)]
                contenders["fla 0.6.0"] = bench.torch_graph(fn).replay
        except Exception as e:  # noqa: BLE001
            row["peer_failed"] = repr(e)[:200]
    elif peers.get("fla_kda_recurrent" if kind == "kda" else "fla_gdn") is not None:
        row["peer_skipped"] = "time budget"
    if "fla 0.6.0" not in contenders and "peer_skipped" not in row and "peer_failed" not in row:
        row["peer_unavailable"] = why.get("fla_kda_recurrent" if kind == "kda" else "fla_gdn",
                                          "not imported")
    med = {k: v / 8 for k, v in bench.interleaved(contenders, iters, rounds).items()}
    fl = floor_us(ceil, step_bytes(srv.p, B, 1, 2), 0)
    row.update(case=f"decode {kind} B{B} H16 V128 (per call; graph of 8)", kind="bench",
               ours_us=med["ours"], floor_us=fl, frac_of_floor=fl / med["ours"],
               issue_peer_us={("kda", 64): 45.8, ("kda", 256): 178.6}.get((kind, B)),
               path="kernrt.Runtime.enqueue(graph=True), program decode_x8")
    if "fla 0.6.0" in med:
        row.update(peer="fla 0.6.0", peer_us=med["fla 0.6.0"], speedup_vs_peer=med["fla 0.6.0"] / med["ours"])
    bench.log(f"bench decode {kind} B{B}: ours {med['ours']:.2f} us, floor {fl:.2f} us, "
              f"{fl / med['ours'] * 100:.1f} % of floor")
    srv.rt.close()
    return rec.add(**row)


def _verify_bench(rec, build, peers, ceil, iters, rounds, deadline, why):
    """8 tokens at B64 with rollback to any prefix: our verify + commit (random accepted
    counts), against fla's spec form writing the state after every token."""
    B, S = 64, 8
    c = fx.Case(kind="kda", B=B, T=S, H=16, gates="init", seed=8)
    srv = fx.Serving(c.profile(), build, max_seqs=B, max_tokens=16, steps=S, extra_lines=B,
                     rotate=True)
    rt = srv.rt
    rt.buffer("lines")[0, :B].copy_(torch.arange(1, B + 1, dtype=torch.int32))
    rt.buffer("lines_b")[0, :B].copy_(torch.arange(B + 1, 2 * B + 1, dtype=torch.int32))
    rt.buffer("accepted")[:B].copy_(torch.randint(1, S + 1, (B,), dtype=torch.int32))
    for ln in range(1, 2 * B + 1):
        srv.line_state(ln).normal_()
    srv.write_inputs("ver", c, 0, S)
    contenders = {"ours": lambda: rt.enqueue("verify_commit_x4", graph=True, vars={"seqs": B})}
    row = {}
    if time.time() + STEP_PEER_WARMUP_S < deadline and peers.get("fla_kda_recurrent") is not None:
        try:
            mod = peers["fla_kda_recurrent"]
            pool = torch.randn(2 * B * S + 1, c.HV, c.V, K, device="cuda")
            idx = [torch.arange(1 + i * B * S, 1 + (i + 1) * B * S, device="cuda",
                                dtype=torch.int32).view(B, S) for i in range(2)]
            acc = torch.randint(1, S + 1, (B,), device="cuda", dtype=torch.int32)
            fs = [fx.fla_verify_spec(c, pool, idx[i], acc, 0, S, mod) for i in range(2)]
            fn = lambda: [fs[i % 2]() for i in range(4)]
            contenders["fla 0.6.0 spec"] = bench.torch_graph(fn).replay
        except Exception as e:  # noqa: BLE001
            row["peer_failed"] = repr(e)[:200]
    elif peers.get("fla_kda_recurrent") is not None:
        row["peer_skipped"] = "time budget"
    if "fla 0.6.0 spec" not in contenders and "peer_skipped" not in row and "peer_failed" not in row:
        row["peer_unavailable"] = why.get("fla_kda_recurrent", "not imported")
    med = {k: v / 4 for k, v in bench.interleaved(contenders, iters, rounds).items()}
    # verify reads the states once, commit reads and writes them (all prefixes possible)
    fl = floor_us(ceil, step_bytes(srv.p, B, S, 3), 0)
    row.update(case=f"verify kda B{B} {S} tokens + commit (rollback to any prefix), per round",
               kind="bench", ours_us=med["ours"], floor_us=fl, frac_of_floor=fl / med["ours"],
               goal_us=104.0, issue_peer_us=260.0,
               path="kernrt.Runtime.enqueue(graph=True), program verify_commit_x4")
    if "fla 0.6.0 spec" in med:
        row.update(peer="fla 0.6.0 spec form", peer_us=med["fla 0.6.0 spec"],
                   speedup_vs_peer=med["fla 0.6.0 spec"] / med["ours"])
    bench.log(f"bench verify B{B}: ours {med['ours']:.1f} us (goal 104), floor {fl:.1f} us")
    srv.rt.close()
    return rec.add(**row)
