"""Tests of the attention op generator (run by ctest, label cpu; stdlib unittest).

Owns: byte-for-byte reproduction of the seed fragments and the shipped call binding, the
h200-vs-gb300 difference contracts (decode: only module, entry, grid, block, shared_mem and,
when the split count differs, the split constant and scratch shapes; prefill: module, entry,
grid, block, shared_mem, the slot count at 1156 and the appended split-KV scratch fields and
entries), capacity regeneration, the
fast-divisor and f32 encodings, the committed examples being the generator's output, and the
examples' TMA footprints against their buffers.

Does not check: the schema rules (the kernrt-verify ctest entries in manifests/ do).
"""

import io
import json
import math
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _package  # noqa: E402,F401  (puts runtime/python on sys.path)
import example_io  # noqa: E402
from kernrt.gen import attention as ao  # noqa: E402
from kernrt.gen import attention_examples as examples  # noqa: E402
from kernrt.gen import attention_params as kp  # noqa: E402
from kernrt.gen.attention_params import GenError  # noqa: E402

REPO = ao.REPO
SHIPPED = os.path.join(REPO, "manifests", "qwen3.8-27b-gb300")
SHARED_SEED = os.path.join(os.path.dirname(REPO), "shared", "corpus", "seed")
SHARED_SEED = os.environ.get("KERNRT_SEED_DIR", SHARED_SEED)


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def model_cap(**overrides):
    c = dict(ao.MODEL_CAPACITY, splits=38)
    c.update(overrides)
    return ao.Capacity(**c)


def diff_paths(a, b, path=""):
    """RFC 6901 pointers of every place where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}/{k}"
            out += [p] if k not in a or k not in b else diff_paths(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in diff_paths(x, y, f"{path}/{i}")]
    return [] if a == b else [path]


def fields_by_offset(op):
    return {f["at"]: f for f in op["impl"]["launches"][0]["args"][0]["pack"]["fields"]}


def footprint(tm):
    """Bytes a tensormap addresses: last element's end (dims innermost first, bf16)."""
    return tm["dims"][0] * 2 + sum((d - 1) * s for d, s in zip(tm["dims"][1:], tm["strides"]))


class SeedReproduction(unittest.TestCase):
    def test_gb300_decode_is_the_seed_fragment_byte_for_byte(self):
        text = ao.dumps(ao.fragment(["decode"], "gb300-trtllm", model_cap()))
        self.assertEqual(text, read(os.path.join(SHIPPED, "decode-ops.json")))
        self.assertFalse(text.endswith("\n"))

    def test_gb300_prefill_is_the_seed_fragment_byte_for_byte(self):
        text = ao.dumps(ao.fragment(["prefill"], "gb300-trtllm", model_cap()))
        self.assertEqual(text, read(os.path.join(SHIPPED, "prefill-ops.json")))

    def test_shipped_copies_equal_the_seed(self):
        if not os.path.isdir(SHARED_SEED) or os.path.samefile(SHARED_SEED, SHIPPED):
            self.skipTest(f"no seed corpus beside the checkout ({SHARED_SEED})")
        for name in ("decode-ops.json", "prefill-ops.json", "call-binding-example.json"):
            with self.subTest(name=name):
                self.assertEqual(read(os.path.join(SHIPPED, name)),
                                 read(os.path.join(SHARED_SEED, name)))

    def test_call_binding_is_the_seed_example(self):
        names = {"out": "attn_out", "q": "q_n", "kv": "kv", "table": "block_table",
                 "seq": "seq_lens", "cuq": "cu_seqlens_q"}
        text = ao.dumps(ao.call("decode", "full_attn_slot_1.decode", 1, names, "state"))
        self.assertEqual(text, read(os.path.join(SHIPPED, "call-binding-example.json")))


