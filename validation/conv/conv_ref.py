"""Float64 reference of causal conv1d (forward and decode update), independent of any kernel.

Owns the math of kernels/conv/README.md: z[t] = bias + sum_j w[:, j] * x~[t - (W-1) + j],
y = silu(z) or z, plus the residual row when there is one (fla's order: act first); x~
before a sequence start comes from its initial state [D, W-1] (slot W-2 newest) or zeros;
the final state is the last W-1 inputs (with initial-state entries when a sequence is
shorter than W-1). fla's [D, W] lines convert with `to_fla` / `from_fla`. Computes in
float64 on whatever device the inputs are on.
Does not model rounding of the output: callers round with `round_like`.
"""
import torch


def _act(z, silu):
    return z * torch.sigmoid(z) if silu else z


def conv_seq(x, weight, bias, silu, init):
    """x [T, D] -> (z-activated [T, D] f64, final state [D, W-1] f64). init [D, W-1] or None."""
    T, D = x.shape
    W = weight.shape[1]
    w = weight.double()
    x = x.double()
    head = init.double().t() if init is not None else torch.zeros(W - 1, D, dtype=torch.float64,
                                                                  device=x.device)
    xp = torch.cat([head, x], 0)  # [T + W - 1, D]
    z = torch.zeros(T, D, dtype=torch.float64, device=x.device)
    if bias is not None:
        z += bias.double()
    for j in range(W):
        z += w[:, j] * xp[j:j + T]
    final = xp[T:T + W - 1].t().contiguous() if W > 1 else None
    return _act(z, silu), final


def to_fla(lines, before=None):
    """Our [.., D, W-1] lines as fla's [.., D, W]: slot 0 (the input before the window) from
    `before` [.., D] (what the sequence saw W steps back), or zeros."""
    head = torch.zeros_like(lines[..., :1]) if before is None else before.unsqueeze(-1).to(lines.dtype)
    return torch.cat([head, lines], -1)


def from_fla(full):
    """fla's [.., D, W] lines as ours: the W-1 newest slots."""
    return full[..., 1:]


def fwd_full(x, weight, bias=None, silu=True, init_full=None, cu_seqlens=None, residual=None):
    """Like `fwd`, with fla's [N, D, W] states: returns (y f64, final [N, D, W] f64) where
    slot 0 of the final state is x~[T_n - W] (an x row, an initial slot, or zero)."""
    init = None if init_full is None else from_fla(init_full)
    y, final = fwd(x, weight, bias, silu, init, cu_seqlens, residual)
    B, T, D = x.shape
    W = weight.shape[1]
    cu = [b * T for b in range(B + 1)] if cu_seqlens is None else cu_seqlens.tolist()
    flat = x.reshape(-1, D).double()
    heads = []
    for n in range(len(cu) - 1):
        s, e = cu[n], cu[n + 1]
        r = e - W  # x~[r], r relative to the packed rows
        if r >= s:
            heads.append(flat[r])
        elif init_full is not None:
            heads.append(init_full[n, :, W + r - s].double())
        else:
            heads.append(torch.zeros(D, dtype=torch.float64, device=x.device))
    return y, torch.cat([torch.stack(heads).unsqueeze(-1), final], -1)


def fwd(x, weight, bias=None, silu=True, init_states=None, cu_seqlens=None, residual=None):
    """x [B, T, D]; init_states [N, D, W-1] or None; residual [B, T, D] or None.
    Returns (y f64 [B, T, D], final [N, D, W-1])."""
    B, T, D = x.shape
    y = torch.empty(B, T, D, dtype=torch.float64, device=x.device)
    finals = []
    if cu_seqlens is None:
        for b in range(B):
            y[b], f = conv_seq(x[b], weight, bias, silu, None if init_states is None else init_states[b])
            finals.append(f)
    else:
        cu = cu_seqlens.tolist()
        for n in range(len(cu) - 1):
            s, e = cu[n], cu[n + 1]
            y[0, s:e], f = conv_seq(x[0, s:e], weight, bias, silu,
                                    None if init_states is None else init_states[n])
            finals.append(f)
    if residual is not None:
        y += residual.double()
    return y, torch.stack(finals)


def update(x, weight, states, bias=None, silu=True, residual=None):
    """x [N, steps, D], states [N, D, W-1], residual like x or None -> (y f64 [N, steps, D],
    new states, per-step states [steps, N, D, W-1])."""
    N, steps, D = x.shape
    y = torch.empty(N, steps, D, dtype=torch.float64, device=x.device)
    new, per_step = [], []
    for n in range(N):
        y[n], f = conv_seq(x[n], weight, bias, silu, states[n])
        if residual is not None:
            y[n] += residual[n].double()
        new.append(f)
        per_step.append(torch.stack([conv_seq(x[n, :s + 1], weight, bias, silu, states[n])[1]
                                     for s in range(steps)]))
    return y, torch.stack(new), torch.stack(per_step, 1)


def round_like(ref64, dtype):
    """The correctly rounded answer in the output dtype, back in f64."""
    return ref64.to(dtype).double()


def rel_rms(got, ref_rounded, ref64):
    """rms(got - ref_rounded) / rms(ref64); NaN (poison left in place) counts as failure."""
    d = got.double() - ref_rounded
    den = ref64.pow(2).mean().sqrt().item()
    err = d.pow(2).mean().sqrt().item() / max(den, 1e-30)
    return err if err == err else float("inf")
