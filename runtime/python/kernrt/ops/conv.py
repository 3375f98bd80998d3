"""fla-compatible causal conv1d drop-ins on kernrt's sm90 conv kernels.

    from kernrt.ops import causal_conv1d            # instead of fla.modules.convolution's
    y, final_state = causal_conv1d(x, weight, activation="silu")
    y, cache = causal_conv1d_update(x, cache, weight=weight, activation="silu")

Same signatures and returns as fla 0.6.0. A supported call runs through libkernrt: a
manifest generated for the call's shape (kernrt.gen.conv_dropin.dropin_manifest) is loaded
once per shape and cached, and the call binds the caller's tensors to its buffers (zero-copy)
and enqueues on torch's current stream, so it is capture-safe under torch.cuda.graph once the
shape is warm (warmup() or one eager call). Supported: x [B, T, D] bf16/f16 (channel stride 1,
row strides multiples of 8), weight [D, W] f32/bf16 with W 2..4, optional bias, residual
[B, T, D], initial_state / output_final_state in fla's [N, D, W] layout, cu_seqlens with
B = 1 (fla's int64 is converted), silu/swish or no activation; the update over fla's
[N, D, W] cache in place with x [N, D], [N, 1, D] or [1, N, D] (UPDATE_PREFERS_FLA can send
a supported update to fla instead). Everything else is forwarded
to fla verbatim with the reason (is_supported says which): tensors that need a gradient (no
backward here), devices other than sm90, layouts the kernels cannot read, an explicit backend
other than "triton", context parallel, unknown keyword arguments, and a capture of a cold
shape. Does not check numerics (validation/conv compares with a float64 reference and fla).
"""
from .. import gen as _gen
from . import _dispatch

FAMILY = _dispatch.Family("conv", ("fla.modules.convolution", "fla.modules.causal_conv1d",
                                   "fla.modules.causal_conv1d.ops"))
_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16"}
_WEIGHT_DTYPES = {"torch.float32": "f32", "torch.bfloat16": "bf16"}
_ACTIVATIONS = {None: None, "silu": "silu", "swish": "silu"}
_FWD_KWARGS = {"cu_seqlens_cpu", "chunk_indices"}  # derived data fla accepts; no effect here
# True: a supported update goes to fla when fla is installed. kernrt's update over fla's
# [N, D, W] cache (c4p) ran 2.22 us where fla's ran 3.07 at B64 D4096, and 11.78 where fla's
# ran 11.97 at B256 D8192 (H200, one run, per call in a 64-call graph; validation/conv
# notes.md), so kernrt's kernel runs. Tests set it to False to exercise kernrt's kernel.
UPDATE_PREFERS_FLA = False


_grad = _dispatch.needs_grad
_aligned = _dispatch.aligned16
_capturing = _dispatch.capturing


def _contiguous_cuda(name, t, shape, dtype=None):
    """'' when t is a contiguous, aligned CUDA tensor of `shape` (and dtype), else the reason."""
    if tuple(t.shape) != tuple(shape):
        return f"{name} shape {tuple(t.shape)} is not {tuple(shape)}"
    if dtype is not None and str(t.dtype) != dtype:
        return f"{name} dtype {t.dtype} is not {dtype}"
    if not t.is_cuda or not t.is_contiguous() or not _aligned(t):
        return f"{name} must be a contiguous, 16-byte aligned CUDA tensor"
    return ""


def _common(x, weight, bias, activation, kwargs, allowed=()):
    """(D, W, dtype, wdtype, reason) for what both drop-ins share."""
    if _dispatch.disabled():
        return None, None, None, None, "KERNRT_OPS_DISABLE is set"
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        return None, None, None, None, f"unknown keyword argument `{unknown[0]}`"
    if weight is None:
        return None, None, None, None, "weight is None"
    ok, why = _dispatch.tensor_device_ok(x)
    if not ok:
        return None, None, None, None, why
    if activation not in _ACTIVATIONS:
        return None, None, None, None, f"activation `{activation}` is not supported"
    dtype = _DTYPES.get(str(x.dtype))
    if dtype is None:
        return None, None, None, None, f"x dtype {x.dtype} is not supported (bf16 or f16)"
    D = int(x.shape[-1])
    if len(weight.shape) != 2 or int(weight.shape[0]) != D:
        return None, None, None, None, f"weight shape {tuple(weight.shape)} is not [D={D}, W]"
    W = int(weight.shape[1])
    if not 2 <= W <= 4:
        return None, None, None, None, f"width W = {W} is not supported (2..4)"
    wdtype = _WEIGHT_DTYPES.get(str(weight.dtype))
    if wdtype is None:
        return None, None, None, None, f"weight dtype {weight.dtype} is not supported (f32 or bf16)"
    if bias is not None and (str(bias.dtype) != str(weight.dtype) or tuple(bias.shape) != (D,)):
        return None, None, None, None, "bias must be [D] in the weight's dtype"
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (not t.is_cuda or not t.is_contiguous() or not _aligned(t)):
            return None, None, None, None, f"{name} must be a contiguous, 16-byte aligned CUDA tensor"
    if D % 8:
        return None, None, None, None, f"D = {D} is not a multiple of 8"
    return D, W, dtype, wdtype, ""


