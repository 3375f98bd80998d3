"""CPU tests of kernrt.gen.kv_append: the shipped fragment is the generator's 16-layer output,
the page stride follows the layer count, and bad profiles are refused."""
import json
import os
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import kv_append as g
from kernrt.gen.attention_params import GenError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class KvAppendGenerator(unittest.TestCase):
    def test_shipped_fragment_is_the_generators(self):
        with open(os.path.join(REPO, "kernels", "kv_append", "kv_append_ops.json")) as f:
            self.assertEqual(json.load(f), g.fragment(16))

    def test_page_stride_follows_layers(self):
        launch = g.op(2)["impl"]["launches"][0]
        self.assertEqual(launch["args"][-1], {"i32": 2 * 262144})

    def test_manifest_has_a_program_per_layer_and_index(self):
        m = g.manifest(3, 100)
        self.assertEqual(sorted(m["programs"]), [f"append_{i}_l{l}" for i in ("i32", "i64") for l in range(3)])
        call = m["programs"]["append_i64_l2"]["calls"][0]
        self.assertEqual(call["args"][2], {"state": "kv", "offset": 2 * 262144})

    def test_refusals(self):
        with self.assertRaisesRegex(GenError, "slot index dtype `u8`"):
            g.op(2, "u8")
        with self.assertRaisesRegex(GenError, "`layers` must be a positive integer"):
            g.op(0)


if __name__ == "__main__":
    unittest.main()
