"""What every drop-in family shares: the support verdict, forwarding to fla, the log line,
and the per-shape cache of loaded runtimes.

Owns the contract of kernrt.ops (kernel-fun's, for fla users): a call kernrt supports runs
kernrt's kernels through a manifest generated for the call's shape; every other call goes to
fla verbatim, with the reason. Each family logs one INFO line (logger "kernrt") the first
time it runs its kernels and one the first time it forwards, with the reason, so a silent
fallback never reads as a correct 1.00x. Without fla an unsupported call raises
NotImplementedError with the reason. Reasons are short lowercase sentences, stable enough
for tests and training logs.
"""
import collections
import importlib
import logging
import os
import threading

log = logging.getLogger("kernrt")


class Family:
    """One family of drop-ins (e.g. "conv"), forwarding to functions of fla modules."""

    def __init__(self, name, fla_modules, cache_size=64):
        self.name = name
        self.fla_modules = fla_modules  # tried in order, e.g. ("fla.modules.convolution", ...)
        self._logged = set()
        self._lock = threading.Lock()
        self._cache = collections.OrderedDict()
        self._cache_size = cache_size

    # ---- fla ----------------------------------------------------------------------------
    def fla_function(self, fn_name):
        """fla's function of that name, or None when fla is not installed."""
        for mod in self.fla_modules:
            try:
                fn = getattr(importlib.import_module(mod), fn_name, None)
            except ImportError:
                continue
            if fn is not None:
                return fn
        return None

    def forward(self, fn_name, reason, *args, **kwargs):
        """Calls fla's `fn_name` with the arguments exactly as given, after logging why."""
        fn = self.fla_function(fn_name)
        if fn is None:
            raise NotImplementedError(f"kernrt.ops.{fn_name}: {reason}, and fla is not "
                                      f"installed to run it (pip install fla-core)")
        self.note("fla", reason)
        return fn(*args, **kwargs)

    # ---- logging --------------------------------------------------------------------------
    def note(self, ran, reason):
        """One INFO line per process, family and outcome (`kernrt` or `fla`)."""
        if ran in self._logged:
            return
        with self._lock:
            if ran in self._logged:
                return
            self._logged.add(ran)
        if ran == "kernrt":
            log.info("kernrt.ops %s: running kernrt's kernels (%s)", self.name, reason)
        else:
            log.info("kernrt.ops %s: forwarding to fla: %s", self.name, reason)

    # ---- runtimes per shape ------------------------------------------------------------------
    def runtime(self, key, build):
        """The runtime loaded for `key`, built by `build()` on first use (LRU-bounded).
        Loading is not capture-safe: warm a shape up eagerly before capturing it."""
        with self._lock:
            rt = self._cache.get(key)
            if rt is not None:
                self._cache.move_to_end(key)
                return rt
        rt = build()
        with self._lock:
            self._cache[key] = rt
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)[1].close()
        return rt

    def cached(self, key):
        with self._lock:
            return key in self._cache


def tensor_device_ok(x, min_major=9):
    """(ok, reason) for a tensor-like to run on our sm90 kernels."""
    if not getattr(x, "is_cuda", False):
        return False, "input is not a CUDA tensor"
    try:
        import torch
        major, minor = torch.cuda.get_device_capability(x.device)
    except Exception as e:  # torch without CUDA, or a fake device in tests
        cap = getattr(x, "capability", None)
        if cap is None:
            return False, f"cannot read the device capability ({e})"
        major, minor = cap
    if major < min_major:
        return False, f"sm{major}{minor} is below sm90 (kernrt's kernels are built for sm_90a)"
    if major != 9:
        return False, f"sm{major}{minor}: kernrt's runnable cubins are sm_90a (Hopper) only"
    return True, ""


def needs_grad(*tensors):
    """True when autograd is on and any given tensor requires grad (kernrt has no backward)."""
    try:
        import torch
        if not torch.is_grad_enabled():
            return False
    except ImportError:
        pass
    return any(t is not None and getattr(t, "requires_grad", False) for t in tensors)


def aligned16(t):
    return t.data_ptr() % 16 == 0


def capturing():
    """True while torch's current stream is being captured into a CUDA graph."""
    try:
        import torch
        return torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


def disabled():
    """KERNRT_OPS_DISABLE=1 forwards every call to fla (an escape hatch for bisecting)."""
    return os.environ.get("KERNRT_OPS_DISABLE", "") not in ("", "0")
