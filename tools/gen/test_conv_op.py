"""CPU tests of tools/gen/conv_op.py: what it refuses at generation and in `check`.

Each test edits one thing of a generated example and asserts the pointer and message.
Does not run kernels (validation/conv does) or the manifest verifier (ctest runs it).
"""
import copy
import os
import re
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import conv as g
from kernrt.gen.conv_examples import examples

HERE = os.path.dirname(os.path.abspath(__file__))


class GenerationRefusals(unittest.TestCase):
    def test_rejects_width_above_four(self):
        with self.assertRaisesRegex(g.GenError, r"W = 5 is not supported.*2\.\.4"):
            g.Profile(2048, width=5)

    def test_rejects_width_one(self):
        with self.assertRaisesRegex(g.GenError, r"W = 1 is not supported"):
            g.Profile(2048, width=1)

    def test_rejects_channels_not_multiple_of_eight(self):
        with self.assertRaisesRegex(g.GenError, r"D = 100 must be a positive multiple of 8"):
            g.Profile(100)

    def test_rejects_short_or_misaligned_row(self):
        with self.assertRaisesRegex(g.GenError, r"`x_row` = 2040 must be >= D = 2048"):
            g.Profile(2048, x_row=2040)
        with self.assertRaisesRegex(g.GenError, r"`y_row` = 2052"):
            g.Profile(2048, y_row=2052)

    def test_rejects_fp32_activations(self):
        with self.assertRaisesRegex(g.GenError, r"x dtype `f32` is not supported"):
            g.Profile(2048, dtype="f32")

    def test_rejects_too_many_steps(self):
        with self.assertRaisesRegex(g.GenError, r"steps = 9 is not supported"):
            g.update_op(g.Profile(512), steps=9)

    def test_rejects_unknown_loaders_and_layouts(self):
        with self.assertRaisesRegex(g.GenError, r"forward loader `tile` is unknown"):
            g.Profile(2048, fwd_kernel="tile")
        with self.assertRaisesRegex(g.GenError, r"decode loader `s8` is unknown"):
            g.Profile(2048, update_kernel="s8")
        with self.assertRaisesRegex(g.GenError, r"state layout `dao` is not supported"):
            g.Profile(2048, state_layout="dao")
        with self.assertRaisesRegex(g.GenError, r"`c4p` has entries for the `fla` state layout only"):
            g.Profile(2048, update_kernel="c4p")

    def test_rejects_verify_over_fla_lines(self):
        with self.assertRaisesRegex(g.GenError, r"verify entries keep our \[D, W-1\] lines"):
            g.update_op(g.Profile(512, state_layout="fla"), steps=4)


