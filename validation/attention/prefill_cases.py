"""Cases, manifests, inputs and the float32 reference of the H200 prefill / verify validation.

Owns: the case list (correctness cases over page boundaries, layer offsets, ragged batches,
1-row and 129-row queries, chunked prefill at several prefix lengths, pages in order or not,
split-KV verify; the benchmark shapes of issue 14), the complete schema-v4 manifest around the
generated h200 `attn_prefill` op for one case (kernrt.gen.attention: the op, its pack and
scratch; this file only adds vars, buffers and the one-call program), writing a case's inputs
in place into the runtime's buffers, and the float32 torch reference (bottom-right causal:
row j of a sequence with q_len rows and kv_len keys sees keys < kv_len - q_len + j + 1; GQA 6).

Deliberately does not check: the kernel (prefill_run.py compares), the manifest rules (the
runtime verifies at load). torch is imported by the functions that need it, so the manifest
part runs on a CPU-only machine (prefill_run.py --dry-run).
"""

import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "runtime", "python"))

from kernrt.gen import attention as ao  # noqa: E402

HEADS_Q, HEADS_KV, GROUP, DIM, PAGE = 24, 4, 6, 256, 64
SCALE = 1.0 / math.sqrt(DIM)
NAMES = {"out": "out", "q": "q", "kv": "kv", "table": "table", "seq": "seq", "cuq": "cuq"}
PROGRAM = "attn"


