"""Puts the checkout's runtime/python on sys.path so the CLIs here import kernrt.gen.

The generators live in the Python package (runtime/python/kernrt/gen) because the drop-in
ops generate manifests at run time; the scripts in tools/gen are their command lines.
Importing kernrt.gen loads no library and needs no GPU.
"""
import os
import sys

PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "runtime", "python")
if PYTHON not in sys.path:
    sys.path.insert(0, PYTHON)
