#!/usr/bin/env python3
"""The hybrid stack served through kernrt (Python over the binding), every step checked.

Usage: python3 examples/hybrid/driver.py --build BUILD [--out DIR] [--steps 64]
       python3 examples/hybrid/driver.py --dry-run      (no GPU: manifest, verify, schedule)
Owns: `Engine` (the generated manifest pinned to BUILD's cubins, loaded with its random
weights; table writes through zero-copy buffer views; views of the pool lines and KV rows)
and `run_scenario`: scenario.plan's generation (two prompts prefilled together, 64 decode
steps with sequences joining and leaving, speculative rounds with partial acceptance and the
rollback of every state) where after every call each op is compared with reference.py on the
inputs kernrt's op read (the carry buffers; states snapshotted before the call):
  GEMMs, hidden, logits: rel rms <= 2e-3 (logits 1e-4) against float32 products;
  conv <= 1e-3 (conv family's gate), its states bit-exact (they are copies of the inputs);
  KDA o and states <= 2e-3 (KDA family's gate) against the float64 token loop;
  KV append bit-exact; attention <= 2e-2 (attention family's gate) against float32;
  tokens = argmax of kernrt's logits, exactly.
Rollback: a verify leaves every KDA state and the KV rows below the round bit-identical;
the conv line kept for n accepted tokens is bit-identical to the state after n tokens; the
commit's KDA state matches the float64 state after n tokens; the next steps run on them.
Decode and verify run as replayed CUDA graphs (one per batch size). Returns check rows.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "runtime", "python"))
sys.path.insert(0, HERE)

from kernrt.gen import hybrid  # noqa: E402
import scenario as sc  # noqa: E402

# GEMMs / hidden / logits: this stack's own gates (cuBLASLt's accumulate vs one float32
# rounding measured 1.4-1.8e-3 on the H200); conv, KDA and attention: their families' gates
# (validation/conv, validation/kda, validation/attention: rel L2 vs float32 < 0.02).
GATE_GEMM, GATE_LOGITS, GATE_CONV, GATE_KDA, GATE_ATTN = 2e-3, 1e-4, 1e-3, 2e-3, 2e-2


def build_files(d, build, out, op_programs=()):
    """(manifest dict pinned to BUILD/cubins/run, written to OUT/hybrid.json; weights path:
    the random weights go to the temp dir, never into OUT, whose files travel back)."""
    import tempfile
    from kernrt.gen import hybrid_weights, pin
    cubins = os.path.join(build, "cubins", "run")
    m = pin(hybrid.manifest(d, op_programs=op_programs), cubins)
    os.makedirs(out, exist_ok=True)
    wdir = os.path.join(tempfile.gettempdir(), "kernrt-hybrid-weights")
    os.makedirs(wdir, exist_ok=True)
    w = os.path.join(wdir, "hybrid.safetensors")
    if not os.path.exists(w):
        hybrid_weights.write(d, w)
    with open(os.path.join(out, "hybrid.json"), "w") as f:
        json.dump(m, f, indent=1)
    return m, w


class Engine:
    def __init__(self, d, m, weights, seq_slots=80, tokens=65536):
        import kernrt
        import torch
        self.torch, self.d = torch, d
        self.rt = kernrt.load(m, weights=[weights], seq_slots=seq_slots, tokens=tokens)
        self.buf = {n: self.rt.buffer(n) for n in self.rt.buffers}
        self.conv_pool = self.rt.state("conv")
        self.kda_pool = self.rt.state("kda")
        self.kv = self.rt.state("kv")
        self.conv_slots = seq_slots
        self.kv_pages = self.kv.numel() // (d.n_attn * 262144)

    def put(self, name, values):
        t = self.torch.tensor(values, dtype=self.torch.int32, device="cuda")
        self.buf[name].view(-1)[:t.numel()].copy_(t.view(-1))

    def write_tables(self, t, conv_steps=None, accepted=None):
        n = len(t["seq_len"])
        for name in ("token", "slot", "seq_len", "cu_seqlens"):
            self.put(name, t[name])
        self.buf["pages"][:n].copy_(self.torch.tensor(t["pages"], dtype=self.torch.int32))
        self.buf["conv_lines"][0, :n].copy_(self.torch.tensor(t["conv_lines"], dtype=self.torch.int32))
        self.buf["kda_lines"][0, :n].copy_(self.torch.tensor(t["kda_lines"], dtype=self.torch.int32))
        if conv_steps is not None:
            self.buf["conv_steps"][:, :n].copy_(self.torch.tensor(conv_steps, dtype=self.torch.int32))
        if accepted is not None:
            self.put("accepted", accepted)
        self.torch.cuda.synchronize()

    def conv_line(self, slot, j):
        d = self.d
        lb = d.conv.line_bytes
        at = slot * d.conv_slot + j * lb
        return self.conv_pool[at:at + lb].view(self.torch.bfloat16).view(d.conv.dim, d.width - 1)

    def kda_state(self, slot, j):
        d = self.d
        sb = d.kda.p.state_bytes
        at = slot * d.kda_slot + j * d.kda_region
        return self.kda_pool[at:at + sb].view(self.torch.float32).view(d.kda_heads, d.head_v, 128)

    def kv_rows(self, seq, j, lo, hi):
        """K, V [hi - lo, 4, 256] of positions lo..hi-1 of layer j (a copy)."""
        torch = self.torch
        pos = torch.arange(lo, hi, device="cuda")
        pages = torch.tensor(seq.pages, device="cuda", dtype=torch.long)[pos // 64]
        base = j * 262144 + pages * (self.d.n_attn * 262144) + (pos % 64) * 4096
        idx = base[:, None] + torch.arange(4096, device="cuda")[None]
        rows = self.kv[idx].view(torch.bfloat16).view(hi - lo, 4, 2, 256)
        return rows[:, :, 0].clone(), rows[:, :, 1].clone()


class Checker:
    """Compares one call's every op with the reference; collects worst errors per category."""

    def __init__(self, eng, w):
        self.e, self.w, self.d = eng, w, eng.d
        self.worst = {}
        self.fails = []

    def note(self, what, err, gate, event):
        ok = err <= gate
        cur = self.worst.get(what)
        if cur is None or err > cur[0]:
            self.worst[what] = (err, gate, event)
        if not ok:
            self.fails.append(f"{event}: {what} {err:.3e} > {gate:g}")
        return ok

    def exact(self, what, a, b, event):
        same = bool(self.e.torch.equal(a.contiguous().view(-1).view(self.e.torch.uint8)
                                       if a.dtype != self.e.torch.uint8 else a,
                                       b.contiguous().view(-1).view(self.e.torch.uint8)
                                       if b.dtype != self.e.torch.uint8 else b))
        return self.note(what + " (bit-exact)", 0.0 if same else 1.0, 0.0, event)

    def snapshot(self, seqs, kv_upto=False):
        e, d = self.e, self.d
        snap = {}
        for s in seqs:
            snap[s.sid] = {
                "conv": [e.conv_line(s.conv, j).clone() for j in range(d.n_kda)] if s.L else None,
                "kda": [e.kda_state(s.kda, j).clone() for j in range(d.n_kda)] if s.L else None,
                "kv": [e.kv_rows(s, j, 0, s.L) for j in range(d.n_attn)] if kv_upto and s.L else None}
        return snap

    def check(self, kind, seqs, rows, snap, event, conv_steps=None):
        """After the call: every op against the reference. rows[i]: tokens of sequence i.
        Returns, for verify, {sid: [kda float64 states after each token per layer]}."""
        import reference as ref
        torch, e, d, w = self.e.torch, self.e, self.d, self.w
        B = e.buf
        T = sum(len(r) for r in rows)
        bounds, at = [], 0
        for r in rows:
            bounds.append((at, at + len(r)))
            at += len(r)
        tok = torch.tensor([t for r in rows for t in r], device="cuda", dtype=torch.long)
        h = w["embed"][tok]
        kstates = {s.sid: [] for s in seqs}
        C, kd = d.conv.dim, d.kda
        for i, kindl in enumerate(d.layers):
            j = d.index(i)
            p = f"l{i}_"
            if kindl == "kda":
                proj = B[p + "proj"][:T]
                self.note("gemm in_proj", ref.rel_rms(proj, ref.gemm(h, w[p + "in_proj"])), GATE_GEMM, event)
                qkv = B[p + "qkv"][:T]
                o = B[p + "o"][:T]
                for n, (s, (lo, hi)) in enumerate(zip(seqs, bounds)):
                    fresh = kind == "prefill"
                    init = torch.zeros(C, d.width - 1, dtype=torch.bfloat16, device="cuda") if fresh \
                        else snap[s.sid]["conv"][j]
                    y32, states = ref.conv(proj[lo:hi, :C], w[p + "conv"], init)
                    self.note("conv y", ref.rel_rms(qkv[lo:hi], y32.bfloat16()), GATE_CONV, event)
                    if kind == "verify":
                        for t in range(d.steps - 1):
                            self.exact("conv verify step line", e.conv_line(conv_steps[t][n], j),
                                       states[t], event)
                    self.exact("conv state", e.conv_line(s.conv, j), states[-1], event)
                    q = qkv[lo:hi, :kd.dqk].view(-1, d.kda_heads, 128)
                    k = qkv[lo:hi, kd.dqk:2 * kd.dqk].view(-1, d.kda_heads, 128)
                    v = qkv[lo:hi, 2 * kd.dqk:].view(-1, d.kda_heads, d.head_v)
                    g = proj[lo:hi, kd.g_at:kd.g_at + kd.dqk].view(-1, d.kda_heads, 128)
                    be = proj[lo:hi, kd.beta_at:kd.beta_at + d.kda_heads]
                    if fresh:
                        o64, S = ref.kda_prefill(q, k, v, g, be, w[p + "A_log"], w[p + "dt_bias"])
                        Ss = [S]
                    else:
                        o64, Ss = ref.kda(q, k, v, g, be, w[p + "A_log"], w[p + "dt_bias"],
                                          snap[s.sid]["kda"][j])
                    self.note("kda o", ref.rel_rms(o[lo:hi], o64.bfloat16()), GATE_KDA, event)
                    if kind == "verify":
                        self.exact("kda state untouched by verify", e.kda_state(s.kda, j),
                                   snap[s.sid]["kda"][j], event)
                        kstates[s.sid].append(Ss)
                    else:
                        self.note("kda state", ref.rel_rms(e.kda_state(s.kda, j), Ss[-1]), GATE_KDA, event)
                h = ref.gemm(o.view(T, -1), w[p + "out_proj"], c=h)
            else:
                q, k, v = B[p + "q"][:T], B[p + "k"][:T], B[p + "v"][:T]
                for name, got in (("q", q), ("k", k), ("v", v)):
                    self.note(f"gemm {name}_proj", ref.rel_rms(got.view(T, -1),
                                                             ref.gemm(h, w[p + name + "_proj"])),
                              GATE_GEMM, event)
                o = B[p + "o"][:T]
                for n, (s, (lo, hi)) in enumerate(zip(seqs, bounds)):
                    L0, L1 = s.L, s.L + hi - lo
                    kc, vc = e.kv_rows(s, j, 0, L1)
                    self.exact("kv append", kc[L0:], k[lo:hi], event)
                    self.exact("kv append", vc[L0:], v[lo:hi], event)
                    if kind == "verify" and L0:
                        self.exact("kv rows below the round", kc[:L0], snap[s.sid]["kv"][j][0], event)
                    a32 = ref.attention(q[lo:hi], kc, vc)
                    self.note("attention", ref.rel_rms(o[lo:hi], a32.bfloat16()), GATE_ATTN, event)
                h = ref.gemm(o.view(T, -1), w[p + "o_proj"], c=h)
        hid = B["hidden"][:T]
        self.note("hidden", ref.rel_rms(hid, h), GATE_GEMM, event)
        logits = B["logits"][:T]
        self.note("logits", ref.rel_rms(logits, hid.float() @ w["lm_head"].float().t()), GATE_LOGITS, event)
        am = logits.argmax(-1)
        if kind == "prefill":
            want = am[torch.tensor([hi - 1 for _, hi in bounds], device="cuda")]
            got = B["next_token"][:len(seqs)]
        elif kind == "decode":
            want, got = am, B["next_token"][:len(seqs)]
        else:
            want, got = am, B["verify_tokens"][:len(seqs)].reshape(-1)
        self.exact("tokens = argmax", got.to(torch.int32), want.to(torch.int32), event)
        return kstates