class Case:
    """One batch: per-sequence query rows and KV lengths, the KV layout and the page order."""

    def __init__(self, name, q_lens, kv_lens, layers=2, layer=1, shuffle=True, spare_pages=3,
                 bench=False, q_scale=1.0):
        assert len(q_lens) == len(kv_lens) and all(k >= q for q, k in zip(q_lens, kv_lens))
        self.name, self.q_lens, self.kv_lens = name, list(q_lens), list(kv_lens)
        self.layers, self.layer, self.shuffle, self.bench = layers, layer, shuffle, bench
        self.q_scale = q_scale
        self.seqs = len(q_lens)
        self.tokens = sum(q_lens)
        self.pages_per_seq = [-(-k // PAGE) for k in kv_lens]
        self.max_pages = max(max(self.pages_per_seq), 1)
        self.pages = sum(self.pages_per_seq) + spare_pages

    def visible_pairs(self):
        """(query row, key) pairs attended to: sum over rows of their visible key counts."""
        total = 0
        for q, k in zip(self.q_lens, self.kv_lens):
            # rows j = 0..q-1 see k - q + j + 1 keys (k >= q, so every row sees >= 1)
            total += q * (k - q) + q * (q + 1) // 2
        return total

    def flops(self):
        return 4 * DIM * HEADS_Q * self.visible_pairs()

    def bytes(self):
        """HBM bytes a kernel must move at least: each sequence's K and V once, Q and O."""
        kv = sum(self.kv_lens) * HEADS_KV * 2 * DIM * 2
        return kv + 2 * self.tokens * HEADS_Q * DIM * 2

    def describe(self):
        if self.seqs <= 4:
            return f"q {self.q_lens} kv {self.kv_lens}"
        return (f"{self.seqs} seqs, q {min(self.q_lens)}..{max(self.q_lens)}, "
                f"kv {min(self.kv_lens)}..{max(self.kv_lens)}")


def check_cases(quick=False):
    """Correctness cases: small enough for the float32 reference, each a known edge."""
    cases = [
        Case("one row", [1], [1]),
        Case("page boundaries", [1, 63, 64, 65, 2], [64, 127, 128, 129, 65]),
        Case("129 rows, the seed's lengths", [129, 129], [385, 641]),
        Case("verify 8 rows, the seed's lengths", [8, 8], [385, 641]),
        Case("1-row queries", [1, 1, 1, 1], [1, 1000, 4097, 20000]),
        Case("16-layer stride, layer 15", [40, 7], [3000, 700], layers=16, layer=15),
        Case("layer 0", [33], [1200], layers=2, layer=0),
        Case("pages in order", [100, 21, 22], [4000, 21, 600], shuffle=False),
        Case("ragged batch", [1, 300, 17, 64, 129, 5, 250, 2], [40, 300, 5000, 64, 2000, 9, 4096,
                                                                  70]),
        Case("verify 2-64 rows", [2, 8, 16, 21, 22, 64], [4096, 20000, 777, 64000, 131, 9000]),
        Case("verify split 100k", [8], [100000]),
        # every sequence <= 10 rows, 10 the largest: items of one warpgroup's 60 rows (a Thin
        # path would take these launches); 1 page and 313 pages
        Case("verify 1-10 rows", [10, 1, 4, 9], [64, 3000, 129, 20000]),
        # 8-row verify, ragged long prefixes: several items per CTA (more items than CTAs)
        Case("verify 8x8 over 20k-41k", [8] * 8, [20000 + 3000 * i for i in range(8)]),
        # ragged verify that the balanced split takes (chunks per sequence in proportion to
        # its pages: 132 items of 52-58 pages, 11-20 chunks per unit, one wave)
        Case("verify 5/8/3 rows over 12k-70k", [5, 8, 3], [70000, 12000, 33333]),
        Case("peaky softmax (Q x 8)", [29, 8], [5000, 3000], q_scale=8.0),
        Case("a sequence with no new rows", [5, 0, 7], [100, 50, 7]),
        # 136 units: the first 132 unsplit, the last 4 split in 9 (the tail split)
        Case("tail split 714/8000", [714], [8000]),
    ]
    for prefix in ([0, 1, 63, 64, 1000, 4095] if not quick else [0, 4095]):
        cases.append(Case(f"chunked 512 new over {prefix}", [512], [512 + prefix]))
    cases.append(Case("prefill 2048/2048", [2048], [2048]))
    return cases


def bench_cases(quick=False):
    """Issue 14's benchmark shapes (random disjoint pages; verify lengths 150k-250k)."""
    def spread(b, lo=150000, hi=250000):
        return [lo + (hi - lo) * i // max(b - 1, 1) for i in range(b)]
    cases = [
        Case("prefill 1x2048/2048", [2048], [2048], layers=1, layer=0, bench=True),
        Case("prefill 1x1536/32768", [1536], [32768], layers=1, layer=0, bench=True),
        Case("prefill 8x8192/8192", [8192] * 8, [8192] * 8, layers=1, layer=0, bench=True),
        Case("chunked 1x512 new over 32k", [512], [32768], layers=1, layer=0, bench=True),
        Case("verify 2x8 over 4k", [8, 8], [4096, 4096], layers=1, layer=0, bench=True),
        Case("verify 4x8 over 150k-250k", [8] * 4, spread(4), layers=1, layer=0, bench=True),
        Case("verify 32x8 over 150k-250k", [8] * 32, spread(32), layers=1, layer=0, bench=True),
    ]
    return cases[:5] if quick else cases


# Live alternatives of the prefill cubin (name: entry), checked and timed beside the shipped
# entry of prefill_geometry.json (attention_prefill.cu's Tuning): wide = run 5's kernel
# (463732f: verify split in S equal chunks per unit only, no counter warm-up).
VARIANTS = {
    "wide": "attention_prefill_wide_sm90a_bf16_q24kv4d256p64",
}


def manifest(case, variant=None):
    """The complete manifest of one case: the generated h200 op, sized to the case (with the
    entry of `variant` instead of the shipped one when given)."""
    max_context = case.max_pages * PAGE
    cap = ao.Capacity(max(case.tokens, 1), case.seqs, max_context, case.layers, 1)
    geometry = ao.load_prefill_geometry()
    if variant:
        geometry = dict(geometry, entry=VARIANTS[variant])
    op_name, launch, body = ao.op("prefill", "h200", cap, ao.KV_BUFFER, geometry)
    rows = ["tokens", HEADS_Q, DIM]
    return {
        "schema_version": 4,
        "model": "kernrt-validation-prefill",
        "vars": {"tokens": {"max": max(case.tokens, 1)}, "seqs": {"max": case.seqs}},
        "buffers": {
            "q": {"dtype": "bf16", "shape": rows, "kind": "input"},
            "kv": {"dtype": "bf16",
                   "shape": [case.pages, case.layers, PAGE, HEADS_KV, 2, DIM], "kind": "input"},
            "table": {"dtype": "i32", "shape": ["seqs", case.max_pages], "kind": "input",
                      "domain": {"index_into": "kv"}},
            "seq": {"dtype": "i32", "shape": ["seqs"], "kind": "input",
                    "domain": {"min": 1, "max": max_context}},
            "cuq": {"dtype": "i32", "shape": [case.seqs + 1], "kind": "input",
                    "domain": {"min": 0, "max": "tokens", "monotone": True}},
            "out": {"dtype": "bf16", "shape": rows, "kind": "output"},
        },
        "modules": {launch.module: {"source": launch.source, "sha256": launch.sha256}},
        "ops": {op_name: body},
        "programs": {PROGRAM: {"calls": [ao.call("prefill", f"attn_layer_{case.layer}",
                                                 case.layer, NAMES, kv_form="buf")]}},
    }


def make_inputs(case, seed):
    """Seeded random inputs on the GPU: q [tokens, 24, 256] bf16, the page table (disjoint
    pages, shuffled or in order) [seqs, max_pages] i32, seq lens, cu_seqlens_q."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = (torch.randn(case.tokens, HEADS_Q, DIM, generator=g, device="cuda") *
         case.q_scale).to(torch.bfloat16)
    order = (torch.randperm(case.pages, generator=g, device="cuda") if case.shuffle
             else torch.arange(case.pages, device="cuda"))
    table = torch.zeros(case.seqs, case.max_pages, dtype=torch.int32, device="cuda")
    at = 0
    for b, n in enumerate(case.pages_per_seq):
        table[b, :n] = order[at:at + n].to(torch.int32)
        at += n
    lens = torch.tensor(case.kv_lens, dtype=torch.int32, device="cuda")
    cuq = torch.zeros(case.seqs + 1, dtype=torch.int32)
    cuq[1:] = torch.cumsum(torch.tensor(case.q_lens, dtype=torch.int32), 0)
    return {"q": q, "table": table, "seq": lens, "cuq": cuq.cuda()}


def fill_kv(kv, seed):
    """Random normal bf16 over the whole KV buffer view, in place, in 1 GiB pieces."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    flat = kv.view(-1)
    step = 1 << 29
    for i in range(0, flat.numel(), step):
        piece = flat[i:i + step]
        piece.copy_(torch.randn(piece.numel(), generator=g, device="cuda", dtype=torch.float32))


def kv_views(kv, layer):
    """K and V of one layer as [pages, 64, 4, 256] views (NHD, the page stride of the pool)."""
    return kv[:, layer, :, :, 0, :], kv[:, layer, :, :, 1, :]


def sample_rows(case, per_part=64, max_seqs=4):
    """Row ranges (b, r0, r1) that the benchmark shapes check against the reference (their
    float32 reference in full would take minutes): the first, a middle and the last rows of
    up to `max_seqs` sequences (first, evenly spaced, last)."""
    seqs = sorted({round(i * (case.seqs - 1) / max(max_seqs - 1, 1)) for i in range(max_seqs)})
    out = []
    for b in seqs:
        ql = case.q_lens[b]
        if ql <= 3 * per_part:
            out.append((b, 0, ql))
            continue
        mid = (ql // 2) // per_part * per_part
        out += [(b, 0, per_part), (b, mid, mid + per_part), (b, ql - per_part, ql)]
    return out


def reference(case, inputs, kv, rows=None, rows_per_chunk=512):
    """float32 attention output (bottom-right causal, GQA by KV head): [tokens, 24, 256] for
    every row, or for `rows` (ranges (b, r0, r1) of sequence rows) the concatenated rows and
    their token indices: (index [n], ref [n, 24, 256])."""
    import torch
    k_all, v_all = kv_views(kv, case.layer)
    ranges = rows if rows is not None else [(b, 0, case.q_lens[b]) for b in range(case.seqs)]
    cuq = inputs["cuq"].tolist()
    index = [t for b, r0, r1 in ranges for t in range(cuq[b] + r0, cuq[b] + r1)]
    out = torch.zeros(len(index), HEADS_Q, DIM, dtype=torch.float32, device="cuda")
    at = 0
    for b in sorted({r[0] for r in ranges}):
        ql, kl = case.q_lens[b], case.kv_lens[b]
        pages = inputs["table"][b, :case.pages_per_seq[b]].long()
        k = k_all[pages].reshape(-1, HEADS_KV, DIM)[:kl].float()  # [kl, 4, 256]
        v = v_all[pages].reshape(-1, HEADS_KV, DIM)[:kl].float()
        for rb, ra, rz in ranges:
            if rb != b:
                continue
            for r0 in range(ra, rz, rows_per_chunk):
                r1 = min(rz, r0 + rows_per_chunk)
                out[at:at + r1 - r0] = _rows(inputs["q"], cuq[b], ql, kl, k, v, r0, r1)
                at += r1 - r0
        del k, v
    if rows is None:
        return out
    return torch.tensor(index, dtype=torch.long, device="cuda"), out


def _rows(q_all, q0, ql, kl, k, v, r0, r1):
    """Reference rows [r0, r1) of one sequence: [r1 - r0, 24, 256] f32."""
    import torch
    q = q_all[q0 + r0:q0 + r1].float().view(r1 - r0, HEADS_KV, GROUP, DIM)
    s = torch.einsum("rhgd,khd->hgrk", q, k) * SCALE
    rows = torch.arange(r0, r1, device="cuda").view(-1, 1)
    keys = torch.arange(kl, device="cuda").view(1, -1)
    s.masked_fill_((keys >= kl - ql + rows + 1).view(1, 1, r1 - r0, kl), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("hgrk,khd->rhgd", p, v).reshape(r1 - r0, HEADS_Q, DIM)


def diagnose(case, got, ref):
    """Where a failing output is wrong: per query head and per row block of 21 tokens (the
    kernel's item rows), so that a layout or schedule bug shows its shape."""
    import torch
    g = got.float()
    bad = ~torch.isclose(g, ref, atol=0.02, rtol=0.02) | ~torch.isfinite(g)
    per_row = bad.any(dim=-1)  # [tokens, 24]
    heads = per_row.float().mean(dim=0)
    cuq = [0]
    for q in case.q_lens:
        cuq.append(cuq[-1] + q)
    blocks = {}
    for b in range(case.seqs):
        for k in range(0, case.q_lens[b], 21):
            frac = float(per_row[cuq[b] + k:cuq[b] + min(k + 21, case.q_lens[b])].float().mean())
            if frac > 0:
                blocks[f"s{b}b{k // 21}"] = round(frac, 3)
    return {"bad_frac": float(per_row.float().mean()),
            "nan_rows": int((~torch.isfinite(g)).any(dim=-1).sum()),
            "bad_by_head": [round(float(x), 2) for x in heads],
            "bad_blocks": dict(list(blocks.items())[:24]),
            "first_bad": [int(x) for x in torch.nonzero(per_row)[:4].flatten().tolist()]}
