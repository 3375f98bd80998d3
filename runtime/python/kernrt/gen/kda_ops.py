"""KDA / GDN ops (interface + launches + packs) over the kernels/kda cubins, for one profile.

Owns: the profile (KDA or GDN, H, HV, V, the dtypes of g and beta, the in-kernel options) and
its refusals (K != 128, V not 128 / 256, HV not a multiple of H, unknown dtypes, option
combinations, steps outside 1..8), the per-sequence slot layout (the fp32 state [HV, V, K],
then the verify record: params.h StepRecord), and the ops: decode / verify / commit
(KdaStepParams) and the chunked prefill in its pool, dense, varlen and context-parallel forms
(KdaChunkParams), each as a dict with `@SHA256:<cubin>@` module placeholders. kernrt.gen.kda
builds complete manifests from these. Python 3 standard library only.
"""

from .kda_cp_plan import COMBINE_ROWS, combine_z as _combine_z

K = 128                   # kernels/kda/params.h kHeadDim
MAX_STEPS = 8             # kMaxSteps
STEP_ROWS = 32            # kStepRows: value rows per decode/verify/commit block
STEP_THREADS = 128
STEP_PACK = 224           # sizeof(KdaStepParams)
CHUNK = 16                # kChunk: tokens per chunk of the prefill
VTILE = 128               # kVTile: value rows per prefill block
CHUNK_THREADS = 512       # kChunkThreads
CHUNK_SMEM = 171616       # kChunkSmemBytes (chunk_smem.cuh)
CHUNK_PACK = 256          # sizeof(KdaChunkParams)
COMBINE_THREADS = 256      # kCombineThreads (cp_combine.cuh): 16 value rows a block
COMBINE_SMEM = 139280      # sizeof(CombineSmem): two transitions and the rows, asserted there
FLAG_NO_OUTPUT = 128
FLAG_GATE, FLAG_LOWER_BOUND, FLAG_BETA_SIGMOID, FLAG_NEG_EIGVAL = 1, 2, 4, 8
FLAG_L2NORM, FLAG_G_F32, FLAG_BETA_F32 = 16, 32, 64
ESIZE = {"bf16": 2, "f32": 4, "i32": 4}


class GenError(Exception):
    """A profile or manifest the kda kernels cannot serve; the message says what and why."""


def _align16(b):
    return (b + 15) // 16 * 16


