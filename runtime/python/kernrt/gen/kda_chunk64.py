"""Manifest of the KDA 64-token chunk's state step alone (kernels/kda/kda_chunk64_state.cu,
kernels/kda/chunk64.md step 1): a design entry checked against validation/kda/chunk64_model.py
by validation/kda/check_chunk64.py. Not a serving op: no profile options, no pool.

Owns: the op over the entry `kda_chunk64_state_sm90a_f16_k128` (its pack: kernels/kda/
chunk64_params.h Chunk64StateParams) and a manifest with one program `state64` over
contiguous buffers (N = the `seqs` var, HV heads, NC chunks fixed at generation):
kq f16 [seqs, HV, NC, 128, 128], kbt f16 [seqs, HV, NC, 128, 64], tmb, aqk f16
[seqs, HV, NC, 64, 64], gamma f32 [seqs, HV, NC, 128], v bf16 [seqs, HV, NC, 64, V], x0 f32
[seqs, HV, V, 128] in; xt f32 [seqs, HV, V, 128], o f32 [seqs, HV, NC, 64, V] out.
forward64_manifest adds the prep alone (kernels/kda/kda_chunk64_prep.cu, chunk64.md step 2,
pack Chunk64PrepParams) over prepared fp32 tokens qh, kh, al f32 [seqs, HV, NC, 64, 128] and
beta f32 [seqs, HV, NC, 64]: program `prep64` (the prep: the operands are outputs) and
`forward64` (the prep, then the state step on its operands). prep="prep3" selects prep v3
(kernels/kda/kda_chunk64_prep3.cu, the same pack and buffers) instead of v2.
Refuses: V not 128 or 256, HV or NC below 1. Does not check kernel behaviour or the manifest
rules (kernrt-verify does). Python 3 standard library only.
"""

from .kda_ops import K, GenError

C64 = 64                  # tokens per chunk
C64_THREADS = 256         # kThreads (two warpgroups of 64 value rows)
C64_SMEM = 83456          # kChunk64StateSmem
C64_PACK = 80             # sizeof(Chunk64StateParams)
C64_VTILE = 128           # value rows per block
MODULE = {"kda_chunk64_state": {"source": "kda_chunk64_state.sm90a.cubin",
                                "sha256": "@SHA256:kda_chunk64_state.sm90a@"}}
C64_PREP_THREADS = 256    # kda_chunk64_prep.cu kThreads
C64_PREP_SMEM = 210624    # kChunk64PrepSmem
# the prep entries a forward64 manifest can select: (module, entry, shared memory = the
# source's kChunk64PrepSmem / kChunk64Prep3Smem); both take Chunk64PrepParams, 256 threads
PREPS = {"prep": ("kda_chunk64_prep", "kda_chunk64_prep_sm90a_f16_k128", C64_PREP_SMEM),
         "prep3": ("kda_chunk64_prep3", "kda_chunk64_prep3_sm90a_f16_k128", 60256)}
C64_PREP_PACK = 80        # sizeof(Chunk64PrepParams)
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


