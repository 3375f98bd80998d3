#!/usr/bin/env python3
"""Causal conv1d op generator: one profile -> kern schema-v4 ops over kernels/conv cubins.

Owns: the conv ops (interface, launch geometry, the ConvFwdParams / ConvUpdateParams packs of
kernels/conv/params.h) for one profile (x dtype, width W, channels D, weight dtype, bias,
activation, x/y row strides), the shipped fragment manifests/ops/conv.json.in, the complete
example manifests examples/conv/*.json.in, and `check`, which refuses conv calls whose
buffers cannot be right: weight shape not [D, W], x/y rows shorter than D, a state line
shorter than D*(W-1) elements, byte offsets not 16-aligned, x and y overlapping.
Refuses at generation: W outside 2..4, D not a positive multiple of 8, strides not multiples
of 8 elements, unknown dtypes, steps outside 1..8.

Ops (threads of 8 channels: 128 per block, grid x = ceil(D / 1024); the 1-token decode 64
per block and 4 sequences per thread, grid x = ceil(D / 512); module sha256 = `@SHA256:<cubin>@`,
replaced by cmake's kernrt_pin_manifest):
  conv_fwd_<tag>      dense x [seqs, tokens, x_row] -> y [seqs, tokens, y_row], no state
  conv_prefill_<tag>  packed varlen x [tokens, x_row], cu_seqlens [n] i32, final state of
                      sequence i written to pool line lines[i] (fresh sequences: no initial)
  conv_decode_<tag>   one token per sequence, state read and replaced in place at lines[i]
  conv_verify_<tag>   `steps` tokens per sequence; also the state after token s at
                      step_lines[s][i] (0 = skip), for a speculative rollback

Does not check: kernel behaviour, the manifest rules (kernrt-verify does), or sequences
whose lengths differ from what cu_seqlens says. Python 3 standard library only.
"""

import argparse
import json
import os
import sys

KERNEL_SPAN = 32           # rows per block of conv_fwd (grid.y = ceil(tokens / span))
UPDATE_SEQS = 4            # sequences per thread of conv_update_* (kUpdateSeqs)
THREADS = 128              # block.x of the forward and verify launches
UPDATE_THREADS = 64        # block.x of the 1-token decode launch
CHANNELS = 8               # channels per thread
MAX_STEPS = 8              # verify tokens per sequence (kMaxSteps)
FWD_PACK, UPDATE_PACK = 136, 120
FLAG_SILU, FLAG_WEIGHT_F32 = 1, 2
ESIZE = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


class GenError(Exception):
    """A profile or manifest the conv kernels cannot serve; message says what and why."""


