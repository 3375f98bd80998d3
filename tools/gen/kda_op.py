#!/usr/bin/env python3
"""Command line of kernrt.gen.kda (runtime/python/kernrt/gen/kda.py); --help says more."""
import sys

import _package  # noqa: F401  (puts runtime/python on sys.path)
from kernrt.gen.kda import main

if __name__ == "__main__":
    sys.exit(main())