def state64_op(value_heads, dim_v, chunks):
    """The state step over NC chunks of every (sequence, head): grid (V / 128, HV, seqs)."""
    _check(value_heads, dim_v, chunks)
    params = [f"{d} buffer<{t}>" for _, t, _, _, d in _BUFS]
    fields = [{"at": at, "param": i} for i, (_, _, _, at, _) in enumerate(_BUFS)]
    fields += [{"at": 72, "i32": chunks}, {"at": 76, "i32": dim_v}]
    launch = {"module": "kda_chunk64_state", "entry": "kda_chunk64_state_sm90a_f16_k128",
              "params": [f"bytes<{C64_PACK}>"], "block": [C64_THREADS, 1, 1],
              "grid": [dim_v // C64_VTILE, value_heads, "seqs"], "shared_mem": C64_SMEM,
              "args": [{"pack": {"size": C64_PACK, "fields": fields}}]}
    return {"params": params, "impl": {"launches": [launch]}}


def state64_manifest(max_seqs, value_heads, dim_v, chunks):
    """Buffers named as in the module docstring, program `state64` (one call)."""
    _check(value_heads, dim_v, chunks)
    bufs = {name: {"dtype": t, "shape": _shape(rest, dim_v, chunks, value_heads),
                   "kind": "input" if d == "in" else "output"}
            for name, t, rest, _, d in _BUFS}
    args = [{"buf": name} for name, _, _, _, _ in _BUFS]
    return {"schema_version": 4,
            "model": f"kernrt-kda-chunk64-state-hv{value_heads}-v{dim_v}-nc{chunks}",
            "vars": {"seqs": {"max": max_seqs}}, "buffers": bufs, "modules": dict(MODULE),
            "ops": {"state64": state64_op(value_heads, dim_v, chunks)},
            "programs": {"state64": {"calls": [{"op": "state64", "args": args}]}}}


# (name, dtype, shape after [seqs, HV], field offset in the prep pack, direction)
_PREP_BUFS = (("qh", "f32", ["NC", C64, K], 0, "in"), ("kh", "f32", ["NC", C64, K], 8, "in"),
              ("al", "f32", ["NC", C64, K], 16, "in"), ("beta", "f32", ["NC", C64], 24, "in"),
              ("kq", "f16", ["NC", 2 * C64, K], 32, "out"), ("kbt", "f16", ["NC", K, C64], 40, "out"),
              ("tmb", "f16", ["NC", C64, C64], 48, "out"), ("aqk", "f16", ["NC", C64, C64], 56, "out"),
              ("gamma", "f32", ["NC", K], 64, "out"))


def _prep_kind(prep):
    if prep not in PREPS:
        raise GenError(f"prep = {prep!r} is not supported: expected one of {sorted(PREPS)}")
    return PREPS[prep]


def prep64_op(value_heads, chunks, prep="prep"):
    """The prep of every chunk of every (sequence, head): grid (NC, HV, seqs)."""
    _check(value_heads, 128, chunks)
    module, entry, smem = _prep_kind(prep)
    params = [f"{d} buffer<{t}>" for _, t, _, _, d in _PREP_BUFS]
    fields = [{"at": at, "param": i} for i, (_, _, _, at, _) in enumerate(_PREP_BUFS)]
    fields += [{"at": 72, "i32": chunks}, {"at": 76, "i32": 0}]
    launch = {"module": module, "entry": entry,
              "params": [f"bytes<{C64_PREP_PACK}>"], "block": [C64_PREP_THREADS, 1, 1],
              "grid": [chunks, value_heads, "seqs"], "shared_mem": smem,
              "args": [{"pack": {"size": C64_PREP_PACK, "fields": fields}}]}
    return {"params": params, "impl": {"launches": [launch]}}


def forward64_manifest(max_seqs, value_heads, dim_v, chunks, prep="prep"):
    """Programs `prep64` and `forward64` (prep, then state64) over the buffers of both; `prep`
    names the prep entry (PREPS)."""
    _check(value_heads, dim_v, chunks)
    module = _prep_kind(prep)[0]
    bufs = {}
    for name, t, rest, _, d in _PREP_BUFS + _BUFS:
        kind = "input" if (d == "in" and name not in ("kq", "kbt", "tmb", "aqk", "gamma")) else "output"
        bufs[name] = {"dtype": t, "shape": _shape(rest, dim_v, chunks, value_heads), "kind": kind}
    prep_call = {"op": "prep64", "args": [{"buf": name} for name, _, _, _, _ in _PREP_BUFS]}
    state = {"op": "state64", "args": [{"buf": name} for name, _, _, _, _ in _BUFS]}
    return {"schema_version": 4,
            "model": f"kernrt-kda-chunk64-forward-{prep}-hv{value_heads}-v{dim_v}-nc{chunks}",
            "vars": {"seqs": {"max": max_seqs}}, "buffers": bufs,
            "modules": {module: {"source": f"{module}.sm90a.cubin",
                                 "sha256": f"@SHA256:{module}.sm90a@"}, **MODULE},
            "ops": {"prep64": prep64_op(value_heads, chunks, prep),
                    "state64": state64_op(value_heads, dim_v, chunks)},
            "programs": {"prep64": {"calls": [prep_call]}, "forward64": {"calls": [prep_call, state]}}}
