#!/usr/bin/env python3
"""Inputs and a float64 reference for the small attention examples (program_io fixtures).

Owns: writing seeded random raw inputs for one example manifest (q, kv, table, seq, cuq as
little-endian bf16 / i32 files named like the program_io flags), and checking an `out.bin`
that program_io wrote against a float64 paged-attention reference computed from those same
files: causal, bottom-right aligned (query row j of a sequence sees KV positions up to
kv_len - q_len + j), GQA 6 (query head h reads KV head h // 6), scale 1/sqrt(256), K and V of
the KV layer the manifest's call selects. Gates as the seed's validation: every value finite,
max |error| < 0.02 and relative L2 error < 0.02, over the first tokens * 24 * 256 values.

Does not check: anything beyond the live rows, timing, or the manifest rules. Pure Python,
or numpy when it is installed (the prefill example takes minutes in pure Python, a second
with numpy; both are float64).
"""

import argparse
import array
import json
import math
import os
import random
import struct
import sys

INPUTS = ("q", "kv", "table", "seq", "cuq")
HEADS_Q, HEADS_KV, HEAD_DIM, PAGE = 24, 4, 256, 64
GROUP = HEADS_Q // HEADS_KV
KV_LENS = (385, 641)  # the seed's two-sequence example
MAX_ABS, MAX_REL_L2 = 0.02, 0.02
_BF16 = None


def bf16_table():
    """float value of every bf16 bit pattern."""
    global _BF16
    if _BF16 is None:
        _BF16 = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in range(65536)]
    return _BF16


