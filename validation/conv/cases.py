"""Correctness of the conv cubins through the product path, against float64, with fla as peer.

Owns the check cases and their gate. Each case makes fresh seeded inputs once, then for
every candidate loader generates the call's manifest with kernrt.gen.conv (buffers exactly
the case's shapes), pins it (kernrt.gen.pin), loads it (kernrt.load), writes the inputs in
place through rt.buffer / rt.state views, poisons outputs (NaN) and untouched state
(random bytes kept for comparison), runs it and reads the outputs back through the views.
Error = rms(out - round(ref64)) / rms(ref64) (round: the output dtype's correctly rounded
value). Gate: error <= 1e-3 and <= 1.25 x fla's error + 1e-6 on the same inputs where fla
runs the case; states bit-exact; pool lines a call must not touch bit-identical.
fla-layout and residual cases run the drop-in manifests (kernrt.gen.conv.dropin_manifest),
one of them through `bind=` on torch tensors as kernrt.ops does.
Does not time anything (timing.py does).
"""
import itertools
import time
import traceback

import torch

import conv_ref as ref
from case_list import DROPIN_FWD_CASES, DROPIN_UPDATE_CASES, FWD_CASES, UPDATE_CASES
import kernrt
import manifests as mf
from kernrt.gen import conv as g
from kernrt.gen import pin

GATE = 1e-3
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


class Checker:
    """Runs cases and records one row per (case, candidate)."""

    def __init__(self, cubins, emit, fla, deadline):
        self.cubins, self.emit, self.fla, self.deadline = cubins, emit, fla, deadline
        self.passed = self.failed = 0
        self.failing = {}  # candidate -> failed case count

    def load(self, manifest, **kw):
        return kernrt.load(pin(manifest, self.cubins), cubins=[self.cubins], **kw)

    def record(self, case, cand, err, peer_err, ok, note=""):
        ok = bool(ok) and err <= GATE and (peer_err is None or err <= 1.25 * peer_err + 1e-6)
        self.passed += ok
        self.failed += not ok
        if not ok:
            self.failing[cand] = self.failing.get(cand, 0) + 1
        row = {"case": f"[{cand}] {case}", "kind": "check", "error": float(f"{err:.3e}"), "gate": GATE,
               "pass": ok}
        if peer_err is not None:
            row.update(peer="fla", peer_error=float(f"{peer_err:.3e}"))
        if note:
            row["note"] = note
        self.emit(row)
        pe = "" if peer_err is None else f"  fla {peer_err:.2e}"
        print(f"{'PASS' if ok else 'FAIL'}  [{cand}] {case:<56} err {err:.2e}{pe}  {note}", flush=True)

    def each(self, name, loaders, peer_err, one):
        """one(loader) -> (error, ok, note) for every loader; an exception fails that loader
        only (its row says why) and the next one runs."""
        for loader in loaders:
            try:
                err, ok, note = one(loader)
            except Exception as e:  # noqa: BLE001 - every candidate must report
                traceback.print_exc()
                err, ok, note = float("inf"), False, f"exception: {e}"[:200]
            self.record(name, loader, err, peer_err, ok, note)

    def guarded(self, name, fn, *args, **kw):
        if time.monotonic() > self.deadline:
            print(f"SKIP  {name}: out of time", flush=True)
            return
        try:
            fn(*args, **kw)
        except Exception as e:  # noqa: BLE001 - every case must report
            traceback.print_exc()
            self.record(name, "error", float("inf"), None, False, f"exception: {e}"[:200])


def rand_weight(D, W, wdtype, gen):
    return ((torch.rand(D, W, device="cuda", generator=gen) * 2 - 1) / W ** 0.5).to(wdtype)


def err_of(got, y64, dtype):
    return ref.rel_rms(got, ref.round_like(y64, dtype), y64)


def _same(a, b):
    return torch.equal(a.contiguous().view(torch.int16), b.contiguous().view(torch.int16))


# ---- forward (our op shapes: dense, varlen, pool lines) ------------------------------------