def _forward_spec(x, weight, bias, residual, initial_state, output_final_state, activation,
                  backend, cu_seqlens, cp_context, kwargs):
    """(spec, reason): spec is the manifest key when kernrt can run the call, else None."""
    D, W, dtype, wdtype, why = _common(x, weight, bias, activation, kwargs, _FWD_KWARGS)
    if why:
        return None, why
    if backend not in (None, "triton"):
        return None, f"backend `{backend}` was asked for explicitly"
    if cp_context is not None:
        return None, "context parallel (cp_context) is not supported"
    if _grad(x, weight, bias, residual, initial_state):
        return None, "an input requires grad (kernrt has no backward)"
    if len(x.shape) != 3:
        return None, f"x has {len(x.shape)} dims, expected [B, T, D]"
    B, T, _ = (int(s) for s in x.shape)
    if B * T == 0:
        return None, "x is empty"
    sb, st, sd = (int(s) for s in x.stride())
    if sd != 1 or st % 8 or sb % 8 or st < D or not _aligned(x):
        return None, "x must have unit channel stride, D and row strides multiples of 8, 16-byte alignment"
    seqs = B
    if cu_seqlens is not None:
        if B != 1:
            return None, "cu_seqlens needs x of batch 1"
        if str(cu_seqlens.dtype) not in ("torch.int32", "torch.int64") or len(cu_seqlens.shape) != 1:
            return None, "cu_seqlens must be a 1-D int32 or int64 tensor"
        seqs = int(cu_seqlens.shape[0]) - 1
        if seqs < 1:
            return None, "cu_seqlens holds no sequence"
    if residual is not None:
        why = _contiguous_cuda("residual", residual, (B, T, D), str(x.dtype))
        if why:
            return None, why
    if initial_state is not None:
        why = _contiguous_cuda("initial_state", initial_state, (seqs, D, W), str(x.dtype))
        if why:
            return None, why + " (fla's [N, D, W] layout in x's dtype)"
    spec = (("fwd", B, T, D, W, dtype, wdtype, bias is not None, _ACTIVATIONS[activation], sb, st),
            (("residual", residual is not None), ("initial_state", initial_state is not None),
             ("final_state", bool(output_final_state)),
             ("varlen_seqs", seqs if cu_seqlens is not None else None)),
            x.device.index or 0)
    return spec, ""


def is_supported(x, weight=None, bias=None, residual=None, initial_state=None,
                 output_final_state=False, activation=None, backend="triton", cu_seqlens=None,
                 cu_seqlens_cpu=None, chunk_indices=None, cp_context=None, **kwargs):
    """(ok, reason) for a causal_conv1d call: reason says why it would go to fla ("" if ok)."""
    spec, why = _forward_spec(x, weight, bias, residual, initial_state, output_final_state,
                              activation, backend, cu_seqlens, cp_context,
                              dict(kwargs, **_present(cu_seqlens_cpu=cu_seqlens_cpu,
                                                      chunk_indices=chunk_indices)))
    return spec is not None, why


def _present(**kw):
    return {k: v for k, v in kw.items() if v is not None}


def _load(spec):
    import kernrt
    from ..gen import conv as gen_conv  # conv re-exports conv_dropin's builder (import order)
    positional, keywords, gpu = spec
    manifest = gen_conv.dropin_manifest(*positional, **dict(keywords))
    cubins = kernrt.cubin_dir()
    return kernrt.load(_gen.pin(manifest, cubins), cubins=[cubins], gpu=gpu)


def _runtime_or_reason(spec, why):
    """The warm runtime for spec, or (None, reason) when a cold shape is being captured."""
    if spec is not None and _capturing() and not FAMILY.cached(spec):
        return None, "a CUDA graph capture of a shape that has not run eagerly yet"
    if spec is None:
        return None, why
    return FAMILY.runtime(spec, lambda: _load(spec)), ""


