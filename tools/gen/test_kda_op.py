"""CPU tests of kernrt.gen.kda: what it refuses at generation and in `check`, and the pack
offsets it writes against kernels/kda/params.h.

Each check test edits one thing of a generated example and asserts the pointer and message.
Does not run kernels (validation/kda does) or the manifest verifier (ctest runs it).
"""
import copy
import os
import re
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import kda as g
from kernrt.gen import kda_chunk64 as g64

PARAMS_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "kda",
                        "params.h")


class GenerationRefusals(unittest.TestCase):
    def test_rejects_key_dim_other_than_128(self):
        with self.assertRaisesRegex(g.GenError, r"K = 64 is not supported.*K = 128"):
            g.Profile(dim_k=64)

    def test_rejects_value_dim(self):
        with self.assertRaisesRegex(g.GenError, r"V = 64 is not supported: expected 128 or 256"):
            g.Profile(dim_v=64)

    def test_rejects_value_heads_not_multiple(self):
        with self.assertRaisesRegex(g.GenError, r"HV = 24 is not a multiple of H = 16"):
            g.Profile(heads=16, value_heads=24)

    def test_rejects_unknown_dtype_and_kind(self):
        with self.assertRaisesRegex(g.GenError, r"g dtype `f16` is not supported"):
            g.Profile(g="f16")
        with self.assertRaisesRegex(g.GenError, r"kind `mamba` is not supported"):
            g.Profile("mamba")

    def test_rejects_option_combinations(self):
        with self.assertRaisesRegex(g.GenError, r"lower_bound needs gate"):
            g.Profile(lower_bound=-5.0)
        with self.assertRaisesRegex(g.GenError, r"allow_neg_eigval needs the in-kernel beta sigmoid"):
            g.Profile(neg_eigval=True)

    def test_rejects_steps(self):
        p = g.Profile()
        with self.assertRaisesRegex(g.GenError, r"steps = 9 is not supported"):
            g.step_op(p, "verify", 9, p.region_bytes())
        with self.assertRaisesRegex(g.GenError, r"steps = 2 is not supported: decode takes 1"):
            g.step_op(p, "decode", 2, p.region_bytes())


class PackMatchesParamsH(unittest.TestCase):
    """The offsets the generator writes are the ones params.h asserts."""

    def asserted(self, struct="KdaStepParams"):
        with open(PARAMS_H) as f:
            text = f.read()
        off = {m.group(2): int(m.group(3)) for m in re.finditer(
            r"offsetof\((\w+), (\w+)\) == (\d+)", text) if m.group(1) == struct}
        size = int(re.search(r"sizeof\(%s\) == (\d+)" % struct, text).group(1))
        return off, size

    def test_chunk_pack_and_smem(self):
        off, size = self.asserted("KdaChunkParams")
        self.assertEqual(size, g.CHUNK_PACK)
        want = {"q": 0, "o": 56, "h0": 64, "ht": 72, "h0_lines": 80, "ht_lines": 88,
                "cu_seqlens": 96, "cp_scratch": 104, "qk_stride_seq": 112, "o_stride_tok": 184,
                "h0_stride": 192, "ht_stride": 200, "tokens": 208, "seqs": 212, "heads": 216,
                "value_heads": 220, "dim_v": 224, "flags": 228, "scale": 232,
                "lower_bound": 236, "seg_chunks": 240, "cp_phase": 244, "cp_segs": 248}
        for name, at in want.items():
            self.assertEqual(off[name], at, name)
        with open(os.path.join(os.path.dirname(PARAMS_H), "chunk_smem.cuh")) as f:
            smem = int(re.search(r"kChunkSmemBytes = (\d+);", f.read()).group(1))
        self.assertEqual(smem, g.CHUNK_SMEM)

    def test_step_pack(self):
        off, size = self.asserted()
        self.assertEqual(size, g.STEP_PACK)
        want = {"q": 0, "k": 8, "v": 16, "g": 24, "beta": 32, "A_log": 40, "dt_bias": 48, "o": 56,
                "state": 64, "lines": 72, "accepted": 80, "qk_stride_seq": 88,
                "state_stride": 168, "record_offset": 176, "heads": 184, "value_heads": 188,
                "dim_v": 192, "seqs": 196, "steps": 200, "flags": 204, "scale": 208,
                "lower_bound": 212, "state_out": 216}
        for name, at in want.items():
            self.assertEqual(off[name], at, name)

    def test_record_formula(self):
        # params.h: step_record(true, 16, 16, 128).bytes == 8 * (16*128*4*2 + 16*4 + 16*128*2)
        self.assertEqual(g.Profile(heads=16).record()["bytes"], 8 * (16 * 128 * 8 + 64 + 16 * 256))
        self.assertEqual(g.Profile("gdn", heads=16, value_heads=32).record()["v"],
                         8 * (16 * 128 * 4 + 32 * 4 + 32 * 4))