class H200Contract(unittest.TestCase):
    GEOMETRY = {"module": "attention_decode", "cubin": "attention_decode.sm90a.cubin",
                "entry": "attention_decode_sm90a_bf16_q24kv4d256p64", "block": [128, 1, 1],
                "shared_mem": 200704, "splits": 38}
    LAUNCH = "/ops/attn_decode/impl/launches/0"

    def pair(self, geometry):
        gb = ao.fragment(["decode"], "gb300-trtllm", model_cap())
        h2 = ao.fragment(["decode"], "h200", model_cap(splits=geometry["splits"]), geometry)
        return gb, h2

    def test_same_splits_differs_only_in_module_entry_geometry(self):
        gb, h2 = self.pair(self.GEOMETRY)
        self.assertEqual(h2["modules"], {"attention_decode": {
            "source": "attention_decode.sm90a.cubin",
            "sha256": "@SHA256:attention_decode.sm90a@"}})
        paths = set(diff_paths(gb["ops"], h2["ops"]))
        allowed = {f"/attn_decode/impl/launches/0/{k}" for k in
                   ("module", "entry", "block/0", "shared_mem", "grid/2")}
        self.assertEqual(paths, allowed)

    def test_other_splits_also_change_split_constant_grid_and_scratch(self):
        geometry = dict(self.GEOMETRY, splits=33)
        gb, h2 = self.pair(geometry)
        launch = "/attn_decode/impl/launches/0"
        paths = set(diff_paths(gb["ops"], h2["ops"]))
        allowed = {f"{launch}/{k}" for k in ("module", "entry", "block/0", "shared_mem",
                                             "grid/0", "grid/2")}
        allowed |= {"/attn_decode/impl/scratch/stats/shape/2",
                    "/attn_decode/impl/scratch/partial/shape/2"}
        split_field = [i for i, f in enumerate(
            h2["ops"]["attn_decode"]["impl"]["launches"][0]["args"][0]["pack"]["fields"])
            if f["at"] == kp.MAX_NUM_CTAS_KV][0]
        allowed.add(f"{launch}/args/0/pack/fields/{split_field}/i32")
        self.assertEqual(paths, allowed)
        fields = fields_by_offset(h2["ops"]["attn_decode"])
        self.assertEqual(fields[kp.MAX_NUM_CTAS_KV]["i32"], 33)
        self.assertEqual(h2["ops"]["attn_decode"]["impl"]["launches"][0]["grid"],
                         [33, 4, 1])

    def test_committed_geometry_keeps_the_contract(self):
        geometry = ao.load_geometry()
        gb, h2 = self.pair(geometry)
        launch = "/attn_decode/impl/launches/0"
        allowed = {f"{launch}/{k}" for k in ("module", "entry", "shared_mem", "grid/2")}
        allowed |= {f"{launch}/block/{i}" for i in range(3)}
        if geometry["splits"] != 38:
            split_field = [i for i, f in enumerate(
                h2["ops"]["attn_decode"]["impl"]["launches"][0]["args"][0]["pack"]["fields"])
                if f["at"] == kp.MAX_NUM_CTAS_KV][0]
            allowed |= {f"{launch}/grid/0", f"{launch}/args/0/pack/fields/{split_field}/i32",
                        "/attn_decode/impl/scratch/stats/shape/2",
                        "/attn_decode/impl/scratch/partial/shape/2"}
        paths = set(diff_paths(gb["ops"], h2["ops"]))
        self.assertLessEqual(paths, allowed)
        self.assertIn(f"{launch}/module", paths)

    PREFILL = {"module": "attention_prefill", "cubin": "attention_prefill.sm90a.cubin",
               "entry": "attention_prefill_sm90a_bf16_q24kv4d256p64", "block": [384, 1, 1],
               "shared_mem": 231679, "grid_x": 132, "slots": 1280}

    def prefill_pair(self, geometry, **cap):
        gb = ao.fragment(["prefill"], "gb300-trtllm", model_cap(**cap))["ops"]["attn_prefill"]
        h2 = ao.fragment(["prefill"], "h200", model_cap(**cap), None, geometry)
        return gb, h2

    def assert_prefill_contract(self, geometry, slots, **cap):
        """The h200 prefill op is the GB300 one with its own launch geometry, plus the split-KV
        scratch: the GB300 pack fields in the same order and values except the slot count at
        1156, then the counter / partial / stats pointers; nothing else differs."""
        gb, h2_fragment = self.prefill_pair(geometry, **cap)
        h2 = h2_fragment["ops"]["attn_prefill"]
        self.assertEqual(h2_fragment["modules"], {geometry["module"]: {
            "source": geometry["cubin"], "sha256": "@SHA256:attention_prefill.sm90a@"}})
        self.assertEqual(h2["params"], gb["params"])
        lg, lh = gb["impl"]["launches"][0], h2["impl"]["launches"][0]
        self.assertEqual(len(h2["impl"]["launches"]), 1)
        self.assertEqual(set(lg), set(lh))
        launch_keys = {"module", "entry", "grid", "block", "shared_mem"}
        for key in set(lg) - launch_keys - {"args"}:
            self.assertEqual(lh[key], lg[key], key)
        self.assertEqual((lh["module"], lh["entry"], lh["block"], lh["shared_mem"]),
                         (geometry["module"], geometry["entry"], geometry["block"],
                          geometry["shared_mem"]))
        self.assertEqual(lh["grid"], [geometry["grid_x"], 1, 1])
        pg, ph = lg["args"][0]["pack"], lh["args"][0]["pack"]
        self.assertEqual(len(lg["args"]), 1)
        self.assertEqual(ph["size"], pg["size"])
        gf, hf = pg["fields"], ph["fields"]
        self.assertEqual(len(hf), len(gf) + 3)
        for a, b in zip(gf, hf):
            if a["at"] == kp.MAX_NUM_CTAS_KV:
                self.assertEqual((a, b), ({"at": 1156, "i32": 1}, {"at": 1156, "i32": slots}))
            else:
                self.assertEqual(b, a)
        self.assertEqual(hf[len(gf):], [{"at": 984, "scratch": "counter"},
                                        {"at": 1008, "scratch": "partial"},
                                        {"at": 1016, "scratch": "stats"}])
        self.assertEqual(gb["impl"]["scratch"], {})
        # Two banks of 16 + 2 slots counter words (prefill_shape.cuh), then the Q tensormaps.
        counter = (2 * (16 + 2 * slots) + 31) // 32 * 32 + 32 * geometry["grid_x"]
        self.assertEqual(h2["impl"]["scratch"], {
            "counter": {"dtype": "i32", "shape": [counter]},
            "partial": {"dtype": "f32", "shape": [slots, 128, 256]},
            "stats": {"dtype": "f32", "shape": [slots, 128, 2]}})

    def test_h200_prefill_differs_only_in_launch_geometry_and_split_scratch(self):
        self.assert_prefill_contract(self.PREFILL, 1280)

    def test_committed_prefill_geometry_keeps_the_contract(self):
        geometry = ao.load_prefill_geometry()
        self.assert_prefill_contract(geometry, geometry["slots"])

    def test_prefill_slots_shrink_with_the_capacity(self):
        # 16 rows of 2 sequences hold at most 4 * (16 + 40) // 21 = 8 units of 32 chunks.
        self.assert_prefill_contract(self.PREFILL, 256, max_rows=16, max_seqs=2)
        self.assert_prefill_contract(dict(self.PREFILL, slots=100), 100, max_rows=16, max_seqs=2)

    def test_h200_prefill_refuses_more_sequences_than_the_kernel_takes(self):
        with self.assertRaisesRegex(GenError, "at most 128 sequences"):
            ao.fragment(["prefill"], "h200", model_cap(max_seqs=129), None, self.PREFILL)

    def test_prefill_geometry_missing_keys_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "prefill_geometry.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"module": "m", "slots": 4}, f)
            with self.assertRaisesRegex(GenError, "expected keys"):
                ao.load_prefill_geometry(path)

    def test_geometry_file_missing_keys_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "geometry.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"module": "m"}, f)
            with self.assertRaisesRegex(GenError, "expected keys"):
                ao.load_geometry(path)


