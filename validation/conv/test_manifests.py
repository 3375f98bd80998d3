"""CPU test: every manifest validation/conv would load on the device passes kernrt-verify.

Builds, with the options run.py and cases.py use, every check manifest (forward and decode
cases for every candidate loader), the drop-in manifests, and the timing manifests of all
six shapes; pins them to the built cubins (kernrt.gen.pin) and runs `kernrt-verify
--cubins` over them in one call. Needs the build (env KERNRT_VERIFY: the binary,
KERNRT_CUBIN_DIR: cubins/run; ctest sets both). Does not run a kernel.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "runtime", "python"))
sys.path.insert(0, HERE)

from kernrt.gen import conv as g  # noqa: E402
from kernrt.gen import pin  # noqa: E402
import manifests as mf  # noqa: E402
import run  # noqa: E402

VERIFY = os.environ.get("KERNRT_VERIFY", "")
CUBINS = os.environ.get("KERNRT_CUBIN_DIR", "")


def case_lists():
    import case_list
    return {k: getattr(case_list, k) for k in dir(case_list) if k.endswith("_CASES")}


def every_manifest():
    lists = case_lists()
    out = {}
    for i, kw in enumerate(lists["FWD_CASES"]):
        for loader in run.FWD_LOADERS:
            out[f"fwd{i}_{loader}"] = mf.fwd_check(loader, **kw)[0]
    for i, kw in enumerate(lists["UPDATE_CASES"]):
        one = kw.get("steps", 1) == 1 and not kw.get("step_lines")
        for loader in (run.UPDATE_LOADERS if one else ["verify"]):
            out[f"update{i}_{loader}"] = mf.update_check(loader, **kw)[0]
    for i, kw in enumerate(lists["DROPIN_FWD_CASES"]):
        B, T, N, cu = mf.fwd_geometry(kw["B"], kw["T"], kw.get("lens"))
        row = kw.get("xrow") or kw["D"]
        for loader in run.FWD_LOADERS:
            out[f"dropin_fwd{i}_{loader}"] = g.dropin_manifest(
                "fwd", B, T, kw["D"], kw["W"], "bf16", "f32", kw.get("bias", False), "silu",
                T * row, row, residual=kw.get("residual", False),
                initial_state=kw.get("states", True), final_state=kw.get("states", True),
                fwd_kernel=loader, varlen_seqs=None if cu is None else N)
    for i, kw in enumerate(lists["DROPIN_UPDATE_CASES"]):
        for loader in run.UPDATE_LOADERS:
            out[f"dropin_update{i}_{loader}"] = g.dropin_manifest(
                "update", kw["N"], 1, kw["D"], kw["W"], "bf16", "f32", kw.get("bias", False), "silu",
                residual=kw.get("residual", False), update_kernel=loader)
    cands = run.fwd_candidates(g)
    for B, T, D in run.FWD_SHAPES:
        out[f"bench_fwd_B{B}_T{T}_D{D}"] = mf.fwd_bench(cands, B, T, D, 4, 2, 8)
    ucands = run.update_candidates()
    for N, D in run.UPDATE_SHAPES:
        out[f"bench_update_B{N}_D{D}"] = mf.update_bench(ucands, N, D, 4, 4, 64)[0]
    return out


@unittest.skipUnless(VERIFY and os.path.isfile(VERIFY) and CUBINS, "kernrt-verify or cubins not built")
class AllVerify(unittest.TestCase):
    def test_every_manifest_verifies(self):
        ms = every_manifest()
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, m in sorted(ms.items()):
                path = os.path.join(d, name + ".json")
                with open(path, "w") as f:
                    json.dump(pin(m, CUBINS), f)
                paths.append(path)
            r = subprocess.run([VERIFY, "--cubins", CUBINS] + paths, capture_output=True, text=True)
            bad = [ln for ln in (r.stdout + r.stderr).splitlines() if not ln.endswith(": verified")]
            self.assertEqual(r.returncode, 0, "\n".join(bad[:40]))
            self.assertEqual(len(paths), len(ms))


if __name__ == "__main__":
    unittest.main()
