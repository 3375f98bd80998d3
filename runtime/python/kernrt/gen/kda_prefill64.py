"""The chunked prefill on the 64-token chunk kernels (kernels/kda/chunk64.md): a prep
(kda_chunk64_prep4.cu for KDA, kda_chunk64_prep_gdn.cu for GDN) writes each chunk's operands
into op scratch, then the pipelined state step (kda_chunk64_state2.cu: KDA's entry, or GDN's,
which applies the per-token decays its prep leaves out) runs every sequence's chunks in order.
kernrt.gen.kda_ops.prefill_op calls `launches` with the interface it built,
so both chunk lengths serve one op interface and a manifest selects one by its entries.

Owns: which profiles the 64-token kernels serve (`unsupported`: None, or the reason), their
packs (kernels/kda/chunk64_params.h Chunk64Prep4Params, Chunk64PrepGdnParams,
Chunk64State2Params), grids, and the operand scratch (dense [seqs, HV, NC, ..], varlen slots
chunk64_params.h describes: `varlen_slots`). Python 3 standard library only.
"""

from . import kda_chunk64 as g64
from .kda_ops import CHUNK_PACK, K, GenError, _launch, combine_launch

# the kernels' constants, as the design manifests (kernrt.gen.kda_chunk64) spell them
C = g64.C64                         # tokens per chunk
PREP_THREADS = g64.C64_PREP_THREADS
# kind -> sizeof(Chunk64Prep4Params) / sizeof(Chunk64PrepGdnParams)
PREP_PACKS = {"kda": g64.C64_PREP4_PACK, "gdn": 136}
STATE_MODULE, _, STATE_THREADS, STATE_SMEM = g64.STATES["state2"]
# kind -> the state step's entry: GDN's applies its per-token decays (`tok`) itself
STATE_ENTRIES = {"kda": g64.STATES["state2"][1], "gdn": "kda_chunk64_state2_gdn_sm90a_f16_k128"}
STATE_PACK = g64.C64_STATE2_PACK    # sizeof(Chunk64State2Params)
TOK_AT_STATE = 160                  # Chunk64State2Params::tok
# exact context parallel's phase-1 order: its entry (same module and pack), its block and
# Chunk64State2Params::cp_order
ORDER_ENTRY, ORDER_THREADS, ORDER_AT_STATE = "kda_chunk64_cp_order_sm90a", 1024, 168
VTILE = g64.C64_VTILE               # value rows per state block
COMBINE_PACK = CHUNK_PACK           # kda_cp_combine takes KdaChunkParams
PREP_FLAG_BETA_BF16, PREP_FLAG_G_BF16 = 1, 2   # the preps' `flags` word
FLAG_CP_LAST_IN_PHASE3 = 256        # kFlagCpLastInPhase3 (kernels/kda/params.h), the combine's
# kind -> (module, shared memory = kChunk64Prep4Smem / kChunk64PrepGdnSmem)
PREP_MODULES = {"kda": (g64.PREPS["prep4"][0], g64.PREPS["prep4"][2]),
                "gdn": ("kda_chunk64_prep_gdn", 60480)}
# the entries by (gate, beta form) / beta form
PREP4_ENTRIES = g64.PREP4_ENTRIES
PREP_GDN_ENTRIES = {"direct": "kda_chunk64_prep_gdn_sm90a_f16_k128",
                    "sigmoid": "kda_chunk64_prep_gdn_sigbeta_sm90a_f16_k128"}
# operand scratch per kind: name, dtype, elements per chunk and value head, in the preps' field
# order (from offset 48; the state step's from 0). GDN's second is `tok` (per token 2^G_t,
# 2^(G_63 - G_t)) where KDA's is kbt: its kq holds k^, q^ without the decay and its state entry
# applies the decays and reads k^ transposed (kernels/kda/chunk64_state_step.cuh kScalarDecay).
_LATER_OPERANDS = (("tmb", "f16", C * C), ("aqk", "f16", C * C), ("gamma", "f32", K))
OPERANDS = {"kda": (("kq", "f16", 2 * C * K), ("kbt", "f16", K * C)) + _LATER_OPERANDS,
            "gdn": (("kq", "f16", 2 * C * K), ("tok", "f32", 2 * C)) + _LATER_OPERANDS}
# decay-bounded context parallel (GDN): per chunk and value head the transition's log2 bound,
# written by the prep (Chunk64PrepGdnParams::bound) and read by the state step's phase 1 / 3
# (Chunk64State2Params::bound); kda_chunk64_state2.cu's warm_start says what it drops
BOUND, BOUND_AT_PREP, BOUND_AT_STATE = ("bound", "f32", 1), 128, 152