def causal_conv1d(x, weight=None, bias=None, residual=None, initial_state=None,
                  output_final_state=False, activation=None, backend="triton", cu_seqlens=None,
                  cu_seqlens_cpu=None, chunk_indices=None, cp_context=None, **kwargs):
    """fla's causal_conv1d: y = act(conv(x, weight) + bias) (+ residual) over [B, T, D];
    returns (y, final_state or None)."""
    extra = dict(kwargs, **_present(cu_seqlens_cpu=cu_seqlens_cpu, chunk_indices=chunk_indices))
    spec, why = _forward_spec(x, weight, bias, residual, initial_state, output_final_state,
                              activation, backend, cu_seqlens, cp_context, extra)
    rt, why = _runtime_or_reason(spec, why)
    if rt is None:
        return FAMILY.forward("causal_conv1d", why, x, weight=weight, bias=bias,
                              residual=residual, initial_state=initial_state,
                              output_final_state=output_final_state, activation=activation,
                              backend=backend, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
                              chunk_indices=chunk_indices, cp_context=cp_context, **kwargs)
    import torch
    B, T, D, W = spec[0][1], spec[0][2], spec[0][3], spec[0][4]
    y = torch.empty((B, T, D), dtype=x.dtype, device=x.device)
    bind = {"x": x, "weight": weight, "y": y}
    if bias is not None:
        bind["bias"] = bias
    if residual is not None:
        bind["residual"] = residual
    if cu_seqlens is not None:
        bind["cu_seqlens"] = cu_seqlens.to(torch.int32)
    if initial_state is not None:
        bind["initial_state"] = initial_state
    seqs = dict(spec[1])["varlen_seqs"] or B
    final_state = None
    if output_final_state:
        final_state = torch.empty((seqs, D, W), dtype=x.dtype, device=x.device)
        bind["final_state"] = final_state
    rt.enqueue("main", bind=bind, tokens=T, seqs=seqs)  # the manifest's maxima: the call's shape
    FAMILY.note("kernrt", f"causal_conv1d on sm90a, first shape B{B} T{T} D{D} W{W}")
    return y, final_state


def _update_spec(x, cache, residual, weight, bias, activation):
    D, W, dtype, wdtype, why = _common(x, weight, bias, activation, {})
    if why:
        return None, why, None
    if _grad(x, cache, residual, weight, bias):
        return None, "an input requires grad (kernrt has no backward)", None
    shape = tuple(int(s) for s in x.shape)
    if len(shape) == 2:
        N, sn = shape[0], int(x.stride(0))
    elif len(shape) == 3 and shape[0] == 1:
        N, sn = shape[1], int(x.stride(1))
    elif len(shape) == 3 and shape[1] == 1:
        N, sn = shape[0], int(x.stride(0))
    else:
        return None, f"x shape {shape} is not [N, D], [1, N, D] or [N, 1, D]", None
    if int(x.stride(-1)) != 1 or sn % 8 or not _aligned(x):
        return None, "x must have unit channel stride, a row stride multiple of 8, 16-byte alignment", None
    why = _contiguous_cuda("cache", cache, (N, D, W), str(x.dtype))
    if why:
        return None, why + " (fla's [N, D, W] cache in x's dtype)", None
    if residual is not None:
        if tuple(residual.shape) != shape:
            return None, f"residual shape {tuple(residual.shape)} is not x's {shape}", None
        why = _contiguous_cuda("residual", residual, shape, str(x.dtype))
        if why:
            return None, why, None
    spec = (("update", N, 1, D, W, dtype, wdtype, bias is not None, _ACTIVATIONS[activation], sn, None),
            (("residual", residual is not None),), x.device.index or 0)
    return spec, "", shape


def update_is_supported(x, cache, residual=None, weight=None, bias=None, activation=None):
    """(ok, reason) for a causal_conv1d_update call."""
    spec, why, _ = _update_spec(x, cache, residual, weight, bias, activation)
    return spec is not None, why


def causal_conv1d_update(x, cache, residual=None, weight=None, bias=None, activation=None):
    """fla's causal_conv1d_update: one token per sequence against fla's cache [N, D, W],
    updated in place; returns (y shaped like x, cache)."""
    spec, why, shape = _update_spec(x, cache, residual, weight, bias, activation)
    if spec is not None and UPDATE_PREFERS_FLA and FAMILY.fla_function("causal_conv1d_update"):
        spec, why = None, "kernrt.ops.conv.UPDATE_PREFERS_FLA is set: fla's update runs"
    rt, why = _runtime_or_reason(spec, why)
    if rt is None:
        return FAMILY.forward("causal_conv1d_update", why, x, cache, residual=residual,
                              weight=weight, bias=bias, activation=activation)
    import torch
    N, D = spec[0][1], spec[0][3]
    y = torch.empty((N, D), dtype=x.dtype, device=x.device)
    bind = {"x": x, "weight": weight, "y": y, "cache": cache}
    if bias is not None:
        bind["bias"] = bias
    if residual is not None:
        bind["residual"] = residual
    rt.enqueue("main", bind=bind, seqs=N)
    FAMILY.note("kernrt", f"causal_conv1d_update on sm90a, first shape N{N} D{D} W{spec[0][4]}")
    return y.view(shape), cache


def warmup(B, T, D, W=4, dtype="bf16", weight_dtype="f32", bias=False, activation="silu", gpu=0):
    """Loads the runtime for a dense contiguous [B, T, D] forward call (no states, residual
    or cu_seqlens), so a later capture of that shape runs kernrt's kernels."""
    spec = (("fwd", B, T, D, W, dtype, weight_dtype, bias, _ACTIVATIONS[activation], T * D, D),
            (("residual", False), ("initial_state", False), ("final_state", False),
             ("varlen_seqs", None)), gpu)
    FAMILY.runtime(spec, lambda: _load(spec))
