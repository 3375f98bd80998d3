"""Complete one-call conv manifests shaped exactly like one fla call (kernrt.ops' drop-ins).

Owns: `dropin_manifest`, which turns the shapes, strides and options of one
fla.modules.causal_conv1d call (`causal_conv1d` forward: kind "fwd"; `causal_conv1d_update`:
kind "update") into a complete schema-v4 manifest with one program `main` of one call. Its
buffers are exactly the call's tensors, so the caller binds them through
`rt.enqueue("main", bind={...})` (zero-copy) with these names and shapes:

    x              in   1-D [view_elements(x.shape, x.stride())] x's dtype: x as a flat view
                        from its first element (any batch/token strides that are multiples
                        of 8, channel stride 1); bind the tensor itself (kernrt's bind spans
                        a view from its first element to one past its last)
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


def _check_stride(s):
    if s < 0 or s % g.CHANNELS:
        raise g.GenError(f"x stride {s} must be a non-negative multiple of {g.CHANNELS} "
                         f"elements (16-byte aligned rows)")
    return s


def dropin_manifest(kind, batch, tokens, dim, width, dtype="bf16", weight="f32", bias=False,
                    act="silu", x_stride_seq=None, x_stride_tok=None, *, residual=False,
                    initial_state=False, final_state=False, state_layout="fla", varlen_seqs=None,
                    fwd_kernel=None, update_kernel=None):
    """A complete manifest (dict) for one fla conv call; see the module docstring.

    kind "fwd": x [batch, tokens, dim] with element strides (x_stride_seq, x_stride_tok, 1)
    (default contiguous; varlen: batch 1 and varlen_seqs = N sequences packed along
    tokens); kind "update": x [batch, dim] (tokens 1), x_stride_seq elements between
    sequences, the cache [batch, dim, slots] updated in place. act: "silu" / "swish" /
    "none" / None (fla's activation argument). The positional order is kernrt.ops.conv's
    call key: (kind, B, T, D, W, dtype, weight dtype, bias, act, x strides)."""
    if kind not in ("fwd", "update"):
        raise g.GenError(f"drop-in kind `{kind}`: expected fwd or update")
    act = {None: "none", "swish": "silu"}.get(act, act)
    kw = {}
    if fwd_kernel is not None:
        kw["fwd_kernel"] = fwd_kernel
    if update_kernel is not None:
        kw["update_kernel"] = update_kernel
    p = g.Profile(dim, width=width, dtype=dtype, weight=weight, bias=bias, act=act,
                  residual=residual, state_layout=state_layout, **kw)
    bufs = {}
    if kind == "fwd":
        varlen = varlen_seqs is not None
        if varlen and batch != 1:
            raise g.GenError(f"a varlen call packs its sequences in one row: batch must be 1, got {batch}")
        seqs = varlen_seqs if varlen else batch
        xt = _check_stride(dim if x_stride_tok is None else x_stride_tok)
        xs = _check_stride(tokens * xt if x_stride_seq is None else x_stride_seq)
        shape, strides = (batch, tokens, dim), (xs, xt, 1)
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
        xs = _check_stride(dim if x_stride_seq is None else x_stride_seq)
        shape, strides = (batch, dim), (xs, 1)
        vars_ = {"seqs": {"max": seqs}}
        op = g.update_op(p, state="buffer", x_strides=(xs, dim), y_strides=(dim, dim),
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
