"""The complete conv example manifests (examples/conv/*.json.in), written by conv_op.py.

Owns: `prefill_decode` (varlen prefill of 4 sequences writing pool lines, then two decode
steps), `prefill_verify` (prefill, then a 4-token verify that also writes the state after
every token to rollback lines) and `dense_strided` (a dense forward over a slice of a wider
f16 projection with bias, bf16 weight, no activation), each one program `main` for
program_io. Buffer and var sizes are small on purpose.

Does not check: the manifest rules (kernrt-verify does) or the calls' buffers (conv_check).
"""

from . import conv as g


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
    ops = {"prefill": g.prefill_op(p)}
    if verify_steps:
        bufs["xv"] = _buf(p.dtype, ["seqs", verify_steps, p.x_row], "input")
        bufs["yv"] = _buf(p.dtype, ["seqs", verify_steps, p.y_row], "output")
        bufs["step_lines"] = _buf("i32", [verify_steps, "seqs"], "input",
                                  domain={"index_into": "conv", "stride": p.line_bytes})
        ops["verify"] = g.update_op(p, steps=verify_steps, step_lines=True, max_seqs=max_seqs)
        calls.append({"label": "verify", "op": "verify", "args": [{"buf": "xv"}, args_head[1]] + args_head[2:] + [
            {"buf": "yv"}, {"state": "conv"}, {"buf": "lines"}, {"buf": "step_lines"}]})
    else:
        ops["decode"] = g.update_op(p)
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
            "modules": g.modules_of(ops),
            "ops": ops, "programs": {"main": {"calls": calls}}}


def example_dense(p, max_tokens=80, max_seqs=3, offset_elems=0):
    """Dense batch forward over a slice of a wider projection buffer (x row stride > D)."""
    bufs = {
        "proj": _buf(p.dtype, ["seqs", max_tokens, p.x_row], "input"),
        "weight": _buf(p.weight, [p.dim, p.width], "input"),
        "y": _buf(p.dtype, ["seqs", max_tokens, p.y_row], "output"),
    }
    args = [{"buf": "proj", "offset": offset_elems * g.ESIZE[p.dtype]}, {"buf": "weight"}]
    if p.bias:
        bufs["bias"] = _buf(p.weight, [p.dim], "input")
        args.append({"buf": "bias"})
    args.append({"buf": "y"})
    return {"schema_version": 4, "model": f"kernrt-conv-example-dense-{p.tag}",
            "vars": {"tokens": {"max": max_tokens}, "seqs": {"max": max_seqs}},
            "buffers": bufs, "modules": {"conv_fwd": g.MODULES["conv_fwd"]},
            "ops": {"fwd": g.fwd_dense_op(p, max_tokens)},
            "programs": {"main": {"calls": [{"op": "fwd", "args": args}]}}}


def examples():
    """name -> (manifest, description for examples/conv/make_inputs.py)."""
    a = g.Profile(512, x_row=512)
    b = g.Profile(256, width=3, dtype="f16", weight="bf16", bias=True, act="none", x_row=320)
    c = g.Profile(384, x_row=384)
    return {
        "prefill_decode": example_prefill_decode(a),
        "prefill_verify": example_prefill_decode(c, verify_steps=4),
        "dense_strided": example_dense(b, offset_elems=32),
    }
