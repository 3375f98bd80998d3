"""kernrt.Runtime: one loaded manifest on one GPU, over the C ABI.

Owns: marshalling names and vars into the C calls (arrays cached per program and var set,
so a repeated call builds nothing), streams (None = torch's current stream when torch has
initialised CUDA, else the runtime's own; kernrt.RUNTIME_STREAM = the runtime's own; an int
is a CUstream, 0 meaning the legacy default stream as in CUDA; an object with .cuda_stream —
torch's default stream reports 0, which is the legacy stream, never the runtime's own),
bindings of caller memory, zero-copy views of buffers and states, and raising the error
class of each failure. Every method either does what it says or raises kernrt.Error.
Does not check what the C++ runtime checks (it validates everything the call depends on).
"""
import ctypes
import json

from . import _native, arrays, errors


def _raise(lib, handle):
    raise errors.from_json(lib.kernrt_last_error_json(handle).decode())


RUNTIME_STREAM = object()  # the runtime's own compute stream (the C ABI's NULL)
_CU_STREAM_LEGACY = 0x1    # CUDA's legacy default stream, which a 0 handle means in CUDA


def _cuda(handle):
    # The C ABI reads NULL as the runtime's own stream; a caller's 0 is CUDA's default stream.
    return _CU_STREAM_LEGACY if int(handle) == 0 else int(handle)


def _stream_handle(stream):
    if stream is RUNTIME_STREAM:
        return 0
    if stream is None:
        torch = arrays.torch_or_none()
        if torch is not None and torch.cuda.is_initialized():
            return _cuda(torch.cuda.current_stream().cuda_stream)
        return 0
    if isinstance(stream, int):
        return _cuda(stream)
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError(f"stream must be None, kernrt.RUNTIME_STREAM, an int CUstream or have "
                        f".cuda_stream, got {stream!r}")
    return _cuda(handle)


