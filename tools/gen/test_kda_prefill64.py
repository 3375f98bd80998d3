"""CPU tests of the prefill op on the 64-token chunk kernels (kernrt.gen.kda_prefill64, selected
by kernrt.gen.kda_ops.prefill_op): which profiles it serves and why not, the pack offsets it
writes against kernels/kda/chunk64_params.h, its grids, scratch and state wiring.

Does not run kernels (validation/kda does) or the manifest verifier (ctest runs it on the
examples).
"""
import os
import re
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import kda as g
from kernrt.gen import kda_ops
from kernrt.gen import kda_prefill64 as c64

KDA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "kda")


def _header():
    with open(os.path.join(KDA_DIR, "chunk64_params.h")) as f:
        return f.read()


def _offsets(struct):
    text = _header()
    off = {m.group(1): int(m.group(2)) for m in re.finditer(
        rf"offsetof\({struct}, (\w+)\) == (\d+)", text)}
    size = int(re.search(rf"sizeof\({struct}\) == (\d+)", text).group(1))
    return off, size


def _fields(launch):
    return {f["at"]: f for f in launch["args"][0]["pack"]["fields"]}


def _kda(**kw):
    base = dict(heads=2, value_heads=4, dim_v=128, g="bf16", gate="softplus")
    base.update(kw)
    return g.Profile("kda", **base)


class Selection(unittest.TestCase):
    def test_auto_takes_c64_where_it_serves(self):
        m = g.dense_prefill_manifest(_kda(), 2, 300)
        self.assertEqual(set(m["modules"]), {"kda_chunk64_prep4", "kda_chunk64_state2"})
        gdn = g.Profile("gdn", heads=2, value_heads=2, g="f32", gate="softplus")
        m = g.varlen_prefill_manifest(gdn, 1000, 8)
        self.assertEqual(set(m["modules"]), {"kda_chunk64_prep_gdn", "kda_chunk64_state2"})

    def test_auto_falls_back_to_c16_with_the_reason(self):
        cases = [(_kda(g="f32"), "KDA g in f32"),
                 (_kda(gate=None), "precomputed log decay"),
                 (g.Profile("gdn", heads=2, value_heads=2, g="bf16", gate="lower_bound",
                            lower_bound=-5.0), "softplus gate only"),
                 (_kda(l2norm=False), "l2norm"),
                 (_kda(beta_sigmoid=True, neg_eigval=True), "allow_neg_eigval")]
        for p, why in cases:
            self.assertIn(why, c64.unsupported(p))
            m = g.dense_prefill_manifest(p, 2, 300)
            self.assertEqual(set(m["modules"]), {"kda_chunk"}, why)
            with self.assertRaisesRegex(g.GenError, "do not serve this profile: .*" + why):
                g.dense_prefill_manifest(p, 2, 300, chunk="c64")
        # context parallel on either kernel; c64's segments are whole 64-token chunks
        m = g.dense_prefill_manifest(_kda(), 1, 4096, cp_segs=4, seg_chunks=64)
        self.assertEqual(set(m["modules"]), {"kda_chunk", "kda_chunk64_prep4", "kda_chunk64_state2"})
        m = g.dense_prefill_manifest(_kda(), 1, 4096, cp_segs=4, seg_chunks=64, chunk="c16")
        self.assertEqual(len(m["ops"]["prefill"]["impl"]["launches"]), 3)
        with self.assertRaisesRegex(g.GenError, "multiple of 4 16-token chunks, got 4 x 6"):
            g.dense_prefill_manifest(_kda(), 1, 4096, cp_segs=4, seg_chunks=6, chunk="c64")
        with self.assertRaisesRegex(g.GenError, "chunk `c32` is not supported"):
            g.dense_prefill_manifest(_kda(), 2, 300, chunk="c32")

    def test_c16_on_request(self):
        m = g.dense_prefill_manifest(_kda(), 2, 300, chunk="c16")
        self.assertEqual(set(m["modules"]), {"kda_chunk"})