def unsupported(p):
    """Why the 64-token kernels cannot serve profile `p` (None: they can)."""
    if p.kind == "kda" and p.g != "bf16":
        return "KDA g in f32: the 64-token prep stages g as bf16 rows"
    if p.gate is None:
        return "g as a precomputed log decay: the 64-token preps compute the gate themselves"
    if p.kind == "gdn" and p.gate != "softplus":
        return f"GDN gate `{p.gate}`: the 64-token GDN prep takes the softplus gate only"
    if p.gate == "lower_bound" and not -5.0 <= p.lower_bound < 0.0:
        return f"lower_bound {p.lower_bound} outside [-5, 0)"
    if not p.l2norm:
        return "q, k without the in-kernel l2norm"
    if p.neg_eigval:
        return "allow_neg_eigval (beta = 2 sigmoid)"
    return None


def varlen_slots(max_tokens, max_seqs):
    """Operand slots of a varlen call (per value head): every chunk of every sequence maps below
    floor(tokens / 64) + seqs + 1 (chunk64_params.h)."""
    return max_tokens // C + max_seqs + 1


def launches(p, at, varlen, max_tokens, max_seqs, state, init, final, stride, cp_segs=0,
             seg_chunks=0):
    """(launches, scratch) of the prefill op whose interface params sit at `at` (name -> index:
    q k v g beta A_log dt_bias o, cu when varlen, h0 / ht (dense) or state / lines (pool)).
    Dense calls take T = the `tokens` var (NC = ceil(T / 64)); `stride` is the state line's
    bytes. cp_segs >= 2: context parallel over segments of seg_chunks 16-token chunks (a
    multiple of 4: whole 64-token chunks, counted from each sequence's end; segment 0 takes
    the rest, kernrt.gen.kda_cp_plan.segments): the prep, (exact: the phase-1 order,) state
    phase 1, kda_chunk.cu's combine (cp_combine.cuh), state phase 3 (kernels/kda/README.md "Long sequences"; scratch `cp` as
    kda_chunk.cu's). kernrt.gen.kda_cp_plan.plan picks a geometry. GDN's context parallel is
    decay-bounded (the prep writes each chunk's transition bound, scratch `bound`): a segment
    whose trailing chunks' decay puts the earlier ones below fp32's resolution runs only those
    in phase 1 and segment 0 runs in phase 3 (kernels/kda/kda_chunk64_state2.cu warm_start)."""
    why = unsupported(p)
    if why:
        raise GenError(f"the 64-token chunk kernels do not serve this profile: {why}")
    if not varlen and not max_tokens:
        raise GenError("a dense prefill needs max_tokens (the row stride of its buffers)")
    if varlen and not (max_tokens and max_seqs):
        raise GenError("a varlen prefill on the 64-token kernels needs max_tokens and max_seqs "
                       "(the extent of its operand slots)")
    if cp_segs and (cp_segs < 2 or seg_chunks < 4 or seg_chunks % 4):
        raise GenError(f"context parallel on the 64-token kernels needs >= 2 segments of a "
                       f"multiple of 4 16-token chunks, got {cp_segs} x {seg_chunks}")
    HV, H = p.value_heads, p.heads
    nc = {"expr": {"ceil_div": ["tokens", C]}}
    if varlen:
        slots = varlen_slots(max_tokens, max_seqs)
        rows = [slots * HV]  # the operand scratch's leading extent (one row per chunk slot)
        prep_grid = [slots, HV, 1]
    else:
        chunks = -(-max_tokens // C)
        rows = ["seqs", HV * chunks]
        prep_grid = [{"ceil_div": ["tokens", C]}, HV, "seqs"]
    operands = OPERANDS[p.kind]
    scratch = {n: {"dtype": t, "shape": rows + [e]} for n, t, e in operands}
    ops = [{"at": 48 + 8 * i, "scratch": n} for i, (n, _, _) in enumerate(operands)]
    flags = PREP_FLAG_BETA_BF16 if p.beta == "bf16" else 0
    flags |= PREP_FLAG_G_BF16 if p.g == "bf16" else 0
    prep = [{"at": 0, "param": at["q"]}, {"at": 8, "param": at["k"]}, {"at": 16, "param": at["g"]},
            {"at": 24, "param": at["beta"]}, {"at": 32, "param": at["A_log"]},
            {"at": 40, "param": at["dt_bias"]}] + ops
    prep += [{"at": 88, "f32": p.scale}, {"at": 96, "i32": H}, {"at": 100, "i32": HV // H},
             {"at": 120, "var": "seqs"}, {"at": 124, "i32": flags}]
    if p.gate == "lower_bound":
        prep.append({"at": 108, "f32": float(p.lower_bound)})
    if varlen:
        prep.append({"at": 112, "param": at["cu"]})
    else:
        prep += [{"at": 92, "var": "tokens"}, {"at": 104, **nc}]
    module, smem = PREP_MODULES[p.kind]
    beta = "sigmoid" if p.beta_sigmoid else "direct"
    entry = PREP4_ENTRIES[(p.gate, beta)] if p.kind == "kda" else PREP_GDN_ENTRIES[beta]
    st = [{"at": TOK_AT_STATE if n == "tok" else 8 * i, "scratch": n}
          for i, (n, _, _) in enumerate(operands)]
    st += [{"at": 40, "param": at["v"]}, {"at": 64, "param": at["o"]}, {"at": 76, "i32": p.dim_v}]
    if varlen:
        st.append({"at": 88, "param": at["cu"]})
    else:
        st += [{"at": 72, **nc}, {"at": 80, "var": "tokens"}]
    if state == "pool":
        if init:
            st += [{"at": 48, "param": at["state"]}, {"at": 96, "param": at["lines"]},
                   {"at": 112, "i64": stride}]
        if final:
            st += [{"at": 56, "param": at["state"]}, {"at": 104, "param": at["lines"]},
                   {"at": 120, "i64": stride}]
    else:
        if init:
            st += [{"at": 48, "param": at["h0"]}, {"at": 112, "i64": stride}]
        if final:
            st += [{"at": 56, "param": at["ht"]}, {"at": 120, "i64": stride}]
    nt = p.dim_v // VTILE
    bounded = bool(cp_segs) and p.kind == "gdn"
    if bounded:
        name, dtype, per = BOUND
        scratch[name] = {"dtype": dtype, "shape": rows + [per]}
        prep.append({"at": BOUND_AT_PREP, "scratch": name})
        st.append({"at": BOUND_AT_STATE, "scratch": name})
    out = [_launch_smem(module, entry, PREP_PACKS[p.kind], prep, prep_grid, PREP_THREADS, smem)]
    state_entry = STATE_ENTRIES[p.kind]
    if not cp_segs:
        out.append(_launch_smem(STATE_MODULE, state_entry, STATE_PACK, st, [nt, HV, "seqs"],
                                STATE_THREADS, STATE_SMEM))
        return out, scratch
    # context parallel: phase 3 writes the final state from the last segment (phase 1 from
    # segment 0 when it is the only one); the combine stops at the last segment's I
    cp = [{"at": 128, "scratch": "cp"}, {"at": 140, "i32": cp_segs},
          {"at": 144, "i32": seg_chunks // 4}, {"at": 148, "var": "seqs"}]
    z = {"mul": ["seqs", cp_segs]}
    phase1 = st + cp + [{"at": 136, "i32": 1}]
    if varlen and not bounded:  # exact: phase 1's blocks longest first, varlen's by a sort
        # (kda_chunk64_cp_order_sm90a); dense sequences are alike, their order is arithmetic
        phase1.append({"at": ORDER_AT_STATE, "scratch": "cp_order"})
        # phase 1's items, then phase 3's working ones (chunk64_cp_order.cuh cp_item)
        scratch["cp_order"] = {"dtype": "i32", "shape": ["seqs", 2 * cp_segs]}
        out.append(_launch(STATE_MODULE, ORDER_ENTRY, STATE_PACK, phase1, [1, 1, 1], ORDER_THREADS))
    out.append(_launch_smem(STATE_MODULE, state_entry, STATE_PACK, phase1, [nt + 1, HV, z],
                            STATE_THREADS, STATE_SMEM))
    out.append(_combine(p, at, varlen, cp_segs, seg_chunks, bounded))
    phase3 = st + cp + [{"at": 136, "i32": 3}]
    if "cp_order" in scratch:  # phase 3's working items first, its empty blocks after them
        phase3.append({"at": ORDER_AT_STATE, "scratch": "cp_order"})
    out.append(_launch_smem(STATE_MODULE, state_entry, STATE_PACK, phase3, [nt, HV, z],
                            STATE_THREADS, STATE_SMEM))
    scratch["cp"] = {"dtype": "f32", "shape": ["seqs", cp_segs * HV * (2 * p.dim_v + K) * K]}
    return out, scratch


def _combine(p, at, varlen, cp_segs, seg_chunks, bounded):
    """kda_chunk.cu's kda_cp_combine over the phase-1 scratch (pack KdaChunkParams,
    kernels/kda/params.h: the fields it reads), with kFlagCpLastInPhase3: it writes the
    segments' initial states up to the last one's and no final state; bounded: the entry that
    skips the transitions phase 1 dropped (written as zeros)."""
    f = [{"at": 104, "scratch": "cp"}, {"at": 212, "var": "seqs"}, {"at": 220, "i32": p.value_heads},
         {"at": 224, "i32": p.dim_v}, {"at": 228, "i32": FLAG_CP_LAST_IN_PHASE3},
         {"at": 240, "i32": seg_chunks}, {"at": 248, "i32": cp_segs}]
    f.append({"at": 96, "param": at["cu"]} if varlen else {"at": 208, "var": "tokens"})
    return combine_launch(p, f, bounded)


def _launch_smem(module, entry, size, fields, grid, threads, smem):
    return dict(_launch(module, entry, size, fields, grid, threads), shared_mem=smem)


MODULES = {m: {"source": f"{m}.sm90a.cubin", "sha256": f"@SHA256:{m}.sm90a@"}
           for m in ("kda_chunk64_prep4", "kda_chunk64_prep_gdn", STATE_MODULE)}
