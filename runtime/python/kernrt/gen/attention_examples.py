"""The small complete example manifests: decode, prefill and verify over a two-layer KV buffer.

Owns: the examples the seed describes in its step 4, as complete schema-v4 manifests (vars,
buffers with domains, modules, one op, one program with one call): batch 2 with 1 / 129 / 8
query tokens per sequence; KV buffer `kv` bf16 [22 pages, 2 layers, 64 slots, 4 heads,
2 (K/V), 256] of kind input; 11 page-table entries per sequence (maximum context 704); the
call selects KV layer 1 (K at 262144, V at 262656 bytes into `kv`). Buffer names match the
program_io command line: --in q= --in kv= --in table= --in seq= --in cuq= --out out=.

Does not check: the manifest rules (kernrt-verify does), and it declares no serving-protocol
fills on purpose: these are op fixtures for program_io, not serving manifests.
"""

from . import attention as ao
from .attention_params import GenError

# name -> (op kind, query tokens per sequence)
EXAMPLES = {"decode": ("decode", 1), "prefill": ("prefill", 129), "verify": ("prefill", 8)}
SEQS = 2
MAX_CONTEXT = 704  # 11 pages of 64
LAYERS = 2
LAYER = 1
NAMES = {"out": "out", "q": "q", "kv": "kv", "table": "table", "seq": "seq", "cuq": "cuq"}


def manifest(name, target, geometry=None, splits=None, prefill_geometry=None):
    """The complete example `name` for `target` as a JSON-ready dict (`geometry` is the h200
    decode kernel's, `prefill_geometry` the h200 prefill kernel's)."""
    if name not in EXAMPLES:
        raise GenError(f"unknown example `{name}`: expected one of {', '.join(sorted(EXAMPLES))}")
    kind, per_seq = EXAMPLES[name]
    tokens = per_seq * SEQS
    if splits is None:
        splits = ao.default_splits(target, geometry) if kind == "decode" else 1
    cap = ao.Capacity(tokens, SEQS, MAX_CONTEXT, LAYERS, splits)
    op_name, launch, body = ao.op(kind, target, cap, ao.KV_BUFFER,
                                  prefill_geometry if kind == "prefill" else geometry)
    pages = cap.max_pages * SEQS
    rows = ["tokens", ao.HEADS_Q, ao.HEAD_DIM]
    return {
        "schema_version": 4,
        "model": f"kernrt-example-{name}" + ("-h200" if target == "h200" else ""),
        "vars": {"tokens": {"max": tokens}, "seqs": {"max": SEQS}},
        "buffers": {
            "q": {"dtype": "bf16", "shape": rows, "kind": "input"},
            "kv": {"dtype": "bf16",
                   "shape": [pages, LAYERS, ao.PAGE, ao.HEADS_KV, 2, ao.HEAD_DIM],
                   "kind": "input"},
            # Page ids: rows of `kv`'s first dimension.
            "table": {"dtype": "i32", "shape": ["seqs", cap.max_pages], "kind": "input",
                      "domain": {"index_into": "kv"}},
            # KV length per sequence after this step (the new tokens' K/V are already paged),
            # so at least the step's own query tokens.
            "seq": {"dtype": "i32", "shape": ["seqs"], "kind": "input",
                    "domain": {"min": per_seq, "max": MAX_CONTEXT}},
            # Exclusive prefix sums of query rows, seqs + 1 entries.
            "cuq": {"dtype": "i32", "shape": [SEQS + 1], "kind": "input",
                    "domain": {"min": 0, "max": "tokens", "monotone": True}},
            "out": {"dtype": "bf16", "shape": rows, "kind": "output"},
        },
        "modules": {launch.module: {"source": launch.source, "sha256": launch.sha256}},
        "ops": {op_name: body},
        "programs": {name: {"calls": [ao.call(kind, f"attn_layer_{LAYER}.{name}", LAYER, NAMES,
                                              kv_form="buf")]}},
    }


def example(name, target, geometry=None, splits=None, prefill_geometry=None):
    """The example's text in the seed's JSON style (no trailing newline; the CLI adds one)."""
    return ao.dumps(manifest(name, target, geometry, splits, prefill_geometry))