class Packs(unittest.TestCase):
    def test_sizes_and_sources(self):
        for struct, size in (("Chunk64Prep4Params", c64.PREP_PACKS["kda"]),
                             ("Chunk64PrepGdnParams", c64.PREP_PACKS["gdn"]),
                             ("Chunk64State2Params", c64.STATE_PACK)):
            self.assertEqual(_offsets(struct)[1], size, struct)
        text = _header()
        self.assertIn(f"kPrepBetaBf16 = {c64.PREP_FLAG_BETA_BF16};", text)
        self.assertIn(f"kPrepGBf16 = {c64.PREP_FLAG_G_BF16};", text)
        for module, (name, smem) in (("kda_chunk64_prep4", c64.PREP_MODULES["kda"]),
                                     ("kda_chunk64_prep_gdn", c64.PREP_MODULES["gdn"])):
            self.assertEqual(module, name)
            with open(os.path.join(KDA_DIR, f"{module}.cu")) as f:
                src = f.read()
            self.assertIn(f"Smem = {smem};", src)
        entries = list(c64.PREP4_ENTRIES.values()) + list(c64.PREP_GDN_ENTRIES.values())
        srcs = ""
        for name in ("kda_chunk64_prep4.cu", "kda_chunk64_prep_gdn.cu"):
            with open(os.path.join(KDA_DIR, name)) as f:
                srcs += f.read()
        for e in entries:
            self.assertIn(e, srcs)
        with open(os.path.join(KDA_DIR, "kda_chunk64_state2.cu")) as f:
            src = f.read()
        self.assertIn(f"kChunk64State2Smem = {c64.STATE_SMEM};", src)

    def test_dense_pool_prefill_fields(self):
        p = _kda(gate="lower_bound", lower_bound=-5.0, beta="bf16", beta_sigmoid=True)
        op = g.prefill_op(p, "pool", init=True, final=True, varlen=False, max_tokens=300,
                          slot_bytes=p.state_bytes + 64)
        prep, state = op["impl"]["launches"]
        names = ["q", "k", "v", "g", "beta", "A_log", "dt_bias", "o", "state", "lines"]
        self.assertEqual(len(op["params"]), len(names))
        off, _ = _offsets("Chunk64Prep4Params")
        f = _fields(prep)
        for name, at in (("q", "q"), ("k", "k"), ("g", "g"), ("beta", "beta"), ("A_log", "a_log"),
                         ("dt_bias", "dt_bias")):
            self.assertEqual(f[off[at]]["param"], names.index(name), name)
        for s in ("kq", "kbt", "tmb", "aqk", "gamma"):
            self.assertEqual(f[off[s]]["scratch"], s)
        self.assertEqual(f[off["lower_bound"]]["f32"], -5.0)
        self.assertEqual(f[off["flags"]]["i32"], c64.PREP_FLAG_BETA_BF16 | c64.PREP_FLAG_G_BF16)
        self.assertEqual(f[off["tokens"]], {"at": off["tokens"], "var": "tokens"})
        self.assertEqual(f[off["chunks"]]["expr"], {"ceil_div": ["tokens", 64]})
        self.assertEqual((f[off["heads"]]["i32"], f[off["group"]]["i32"]), (2, 2))
        self.assertNotIn(off["cu_seqlens"], f)
        self.assertEqual(prep["entry"], "kda_chunk64_prep4_lbgate_sigbeta_sm90a_f16_k128")
        self.assertEqual(prep["grid"], [{"ceil_div": ["tokens", 64]}, 4, "seqs"])
        so, _ = _offsets("Chunk64State2Params")
        f = _fields(state)
        self.assertEqual((f[so["v"]]["param"], f[so["o"]]["param"]), (2, 7))
        self.assertEqual((f[so["x0"]]["param"], f[so["xt"]]["param"]), (8, 8))
        self.assertEqual((f[so["x0_lines"]]["param"], f[so["xt_lines"]]["param"]), (9, 9))
        self.assertEqual((f[so["x0_stride"]]["i64"], f[so["xt_stride"]]["i64"]),
                         (p.state_bytes + 64,) * 2)
        self.assertEqual(state["grid"], [1, 4, "seqs"])
        self.assertEqual(state["entry"], "kda_chunk64_state2_sm90a_f16_k128")
        self.assertNotIn(so["tok"], f)
        # dense scratch: every (sequence, value head, chunk) of the largest call
        self.assertEqual(op["impl"]["scratch"]["kq"], {"dtype": "f16", "shape": ["seqs", 4 * 5, 128 * 128]})

    def test_varlen_dense_state_fields(self):
        p = g.Profile("gdn", heads=2, value_heads=4, dim_v=256, g="f32", gate="softplus")
        op = g.prefill_op(p, "dense", init=False, final=True, varlen=True, max_tokens=1000,
                          max_seqs=8)
        prep, state = op["impl"]["launches"]
        slots = 1000 // 64 + 8 + 1
        self.assertEqual(c64.varlen_slots(1000, 8), slots)
        self.assertEqual(prep["grid"], [slots, 4, 1])
        self.assertEqual(prep["entry"], "kda_chunk64_prep_gdn_sm90a_f16_k128")
        self.assertEqual(op["impl"]["scratch"]["gamma"], {"dtype": "f32", "shape": [slots * 4, 128]})
        off, _ = _offsets("Chunk64PrepGdnParams")
        f = _fields(prep)
        cu = 8  # q k v g beta A_log dt_bias o, then cu_seqlens
        self.assertEqual(f[off["cu_seqlens"]]["param"], cu)
        self.assertEqual(f[off["seqs"]], {"at": off["seqs"], "var": "seqs"})
        self.assertNotIn(off["tokens"], f)
        self.assertEqual(f[off["flags"]]["i32"], 0)
        so, _ = _offsets("Chunk64State2Params")
        f = _fields(state)
        self.assertEqual(f[so["cu_seqlens"]]["param"], cu)
        self.assertNotIn(so["x0"], f)  # no initial state: zeros
        self.assertEqual((f[so["xt"]]["param"], f[so["xt_stride"]]["i64"]), (cu + 1, p.state_bytes))
        self.assertEqual(state["grid"], [2, 4, "seqs"])
        # GDN's state entry: kq (k^, q^ without the decay), the per-token decays, no kbt
        self.assertEqual(state["entry"], "kda_chunk64_state2_gdn_sm90a_f16_k128")
        self.assertEqual(c64.TOK_AT_STATE, so["tok"])
        self.assertNotIn(so["kbt"], f)
        for s in ("kq", "tmb", "aqk", "gamma"):
            self.assertEqual((f[so[s]]["scratch"], _fields(prep)[off[s]]["scratch"]), (s, s))
        self.assertEqual((f[so["tok"]]["scratch"], _fields(prep)[off["tok"]]["scratch"]), ("tok", "tok"))
        self.assertEqual(op["impl"]["scratch"]["tok"], {"dtype": "f32", "shape": [slots * 4, 2 * 64]})
        self.assertNotIn("kbt", op["impl"]["scratch"])
        with open(os.path.join(KDA_DIR, "kda_chunk64_state2.cu")) as src:
            self.assertIn(f"{state['entry']}(const __grid_constant__", src.read())
        with self.assertRaisesRegex(g.GenError, "needs max_tokens and max_seqs"):
            c64.launches(p, {}, True, 1000, None, "dense", False, True, p.state_bytes)

    def test_combine_grid_is_one_wave(self):
        # as many sequence walkers as one wave of 132 SMs holds next to the (V / 16) x HV row
        # tiles, at least one
        self.assertEqual(kda_ops.combine_z(_kda(heads=16, value_heads=16)), 1)  # 128 tiles
        self.assertEqual(kda_ops.combine_z(_kda(dim_v=256)), 2)  # 64 tiles
        self.assertEqual(kda_ops.combine_z(_kda(heads=1, value_heads=1)), 16)  # 8 tiles
        self.assertEqual(kda_ops.combine_z(_kda(heads=16, value_heads=32, dim_v=256)), 1)

    def test_context_parallel_launches(self):
        p = _kda(dim_v=256)
        slot = p.state_bytes + 64
        op = g.prefill_op(p, "pool", init=True, final=True, varlen=True, max_tokens=4096,
                          max_seqs=2, slot_bytes=slot, cp_segs=4, seg_chunks=16)
        prep, order, ph1, comb, ph3 = op["impl"]["launches"]
        so, size = _offsets("Chunk64State2Params")
        z = {"mul": ["seqs", 4]}
        self.assertEqual((ph1["grid"], ph3["grid"]), ([3, 4, z], [2, 4, z]))
        # exact: phase 1's blocks in the order a one-block launch writes first (cp_order_block)
        self.assertEqual((order["module"], order["entry"], order["grid"], order["block"][0]),
                         ("kda_chunk64_state2", c64.ORDER_ENTRY, [1, 1, 1], c64.ORDER_THREADS))
        self.assertEqual(order["args"], ph1["args"])  # the phase's own pack
        self.assertEqual(order["args"][0]["pack"]["size"], size)
        self.assertEqual(so["cp_order"], c64.ORDER_AT_STATE)
        self.assertEqual(_fields(ph1)[so["cp_order"]]["scratch"], "cp_order")
        # phase 1's order, then phase 3's working items, which phase 3 reads
        self.assertEqual(_fields(ph3)[so["cp_order"]]["scratch"], "cp_order")
        self.assertEqual(op["impl"]["scratch"]["cp_order"], {"dtype": "i32", "shape": ["seqs", 8]})
        with open(os.path.join(KDA_DIR, "kda_chunk64_state2.cu")) as src:
            self.assertIn(f"{c64.ORDER_ENTRY}(const __grid_constant__", src.read())
        with open(os.path.join(KDA_DIR, "chunk64_cp_order.cuh")) as src:
            self.assertIn(f"kOrderThreads = {c64.ORDER_THREADS}", src.read())
        # dense sequences are alike: phase 1 takes the same order in closed form (dense_item),
        # no order launch, no cp_order
        dense = g.prefill_op(p, "dense", init=True, final=True, varlen=False, max_tokens=4096,
                             cp_segs=4, seg_chunks=16)
        d_prep, d_ph1, d_comb, d_ph3 = dense["impl"]["launches"]
        self.assertEqual(d_ph1["entry"], "kda_chunk64_state2_sm90a_f16_k128")
        self.assertNotIn("cp_order", dense["impl"]["scratch"])
        self.assertNotIn(so["cp_order"], _fields(d_ph1))
        self.assertNotIn(so["cp_order"], _fields(d_ph3))
        for ln, phase in ((ph1, 1), (ph3, 3)):
            f = _fields(ln)
            self.assertEqual((f[so["cp_phase"]]["i32"], f[so["cp_segs"]]["i32"]), (phase, 4))
            self.assertEqual(f[so["seg_chunks"]]["i32"], 4)  # 16 chunks of 16 = 4 of 64 tokens
            self.assertEqual((f[so["cp_scratch"]]["scratch"], f[so["seqs"]]["var"]), ("cp", "seqs"))
            self.assertEqual(f[so["x0"]]["param"], 9)  # the pool: q k v g beta A_log dt_bias o cu
            # the phases write the final state (phase 3 from the last segment), not the combine
            self.assertEqual((f[so["xt"]]["param"], f[so["xt_lines"]]["param"], f[so["xt_stride"]]["i64"]),
                             (9, 10, slot))
        with open(os.path.join(KDA_DIR, "params.h")) as f:
            text = f.read()
        self.assertIn(f"kFlagCpLastInPhase3 = {c64.FLAG_CP_LAST_IN_PHASE3};", text)
        co = {m.group(1): int(m.group(2)) for m in re.finditer(
            r"offsetof\(KdaChunkParams, (\w+)\) == (\d+)", text)}
        self.assertEqual(int(re.search(r"sizeof\(KdaChunkParams\) == (\d+)", text).group(1)),
                         c64.COMBINE_PACK)
        f = _fields(comb)
        self.assertEqual((comb["module"], comb["entry"]), ("kda_chunk", "kda_cp_combine_sm90a_f32_k128"))
        for name in ("ht", "ht_lines", "ht_stride"):
            self.assertNotIn(co[name], f)
        self.assertEqual(f[co["flags"]]["i32"], c64.FLAG_CP_LAST_IN_PHASE3)
        self.assertEqual((f[co["cu_seqlens"]]["param"], f[co["seg_chunks"]]["i32"],
                          f[co["cp_segs"]]["i32"], f[co["cp_scratch"]]["scratch"]), (8, 16, 4, "cp"))
        self.assertEqual(comb["grid"], [16, 4, 2])  # 16 value rows a block, 132 // 64 walkers
        self.assertEqual((comb["block"][0], comb["shared_mem"]), (256, 139280))
        self.assertEqual(op["impl"]["scratch"]["cp"],
                         {"dtype": "f32", "shape": ["seqs", 4 * 4 * (2 * 256 + 128) * 128]})
        # KDA's context parallel is exact: no transition bounds
        self.assertNotIn("bound", op["impl"]["scratch"])
        self.assertNotIn(so["bound"], _fields(ph1))

    def test_gdn_context_parallel_is_decay_bounded(self):
        p = g.Profile("gdn", heads=2, value_heads=4, g="bf16", gate="softplus")
        for varlen, extent in ((False, ["seqs", 4 * 64, 1]), (True, [c64.varlen_slots(4096, 2) * 4, 1])):
            op = g.prefill_op(p, "dense", init=True, final=True, varlen=varlen, max_tokens=4096,
                              max_seqs=2 if varlen else None, cp_segs=4, seg_chunks=16)
            prep, ph1, comb, ph3 = op["impl"]["launches"]  # no phase-1 order: bounded
            self.assertNotIn("cp_order", op["impl"]["scratch"])
            self.assertEqual(op["impl"]["scratch"]["bound"], {"dtype": "f32", "shape": extent})
            # the combine that skips the transitions phase 1 dropped
            self.assertEqual(comb["entry"], "kda_cp_combine_bounded_sm90a_f32_k128")
            off, size = _offsets("Chunk64PrepGdnParams")
            self.assertEqual(prep["args"][0]["pack"]["size"], size)
            self.assertEqual(_fields(prep)[off["bound"]]["scratch"], "bound")
            so, _ = _offsets("Chunk64State2Params")
            for ln in (ph1, ph3):
                self.assertEqual(_fields(ln)[so["bound"]]["scratch"], "bound")
            # one pass: no bounds written or read
            op = g.prefill_op(p, "dense", init=True, final=True, varlen=varlen, max_tokens=4096,
                              max_seqs=2 if varlen else None)
            prep, state = op["impl"]["launches"]
            self.assertNotIn("bound", op["impl"]["scratch"])
            self.assertNotIn(off["bound"], _fields(prep))
            self.assertNotIn(so["bound"], _fields(state))

    def test_examples_use_both_kernels(self):
        ex = g.examples()
        self.assertIn("kda_chunk64_state2", ex["kda_chain"]["modules"])
        self.assertNotIn("kda_chunk64_state2", ex["gdn_chain"]["modules"])
        self.assertNotIn("kda_chunk64_state2", ex["kda_cp"]["modules"])  # chunk c16 (its CP)


if __name__ == "__main__":
    unittest.main()
