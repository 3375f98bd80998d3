"""CPU tests of tools/gen/conv_op.py: what it refuses at generation and in `check`.

Each test edits one thing of a generated example and asserts the pointer and message.
Does not run kernels (validation/conv does) or the manifest verifier (ctest runs it).
"""
import copy
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import conv as g


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


class CallChecks(unittest.TestCase):
    def setUp(self):
        self.ex = g.examples()

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
                       "sequence, the layer's line needs 4096 (offset + D*(W-1)*2)"),
                      self.problems(m))

    def test_rejects_short_cu_seqlens(self):
        m = copy.deepcopy(self.ex["prefill_decode"])
        m["buffers"]["cu_seqlens"]["shape"] = [4]
        self.assertIn(("/programs/main/calls/0/args/3",
                       "cu_seqlens `cu_seqlens` has 4 entries, needs seqs.max + 1 = 5"),
                      self.problems(m))


if __name__ == "__main__":
    unittest.main()