class CallChecks(unittest.TestCase):
    def setUp(self):
        self.ex = g.examples()

    def test_examples_are_clean(self):
        for name, m in self.ex.items():
            self.assertEqual(g.check(m), [], name)

    def test_rejects_too_small_pool(self):
        m = copy.deepcopy(self.ex["kda_chain"])
        m["states"]["kda"]["bytes_per_seq"] = 4 * 128 * 128 * 4  # the state only, no record
        p = g.check(m)
        self.assertTrue(any(ptr == "/programs/verify/calls/0/args/8" and
                            "has 262144 bytes per sequence, the layer needs" in msg and
                            "verify record" in msg for ptr, msg in p), p)

    def test_rejects_misshapen_value_buffer(self):
        m = copy.deepcopy(self.ex["kda_chain"])
        m["buffers"]["dec_v"]["shape"] = ["seqs", 4, 64]
        self.assertIn(("/programs/decode/calls/0/args/2",
                       "`dec_v` has shape [4, 4, 64], the op reads [seqs, 4, 128]"), g.check(m))

    def test_rejects_verify_buffer_without_steps_axis(self):
        m = copy.deepcopy(self.ex["gdn_chain"])
        m["buffers"]["ver_q"]["shape"] = ["seqs", 2, 128]
        p = g.check(m)
        self.assertTrue(any(ptr == "/programs/verify/calls/0/args/0" for ptr, _ in p), p)

    def test_rejects_misaligned_state_offset(self):
        m = copy.deepcopy(self.ex["kda_chain"])
        m["programs"]["decode"]["calls"][0]["args"][8]["offset"] = 8
        self.assertIn(("/programs/decode/calls/0/args/8", "offset 8 is not 16-byte aligned"),
                      g.check(m))

    def test_line_tables_index_into_the_pool(self):
        m = self.ex["kda_chain"]
        slot = m["states"]["kda"]["bytes_per_seq"]
        self.assertEqual(m["buffers"]["lines"]["domain"], {"index_into": "kda", "stride": slot})
        self.assertEqual(m["buffers"]["accepted"]["domain"], {"min": 0, "max": 4})


