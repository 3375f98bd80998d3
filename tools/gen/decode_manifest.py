#!/usr/bin/env python3
"""Command line of kernrt.gen.attention_manifest: a complete paged-decode manifest for one
capacity, e.g. `tools/gen/decode_manifest.py --max-seqs 32 --max-context 262144 --layers 16
--cubins build/cubins/run -o decode.json`; --help says more."""
import sys

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen.attention_manifest import main

if __name__ == "__main__":
    sys.exit(main())
