"""The manifests of validation/conv, as pure functions of a case's options (no torch, no GPU).

Owns: the one-call check manifests of cases.py (forward dense / varlen / with dense states
or pool lines, decode and verify over a pool) and the timing manifests of timing.py
(rotation sets, one program of K calls per candidate), all built from kernrt.gen.conv's
ops, so validation holds no pack layout of its own. test_manifests.py runs kernrt-verify
over every one of them on the CPU. The drop-in cases use kernrt.gen.conv.dropin_manifest
as it is.

Does not check: anything the verifier does not (kernrt-verify is the check).
"""
import itertools

from kernrt.gen import conv as g

DT = ("bf16", "f16")


def _buf(dtype, shape, kind):
    return {"dtype": dtype, "shape": list(shape), "kind": kind}


def _manifest(name, vars_, bufs, ops, programs, states=None):
    m = {"schema_version": 4, "model": name, "vars": vars_, "buffers": bufs,
         "modules": g.modules_of(ops), "ops": ops, "programs": programs}
    if states:
        m["states"] = states
    return m


def fwd_geometry(B, T, lens):
    """(B, T, N, cu list or None) of a forward case: lens packs varlen sequences in one row."""
    if lens is None:
        return B, T, B, None
    cu = [0] + list(itertools.accumulate(lens))
    return 1, cu[-1], len(lens), cu


def fwd_check(loader, *, B, T, D, W, dtype="bf16", wdtype="f32", bias=False, silu=True, xpad=0,
              states=False, lens=None, pool=False, **_):
    """(manifest, seq_slots, pool lines) of one forward check: x [B, T, D + 2 xpad] viewed at
    element xpad; y [B, T, D]; states dense [N, D, W-1] buffers `init`/`final`, or pool
    lines (state `conv`, tables `final_lines`, `init_lines`)."""
    B, T, N, cu = fwd_geometry(B, T, lens)
    Dp = D + 2 * xpad
    p = g.Profile(D, width=W, dtype=dtype, weight=wdtype, bias=bias, act="silu" if silu else "none",
                  x_row=Dp, fwd_kernel=loader)
    kind = (["pool_init"] if pool else ["init", "final"]) if states else None
    op = g.fwd_op(p, x_strides=(0, Dp) if cu else (T * Dp, Dp), y_strides=(0, D) if cu else (T * D, D),
                  varlen=cu is not None, states=kind)
    bufs = {"x": _buf(dtype, [B, T, Dp], "input"), "weight": _buf(wdtype, [D, W], "input"),
            "y": _buf(dtype, [B, T, D], "output")}
    args = [{"buf": "x", "offset": 2 * xpad}, {"buf": "weight"}]
    if bias:
        bufs["bias"] = _buf(wdtype, [D], "input")
        args.append({"buf": "bias"})
    args.append({"buf": "y"})
    if cu is not None:
        bufs["cu"] = _buf("i32", [N + 1], "input")
        args.append({"buf": "cu"})
    st, slots = None, 0
    if states and pool:
        slots = 2 * N + 3
        bufs["final_lines"] = _buf("i32", [N], "input")
        bufs["init_lines"] = _buf("i32", [N], "input")
        args += [{"state": "conv"}, {"buf": "final_lines"}, {"buf": "init_lines"}]
        st = {"conv": {"bytes_per_seq": p.line_bytes}}
    elif states:
        bufs["init"] = _buf(dtype, [N, D, W - 1], "input")
        bufs["final"] = _buf(dtype, [N, D, W - 1], "output")
        args += [{"buf": "init"}, {"buf": "final"}]
    m = _manifest("conv-check-fwd", {"tokens": {"max": T}, "seqs": {"max": N}}, bufs, {"fwd": op},
                  {"main": {"calls": [{"op": "fwd", "args": args}]}}, st)
    return m, slots