class Chunk64StateEntry(unittest.TestCase):
    """The design entry of kernels/kda/chunk64.md step 1: its pack and shared memory are the
    ones the kernel asserts, its buffers the layouts chunk64_params.h documents."""

    def test_pack_and_smem_match_the_headers(self):
        with open(os.path.join(os.path.dirname(PARAMS_H), "chunk64_params.h")) as f:
            text = f.read()
        off = {m.group(1): int(m.group(2)) for m in re.finditer(
            r"offsetof\(Chunk64StateParams, (\w+)\) == (\d+)", text)}
        self.assertEqual(int(re.search(r"sizeof\(Chunk64StateParams\) == (\d+)", text).group(1)),
                         g64.C64_PACK)
        op = g64.state64_op(2, 128, 3)
        fields = op["impl"]["launches"][0]["args"][0]["pack"]["fields"]
        by_param = {f["param"]: f["at"] for f in fields if "param" in f}
        names = [name for name, _, _, _, _ in g64._BUFS]
        self.assertEqual({names[i]: at for i, at in by_param.items()},
                         {n: off[n] for n in names})
        scalars = {f["at"]: f["i32"] for f in fields if "i32" in f}
        self.assertEqual(scalars, {off["chunks"]: 3, off["dim_v"]: 128})
        with open(os.path.join(os.path.dirname(PARAMS_H), "kda_chunk64_state.cu")) as f:
            smem = int(re.search(r"kChunk64StateSmem = (\d+);", f.read()).group(1))
        self.assertEqual(smem, g64.C64_SMEM)

    def test_buffers_and_grid(self):
        m = g64.state64_manifest(4, 2, 256, 3)
        self.assertEqual(m["buffers"]["kq"]["shape"], ["seqs", 2, 3, 128, 128])
        self.assertEqual(m["buffers"]["o"], {"dtype": "f32", "shape": ["seqs", 2, 3, 64, 256],
                                             "kind": "output"})
        self.assertEqual(m["ops"]["state64"]["impl"]["launches"][0]["grid"], [2, 2, "seqs"])

    def test_forward64_chains_prep_and_state(self):
        m = g64.forward64_manifest(4, 2, 128, 3)  # the default prep is v4
        self.assertEqual([c["op"] for c in m["programs"]["forward64"]["calls"]], ["prep64", "state64"])
        self.assertEqual(m["buffers"]["kq"]["kind"], "output")
        self.assertEqual(m["buffers"]["q"], {"dtype": "bf16", "shape": ["seqs", 192, 1, 128],
                                             "kind": "input"})
        launch = m["ops"]["prep64"]["impl"]["launches"][0]
        self.assertEqual((launch["module"], launch["entry"], launch["grid"]),
                         ("kda_chunk64_prep4", "kda_chunk64_prep4_sm90a_f16_k128", [3, 2, "seqs"]))

    def test_deleted_preps_are_refused(self):
        # prep v2 / v3 (prepared fp32 tokens) are on git tag kda6-chunk64-preps-v2-v3 only
        for prep, what in (("prep", "prep v2"), ("prep3", "prep v3")):
            with self.assertRaisesRegex(g.GenError, rf"prep = '{prep}' is not supported: {what} "
                                        r".*was deleted \(git tag kda6-chunk64-preps-v2-v3\); "
                                        r"expected one of \['prep4'\]"):
                g64.forward64_manifest(1, 1, 128, 1, prep=prep)
            self.assertFalse(os.path.exists(os.path.join(
                os.path.dirname(PARAMS_H), f"kda_chunk64_{prep}.cu")))

    def test_prep4_pack_smem_and_buffers(self):
        with open(os.path.join(os.path.dirname(PARAMS_H), "chunk64_params.h")) as f:
            text = f.read()
        off = {m.group(1): int(m.group(2)) for m in re.finditer(
            r"offsetof\(Chunk64Prep4Params, (\w+)\) == (\d+)", text)}
        self.assertEqual(int(re.search(r"sizeof\(Chunk64Prep4Params\) == (\d+)", text).group(1)),
                         g64.C64_PREP4_PACK)
        with open(os.path.join(os.path.dirname(PARAMS_H), "kda_chunk64_prep4.cu")) as f:
            src = f.read()
        self.assertEqual(int(re.search(r"kChunk64Prep4Smem = (\d+);", src).group(1)), g64.PREPS["prep4"][2])
        self.assertIn(g64.PREPS["prep4"][1], src)
        m = g64.forward64_manifest(4, 4, 256, 4, prep="prep4", heads=2, tokens=200, scale=0.5)
        launch = m["ops"]["prep64"]["impl"]["launches"][0]
        self.assertEqual((launch["module"], launch["entry"], launch["shared_mem"]), g64.PREPS["prep4"])
        self.assertEqual(launch["grid"], [4, 4, "seqs"])
        fields = launch["args"][0]["pack"]["fields"]
        names = [c["buf"] for c in m["programs"]["prep64"]["calls"][0]["args"]]
        self.assertEqual({names[f["param"]]: f["at"] for f in fields if "param" in f},
                         {n: off[n] for n in names})
        lits = {f["at"]: f.get("i32", f.get("f32")) for f in fields if "param" not in f}
        self.assertEqual(lits, {off["scale"]: 0.5, off["tokens"]: 200, off["heads"]: 2,
                                off["group"]: 2, off["chunks"]: 4, off["lower_bound"]: 0.0})
        # the varlen and dtype words after lower_bound stay zero here: dense inputs, f32 beta
        self.assertEqual(off["flags"] + 4, g64.C64_PREP4_PACK)
        self.assertLess(off["lower_bound"], off["cu_seqlens"])
        self.assertEqual(m["buffers"]["q"], {"dtype": "bf16", "shape": ["seqs", 200, 2, 128], "kind": "input"})
        self.assertEqual(m["buffers"]["g"]["shape"], ["seqs", 200, 4, 128])
        self.assertEqual(m["buffers"]["beta"], {"dtype": "f32", "shape": ["seqs", 200, 4], "kind": "input"})
        self.assertEqual(m["buffers"]["dt_bias"]["shape"], [4, 128])
        self.assertEqual(m["buffers"]["kq"], {"dtype": "f16", "shape": ["seqs", 4, 4, 128, 128], "kind": "output"})
        self.assertNotIn("qh", m["buffers"])
        self.assertEqual([c["op"] for c in m["programs"]["forward64"]["calls"]], ["prep64", "state64"])
        self.assertEqual(set(m["modules"]), {"kda_chunk64_prep4", "kda_chunk64_state"})
        # the default scale is K^-0.5, the default T fills the chunks
        d = g64.forward64_manifest(1, 1, 128, 2, prep="prep4")["ops"]["prep64"]["impl"]["launches"][0]
        dl = {f["at"]: f.get("i32", f.get("f32")) for f in d["args"][0]["pack"]["fields"] if "param" not in f}
        self.assertEqual((dl[off["scale"]], dl[off["tokens"]]), (128 ** -0.5, 128))

    def test_prep4_refusals(self):
        with self.assertRaisesRegex(g.GenError, r"HV = 3 is not a multiple of H = 2"):
            g64.forward64_manifest(1, 3, 128, 1, prep="prep4", heads=2)
        with self.assertRaisesRegex(g.GenError, r"T = 64 does not fill NC = 2 chunks"):
            g64.forward64_manifest(1, 1, 128, 2, prep="prep4", tokens=64)

    def test_state2_is_selected_with_its_block_and_smem(self):
        with open(os.path.join(os.path.dirname(PARAMS_H), "kda_chunk64_state2.cu")) as f:
            src = f.read()
        module, entry, threads, smem = g64.STATES["state2"]
        self.assertEqual(int(re.search(r"kChunk64State2Smem = (\d+);", src).group(1)), smem)
        cons = int(re.search(r"kConsumerThreads = (\d+);", src).group(1))
        prod = int(re.search(r"kProducerThreads = (\d+);", src).group(1))
        self.assertEqual(cons + prod, threads)
        self.assertIn(entry, src)
        self.assertIn(f"kernrt_add_cubin({module} SOURCE {module}.cu", open(os.path.join(
            os.path.dirname(PARAMS_H), "CMakeLists.txt")).read())
        ref = g64.state64_op(2, 256, 3)["impl"]["launches"][0]
        launch = g64.state64_op(2, 256, 3, state="state2", tokens=150)["impl"]["launches"][0]
        self.assertEqual((launch["module"], launch["entry"], launch["block"], launch["shared_mem"]),
                         (module, entry, [threads, 1, 1], smem))
        self.assertEqual(launch["grid"], ref["grid"])
        # its pack: Chunk64State2Params = the reference's fields + tokens, pad (chunk64_params.h)
        with open(os.path.join(os.path.dirname(PARAMS_H), "chunk64_params.h")) as f:
            text = f.read()
        off = {m.group(1): int(m.group(2)) for m in re.finditer(
            r"offsetof\(Chunk64State2Params, (\w+)\) == (\d+)", text)}
        size = int(re.search(r"sizeof\(Chunk64State2Params\) == (\d+)", text).group(1))
        self.assertEqual((launch["params"], launch["args"][0]["pack"]["size"]), ([f"bytes<{size}>"], size))
        fields = launch["args"][0]["pack"]["fields"]
        names = [name for name, _, _, _, _ in g64._BUFS]
        self.assertEqual({names[f["param"]]: f["at"] for f in fields if "param" in f},
                         {n: off[n] for n in names})
        self.assertEqual({f["at"]: f["i32"] for f in fields if "i32" in f},
                         {off["chunks"]: 3, off["dim_v"]: 256, off["tokens"]: 150})
        line = 2 * 256 * 128 * 4  # x0 / xt dense [seqs, HV, V, K]: line n
        self.assertEqual({f["at"]: f["i64"] for f in fields if "i64" in f},
                         {off["x0_stride"]: line, off["xt_stride"]: line})
        m = g64.state64_manifest(4, 2, 128, 3, state="state2", tokens=130)
        self.assertEqual(set(m["modules"]), {module})
        self.assertEqual(m["modules"][module]["source"], f"{module}.sm90a.cubin")
        # v and o bf16 in the product layout [seqs, T, HV, V]; every other buffer as the reference's
        self.assertEqual(m["buffers"]["o"], {"dtype": "bf16", "shape": ["seqs", 130, 2, 128], "kind": "output"})
        self.assertEqual(m["buffers"]["v"], {"dtype": "bf16", "shape": ["seqs", 130, 2, 128], "kind": "input"})
        refb = g64.state64_manifest(4, 2, 128, 3)["buffers"]
        self.assertEqual({k: v for k, v in m["buffers"].items() if k not in ("v", "o")},
                         {k: v for k, v in refb.items() if k not in ("v", "o")})
        self.assertEqual(g64.state64_manifest(4, 2, 128, 3, state="state2")["buffers"]["o"]["shape"],
                         ["seqs", 192, 2, 128])
        f = g64.forward64_manifest(4, 2, 128, 3, prep="prep4", state="state2", tokens=140)
        self.assertEqual(set(f["modules"]), {"kda_chunk64_prep4", module})
        self.assertEqual(f["ops"]["state64"]["impl"]["launches"][0]["entry"], entry)
        self.assertEqual(f["buffers"]["o"]["shape"], ["seqs", 140, 2, 128])
        self.assertEqual(f["buffers"]["v"]["shape"], ["seqs", 140, 2, 128])
        ref4 = g64.forward64_manifest(4, 2, 128, 3, prep="prep4", tokens=140)
        self.assertEqual({k: v for k, v in f["buffers"].items() if k not in ("v", "o")},
                         {k: v for k, v in ref4["buffers"].items() if k not in ("v", "o")})
        self.assertNotEqual(f["model"], ref4["model"])
        with self.assertRaisesRegex(g.GenError, r"T = 200 does not fill NC = 3 chunks"):
            g64.state64_manifest(1, 1, 128, 3, state="state2", tokens=200)

    def test_prep4_gate_and_beta_entries(self):
        with open(os.path.join(os.path.dirname(PARAMS_H), "kda_chunk64_prep4.cu")) as f:
            src = f.read()
        base = g64.forward64_manifest(2, 2, 128, 2, prep="prep4")
        seen = set()
        for (gate, beta), entry in g64.PREP4_ENTRIES.items():
            self.assertIn(f"{entry}(const __grid_constant__", src)
            lb = -5.0 if gate == "lower_bound" else None
            m = g64.forward64_manifest(2, 2, 128, 2, prep="prep4", gate=gate, beta=beta, lower_bound=lb)
            launch = m["ops"]["prep64"]["impl"]["launches"][0]
            self.assertEqual(launch["entry"], entry)
            bl = base["ops"]["prep64"]["impl"]["launches"][0]
            self.assertEqual((launch["module"], launch["shared_mem"], launch["grid"], launch["params"]),
                             (bl["module"], bl["shared_mem"], bl["grid"], bl["params"]))
            self.assertEqual(m["buffers"], base["buffers"])
            lits = {f["at"]: f.get("f32") for f in launch["args"][0]["pack"]["fields"] if "f32" in f}
            self.assertEqual(lits[108], 0.0 if lb is None else lb)
            seen.add(m["model"])
        self.assertEqual(len(seen), 4)

    def test_prep4_gate_refusals(self):
        with self.assertRaisesRegex(g.GenError, r"gate = 'relu' is not supported"):
            g64.forward64_manifest(1, 1, 128, 1, prep="prep4", gate="relu")
        with self.assertRaisesRegex(g.GenError, r"beta = 'logit2' is not supported"):
            g64.forward64_manifest(1, 1, 128, 1, prep="prep4", beta="logit2")
        with self.assertRaisesRegex(g.GenError, r"lower_bound = None is not supported"):
            g64.forward64_manifest(1, 1, 128, 1, prep="prep4", gate="lower_bound")
        with self.assertRaisesRegex(g.GenError, r"lower_bound = -6.0 is not supported"):
            g64.forward64_manifest(1, 1, 128, 1, prep="prep4", gate="lower_bound", lower_bound=-6.0)
        with self.assertRaisesRegex(g.GenError, r"lower_bound is given but gate is 'softplus'"):
            g64.forward64_manifest(1, 1, 128, 1, prep="prep4", lower_bound=-5.0)

    def test_gdn_prep_is_product_only(self):
        # GDN's prep leaves the decays to its state entry (kernrt.gen.kda_prefill64)
        with self.assertRaisesRegex(g.GenError, r"prep = 'gdn' is not supported here: GDN's prep "
                                    r"writes k\^, q\^ without the decay and no kbt .*kernrt.gen.kda_prefill64"):
            g64.forward64_manifest(1, 1, 128, 1, prep="gdn")

    def test_refusals(self):
        with self.assertRaisesRegex(g.GenError, r"prep = 'prep5' is not supported"):
            g64.forward64_manifest(1, 1, 128, 1, prep="prep5")
        with self.assertRaisesRegex(g.GenError, r"V = 64 is not supported: expected 128 or 256"):
            g64.state64_manifest(1, 1, 64, 1)
        with self.assertRaisesRegex(g.GenError, r"NC = 0 is not supported"):
            g64.state64_op(1, 128, 0)
        with self.assertRaisesRegex(g.GenError, r"state = 'state3' is not supported"):
            g64.state64_manifest(1, 1, 128, 1, state="state3")
        with self.assertRaisesRegex(g.GenError, r"state = 'state3' is not supported"):
            g64.forward64_manifest(1, 1, 128, 1, state="state3")


if __name__ == "__main__":
    unittest.main()
