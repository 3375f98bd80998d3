"""CPU tests of the context-parallel geometry (kernrt.gen.kda_cp_plan): the segment rule that
kernels/kda/kda_chunk64_state2.cu's plan_of applies, and the plan its schedule model picks.

The model's times are checked against the device on the benches (validation/kda); here only
its arithmetic and the choices that follow from it.
"""
import unittest
from unittest import mock

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import kda_cp_plan as cp


class Segments(unittest.TestCase):
    def test_first_segment_takes_the_rest(self):
        self.assertEqual(cp.segments(512, 9, 55), [72] + [55] * 8)
        self.assertEqual(cp.segments(512, 8, 64), [64] * 8)

    def test_short_sequences_fill_from_the_end(self):
        # segment 0 takes what is left: the later segments are all L (phase 3's blocks equal)
        self.assertEqual(cp.segments(100, 9, 55), [45, 55])
        self.assertEqual(cp.segments(27, 4, 4), [15, 4, 4, 4])  # the varlen check's 1699 tokens
        self.assertEqual(cp.segments(9, 4, 4), [1, 4, 4])
        self.assertEqual(cp.segments(8, 4, 4), [4, 4])
        self.assertEqual(cp.segments(2, 4, 4), [2])
        self.assertEqual(cp.segments(0, 4, 4), [0])

    def test_segments_cover_the_sequence(self):
        for chunks in range(0, 300, 7):
            for segs, L in ((2, 1), (5, 13), (9, 55), (16, 3)):
                self.assertEqual(sum(cp.segments(chunks, segs, L)), chunks)


class Plan(unittest.TestCase):
    def test_model_calibration(self):
        # one pass: 512 steps for 16 tiles on 132 SMs
        self.assertEqual(cp.steps((512,), 16, 1, 0, 0), 512.0)
        # CP 9 x 55, segment 0 at 72 chunks on 16 SMs: phase 1 is the other 116 SMs' two waves
        # of 55 x 0.68 steps (224 blocks: segments 1-7, two tiles, 16 heads), then the walk's
        # 7 transitions and phase 3's one wave of 55
        self.assertAlmostEqual(cp.steps((512,), 16, 1, 9, 55), 2 * 55 * 0.68 + 7 * 0.9 + 55, places=6)

    def test_combine_walks_add_up(self):
        # one wave of combine blocks walks the sequences z, z + Z, ..: at V128 HV16 (8 x 16
        # blocks, one z) two sequences' 7 transitions each add up; at HV4 (32 blocks a z, 4 z)
        # they run side by side
        def combine(lens, heads):
            with mock.patch.object(cp, "COMBINE_STEP", 0.0):
                without = cp.steps(lens, heads, 1, 9, 55)
            return cp.steps(lens, heads, 1, 9, 55) - without
        self.assertAlmostEqual(combine((512, 512), 16), 14 * 0.9, places=6)
        self.assertAlmostEqual(combine((512, 512), 4), 7 * 0.9, places=6)
        # V256: 256 blocks a z, two waves
        with mock.patch.object(cp, "COMBINE_STEP", 0.0):
            without = cp.steps((512,), 16, 2, 9, 55)
        self.assertAlmostEqual(cp.steps((512,), 16, 2, 9, 55) - without, 2 * 7 * 0.9, places=6)

    def test_long_sequence_is_split(self):
        self.assertEqual(cp.plan((512,), 16, 1), (9, 55))  # the B1 T32768 H16 bench
        self.assertLess(cp.steps((512,), 16, 1, 9, 55), cp.steps((512,), 16, 1, 8, 64))

    def test_bounded_plan(self):
        # GDN's B1 T32768 H16 bench: 8 x 64, which the device ran faster than 9 x 63 (537.2
        # against 541.3 us when 9 x 63 left its 8 chunks to the last segment; now segment 0
        # takes them and the model ranks 9 x 63 lower as well)
        self.assertEqual(cp.plan((512,), 16, 1, bounded=True), (8, 64))
        self.assertLess(cp.steps((512,), 16, 1, 8, 64, bounded=True), cp.steps((512,), 16, 1, 9, 63, bounded=True))

    def test_varlen_long_sequences_are_split(self):
        # the varlen bench (16 sequences of 106..6200 tokens, 32768 in all): the one pass is its
        # longest sequence's 97 steps; 3 x 32 splits the seven over 32 chunks, phase 1 longest first,
        # and the combine multiplies one transition (the 97-chunk sequence's)
        lens = (2, 97, 24, 49, 7, 46, 16, 63, 5, 28, 57, 12, 34, 61, 10, 8)
        self.assertEqual(cp.steps(lens, 16, 1, 0, 0), 97.0)
        self.assertEqual(cp.plan(lens, 16, 1), (3, 32))
        self.assertAlmostEqual(cp.steps(lens, 16, 1, 3, 32), 71.66, places=6)

    def test_full_gpu_stays_one_pass(self):
        self.assertEqual(cp.plan((64,) * 8, 16, 1), (0, 0))  # 128 tiles of 64 chunks


if __name__ == "__main__":
    unittest.main()
