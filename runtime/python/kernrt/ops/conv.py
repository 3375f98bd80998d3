"""fla-compatible causal conv1d drop-ins on kernrt's sm90 conv kernels.

    from kernrt.ops import causal_conv1d            # instead of fla.modules.convolution's
    y, final_state = causal_conv1d(x, weight, activation="silu")
    y, cache = causal_conv1d_update(x, cache, weight=weight, activation="silu")

Same signatures and returns as fla 0.6.0. A supported call runs through libkernrt: a
manifest generated for the call's shape (kernrt.gen.conv.dropin_manifest) is loaded once per
shape and cached, and the call binds the caller's tensors to its buffers (zero-copy) and
enqueues on torch's current stream, so it is capture-safe under torch.cuda.graph once the
shape is warm (warmup() or one eager call). Everything else is forwarded to fla verbatim with
the reason (is_supported says which): tensors that need a gradient (no backward here),
devices other than sm90, layouts the kernels cannot read, options kernrt lacks, an explicit
backend other than "triton", unknown keyword arguments, and a capture of a cold shape.
Does not check numerics (validation/conv compares with a float64 reference and fla).
"""
from .. import gen as _gen
from . import _dispatch

FAMILY = _dispatch.Family("conv", ("fla.modules.convolution", "fla.modules.causal_conv1d",
                                   "fla.modules.causal_conv1d.ops"))
_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16"}
_WEIGHT_DTYPES = {"torch.float32": "f32", "torch.bfloat16": "bf16"}
_ACTIVATIONS = {None: None, "silu": "silu", "swish": "silu"}
_FWD_KWARGS = {"cu_seqlens_cpu", "chunk_indices"}  # derived data fla accepts; no effect here


def _grad(*tensors):
    try:
        import torch
        if not torch.is_grad_enabled():
            return False
    except ImportError:
        pass
    return any(t is not None and getattr(t, "requires_grad", False) for t in tensors)


def _aligned(t):
    return t.data_ptr() % 16 == 0


def _capturing():
    try:
        import torch
        return torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


