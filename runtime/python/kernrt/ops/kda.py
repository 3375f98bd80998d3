"""fla-compatible KDA drop-ins on kernrt's sm90 kda kernels.

    from kernrt.ops import kda
    o, ht = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                          use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                          A_log=A_log, dt_bias=dt_bias)
    o, ht = kda.fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, initial_state=h0,
                                    output_final_state=True, use_qk_l2norm_in_kernel=True,
                                    use_gate_in_kernel=True)

Same signatures and returns as fla 0.6.0 (fla.ops.kda). A supported call runs through
libkernrt: a manifest generated for the call's exact shape (kernrt.gen.kda) is loaded once
and cached, the caller's tensors are bound to its buffers (zero-copy) and the program is
enqueued on torch's current stream (capture-safe under torch.cuda.graph once the shape ran
eagerly). States cross in fla's [N, HV, K, V] layout by default (transposed copies in and
out) and as they are with state_v_first=True (our [N, HV, V, K]). fused_recurrent_kda runs the
decode kernel for T = 1 and the chunked prefill otherwise (the same recurrence): the 64-token
chunk kernels where they serve the call (kernrt.gen.kda_prefill64: bf16 g for KDA, the
in-kernel gate and l2norm), else the 16-token kernel; long sequences with few heads run
either in its context-parallel mode.
Forwarded to fla verbatim, with the reason (is_supported says which): tensors that need a
gradient, devices other than sm90, K != 128, V not 128 / 256, HV not a multiple of H, dtypes
other than bf16 q/k/v and bf16/f32 g/beta, non-contiguous tensors, head-wise beta, context
parallel, intermediate states, unknown keyword arguments, a capture of a cold shape.
Does not check numerics (validation/kda compares with a float64 reference and fla).
"""
from .. import gen as _gen
from ..gen import kda as _gk
from ..gen import kda_prefill64 as _prefill64
from ..gen.kda_cp_plan import plan as _cp_plan
from . import _dispatch

FAMILY = _dispatch.Family("kda", ("fla.ops.kda",))
_G_DTYPES = {"torch.bfloat16": "bf16", "torch.float32": "f32"}
_KNOWN = {"A_log", "dt_bias", "chunk_size", "transpose_state_layout"}
SMS = 132  # H200 streaming multiprocessors: the context-parallel split fills them


_grad = _dispatch.needs_grad
_capturing = _dispatch.capturing


