#!/usr/bin/env python3
"""Attention op generator: one capacity description -> kern schema-v4 `attn_decode` / `attn_prefill`.

Owns: the paged-attention ops (interface, scratch, launch, the 1280-byte pack with its TMA
descriptors and constants) for the BF16 Q24/KV4/D256 page-64 profile, for two targets:
  gb300-trtllm  the unmodified TRTLLM-GEN cubins, pinned by SHA-256 (reproduces the seed's
                decode-ops.json / prefill-ops.json byte for byte at the model capacity);
  h200          our sm90 kernels: decode (module/entry/block/shared_mem/splits from
                kernels/attention/geometry.json) and prefill / verify (module/entry/block/
                shared_mem, the persistent grid and the partial slots from
                kernels/attention/prefill_geometry.json); their sha256 is the placeholder
                `@SHA256:<cubin stem>@` that cmake's kernrt_pin_manifest replaces. The h200
                prefill op is the GB300 one plus the split-KV scratch our kernel merges through
                (counter / partial / stats at the pack's 984 / 1008 / 1016, the slot count at
                1156) and its own grid.
Every capacity-dependent value (descriptor dims and strides, page counts, split constants,
scratch shapes) is computed from max_rows, max_seqs, max_context, layers and splits together.
Also writes the small complete example manifests (see attention_examples.py) and call bindings.

Does not check: the manifest rules (run kernrt-verify on the output), whether a cubin exists
for a profile other than the pinned one (it refuses such profiles instead), or kernel behaviour.
Python 3 standard library only.
"""

import argparse
import difflib
import json
import math
import os
import sys

from . import attention_params as kp
from .attention_params import GenError

# The one covered profile: BF16 Q/K/V/O, 24 query heads over 4 KV heads, head dim 256, page 64.
HEADS_Q = 24
HEADS_KV = 4
HEAD_DIM = 256
PAGE = 64
ELT_BYTES = 2  # bf16
HEAD_BYTES = HEAD_DIM * ELT_BYTES  # 512: one head's row
SLOT_BYTES = HEADS_KV * 2 * HEAD_BYTES  # 4096: one token slot, every KV head, K and V interleaved
LAYER_PAGE_BYTES = PAGE * SLOT_BYTES  # 262144: one layer's page
TMA_INNER = 128 // ELT_BYTES  # 64 elements: the 128-byte inner box that SWIZZLE_128B allows
TILE_KV = 128  # keys per KV tile of the cubins
DECODE_TILE_Q = 8  # rows per decode CTA: the 6 grouped query heads padded to the MMA's 8
PREFILL_TILE_Q = 128  # query tokens per prefill CTA
GROUP = HEADS_Q // HEADS_KV  # 6 query heads per KV head
# The decode kernel's entry for one rank of two in tensor parallel (Capacity(heads_kv=2)).
TP2_DECODE_ENTRY = "attention_decode_sm90a_bf16_q12kv2d256p64"

# Interface param indices, shared by both ops and by every call binding.
P_OUT, P_Q, P_K, P_V, P_TABLE, P_SEQ_LENS, P_CU_SEQLENS_Q, P_SEQS, P_TOKENS = range(9)
KV_STATE = "in state"
KV_BUFFER = "in buffer<bf16>"

# Pinned TRTLLM-GEN artifacts: kernel name -> (sha256, threads per CTA, dynamic smem bytes),
# as published with the seed; the name itself is derived from the profile below.
TRTLLM_GEN = {
    "fmhaSm100fKernel_QkvBfloat16OBfloat16H256PagedKvCausalP64MultiCtasKvVarSeqQ8Kv128"
    "StaticSwapsAbForGen":
        ("a5c3300d05153675d2c6c432c50be888f3e0a8bb6c3ffbdaed48fbb25e52f86e", 512, 144992),
    "fmhaSm103aKernel_QkvBfloat16OBfloat16H256PagedKvCausalP64VarSeqQ128Kv128PersistentContext":
        ("270e5246cd40181234f075ae4e05e0e53fbe662e46640807b44daf272cd5aed7", 384, 197872),
}
GB300_DEFAULT_SPLITS = 38  # 152 CTAs at batch 1: 38 splits x 4 head groups

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
GEOMETRY_PATH = os.path.join(REPO, "kernels", "attention", "geometry.json")
if not os.path.exists(GEOMETRY_PATH):  # an installed package carries the build's copy
    GEOMETRY_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                 "_lib", "attention_geometry.json")
