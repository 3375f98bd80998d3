"""Tensor-parallel paged decode over the ranks of topology group `tp` (issue 17's example).

Owns: one rank's manifest of a two-rank decode: the KV heads split 2 + 2 (rank r holds KV heads
2r, 2r + 1 and their 12 query heads 12r .. 12r + 11), each rank its own KV pages, the decode
op of kernrt.gen.attention for 2 KV heads (the q12kv2 entry), then an NCCL all-gather of the
rank's output into `gathered`: [rank][tokens][12][256] bf16, rank-major, the first
2 x tokens x 12 x 256 elements. Every rank loads the same manifest (the runtime compares
their hashes); only LoadOptions::ranks differs. Program `decode_l<layer>`.
`full_heads(gathered, tokens)` puts the gathered rows back in the model's head order
[tokens][24][256]. Does not check: the manifest rules (kernrt-verify does) or kernel
behaviour. Python 3 standard library only.
"""
from . import attention as ao
from . import attention_manifest as am

RANKS = 2
HEADS_KV_PER_RANK = ao.HEADS_KV // RANKS  # 2
HEADS_Q_PER_RANK = ao.HEADS_Q // RANKS  # 12
ROW = HEADS_Q_PER_RANK * ao.HEAD_DIM  # one token's output elements on one rank


def tp_manifest(max_seqs, max_context, layers=1, splits=128, model="kernrt-tp2-decode"):
    """The manifest every rank loads (a dict; pin it with kernrt.gen.pin). splits: partial
    slots per (sequence, KV head); with 2 KV heads, 128 (the kernel's cap) fills two CTAs
    per SM of the H200's 132 where the whole model's 66 do for 4."""
    m = am.decode_manifest(max_seqs, max_context, layers, "h200", splits=splits, model=model,
                           heads_kv=HEADS_KV_PER_RANK)
    m["topology"] = {"groups": {"tp": RANKS}}
    m["buffers"]["gathered"] = {"dtype": "bf16", "shape": [RANKS * max_seqs * ROW], "kind": "output"}
    m["ops"]["gather_rows"] = {
        "params": ["in buffer<bf16>", "out buffer<bf16>", "i64"],
        "impl": {"launches": [{"entry": "extern:nccl_allgather_bf16",
                               "params": ["in buffer<bf16>", "out buffer<bf16>", "i64", "i32"],
                               "args": [{"param": 0}, {"param": 1}, {"param": 2},
                                        {"rank": "tp"}]}]}}
    gather = {"op": "gather_rows", "args": [{"buf": "out"}, {"buf": "gathered"},
                                            {"expr": {"mul": ["tokens", ROW]}}]}
    for name, program in m["programs"].items():
        if name.startswith("decode_l"):
            program["calls"].append(gather)
    return m


def rank_heads(rank):
    """(query heads, KV heads) of the model that `rank` holds, as ranges."""
    return (range(rank * HEADS_Q_PER_RANK, (rank + 1) * HEADS_Q_PER_RANK),
            range(rank * HEADS_KV_PER_RANK, (rank + 1) * HEADS_KV_PER_RANK))


def full_heads(gathered, tokens):
    """[tokens][24][256] from the gathered [rank][tokens][12][256] (anything with reshape /
    permute, e.g. a torch tensor)."""
    g = gathered[:RANKS * tokens * ROW].reshape(RANKS, tokens, HEADS_Q_PER_RANK, ao.HEAD_DIM)
    return g.permute(1, 0, 2, 3).reshape(tokens, ao.HEADS_Q, ao.HEAD_DIM)