def run_scenario(d, eng, w, log=print):
    """The whole generation; returns (checker, stats)."""
    torch = eng.torch
    sch = sc.Scheduler(d, eng.conv_slots, eng.conv_slots, eng.kv_pages)
    chk = Checker(eng, w)
    counts = {"prefill": 0, "decode": 0, "verify": 0}
    for n_ev, ev in enumerate(sc.plan(d)):
        kind = ev[0]
        if kind == "leave":
            sch.retire(ev[1])
            continue
        seqs = ev[1]
        name = f"{kind} #{counts[kind]} seqs {[s.sid for s in seqs]}"
        counts[kind] += 1
        if kind == "prefill":
            for s in seqs:
                sch.admit(s)
            rows = [s.prompt for s in seqs]
        elif kind == "decode":
            rows = [[s.last] for s in seqs]
        else:
            rows = [[s.last] + dr for s, dr in zip(seqs, ev[2])]
        snap = chk.snapshot(seqs, kv_upto=kind == "verify")
        t = sch.tables(seqs, rows)
        steps = sch.verify_lines(seqs) if kind == "verify" else None
        eng.write_tables(t, conv_steps=steps)
        T, N = len(t["token"]), len(seqs)
        eng.rt.run(kind, graph=kind != "prefill", tokens=T, seqs=N)
        torch.cuda.synchronize()
        kst = chk.check(kind, seqs, rows, snap, name, conv_steps=steps)
        if kind == "prefill":
            nxt = eng.buf["next_token"][:N].tolist()
            for s, r, x in zip(seqs, rows, nxt):
                s.L, s.last = len(r), x
        elif kind == "decode":
            nxt = eng.buf["next_token"][:N].tolist()
            for s, x in zip(seqs, nxt):
                s.L, s.last = s.L + 1, x
        else:
            accepted = ev[3]
            vt = eng.buf["verify_tokens"][:N].tolist()
            eng.put("accepted", accepted)
            eng.write_tables(t, accepted=accepted)
            eng.rt.run("commit", tokens=T, seqs=N)
            torch.cuda.synchronize()
            import reference as ref
            for s, nacc in zip(seqs, accepted):
                for j in range(d.n_kda):
                    chk.note("kda state after commit", ref.rel_rms(eng.kda_state(s.kda, j),
                                                                   kst[s.sid][j][nacc - 1]),
                             GATE_KDA, name + f" accepted {nacc}")
            old = [s.conv for s in seqs]
            sch.roll(seqs, steps, accepted)
            for s, nacc, o in zip(seqs, accepted, old):
                s.L += nacc
                s.last = vt[seqs.index(s)][nacc - 1]
            log(f"  rollback: accepted {accepted}, conv lines {old} -> {[s.conv for s in seqs]}")
        if n_ev % 8 == 0 or kind != "decode":
            log(f"{name}: rows {T}, seq_len {t['seq_len']}, fails so far {len(chk.fails)}")
    return chk, counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--out", default="/tmp/kernrt-hybrid")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: manifest, verify, schedule")
    a = ap.parse_args(argv)
    d = hybrid.Desc()
    if a.dry_run:
        import kernrt
        m, wpath = build_files(d, a.build, a.out)
        problems = kernrt.verify(m)
        print(f"manifest: {len(m['ops'])} ops, {sum(len(p['calls']) for p in m['programs'].values())} "
              f"calls; kernrt.verify: {problems or 'verified'}; weights {os.path.getsize(wpath)} B")
        log = sc.dry_run(d)
        print("\n".join(log[:3] + ["..."] + [x for x in log if not x.startswith("decode")]))
        return 1 if problems else 0
    os.environ.setdefault("KERNRT_LIBRARY", os.path.join(a.build, "lib", "libkernrt.so"))
    os.environ.setdefault("KERNRT_CUBINS", os.path.join(a.build, "cubins", "run"))
    import torch  # noqa: F401
    import reference as ref
    m, wpath = build_files(d, a.build, a.out)
    eng = Engine(d, m, wpath)
    w = ref.load_weights(wpath)
    t0 = time.time()
    chk, counts = run_scenario(d, eng, w)
    print(f"{counts} in {time.time() - t0:.1f} s")
    for what, (err, gate, ev) in sorted(chk.worst.items()):
        print(f"  {what:40s} worst {err:.3e} (gate {gate:g}) at {ev}")
    print("FAILS:" if chk.fails else "all checks passed", *chk.fails[:20], sep="\n  ")
    return 1 if chk.fails else 0


if __name__ == "__main__":
    sys.exit(main())
