"""The Python source of truth of each parameter block agrees with the C header the kernels
compile against: every offset constant of kernrt.gen.attention_params equals the offsetof
that kernels/attention/params.h asserts for the field of the same name, and the sizes agree.
(Conv's block is checked the same way by its family's tests.)"""
import os
import re
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import attention_params as kp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def asserted_offsets(header, macro):
    with open(os.path.join(REPO, header)) as f:
        text = f.read()
    return {m.group(1): int(m.group(2)) for m in re.finditer(macro + r"\((\w+),\s*(\d+)\)", text)}


class AttentionBlock(unittest.TestCase):
    def test_every_python_offset_is_the_headers(self):
        c = asserted_offsets("kernels/attention/params.h", "KERNRT_ATTN_AT")
        self.assertGreater(len(c), 40)
        checked = 0
        for name, value in vars(kp).items():
            if not name.isupper() or not isinstance(value, int) or name in ("SIZE", "INT32_MAX"):
                continue
            field = name.lower()
            self.assertIn(field, c, f"{name}: params.h asserts no offset for `{field}`")
            self.assertEqual(value, c[field], f"{name} = {value}, params.h says {c[field]}")
            checked += 1
        self.assertGreater(checked, 30)

    def test_block_size(self):
        with open(os.path.join(REPO, "kernels/attention/params.h")) as f:
            self.assertIn(f"sizeof(KernelParams) == {kp.SIZE}", f.read())


if __name__ == "__main__":
    unittest.main()