class Profile:
    """What one family of conv ops computes and how its activations are laid out."""

    def __init__(self, dim, width=4, dtype="bf16", weight="f32", bias=False, act="silu",
                 x_row=None, y_row=None):
        if dtype not in ("bf16", "f16"):
            raise GenError(f"x dtype `{dtype}` is not supported: expected bf16 or f16")
        if weight not in ("f32", "bf16"):
            raise GenError(f"weight dtype `{weight}` is not supported: expected f32 or bf16")
        if act not in ("silu", "none"):
            raise GenError(f"activation `{act}` is not supported: expected silu or none")
        if not isinstance(width, int) or not 2 <= width <= 4:
            raise GenError(f"conv width W = {width} is not supported: the kernels have entries "
                           f"for W in 2..4 only")
        if not isinstance(dim, int) or dim <= 0 or dim % CHANNELS:
            raise GenError(f"channels D = {dim} must be a positive multiple of {CHANNELS} "
                           f"(one 16-byte vector per thread)")
        self.dim, self.width, self.dtype, self.weight = dim, width, dtype, weight
        self.bias, self.act = bias, act
        self.x_row = dim if x_row is None else x_row
        self.y_row = dim if y_row is None else y_row
        for name, row in (("x_row", self.x_row), ("y_row", self.y_row)):
            if row < dim or row % CHANNELS:
                raise GenError(f"`{name}` = {row} must be >= D = {dim} and a multiple of "
                               f"{CHANNELS} elements (16-byte aligned rows)")

    @property
    def tag(self):
        return f"{self.dtype}_w{self.width}_d{self.dim}"

    @property
    def line_bytes(self):
        """Bytes of one conv state line: [D, W-1] in x's dtype."""
        return self.dim * (self.width - 1) * ESIZE[self.dtype]

    @property
    def flags(self):
        return (FLAG_SILU if self.act == "silu" else 0) | (FLAG_WEIGHT_F32 if self.weight == "f32" else 0)

    def grid_x(self, threads=THREADS):
        return -(-self.dim // (CHANNELS * threads))

    def head(self):
        """Interface params every op starts with: x, weight, [bias,] y."""
        p = [f"in buffer<{self.dtype}>", f"in buffer<{self.weight}>"]
        if self.bias:
            p.append(f"in buffer<{self.weight}>")
        p.append(f"out buffer<{self.dtype}>")
        return p

    def head_fields(self):
        """Pack fields of x, weight, bias, y (same offsets in both param blocks)."""
        f = [{"at": 0, "param": 0}, {"at": 8, "param": 1}]
        if self.bias:
            f.append({"at": 16, "param": 2})
        f.append({"at": 24, "param": len(self.head()) - 1})
        return f


def _launch(module, entry, size, fields, grid, threads=THREADS):
    return {"module": module, "entry": entry, "params": [f"bytes<{size}>"],
            "block": [threads, 1, 1], "grid": grid, "pdl": True,
            "args": [{"pack": {"size": size, "fields": fields}}]}


def fwd_dense_op(p, max_tokens):
    """Dense batch: x/y buffers [seqs, tokens, row] sized at the vars' maxima."""
    fields = p.head_fields() + [
        {"at": 72, "i64": max_tokens * p.x_row}, {"at": 80, "i64": p.x_row},
        {"at": 88, "i64": max_tokens * p.y_row}, {"at": 96, "i64": p.y_row},
        {"at": 120, "i32": p.dim}, {"at": 124, "var": "tokens"}, {"at": 132, "i32": p.flags}]
    grid = [p.grid_x(), {"ceil_div": ["tokens", KERNEL_SPAN]}, "seqs"]
    return {"params": p.head(), "impl": {"launches": [
        _launch("conv_fwd", f"conv_fwd_sm90a_{p.dtype}_w{p.width}", FWD_PACK, fields, grid)]}}


def prefill_op(p):
    """Packed varlen prefill; final states into the pool lines."""
    n = len(p.head())
    params = p.head() + ["in buffer<i32>", "inout state", "in buffer<i32>"]  # cu, pool, lines
    fields = p.head_fields() + [
        {"at": 40, "param": n + 1}, {"at": 48, "param": n}, {"at": 64, "param": n + 2},
        {"at": 80, "i64": p.x_row}, {"at": 96, "i64": p.y_row},
        {"at": 112, "i64": p.line_bytes}, {"at": 120, "i32": p.dim},
        {"at": 124, "var": "tokens"}, {"at": 128, "var": "seqs"}, {"at": 132, "i32": p.flags}]
    grid = [p.grid_x(), {"ceil_div": ["tokens", KERNEL_SPAN]}, 1]
    return {"params": params, "impl": {"launches": [
        _launch("conv_fwd", f"conv_fwd_sm90a_{p.dtype}_w{p.width}", FWD_PACK, fields, grid)]}}


def update_op(p, steps=1, step_lines=False, max_seqs=None):
    """Decode (steps 1) or verify (steps 2..8): x/y [seqs, steps, row], pool + lines."""
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise GenError(f"steps = {steps} is not supported: expected 1..{MAX_STEPS}")
    if step_lines and max_seqs is None:
        raise GenError("step lines need `max_seqs` (the row stride of the [steps, seqs] table)")
    n = len(p.head())
    params = p.head() + ["inout state", "in buffer<i32>"] + (["in buffer<i32>"] if step_lines else [])
    fields = p.head_fields() + [
        {"at": 32, "param": n}, {"at": 40, "param": n + 1},
        {"at": 56, "i64": steps * p.x_row}, {"at": 64, "i64": p.x_row},
        {"at": 72, "i64": steps * p.y_row}, {"at": 80, "i64": p.y_row},
        {"at": 88, "i64": p.line_bytes}, {"at": 104, "i32": p.dim},
        {"at": 108, "var": "seqs"}, {"at": 112, "i32": steps}, {"at": 116, "i32": p.flags}]
    if step_lines:
        fields += [{"at": 48, "param": n + 2}, {"at": 96, "i64": max_seqs}]
    verify = steps > 1 or step_lines
    per = 1 if verify else UPDATE_SEQS
    threads = THREADS if verify else UPDATE_THREADS
    grid = [p.grid_x(threads), {"ceil_div": ["seqs", per]} if per > 1 else "seqs", 1]
    entry = f"conv_{'verify' if verify else 'update'}_sm90a_{p.dtype}_w{p.width}"
    fields.sort(key=lambda f: f["at"])
    return {"params": params, "impl": {"launches": [
        _launch("conv_update", entry, UPDATE_PACK, fields, grid, threads)]}}


MODULES = {
    "conv_fwd": {"source": "conv_fwd.sm90a.cubin", "sha256": "@SHA256:conv_fwd.sm90a@"},
    "conv_update": {"source": "conv_update.sm90a.cubin", "sha256": "@SHA256:conv_update.sm90a@"},
}


def fragment():
    """The shipped ops: KDA's short convolutions (q/k D 2048, v D 4096; W 4, silu, f32
    weight, bf16 x) read from a fused projection row [q | k | v] of 8192 elements."""
    ops = {}
    for d in (2048, 4096):
        p = Profile(d, x_row=8192)
        ops[f"conv_prefill_{p.tag}"] = prefill_op(p)
        ops[f"conv_decode_{p.tag}"] = update_op(p)
        ops[f"conv_verify4_{p.tag}"] = update_op(p, steps=4)
    return {"modules": MODULES, "ops": ops}

# ---- complete examples ---------------------------------------------------------------------


def _buf(dtype, shape, kind, **kw):
    b = {"dtype": dtype, "shape": shape, "kind": kind}
    b.update(kw)
    return b


def example_prefill_decode(p, max_tokens=96, max_seqs=4, verify_steps=0):
    """prefill (varlen, writes pool lines) -> two decode steps (or one verify round)."""
    w = p.width
    bufs = {
        "x": _buf(p.dtype, ["tokens", p.x_row], "input"),
        "cu_seqlens": _buf("i32", [max_seqs + 1], "input", fill="cu_seqlens"),
        "lines": _buf("i32", [1, "seqs"], "input", domain={"index_into": "conv", "stride": p.line_bytes}),
        "weight": _buf(p.weight, [p.dim, w], "input"),
        "y": _buf(p.dtype, ["tokens", p.y_row], "output"),
    }
    args_head = [{"buf": "x"}, {"buf": "weight"}] + ([{"buf": "bias"}] if p.bias else [])
    if p.bias:
        bufs["bias"] = _buf(p.weight, [p.dim], "input")
    calls = [{"label": "prefill", "op": "prefill",
              "args": args_head + [{"buf": "y"}, {"buf": "cu_seqlens"}, {"state": "conv"}, {"buf": "lines"}]}]
    ops = {"prefill": prefill_op(p)}
    if verify_steps:
        bufs["xv"] = _buf(p.dtype, ["seqs", verify_steps, p.x_row], "input")
        bufs["yv"] = _buf(p.dtype, ["seqs", verify_steps, p.y_row], "output")
        bufs["step_lines"] = _buf("i32", [verify_steps, "seqs"], "input",
                                  domain={"index_into": "conv", "stride": p.line_bytes})
        ops["verify"] = update_op(p, steps=verify_steps, step_lines=True, max_seqs=max_seqs)
        calls.append({"label": "verify", "op": "verify", "args": [{"buf": "xv"}, args_head[1]] + args_head[2:] + [
            {"buf": "yv"}, {"state": "conv"}, {"buf": "lines"}, {"buf": "step_lines"}]})
    else:
        ops["decode"] = update_op(p)
        for i in (1, 2):
            bufs[f"xd{i}"] = _buf(p.dtype, ["seqs", p.x_row], "input")
            bufs[f"yd{i}"] = _buf(p.dtype, ["seqs", p.y_row], "output")
            calls.append({"label": f"decode{i}", "op": "decode", "args": [{"buf": f"xd{i}"}] + args_head[1:] + [
                {"buf": f"yd{i}"}, {"state": "conv"}, {"buf": "lines"}]})
    # A sequence's slot holds its conv line, then one line per verify step (rollback copies).
    return {"schema_version": 4, "model": f"kernrt-conv-example-{p.tag}",
            "vars": {"tokens": {"max": max_tokens}, "seqs": {"max": max_seqs}},
            "states": {"conv": {"bytes_per_seq": p.line_bytes * (1 + verify_steps)}},
            "buffers": bufs,
            "modules": {k: v for k, v in MODULES.items()
                        if any(ln["module"] == k for o in ops.values() for ln in o["impl"]["launches"])},
            "ops": ops, "programs": {"main": {"calls": calls}}}


def example_dense(p, max_tokens=80, max_seqs=3, offset_elems=0):
    """Dense batch forward over a slice of a wider projection buffer (x row stride > D)."""
    bufs = {
        "proj": _buf(p.dtype, ["seqs", max_tokens, p.x_row], "input"),
        "weight": _buf(p.weight, [p.dim, p.width], "input"),
        "y": _buf(p.dtype, ["seqs", max_tokens, p.y_row], "output"),
    }
    args = [{"buf": "proj", "offset": offset_elems * ESIZE[p.dtype]}, {"buf": "weight"}]
    if p.bias:
        bufs["bias"] = _buf(p.weight, [p.dim], "input")
        args.append({"buf": "bias"})
    args.append({"buf": "y"})
    return {"schema_version": 4, "model": f"kernrt-conv-example-dense-{p.tag}",
            "vars": {"tokens": {"max": max_tokens}, "seqs": {"max": max_seqs}},
            "buffers": bufs, "modules": {"conv_fwd": MODULES["conv_fwd"]},
            "ops": {"fwd": fwd_dense_op(p, max_tokens)},
            "programs": {"main": {"calls": [{"op": "fwd", "args": args}]}}}


def examples():
    """name -> (manifest, description for examples/conv/make_inputs.py)."""
    a = Profile(512, x_row=512)
    b = Profile(256, width=3, dtype="f16", weight="bf16", bias=True, act="none", x_row=320)
    c = Profile(384, x_row=384)
    return {
        "prefill_decode": example_prefill_decode(a),
        "prefill_verify": example_prefill_decode(c, verify_steps=4),
        "dense_strided": example_dense(b, offset_elems=32),
    }

# ---- check: conv calls whose buffers cannot be right ----------------------------------------


def _field(fields, at):
    for f in fields:
        if f["at"] == at:
            return f
    return None


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
    fwd = kind == "fwd"
    dim = _field(fields, 120 if fwd else 104)["i32"]
    x_row = _field(fields, 80 if fwd else 64)["i64"]
    y_row = _field(fields, 96 if fwd else 80)["i64"]
    idx = {name: _field(fields, at)["param"] for name, at in
           (("x", 0), ("weight", 8), ("bias", 16), ("y", 24),
            ("state", 40 if fwd else 32), ("cu", 48 if fwd else None),
            ("lines", 64 if fwd else 40), ("step_lines", None if fwd else 48))
           if at is not None and _field(fields, at) is not None and "param" in _field(fields, at)}
    return kind, dim, width, x_row, y_row, idx


def check(m):
    """Problems (pointer, message) of every conv call in a complete manifest."""
    out = []
    bufs, states, vars_ = m.get("buffers", {}), m.get("states", {}), m.get("vars", {})

    def extent(e):
        return vars_[e]["max"] if isinstance(e, str) else e

    for pname, prog in sorted(m.get("programs", {}).items()):
        for ci, call in enumerate(prog.get("calls", [])):
            op = m.get("ops", {}).get(call.get("op"))
            prof = op and _op_profile(op)
            if not prof:
                continue
            kind, dim, width, x_row, y_row, idx = prof
            args = call["args"]
            here = f"/programs/{pname}/calls/{ci}/args"

            def arg(name):
                i = idx.get(name)
                return (i, args[i]) if i is not None and i < len(args) else (None, None)

            for name in ("x", "weight", "bias", "y", "cu", "lines", "step_lines"):
                i, a = arg(name)
                if a is None or "buf" not in a or a["buf"] not in bufs:
                    continue
                b = bufs[a["buf"]]
                off = a.get("offset", 0)
                if off % 16:
                    out.append((f"{here}/{i}", f"offset {off} into `{a['buf']}` is not 16-byte "
                                f"aligned; conv loads and stores 16-byte vectors"))
                shape = [extent(e) for e in b["shape"]]
                if name == "weight" and shape != [dim, width]:
                    out.append((f"{here}/{i}", f"weight `{a['buf']}` has shape {shape}, expected "
                                f"[{dim}, {width}] (D, W of the op)"))
                if name == "bias" and shape != [dim]:
                    out.append((f"{here}/{i}", f"bias `{a['buf']}` has shape {shape}, expected [{dim}]"))
                if name in ("x", "y"):
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
                need = sa.get("offset", 0) + dim * (width - 1) * 2
                if per and need > per:
                    out.append((f"{here}/{si}", f"state `{sa['state']}` has {per} bytes per sequence, "
                                f"the layer's line needs {need} (offset + D*(W-1)*2)"))
                if sa.get("offset", 0) % 16:
                    out.append((f"{here}/{si}", f"state offset {sa['offset']} is not 16-byte aligned"))
            ci_, ca = arg("cu")
            if ca and ca.get("buf") in bufs and "seqs" in vars_:
                n = extent(bufs[ca["buf"]]["shape"][0])
                if n < vars_["seqs"]["max"] + 1:
                    out.append((f"{here}/{ci_}", f"cu_seqlens `{ca['buf']}` has {n} entries, needs "
                                f"seqs.max + 1 = {vars_['seqs']['max'] + 1}"))
    return out

# ---- files -------------------------------------------------------------------------------


def _fmt(o, ind):
    """JSON with short values on one line (<= 96 columns), longer ones expanded."""
    flat = json.dumps(o)
    if not isinstance(o, (dict, list)) or len(flat) + ind <= 96:
        return flat
    pad = " " * (ind + 2)
    if isinstance(o, dict):
        items = [f"{pad}{json.dumps(k)}: {_fmt(v, ind + 2)}" for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * ind + "}"
    return "[\n" + ",\n".join(pad + _fmt(v, ind + 2) for v in o) + "\n" + " " * ind + "]"


def dump(obj):
    return _fmt(obj, 0) + "\n"


def outputs():
    """Every generated file, path relative to the repository -> text."""
    files = {"manifests/ops/conv.json.in": dump(fragment())}
    for name, m in examples().items():
        problems = check(m)
        if problems:
            raise GenError(f"example `{name}`: " + "; ".join(f"{p}: {msg}" for p, msg in problems))
        files[f"examples/conv/{name}.json.in"] = dump(m)
    return files


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write the fragment and the examples into the repository")
    w.add_argument("--root", default=REPO)
    d = sub.add_parser("diff", help="exit 1 if a committed generated file differs from the generator")
    d.add_argument("--root", default=REPO)
    c = sub.add_parser("check", help="refuse conv calls whose buffers cannot match the op")
    c.add_argument("manifests", nargs="+")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "check":
            bad = 0
            for path in a.manifests:
                for ptr, msg in check(json.load(open(path))):
                    print(f"{path}: {ptr}: {msg}", file=sys.stderr)
                    bad += 1
            return 1 if bad else 0
        files = outputs()
        stale = 0
        for rel, text in sorted(files.items()):
            path = os.path.join(a.root, rel)
            if a.cmd == "write":
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            elif not os.path.exists(path) or open(path).read() != text:
                print(f"{rel}: differs from `conv_op.py write`", file=sys.stderr)
                stale += 1
        return 1 if stale else 0
    except GenError as e:
        print(f"conv_op: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
