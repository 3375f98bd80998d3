"""Random weights of the hybrid manifest (kernrt.gen.hybrid) as one safetensors file.

Owns: the value distribution of every weight buffer (seeded, reproducible) and the file
format (an 8-byte little-endian header length, a JSON header of name -> dtype / shape /
data_offsets, then the tensors back to back): projections N(0, 1/fan_in) so the residual
stream keeps its scale through the layers, the embedding N(0, 1), the conv taps
N(0, 1/W), A_log log U(1, 16) and dt_bias log(expm1(U(1e-3, 1e-1))) (fla's KDA init), bf16
by round-to-nearest-even of float32 draws. `read_header` returns a file's header (the CPU
test compares it with the manifest's weight buffers).
Needs numpy (not the standard library only, unlike the manifest generators).
"""
import json
import struct

from .hybrid import weight_shapes

_DT = {"bf16": "BF16", "f32": "F32"}


def _bf16_bits(np, x):
    """float32 array -> uint16 bf16 bit patterns (round to nearest even; no NaNs drawn)."""
    u = x.astype(np.float32).view(np.uint32)
    u = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (u >> np.uint32(16)).astype(np.uint16)


def values(d, name, shape, rng, np):
    """The float32 values of weight `name`."""
    n = int(np.prod(shape))
    if name.endswith("_A_log"):
        return np.log(rng.uniform(1.0, 16.0, n)).astype(np.float32)
    if name.endswith("_dt_bias"):
        dt = rng.uniform(1e-3, 1e-1, n)
        return np.log(np.expm1(dt)).astype(np.float32)
    if name.endswith("_conv"):
        return (rng.standard_normal(n, dtype=np.float32) / np.sqrt(shape[1])).astype(np.float32)
    scale = 1.0 if name == "embed" else 1.0 / np.sqrt(shape[1])
    return rng.standard_normal(n, dtype=np.float32) * np.float32(scale)


def write(d, path, seed=2026):
    import numpy as np
    rng = np.random.default_rng(seed)
    header, blobs, at = {}, [], 0
    for name, (dtype, shape) in sorted(weight_shapes(d).items()):
        x = values(d, name, shape, rng, np)
        raw = (_bf16_bits(np, x) if dtype == "bf16" else x.astype("<f4")).tobytes()
        header[name] = {"dtype": _DT[dtype], "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    return path


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))
