#!/usr/bin/env python3
"""One eager launch of each named conv candidate at one shape, for a profiler to attach to.

Usage (on the GPU, after the build; loaders from kernrt.gen.conv):
    ncu --clock-control none --metrics ... -k regex:conv python3 validation/conv/probe.py \
        --build BUILD fwd 8,4096,2048 strip4p:32 strip4h:32
    ... probe.py --build BUILD update 256,8192 c4s2p c4s2v

Owns nothing the records use: no timing, no checks (run.py does both). Builds the same
timing manifests as timing.py (manifests.py) with one call per program and random inputs,
runs every program once (and with --copy sm_copy.py's copy of the same bytes), and exits.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("kind", choices=["fwd", "update"])
    ap.add_argument("shape", help="B,T,D (fwd) or N,D (update)")
    ap.add_argument("loaders", nargs="+", help="forward or update (our lines) loaders")
    ap.add_argument("--copy", action="store_true", help="also sm_copy.py's copy of the same bytes")
    a = ap.parse_args()
    shape = [int(v) for v in a.shape.split(",")]
    sys.path[:0] = [os.path.join(REPO, "runtime", "python"), os.path.join(REPO, "validation", "common"), HERE]
    import torch
    import bench as common
    cubins = common.use_build(a.build)
    import kernrt
    import manifests as mf
    from kernrt.gen import pin
    loaders = a.loaders
    if a.kind == "fwd":
        B, T, D = shape
        cands = {lo: lo for lo in loaders}
        rt = kernrt.load(pin(mf.fwd_bench(cands, B, T, D, 4, 1, 1), cubins), cubins=[cubins])
        rt.buffer("x0").copy_(torch.randn(B, T, D, device="cuda").to(torch.bfloat16))
        rt.buffer("weight").copy_(torch.rand(D, 4, device="cuda") - 0.5)
        kw = {"tokens": T, "seqs": B}
    else:
        N, D = shape
        cands = {lo: ("lines", lo) for lo in loaders}
        m, slots = mf.update_bench(cands, N, D, 4, 1, 1)
        rt = kernrt.load(pin(m, cubins), cubins=[cubins], seq_slots=slots)
        rt.buffer("lines0").copy_(torch.randperm(slots - 1, device="cuda")[:N].int() + 1)
        rt.buffer("x0").copy_(torch.randn(N, D, device="cuda").to(torch.bfloat16))
        kw = {"seqs": N}
    for label in cands:
        rt.run(label, **kw)
    if a.copy:  # sm_copy.py's copy of the same bytes (x0 -> y0 forward; a buffer pair decode)
        import sm_copy
        if a.kind == "fwd":
            src, dst = rt.buffer("x0").view(-1), rt.buffer("y0").view(-1)
        else:
            src = torch.empty(N * D * 4, dtype=torch.bfloat16, device="cuda")
            dst = torch.empty_like(src)
        sm_copy.copy(src, dst, "b1024w4")
    torch.cuda.synchronize()
    print("probe: ran", ", ".join(cands), flush=True)


if __name__ == "__main__":
    main()
