"""Plots the prefill / verify benchmark from prefill.jsonl (never typed by hand): per case,
ours against FlashInfer's faster backend and cuDNN SDPA (speedup = their time / ours), and
the fraction of the case's floor (FLOPs at the run's GEMM rate or bytes at its copy rate)
that ours and FlashInfer reach.
Usage: python3 plot_prefill.py prefill.jsonl prefill.png
Deliberately does not check: the JSONL's provenance (commit, date and GPU serial are printed
in the title), or that the bars of issue 14 are met (the notes say which are).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
bench = [r for r in rows if r.get("kind") == "bench"]
if not bench:
    sys.exit("no bench rows")
names = [r["case"].replace(" over ", "\n").replace("prefill ", "prefill\n").replace(" new", "")
         for r in bench]
x = range(len(bench))
fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.8))
w = 0.38
fi = [r.get("speedup_vs_peer", 0.0) for r in bench]
cu = [r.get("vs_cudnn", 0.0) for r in bench]
a1.bar([i - w / 2 for i in x], fi, w, label="vs FlashInfer 0.7.2.post1 (faster of fa3, fa2)")
a1.bar([i + w / 2 for i in x], cu, w, label="vs cuDNN SDPA (contiguous; equal lengths only)")
a1.axhline(1.0, color="gray", ls="--", lw=1)
a1.axhline(0.9, color="gray", ls=":", lw=1, label="0.9x (cuDNN bar)")
for i, r in enumerate(bench):
    a1.text(i - w / 2, fi[i] + 0.03, f"{fi[i]:.2f}", ha="center", fontsize=7)
a1.set_xticks(list(x), names, fontsize=7)
a1.set_yscale("log")
a1.set_ylabel("speedup of kernrt (their us / ours), log")
a1.legend(fontsize=7)
ours = [100 * r["frac_of_floor"] for r in bench]
peer = [100 * r["floor_us"] / r["peer_us"] if "peer_us" in r else 0.0 for r in bench]
a2.bar([i - w / 2 for i in x], ours, w, label="kernrt sm90a")
a2.bar([i + w / 2 for i in x], peer, w, label="FlashInfer (faster backend)")
a2.axhline(85, color="gray", ls="--", lw=1, label="85% (verify 150k-250k bar)")
a2.set_xticks(list(x), names, fontsize=7)
a2.set_ylabel("% of floor (FLOPs at GEMM rate, or bytes at copy rate)")
a2.legend(fontsize=7)
r0 = bench[0]
fig.suptitle(f"paged prefill / verify Q24/KV4/D256 page 64 bf16, {r0['gpu']} "
             f"(serial {r0.get('gpu_serial', '?')}), {r0['date']}, commit {r0['commit']}",
             fontsize=10)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print("wrote", sys.argv[2])
