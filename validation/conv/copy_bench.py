"""Copy probes (copy_probe.cu) vs torch's copy vs the driver's cuMemcpyDtoDAsync, one process.

Owns run 9's copy sweep (validation/conv/notes.md): which property of an SM copy (store
hint, load hint, loads in flight per thread, schedule, block size, grid) decides its rate.
Timing is bench.py's (`time_eager`: events, median of 60, queue filled behind a GPU sleep,
input/output sets rotated beyond L2). Every probe's output is compared with its input once
(bit-exact) before it is timed; a wrong probe is recorded as an error, not timed.
Phases: references and the conv's probe (repeated at the end for the run's spread), one
factor at a time around it, the best schedules with every hint pair, then the best few and
the references at the three byte sizes of the prefill shapes. One JSONL record per timing.
Does not check anything about the conv itself (check.py) or time it (bench.py).
Usage: python3 copy_bench.py --cubin copy_probe.sm90a.cubin --out copy.jsonl [--meta JSON]
"""
import argparse
import ctypes
import json
import struct

import torch

import cubin_launch as kl
from bench import BW, sets_for, time_eager

SMS = 132
LOADS = ("nc256", "ld", "nc", "lu")
STORES = ("cs", "wb", "na", "wt")


class Probes:
    def __init__(self, path):
        self.mod = kl.Module(path)
        self.occ = {}

    def blocks_per_sm(self, name, block):
        key = (name, block)
        if key not in self.occ:
            n = ctypes.c_int()
            cu = kl._driver()
            cu.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [
                ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
            kl._check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(n), self.mod.fn(name), block, 0), "cuOccupancy")
            self.occ[key] = n.value
        return self.occ[key]

    def grid(self, cfg, n):
        """grid: an int, 'short' (every block one pass of U vectors per thread), 'wave' (one
        resident wave, persistent), 'sm' (one block per SM, persistent)."""
        g = cfg["grid"]
        if isinstance(g, int):
            return g
        if g == "wave":
            return SMS * self.blocks_per_sm(cfg["name"], cfg["block"])
        if g == "sm":
            return SMS
        per = cfg["block"] * cfg["u"]
        return -(-n // per)

    def run(self, cfg, x, y):
        n = x.numel() * x.element_size() // 16
        image = struct.pack("<QQq", x.data_ptr(), y.data_ptr(), n)
        self.mod.launch(cfg["name"], (self.grid(cfg, n), 1, 1), (cfg["block"], 1, 1), image)


def cfg(sched="gs", ld="nc256", st="cs", u=4, block=128, grid=4096):
    name = f"copy_{sched}_{ld}_{st}_u{u}"
    return dict(name=name, block=block, grid=grid, u=u,
                label=f"{sched}_{ld}_{st}_u{u}_b{block}_g{grid}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta", default="{}")
    a = ap.parse_args()
    meta = json.loads(a.meta)
    torch.manual_seed(7)
    pr = Probes(a.cubin)
    cu = kl._driver()
    cu.cuMemcpyDtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t,
                                        ctypes.c_void_p]
    data = {}

    def buffers(nbytes):
        if nbytes not in data:
            data.clear()
            torch.cuda.empty_cache()
            sets = sets_for(2 * nbytes)
            xs = [torch.randint(-2**15, 2**15, (nbytes // 2,), dtype=torch.int16, device="cuda")
                  for _ in range(sets)]
            data[nbytes] = (xs, [torch.empty_like(x) for x in xs])
        return data[nbytes]

    results = {}

    def emit(label, nbytes, us, error=None, extra=None):
        floor = 2 * nbytes / BW * 1e6
        rec = dict(meta, case=f"copy {nbytes >> 20} MiB", kind="copy_probe", variant=label,
                   floor_us=round(floor, 2))
        if error:
            rec["error"] = error
        else:
            rec.update(ours_us=round(us, 2), frac_of_floor=round(floor / us, 3))
            ref = results.get((nbytes, "torch_copy"))
            if ref:
                rec.update(peer="torch copy_", peer_us=round(ref, 2), speedup_vs_peer=round(ref / us, 3))
        if extra:
            rec.update(extra)
        with open(a.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"{rec['case']:<14} {label:<36} {us if us else float('nan'):8.2f} us "
              f"{100 * floor / us if us else 0:5.1f}% of floor", flush=True)

    def time_ref(label, nbytes):
        xs, ys = buffers(nbytes)
        if label == "torch_copy":
            fn = lambda i: ys[i].copy_(xs[i])  # noqa: E731
        else:
            fn = lambda i: kl._check(cu.cuMemcpyDtoDAsync_v2(  # noqa: E731
                ys[i].data_ptr(), xs[i].data_ptr(), nbytes,
                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)), "cuMemcpyDtoDAsync")
        us = time_eager(fn, len(xs))
        results[(nbytes, label)] = us
        emit(label, nbytes, us)
        return us

    def time_cfg(c, nbytes, tag=""):
        xs, ys = buffers(nbytes)
        n = nbytes // 16
        extra = dict(grid=pr.grid(c, n), block=c["block"])
        try:
            ys[0].zero_()
            pr.run(c, xs[0], ys[0])
            torch.cuda.synchronize()
            if not torch.equal(xs[0], ys[0]):
                emit(c["label"] + tag, nbytes, None, error="y != x", extra=extra)
                return float("inf")
            us = time_eager(lambda i: pr.run(c, xs[i], ys[i]), len(xs))
        except RuntimeError as e:
            emit(c["label"] + tag, nbytes, None, error=str(e), extra=extra)
            return float("inf")
        results[(nbytes, c["label"])] = us
        emit(c["label"] + tag, nbytes, us, extra=extra)
        return us

    main_bytes = 8 * 4096 * 4096 * 2  # B8 T4096 D4096 bf16: the conv's 85 % case
    with torch.no_grad():
        time_ref("torch_copy", main_bytes)
        time_ref("cuMemcpyDtoD", main_bytes)
        base = cfg()  # walk 9 of conv_fwd.cu: the run-6/8 probe (4096 blocks of 128 at D4096)
        time_cfg(base, main_bytes)
        sweep = []
        # one factor at a time around the conv's probe
        sweep += [cfg(st=s) for s in STORES[1:]]
        sweep += [cfg(ld=ld) for ld in LOADS[1:]]
        sweep += [cfg(u=u, grid=4096 * 4 // u) for u in (8, 12, 16)]  # same threads per vector
        sweep += [cfg(u=u) for u in (8, 16)]  # same grid, more bytes in flight per thread
        sweep += [cfg(block=b, grid=4096 * 128 // b) for b in (256, 512)]
        sweep += [cfg(grid=g) for g in ("wave", "sm")]
        sweep += [cfg(u=u, grid="wave") for u in (8, 12, 16)]
        sweep += [cfg(block=512, u=u, grid=g) for u in (8, 12) for g in ("wave", "sm")]
        sweep += [cfg(block=512, u=12, grid="sm", ld="ld", st="wb")]  # nvbandwidth's SM copy shape
        for sched in ("tile", "warp"):
            sweep += [cfg(sched, u=u, block=b, grid="short") for u in (4, 8, 16) for b in (128, 256, 512)]
            sweep += [cfg(sched, u=u, block=b, grid="wave") for u in (4, 8, 16) for b in (128, 512)]
        for c in sweep:
            time_cfg(c, main_bytes)
        # the best shapes (hints as the conv's) with every hint pair
        ranked = sorted((c for c in sweep if c["name"].split("_")[2:4] == ["nc256", "cs"]),
                        key=lambda c: results.get((main_bytes, c["label"]), float("inf")))
        best = [base] + ranked[:3]
        combos = []
        for b in best:
            sched, _, _, u = b["name"].split("_")[1:]
            for ld in LOADS:
                for st in STORES:
                    c = cfg(sched, ld, st, int(u[1:]), b["block"], b["grid"])
                    if (main_bytes, c["label"]) not in results:
                        combos.append(c)
        for c in combos:
            time_cfg(c, main_bytes)
        time_cfg(base, main_bytes, tag=" (again)")
        time_ref("torch_copy", main_bytes)
        everything = [base] + sweep + combos
        top = sorted(everything, key=lambda c: results.get((main_bytes, c["label"]), float("inf")))[:4]
        # the best and the references at every prefill byte size
        for nbytes in (8 * 4096 * 2048 * 2, main_bytes, 16 * 8192 * 2048 * 2):
            time_ref("torch_copy", nbytes)
            time_ref("cuMemcpyDtoD", nbytes)
            for c in [base] + [c for c in top if c is not base]:
                time_cfg(c, nbytes, tag=" (sizes)")
    print("\nfastest at 256 MiB:")
    for c in top:
        print(f"  {c['label']:<36} {results[(main_bytes, c['label'])]:8.2f} us")


if __name__ == "__main__":
    main()
