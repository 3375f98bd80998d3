"""What every family's device validation shares: records, floors, timing, error metrics.

Owns: the JSONL record (DESIGN.md's schema: date, gpu, gpu serial, commit, family, case,
kind, ours/peer/floor, ratios, error/gate/pass), the two ceilings measured in the calling
process (device-to-device copy bytes/s counting read + write; bf16 GEMM FLOP/s on random
data, 8192^3), the timing of enqueued work (CUDA events around each call, after a GPU sleep
that lets the host queue run ahead, so host launch cost never counts as GPU time; medians),
and rel-L2 / max-abs errors. Torch on the device; no kernel is launched here except torch's.
Does not check: anything family-specific (gates, shapes and peers belong to each family).
"""
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "runtime", "python"))
T0 = time.time()


def use_build(build_dir):
    """Points the kernrt package at a CMake build's libkernrt.so and runnable cubins (before
    its first use), and returns the cubin directory."""
    build_dir = os.path.abspath(build_dir)
    os.environ["KERNRT_LIBRARY"] = os.path.join(build_dir, "lib", "libkernrt.so")
    os.environ["KERNRT_CUBINS"] = os.path.join(build_dir, "cubins", "run")
    return os.environ["KERNRT_CUBINS"]


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def gpu_serial():
    """Ratios near 1.0 move by ~1 % from one lent H200 to the next: rows say which measured."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=serial", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


class Recorder:
    """Appends one JSON line per case to `path` (created fresh by the caller's run); with
    KERNRT_CALL set (tools/device/run.sh's CALL), every row names that device call, so a record
    gathered from several calls says which row came from which."""

    def __init__(self, path, family, commit):
        self.path = path
        self.base = {"date": datetime.date.today().isoformat(),
                     "gpu": torch.cuda.get_device_name(0), "gpu_serial": gpu_serial(),
                     "commit": commit, "family": family}
        if os.environ.get("KERNRT_CALL"):
            self.base["call"] = os.environ["KERNRT_CALL"]
        self.rows = []
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def add(self, **kw):
        row = dict(self.base)
        row.update(kw)
        self.rows.append(row)
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
        return row

    def check(self, case, ok, **kw):
        row = self.add(case=case, kind="check", **kw, **{"pass": bool(ok)})
        extra = " ".join(f"{k}={v:.3e}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items()
                         if k in ("error", "max_abs", "gate", "peer_error"))
        log(f"{'PASS' if ok else 'FAIL'} {case} {extra}")
        return bool(ok)


def errors(out, ref):
    """(finite, rel_l2, max_abs) of out against ref, in float64."""
    o = out.double()
    finite = bool(torch.isfinite(o).all().item())
    diff = o - ref.double()
    rel = (diff.norm() / ref.double().norm().clamp_min(1e-300)).item()
    return finite, rel, diff.abs().max().item()


def time_calls(fn, iters=100, warmup=3, sleep_cycles=60_000_000, before=None):
    """Per-call GPU microseconds of `fn` (which enqueues work on the current stream): CUDA
    events around each call, the queue pre-filled behind a GPU sleep (~30 ms) so host cost
    never shows. `before` (e.g. an L2 flush) is enqueued ahead of each call, outside the
    events. Returns the list of samples."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(iters)]
    torch.cuda._sleep(sleep_cycles)
    for s, e in ev:
        if before is not None:
            before()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1000.0 for s, e in ev]


def interleaved(contenders, iters, rounds, **timing):
    """{name: median us} timing each contender `iters` times per round, the order reversed
    every other round (so drift and clocks hit everyone alike); `timing` goes to time_calls
    (warmup, before)."""
    samples = {k: [] for k in contenders}
    order = list(contenders)
    for r in range(rounds):
        for k in (order if r % 2 == 0 else order[::-1]):
            samples[k] += time_calls(contenders[k], iters, **timing)
    return {k: statistics.median(v) for k, v in samples.items()}


def torch_graph(fn):
    """A torch CUDA graph of what `fn` enqueues (after one eager warm-up call)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def copy_rate(gbytes=4.0, iters=20):
    """Bytes/s of a device-to-device copy, counting bytes read plus bytes written."""
    n = int(gbytes * 1e9) // 2
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    t = statistics.median(time_calls(lambda: dst.copy_(src), iters))
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / (t * 1e-6)


def gemm_rate(n=8192, iters=20):
    """FLOP/s of a bf16 n^3 matrix product on random data (torch.matmul, cuBLAS)."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    t = statistics.median(time_calls(lambda: torch.matmul(a, b, out=c), iters))
    del a, b, c
    torch.cuda.empty_cache()
    return 2 * n ** 3 / (t * 1e-6)


def floors(rec, skip_gemm=False):
    """Measures both ceilings now, records them, returns {"copy_Bps", "gemm_flops"}."""
    c = copy_rate()
    g = None if skip_gemm else gemm_rate()
    rec.add(case="ceiling: device-to-device copy 4 GB (read + write)", kind="ceiling",
            bytes_per_s=c)
    if g:
        rec.add(case="ceiling: bf16 GEMM 8192^3 random", kind="ceiling", flops=g)
    log(f"ceilings: copy {c / 1e12:.3f} TB/s" + (f", bf16 GEMM {g / 1e12:.0f} TFLOP/s" if g else ""))
    return {"copy_Bps": c, "gemm_flops": g}
