"""CPU test: kernrt.gen.conv_params (the Python pack layout) equals kernels/conv/params.h.

Parses every `static_assert(offsetof(Struct, field) == N` and `sizeof(Struct) == N` of the
header, and its `constexpr int32_t kName = V;` / `constexpr int kName = V;` lines, and
compares them with the tables in conv_params.py both ways (a field or constant on one side
only fails). Does not compile the header (the cubin build does).
"""
import os
import re
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import conv_params as cp

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "conv",
                      "params.h")


def parse(text):
    """(offsets {struct: {field: offset}}, sizes {struct: size}, constants {name: value})."""
    offsets, sizes, consts = {}, {}, {}
    for s, f, v in re.findall(r"static_assert\(offsetof\((\w+),\s*(\w+)\)\s*==\s*(\d+)", text):
        offsets.setdefault(s, {})[f] = int(v)
    for s, v in re.findall(r"static_assert\(sizeof\((\w+)\)\s*==\s*(\d+)", text):
        sizes[s] = int(v)
    for name, v in re.findall(r"constexpr\s+int(?:32_t)?\s+(k\w+)\s*=\s*(\d+)\s*;", text):
        consts[name] = int(v)
    return offsets, sizes, consts


class HeaderMatch(unittest.TestCase):
    def setUp(self):
        with open(HEADER) as f:
            self.offsets, self.sizes, self.consts = parse(f.read())

    def test_every_struct_field_and_offset(self):
        for struct, (table, size) in cp.STRUCTS.items():
            self.assertEqual(self.offsets.get(struct), table, f"{struct} offsets")
            self.assertEqual(self.sizes.get(struct), size, f"sizeof({struct})")

    def test_header_has_no_struct_the_python_side_lacks(self):
        self.assertEqual(set(self.offsets), set(cp.STRUCTS))

    def test_constants(self):
        self.assertEqual(self.consts, cp.CONSTANTS)

    def test_parser_sees_a_drift(self):
        with open(HEADER) as f:
            text = f.read().replace("offsetof(ConvFwdParams, flags) == 132",
                                    "offsetof(ConvFwdParams, flags) == 128")
        offsets, _, _ = parse(text)
        self.assertNotEqual(offsets["ConvFwdParams"], cp.FWD)


if __name__ == "__main__":
    unittest.main()