def _forward_spec(x, weight, bias, residual, initial_state, output_final_state, activation,
                  backend, cu_seqlens, cp_context, kwargs):
    """(spec, reason): spec is the manifest key when kernrt can run the call, else None."""
    if _dispatch.disabled():
        return None, "KERNRT_OPS_DISABLE is set"
    unknown = sorted(set(kwargs) - _FWD_KWARGS)
    if unknown:
        return None, f"unknown keyword argument `{unknown[0]}`"
    if backend not in (None, "triton"):
        return None, f"backend `{backend}` was asked for explicitly"
    if cp_context is not None:
        return None, "context parallel (cp_context) is not supported"
    if cu_seqlens is not None:
        return None, "packed sequences (cu_seqlens) are not supported by the drop-in yet"
    if initial_state is not None or output_final_state:
        return None, "conv states (initial_state / output_final_state) are not supported by the drop-in yet"
    if residual is not None:
        return None, "residual is not supported"
    if weight is None:
        return None, "weight is None"
    if _grad(x, weight, bias, residual):
        return None, "an input requires grad (kernrt has no backward)"
    ok, why = _dispatch.tensor_device_ok(x)
    if not ok:
        return None, why
    if activation not in _ACTIVATIONS:
        return None, f"activation `{activation}` is not supported"
    dtype = _DTYPES.get(str(x.dtype))
    if dtype is None:
        return None, f"x dtype {x.dtype} is not supported (bf16 or f16)"
    if len(x.shape) != 3:
        return None, f"x has {len(x.shape)} dims, expected [B, T, D]"
    B, T, D = (int(s) for s in x.shape)
    if B * T == 0:
        return None, "x is empty"
    if tuple(weight.shape[:1]) != (D,) or len(weight.shape) != 2:
        return None, f"weight shape {tuple(weight.shape)} is not [D={D}, W]"
    W = int(weight.shape[1])
    if not 2 <= W <= 4:
        return None, f"width W = {W} is not supported (2..4)"
    wdtype = _WEIGHT_DTYPES.get(str(weight.dtype))
    if wdtype is None:
        return None, f"weight dtype {weight.dtype} is not supported (f32 or bf16)"
    if bias is not None and (str(bias.dtype) != str(weight.dtype) or tuple(bias.shape) != (D,)):
        return None, "bias must be [D] in the weight's dtype"
    sb, st, sd = (int(s) for s in x.stride())
    if sd != 1 or D % 8 or st % 8 or sb % 8 or st < D or not _aligned(x):
        return None, "x must have unit channel stride, D and row strides multiples of 8, 16-byte alignment"
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (not t.is_cuda or not t.is_contiguous() or not _aligned(t)):
            return None, f"{name} must be a contiguous, 16-byte aligned CUDA tensor"
    spec = ("fwd", B, T, D, W, dtype, wdtype, bias is not None, _ACTIVATIONS[activation], sb, st,
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
    from ..gen import conv as gen_conv
    manifest = gen_conv.dropin_manifest(*spec[:-1])
    cubins = kernrt.cubin_dir()
    return kernrt.load(_gen.pin(manifest, cubins), cubins=[cubins], gpu=spec[-1])


def causal_conv1d(x, weight=None, bias=None, residual=None, initial_state=None,
                  output_final_state=False, activation=None, backend="triton", cu_seqlens=None,
                  cu_seqlens_cpu=None, chunk_indices=None, cp_context=None, **kwargs):
    """fla's causal_conv1d: y = act(conv(x, weight) + bias) over [B, T, D]; returns (y, None)."""
    extra = dict(kwargs, **_present(cu_seqlens_cpu=cu_seqlens_cpu, chunk_indices=chunk_indices))
    spec, why = _forward_spec(x, weight, bias, residual, initial_state, output_final_state,
                              activation, backend, cu_seqlens, cp_context, extra)
    if spec is not None and _capturing() and not FAMILY.cached(spec):
        spec, why = None, "a CUDA graph capture of a shape that has not run eagerly yet"
    if spec is None:
        return FAMILY.forward("causal_conv1d", why, x, weight=weight, bias=bias,
                              residual=residual, initial_state=initial_state,
                              output_final_state=output_final_state, activation=activation,
                              backend=backend, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
                              chunk_indices=chunk_indices, cp_context=cp_context, **kwargs)
    import torch
    rt = FAMILY.runtime(spec, lambda: _load(spec))
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    bind = {"x": x, "weight": weight, "y": y}
    if bias is not None:
        bind["bias"] = bias
    rt.enqueue("main", bind=bind)
    FAMILY.note("kernrt", f"causal_conv1d on sm90a, first shape B{spec[1]} T{spec[2]} D{spec[3]} W{spec[4]}")
    return y, None


def causal_conv1d_update(x, cache, residual=None, weight=None, bias=None, activation=None):
    """fla's causal_conv1d_update: one token per sequence against cache [N, D, W], updated
    in place; returns (y, cache). Forwarded to fla until the kernels read fla's cache layout."""
    return FAMILY.forward("causal_conv1d_update",
                          "fla's [N, D, W] cache layout is not supported by the drop-in yet",
                          x, cache, residual=residual, weight=weight, bias=bias,
                          activation=activation)


def warmup(B, T, D, W=4, dtype="bf16", weight_dtype="f32", bias=False, activation="silu",
           gpu=0):
    """Loads the runtime for a dense contiguous [B, T, D] call, so a later capture of that
    shape runs kernrt's kernels instead of forwarding."""
    spec = ("fwd", B, T, D, W, dtype, weight_dtype, bias, _ACTIVATIONS[activation], T * D, D, gpu)
    FAMILY.runtime(spec, lambda: _load(spec))
