"""Finding and binding libkernrt.so (ctypes), and where the locally built cubins are.

Owns: the search order for the library and the cubins, the one ctypes declaration of every
C ABI entry point used here (runtime/include/kernrt/kernrt.h), and the structs that cross it.
Loading happens on first use, never at import, so `import kernrt` works on any machine.
Search order, library: $KERNRT_LIBRARY; kernrt/_lib/libkernrt.so (a package built by
`pip install ./runtime/python` after the CMake build); <checkout>/build/lib/libkernrt.so
(PYTHONPATH=runtime/python in a checkout); the system's (`cmake --install`).
Cubins: $KERNRT_CUBINS; kernrt/_lib/cubins; <checkout>/build/cubins/run;
<prefix>/share/kernrt/cubins next to a system library.
Does not check: that the library and the cubins come from the same build (the manifests pin
cubins by hash, so a mismatch fails the load with an artifact error that names the file).
"""
import ctypes
import ctypes.util
import os
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT_BUILD = os.path.normpath(os.path.join(HERE, "..", "..", "..", "build"))


class LibraryNotFound(RuntimeError):
    """No libkernrt.so where kernrt looks; the message lists the places."""


def library_candidates():
    env = os.environ.get("KERNRT_LIBRARY")
    if env:
        return [env]
    found = ctypes.util.find_library("kernrt")
    return [os.path.join(HERE, "_lib", "libkernrt.so"),
            os.path.join(CHECKOUT_BUILD, "lib", "libkernrt.so")] + ([found] if found else [])


def cubin_dir():
    """The directory of the locally built cubins, or None when none is found."""
    env = os.environ.get("KERNRT_CUBINS")
    if env:
        return env
    for d in (os.path.join(HERE, "_lib", "cubins"), os.path.join(CHECKOUT_BUILD, "cubins", "run")):
        if os.path.isdir(d):
            return d
    lib = _lib_path
    if lib:
        share = os.path.join(os.path.dirname(os.path.dirname(lib)), "share", "kernrt", "cubins")
        if os.path.isdir(share):
            return share
    return None


class BufferInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_char_p),
                ("kind", ctypes.c_char_p), ("rank", ctypes.c_uint32),
                ("shape", ctypes.c_uint64 * 8), ("bytes", ctypes.c_uint64),
                ("device_ptr", ctypes.c_uint64)]


class LoadOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("cubin_dirs", ctypes.POINTER(ctypes.c_char_p)),
                ("n_cubin_dirs", ctypes.c_size_t), ("cache_dir", ctypes.c_char_p),
                ("gpu", ctypes.c_int), ("token_capacity", ctypes.c_uint64),
                ("seq_slots", ctypes.c_uint64), ("weight_files", ctypes.POINTER(ctypes.c_char_p)),
                ("n_weight_files", ctypes.c_size_t), ("graph_cache_capacity", ctypes.c_size_t),
                ("rank_groups", ctypes.POINTER(ctypes.c_char_p)),
                ("rank_indices", ctypes.POINTER(ctypes.c_uint64)), ("n_ranks", ctypes.c_size_t),
                ("rendezvous", ctypes.c_char_p), ("rendezvous_timeout_s", ctypes.c_double)]


class Binding(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_char_p), ("device_ptr", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64)]


class Timing(ctypes.Structure):
    _fields_ = [("median_us", ctypes.c_double), ("min_us", ctypes.c_double),
                ("mean_us", ctypes.c_double), ("iters", ctypes.c_int)]


_P = ctypes.c_void_p
_S = ctypes.c_char_p
_U64 = ctypes.c_uint64
_SZ = ctypes.c_size_t
_NAMES = ctypes.POINTER(ctypes.c_char_p)
_VALUES = ctypes.POINTER(ctypes.c_uint64)
_STATUS = ctypes.c_int
_SIGNATURES = {
    "kernrt_status_string": (_S, [_STATUS]),
    "kernrt_load_options_init": (None, [ctypes.POINTER(LoadOptions)]),
    "kernrt_load_file": (_STATUS, [_S, ctypes.POINTER(LoadOptions), ctypes.POINTER(_P)]),
    "kernrt_load_json": (_STATUS, [_S, _SZ, ctypes.POINTER(LoadOptions), ctypes.POINTER(_P)]),
    "kernrt_verify_json": (_STATUS, [_S, _SZ, ctypes.POINTER(_S)]),
    "kernrt_write_input_at": (_STATUS, [_P, _S, _U64, _P, _SZ]),
    "kernrt_write_input_device": (_STATUS, [_P, _S, _U64, _U64, _SZ, _P]),
    "kernrt_read_output_at": (_STATUS, [_P, _S, _U64, _P, _SZ]),
    "kernrt_buffer_device_ptr": (_STATUS, [_P, _S, ctypes.POINTER(_U64), ctypes.POINTER(_SZ)]),
    "kernrt_state_device_ptr": (_STATUS, [_P, _S, ctypes.POINTER(_U64), ctypes.POINTER(_SZ)]),
    "kernrt_get_buffer_info": (_STATUS, [_P, _S, ctypes.POINTER(BufferInfo)]),
    "kernrt_buffer_count": (_SZ, [_P]),
    "kernrt_buffer_name": (_S, [_P, _SZ]),
    "kernrt_state_count": (_SZ, [_P]),
    "kernrt_state_name": (_S, [_P, _SZ]),
    "kernrt_program_count": (_SZ, [_P]),
    "kernrt_program_name": (_S, [_P, _SZ]),
    "kernrt_run": (_STATUS, [_P, _S, _NAMES, _VALUES, _SZ, ctypes.c_int]),
    "kernrt_enqueue": (_STATUS, [_P, _S, _NAMES, _VALUES, _SZ, ctypes.c_int, _P]),
    "kernrt_enqueue_bound": (_STATUS, [_P, _S, _NAMES, _VALUES, _SZ, ctypes.POINTER(Binding),
                                       _SZ, _P]),
    "kernrt_synchronize": (_STATUS, [_P]),
    "kernrt_time": (_STATUS, [_P, _S, _NAMES, _VALUES, _SZ, ctypes.c_int, ctypes.c_int,
                              ctypes.POINTER(Timing)]),
    "kernrt_last_error": (_S, [_P]),
    "kernrt_last_error_json": (_S, [_P]),
    "kernrt_device_available": (ctypes.c_int, []),
    "kernrt_version": (_S, []),
    "kernrt_destroy": (None, [_P]),
}

_lock = threading.Lock()
_lib = None
_lib_path = None


def lib():
    """The bound library (loaded once per process); LibraryNotFound with the places tried."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in library_candidates():
            if not path or (os.sep in path and not os.path.exists(path)):
                tried.append(f"{path} (absent)")
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(handle, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib, _lib_path = handle, path
            return _lib
        raise LibraryNotFound("libkernrt.so not found: build it (cmake --build build) or set "
                              "KERNRT_LIBRARY; tried " + "; ".join(tried))


def library_path():
    lib()
    return _lib_path
