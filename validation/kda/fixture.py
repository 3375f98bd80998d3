"""Inputs, our runners (the product path) and the peers of the KDA / GDN device validation.

Owns: seeded random inputs with the issue's gate magnitudes (fla's layer init: A_log =
log U(1, 16), dt_bias = softplus^-1(dt) with dt log-uniform in [1e-3, 0.1]; kernel-fun's
harsh raw g ~ randn with dt_bias ~ 0.5 randn; the bounded lower_bound form), our prefill /
serving runtimes built from kernrt.gen.kda manifests (pinned to the build's cubins, loaded by
kernrt.load, inputs copied into the runtime's buffer views, programs enqueued on torch's
stream, outputs poisoned with NaN before every run), and the peers called in the same process
(fla 0.6.0 chunk_kda / fused_recurrent_kda / chunk_gated_delta_rule, flash-qla, FlashKDA),
each imported lazily: a missing peer is a reason string, never a crash.
Does not check anything (run.py does) and holds no binary layout (the generator does).
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import bench  # noqa: E402,F401  (puts runtime/python on sys.path)

import kernrt  # noqa: E402
from kernrt.gen import kda as gk  # noqa: E402
from kernrt.gen import pin  # noqa: E402

K = 128
NAN = float("nan")


class Case:
    """One input set. kind kda|gdn; gates "init" | "harsh" | "weak" (init with dt = 1e-5); gate
    "softplus" | "lower_bound" | None (g is a precomputed log decay); beta "direct" (in (0, 2)),
    "sigmoid" (logits, sigmoid in the kernel) or "logit2" (logits, 2 * sigmoid:
    allow_neg_eigval); g_shift is added to the raw g (+88 makes exp(g + dt_bias) overflow fp32:
    the kernels' gate clamps)."""

    def __init__(self, kind="kda", B=2, T=1000, H=4, HV=None, V=128, gates="init", gate="softplus",
                 lower_bound=None, beta="direct", g_dtype=torch.float32, cu=None, init=True, seed=0,
                 g_shift=0.0):
        HV = H if HV is None else HV
        self.kind, self.B, self.T, self.H, self.HV, self.V = kind, B, T, H, HV, V
        self.gate, self.lower_bound, self.beta_mode, self.init = gate, lower_bound, beta, init
        self.cu = cu
        if cu is not None:
            self.B, self.T = 1, cu[-1]
        self.N = self.B if cu is None else len(cu) - 1
        gen = torch.Generator(device="cuda").manual_seed(seed)
        rnd = lambda *s: torch.randn(*s, device="cuda", generator=gen)
        B, T = self.B, self.T
        self.q = rnd(B, T, H, K).bfloat16()
        self.k = rnd(B, T, H, K).bfloat16()
        self.v = rnd(B, T, HV, V).bfloat16()
        gshape = (B, T, HV, K) if kind == "kda" else (B, T, HV)
        width = HV * K if kind == "kda" else HV
        self.A_log = torch.empty(HV, device="cuda").uniform_(1, 16, generator=gen).log()
        if gates == "harsh":
            self.dt_bias = 0.5 * rnd(width)
        else:
            u = torch.rand(width, device="cuda", generator=gen)
            dt = torch.exp(u * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3)).clamp_min(1e-4)
            if gates == "weak":  # long-lived heads: a decay of at most ~2 nats over 4096 tokens
                dt = torch.full_like(dt, 1e-5)
            self.dt_bias = dt + torch.log(-torch.expm1(-dt))
        raw = rnd(*gshape) + g_shift
        if gate is None:  # a precomputed log decay, made from the same gate formula in fp32
            a = self.A_log.exp().view(HV, -1) if kind == "kda" else self.A_log.exp()
            x = raw + (self.dt_bias.view(HV, K) if kind == "kda" else self.dt_bias)
            raw = -a * torch.nn.functional.softplus(x)
        self.g = raw.to(g_dtype)
        if beta in ("sigmoid", "logit2"):
            self.beta = rnd(B, T, HV)
        else:
            self.beta = 2 * torch.sigmoid(rnd(B, T, HV))
        self.h0 = rnd(self.N, HV, V, K) if init else None
        self.cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int32, device="cuda")

    def profile(self):
        return gk.Profile(self.kind, heads=self.H, value_heads=self.HV, dim_v=self.V,
                          g="f32" if self.g.dtype == torch.float32 else "bf16", beta="f32",
                          gate=self.gate, lower_bound=self.lower_bound,
                          beta_sigmoid=self.beta_mode != "direct",
                          neg_eigval=self.beta_mode == "logit2", l2norm=True)

    def ref_opts(self):
        return dict(l2norm_qk=True, gate_in_kernel=self.gate is not None, A_log=self.A_log,
                    dt_bias=self.dt_bias, lower_bound=self.lower_bound,
                    beta_sigmoid=self.beta_mode != "direct", allow_neg_eigval=self.beta_mode == "logit2")

    def label(self):
        lay = f"varlen {self.N} seqs T{self.T}" if self.cu is not None else f"B{self.B} T{self.T}"
        gv = f" HV{self.HV}" if self.HV != self.H else ""
        gate = self.gate or "log-decay g"
        if self.lower_bound is not None:
            gate += f" {self.lower_bound:g}"
        return f"{self.kind} {lay} H{self.H}{gv} V{self.V} {gate} beta {self.beta_mode}"


