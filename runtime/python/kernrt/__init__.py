"""kernrt: the Python package over libkernrt (ctypes; importable without torch or a GPU).

Subpackages: `kernrt.gen` (manifest generators, standard library only).
"""
