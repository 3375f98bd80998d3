"""Manifest of the KDA 64-token chunk's state step alone (kernels/kda/kda_chunk64_state.cu,
kernels/kda/chunk64.md step 1): a design entry checked against validation/kda/chunk64_model.py
by validation/kda/check_chunk64.py. Not a serving op: no profile options, no pool.

Owns: the op over the entry `kda_chunk64_state_sm90a_f16_k128` (its pack: kernels/kda/
chunk64_params.h Chunk64StateParams) and a manifest with one program `state64` over
contiguous buffers (N = the `seqs` var, HV heads, NC chunks fixed at generation):
kq f16 [seqs, HV, NC, 128, 128], kbt f16 [seqs, HV, NC, 128, 64], tmb, aqk f16
[seqs, HV, NC, 64, 64], gamma f32 [seqs, HV, NC, 128], v bf16 [seqs, HV, NC, 64, V], x0 f32
[seqs, HV, V, 128] in; xt f32 [seqs, HV, V, 128], o f32 [seqs, HV, NC, 64, V] out.
forward64_manifest adds a prep (chunk64.md step 2) and chains it with the state step: program
`prep64` (the prep: the operands are outputs) and `forward64` (the prep, then the state step
on its operands). prep="prep4" (the default) selects prep v4 (kernels/kda/kda_chunk64_prep4.cu,
pack Chunk64Prep4Params) over the raw inputs: q, k bf16 [seqs, T, H, 128], g bf16
[seqs, T, HV, 128] (the softplus gate's raw input), beta f32 [seqs, T, HV] (effective), a_log
f32 [HV], dt_bias f32 [HV, 128], with T = `tokens` (NC = ceil(T / 64)), H = `heads`, the q scale
`scale`.
prep="gdn" is refused: GDN's prep (kernels/kda/kda_chunk64_prep_gdn.cu) writes k^, q^ without
the decay and no kbt (its state entry, kda_chunk64_state2_gdn, applies the per-token decays),
so it is checked through the product's prefill op (kernrt.gen.kda_prefill64,
validation/kda/checks.py), not this bench.
The preps over prepared fp32 tokens (v2 "prep", v3 "prep3") are deleted (their sources: git
tag kda6-chunk64-preps-v2-v3); those names are refused.
state="state2" (every function with a `state` parameter) selects the pipelined state step
(kernels/kda/kda_chunk64_state2.cu: a producer warpgroup, two operand stages; pack
Chunk64State2Params, the same grid and operand buffers) instead of kda_chunk64_state.cu's; its
v and o are bf16 in the product layout [seqs, T, HV, V] (T = `tokens`, default NC * 64; tokens
past T are neither read nor written) instead of the reference's v [seqs, HV, NC, 64, V] and f32
o. These are design manifests over dense buffers; the product's prefill op on the same
kernels (pools, varlen, every profile they serve) is kernrt.gen.kda_prefill64.
prep4's gate and beta (kernels/kda/kda_chunk64_prep4.cu entries, `gate` / `beta` of
forward64_manifest and prep4_op): gate "softplus" (-exp(A_log) softplus(g + dt_bias)) or
"lower_bound" (lower_bound sigmoid(exp(A_log) (g + dt_bias)), `lower_bound` in [-5, 0): the
bounded form FlashKDA computes), beta "direct" (effective beta) or "sigmoid" (logits,
sigmoid in the kernel).
Refuses: V not 128 or 256, HV or NC below 1, an unknown state or prep (the deleted "prep" /
"prep3" and the product-only "gdn" by name); for prep4 HV not a multiple of H, T not in the NC
chunks, an unknown gate or beta, a lower_bound missing or outside [-5, 0) with gate
"lower_bound" or given with "softplus"; state2 with T not in the NC chunks. Does not check
kernel behaviour or the manifest rules (kernrt-verify does). Python 3 standard library only.
"""

from .kda_ops import K, GenError

C64 = 64                  # tokens per chunk
C64_THREADS = 256         # kThreads (two warpgroups of 64 value rows)
C64_SMEM = 83968          # kChunk64StateSmem
C64_PACK = 80             # sizeof(Chunk64StateParams)
C64_VTILE = 128           # value rows per block
# the state-step entries a manifest can select: (module, entry, block threads, shared memory =
# the source's kThreads and kChunk64StateSmem / kChunk64State2Smem); both take Chunk64StateParams
STATES = {"state": ("kda_chunk64_state", "kda_chunk64_state_sm90a_f16_k128", C64_THREADS, C64_SMEM),
          "state2": ("kda_chunk64_state2", "kda_chunk64_state2_sm90a_f16_k128", 384, 184320)}