def load(manifest, build, **kw):
    cubins = os.path.join(build, "cubins", "run")
    return kernrt.load(pin(manifest, cubins), cubins=[cubins], **kw)


def swap_entries(m, entries):
    """Manifest `m` with each launch of entry e in `entries` taking entries[e] instead: another
    entry of the same module with the same pack (a template alternative, kda_profile.py's A /
    B), a name or (name, block threads) where the candidate's block differs, or a dict of the
    launch's fields to replace (e.g. {"shared_mem": bytes}: the same entry at fewer blocks per
    SM, kda_profile.py's occupancy); raises when no launch names any of them."""
    seen = set()
    for op in m["ops"].values():
        for launch in op.get("impl", {}).get("launches", []):
            if launch.get("entry") in entries:
                seen.add(launch["entry"])
                alt = entries[launch["entry"]]
                if isinstance(alt, dict):
                    launch.update(alt)
                    continue
                name, threads = (alt, None) if isinstance(alt, str) else alt
                launch["entry"] = name
                if threads is not None:
                    launch["block"] = [threads, 1, 1]
    if not seen:
        raise ValueError(f"no launch names any of {sorted(entries)}")
    return m


class Prefill:
    """Our dense or varlen prefill of one Case shape (program `prefill`); entries: swap_entries'
    argument (kda_profile.py's candidate entries)."""

    def __init__(self, case, build, cp_segs=0, seg_chunks=0, final=True, chunk="auto",
                 entries=None):
        p = case.profile()
        if case.cu is None:
            m = gk.dense_prefill_manifest(p, case.B, case.T, init=case.init, final=final,
                                          cp_segs=cp_segs, seg_chunks=seg_chunks, chunk=chunk)
        else:
            m = gk.varlen_prefill_manifest(p, case.T, case.N, init=case.init, final=final,
                                           cp_segs=cp_segs, seg_chunks=seg_chunks, chunk=chunk)
        if entries:
            swap_entries(m, entries)
        # which kernels run it: c64 (the 64-token chunk kernels) or c16 (kda_chunk.cu)
        self.chunk = "c64" if "kda_chunk64_state2" in m["modules"] else "c16"
        self.case, self.final = case, final
        self.rt = load(m, build)
        self.vars = {"seqs": case.N, "tokens": case.T}

    def write(self):
        c, rt = self.case, self.rt
        lead = (lambda x: x) if c.cu is None else (lambda x: x[0])
        for name, t in (("q", c.q), ("k", c.k), ("v", c.v), ("g", c.g), ("beta", c.beta)):
            rt.buffer(name).copy_(lead(t))
        if c.gate is not None:
            rt.buffer("A_log").copy_(c.A_log)
            rt.buffer("dt_bias").copy_(c.dt_bias)
        if c.init:
            rt.buffer("h0").copy_(c.h0)
        if c.cu is not None:
            rt.buffer("cu_seqlens")[:c.N + 1].copy_(c.cu_t)

    def run(self, graph=False, poison=True):
        if poison:
            self.rt.buffer("o").fill_(NAN)
            if self.final:
                self.rt.buffer("ht").fill_(NAN)
        self.rt.enqueue("prefill", graph=graph, vars=self.vars)
        torch.cuda.synchronize()
        o = self.rt.buffer("o")
        o = o.view(self.case.B, self.case.T, self.case.HV, self.case.V)
        return o.clone(), (self.rt.buffer("ht")[:self.case.N].clone() if self.final else None)

    def enqueue(self):
        self.rt.enqueue("prefill", graph=True, vars=self.vars)