class Entries(unittest.TestCase):
    def test_names_and_geometry(self):
        p = g.Profile(4096, state_layout="fla")
        self.assertEqual(p.entry("fwd"), "conv_fwd_ring8x4h_sm90a_bf16_w4")
        self.assertEqual(p.entry("update"), "conv_update_c4p_fla_sm90a_bf16_w4")
        self.assertEqual(p.grid_x("fwd"), 16)  # 4 channels x 64 consumers
        self.assertEqual(p.grid_x("update"), 8)  # 4 channels x 128 threads
        lines = g.Profile(4096)
        self.assertEqual(lines.entry("update"), "conv_update_c4s2p_sm90a_bf16_w4")
        grid = g.update_op(lines)["impl"]["launches"][0]["grid"]
        self.assertEqual(grid, [8, {"ceil_div": ["seqs", 2]}, 1])  # 2 sequences per thread
        grid = g.update_op(p, state="buffer")["impl"]["launches"][0]["grid"]
        self.assertEqual(grid, [8, "seqs", 1])
        self.assertEqual(p.line_bytes, 4096 * 4 * 2)
        self.assertEqual(p.flags, 1 | 2 | 4)
        fwd = g.fwd_op(p, x_strides=(0, 4096), y_strides=(0, 4096))["impl"]["launches"][0]
        self.assertEqual(fwd["block"], [96, 1, 1])  # 64 consumers + the producer warp
        self.assertEqual(fwd["grid"], [16, {"mul": [{"ceil_div": ["tokens", 72]}, 3]}, "seqs"])
        self.assertEqual(fwd["shared_mem"], g.FWD_RING_SMEM["ring8x4h"])

    def test_ring_shared_memory_is_the_kernels(self):
        with open(os.path.join(HERE, "..", "..", "kernels", "conv", "conv_fwd.cu")) as f:
            src = f.read()
        sizes = {name.lower(): int(n) for name, n in
                 re.findall(r"static_assert\(sizeof\(RingOf<(\w+)>\) == (\d+)", src)}
        self.assertEqual(sizes, g.FWD_RING_SMEM, "conv_fwd.cu asserts sizeof(RingOf<L>) per loader")
        cycles = {name.lower(): (int(rows), int(blocks)) for name, rows, _, blocks in
                  re.findall(r"static_assert\((\w+)::kCycle == (\d+) && (\w+)::kPeriod == (\d+)", src)}
        self.assertEqual(cycles, g.FWD_SPAN_CYCLE, "conv_fwd.cu asserts each loader's span cycle")

    def test_fla_layout_sets_the_flag_and_the_line_size(self):
        op = g.fwd_op(g.Profile(512, state_layout="fla"), x_strides=(0, 512), y_strides=(0, 512),
                      states=["init", "final"])
        fields = {f["at"]: f for f in op["impl"]["launches"][0]["args"][0]["pack"]["fields"]}
        self.assertEqual(fields[132]["i32"], 1 | 2 | 4)
        self.assertEqual(fields[104]["i64"], 512 * 4 * 2)
        self.assertEqual(op["params"][-2:], ["in buffer<bf16>", "out buffer<bf16>"])


class Dropins(unittest.TestCase):
    def test_forward_buffers_are_the_call_tensors(self):
        m = g.dropin_manifest("fwd", 2, 100, 512, 4, "bf16", "f32", True, "silu", 100 * 1536, 1536,
                              residual=True, initial_state=True, final_state=True)
        b = m["buffers"]
        self.assertEqual(b["x"]["shape"], [1 + 100 * 1536 + 99 * 1536 + 511])
        self.assertEqual(b["y"]["shape"], [2, 100, 512])
        self.assertEqual(b["initial_state"]["shape"], [2, 512, 4])
        self.assertEqual(b["final_state"]["kind"], "output")
        self.assertEqual(m["vars"], {"tokens": {"max": 100}, "seqs": {"max": 2}})
        self.assertEqual([a["buf"] for a in m["programs"]["main"]["calls"][0]["args"]],
                         ["x", "weight", "bias", "y", "residual", "initial_state", "final_state"])
        self.assertEqual(g.check(m), [])

    def test_update_cache_is_carried_in_place(self):
        m = g.dropin_manifest("update", 64, 1, 4096, 4, x_stride_seq=3 * 4096)
        self.assertEqual(m["buffers"]["cache"], {"dtype": "bf16", "shape": [64, 4096, 4], "kind": "carry"})
        self.assertEqual(m["ops"]["update"]["params"][-1], "inout buffer<bf16>")
        self.assertEqual(m["buffers"]["x"]["shape"], [63 * 3 * 4096 + 4096])

    def test_varlen_forward_needs_one_row(self):
        with self.assertRaisesRegex(g.GenError, r"batch must be 1, got 2"):
            g.dropin_manifest("fwd", 2, 10, 64, 4, varlen_seqs=3)
        m = g.dropin_manifest("fwd", 1, 10, 64, 4, varlen_seqs=3)
        self.assertEqual(m["buffers"]["cu_seqlens"]["shape"], [4])

    def test_rejects_misaligned_strides(self):
        with self.assertRaisesRegex(g.GenError, r"x stride 1540 must be a non-negative multiple of 8"):
            g.dropin_manifest("fwd", 1, 4, 512, 4, x_stride_seq=6160, x_stride_tok=1540)

    def test_ops_call_key_is_the_positional_order(self):
        # kernrt.ops.conv calls dropin_manifest(*key): (kind, B, T, D, W, dtype, weight
        # dtype, bias, act, x_stride_seq, x_stride_tok); act None is no activation
        m = g.dropin_manifest("fwd", 2, 64, 256, 3, "f16", "bf16", False, None, 64 * 320, 320)
        fields = {f["at"]: f for f in m["ops"]["fwd"]["impl"]["launches"][0]["args"][0]["pack"]["fields"]}
        self.assertEqual(fields[132]["i32"], 4)  # fla's lines, no silu, bf16 weight
        self.assertEqual((fields[72]["i64"], fields[80]["i64"]), (64 * 320, 320))
        self.assertEqual(m["buffers"]["x"]["shape"], [64 * 320 + 63 * 320 + 256])