C64_STATE2_PACK = 176     # sizeof(Chunk64State2Params)
C64_PREP_THREADS = 256    # kThreads of kda_chunk64_prep4.cu and kda_chunk64_prep_gdn.cu
# the prep entries a forward64 manifest can select: (module, default entry, shared memory = the
# source's kChunk64Prep4Smem)
PREPS = {"prep4": ("kda_chunk64_prep4", "kda_chunk64_prep4_sm90a_f16_k128", 111968)}
# the deleted preps over prepared fp32 tokens, refused by name (kernels/kda/chunk64.md "History")
RETIRED_PREPS = {"prep": "prep v2 (kda_chunk64_prep.cu)", "prep3": "prep v3 (kda_chunk64_prep3.cu)"}
# preps this bench does not run, refused by name with the reason
PRODUCT_ONLY_PREPS = {"gdn": "GDN's prep writes k^, q^ without the decay and no kbt (its state "
                             "entry kda_chunk64_state2_gdn applies the decays): check it through "
                             "kernrt.gen.kda_prefill64 (validation/kda/checks.py)"}
C64_PREP4_PACK = 128      # sizeof(Chunk64Prep4Params)
# (name, dtype, shape after [seqs, HV], field offset in the pack, direction)
_BUFS = (("kq", "f16", ["NC", 2 * C64, K], 0, "in"), ("kbt", "f16", ["NC", K, C64], 8, "in"),
         ("tmb", "f16", ["NC", C64, C64], 16, "in"), ("aqk", "f16", ["NC", C64, C64], 24, "in"),
         ("gamma", "f32", ["NC", K], 32, "in"), ("v", "bf16", ["NC", C64, "V"], 40, "in"),
         ("x0", "f32", ["V", K], 48, "in"), ("xt", "f32", ["V", K], 56, "out"),
         ("o", "f32", ["NC", C64, "V"], 64, "out"))


def _check(value_heads, dim_v, chunks):
    if dim_v not in (128, 256):
        raise GenError(f"V = {dim_v} is not supported: expected 128 or 256")
    for name, n in (("HV", value_heads), ("NC", chunks)):
        if not isinstance(n, int) or n < 1:
            raise GenError(f"{name} = {n} is not supported: expected an integer >= 1")


def _shape(rest, dim_v, chunks, value_heads):
    sub = {"NC": chunks, "V": dim_v}
    return ["seqs", value_heads] + [sub.get(x, x) for x in rest]


def _state_kind(state):
    if state not in STATES:
        raise GenError(f"state = {state!r} is not supported: expected one of {sorted(STATES)}")
    return STATES[state]


def _module(module):
    return {module: {"source": f"{module}.sm90a.cubin", "sha256": f"@SHA256:{module}.sm90a@"}}


def _tokens(tokens, chunks):
    tokens = chunks * C64 if tokens is None else tokens
    if not isinstance(tokens, int) or not (chunks - 1) * C64 < tokens <= chunks * C64:
        raise GenError(f"T = {tokens} does not fill NC = {chunks} chunks of {C64} tokens")
    return tokens


def _state_bufs(value_heads, dim_v, chunks, state, tokens):
    """(name, dtype, shape, field offset, direction) of the state step's buffers: _BUFS, with
    state2's v and o bf16 [seqs, T, HV, V] (the product layout)."""
    out = []
    for name, t, rest, at, d in _BUFS:
        if name in ("v", "o") and state == "state2":
            out.append((name, "bf16", ["seqs", tokens, value_heads, dim_v], at, d))
        else:
            out.append((name, t, _shape(rest, dim_v, chunks, value_heads), at, d))
    return out