# ---- peers ------------------------------------------------------------------------------------


def import_peer(name):
    """(module, reason): the peer's module or None and why not."""
    try:
        if name == "fla_kda":
            from fla.ops.kda import chunk_kda, fused_recurrent_kda  # noqa: F401 (both present)
            import fla.ops.kda as m
        elif name == "fla_kda_recurrent":
            import fla.ops.kda.fused_recurrent as m
        elif name == "fla_gdn":
            import fla.ops.gated_delta_rule as m
        elif name == "flash_qla":
            import flash_qla.ops.gated_delta_rule as m
        elif name == "flash_kda":
            import flash_kda as m
        else:
            return None, f"unknown peer {name}"
        return m, ""
    except Exception as e:  # noqa: BLE001 - any import failure is a recorded reason
        return None, f"peer unavailable: {type(e).__name__}: {str(e)[:160]}"


def fla_prefill(case, kda_mod=None, gdn_mod=None):
    """fla's chunked forward on the case (state_v_first: our [N, HV, V, K] layout);
    returns a closure that runs it -> (o, ht)."""
    c = case
    cu = None if c.cu is None else c.cu_t.long()
    kw = dict(scale=K ** -0.5, initial_state=c.h0, output_final_state=True,
              use_qk_l2norm_in_kernel=True, state_v_first=True, cu_seqlens=cu)
    if cu is not None:  # host copy: fla builds its chunk table without a device sync
        kw["cu_seqlens_cpu"] = cu.cpu()
    if c.gate is not None:
        kw.update(use_gate_in_kernel=True, A_log=c.A_log, dt_bias=c.dt_bias)
    if c.beta_mode != "direct":
        kw.update(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=c.beta_mode == "logit2")
    if c.kind == "kda":
        if c.lower_bound is not None:
            kw.update(lower_bound=c.lower_bound, safe_gate=True)
        fn = kda_mod.chunk_kda
    else:
        fn = gdn_mod.chunk_gated_delta_rule
    return lambda: fn(c.q, c.k, c.v, c.g, c.beta, **kw)


def flash_qla_prefill(case, mod):
    """flash-qla's GDN chunked forward (its own intra-card context parallel) on the case."""
    c = case
    cu = None if c.cu is None else c.cu_t.long()
    g = c.g
    if c.gate is not None:  # flash-qla takes the log decay; the same fp32 gate formula
        g = -c.A_log.exp() * torch.nn.functional.softplus(c.g.float() + c.dt_bias)
    return lambda: mod.chunk_gated_delta_rule(c.q, c.k, c.v, g, c.beta, scale=K ** -0.5,
                                              initial_state=c.h0, output_final_state=True,
                                              use_qk_l2norm_in_kernel=True, cu_seqlens=cu,
                                              state_v_first=True)


def flash_kda_prefill(case, mod):
    """FlashKDA's forward: bounded gate, beta logits (sigmoid inside; no x2), bf16 inputs,
    K = V = 128, no GVA, states [N, H, V, K]."""
    c = case
    out = torch.empty_like(c.v)
    ht = torch.empty_like(c.h0) if c.h0 is not None else None
    cu = None if c.cu is None else c.cu_t.long()
    beta = c.beta.bfloat16()
    g = c.g.bfloat16()

    def run():
        mod.fwd(c.q, c.k, c.v, g, beta, K ** -0.5, out, c.A_log, c.dt_bias.view(c.HV, K),
                float(c.lower_bound), initial_state=c.h0, final_state=ht, cu_seqlens=cu)
        return out, ht
    return run