GEOMETRY_FALLBACK = {"module": "attention_decode", "cubin": "attention_decode.sm90a.cubin",
                     "entry": "attention_decode_sm90a_bf16_q24kv4d256p64",
                     "block": [256, 1, 1], "shared_mem": 0, "splits": 38}
PREFILL_GEOMETRY_PATH = os.path.join(REPO, "kernels", "attention", "prefill_geometry.json")
PREFILL_GEOMETRY_KEYS = ("module", "cubin", "entry", "block", "shared_mem", "grid_x", "slots")
# The sm90 prefill kernel's compiled limits and scratch layout (kernels/attention/
# prefill_shape.cuh): work items of 21 query tokens, at most 32 KV chunks per unit and 128
# sequences per launch; counter words: two banks (alternate launches) of 16 fixed + 2 per
# unit (< slots), then one 128-byte Q tensormap per CTA from a 32-word boundary; one partial slot is 128 rows x 256 f32 plus
# 128 x 2 f32 of (max, sum).
H200_PREFILL_BLOCK_TOKENS = 21
H200_PREFILL_MAX_SPLIT = 32
H200_PREFILL_MAX_SEQS = 128
H200_PREFILL_TILE_ROWS = 128
TARGETS = ("gb300-trtllm", "h200")
KINDS = ("decode", "prefill")


