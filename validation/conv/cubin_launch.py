"""Load kernrt conv cubins with the CUDA driver (ctypes) and launch them on torch streams.

Owns: the byte images of ConvFwdParams / ConvUpdateParams (kernels/conv/params.h, offsets
asserted there) and grid/block choice mirroring the manifests (tools/gen/conv_op.py).
Does not check shapes or alignment beyond what the helpers assert: the validation script
feeds it well-formed tensors, and bad calls are the manifest's and runtime's business.
"""
import ctypes
import struct

import torch

FLAG_SILU = 1
FLAG_WEIGHT_F32 = 2
CHANNELS_PER_THREAD = 8

_cuda = None


def _driver():
    global _cuda
    if _cuda is None:
        torch.zeros(1, device="cuda")  # make torch's primary context current in this thread
        _cuda = ctypes.CDLL("libcuda.so.1")
    return _cuda


def _check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed with CUresult {rc}")


class Module:
    """One cubin; functions by entry name."""

    def __init__(self, path):
        cu = _driver()
        self._image = open(path, "rb").read()
        self._mod = ctypes.c_void_p()
        _check(cu.cuModuleLoadData(ctypes.byref(self._mod), ctypes.c_char_p(self._image)),
               f"cuModuleLoadData({path})")
        self._fns = {}

    def fn(self, name):
        if name not in self._fns:
            f = ctypes.c_void_p()
            _check(_driver().cuModuleGetFunction(ctypes.byref(f), self._mod, name.encode()),
                   f"cuModuleGetFunction({name})")
            self._fns[name] = f
        return self._fns[name]

    def launch(self, name, grid, block, image, pdl=False):
        buf = ctypes.create_string_buffer(image, len(image))
        args = (ctypes.c_void_p * 1)(ctypes.cast(buf, ctypes.c_void_p))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        cu = _driver()
        if not pdl:
            cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            _check(cu.cuLaunchKernel(self.fn(name), grid[0], grid[1], grid[2], block[0], block[1],
                                     block[2], 0, stream, args, None), f"cuLaunchKernel({name})")
            return
        attr = _LaunchAttribute()
        attr.id = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value[0] = 1
        cfg = _LaunchConfig(grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, stream,
                            ctypes.pointer(attr), 1)
        cu.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_void_p]
        _check(cu.cuLaunchKernelEx(ctypes.byref(cfg), self.fn(name), args, None),
               f"cuLaunchKernelEx({name})")


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, pad to 8, 64-byte union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("value", ctypes.c_int * 16)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint),
                ("bx", ctypes.c_uint), ("by", ctypes.c_uint), ("bz", ctypes.c_uint),
                ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("nattrs", ctypes.c_uint)]


def _ptr(t):
    return 0 if t is None else t.data_ptr()


def _dt(x):
    return {torch.bfloat16: "bf16", torch.float16: "f16"}[x.dtype]


def _flags(weight, silu):
    f = FLAG_SILU if silu else 0
    if weight.dtype == torch.float32:
        f |= FLAG_WEIGHT_F32
    else:
        assert weight.dtype == torch.bfloat16
    return f


def fwd(mod, x, weight, y, bias=None, silu=True, init_state=None, final_state=None,
        cu_seqlens=None, init_lines=None, final_lines=None, state_stride=None, block=128,
        span=32, pdl=False, ctas=None, grid_y=None):
    """x, y: [B, T, D] views (last stride 1). States: [N, D, W-1] (stride = one row) or a
    pool (uint8 tensor) with lines and state_stride bytes. grid.y = ceil(T / span) as the
    manifests launch, or grid_y, or (ctas) the most that keeps grid.x * grid.y * grid.z <=
    ctas (one wave of persistent blocks; the kernel covers the rows with any grid.y)."""
    B, T, D = x.shape
    W = weight.shape[1]
    assert x.stride(2) == 1 and y.stride(2) == 1 and D % 8 == 0
    esz = x.element_size()
    row = D * (W - 1) * esz
    ist = state_stride if init_lines is not None else row
    fst = state_stride if final_lines is not None else row
    seqs = 0 if cu_seqlens is None else cu_seqlens.numel() - 1
    image = struct.pack("<9Q6q4i", _ptr(x), _ptr(weight), _ptr(bias), _ptr(y),
                        _ptr(init_state), _ptr(final_state), _ptr(cu_seqlens),
                        _ptr(init_lines), _ptr(final_lines), x.stride(0), x.stride(1),
                        y.stride(0), y.stride(1), ist, fst, D, T, seqs, _flags(weight, silu))
    assert len(image) == 136
    gx, gz = -(-D // (CHANNELS_PER_THREAD * block)), B if cu_seqlens is None else 1
    if grid_y is None:
        grid_y = max(1, ctas // (gx * gz)) if ctas else -(-T // span)
    grid = (gx, grid_y, gz)
    mod.launch(f"conv_fwd_sm90a_{_dt(x)}_w{W}", grid, (block, 1, 1), image, pdl)


def update(mod, x, weight, y, state, lines=None, state_stride=None, bias=None, silu=True,
           step_lines=None, block=None, seqs_per_thread=4, pdl=False):
    """x, y: [N, steps, D] views. state: [N, D, W-1] (lines None) or a uint8 pool with
    lines [N] i32 and state_stride bytes; step_lines [steps, N] i32 (verify only).
    block None: as the manifests launch (64 for the 1-token update, 128 for verify)."""
    N, steps, D = x.shape
    W = weight.shape[1]
    assert x.stride(2) == 1 and y.stride(2) == 1 and D % 8 == 0 and 1 <= steps <= 8
    stride = state_stride if state_stride is not None else D * (W - 1) * x.element_size()
    sls = 0 if step_lines is None else step_lines.stride(0)
    image = struct.pack("<7Q6q4i", _ptr(x), _ptr(weight), _ptr(bias), _ptr(y), _ptr(state),
                        _ptr(lines), _ptr(step_lines), x.stride(0), x.stride(1), y.stride(0),
                        y.stride(1), stride, sls, D, N, steps, _flags(weight, silu))
    assert len(image) == 120
    kind = "update" if steps == 1 and step_lines is None else "verify"
    spt = seqs_per_thread if kind == "update" else 1
    if block is None:
        block = 64 if kind == "update" else 128
    grid = (-(-D // (CHANNELS_PER_THREAD * block)), -(-N // spt), 1)
    mod.launch(f"conv_{kind}_sm90a_{_dt(x)}_w{W}", grid, (block, 1, 1), image, pdl)