def fwd_case(ck, loaders, *, B, T, D, W, dtype="bf16", wdtype="f32", bias=False, silu=True, xpad=0,
             states=False, lens=None, pool=False, seed=0):
    opts = dict(B=B, T=T, D=D, W=W, dtype=dtype, wdtype=wdtype, bias=bias, silu=silu, xpad=xpad,
                states=states, lens=lens, pool=pool)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    B, T, N, cu_list = mf.fwd_geometry(B, T, lens)
    cu = None if cu_list is None else torch.tensor(cu_list, dtype=torch.int32, device="cuda")
    xt, wt = TORCH[dtype], TORCH[wdtype]
    Dp = D + 2 * xpad
    xfull = torch.randn(B, T, Dp, device="cuda", generator=gen).to(xt)
    x = xfull[:, :, xpad:xpad + D]
    w = rand_weight(D, W, wt, gen)
    b = (torch.randn(D, device="cuda", generator=gen) * 0.5).to(wt) if bias else None
    init = torch.randn(N, D, W - 1, device="cuda", generator=gen).to(xt) if states else None
    y64, f64 = ref.fwd(x, w, b, silu, init, cu)
    name = (f"fwd {'varlen N%d' % N if cu is not None else 'B%d' % B} T{T} D{D} W{W} {dtype} w{wdtype}"
            f"{' bias' if bias else ''}{' silu' if silu else ' noact'}"
            f"{' xstride+%d' % (2 * xpad) if xpad else ''}{' states' if states else ''}{' pool' if pool else ''}")
    peer = None
    if ck.fla is not None:
        fi = None if init is None else ref.to_fla(init)
        fy, _ = ck.fla.causal_conv1d(x, w, b, initial_state=fi, output_final_state=False,
                                     activation="silu" if silu else None,
                                     cu_seqlens=None if cu is None else cu.long())
        peer = err_of(fy, y64, xt)

    def one(loader):
        m, nl = mf.fwd_check(loader, **opts)
        rt = ck.load(m, seq_slots=nl) if nl else ck.load(m)
        rt.buffer("x").copy_(xfull)
        rt.buffer("weight").copy_(w)
        if bias:
            rt.buffer("bias").copy_(b)
        if cu is not None:
            rt.buffer("cu").copy_(cu)
        rt.buffer("y").fill_(float("nan"))
        ok, note = True, ""
        if states and pool:
            st = rt.state("conv")
            st.copy_(torch.randint(0, 255, st.shape, dtype=torch.uint8, device="cuda", generator=gen))
            lines = st[:nl * D * (W - 1) * 2].view(xt).view(nl, D, W - 1)
            perm = torch.randperm(nl - 1, device="cuda", generator=gen)[:2 * N] + 1
            il, fl = perm[:N].int(), perm[N:].int()
            for n in range(N):
                lines[int(il[n])] = init[n]
            rt.buffer("init_lines").copy_(il)
            rt.buffer("final_lines").copy_(fl)
            before = lines.clone()
        elif states:
            rt.buffer("init").copy_(init)
            rt.buffer("final").view(torch.int16).fill_(0x7FFF)
        rt.run("main", tokens=T, seqs=N)
        err = err_of(rt.buffer("y"), y64, xt)
        if states and pool:
            expect = before.clone()
            for n in range(N):
                expect[int(fl[n])] = f64[n].to(xt)
            ok = _same(lines, expect)
            note = "pool lines exact" if ok else "POOL MISMATCH"
        elif states:
            ok = _same(rt.buffer("final"), f64.to(xt))
            note = "final state exact" if ok else "FINAL STATE MISMATCH"
        return err, ok, note

    ck.each(name, loaders, peer, one)


# ---- decode update / verify over a pool ------------------------------------------------------

