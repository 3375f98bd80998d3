"""Plot validation/conv bench rows (ours vs kernel-fun / fla vs floor) as one PNG; never typed by hand.

Usage: python3 plot.py conv.jsonl out.png  (the newest record of each case wins; floor = the
bytes the call moves at the 4 GB copy rate measured in the same call; beside it the SM copy
of the same bytes where the row has one; ours labelled with its % of the floor)
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    recs = {}
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r.get("kind") == "bench":
            recs[r["case"]] = r
    cases = list(recs)
    fig, ax = plt.subplots(figsize=(11, 4.8))
    xs = range(len(cases))
    wd = 0.21
    ours = [recs[c]["ours_us"] for c in cases]
    peer = [recs[c].get("peer_us", 0) for c in cases]
    floor = [recs[c]["floor_us"] for c in cases]
    smc = [recs[c].get("sm_copy_us", 0) for c in cases]
    ax.bar([x - 1.5 * wd for x in xs], floor, wd, label="floor (4 GB copy rate of the same run)",
           color="#bbbbbb")
    ax.bar([x - 0.5 * wd for x in xs], smc, wd, label="SM copy of the same bytes (same run)",
           color="#888888")
    ax.bar([x + 0.5 * wd for x in xs], ours, wd, label="kernrt conv (shipped entry)", color="#2a7ab9")
    ax.bar([x + 1.5 * wd for x in xs], peer, wd, label="peer (kernel-fun, else fla)", color="#e07b39")
    for x, o, p, f in zip(xs, ours, peer, floor):
        ax.text(x + 0.5 * wd, o, f"{100 * f / o:.1f}%", ha="center", va="bottom", fontsize=7)
        if p:
            ax.text(x + 1.5 * wd, p, f"{p / o:.2f}x", ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("µs per call (median, log)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([c.replace(" silu bf16 wf32", "") for c in cases], rotation=18, ha="right",
                       fontsize=8)
    r0 = recs[cases[0]]
    ax.set_title(f"causal conv1d on {r0.get('gpu', '?')} ({r0.get('date', '')}, {r0.get('commit', '')[:8]})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
