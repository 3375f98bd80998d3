"""CPU test: every entry kernrt.gen.conv can name is a kernel of the built conv cubins.

Reads the function symbols of build/cubins/conv_{fwd,update}.sm90a.cubin (ELF64 .symtab,
read here with the standard library) and asks conv.Profile for the entry of every dtype,
width, loader and state layout the generator accepts: a name the cubins lack would only
fail at load on a GPU. Also the reverse: every conv kernel in the cubins is reachable
from some profile (no dead entry). Needs the cubins (env KERNRT_CUBIN_DIR, set by ctest).
Does not check parameter sizes (the runtime compares them with cuFuncGetParamInfo at load).
"""
import itertools
import os
import struct
import unittest

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen import conv as g

CUBINS = os.environ.get("KERNRT_CUBIN_DIR", "")


def elf_functions(path):
    """Names of the STT_FUNC symbols of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError(f"{path}: not an ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        off, size, entsize = sh[4], sh[5], sh[9]
        for i in range(size // entsize):
            st_name, st_info = struct.unpack_from("<IB", data, off + i * entsize)
            if st_info & 0xF == 2:  # STT_FUNC
                s = strtab[4] + st_name
                names.add(data[s:data.index(b"\0", s)].decode())
    return names


def all_entries():
    """Every (kind, entry) a profile can name."""
    out = set()
    for dtype, w, fk, uk, layout in itertools.product(
            ("bf16", "f16"), (2, 3, 4), g.FWD_KERNELS, g.UPDATE_KERNELS, g.LAYOUTS):
        p = g.Profile(512, width=w, dtype=dtype, fwd_kernel=fk, update_kernel=uk,
                      state_layout=layout)
        out.add(("fwd", p.entry("fwd")))
        out.add(("update", p.entry("update")))
        if layout == "lines":
            out.add(("update", p.entry("verify")))
    return out


@unittest.skipUnless(CUBINS and os.path.isfile(os.path.join(CUBINS, "conv_fwd.sm90a.cubin")),
                     "conv cubins not built (KERNRT_CUBIN_DIR)")
class EntriesExist(unittest.TestCase):
    def test_every_named_entry_is_in_its_cubin_and_back(self):
        want = all_entries()
        for module in ("fwd", "update"):
            have = {n for n in elf_functions(os.path.join(CUBINS, f"conv_{module}.sm90a.cubin"))
                    if n.startswith("conv_")}
            named = {e for k, e in want if k == module}
            self.assertEqual(sorted(named - have), [], f"named but not in conv_{module}")
            self.assertEqual(sorted(have - named), [], f"in conv_{module} but never named")


if __name__ == "__main__":
    unittest.main()