def update_case(ck, loaders, *, N, D, W, steps=1, dtype="bf16", wdtype="f32", bias=False, silu=True,
                pad_line=False, step_lines=False, chain=1, seed=0):
    opts = dict(N=N, D=D, W=W, steps=steps, dtype=dtype, wdtype=wdtype, bias=bias, silu=silu,
                step_lines=step_lines)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt, dtype, wdtype = dtype, TORCH[dtype], TORCH[wdtype]
    nl = N + 2 + (steps * N if step_lines else 0)
    w = rand_weight(D, W, wdtype, gen)
    b = (torch.randn(D, device="cuda", generator=gen) * 0.5).to(wdtype) if bias else None
    pool0 = torch.randn(nl, D, W - 1, device="cuda", generator=gen).to(dtype)
    lines = (torch.randperm(nl - 1, device="cuda", generator=gen)[:N] + 1).int()
    if pad_line:
        lines[N // 2] = 0
    sl = None
    if step_lines:
        used = set(lines.tolist())
        free = [i for i in range(1, nl) if i not in used]
        sl = torch.tensor(free[:steps * N], dtype=torch.int32, device="cuda").view(steps, N)
    xs = [torch.randn(N, steps, D, device="cuda", generator=gen).to(dtype) for _ in range(chain)]
    name = (f"{'update' if steps == 1 else 'verify'} N{N} D{D} W{W} steps{steps} {dt} w{opts['wdtype']}"
            f"{' bias' if bias else ''}{' silu' if silu else ' noact'}{' padline' if pad_line else ''}"
            f"{' steplines' if step_lines else ''} chain{chain}")
    # the reference and fla walk the chain once; each loader replays it from pool0
    refs, peer_errs, pool = [], [], pool0.clone()
    for x in xs:
        st = torch.stack([pool[l] if l != 0 else torch.zeros_like(pool[0]) for l in lines.tolist()])
        y64, new64, per64 = ref.update(x, w, st, b, silu)
        expect = pool.clone()
        for n, l in enumerate(lines.tolist()):
            if l != 0:
                expect[l] = new64[n].to(dtype)
            if sl is not None:
                for s in range(steps):
                    expect[int(sl[s, n])] = per64[s, n].to(dtype)
        refs.append((y64, expect))
        if ck.fla is not None and steps == 1:
            cache = ref.to_fla(st).contiguous()
            fy, _ = ck.fla.causal_conv1d_update(x[:, 0], cache, weight=w, bias=b,
                                                activation="silu" if silu else None)
            peer_errs.append(err_of(fy.unsqueeze(1), y64, dtype))
        pool = expect
    peer = max(peer_errs) if peer_errs else None

    def one(loader):
        m, _ = mf.update_check(loader, **opts)
        rt = ck.load(m, seq_slots=nl)
        rt.buffer("weight").copy_(w)
        if bias:
            rt.buffer("bias").copy_(b)
        rt.buffer("lines").copy_(lines)
        if step_lines:
            rt.buffer("step_lines").copy_(sl)
        pv = rt.state("conv")[:nl * D * (W - 1) * 2].view(dtype).view(nl, D, W - 1)
        pv.copy_(pool0)
        errs, ok = [], True
        for x, (y64, expect) in zip(xs, refs):
            rt.buffer("x").copy_(x)
            rt.buffer("y").fill_(float("nan"))
            rt.run("main", seqs=N)
            errs.append(err_of(rt.buffer("y"), y64, dtype))
            ok = ok and _same(pv, expect)
        return max(errs), ok, "pool exact" if ok else "POOL MISMATCH"

    ck.each(name, loaders if steps == 1 and not step_lines else ["verify"], peer, one)


# ---- drop-in manifests: fla's [N, D, W] lines, residual, bind --------------------------------

def dropin_fwd_case(ck, loaders, *, B, T, D, W, lens=None, bias=False, residual=False, states=True,
                    xrow=None, seed=0):
    if ck.fla is None:
        return  # these compare with fla's own final state and y; without fla nothing to gate
    gen = torch.Generator(device="cuda").manual_seed(seed)
    cu = None
    if lens is not None:
        cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device="cuda")
        B, T = 1, int(cu[-1])
    N = B if cu is None else len(lens)
    row = xrow or D
    xfull = torch.randn(B, T, row, device="cuda", generator=gen).to(torch.bfloat16)
    x = xfull[:, :, :D]
    w = rand_weight(D, W, torch.float32, gen)
    b = (torch.randn(D, device="cuda", generator=gen) * 0.5) if bias else None
    r = torch.randn(B, T, D, device="cuda", generator=gen).to(torch.bfloat16) if residual else None
    init = torch.randn(N, D, W, device="cuda", generator=gen).to(torch.bfloat16) if states else None
    y64, f64 = ref.fwd_full(x, w, b, True, init, cu, r)
    fy, ff = ck.fla.causal_conv1d(x, w, b, residual=r, initial_state=init, output_final_state=states,
                                  activation="silu", cu_seqlens=None if cu is None else cu.long())
    peer = err_of(fy, y64, torch.bfloat16)
    fla_state_ok = not states or _same(ff, f64.to(torch.bfloat16))
    name = (f"dropin fwd {'varlen N%d' % N if cu is not None else 'B%d' % B} T{T} D{D} W{W}"
            f"{' bias' if bias else ''}{' residual' if residual else ''}{' fla-states' if states else ''}"
            f"{' xrow%d' % row if row != D else ''}")

    def one(loader):
        m = g.dropin_manifest("fwd", B, T, D, W, "bf16", "f32", bias, "silu", x.stride(0), x.stride(1),
                              residual=residual, initial_state=states, final_state=states,
                              fwd_kernel=loader, varlen_seqs=None if cu is None else N)
        rt = ck.load(m)
        rt.buffer("x").copy_(xfull.reshape(-1)[:rt.buffer("x").numel()])
        rt.buffer("weight").copy_(w)
        for nm, t in (("bias", b), ("residual", r), ("initial_state", init), ("cu_seqlens", cu)):
            if t is not None:
                rt.buffer(nm).copy_(t)
        rt.buffer("y").fill_(float("nan"))
        if states:
            rt.buffer("final_state").view(torch.int16).fill_(0x7FFF)
        rt.run("main", tokens=T, seqs=N)
        err = err_of(rt.buffer("y"), y64, torch.bfloat16)
        ok = not states or _same(rt.buffer("final_state"), f64.to(torch.bfloat16))
        note = ("final state exact" if ok else "FINAL STATE MISMATCH") if states else ""
        if not fla_state_ok:
            note += " (fla's final state differs from the reference)"
        return err, ok, note

    ck.each(name, loaders, peer, one)


