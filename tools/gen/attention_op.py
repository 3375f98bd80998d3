#!/usr/bin/env python3
"""Command line of kernrt.gen.attention (runtime/python/kernrt/gen/attention.py); --help says more."""
import sys

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen.attention import main

if __name__ == "__main__":
    sys.exit(main())