class Profile:
    """What one family of kda ops computes and how its inputs are typed."""

    def __init__(self, kind="kda", heads=16, value_heads=None, dim_k=K, dim_v=128, g="f32",
                 beta="f32", gate=None, lower_bound=None, beta_sigmoid=False,
                 neg_eigval=False, l2norm=True, scale=None):
        value_heads = heads if value_heads is None else value_heads
        if kind not in ("kda", "gdn"):
            raise GenError(f"kind `{kind}` is not supported: expected kda (a decay per key "
                           f"channel) or gdn (one decay per head)")
        if dim_k != K:
            raise GenError(f"K = {dim_k} is not supported: the kda kernels are built for K = {K}")
        if dim_v not in (128, 256):
            raise GenError(f"V = {dim_v} is not supported: expected 128 or 256")
        if not isinstance(heads, int) or heads <= 0 or not isinstance(value_heads, int) \
                or value_heads <= 0 or value_heads % heads:
            raise GenError(f"HV = {value_heads} is not a multiple of H = {heads} (GVA maps "
                           f"value head hv to q/k head hv // (HV / H))")
        for name, dt in (("g", g), ("beta", beta)):
            if dt not in ("bf16", "f32"):
                raise GenError(f"{name} dtype `{dt}` is not supported: expected bf16 or f32")
        if gate not in (None, "softplus", "lower_bound"):
            raise GenError(f"gate `{gate}` is not supported: expected softplus or lower_bound")
        if (gate == "lower_bound") != (lower_bound is not None):
            raise GenError("lower_bound needs gate = `lower_bound` (and the other way round)")
        if lower_bound is not None and not lower_bound < 0:
            raise GenError(f"lower_bound = {lower_bound} must be negative")
        if neg_eigval and not beta_sigmoid:
            raise GenError("allow_neg_eigval needs the in-kernel beta sigmoid")
        self.kind, self.heads, self.value_heads, self.dim_v = kind, heads, value_heads, dim_v
        self.g, self.beta, self.gate, self.lower_bound = g, beta, gate, lower_bound
        self.beta_sigmoid, self.neg_eigval, self.l2norm = beta_sigmoid, neg_eigval, l2norm
        self.scale = K ** -0.5 if scale is None else float(scale)

    @property
    def tag(self):
        return f"{self.kind}_h{self.heads}_hv{self.value_heads}_v{self.dim_v}"

    @property
    def flags(self):
        f = FLAG_GATE if self.gate else 0
        f |= FLAG_LOWER_BOUND if self.gate == "lower_bound" else 0
        f |= FLAG_BETA_SIGMOID if self.beta_sigmoid else 0
        f |= FLAG_NEG_EIGVAL if self.neg_eigval else 0
        f |= FLAG_L2NORM if self.l2norm else 0
        f |= FLAG_G_F32 if self.g == "f32" else 0
        f |= FLAG_BETA_F32 if self.beta == "f32" else 0
        return f

    @property
    def g_width(self):
        """Elements of g per token and value head."""
        return K if self.kind == "kda" else 1

    @property
    def state_bytes(self):
        """One sequence's fp32 state [HV, V, K]."""
        return self.value_heads * self.dim_v * K * 4

    def record(self):
        """Offsets of the verify record (params.h step_record): alpha, beta, v, bytes."""
        kh = _align16(MAX_STEPS * self.heads * K * 4)
        al = _align16(MAX_STEPS * self.value_heads * self.g_width * 4)
        be = _align16(MAX_STEPS * self.value_heads * 4)
        vv = _align16(MAX_STEPS * self.value_heads * self.dim_v * 2)
        return {"alpha": kh, "beta": kh + al, "v": kh + al + be, "bytes": kh + al + be + vv}

    def region_bytes(self, verify=True):
        """Bytes of one layer in a sequence's slot: the state, then the verify record."""
        return self.state_bytes + (self.record()["bytes"] if verify else 0)

    def entry(self, mode):
        return f"{self.kind}_{mode}_sm90a_bf16_k128"

    def head(self):
        """Interface params every token op starts with: q, k, v, g, beta, [A_log, dt_bias], o."""
        p = ["in buffer<bf16>"] * 3 + [f"in buffer<{self.g}>", f"in buffer<{self.beta}>"]
        if self.gate:
            p += ["in buffer<f32>", "in buffer<f32>"]
        return p + ["out buffer<bf16>"]

    def shapes(self, lead):
        """Buffer shapes of the head params for leading extents `lead` (e.g. ["seqs", 4])."""
        s = [lead + [self.heads, K], lead + [self.heads, K], lead + [self.value_heads, self.dim_v],
             lead + ([self.value_heads, K] if self.kind == "kda" else [self.value_heads]),
             lead + [self.value_heads]]
        if self.gate:
            s += [[self.value_heads], [self.value_heads * self.g_width]]
        return s + [lead + [self.value_heads, self.dim_v]]


def _launch(module, entry, size, fields, grid, threads):
    fields = sorted(fields, key=lambda f: f["at"])
    return {"module": module, "entry": entry, "params": [f"bytes<{size}>"],
            "block": [threads, 1, 1], "grid": grid, "pdl": True,
            "args": [{"pack": {"size": size, "fields": fields}}]}


# bounded (decay-bounded context parallel) -> the combine's entry; the bounded one skips the
# transitions phase 1 dropped (written as zeros)
COMBINE_ENTRIES = {False: "kda_cp_combine_sm90a_f32_k128", True: "kda_cp_combine_bounded_sm90a_f32_k128"}


def combine_z(p):
    """The combine's grid.z for profile p (kda_cp_plan.combine_z: one wave of blocks)."""
    return _combine_z(p.dim_v, p.value_heads)