def dropin_update_case(ck, loaders, *, N, D, W, bias=False, residual=False, bind=False, seed=0):
    if ck.fla is None:
        return
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(N, D, device="cuda", generator=gen).to(torch.bfloat16)
    w = rand_weight(D, W, torch.float32, gen)
    b = (torch.randn(D, device="cuda", generator=gen) * 0.5) if bias else None
    r = torch.randn(N, D, device="cuda", generator=gen).to(torch.bfloat16) if residual else None
    cache0 = torch.randn(N, D, W, device="cuda", generator=gen).to(torch.bfloat16)
    y64, new64, _ = ref.update(x.unsqueeze(1), w, ref.from_fla(cache0), b, True,
                               None if r is None else r.unsqueeze(1))
    want_cache = torch.cat([cache0[..., 1:], x.unsqueeze(-1)], -1)
    fcache = cache0.clone()
    fy, _ = ck.fla.causal_conv1d_update(x, fcache, residual=r, weight=w, bias=b, activation="silu")
    peer = err_of(fy.unsqueeze(1), y64, torch.bfloat16)
    name = (f"dropin update N{N} D{D} W{W}{' bias' if bias else ''}{' residual' if residual else ''}"
            f" fla-cache{' bind' if bind else ''}")

    def one(loader):
        m = g.dropin_manifest("update", N, 1, D, W, "bf16", "f32", bias, "silu", residual=residual,
                              update_kernel=loader)
        rt = ck.load(m)
        cache = cache0.clone()
        y = torch.full((N, D), float("nan"), dtype=torch.bfloat16, device="cuda")
        if bind:  # the caller's tensors stand in for the buffers, as kernrt.ops binds them
            tensors = {"x": x, "weight": w, "y": y, "cache": cache, "bias": b, "residual": r}
            rt.enqueue("main", bind={k: v for k, v in tensors.items() if v is not None}, seqs=N)
            torch.cuda.synchronize()
            got_y, got_cache = y, cache
        else:
            rt.buffer("x").copy_(x.reshape(-1))  # the drop-in's x is a flat view of [N, D]
            rt.buffer("weight").copy_(w)
            for nm, t in (("bias", b), ("residual", r)):
                if t is not None:
                    rt.buffer(nm).copy_(t)
            rt.buffer("cache").copy_(cache0)
            rt.buffer("y").fill_(float("nan"))
            rt.run("main", seqs=N)
            got_y, got_cache = rt.buffer("y"), rt.buffer("cache")
        err = err_of(got_y.unsqueeze(1), y64, torch.bfloat16)
        ok = _same(got_cache, want_cache)
        note = "cache exact" if ok else "CACHE MISMATCH"
        if not _same(fcache, want_cache):
            note += " (fla's cache differs from the reference)"
        return err, ok, note

    ck.each(name, loaders, peer, one)


def run_all(ck, fwd_loaders, update_loaders, fla_update_loaders, quick=False):
    """Every case for the given loaders: forward, update/verify over our lines, and the
    drop-ins (fla's cache: fla_update_loaders)."""
    # forward and decode cases interleaved, so a short budget still checks both paths
    for i in range(max(len(FWD_CASES), len(UPDATE_CASES))):
        if i < len(FWD_CASES):
            ck.guarded(f"fwd case {i}", fwd_case, ck, fwd_loaders, seed=i, **FWD_CASES[i])
        if i < len(UPDATE_CASES):
            ck.guarded(f"update case {i}", update_case, ck, update_loaders, seed=100 + i, **UPDATE_CASES[i])
    for i, kw in enumerate(DROPIN_FWD_CASES):
        ck.guarded(f"dropin fwd case {i}", dropin_fwd_case, ck, fwd_loaders, seed=200 + i, **kw)
    for i, kw in enumerate(DROPIN_UPDATE_CASES):
        loaders = fla_update_loaders[:1] if kw.get("bind") else fla_update_loaders
        ck.guarded(f"dropin update case {i}", dropin_update_case, ck, loaders, seed=300 + i, **kw)