class Capacities(unittest.TestCase):
    def test_every_dependent_value_follows_the_capacity(self):
        cap = ao.Capacity(max_rows=512, max_seqs=32, max_context=131072, layers=2, splits=16)
        body = ao.fragment(["decode"], "gb300-trtllm", cap)["ops"]["attn_decode"]
        f = fields_by_offset(body)
        self.assertEqual(f[kp.TMA_Q]["tensormap"]["dims"], [256, 6, 4, 512])
        self.assertEqual(f[kp.TMA_O]["tensormap"]["dims"], [256, 512, 4, 6, 1])
        for at in (kp.TMA_K, kp.TMA_V):
            self.assertEqual(f[at]["tensormap"]["strides"], [4096, 1024, 2 * 262144])
        self.assertEqual(f[kp.MAX_SEQ_LEN_KV]["i32"], 131072)
        self.assertEqual(f[kp.MAX_NUM_PAGES_PER_SEQ_KV]["i32"], 2048)
        self.assertEqual(f[kp.NUM_PAGES_IN_MEM_POOL]["i32"], 2048 * 2 * 32)
        self.assertEqual(f[kp.MAX_NUM_CTAS_KV]["i32"], 16)
        scratch = body["impl"]["scratch"]
        self.assertEqual(scratch["counter"]["shape"], [32 * 24])
        self.assertEqual(scratch["stats"]["shape"], [32, 4, 16, 8, 2])
        self.assertEqual(scratch["partial"]["shape"], [32, 4, 16, 8, 256])
        self.assertEqual(body["impl"]["launches"][0]["grid"], [16, 4, "seqs"])

    def test_a_tensor_parallel_rank_covers_its_two_kv_heads(self):
        # One rank of two: 12 query heads over 2 KV heads, its own pages (2 heads per slot),
        # the q12kv2 entry; the counters keep the kernel's 24 ints per sequence.
        geometry = dict(ao.load_geometry(), entry="attention_decode_sm90a_bf16_q12kv2d256p64")
        cap = ao.Capacity(max_rows=32, max_seqs=32, max_context=131072, layers=2, splits=16,
                          heads_kv=2)
        _, launch, body = ao.op("decode", "h200", cap, geometry=geometry)
        f = fields_by_offset(body)
        self.assertEqual(f[kp.TMA_Q]["tensormap"]["dims"], [256, 6, 2, 32])
        self.assertEqual(f[kp.TMA_Q]["tensormap"]["strides"], [512, 6 * 512, 12 * 512])
        self.assertEqual(f[kp.TMA_O]["tensormap"]["dims"], [256, 32, 2, 6, 1])
        for at in (kp.TMA_K, kp.TMA_V):
            self.assertEqual(f[at]["tensormap"]["dims"], [256, 64, 2, 0])
            self.assertEqual(f[at]["tensormap"]["strides"], [2048, 1024, 2 * 131072])
        self.assertEqual(f[kp.NUM_HEADS_KV]["i32"], 2)
        self.assertEqual(f[kp.NUM_HEADS_Q]["i32"], 12)
        self.assertEqual(f[kp.NUM_HEADS_Q_PER_KV]["i32"], 6)
        self.assertEqual(f[kp.NUM_HIDDEN_ELTS_O]["i32"], 12 * 256)
        launch0 = body["impl"]["launches"][0]
        self.assertEqual(launch0["entry"], "attention_decode_sm90a_bf16_q12kv2d256p64")
        self.assertEqual(launch0["grid"], [16, 2, 1])
        self.assertEqual(body["impl"]["scratch"]["counter"]["shape"], [32 * 24])
        self.assertEqual(body["impl"]["scratch"]["partial"]["shape"], [32, 2, 16, 8, 256])
        with self.assertRaises(GenError):
            ao.op("prefill", "h200", cap)
        with self.assertRaises(GenError):
            ao.Capacity(max_rows=1, max_seqs=1, max_context=64, layers=1, splits=1, heads_kv=3)

    def test_the_tensor_parallel_manifest_gathers_every_ranks_rows(self):
        from kernrt.gen import tp_decode as tp
        m = tp.tp_manifest(max_seqs=8, max_context=8192)
        self.assertEqual(m["topology"], {"groups": {"tp": 2}})
        self.assertEqual(m["buffers"]["q"]["shape"], ["tokens", 12, 256])
        self.assertEqual(m["states"]["kv"], {"bytes_per_token": 2048})
        self.assertEqual(m["buffers"]["gathered"]["shape"], [2 * 8 * 12 * 256])
        calls = m["programs"]["decode_l0"]["calls"]
        self.assertEqual([c["op"] for c in calls], ["attn_decode", "gather_rows"])
        self.assertEqual(calls[1]["args"][2], {"expr": {"mul": ["tokens", 12 * 256]}})
        launch = m["ops"]["attn_decode"]["impl"]["launches"][0]
        self.assertEqual((launch["entry"], launch["grid"]), (ao.TP2_DECODE_ENTRY, [128, 2, 1]))
        self.assertEqual(m["ops"]["gather_rows"]["impl"]["launches"][0]["entry"], "extern:nccl_allgather_bf16")
        self.assertEqual([list(r) for r in tp.rank_heads(1)], [list(range(12, 24)), [2, 3]])

    def test_counter_rounds_up_to_eight(self):
        cap = ao.Capacity(max_rows=3, max_seqs=3, max_context=64, layers=1, splits=1)
        body = ao.fragment(["decode"], "gb300-trtllm", cap)["ops"]["attn_decode"]
        self.assertEqual(body["impl"]["scratch"]["counter"]["shape"], [72])

    def test_rejects_context_off_the_page_grid(self):
        with self.assertRaisesRegex(GenError, "multiple of the page size 64"):
            ao.Capacity(max_rows=8, max_seqs=2, max_context=700, layers=2, splits=4)

    def test_rejects_pool_beyond_i32(self):
        with self.assertRaisesRegex(GenError, "does not fit an i32"):
            ao.Capacity(max_rows=8, max_seqs=65535, max_context=2**21, layers=1, splits=4)

    def test_rejects_non_positive(self):
        with self.assertRaisesRegex(GenError, "`splits` must be a positive integer"):
            ao.Capacity(max_rows=8, max_seqs=2, max_context=64, layers=2, splits=0)