class Serving:
    """Our pool manifest (prefill / prefill_cont / decode / verify / commit over state `kda`)
    for `seqs` sequences of one profile; slots 1..seqs are the sequences' lines."""

    def __init__(self, prof, build, max_seqs, max_tokens, steps, extra_lines=1, rotate=False,
                 chunk="auto"):
        self.p, self.steps = prof, steps
        self.m = gk.serving_manifest(prof, max_seqs, max_tokens, steps=steps, rotate=rotate,
                                     chunk=chunk)
        self.chunk = "c64" if "kda_chunk64_state2" in self.m["modules"] else "c16"
        self.slot = self.m["states"]["kda"]["bytes_per_seq"]
        self.rt = load(self.m, build, seq_slots=max_seqs + 1 + extra_lines)

    def pool(self):
        return self.rt.state("kda")

    def line_state(self, line):
        """fp32 [HV, V, K] view of a pool line's state."""
        b = self.pool()[line * self.slot: line * self.slot + self.p.state_bytes]
        return b.view(torch.float32).view(self.p.value_heads, self.p.dim_v, K)

    def set_lines(self, lines):
        self.rt.buffer("lines")[0, :len(lines)].copy_(torch.tensor(lines, dtype=torch.int32))

    def write_inputs(self, prefix, case, t0=None, t1=None):
        """The head buffers `prefix_*` from a Case (decode: token t0 of each batch row; verify:
        tokens t0..t1 of each batch row; prefill: the packed varlen case)."""
        rt, c = self.rt, case
        for name, t in (("q", c.q), ("k", c.k), ("v", c.v), ("g", c.g), ("beta", c.beta)):
            if prefix == "pre":
                src = t[0]
            elif prefix == "dec":
                src = t[:, t0]
            else:
                src = t[:, t0:t1]
            dst = rt.buffer(f"{prefix}_{name}")
            dst.view(-1)[:src.numel()].copy_(src.contiguous().view(-1))
        if c.gate is not None:
            rt.buffer("A_log").copy_(c.A_log)
            rt.buffer("dt_bias").copy_(c.dt_bias)


def fla_decode_inplace(case, pool_kv, indices, t0, mod):
    """fla's vLLM-form decode (fused_recurrent_kda_fwd, state pool updated in place, our
    [V, K] line layout via state_v_first) of token t0 of every sequence."""
    c = case
    q, k, v, g, b = (x[:, t0:t0 + 1] for x in (c.q, c.k, c.v, c.g, c.beta))
    out = torch.empty_like(v)
    kw = dict(A_log=c.A_log if c.gate else None, dt_bias=c.dt_bias if c.gate else None,
              initial_state=pool_kv, scale=K ** -0.5, inplace_final_state=True,
              state_v_first=True, ssm_state_indices=indices, use_qk_l2norm_in_kernel=True,
              use_gate_in_kernel=c.gate is not None, lower_bound=c.lower_bound,
              use_beta_sigmoid_in_kernel=c.beta_mode != "direct",
              allow_neg_eigval=c.beta_mode == "logit2", out=out)
    return lambda: mod.fused_recurrent_kda_fwd(q, k, v, g, b, **kw)


def fla_verify_spec(case, pool_kv, indices, accepted, t0, steps, mod):
    """fla's speculative form: `steps` tokens per sequence, the state after every token
    written to its own slot (ssm_state_indices [N, steps]), num_accepted_tokens choosing the
    starting slot (varlen over N sequences of `steps` tokens)."""
    c = case
    N = c.B
    flat = lambda x: x[:, t0:t0 + steps].reshape(1, N * steps, *x.shape[2:]).contiguous()
    q, k, v, g, b = (flat(x) for x in (c.q, c.k, c.v, c.g, c.beta))
    cu = torch.arange(0, N * steps + 1, steps, device="cuda", dtype=torch.long)
    out = torch.empty_like(v)
    kw = dict(A_log=c.A_log if c.gate else None, dt_bias=c.dt_bias if c.gate else None,
              initial_state=pool_kv, scale=K ** -0.5, inplace_final_state=True,
              state_v_first=True, cu_seqlens=cu, ssm_state_indices=indices,
              num_accepted_tokens=accepted, use_qk_l2norm_in_kernel=True,
              use_gate_in_kernel=c.gate is not None, lower_bound=c.lower_bound,
              use_beta_sigmoid_in_kernel=c.beta_mode != "direct",
              allow_neg_eigval=c.beta_mode == "logit2", out=out)
    return lambda: mod.fused_recurrent_kda_fwd(q, k, v, g, b, **kw)
