"""A plain SM copy of a tensor's bytes (Triton), the same-size reference beside each floor.

Owns one measurement tool, not a launch path of ours: the conv floors are bytes at the 4 GB
copy rate, and torch's copy of the same buffers (`copy_us`) goes through the driver's memcpy;
this is what a kernel that only streams the same bytes through the SMs achieves, launched the
way the peers are (K calls in one torch CUDA graph). Two shapes of program, each 16-byte
vectors: 1024 elements per program of 4 warps (one vector per thread) and 4096 (four
independent vectors per thread); run.py records the faster and names it.
Does not check the copy (a copy of random bytes, not read back).
"""
import triton
import triton.language as tl

CONFIGS = {"b1024w4": (1024, 4), "b4096w4": (4096, 4)}


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(dst + o, tl.load(src + o, mask=m), mask=m)


def copy(src, dst, config):
    """dst <- src (contiguous, same numel and dtype) with the program shape `config`."""
    block, warps = CONFIGS[config]
    n = src.numel()
    _copy[(triton.cdiv(n, block),)](src, dst, n, BLOCK=block, num_warps=warps)