class Runtime:
    """A loaded manifest. Create with kernrt.load(); usable as a context manager."""

    def __init__(self, handle, gpu):
        self._lib = _native.lib()
        self._h = ctypes.c_void_p(handle)
        self.gpu = gpu
        lib = self._lib
        names = lambda count, name: [name(self._h, i).decode() for i in range(count(self._h))]
        self.programs = names(lib.kernrt_program_count, lib.kernrt_program_name)
        self.buffers = {}
        for b in names(lib.kernrt_buffer_count, lib.kernrt_buffer_name):
            info = _native.BufferInfo()
            info.struct_size = ctypes.sizeof(info)
            self._check(lib.kernrt_get_buffer_info(self._h, b.encode(), ctypes.byref(info)))
            self.buffers[b] = {"dtype": info.dtype.decode(), "kind": info.kind.decode(),
                               "shape": tuple(info.shape[:info.rank]), "bytes": info.bytes,
                               "ptr": info.device_ptr}
        self.states = {}
        for s in names(lib.kernrt_state_count, lib.kernrt_state_name):
            ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
            self._check(lib.kernrt_state_device_ptr(self._h, s.encode(), ctypes.byref(ptr),
                                                    ctypes.byref(size)))
            self.states[s] = {"ptr": ptr.value, "bytes": size.value}
        self._vars_cache = {}

    # ---- lifetime ---------------------------------------------------------------------
    def close(self):
        """Frees everything; views made earlier must not be used afterwards."""
        if self._h:
            self._lib.kernrt_destroy(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check(self, status):
        if status != 0:
            _raise(self._lib, self._h)

    def _vars(self, program, vars):
        key = (program, tuple(sorted(vars)))
        cached = self._vars_cache.get(key)
        if cached is None:
            names = sorted(vars)
            name_array = (ctypes.c_char_p * max(1, len(names)))(*[n.encode() for n in names])
            cached = (program.encode(), names, name_array, (ctypes.c_uint64 * max(1, len(names)))())
            self._vars_cache[key] = cached
        prog, names, name_array, values = cached
        for i, n in enumerate(names):
            values[i] = int(vars[n])
        return prog, name_array, values, len(names)

    # ---- views ------------------------------------------------------------------------
    def buffer(self, name):
        """Zero-copy view of a buffer (dtype and shape at the vars' maxima): a torch.Tensor
        when torch is imported, else a kernrt.DeviceArray."""
        b = self.buffers.get(name)
        if b is None:
            raise errors.CallerError([{"kind": "caller", "path": "/buffers/" + name,
                                       "message": f"unknown buffer `{name}`"}])
        return arrays.view(arrays.DeviceArray(b["ptr"], b["bytes"], self, b["dtype"], b["shape"]),
                           self.gpu)

    def state(self, name):
        """Zero-copy view of a whole state allocation as bytes (torch uint8 tensor or DeviceArray)."""
        s = self.states.get(name)
        if s is None:
            raise errors.CallerError([{"kind": "caller", "path": "/states/" + name,
                                       "message": f"unknown state `{name}`"}])
        return arrays.view(arrays.DeviceArray(s["ptr"], s["bytes"], self), self.gpu)

    # ---- running ------------------------------------------------------------------------
    def run(self, program, graph=False, vars=None, **kw):
        """Runs to completion on the runtime's own stream."""
        prog, names, values, n = self._vars(program, {**(vars or {}), **kw})
        self._check(self._lib.kernrt_run(self._h, prog, names, values, n, int(bool(graph))))

    def enqueue(self, program, stream=None, graph=False, bind=None, vars=None, **kw):
        """Enqueues on `stream` without waiting. graph=True replays one cached graph per
        (program, vars); bind={buffer: tensor} runs this call eagerly on the caller's memory."""
        prog, names, values, n = self._vars(program, {**(vars or {}), **kw})
        s = ctypes.c_void_p(_stream_handle(stream))
        if not bind:
            self._check(self._lib.kernrt_enqueue(self._h, prog, names, values, n,
                                                  int(bool(graph)), s))
            return
        if graph:
            raise errors.CallerError([{"kind": "caller", "path": "", "message":
                                       "bound calls run eagerly: drop graph=True (capture them "
                                       "in your own graph instead)"}])
        table = (_native.Binding * len(bind))()
        for i, (name, obj) in enumerate(bind.items()):
            ptr, nbytes = arrays.span(obj)
            table[i] = _native.Binding(name.encode(), ptr, nbytes)
        self._check(self._lib.kernrt_enqueue_bound(self._h, prog, names, values, n, table,
                                                    len(bind), s))

    def synchronize(self):
        self._check(self._lib.kernrt_synchronize(self._h))

    def time(self, program, iters=100, graph=True, vars=None, **kw):
        """Median/min/mean microseconds of `iters` runs on the runtime's stream (CUDA events)."""
        prog, names, values, n = self._vars(program, {**(vars or {}), **kw})
        t = _native.Timing()
        self._check(self._lib.kernrt_time(self._h, prog, names, values, n, int(bool(graph)),
                                          int(iters), ctypes.byref(t)))
        return {"median_us": t.median_us, "min_us": t.min_us, "mean_us": t.mean_us,
                "iters": t.iters}

    # ---- host copies --------------------------------------------------------------------
    def write(self, name, data, offset=0):
        """Host bytes (bytes, bytearray, memoryview, numpy array) into an input buffer."""
        mv = memoryview(data).cast("B")
        buf = (ctypes.c_char * len(mv)).from_buffer_copy(mv) if mv.readonly else \
            (ctypes.c_char * len(mv)).from_buffer(mv)
        self._check(self._lib.kernrt_write_input_at(self._h, name.encode(), int(offset), buf, len(mv)))

    def write_device(self, name, src, offset=0, stream=None):
        """Device-to-device copy of a tensor-like into an input buffer, ordered on `stream`."""
        ptr, nbytes = arrays.span(src)
        self._check(self._lib.kernrt_write_input_device(self._h, name.encode(), int(offset), ptr,
                                                        nbytes, ctypes.c_void_p(_stream_handle(stream))))

    def read(self, name, offset=0, nbytes=None):
        """Bytes of an output buffer (the whole allocation by default)."""
        if nbytes is None:
            b = self.buffers.get(name)
            nbytes = (b["bytes"] if b else 0) - offset
        out = ctypes.create_string_buffer(max(0, nbytes))
        self._check(self._lib.kernrt_read_output_at(self._h, name.encode(), int(offset), out,
                                                    max(0, nbytes)))
        return out.raw

    def __repr__(self):
        return f"kernrt.Runtime(gpu={self.gpu}, programs={self.programs})"


def manifest_text(manifest):
    """(text, path) for a dict, a JSON string or a path."""
    import os
    if isinstance(manifest, dict):
        return json.dumps(manifest), None
    if isinstance(manifest, (bytes, bytearray)):
        return bytes(manifest).decode(), None
    if isinstance(manifest, str) and manifest.lstrip().startswith("{"):
        return manifest, None
    return None, os.fspath(manifest)