def update_check(loader, *, N, D, W, steps=1, dtype="bf16", wdtype="f32", bias=False, silu=True,
                 step_lines=False, **_):
    """(manifest, seq_slots) of one decode (a decode loader of our lines: c4s2p) or verify (loader "verify")
    check over pool lines: x/y [N, steps, D], lines [N], step_lines [steps, N]."""
    slots = N + 2 + (steps * N if step_lines else 0)
    p = g.Profile(D, width=W, dtype=dtype, weight=wdtype, bias=bias, act="silu" if silu else "none",
                  update_kernel=g.UPDATE_KERNEL["lines"] if loader == "verify" else loader)
    op = g.update_op(p, steps=steps, step_lines=step_lines, max_seqs=N)
    bufs = {"x": _buf(dtype, [N, steps, D], "input"), "weight": _buf(wdtype, [D, W], "input"),
            "y": _buf(dtype, [N, steps, D], "output"), "lines": _buf("i32", [N], "input")}
    args = [{"buf": "x"}, {"buf": "weight"}]
    if bias:
        bufs["bias"] = _buf(wdtype, [D], "input")
        args.append({"buf": "bias"})
    args += [{"buf": "y"}, {"state": "conv"}, {"buf": "lines"}]
    if step_lines:
        bufs["step_lines"] = _buf("i32", [steps, N], "input")
        args.append({"buf": "step_lines"})
    m = _manifest("conv-check-update", {"seqs": {"max": N}}, bufs, {"u": op},
                  {"main": {"calls": [{"op": "u", "args": args}]}}, {"conv": {"bytes_per_seq": p.line_bytes}})
    return m, slots


def fwd_bench(cands, B, T, D, W, nsets, calls):
    """Timing manifest: sets x<i>/y<i> [B, T, D] bf16, weight f32; program <label> = `calls`
    calls of candidate <label> (cands: label -> loader) cycling over the sets."""
    bufs = {"weight": _buf("f32", [D, W], "input")}
    for i in range(nsets):
        bufs[f"x{i}"] = _buf("bf16", [B, T, D], "input")
        bufs[f"y{i}"] = _buf("bf16", [B, T, D], "output")
    ops, programs = {}, {}
    for label, loader in cands.items():
        p = g.Profile(D, width=W, fwd_kernel=loader)
        ops[label] = g.fwd_op(p, x_strides=(T * D, D), y_strides=(T * D, D))
        programs[label] = {"calls": [{"op": label, "args": [{"buf": f"x{c % nsets}"}, {"buf": "weight"},
                                                            {"buf": f"y{c % nsets}"}]} for c in range(calls)]}
    return _manifest("conv-bench-fwd", {"tokens": {"max": T}, "seqs": {"max": B}}, bufs, ops, programs)


def update_bench(cands, N, D, W, nsets, calls):
    """(manifest, seq_slots) for decode timing: sets x<i>/y<i> [N, D], lines<i> [N] into state
    `conv` (our lines) and cache<i> [N, D, W] carry buffers (fla's lines, when a candidate
    uses them); cands: label -> (layout, loader)."""
    bufs = {"weight": _buf("f32", [D, W], "input")}
    for i in range(nsets):
        bufs[f"x{i}"] = _buf("bf16", [N, D], "input")
        bufs[f"y{i}"] = _buf("bf16", [N, D], "output")
        bufs[f"lines{i}"] = _buf("i32", [N], "input")
        if any(lay == "fla" for lay, _ in cands.values()):
            bufs[f"cache{i}"] = _buf("bf16", [N, D, W], "carry")
    ops, programs = {}, {}
    for label, (layout, loader) in cands.items():
        p = g.Profile(D, width=W, update_kernel=loader, state_layout=layout)
        fla = layout == "fla"
        ops[label] = g.update_op(p, state="buffer" if fla else "pool", x_strides=(D, D), y_strides=(D, D))
        calls_ = []
        for c in range(calls):
            k = c % nsets
            tail = [{"buf": f"cache{k}"}] if fla else [{"state": "conv"}, {"buf": f"lines{k}"}]
            calls_.append({"op": label, "args": [{"buf": f"x{k}"}, {"buf": "weight"}, {"buf": f"y{k}"}] + tail})
        programs[label] = {"calls": calls_}
    m = _manifest("conv-bench-update", {"seqs": {"max": N}}, bufs, ops, programs,
                  {"conv": {"bytes_per_seq": D * (W - 1) * 2}})
    return m, nsets * N + 1