class Capacity:
    """What the op is sized for: rows (tokens) per call, sequences per call, context, KV layers,
    and the fixed number of KV splits of the decode launch."""

    def __init__(self, max_rows, max_seqs, max_context, layers, splits, heads_kv=HEADS_KV):
        for name, value in (("max_rows", max_rows), ("max_seqs", max_seqs),
                            ("max_context", max_context), ("layers", layers), ("splits", splits)):
            if not isinstance(value, int) or value < 1:
                raise GenError(f"`{name}` must be a positive integer, got {value!r}")
        # The KV heads this op covers: the whole model's 4, or one rank's 2 of a tensor-
        # parallel pair (the q12kv2 decode entry); the group of 6 query heads stays.
        if heads_kv not in (HEADS_KV, HEADS_KV // 2):
            raise GenError(f"`heads_kv` must be {HEADS_KV} or {HEADS_KV // 2}, got {heads_kv!r}")
        self.heads_kv = heads_kv
        self.heads_q = GROUP * heads_kv
        self.slot_bytes = heads_kv * 2 * HEAD_BYTES  # one token slot, every KV head, K and V
        self.layer_page_bytes = PAGE * self.slot_bytes
        if max_context % PAGE:
            raise GenError(f"`max_context` must be a multiple of the page size {PAGE}, "
                           f"got {max_context}")
        if max_seqs > 65535:
            raise GenError(f"`max_seqs` = {max_seqs} exceeds the grid.z limit 65535")
        self.max_rows = max_rows
        self.max_seqs = max_seqs
        self.max_context = max_context
        self.layers = layers
        self.splits = splits
        self.max_pages = max_context // PAGE
        # FlashInfer's default pool extent when none is given: every sequence's full page row,
        # counted once for K and once for V.
        self.pool_pages = kp.checked_i32("pool pages", self.max_pages * 2 * max_seqs)
        kp.checked_i32("max_context", max_context)
        kp.checked_i32("max_rows", max_rows)
        kp.checked_i32(f"layers * {self.layer_page_bytes}", layers * self.layer_page_bytes)


MODEL_CAPACITY = dict(max_rows=2048, max_seqs=128, max_context=262144, layers=16)


class Launch:
    """The target-specific part of a launch: which binary, which entry, and its geometry."""

    def __init__(self, module, source, sha256, entry, block, shared_mem, splits):
        self.module, self.source, self.sha256, self.entry = module, source, sha256, entry
        self.block, self.shared_mem, self.splits = list(block), shared_mem, splits
        self.grid_x = None  # the h200 prefill kernel's persistent grid
        self.grid_z = "seqs"  # decode: TRTLLM-GEN's grid (splits, KV heads, sequences)


def trtllm_kernel_name(kind):
    if kind == "decode":
        return (f"fmhaSm100fKernel_QkvBfloat16OBfloat16H{HEAD_DIM}PagedKvCausalP{PAGE}"
                f"MultiCtasKvVarSeqQ{DECODE_TILE_Q}Kv{TILE_KV}StaticSwapsAbForGen")
    return (f"fmhaSm103aKernel_QkvBfloat16OBfloat16H{HEAD_DIM}PagedKvCausalP{PAGE}"
            f"VarSeqQ{PREFILL_TILE_Q}Kv{TILE_KV}PersistentContext")


def load_geometry(path=None):
    """Our kernel's geometry (kernels/attention/geometry.json), or the documented fallback while
    the kernel has not recorded one."""
    path = path or GEOMETRY_PATH
    if not os.path.exists(path):
        return dict(GEOMETRY_FALLBACK)
    try:
        with open(path, encoding="utf-8") as f:
            geometry = json.load(f)
    except (OSError, ValueError) as e:
        raise GenError(f"{path}: cannot read geometry: {e}") from e
    keys = set(GEOMETRY_FALLBACK)
    if not isinstance(geometry, dict) or not keys <= set(geometry):
        raise GenError(f"{path}: expected keys {sorted(keys)}, found "
                       f"{sorted(geometry) if isinstance(geometry, dict) else type(geometry).__name__}")
    return geometry


def load_prefill_geometry(path=None):
    """The sm90 prefill kernel's geometry (kernels/attention/prefill_geometry.json)."""
    path = path or PREFILL_GEOMETRY_PATH
    try:
        with open(path, encoding="utf-8") as f:
            geometry = json.load(f)
    except (OSError, ValueError) as e:
        raise GenError(f"{path}: cannot read geometry: {e}") from e
    if not isinstance(geometry, dict) or not set(PREFILL_GEOMETRY_KEYS) <= set(geometry):
        raise GenError(f"{path}: expected keys {sorted(PREFILL_GEOMETRY_KEYS)}, found "
                       f"{sorted(geometry) if isinstance(geometry, dict) else type(geometry).__name__}")
    return geometry


def target_launch(target, kind, geometry=None):
    if target == "gb300-trtllm":
        name = trtllm_kernel_name(kind)
        if name not in TRTLLM_GEN:
            raise GenError(f"no pinned TRTLLM-GEN cubin for `{name}`")
        sha256, threads, smem = TRTLLM_GEN[name]
        return Launch(name, name + ".cubin", sha256, name, [threads, 1, 1], smem,
                      GB300_DEFAULT_SPLITS if kind == "decode" else 1)
    if target == "h200":
        if kind == "prefill":
            g = geometry if geometry is not None else load_prefill_geometry()
            launch = Launch(g["module"], g["cubin"], f"@SHA256:{stem_of(g['cubin'])}@",
                            g["entry"], g["block"], g["shared_mem"], g["slots"])
            launch.grid_x = g["grid_x"]
            return launch
        g = geometry if geometry is not None else load_geometry()
        launch = Launch(g["module"], g["cubin"], f"@SHA256:{stem_of(g['cubin'])}@", g["entry"],
                        g["block"], g["shared_mem"], g["splits"])
        # The sm90 decode kernel's CTAs are persistent per KV head (splits x KV heads of them
        # work, kernels/attention/README.md); a z of `seqs` only adds blocks that leave at once,
        # and those cost 14 us at 128 x 1024 (144.0 -> 129.9 us) and 47 us at 256 x 512.
        launch.grid_z = 1
        return launch
    raise GenError(f"unknown target `{target}`: expected one of {', '.join(TARGETS)}")


def stem_of(cubin):
    return cubin[:-len(".cubin")] if cubin.endswith(".cubin") else cubin


def interface(kv_param):
    return ["out buffer<bf16>", "in buffer<bf16>", kv_param, kv_param, "in buffer<i32>",
            "in buffer<i32>", "in buffer<i32>", "i32", "i32"]


def kv_tensormap(at, param_index, cap):
    # (head dim, slot in page, KV head, page): K and V of one head sit side by side (1024 B),
    # and consecutive pages of one layer are `layers` layer-pages apart. The zero outer dim
    # spans the bound allocation, whose page count belongs to the provider.
    return kp.tensormap(at, param_index, [HEAD_DIM, PAGE, cap.heads_kv, 0],
                        [cap.slot_bytes, 2 * HEAD_BYTES, cap.layers * cap.layer_page_bytes],
                        [TMA_INNER, min(PAGE, TILE_KV), 1, 1])


def o_tensormap(cap, rows_per_cta):
    # (head dim, token, KV head, query head within the group, batch of 1); the batch stride is
    # unused (extent 1) and written as 16, the smallest stride the schema accepts.
    return kp.tensormap(kp.TMA_O, P_OUT, [HEAD_DIM, cap.max_rows, cap.heads_kv, GROUP, 1],
                        [cap.heads_q * HEAD_BYTES, HEAD_BYTES, cap.heads_kv * HEAD_BYTES, 16],
                        [TMA_INNER, rows_per_cta, 1, 1, 1])


def common_scalars(cap):
    """Literal scalars both kinds share, by offset."""
    divisor, multiplier, shift = kp.fast_divisor(GROUP)
    return {
        kp.ATTENTION_WINDOW_SIZE: kp.INT32_MAX,  # no sliding window
        kp.MAX_SEQ_LEN_KV: cap.max_context,
        kp.MAX_NUM_PAGES_PER_SEQ_KV: cap.max_pages,
        kp.NUM_HEADS_KV: cap.heads_kv,
        kp.NUM_HEADS_Q: cap.heads_q,
        kp.NUM_HEADS_Q_PER_KV: GROUP,
        kp.NUM_HEADS_Q_PER_KV_DIVISOR: divisor,
        kp.NUM_HEADS_Q_PER_KV_DIVISOR + 4: multiplier,
        kp.NUM_HEADS_Q_PER_KV_DIVISOR + 12: shift,
        kp.NUM_HIDDEN_ELTS_O: cap.heads_q * HEAD_DIM,
        kp.NUM_PAGES_IN_MEM_POOL: cap.pool_pages,
        kp.NUM_TOKENS_PER_PAGE_LOG2: int(math.log2(PAGE)),
        kp.RESHAPE_FACTOR_KV: 1,  # BF16 KV under BF16 Q needs no box reshape
        kp.OUTPUT_SCALE: kp.f32_bits(1.0),
        kp.SCALE_SOFTMAX_LOG2: kp.f32_bits(math.log2(math.e) / math.sqrt(HEAD_DIM)),
        kp.SCALE_SF_KV: kp.f32_bits(1.0),
        kp.SCALE_SF_O: kp.f32_bits(-1.0),  # FlashInfer's default o_sf_scale; unused for BF16 O
        kp.USE_BLOCK_SPARSE_ATTENTION: kp.shared_idx_word(False, True),
    }


def pointer_fields():
    return [kp.param(kp.PTR_O, P_OUT), kp.param(kp.PTR_PAGE_IDX_KV, P_TABLE),
            kp.param(kp.PTR_SEQ_LENS_KV, P_SEQ_LENS), kp.param(kp.BATCH_SIZE, P_SEQS),
            kp.param(kp.SUM_OF_SEQ_LENS_Q, P_TOKENS)]


def literal_fields(scalars):
    return [kp.i32(at, value) for at, value in sorted(scalars.items())]


def decode_op(cap, launch, kv_param):
    splits = launch.splits
    scalars = common_scalars(cap)
    scalars.update({kp.MAX_SEQ_LEN_Q: 1, kp.MAX_NUM_CTAS_Q: 1, kp.MAX_NUM_CTAS_KV: splits,
                    kp.NUM_TOKENS_PER_CTA_Q: 1})
    fields = [
        # Q as (head dim, query head within the group, KV head, token): one box loads a group.
        kp.tensormap(kp.TMA_Q, P_Q, [HEAD_DIM, GROUP, cap.heads_kv, cap.max_rows],
                     [HEAD_BYTES, GROUP * HEAD_BYTES, cap.heads_q * HEAD_BYTES],
                     [TMA_INNER, GROUP, 1, 1]),
        kv_tensormap(kp.TMA_K, P_K, cap),
        kv_tensormap(kp.TMA_V, P_V, cap),
        o_tensormap(cap, DECODE_TILE_Q),
    ] + pointer_fields() + literal_fields(scalars) + [
        kp.scratch(kp.PTR_MULTI_CTAS_KV_COUNTER, "counter"),
        kp.scratch(kp.PTR_PARTIAL_O, "partial"),
        kp.scratch(kp.PTR_PARTIAL_STATS, "stats"),
    ]
    # One semaphore per (sequence, query head), rounded to 8 so what follows stays 16-B aligned.
    # (The kernel's counter layout is 24 ints per sequence whatever the heads: sized for 24.)
    counters = -(-cap.max_seqs * HEADS_Q // 8) * 8
    per_split = [cap.max_seqs, cap.heads_kv, splits, DECODE_TILE_Q]
    scratch = {"counter": {"dtype": "i32", "shape": [counters]},
               "stats": {"dtype": "f32", "shape": per_split + [2]},  # (max, sum) per row
               "partial": {"dtype": "f32", "shape": per_split + [HEAD_DIM]}}
    grid = [splits, cap.heads_kv, launch.grid_z]
    return op_object(kv_param, scratch, launch, grid, fields)


def prefill_op(cap, launch, kv_param, target="gb300-trtllm"):
    if cap.heads_kv != HEADS_KV:
        raise GenError(f"prefill covers all {HEADS_KV} KV heads; a tensor-parallel rank's "
                       f"{cap.heads_kv} have a decode entry only")
    ctas_q = {"ceil_div": ["tokens", PREFILL_TILE_Q]}
    scalars = common_scalars(cap)
    scalars.update({kp.MAX_NUM_CTAS_KV: 1, kp.NUM_TOKENS_PER_CTA_Q: PREFILL_TILE_Q})
    fields = [
        # Q as (head dim, 1, query head, token): one box loads 128 tokens of one head.
        kp.tensormap(kp.TMA_Q, P_Q, [HEAD_DIM, 1, HEADS_Q, cap.max_rows],
                     [HEAD_BYTES, HEAD_BYTES, HEADS_Q * HEAD_BYTES],
                     [TMA_INNER, 1, 1, PREFILL_TILE_Q]),
        kv_tensormap(kp.TMA_K, P_K, cap),
        kv_tensormap(kp.TMA_V, P_V, cap),
        o_tensormap(cap, PREFILL_TILE_Q),
    ] + pointer_fields() + [
        kp.param(kp.PTR_CUM_SEQ_LENS_Q, P_CU_SEQLENS_Q),
        kp.param(kp.MAX_SEQ_LEN_Q, P_TOKENS),  # the call's rows bound every sequence's rows
        kp.expr(kp.MAX_NUM_CTAS_Q, ctas_q),
    ] + literal_fields(scalars)
    grid = [ctas_q, HEADS_Q, "seqs"]
    if target != "h200":
        return op_object(kv_param, {}, launch, grid, fields)
    return h200_prefill(cap, launch, kv_param, fields)


def h200_prefill_slots(cap, geometry_slots):
    """Partial slots: the geometry's, or fewer when the capacity cannot use them (at most 32
    chunks for each unit the capacity can hold: a unit is <= 21 rows of one sequence and one
    of 4 KV heads, so at most 4 * (max_rows + 20 * sequences) // 21 units)."""
    seqs = min(cap.max_seqs, cap.max_rows)
    units = HEADS_KV * ((cap.max_rows + (H200_PREFILL_BLOCK_TOKENS - 1) * seqs) //
                        H200_PREFILL_BLOCK_TOKENS)
    return max(1, min(geometry_slots, H200_PREFILL_MAX_SPLIT * units))


def h200_prefill(cap, launch, kv_param, fields):
    """The GB300 prefill op for our sm90 kernel: a persistent grid, the slot count at 1156 and
    the split-KV scratch appended to the same pack; every other field unchanged."""
    if cap.max_seqs > H200_PREFILL_MAX_SEQS:
        raise GenError(f"`max_seqs` = {cap.max_seqs}: the h200 prefill kernel takes at most "
                       f"{H200_PREFILL_MAX_SEQS} sequences per launch")
    slots = h200_prefill_slots(cap, launch.splits)
    fields = [kp.i32(f["at"], slots) if f["at"] == kp.MAX_NUM_CTAS_KV else f for f in fields]
    fields += [kp.scratch(kp.PTR_MULTI_CTAS_KV_COUNTER, "counter"),
               kp.scratch(kp.PTR_PARTIAL_O, "partial"),
               kp.scratch(kp.PTR_PARTIAL_STATS, "stats")]
    tmap_word = (2 * (16 + 2 * slots) + 31) // 32 * 32  # two counter banks (prefill_shape.cuh)
    scratch = {"counter": {"dtype": "i32", "shape": [tmap_word + 32 * launch.grid_x]},
               "partial": {"dtype": "f32", "shape": [slots, H200_PREFILL_TILE_ROWS, HEAD_DIM]},
               "stats": {"dtype": "f32", "shape": [slots, H200_PREFILL_TILE_ROWS, 2]}}
    return op_object(kv_param, scratch, launch, [launch.grid_x, 1, 1], fields)


def op_object(kv_param, scratch, launch, grid, fields):
    return {"params": interface(kv_param),
            "impl": {"scratch": scratch,
                     "launches": [{"module": launch.module, "entry": launch.entry,
                                   "params": [f"bytes<{kp.SIZE}>"], "block": launch.block,
                                   "grid": grid, "shared_mem": launch.shared_mem,
                                   "args": [{"pack": {"size": kp.SIZE, "fields": fields}}]}]}}


def op(kind, target, cap, kv_param=KV_STATE, geometry=None):
    """(op name, launch, op object) for one kind on one target. `cap.splits` overrides the
    target's default split count for decode (prefill has none)."""
    launch = target_launch(target, kind, geometry)
    if kind == "decode":
        launch.splits = cap.splits
        return "attn_decode", launch, decode_op(cap, launch, kv_param)
    if kind == "prefill":
        return "attn_prefill", launch, prefill_op(cap, launch, kv_param, target)
    raise GenError(f"unknown kind `{kind}`: expected one of {', '.join(KINDS)}")


def default_splits(target, geometry=None):
    return target_launch(target, "decode", geometry).splits


def fragment(kinds, target, cap, geometry=None, prefill_geometry=None):
    """A `modules` + `ops` merge fragment for the model's 16-layer `in state` KV. `geometry`
    is the h200 decode kernel's, `prefill_geometry` the h200 prefill kernel's."""
    modules, ops = {}, {}
    for kind in kinds:
        name, launch, body = op(kind, target, cap, KV_STATE,
                                prefill_geometry if kind == "prefill" else geometry)
        modules[launch.module] = {"source": launch.source, "sha256": launch.sha256}
        ops[name] = body
    return {"modules": modules, "ops": ops}


def call(kind, label, layer, names, kv_form="state"):
    """One call binding the nine interface params; K of KV layer `layer` sits at layer * 262144
    bytes into the KV region and V 512 bytes after it."""
    k_offset = layer * LAYER_PAGE_BYTES
    return {"label": label, "op": "attn_decode" if kind == "decode" else "attn_prefill",
            "args": [{"buf": names["out"]}, {"buf": names["q"]},
                     {kv_form: names["kv"], "offset": k_offset},
                     {kv_form: names["kv"], "offset": k_offset + HEAD_BYTES},
                     {"buf": names["table"]}, {"buf": names["seq"]}, {"buf": names["cuq"]},
                     {"var": "seqs"}, {"var": "tokens"}]}


def dumps(obj):
    """The seed's JSON style: json.dumps with indent 1 and no trailing newline."""
    return json.dumps(obj, indent=1)


def main(argv=None):
    from . import attention_examples as examples  # imported here: the library part has no cycle
    parser = argparse.ArgumentParser(
        description="Generate the paged-attention ops (or a complete small example manifest) "
                    "for the BF16 Q24/KV4/D256 page-64 profile.")
    parser.add_argument("--target", choices=TARGETS, default="gb300-trtllm",
                        help="emit ops for this target's kernels")
    parser.add_argument("--kind", choices=KINDS, action="append",
                        help="emit this op (repeat for both; default decode)")
    parser.add_argument("--max-rows", type=int, help="size Q/O for this many rows per call")
    parser.add_argument("--max-seqs", type=int, help="size the batch for this many sequences")
    parser.add_argument("--max-context", type=int, help="size page tables for this context")
    parser.add_argument("--layers", type=int, help="set the page stride for this many KV layers")
    parser.add_argument("--splits", type=int, help="override the decode launch's KV splits")
    parser.add_argument("--geometry", help="read the h200 decode kernel geometry from this file")
    parser.add_argument("--prefill-geometry",
                        help="read the h200 prefill kernel geometry from this file")
    parser.add_argument("--example", choices=sorted(examples.EXAMPLES),
                        help="write the complete small example manifest instead of a fragment")
    parser.add_argument("--output", "-o", help="write to this file instead of stdout")
    parser.add_argument("--check", help="compare with this file byte for byte; exit 1 if they differ")
    args = parser.parse_args(argv)
    try:
        geometry = load_geometry(args.geometry) if args.target == "h200" else None
        prefill_geometry = (load_prefill_geometry(args.prefill_geometry)
                            if args.target == "h200" else None)
        if args.example:
            given = [f for f in ("max_rows", "max_seqs", "max_context", "layers", "kind")
                     if getattr(args, f) is not None]
            if given:
                parser.error(f"--example fixes the capacity; drop --{given[0].replace('_', '-')}")
            text = examples.example(args.example, args.target, geometry, args.splits,
                                    prefill_geometry) + "\n"
        else:
            cap = Capacity(*(getattr(args, f) if getattr(args, f) is not None else
                             MODEL_CAPACITY[f] for f in ("max_rows", "max_seqs", "max_context",
                                                         "layers")),
                           args.splits if args.splits is not None else
                           default_splits(args.target, geometry))
            text = dumps(fragment(args.kind or ["decode"], args.target, cap, geometry,
                                  prefill_geometry))
    except GenError as e:
        print(f"attention_op.py: error: {e}", file=sys.stderr)
        return 2
    if args.check:
        argv = list(sys.argv[1:] if argv is None else argv)
        redo = ["--output" if a == "--check" else a for a in argv]
        return check(text, args.check, "tools/gen/attention_op.py " + " ".join(redo))
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def check(text, path, regenerate):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            expected = f.read()
    except OSError as e:
        print(f"attention_op.py: error: {e}", file=sys.stderr)
        return 2
    if expected == text:
        print(f"{path}: identical")
        return 0
    diff = difflib.unified_diff(expected.splitlines(True), text.splitlines(True), path, "generated")
    sys.stderr.writelines(list(diff)[:40])
    print(f"\n{path}: differs from the generator's output; if the generator or its inputs "
          f"(kernels/attention/geometry.json) changed on purpose, regenerate it:\n  {regenerate}",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