def to_bf16(x):
    """Round-to-nearest-even bf16 bit pattern of a float."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def random_bf16(rng, n):
    """n seeded random bf16 bit patterns: random sign and mantissa, exponent chosen so that
    magnitudes lie in [2^-7, 2); every element differs (no zeros, no repeating pool)."""
    raw = array.array("H", rng.randbytes(2 * n))
    return [(r & 0x807F) | ((120 + ((r >> 7) & 7)) << 7) for r in raw]


def write_array(path, typecode, values):
    a = array.array(typecode, values)
    if sys.byteorder != "little":
        a.byteswap()
    with open(path, "wb") as f:
        f.write(a.tobytes())


def read_array(path, typecode):
    a = array.array(typecode)
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return a


def supports(manifest_path):
    """Whether this checker knows the manifest: one attention op over the example buffers."""
    try:
        with open(manifest_path, encoding="utf-8") as f:
            m = json.load(f)
        ops = set(m.get("ops", {}))
        return (set(INPUTS) | {"out"}) <= set(m.get("buffers", {})) and \
            bool(ops) and ops <= {"attn_decode", "attn_prefill"} and len(m["programs"]) == 1
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def describe(manifest_path):
    """What the example needs from its manifest: vars, shapes and the call's K/V offsets."""
    with open(manifest_path, encoding="utf-8") as f:
        m = json.load(f)
    (program,) = m["programs"].values()
    (call,) = program["calls"]
    tokens, seqs = m["vars"]["tokens"]["max"], m["vars"]["seqs"]["max"]
    kv_shape = m["buffers"]["kv"]["shape"]  # [pages, layers, slots, heads, 2, dim]
    return {"vars": {"tokens": tokens, "seqs": seqs}, "q_len": tokens // seqs,
            "pages": kv_shape[0], "layers": kv_shape[1],
            "pages_per_seq": m["buffers"]["table"]["shape"][1],
            "k_offset": call["args"][2]["offset"] // 2, "v_offset": call["args"][3]["offset"] // 2}


def write_inputs(manifest_path, work, seed=2026, kv_lens=None):
    """Seeded inputs in `work`; kv_lens (one KV length per sequence) defaults to the seed's."""
    case = describe(manifest_path)
    os.makedirs(work, exist_ok=True)
    rng = random.Random(seed)
    seqs, q_len = case["vars"]["seqs"], case["q_len"]
    if kv_lens is None:
        lens = list(KV_LENS[:seqs]) + [KV_LENS[-1]] * max(0, seqs - len(KV_LENS))
    else:
        lens = list(kv_lens)
        most = case["pages_per_seq"] * PAGE
        if len(lens) != seqs or any(not q_len <= n <= most for n in lens):
            raise ValueError(f"--kv-lens needs {seqs} lengths in [{q_len}, {most}], got {lens}")
    pages = list(range(case["pages"]))
    rng.shuffle(pages)  # disjoint, scattered pages per sequence
    per = case["pages_per_seq"]
    table = [pages[(b * per + i) % len(pages)] for b in range(seqs) for i in range(per)]
    kv_elems = case["pages"] * case["layers"] * PAGE * HEADS_KV * 2 * HEAD_DIM
    write_array(os.path.join(work, "q.bin"), "H",
                random_bf16(rng, seqs * q_len * HEADS_Q * HEAD_DIM))
    write_array(os.path.join(work, "kv.bin"), "H", random_bf16(rng, kv_elems))
    write_array(os.path.join(work, "table.bin"), "i", table)
    write_array(os.path.join(work, "seq.bin"), "i", lens)
    write_array(os.path.join(work, "cuq.bin"), "i", [b * q_len for b in range(seqs + 1)])
    return case


def reference(manifest_path, work):
    """float64 attention output [tokens * 24 * 256] from the input files in `work` (numpy when
    it is installed: the prefill example takes minutes in pure Python)."""
    try:
        import numpy
    except ImportError:
        return reference_python(manifest_path, work)
    return reference_numpy(numpy, manifest_path, work)


def reference_numpy(np, manifest_path, work):
    """The same float64 reference as reference_python, vectorised over rows and keys."""
    case = describe(manifest_path)
    lut = np.array(bf16_table(), dtype=np.float64)
    q = lut[np.frombuffer(open(os.path.join(work, "q.bin"), "rb").read(), dtype="<u2")]
    kv = np.frombuffer(open(os.path.join(work, "kv.bin"), "rb").read(), dtype="<u2")
    table = np.frombuffer(open(os.path.join(work, "table.bin"), "rb").read(), dtype="<i4")
    lens = np.frombuffer(open(os.path.join(work, "seq.bin"), "rb").read(), dtype="<i4")
    cuq = np.frombuffer(open(os.path.join(work, "cuq.bin"), "rb").read(), dtype="<i4")
    seqs, per = case["vars"]["seqs"], case["pages_per_seq"]
    slot_elems = HEADS_KV * 2 * HEAD_DIM
    page_elems = case["layers"] * PAGE * slot_elems
    q = q[:case["vars"]["tokens"] * HEADS_Q * HEAD_DIM].reshape(-1, HEADS_Q, HEAD_DIM)
    out = np.zeros(q.shape, dtype=np.float64)
    scale = 1.0 / math.sqrt(HEAD_DIM)
    for b in range(seqs):
        kv_len, q_len = int(lens[b]), int(cuq[b + 1] - cuq[b])
        p = np.arange(kv_len)
        base = table[b * per + p // PAGE].astype(np.int64) * page_elems + (p % PAGE) * slot_elems
        for h_kv in range(HEADS_KV):
            at = base + h_kv * 2 * HEAD_DIM
            cols = np.arange(HEAD_DIM)
            keys = lut[kv[(at + case["k_offset"])[:, None] + cols]]
            values = lut[kv[(at + case["v_offset"])[:, None] + cols]]
            rows = q[cuq[b]:cuq[b + 1], h_kv * GROUP:(h_kv + 1) * GROUP]  # [q_len, 6, 256]
            s = scale * np.einsum("rgd,kd->rgk", rows, keys)
            visible = kv_len - q_len + np.arange(q_len) + 1
            masked = np.arange(kv_len)[None, :] >= visible[:, None]  # [q_len, kv_len]
            s[np.broadcast_to(masked[:, None, :], s.shape)] = -np.inf
            w = np.exp(s - s.max(axis=-1, keepdims=True))
            out[cuq[b]:cuq[b + 1], h_kv * GROUP:(h_kv + 1) * GROUP] = \
                np.einsum("rgk,kd->rgd", w, values) / w.sum(axis=-1, keepdims=True)
    return out.reshape(-1).tolist()


def reference_python(manifest_path, work):
    """float64 attention output [tokens * 24 * 256] from the input files in `work`."""
    case = describe(manifest_path)
    lut = bf16_table()
    q = read_array(os.path.join(work, "q.bin"), "H")
    kv = read_array(os.path.join(work, "kv.bin"), "H")
    table = read_array(os.path.join(work, "table.bin"), "i")
    lens = read_array(os.path.join(work, "seq.bin"), "i")
    cuq = read_array(os.path.join(work, "cuq.bin"), "i")
    seqs, per = case["vars"]["seqs"], case["pages_per_seq"]
    slot_elems = HEADS_KV * 2 * HEAD_DIM
    page_elems = case["layers"] * PAGE * slot_elems
    scale = 1.0 / math.sqrt(HEAD_DIM)
    out = [0.0] * (case["vars"]["tokens"] * HEADS_Q * HEAD_DIM)
    for b in range(seqs):
        kv_len, q_len = lens[b], cuq[b + 1] - cuq[b]
        for h_kv in range(HEADS_KV):
            keys, values = [], []
            for p in range(kv_len):
                base = table[b * per + p // PAGE] * page_elems + (p % PAGE) * slot_elems \
                    + h_kv * 2 * HEAD_DIM
                keys.append([lut[x] for x in kv[base + case["k_offset"]:
                                                base + case["k_offset"] + HEAD_DIM]])
                values.append([lut[x] for x in kv[base + case["v_offset"]:
                                                  base + case["v_offset"] + HEAD_DIM]])
            for j in range(q_len):
                t = cuq[b] + j
                visible = kv_len - q_len + j + 1
                for g in range(GROUP):
                    h = h_kv * GROUP + g
                    qo = (t * HEADS_Q + h) * HEAD_DIM
                    qv = [lut[x] for x in q[qo:qo + HEAD_DIM]]
                    s = [scale * sum(map(float.__mul__, qv, k)) for k in keys[:visible]]
                    top = max(s)
                    w = [math.exp(x - top) for x in s]
                    total = sum(w)
                    acc = [0.0] * HEAD_DIM
                    for wi, v in zip(w, values):
                        acc = list(map(lambda a, x, c=wi: a + c * x, acc, v))
                    out[qo:qo + HEAD_DIM] = [a / total for a in acc]
    return out


def compare(ref, got):
    """(ok, summary) of bf16 output bit patterns against the float64 reference."""
    lut = bf16_table()
    if len(got) < len(ref):
        return False, f"output has {len(got)} values, expected at least {len(ref)}"
    vals = [lut[x] for x in got[:len(ref)]]
    if not all(math.isfinite(v) for v in vals):
        return False, "non-finite output"
    err = [v - r for v, r in zip(vals, ref)]
    max_abs = max(abs(e) for e in err)
    rel = math.sqrt(sum(e * e for e in err) / max(sum(r * r for r in ref), 1e-300))
    ok = max_abs < MAX_ABS and rel < MAX_REL_L2
    return ok, f"max |err| {max_abs:.3g} (gate {MAX_ABS}), rel L2 {rel:.3g} (gate {MAX_REL_L2})"


def check(manifest_path, work):
    return compare(reference(manifest_path, work), read_array(os.path.join(work, "out.bin"), "H"))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write inputs for, or check the output of, "
                                                 "a small attention example.")
    parser.add_argument("action", choices=("inputs", "check", "reference"),
                        help="write inputs, check out.bin, or write the reference as out.bin")
    parser.add_argument("manifest", help="the example manifest (or its pinned copy)")
    parser.add_argument("work", help="directory of the .bin files")
    parser.add_argument("--kv-lens", metavar="N,N,...",
                        help="inputs: the KV length of each sequence (default: the seed's "
                             f"{','.join(map(str, KV_LENS))})")
    args = parser.parse_args(argv)
    if args.action == "inputs":
        try:
            lens = None if args.kv_lens is None else [int(x) for x in args.kv_lens.split(",")]
            case = write_inputs(args.manifest, args.work, kv_lens=lens)
        except ValueError as e:
            parser.error(str(e))
        print(" ".join(f"--vars {k}={v}" for k, v in sorted(case["vars"].items())))
        return 0
    if args.action == "reference":
        write_array(os.path.join(args.work, "out.bin"), "H",
                    (to_bf16(x) for x in reference(args.manifest, args.work)))
        return 0
    ok, summary = check(args.manifest, args.work)
    print(("ok: " if ok else "FAILED: ") + summary)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
