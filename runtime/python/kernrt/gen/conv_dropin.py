"""Complete one-call conv manifests shaped exactly like one fla call (kernrt.ops' drop-ins).

Owns: `dropin_manifest`, which turns the shapes, strides and options of one
fla.modules.causal_conv1d call (`causal_conv1d` forward: kind "fwd"; `causal_conv1d_update`:
kind "update") into a complete schema-v4 manifest with one program `main` of one call. Its
buffers are exactly the call's tensors, so the caller binds them through
`rt.enqueue("main", bind={...})` (zero-copy) with these names and shapes:

    x              in   1-D [view_elements(x.shape, x.stride())] x's dtype: x as a flat view
                        from its first element (any batch/token strides, channel stride 1)
    weight         in   [D, W]          bias  in  [D]  (weight's dtype)
    y              out  fwd: [B, T, D]; update: [N, D]   (contiguous, as fla returns it)
    residual       in   like y, contiguous (fla's kernels read it so)
    cu_seqlens     in   [N + 1] i32 (fla passes int64: the caller converts)
    initial_state  in   [N, D, slots]   final_state  out  [N, D, slots]   (fwd)
    cache          carry [N, D, slots]  read and replaced in place (update)

slots = W for fla's layout (state_layout "fla", the default here), W-1 for ours. Vars
(exact maxima, no headroom): fwd `tokens` = T (or the packed total), `seqs` = B (or N);
update `seqs` = N. Module hashes are `@SHA256:<cubin>@` placeholders: kernrt.gen.pin them.

Does not check: that the tensors bound later match (the runtime checks bytes and
alignment; the drop-in checks shapes, dtypes and strides before calling), or anything the
profile does not refuse (conv.Profile's errors come through as GenError).
"""

from . import conv as g


def view_elements(shape, strides):
    """Elements a strided view spans from its first element: 1 + sum((n - 1) * stride)."""
    if len(shape) != len(strides):
        raise g.GenError(f"shape {list(shape)} and strides {list(strides)} differ in rank")
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def _buf(dtype, shape, kind):
    return {"dtype": dtype, "shape": list(shape), "kind": kind}


def _row_strides(kind, strides, dim):
    """(sequence stride, token stride) of x in elements, checked for the 16-byte rows the
    kernels load; `strides` as torch gives them (channel stride last, which must be 1)."""
    if strides[-1] != 1:
        raise g.GenError(f"x must have channel stride 1 (strides {list(strides)})")
    rows = strides[:-1]
    for s in rows:
        if s % g.CHANNELS or s < 0:
            raise g.GenError(f"x stride {s} must be a non-negative multiple of {g.CHANNELS} "
                             f"elements (16-byte aligned rows)")
    if kind == "fwd":
        return rows[0], rows[1]
    return rows[0], dim  # update: one token per sequence; the token stride is never used


def dropin_manifest(kind, *, batch, dim, width, tokens=1, dtype="bf16", weight="f32",
                    bias=False, act="silu", x_strides=None, residual=False,
                    initial_state=False, final_state=False, state_layout="fla",
                    varlen_seqs=None, fwd_kernel=None, span=None, update_kernel=None):
    """A complete manifest (dict) for one fla conv call; see the module docstring.

    kind "fwd": x [batch, tokens, dim] (varlen: batch 1 and varlen_seqs = N sequences
    packed along tokens); kind "update": x [batch, dim], one token per sequence, the cache
    [batch, dim, slots] updated in place. x_strides: the element strides of x as torch
    reports them for its 3-D (fwd) or 2-D (update) view (default contiguous)."""
    if kind not in ("fwd", "update"):
        raise g.GenError(f"drop-in kind `{kind}`: expected fwd or update")
    kw = {}
    if fwd_kernel is not None:
        kw["fwd_kernel"] = fwd_kernel
    if update_kernel is not None:
        kw["update_kernel"] = update_kernel
    elif state_layout == "fla":
        kw["update_kernel"] = g.FLA_UPDATE_KERNEL
    p = g.Profile(dim, width=width, dtype=dtype, weight=weight, bias=bias, act=act,
                  residual=residual, state_layout=state_layout, span=span, **kw)
    bufs = {}
    if kind == "fwd":
        varlen = varlen_seqs is not None
        if varlen and batch != 1:
            raise g.GenError(f"a varlen call packs its sequences in one row: batch must be 1, got {batch}")
        seqs = varlen_seqs if varlen else batch
        shape = (batch, tokens, dim)
        strides = tuple(x_strides) if x_strides is not None else (tokens * dim, dim, 1)
        xs, xt = _row_strides(kind, strides, dim)
        vars_ = {"tokens": {"max": tokens}, "seqs": {"max": seqs}}
        states = ([] if not initial_state else ["init"]) + ([] if not final_state else ["final"])
        op = g.fwd_op(p, x_strides=(xs, xt), y_strides=(tokens * dim, dim),
                      res_strides=(tokens * dim, dim), varlen=varlen, states=states)
        y_shape = [batch, tokens, dim]
    else:
        if initial_state or final_state or varlen_seqs is not None or tokens != 1:
            raise g.GenError("the update takes one token per sequence and its cache; no "
                             "initial/final state, cu_seqlens or tokens")
        seqs = batch
        shape = (batch, dim)
        strides = tuple(x_strides) if x_strides is not None else (dim, 1)
        xs, xt = _row_strides(kind, strides, dim)
        vars_ = {"seqs": {"max": seqs}}
        op = g.update_op(p, state="buffer", x_strides=(xs, xt), y_strides=(dim, dim),
                         res_strides=(dim, dim))
        y_shape = [batch, dim]
    bufs["x"] = _buf(dtype, [view_elements(shape, strides)], "input")
    bufs["weight"] = _buf(weight, [dim, width], "input")
    args = [{"buf": "x"}, {"buf": "weight"}]
    if bias:
        bufs["bias"] = _buf(weight, [dim], "input")
        args.append({"buf": "bias"})
    bufs["y"] = _buf(dtype, y_shape, "output")
    args.append({"buf": "y"})
    if residual:
        bufs["residual"] = _buf(dtype, y_shape, "input")
        args.append({"buf": "residual"})
    state_shape = [seqs, dim, p.slots]
    if kind == "fwd":
        if varlen_seqs is not None:
            bufs["cu_seqlens"] = _buf("i32", [seqs + 1], "input")
            args.append({"buf": "cu_seqlens"})
        if initial_state:
            bufs["initial_state"] = _buf(dtype, state_shape, "input")
            args.append({"buf": "initial_state"})
        if final_state:
            bufs["final_state"] = _buf(dtype, state_shape, "output")
            args.append({"buf": "final_state"})
    else:
        bufs["cache"] = _buf(dtype, state_shape, "carry")
        args.append({"buf": "cache"})
    ops = {kind: op}
    return {"schema_version": 4, "model": f"kernrt-conv-dropin-{kind}-{p.tag}",
            "vars": vars_, "buffers": bufs, "modules": g.modules_of(ops), "ops": ops,
            "programs": {"main": {"calls": [{"op": kind, "args": args}]}}}
