"""Zero-copy views of runtime-owned device memory, and the device memory of caller objects.

Owns: DeviceArray (a buffer or state region exposed through __cuda_array_interface__ v3,
as bytes; torch, CuPy and Numba import it without a copy), the torch view of it with the
buffer's dtype and shape, and `span` (address and bytes of a caller's tensor-like object,
for bindings). A view holds a reference to its runtime, so the memory outlives the view.
Imports torch only when the caller already has (`sys.modules`), never by itself.
Does not synchronise: a view reads what the device holds when a kernel or copy reads it;
order work with rt.synchronize() or by using the stream the programs were enqueued on.
"""
import sys

DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
               "fp8e4m3": 1, "u8": 1}
_TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "i32": "int32",
                 "u32": "uint32", "i64": "int64", "u64": "uint64", "fp8e4m3": "float8_e4m3fn",
                 "u8": "uint8"}


class DeviceArray:
    """`nbytes` bytes of device memory at `ptr`, owned by `owner` (kept alive)."""

    def __init__(self, ptr, nbytes, owner, dtype="u8", shape=None):
        self.ptr, self.nbytes, self.owner = int(ptr), int(nbytes), owner
        self.dtype = dtype
        self.shape = tuple(shape) if shape is not None else (self.nbytes // DTYPE_BYTES[dtype],)

    @property
    def __cuda_array_interface__(self):
        # Exposed as bytes: the interface has no bf16 type string, so typed views are made
        # by the consumer (to_torch does it with .view).
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "strides": None, "version": 3}

    def __repr__(self):
        return f"DeviceArray(ptr=0x{self.ptr:x}, nbytes={self.nbytes}, dtype={self.dtype}, shape={self.shape})"


def torch_or_none():
    return sys.modules.get("torch")


def to_torch(array, device_index):
    """A torch tensor over `array`'s memory with its dtype and shape (zero-copy)."""
    import torch
    raw = torch.as_tensor(array, device=f"cuda:{device_index}")
    typed = raw.view(getattr(torch, _TORCH_DTYPES[array.dtype]))
    return typed.view(array.shape)


def view(array, device_index):
    """torch tensor when torch is imported, else the DeviceArray itself."""
    return to_torch(array, device_index) if torch_or_none() is not None else array


def span(obj):
    """(address, bytes) of a tensor-like object's memory: a torch tensor, anything with
    __cuda_array_interface__, a DeviceArray, or an (address, bytes) pair. The bytes run from
    the first element to one past the last (strides >= 0)."""
    if isinstance(obj, DeviceArray):
        return obj.ptr, obj.nbytes
    if isinstance(obj, tuple) and len(obj) == 2:
        return int(obj[0]), int(obj[1])
    torch = torch_or_none()
    if torch is not None and isinstance(obj, torch.Tensor):
        if not obj.is_cuda:
            raise TypeError("a binding needs a CUDA tensor, got one on " + str(obj.device))
        if obj.numel() == 0:
            return obj.data_ptr(), 0
        if any(s < 0 for s in obj.stride()):
            raise TypeError("a binding needs non-negative strides")
        last = sum((n - 1) * s for n, s in zip(obj.shape, obj.stride()))
        return obj.data_ptr(), (last + 1) * obj.element_size()
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        itemsize = int(cai["typestr"][2:])
        shape = cai["shape"]
        strides = cai.get("strides")
        if strides is None:
            n = 1
            for d in shape:
                n *= d
            return cai["data"][0], n * itemsize
        last = sum((n - 1) * s for n, s in zip(shape, strides))
        return cai["data"][0], last + itemsize
    raise TypeError(f"cannot bind a {type(obj).__name__}: expected a CUDA tensor, an object "
                    f"with __cuda_array_interface__ or an (address, bytes) pair")