def _spec(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state, l2norm,
          gate_in_kernel, beta_sigmoid, neg_eigval, lower_bound, state_v_first, cu_seqlens,
          cu_seqlens_cpu, kwargs, step):
    """(spec, reason): spec keys the manifest when kernrt can run the call, else None."""
    if _dispatch.disabled():
        return None, "KERNRT_OPS_DISABLE is set"
    unknown = sorted(set(kwargs) - _KNOWN)
    if unknown:
        return None, f"unknown keyword argument `{unknown[0]}`"
    if _grad(q, k, v, g, beta, A_log, dt_bias, initial_state):
        return None, "an input requires grad (kernrt has no backward)"
    ok, why = _dispatch.tensor_device_ok(q)
    if not ok:
        return None, why
    if len(q.shape) != 4 or tuple(k.shape) != tuple(q.shape) or len(v.shape) != 4:
        return None, "q, k must be [B, T, H, K] and v [B, T, HV, V]"
    B, T, H, Kd = (int(s) for s in q.shape)
    HV, V = int(v.shape[2]), int(v.shape[3])
    if Kd != _gk.K:
        return None, f"K = {Kd} is not supported (the kernels are built for K = 128)"
    if V not in (128, 256):
        return None, f"V = {V} is not supported (128 or 256)"
    if HV % H:
        return None, f"HV = {HV} is not a multiple of H = {H}"
    if any(str(t.dtype) != "torch.bfloat16" for t in (q, k, v)):
        return None, "q, k, v must be bf16"
    kind = "kda"
    if tuple(g.shape) != (B, T, HV, Kd):
        return None, f"g shape {tuple(g.shape)} is not [B, T, HV, K]"
    if tuple(beta.shape) != (B, T, HV):
        return None, f"beta shape {tuple(beta.shape)} is not [B, T, HV] (head-wise beta is not supported)"
    gd, bd = _G_DTYPES.get(str(g.dtype)), _G_DTYPES.get(str(beta.dtype))
    if gd is None or bd is None:
        return None, "g and beta must be bf16 or f32"
    if neg_eigval and not beta_sigmoid:
        return None, "allow_neg_eigval needs use_beta_sigmoid_in_kernel"
    gate = None
    if gate_in_kernel:
        gate = "lower_bound" if lower_bound is not None else "softplus"
        if A_log is None and lower_bound is None:
            return None, "use_gate_in_kernel needs A_log (or lower_bound)"
        for name, t, shape in (("A_log", A_log, (HV,)), ("dt_bias", dt_bias, (HV * Kd,))):
            if t is not None and (str(t.dtype) != "torch.float32" or tuple(t.shape) != shape
                                  or not t.is_contiguous()):
                return None, f"{name} must be a contiguous f32 tensor of shape {list(shape)}"
        if lower_bound is not None and not lower_bound < 0:
            return None, f"lower_bound = {lower_bound} must be negative"
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        if not t.is_contiguous() or t.data_ptr() % 16:
            return None, f"{name} must be contiguous and 16-byte aligned"
    N = B
    varlen = cu_seqlens is not None
    lens = None
    if varlen:
        if B != 1:
            return None, f"with cu_seqlens B must be 1, got {B}"
        if cu_seqlens_cpu is None and _capturing():
            return None, "a CUDA graph capture of packed sequences needs cu_seqlens_cpu"
        cu = cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens.cpu()
        lens = [int(b) - int(a) for a, b in zip(cu.tolist()[:-1], cu.tolist()[1:])]
        N = len(lens)
    if initial_state is not None:
        want = (N, HV, V, Kd) if state_v_first else (N, HV, Kd, V)
        if str(initial_state.dtype) != "torch.float32" or tuple(initial_state.shape) != want:
            return None, f"initial_state must be f32 {list(want)}"
    cp = seg = 0
    longest = max(lens) if lens else T
    tiles = N * HV * (V // 128)
    if not step and tiles < SMS and longest >= 4096:  # context parallel where tiles leave SMs idle
        prof = _gk.Profile(kind, heads=H, value_heads=HV, dim_v=V, g=gd, beta=bd, gate=gate,
                           lower_bound=None if lower_bound is None else float(lower_bound),
                           beta_sigmoid=bool(beta_sigmoid), neg_eigval=bool(neg_eigval),
                           l2norm=bool(l2norm))
        if _prefill64.unsupported(prof) is None:  # the 64-token kernels (chunk auto): their plan,
            # keyed by the longest sequence so packed calls hit the plan's cache (a miss costs
            # ~0.1 s of Python; KDA's context parallel is exact for any segments, GDN's
            # decay-bounded: kernrt.gen.kda_prefill64.launches)
            cp, seg = _cp_plan((-(-longest // 64),) * N, HV, V // 128, SMS, bounded=kind == "gdn")
            seg *= 4  # 16-token chunks, whole 64-token ones
        else:  # c16: about two blocks a multiprocessor, segments of >= 1024 tokens
            cp = min(16, max(2, -(-2 * SMS // tiles)), longest // 1024)
            seg = 4 * -(-longest // (cp * 64))
    a_log_none = A_log is None
    spec = (kind, B, T, H, HV, V, gd, bd, gate, None if lower_bound is None else float(lower_bound),
            bool(beta_sigmoid), bool(neg_eigval), bool(l2norm),
            float(Kd ** -0.5 if scale is None else scale), initial_state is not None,
            bool(output_final_state), varlen, N, cp, seg, dt_bias is None, a_log_none,
            bool(step), q.device.index or 0)
    return spec, ""


def _load(spec):
    import kernrt
    gk = _gk
    (kind, B, T, H, HV, V, gd, bd, gate, lb, bsig, neg, l2, scale, init, final, varlen, N, cp,
     seg, _, _, step, gpu) = spec
    p = gk.Profile(kind, heads=H, value_heads=HV, dim_v=V, g=gd, beta=bd, gate=gate,
                   lower_bound=lb, beta_sigmoid=bsig, neg_eigval=neg, l2norm=l2, scale=scale)
    if step:
        m = gk.dense_decode_manifest(p, B)
    elif varlen:
        m = gk.varlen_prefill_manifest(p, T, N, init=init, final=True, cp_segs=cp, seg_chunks=seg)
    else:
        m = gk.dense_prefill_manifest(p, B, T, init=init, final=True, cp_segs=cp, seg_chunks=seg)
    cubins = kernrt.cubin_dir()
    return kernrt.load(_gen.pin(m, cubins), cubins=[cubins], gpu=gpu)


def _run(spec, q, k, v, g, beta, A_log, dt_bias, initial_state, output_final_state,
         state_v_first, cu_seqlens):
    import torch
    rt = FAMILY.runtime(spec, lambda: _load(spec))
    B, T, HV, V, N, step = spec[1], spec[2], spec[4], spec[5], spec[17], spec[22]
    K = q.shape[-1]
    o = torch.empty_like(v)
    ht = torch.empty(N, HV, V, K, dtype=torch.float32, device=q.device)
    h0 = initial_state
    if h0 is not None and not state_v_first:
        h0 = h0.transpose(-1, -2).contiguous()
    if step:
        if h0 is None:
            h0 = torch.zeros_like(ht)
        bind = {"dec_q": q[:, 0], "dec_k": k[:, 0], "dec_v": v[:, 0], "dec_g": g[:, 0],
                "dec_beta": beta[:, 0], "dec_o": o[:, 0], "h0": h0, "ht": ht}
        program, vars_ = "decode", {"seqs": B}
    else:
        lead = (lambda x: x[0]) if cu_seqlens is not None else (lambda x: x)
        bind = {"q": lead(q), "k": lead(k), "v": lead(v), "g": lead(g), "beta": lead(beta),
                "o": lead(o), "ht": ht}
        if h0 is not None:
            bind["h0"] = h0
        if cu_seqlens is not None:
            bind["cu_seqlens"] = cu_seqlens.to(torch.int32)
        program, vars_ = "prefill", {"seqs": N, "tokens": T}
    if A_log is not None and spec[8] is not None:
        bind["A_log"] = A_log
    if spec[8] is not None:
        bind["dt_bias"] = dt_bias if dt_bias is not None else torch.zeros(
            HV * K, dtype=torch.float32, device=q.device)
        if A_log is None:
            bind["A_log"] = torch.zeros(HV, dtype=torch.float32, device=q.device)
    rt.enqueue(program, bind=bind, vars=vars_)
    if not output_final_state:
        return o, None
    return o, (ht if state_v_first else ht.transpose(-1, -2).contiguous())


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
              use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, safe_gate=False,
              lower_bound=None, disable_recompute=False, return_intermediate_states=False,
              state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, cp_context=None,
              use_graph=False, max_num_seqs=None, **kwargs):
    """fla's chunk_kda (forward): returns (o, final_state or None)."""
    args = (q, k, v, g, beta)
    fwd = dict(scale=scale, initial_state=initial_state, output_final_state=output_final_state,
               use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
               use_gate_in_kernel=use_gate_in_kernel,
               use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
               allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, lower_bound=lower_bound,
               disable_recompute=disable_recompute,
               return_intermediate_states=return_intermediate_states,
               state_v_first=state_v_first, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
               cp_context=cp_context, use_graph=use_graph, max_num_seqs=max_num_seqs, **kwargs)
    svf = state_v_first or bool(kwargs.get("transpose_state_layout", False))
    spec, why = None, ""
    if cp_context is not None:
        why = "context parallel (cp_context) is not supported"
    elif return_intermediate_states:
        why = "return_intermediate_states is not supported"
    elif kwargs.get("chunk_size", 64) not in (32, 64):
        why = f"chunk_size {kwargs.get('chunk_size')} is not 32 or 64"
    else:
        spec, why = _spec(q, k, v, g, beta, kwargs.get("A_log"), kwargs.get("dt_bias"), scale,
                          initial_state, output_final_state, use_qk_l2norm_in_kernel,
                          use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                          lower_bound, svf, cu_seqlens, cu_seqlens_cpu, kwargs, step=False)
    if spec is not None and _capturing() and not FAMILY.cached(spec):
        spec, why = None, "a CUDA graph capture of a shape that has not run eagerly yet"
    if spec is None:
        return FAMILY.forward("chunk_kda", why, *args, **fwd)
    FAMILY.note("kernrt", f"chunk_kda on sm90a, first shape B{spec[1]} T{spec[2]} HV{spec[4]} V{spec[5]}")
    return _run(spec, q, k, v, g, beta, kwargs.get("A_log"), kwargs.get("dt_bias"), initial_state,
                output_final_state, svf, cu_seqlens)


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None,
                        initial_state=None, output_final_state=False,
                        use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                        lower_bound=None, state_v_first=False, cu_seqlens=None, **kwargs):
    """fla's fused_recurrent_kda (forward only): returns (o, final_state or None)."""
    args = (q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state,
            use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel,
            allow_neg_eigval, lower_bound, state_v_first, cu_seqlens)
    step = len(q.shape) == 4 and int(q.shape[1]) == 1 and cu_seqlens is None
    spec, why = _spec(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state,
                      use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel,
                      allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, None,
                      {k_: v_ for k_, v_ in kwargs.items()}, step=step)
    if spec is not None and _capturing() and not FAMILY.cached(spec):
        spec, why = None, "a CUDA graph capture of a shape that has not run eagerly yet"
    if spec is None:
        return FAMILY.forward("fused_recurrent_kda", why, *args, **kwargs)
    FAMILY.note("kernrt", f"fused_recurrent_kda on sm90a, first shape B{spec[1]} T{spec[2]}")
    return _run(spec, q, k, v, g, beta, A_log, dt_bias, initial_state, output_final_state,
                state_v_first, cu_seqlens)


def is_supported(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                 use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                 use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                 state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, **kwargs):
    """(ok, reason) for a chunk_kda call: reason says why it would go to fla ("" if ok)."""
    spec, why = _spec(q, k, v, g, beta, kwargs.get("A_log"), kwargs.get("dt_bias"), scale,
                      initial_state, output_final_state, use_qk_l2norm_in_kernel,
                      use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                      lower_bound, state_v_first, cu_seqlens, cu_seqlens_cpu, kwargs, step=False)
    return spec is not None, why