def state64_op(value_heads, dim_v, chunks, state="state", tokens=None):
    """The state step over NC chunks of every (sequence, head): grid (V / 128, HV, seqs)."""
    _check(value_heads, dim_v, chunks)
    module, entry, threads, smem = _state_kind(state)
    params = [f"{d} buffer<{t}>" for _, t, _, _, d in _state_bufs(value_heads, dim_v, chunks, state,
                                                                  _tokens(tokens, chunks))]
    fields = [{"at": at, "param": i} for i, (_, _, _, at, _) in enumerate(_BUFS)]
    fields += [{"at": 72, "i32": chunks}, {"at": 76, "i32": dim_v}]
    size = C64_PACK
    if state == "state2":
        line = value_heads * dim_v * K * 4  # x0 / xt [seqs, HV, V, K]: line n, dense
        fields += [{"at": 80, "i32": _tokens(tokens, chunks)}, {"at": 112, "i64": line},
                   {"at": 120, "i64": line}]
        size = C64_STATE2_PACK
    launch = {"module": module, "entry": entry,
              "params": [f"bytes<{size}>"], "block": [threads, 1, 1],
              "grid": [dim_v // C64_VTILE, value_heads, "seqs"], "shared_mem": smem,
              "args": [{"pack": {"size": size, "fields": fields}}]}
    return {"params": params, "impl": {"launches": [launch]}}


def state64_manifest(max_seqs, value_heads, dim_v, chunks, state="state", tokens=None):
    """Buffers named as in the module docstring, program `state64` (one call) on `state`."""
    _check(value_heads, dim_v, chunks)
    module = _state_kind(state)[0]
    tokens = _tokens(tokens, chunks)
    tag = "" if state == "state" else f"-{state}"
    bufs = {name: {"dtype": t, "shape": shape, "kind": "input" if d == "in" else "output"}
            for name, t, shape, _, d in _state_bufs(value_heads, dim_v, chunks, state, tokens)}
    args = [{"buf": name} for name, _, _, _, _ in _BUFS]
    return {"schema_version": 4,
            "model": f"kernrt-kda-chunk64-state{tag}-hv{value_heads}-v{dim_v}-nc{chunks}",
            "vars": {"seqs": {"max": max_seqs}}, "buffers": bufs, "modules": _module(module),
            "ops": {"state64": state64_op(value_heads, dim_v, chunks, state, tokens)},
            "programs": {"state64": {"calls": [{"op": "state64", "args": args}]}}}


def _prep_kind(prep):
    if prep in RETIRED_PREPS:
        raise GenError(f"prep = {prep!r} is not supported: {RETIRED_PREPS[prep]} was deleted (git tag "
                       f"kda6-chunk64-preps-v2-v3); expected one of {sorted(PREPS)}")
    if prep in PRODUCT_ONLY_PREPS:
        raise GenError(f"prep = {prep!r} is not supported here: {PRODUCT_ONLY_PREPS[prep]}")
    if prep not in PREPS:
        raise GenError(f"prep = {prep!r} is not supported: expected one of {sorted(PREPS)}")
    return PREPS[prep]


# prep v4: (name, dtype, shape, field offset in Chunk64Prep4Params, direction); "seqs" first
# where the buffer has one, T / H / HV / NC substituted
_PREP4_BUFS = (("q", "bf16", ["seqs", "T", "H", K], 0, "in"), ("k", "bf16", ["seqs", "T", "H", K], 8, "in"),
               ("g", "bf16", ["seqs", "T", "HV", K], 16, "in"), ("beta", "f32", ["seqs", "T", "HV"], 24, "in"),
               ("a_log", "f32", ["HV"], 32, "in"), ("dt_bias", "f32", ["HV", K], 40, "in"),
               ("kq", "f16", ["seqs", "HV", "NC", 2 * C64, K], 48, "out"),
               ("kbt", "f16", ["seqs", "HV", "NC", K, C64], 56, "out"),
               ("tmb", "f16", ["seqs", "HV", "NC", C64, C64], 64, "out"),
               ("aqk", "f16", ["seqs", "HV", "NC", C64, C64], 72, "out"),
               ("gamma", "f32", ["seqs", "HV", "NC", K], 80, "out"))


def _check4(value_heads, heads, tokens, chunks):
    if not isinstance(heads, int) or heads < 1 or value_heads % heads:
        raise GenError(f"HV = {value_heads} is not a multiple of H = {heads}")
    _tokens(tokens, chunks)


# prep v4's entries by (gate, beta): the same module, pack, buffers and shared memory
PREP4_ENTRIES = {("softplus", "direct"): "kda_chunk64_prep4_sm90a_f16_k128",
                 ("softplus", "sigmoid"): "kda_chunk64_prep4_sigbeta_sm90a_f16_k128",
                 ("lower_bound", "direct"): "kda_chunk64_prep4_lbgate_sm90a_f16_k128",
                 ("lower_bound", "sigmoid"): "kda_chunk64_prep4_lbgate_sigbeta_sm90a_f16_k128"}


def _prep4_entry(gate, beta, lower_bound):
    if gate not in ("softplus", "lower_bound"):
        raise GenError(f"gate = {gate!r} is not supported: expected 'softplus' or 'lower_bound'")
    if beta not in ("direct", "sigmoid"):
        raise GenError(f"beta = {beta!r} is not supported: expected 'direct' or 'sigmoid'")
    if gate == "lower_bound":
        if not isinstance(lower_bound, (int, float)) or not -5.0 <= lower_bound < 0.0:
            raise GenError(f"lower_bound = {lower_bound!r} is not supported with gate 'lower_bound': "
                           "expected a number in [-5, 0)")
    elif lower_bound is not None:
        raise GenError("lower_bound is given but gate is 'softplus': pass gate='lower_bound'")
    return PREP4_ENTRIES[(gate, beta)]


def prep4_op(value_heads, heads, tokens, chunks, scale=None, gate="softplus", beta="direct",
             lower_bound=None):
    """Prep v4 over the raw inputs of every chunk of every (sequence, head): grid (NC, HV, seqs);
    the entry of (`gate`, `beta`) (PREP4_ENTRIES)."""
    _check(value_heads, 128, chunks)
    _check4(value_heads, heads, tokens, chunks)
    module, _, smem = PREPS["prep4"]
    entry = _prep4_entry(gate, beta, lower_bound)
    scale = K ** -0.5 if scale is None else float(scale)
    params = [f"{d} buffer<{t}>" for _, t, _, _, d in _PREP4_BUFS]
    fields = [{"at": at, "param": i} for i, (_, _, _, at, _) in enumerate(_PREP4_BUFS)]
    fields += [{"at": 88, "f32": scale}, {"at": 92, "i32": tokens}, {"at": 96, "i32": heads},
               {"at": 100, "i32": value_heads // heads}, {"at": 104, "i32": chunks},
               {"at": 108, "f32": 0.0 if lower_bound is None else float(lower_bound)}]
    launch = {"module": module, "entry": entry,
              "params": [f"bytes<{C64_PREP4_PACK}>"], "block": [C64_PREP_THREADS, 1, 1],
              "grid": [chunks, value_heads, "seqs"], "shared_mem": smem,
              "args": [{"pack": {"size": C64_PREP4_PACK, "fields": fields}}]}
    return {"params": params, "impl": {"launches": [launch]}}


def forward64_manifest(max_seqs, value_heads, dim_v, chunks, prep="prep4", heads=1, tokens=None,
                       scale=None, state="state", gate="softplus", beta="direct", lower_bound=None):
    """Programs `prep64` and `forward64` (prep, then state64) over the buffers of both; `prep`
    names the prep (PREPS), `state` the state step (STATES); the prep takes `heads`,
    `tokens` (default NC * 64), `scale`, `beta`, `gate` and `lower_bound` (the entries:
    PREP4_ENTRIES); state2 takes `tokens` (its o's rows)."""
    _check(value_heads, dim_v, chunks)
    module = _prep_kind(prep)[0]
    state_module = _state_kind(state)[0]
    tokens = _tokens(tokens, chunks)
    tag = "" if state == "state" else f"-{state}"
    bufs = {}
    outs = ("kq", "kbt", "tmb", "aqk", "gamma")
    _check4(value_heads, heads, tokens, chunks)
    sub = {"T": tokens, "H": heads, "HV": value_heads, "NC": chunks}
    prep_bufs = _PREP4_BUFS
    for name, t, shape, _, d in prep_bufs:
        bufs[name] = {"dtype": t, "shape": [sub.get(x, x) for x in shape],
                      "kind": "input" if d == "in" else "output"}
    prep_op = prep4_op(value_heads, heads, tokens, chunks, scale, gate, beta, lower_bound)
    entry = prep_op["impl"]["launches"][0]["entry"]
    ptag = entry[len("kda_chunk64_"):-len("_sm90a_f16_k128")].replace("_", "-")
    for name, t, shape, _, d in _state_bufs(value_heads, dim_v, chunks, state, tokens):
        bufs[name] = {"dtype": t, "shape": shape,
                      "kind": "input" if (d == "in" and name not in outs) else "output"}
    prep_call = {"op": "prep64", "args": [{"buf": name} for name, _, _, _, _ in prep_bufs]}
    state_call = {"op": "state64", "args": [{"buf": name} for name, _, _, _, _ in _BUFS]}
    return {"schema_version": 4,
            "model": f"kernrt-kda-chunk64-forward-{ptag}{tag}-hv{value_heads}-v{dim_v}-nc{chunks}",
            "vars": {"seqs": {"max": max_seqs}}, "buffers": bufs,
            "modules": {**_module(module), **_module(state_module)},
            "ops": {"prep64": prep_op,
                    "state64": state64_op(value_heads, dim_v, chunks, state, tokens)},
            "programs": {"prep64": {"calls": [prep_call]}, "forward64": {"calls": [prep_call, state_call]}}}
