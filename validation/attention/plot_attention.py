"""Plots the decode benchmark from attention.jsonl (never typed by hand): per batch, time in
microseconds of ours, the peer and the bandwidth floor, plus achieved fraction of the floor.
Usage: python3 plot_attention.py attention.jsonl attention_decode.png [variant]
(the latest commit's bench rows of `variant` with ascending 150k-250k lengths, the first row
per batch when a commit was run twice; default variant: `shipped`)
Deliberately does not check: the JSONL's provenance (date/commit are printed in the title).
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
latest = bench[-1]["commit"]
variant = sys.argv[3] if len(sys.argv) > 3 else "shipped"
first = {}
for r in bench:
    if (r["commit"] == latest and r.get("variant", "shipped") == variant
            and r.get("order", "ascending") == "ascending" and " x" not in r["case"]):
        first.setdefault(r["batch"], r)  # fixed-length probes ("B4 x8192") are not plotted
bench = [first[b] for b in sorted(first)]
bs = [r["batch"] for r in bench]
x = range(len(bs))
fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
w = 0.27
a1.bar([i - w for i in x], [r["ours_us"] for r in bench], w, label=f"kernrt sm90a ({variant})")
if any("peer_us" in r for r in bench):
    a1.bar(list(x), [r.get("peer_us", 0) for r in bench], w,
           label=next((r["peer"] for r in bench if "peer" in r), "FlashInfer (same process)"))
a1.bar([i + w for i in x], [r["floor_us"] for r in bench], w, label="floor (KV bytes / copy rate measured in the run)")
a1.set_xticks(list(x), [str(b) for b in bs])
a1.set_yscale("log")
a1.set_xlabel("batch (avg KV 200k, single layer)")
a1.set_ylabel("us (CUDA graph replay, median)")
a1.legend(fontsize=8)
a2.plot(bs, [100 * r["frac_of_floor"] for r in bench], "o-", label="kernrt")
if any("peer_us" in r for r in bench):
    a2.plot(bs, [100 * r["floor_us"] / r["peer_us"] for r in bench if "peer_us" in r], "s-",
            label="flashinfer")
a2.axhline(85, color="gray", ls="--", lw=1, label="85% gate")
a2.set_xscale("log", base=2)
a2.set_xlabel("batch")
a2.set_ylabel("% of copy-bandwidth floor")
a2.set_ylim(0, 115)
a2.legend(fontsize=8)
fig.suptitle(f"paged decode Q24/KV4/D256 page 64 bf16, {bench[0]['gpu']}, "
             f"{bench[0]['date']}, commit {latest}")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print("wrote", sys.argv[2])