def combine_launch(p, fields, bounded=False):
    """kda_chunk.cu's kda_cp_combine (cp_combine.cuh) with pack `fields`: its grid, block and
    shared memory, one place for c16's and c64's context parallel; `bounded`: the entry of
    decay-bounded context parallel (c64's GDN)."""
    launch = _launch("kda_chunk", COMBINE_ENTRIES[bounded], CHUNK_PACK, fields,
                     [p.dim_v // COMBINE_ROWS, p.value_heads, combine_z(p)], COMBINE_THREADS)
    launch["shared_mem"] = COMBINE_SMEM
    return launch


from . import kda_prefill64 as c64  # noqa: E402 (it imports the constants, GenError, _launch above)


def _step_fields(p, steps, state_stride, record_offset):
    """The KdaStepParams fields every step op shares (strides of contiguous [.., steps, heads,
    dim] buffers, geometry, flags, scale)."""
    hk, vv, gw = p.heads * K, p.value_heads * p.dim_v, p.value_heads * p.g_width
    f = [{"at": 88, "i64": steps * hk}, {"at": 96, "i64": hk},
         {"at": 104, "i64": steps * vv}, {"at": 112, "i64": vv},
         {"at": 120, "i64": steps * gw}, {"at": 128, "i64": gw},
         {"at": 136, "i64": steps * p.value_heads}, {"at": 144, "i64": p.value_heads},
         {"at": 152, "i64": steps * vv}, {"at": 160, "i64": vv},
         {"at": 168, "i64": state_stride}, {"at": 176, "i64": record_offset},
         {"at": 184, "i32": p.heads}, {"at": 188, "i32": p.value_heads},
         {"at": 192, "i32": p.dim_v}, {"at": 196, "var": "seqs"}, {"at": 200, "i32": steps},
         {"at": 204, "i32": p.flags}, {"at": 208, "f32": p.scale}]
    if p.lower_bound is not None:
        f.append({"at": 212, "f32": float(p.lower_bound)})
    return f


def _head_fields(p):
    """Pointer fields of q, k, v, g, beta, [A_log, dt_bias], o (params 0..)."""
    at = [0, 8, 16, 24, 32] + ([40, 48] if p.gate else []) + [56]
    return [{"at": a, "param": i} for i, a in enumerate(at)]


def step_op(p, mode, steps=1, slot_bytes=None, dense=False):
    """decode (steps 1) or verify (steps 1..8) over the pool (`inout state` + lines), or a
    dense decode (dense=True: `in buffer<f32>` h0 [seqs, HV, V, K] and `out buffer<f32>` ht).
    slot_bytes: the pool's bytes_per_seq (the line stride)."""
    if mode not in ("decode", "verify"):
        raise GenError(f"step mode `{mode}` is not supported: expected decode or verify")
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS or (mode == "decode" and steps != 1):
        raise GenError(f"steps = {steps} is not supported: decode takes 1, verify 1..{MAX_STEPS}")
    n = len(p.head())
    fields = _head_fields(p)
    if dense:
        if mode != "decode":
            raise GenError("a dense state serves decode only (verify records live in the pool)")
        params = p.head() + ["in buffer<f32>", "out buffer<f32>"]
        fields += [{"at": 64, "param": n}, {"at": 216, "param": n + 1}]
        fields += _step_fields(p, steps, p.state_bytes, 0)
    else:
        params = p.head() + ["inout state", "in buffer<i32>"]
        fields += [{"at": 64, "param": n}, {"at": 72, "param": n + 1}]
        fields += _step_fields(p, steps, slot_bytes, p.state_bytes)
    grid = [p.dim_v // STEP_ROWS, p.value_heads, "seqs"]
    return {"params": params, "impl": {"launches": [
        _launch("kda_step", p.entry(mode), STEP_PACK, fields, grid, STEP_THREADS)]}}


def commit_op(p, steps, slot_bytes):
    """Replays the first accepted[i] (0..steps) tokens of the last verify into the pool line."""
    if not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise GenError(f"steps = {steps} is not supported: expected 1..{MAX_STEPS}")
    params = ["inout state", "in buffer<i32>", "in buffer<i32>"]  # pool, lines, accepted
    fields = [{"at": 64, "param": 0}, {"at": 72, "param": 1}, {"at": 80, "param": 2}]
    fields += _step_fields(p, steps, slot_bytes, p.state_bytes)
    grid = [p.dim_v // STEP_ROWS, p.value_heads, "seqs"]
    return {"params": params, "impl": {"launches": [
        _launch("kda_step", p.entry("commit"), STEP_PACK, fields, grid, STEP_THREADS)]}}


def prefill_op(p, state="pool", init=False, final=True, varlen=True, max_tokens=None,
               slot_bytes=None, cp_segs=0, seg_chunks=0, max_seqs=None, chunk="auto"):
    """The chunked forward as one op.
    state="pool": `inout state` + lines [1, seqs] (slot_bytes: the pool's bytes_per_seq);
    init reads each sequence's line first (a continued prefill), else sequences start from
    zero; the final state replaces the line. state="dense": `in buffer<f32>` h0 (init) and
    `out buffer<f32>` ht (final), [seqs, HV, V, K].
    varlen: q.. are [tokens, heads, dim] with cu_seqlens [seqs + 1] i32 (param after o); else
    dense [seqs, max_tokens, heads, dim] with T = the `tokens` var.
    cp_segs >= 2: context parallel, each sequence cut into cp_segs segments of seg_chunks
    chunks (three launches: transitions, combine, outputs; scratch `cp`).
    chunk: "c64" runs the 64-token chunk kernels (kernrt.gen.kda_prefill64: a prep, then the
    pipelined state step, its context parallel with seg_chunks a multiple of 4; refused with the
    reason where they do not serve the profile), "c16" the 16-token kernel (kda_chunk.cu, every
    option), "auto" (default) c64 where it serves (a varlen op then needs max_tokens and
    max_seqs), else c16."""
    if state not in ("pool", "dense"):
        raise GenError(f"state `{state}` is not supported: expected pool or dense")
    if not varlen and not max_tokens:
        raise GenError("a dense prefill needs max_tokens (the row stride of its buffers)")
    if state == "pool" and not slot_bytes:
        raise GenError("a pool prefill needs slot_bytes (the pool's bytes_per_seq)")
    if cp_segs and (cp_segs < 2 or seg_chunks < 1):
        raise GenError(f"context parallel needs >= 2 segments of >= 1 chunk, got {cp_segs} x {seg_chunks}")
    if chunk not in ("auto", "c16", "c64"):
        raise GenError(f"chunk `{chunk}` is not supported: expected auto, c16 or c64")
    params = list(p.head())
    fields = _head_fields(p)
    names = [n for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias") if p.gate or n not in
             ("A_log", "dt_bias")] + ["o"]
    at = {name: i for i, name in enumerate(names)}
    n = len(params)
    if varlen:
        params.append("in buffer<i32>")
        fields.append({"at": 96, "param": n})
        at["cu"] = n
        n += 1
    if state == "pool":
        params += ["inout state", "in buffer<i32>"]
        at["state"], at["lines"] = n, n + 1
        if init:
            fields += [{"at": 64, "param": n}, {"at": 80, "param": n + 1}]
        if final:
            fields += [{"at": 72, "param": n}, {"at": 88, "param": n + 1}]
        stride = slot_bytes
    else:
        if init:
            params.append("in buffer<f32>")
            fields.append({"at": 64, "param": n})
            at["h0"] = n
            n += 1
        if final:
            params.append("out buffer<f32>")
            fields.append({"at": 72, "param": n})
            at["ht"] = n
        stride = p.state_bytes
    if chunk == "c64" or (chunk == "auto" and c64.unsupported(p) is None
                          and (not varlen or (max_tokens and max_seqs))):
        launches, scratch = c64.launches(p, at, varlen, max_tokens, max_seqs, state, init, final,
                                         stride, cp_segs, seg_chunks)
        return {"params": params, "impl": {"scratch": scratch, "launches": launches}}
    hk, vv, gw = p.heads * K, p.value_heads * p.dim_v, p.value_heads * p.g_width
    T = 0 if varlen else max_tokens
    strides = [T * hk, hk, T * vv, vv, T * gw, gw, T * p.value_heads, p.value_heads, T * vv, vv]
    fields += [{"at": 112 + 8 * i, "i64": v} for i, v in enumerate(strides)]
    fields += [{"at": 192, "i64": stride if init else 0}, {"at": 200, "i64": stride if final else 0},
               {"at": 208, "i32": 0} if varlen else {"at": 208, "var": "tokens"},
               {"at": 212, "var": "seqs"}, {"at": 216, "i32": p.heads},
               {"at": 220, "i32": p.value_heads}, {"at": 224, "i32": p.dim_v},
               {"at": 228, "i32": p.flags}, {"at": 232, "f32": p.scale}]
    if p.lower_bound is not None:
        fields.append({"at": 236, "f32": float(p.lower_bound)})
    entry = f"{p.kind}_chunk_sm90a_bf16_k128"
    nt = p.dim_v // VTILE
    if not cp_segs:
        ln = _launch("kda_chunk", entry, CHUNK_PACK, fields, [nt, p.value_heads, "seqs"], CHUNK_THREADS)
        ln["shared_mem"] = CHUNK_SMEM
        return {"params": params, "impl": {"launches": [ln]}}
    cp = [{"at": 104, "scratch": "cp"}, {"at": 240, "i32": seg_chunks}, {"at": 248, "i32": cp_segs}]
    z = {"mul": ["seqs", cp_segs]}
    ph1 = _launch("kda_chunk", entry, CHUNK_PACK, fields + cp + [{"at": 244, "i32": 1}],
                  [nt + 1, p.value_heads, z], CHUNK_THREADS)
    comb = combine_launch(p, fields + cp + [{"at": 244, "i32": 2}])
    ph3 = _launch("kda_chunk", entry, CHUNK_PACK, fields + cp + [{"at": 244, "i32": 3}],
                  [nt, p.value_heads, z], CHUNK_THREADS)
    ph1["shared_mem"] = ph3["shared_mem"] = CHUNK_SMEM
    scratch = {"cp": {"dtype": "f32", "shape": ["seqs", cp_segs * p.value_heads * (2 * p.dim_v + K) * K]}}
    return {"params": params, "impl": {"scratch": scratch, "launches": [ph1, comb, ph3]}}


MODULES = {
    "kda_step": {"source": "kda_step.sm90a.cubin", "sha256": "@SHA256:kda_step.sm90a@"},
    "kda_chunk": {"source": "kda_chunk.sm90a.cubin", "sha256": "@SHA256:kda_chunk.sm90a@"},
    **c64.MODULES,
}


def modules_of(ops):
    """The MODULES entries the launches of `ops` (name -> op) use."""
    used = {ln["module"] for op in ops.values() for ln in op["impl"]["launches"]}
    return {m: MODULES[m] for m in sorted(used)}

