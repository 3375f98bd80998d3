"""Refusals of conv calls whose buffers cannot be right (kernrt.gen.conv's `check`).

Owns: for every call of a complete manifest that launches one conv entry, the checks the
manifest verifier cannot make because they need the conv's meaning: weight [D, W], bias
[D], 16-byte aligned offsets, x/y rows of the op's stride holding D channels from the
view's offset (2-D and wider buffers; a 1-D buffer is a flat view, as in the drop-ins),
x and y not the same buffer, a state line (offset + D * slots * 2 bytes) inside the slot,
cu_seqlens with seqs.max + 1 entries. The op's profile is read back from its pack through
conv_params.py's offsets.

Does not check: kernel behaviour, the manifest rules (kernrt-verify does), strides other
than the token stride, or what a line table holds.
"""

from . import files as _files
from .conv_params import FLAG_STATE_FULL, FWD, UPDATE

ESIZE = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4}


from .files import field as _field  # noqa: E402


def _op_profile(op):
    """(kind, D, W, x_row, y_row, iface index of x/weight/bias/y/state) for a conv op, or None."""
    launches = op.get("impl", {}).get("launches", [])
    if len(launches) != 1 or not str(launches[0].get("entry", "")).startswith("conv_"):
        return None
    ln = launches[0]
    entry = ln["entry"]
    kind = entry.split("_")[1]  # fwd | update | verify
    width = int(entry.rsplit("_w", 1)[1])
    fields = ln["args"][0]["pack"]["fields"]
    b = FWD if kind == "fwd" else UPDATE
    dim = _field(fields, b["dim"])["i32"]
    x_row = _field(fields, b["x_stride_tok"])["i64"]
    y_row = _field(fields, b["y_stride_tok"])["i64"]
    slots = width if _field(fields, b["flags"])["i32"] & FLAG_STATE_FULL else width - 1
    names = {"x": "x", "weight": "weight", "bias": "bias", "y": "y", "residual": "residual",
             "state": "final_state" if kind == "fwd" else "state", "init": "init_state",
             "cu": "cu_seqlens", "lines": "final_lines" if kind == "fwd" else "lines",
             "step_lines": "step_lines"}
    idx = {}
    for name, member in names.items():
        f = _field(fields, b[member]) if member in b else None
        if f is not None and "param" in f:
            idx[name] = f["param"]
    return kind, dim, width, slots, x_row, y_row, idx


def check(m):
    """Problems (pointer, message) of every conv call in a complete manifest."""
    out = []
    bufs, states, vars_ = m.get("buffers", {}), m.get("states", {}), m.get("vars", {})
    for here, call, op in _files.calls(m):
        prof = op and _op_profile(op)
        if not prof:
            continue
        kind, dim, width, slots, x_row, y_row, idx = prof
        args = call["args"]

        def arg(name):
            i = idx.get(name)
            return (i, args[i]) if i is not None and i < len(args) else (None, None)

        for name in ("x", "weight", "bias", "y", "residual", "cu", "lines", "step_lines"):
            i, a = arg(name)
            if a is None or "buf" not in a or a["buf"] not in bufs:
                continue
            b = bufs[a["buf"]]
            off = a.get("offset", 0)
            if off % 16:
                out.append((f"{here}/{i}", f"offset {off} into `{a['buf']}` is not 16-byte "
                            f"aligned; conv loads and stores 16-byte vectors"))
            shape = [_files.extent(m, e) for e in b["shape"]]
            if name == "weight" and shape != [dim, width]:
                out.append((f"{here}/{i}", f"weight `{a['buf']}` has shape {shape}, expected "
                            f"[{dim}, {width}] (D, W of the op)"))
            if name == "bias" and shape != [dim]:
                out.append((f"{here}/{i}", f"bias `{a['buf']}` has shape {shape}, expected [{dim}]"))
            if name in ("x", "y") and len(shape) > 1:  # 1-D: a flat view (drop-ins)
                row = x_row if name == "x" else y_row
                elems = off // ESIZE.get(b["dtype"], 1)
                if shape[-1] != row:
                    out.append((f"{here}/{i}", f"`{a['buf']}` rows are {shape[-1]} elements, "
                                f"but the op strides {name} by {row}"))
                elif elems % row + dim > row:
                    out.append((f"{here}/{i}", f"{name} view at element {elems % row} of "
                                f"`{a['buf']}` needs {dim} channels, row has {row}"))
        (_, xa), (yi, ya) = arg("x"), arg("y")
        if xa and ya and xa.get("buf") == ya.get("buf"):
            out.append((f"{here}/{yi}", f"y and x are both `{xa['buf']}`; the conv reads x "
                        f"rows after writing y rows, so they must not overlap"))
        si, sa = arg("state")
        if sa and "state" in sa and sa["state"] in states:
            per = states[sa["state"]].get("bytes_per_seq", 0)
            need = sa.get("offset", 0) + dim * slots * 2
            if per and need > per:
                out.append((f"{here}/{si}", f"state `{sa['state']}` has {per} bytes per sequence, "
                            f"the layer's line needs {need} (offset + D*{slots}*2)"))
            if sa.get("offset", 0) % 16:
                out.append((f"{here}/{si}", f"state offset {sa['offset']} is not 16-byte aligned"))
        ci_, ca = arg("cu")
        if ca and ca.get("buf") in bufs and "seqs" in vars_:
            n = _files.extent(m, bufs[ca["buf"]]["shape"][0])
            if n < vars_["seqs"]["max"] + 1:
                out.append((f"{here}/{ci_}", f"cu_seqlens `{ca['buf']}` has {n} entries, needs "
                            f"seqs.max + 1 = {vars_['seqs']['max'] + 1}"))
    return out
