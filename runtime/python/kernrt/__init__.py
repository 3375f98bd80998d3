"""kernrt: the Python package over libkernrt (ctypes; importable without torch or a GPU).

    import kernrt
    rt = kernrt.load("decode.json")                 # parse, verify, load (cubins: the build's)
    q = rt.buffer("q")                              # zero-copy torch view of a buffer
    q.copy_(my_q)                                   # inputs written in place
    rt.enqueue("decode", graph=True, seqs=8, tokens=8)   # on torch's current stream
    out = rt.buffer("out")

Subpackages: kernrt.gen (manifest generators, standard library only) and kernrt.ops
(fla-compatible drop-in ops). Errors are kernrt.Error subclasses named for who must act,
each with the JSON pointer of the problem in `.path`.
"""
import ctypes
import json

from . import _native
from .arrays import DeviceArray
from .errors import (ArtifactError, CallerError, DriverError, Error, InternalError, IoError,
                     ManifestError, ParseError)
from .runtime import RUNTIME_STREAM, Runtime, manifest_text

__all__ = ["load", "verify", "device_available", "cubin_dir", "library_path", "version",
           "Runtime", "RUNTIME_STREAM", "DeviceArray", "Problem", "Error", "ParseError", "ManifestError",
           "ArtifactError", "DriverError", "CallerError", "IoError", "InternalError"]


class Problem(tuple):
    """One verifier finding: (kind, path, message)."""
    __slots__ = ()

    def __new__(cls, kind, path, message):
        return super().__new__(cls, (kind, path, message))

    kind = property(lambda self: self[0])
    path = property(lambda self: self[1])
    message = property(lambda self: self[2])

    def __repr__(self):
        return f"Problem({self.kind!r}, {self.path!r}, {self.message!r})"


def library_path():
    """Path of the libkernrt.so in use (loads it)."""
    return _native.library_path()


def cubin_dir():
    """The build's directory of runnable local cubins, or None."""
    return _native.cubin_dir()


def version():
    return _native.lib().kernrt_version().decode()


def device_available():
    """True when a CUDA driver and device are present (False, not an error, otherwise)."""
    return bool(_native.lib().kernrt_device_available())


def verify(manifest):
    """Every problem of a manifest (dict, JSON text or path), [] when it verifies. No GPU."""
    text, path = manifest_text(manifest)
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    raw = text.encode()
    report = ctypes.c_char_p()
    _native.lib().kernrt_verify_json(raw, len(raw), ctypes.byref(report))
    return [Problem(p.get("kind", ""), p.get("path", ""), p.get("message", ""))
            for p in json.loads(report.value.decode() if report.value else "[]")]


def load(manifest, cubins=None, gpu=0, weights=(), tokens=0, seq_slots=0, cache_dir=None,
         graph_cache=0, ranks=None, rendezvous=None, rendezvous_timeout_s=0.0):
    """Parses, verifies and loads a manifest (dict, JSON text or path) on GPU `gpu`.
    cubins: directories of cubins (default: the build's, kernrt.cubin_dir()); weights:
    safetensors files; tokens / seq_slots: capacities of paged and per-sequence states
    (0 = defaults). A topology manifest runs one process per rank: ranks = {group: index}
    for this process, rendezvous = a directory shared by the job's ranks (fresh per job).
    Raises the kernrt.Error subclass of the first problem."""
    lib = _native.lib()
    if cubins is None:
        found = cubin_dir()
        cubins = [found] if found else []
    elif isinstance(cubins, str):
        cubins = [cubins]
    dirs = (ctypes.c_char_p * max(1, len(cubins)))(*[str(d).encode() for d in cubins])
    files = (ctypes.c_char_p * max(1, len(weights)))(*[str(w).encode() for w in weights])
    opts = _native.LoadOptions()
    lib.kernrt_load_options_init(ctypes.byref(opts))
    opts.cubin_dirs, opts.n_cubin_dirs = dirs, len(cubins)
    opts.weight_files, opts.n_weight_files = files, len(weights)
    opts.cache_dir = cache_dir.encode() if cache_dir else None
    opts.gpu, opts.token_capacity, opts.seq_slots = int(gpu), int(tokens), int(seq_slots)
    if graph_cache:
        opts.graph_cache_capacity = int(graph_cache)
    ranks = dict(ranks or {})
    groups = (ctypes.c_char_p * max(1, len(ranks)))(*[str(g).encode() for g in ranks])
    indices = (ctypes.c_uint64 * max(1, len(ranks)))(*[int(i) for i in ranks.values()])
    opts.rank_groups, opts.rank_indices, opts.n_ranks = groups, indices, len(ranks)
    opts.rendezvous = str(rendezvous).encode() if rendezvous else None
    opts.rendezvous_timeout_s = float(rendezvous_timeout_s)
    handle = ctypes.c_void_p()
    text, path = manifest_text(manifest)
    if text is not None:
        raw = text.encode()
        status = lib.kernrt_load_json(raw, len(raw), ctypes.byref(opts), ctypes.byref(handle))
    else:
        status = lib.kernrt_load_file(path.encode(), ctypes.byref(opts), ctypes.byref(handle))
    if status != 0:
        raise errors_from_thread(lib)
    return Runtime(handle.value, int(gpu))


def errors_from_thread(lib):
    from .errors import from_json
    return from_json(lib.kernrt_last_error_json(None).decode())