class Encodings(unittest.TestCase):
    def test_fast_divisor_divides_every_probe(self):
        probes = [0, 1, 5, 6, 7, 11, 12, 2**16 + 3, 2**24 - 1, 2**30 + 7, 2**31 - 1]
        for d in range(2, 65):
            divisor, multiplier, shift = kp.fast_divisor(d)
            self.assertEqual(divisor, d)
            m = multiplier & 0xFFFFFFFF
            for n in probes + [d * k + r for k in (1, 1000, 2**20) for r in (0, d - 1)]:
                if n > 2**31 - 1:
                    continue
                self.assertEqual(((n * m) >> 32) >> shift, n // d, f"n={n} d={d}")

    def test_group_of_six_matches_the_fragment_constants(self):
        self.assertEqual(kp.fast_divisor(6), (6, -1431655765, 2))

    def test_scales(self):
        self.assertEqual(kp.f32_bits(1.0), 1065353216)
        self.assertEqual(kp.f32_bits(-1.0), -1082130432)
        self.assertEqual(kp.f32_bits(math.log2(math.e) / 16), 1035512379)
        self.assertEqual(kp.shared_idx_word(False, True), 256)


class Examples(unittest.TestCase):
    COMMITTED = {("decode", "gb300-trtllm"): "examples/decode.json",
                 ("prefill", "gb300-trtllm"): "examples/prefill.json",
                 ("verify", "gb300-trtllm"): "examples/verify.json",
                 ("decode", "h200"): "examples/h200/decode.json",
                 ("prefill", "h200"): "examples/h200/prefill.json",
                 ("verify", "h200"): "examples/h200/verify.json"}

    def test_committed_examples_are_the_generator_output(self):
        for (name, target), rel in self.COMMITTED.items():
            with self.subTest(example=rel):
                geometry = ao.load_geometry() if target == "h200" else None
                text = examples.example(name, target, geometry) + "\n"
                self.assertEqual(read(os.path.join(REPO, rel)), text,
                                 f"regenerate: tools/gen/attention_op.py --target {target} "
                                 f"--example {name} -o {rel}")

    def test_footprints_fit_the_buffers(self):
        for name, (kind, per_seq) in examples.EXAMPLES.items():
            with self.subTest(example=name):
                m = examples.manifest(name, "gb300-trtllm")
                tokens = per_seq * 2
                self.assertEqual(m["vars"]["tokens"]["max"], tokens)
                body = m["ops"]["attn_" + kind]
                f = fields_by_offset(body)
                q_bytes = tokens * 24 * 256 * 2
                self.assertEqual(footprint(f[kp.TMA_Q]["tensormap"]), q_bytes)
                self.assertEqual(footprint(f[kp.TMA_O]["tensormap"]), q_bytes)
                kv_bytes = math.prod(m["buffers"]["kv"]["shape"]) * 2
                args = m["programs"][name]["calls"][0]["args"]
                for at, arg in ((kp.TMA_K, args[2]), (kp.TMA_V, args[3])):
                    tm = dict(f[at]["tensormap"])
                    inner = footprint(dict(tm, dims=tm["dims"][:-1], strides=tm["strides"][:-1]))
                    spanned = (kv_bytes - arg["offset"] - inner) // tm["strides"][-1] + 1
                    self.assertEqual(spanned, 22)  # every page of the buffer, not one more
                    self.assertEqual(arg["offset"] % 16, 0)
                self.assertEqual(f[kp.MAX_SEQ_LEN_KV]["i32"], 704)
                self.assertEqual(f[kp.MAX_NUM_PAGES_PER_SEQ_KV]["i32"], 11)
                self.assertEqual(m["buffers"]["table"]["shape"], ["seqs", 11])
                self.assertEqual(m["buffers"]["kv"]["shape"], [22, 2, 64, 4, 2, 256])
                self.assertEqual(m["buffers"]["seq"]["domain"], {"min": per_seq, "max": 704})

    def test_layer_one_offsets(self):
        args = examples.manifest("decode", "gb300-trtllm")["programs"]["decode"]["calls"][0]["args"]
        self.assertEqual(args[2], {"buf": "kv", "offset": 262144})
        self.assertEqual(args[3], {"buf": "kv", "offset": 262656})


class ExampleIo(unittest.TestCase):
    """The GPU hook's checker, exercised on the CPU with the reference as the output."""

    def test_reference_passes_and_one_wrong_value_fails(self):
        manifest = os.path.join(REPO, "examples", "decode.json")
        with tempfile.TemporaryDirectory() as work:
            case = example_io.write_inputs(manifest, work)
            self.assertEqual(case["vars"], {"tokens": 2, "seqs": 2})
            self.assertEqual(os.path.getsize(os.path.join(work, "kv.bin")), 22 * 524288)
            self.assertEqual(list(example_io.read_array(os.path.join(work, "cuq.bin"), "i")),
                             [0, 1, 2])
            ref = example_io.reference(manifest, work)
            out = [example_io.to_bf16(x) for x in ref]
            ok, summary = example_io.compare(ref, out)
            self.assertTrue(ok, summary)
            big = max(range(len(ref)), key=lambda i: abs(ref[i]))
            out[big] ^= 0x0040  # the top mantissa bit of the largest value: off by >= 1/4
            ok, summary = example_io.compare(ref, out)
            self.assertFalse(ok)
            self.assertIn("max |err|", summary)

    def test_supports_only_the_attention_examples(self):
        for rel in ("examples/decode.json", "examples/verify.json", "examples/h200/decode.json"):
            self.assertTrue(example_io.supports(os.path.join(REPO, rel)), rel)
        self.assertFalse(example_io.supports(os.path.join(SHIPPED, "decode-ops.json")))
        with tempfile.TemporaryDirectory() as work:
            m = examples.manifest("decode", "gb300-trtllm")
            del m["buffers"]["cuq"]
            path = os.path.join(work, "no_cuq.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(m, f)
            self.assertFalse(example_io.supports(path))

    def test_layer_zero_differs_from_layer_one(self):
        # The reference must read the layer the call selects: layer 0's K/V give other values.
        manifest = os.path.join(REPO, "examples", "decode.json")
        with tempfile.TemporaryDirectory() as work:
            example_io.write_inputs(manifest, work)
            ref = example_io.reference(manifest, work)
            with open(manifest, encoding="utf-8") as f:
                m = json.load(f)
            for i, off in ((2, 0), (3, 512)):
                m["programs"]["decode"]["calls"][0]["args"][i]["offset"] = off
            other = os.path.join(work, "layer0.json")
            with open(other, "w", encoding="utf-8") as f:
                json.dump(m, f)
            ok, _ = example_io.compare(example_io.reference(other, work),
                                       [example_io.to_bf16(x) for x in ref])
            self.assertFalse(ok)


FAKE_PROGRAM_IO = """#!/usr/bin/env python3
import sys
sys.path.insert(0, %r)
sys.dont_write_bytecode = True
import example_io
args = sys.argv[1:]
flags = {}
for key, value in zip(args[::2], args[1::2]):
    flags.setdefault(key, []).append(value)
assert "--graph" in args and flags["--vars"] == ["seqs=2", "tokens=2"], args
ins = dict(v.split("=", 1) for v in flags["--in"])
assert sorted(ins) == sorted(example_io.INPUTS), ins
work = ins["q"].rsplit("/", 1)[0]
out = flags["--out"][0].split("=", 1)[1]
ref = example_io.reference(flags["--manifest"][0], work)
if %r:
    ref[0] += 1.0
example_io.write_array(out, "H", (example_io.to_bf16(x) for x in ref))
"""


class GpuHook(unittest.TestCase):
    """verify_shipped's program_io hook, driven on the CPU by a fake program_io."""

    def run_hook(self, wrong):
        sys.path.insert(0, os.path.join(REPO, "tools"))
        import verify_shipped
        with tempfile.TemporaryDirectory() as build:
            os.makedirs(os.path.join(build, "bin"))
            os.makedirs(os.path.join(build, "cubins", "run"))
            fake = os.path.join(build, "bin", "program_io")
            with open(fake, "w", encoding="utf-8") as f:
                f.write(FAKE_PROGRAM_IO % (HERE, wrong))
            os.chmod(fake, 0o755)
            runnable = [("examples/decode.json", os.path.join(REPO, "examples", "decode.json")),
                        ("fragment", os.path.join(SHIPPED, "decode-ops.json"))]
            out = io.StringIO()
            with redirect_stdout(out):
                failed = verify_shipped.run_examples(build, runnable, lambda: True)
            return failed, out.getvalue()

    def test_matching_output_passes(self):
        failed, out = self.run_hook(False)
        self.assertEqual(failed, 0, out)
        self.assertIn("examples/decode.json: matches the float64 reference", out)
        self.assertNotIn("fragment:", out)  # not an attention example: never run

    def test_wrong_output_fails(self):
        failed, out = self.run_hook(True)
        self.assertEqual(failed, 1, out)
        self.assertIn("DIFFERS FROM", out)


class Cli(unittest.TestCase):
    def run_cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = ao.main(list(argv))
            except SystemExit as e:
                code = e.code
        return code, out.getvalue(), err.getvalue()

    def test_check_passes_on_the_seed(self):
        code, out, _ = self.run_cli("--check", os.path.join(SHIPPED, "decode-ops.json"))
        self.assertEqual(code, 0)
        self.assertIn("identical", out)

    def test_check_fails_on_another_capacity(self):
        code, _, err = self.run_cli("--max-seqs", "32",
                                    "--check", os.path.join(SHIPPED, "decode-ops.json"))
        self.assertEqual(code, 1)
        self.assertIn("differs", err)

    def test_bad_description_exits_2_with_the_reason(self):
        code, _, err = self.run_cli("--max-context", "1000")
        self.assertEqual(code, 2)
        self.assertIn("multiple of the page size", err)

    def test_example_refuses_capacity_flags(self):
        code, _, err = self.run_cli("--example", "decode", "--max-seqs", "4")
        self.assertEqual(code, 2)
        self.assertIn("--example fixes the capacity", err)


if __name__ == "__main__":
    unittest.main()
