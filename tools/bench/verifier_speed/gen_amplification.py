#!/usr/bin/env python3
"""Write the audit's amplification manifest: one op with a huge name whose one launch
carries a pack of many fields, all at byte 0 (every field overlaps the first).

With the defaults (a 1 MiB op name, 4,000 fields) the file is about 2.19 MB. A verifier
that puts the op name into every error's pointer and reports every overlap prints
3,999 errors of 1 MiB each (4 GB); kernrt-verify keeps 100 errors with the name cut to
80 bytes and counts the rest. Everything else in the manifest is valid, so the overlaps
are its only problems. Used by manifest/tests/test_cli_hostile.cpp and for the numbers
in validation/verifier-speed.md. Python 3 standard library only. Usage:
  gen_amplification.py [--name-bytes 1048576] [--fields 4000] OUT.json
"""
import argparse
import json


def manifest(name_bytes, fields):
    name = "o" * name_bytes
    pack = {"size": 16, "fields": [{"at": 0, "i32": 0} for _ in range(fields)]}
    launch = {"module": "k", "entry": "amplify", "params": ["out buffer<u8>", "bytes<16>"],
              "block": [32, 1, 1], "grid": [1, 1, 1], "args": [{"param": 0}, {"pack": pack}]}
    return {
        "schema_version": 4, "model": "amplification",
        "buffers": {"out": {"dtype": "u8", "shape": [16], "kind": "output"}},
        "modules": {"k": {"source": "amplify.cubin", "sha256": "ab" * 32}},
        "ops": {name: {"params": ["out buffer<u8>"], "impl": {"launches": [launch]}}},
        "programs": {"run": {"calls": [{"op": name, "args": [{"buf": "out"}]}]}},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--name-bytes", type=int, default=1 << 20)
    ap.add_argument("--fields", type=int, default=4000)
    a = ap.parse_args()
    with open(a.out, "w") as f:
        json.dump(manifest(a.name_bytes, a.fields), f)


if __name__ == "__main__":
    main()