class CallChecks(unittest.TestCase):
    def setUp(self):
        self.ex = examples()

    def problems(self, m):
        return g.check(m)

    def test_examples_are_clean(self):
        for name, m in self.ex.items():
            self.assertEqual(self.problems(m), [], name)

    def test_rejects_weight_of_other_width(self):
        m = copy.deepcopy(self.ex["prefill_decode"])
        m["buffers"]["weight"]["shape"] = [512, 5]
        p = self.problems(m)
        self.assertIn(("/programs/main/calls/0/args/1",
                       "weight `weight` has shape [512, 5], expected [512, 4] (D, W of the op)"), p)

    def test_rejects_weight_of_other_channels(self):
        m = copy.deepcopy(self.ex["prefill_decode"])
        m["buffers"]["weight"]["shape"] = [256, 4]
        self.assertTrue(any("expected [512, 4]" in msg for _, msg in self.problems(m)))

    def test_rejects_misaligned_offset(self):
        m = copy.deepcopy(self.ex["dense_strided"])
        m["programs"]["main"]["calls"][0]["args"][0]["offset"] = 66
        p = self.problems(m)
        self.assertIn(("/programs/main/calls/0/args/0", "offset 66 into `proj` is not 16-byte "
                       "aligned; conv loads and stores 16-byte vectors"), p)

    def test_rejects_view_past_row_end(self):
        m = copy.deepcopy(self.ex["dense_strided"])
        m["programs"]["main"]["calls"][0]["args"][0]["offset"] = 128 * 2
        self.assertIn(("/programs/main/calls/0/args/0",
                       "x view at element 128 of `proj` needs 256 channels, row has 320"),
                      self.problems(m))

    def test_rejects_row_stride_mismatch(self):
        m = copy.deepcopy(self.ex["prefill_decode"])
        m["buffers"]["x"]["shape"] = ["tokens", 1024]
        self.assertIn(("/programs/main/calls/0/args/0",
                       "`x` rows are 1024 elements, but the op strides x by 512"), self.problems(m))

    def test_rejects_overlapping_x_and_y(self):
        m = copy.deepcopy(self.ex["prefill_decode"])
        m["programs"]["main"]["calls"][0]["args"][2] = {"buf": "x"}
        self.assertTrue(any(ptr == "/programs/main/calls/0/args/2" and "must not overlap" in msg
                            for ptr, msg in self.problems(m)))

    def test_rejects_state_line_past_slot(self):
        m = copy.deepcopy(self.ex["prefill_decode"])
        m["programs"]["main"]["calls"][1]["args"][3]["offset"] = 1024
        self.assertIn(("/programs/main/calls/1/args/3", "state `conv` has 3072 bytes per "
                       "sequence, the layer's line needs 4096 (offset + D*3*2)"),
                      self.problems(m))

    def test_rejects_short_cu_seqlens(self):
        m = copy.deepcopy(self.ex["prefill_decode"])
        m["buffers"]["cu_seqlens"]["shape"] = [4]
        self.assertIn(("/programs/main/calls/0/args/3",
                       "cu_seqlens `cu_seqlens` has 4 entries, needs seqs.max + 1 = 5"),
                      self.problems(m))


if __name__ == "__main__":
    unittest.main()
