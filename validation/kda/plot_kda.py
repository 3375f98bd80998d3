"""The family's PNG from a kda.jsonl: per benchmark case, ours, the peer and the floor (us,
log scale), with the issue's bar where it has one, taken from the peer of the same run.

Usage: python3 validation/kda/plot_kda.py [kda.jsonl] [out.png]   (defaults: beside this file)
Reads bench rows only (kind == "bench"); draws nothing it cannot find. CPU only (matplotlib).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# the bars per case prefix: a speed-up over the named peer of the same run (4x / 3x
# fla, 1.0x flash-qla, 1.2x FlashKDA), a fixed time (verify's 104 us), or 90 % of the floor
BARS = {"prefill kda B8 T4096 H16 V128$": ("fla 0.6.0", 4.0), "prefill kda B8 T4096 H16 V256": ("fla 0.6.0", 4.0),
        "prefill kda B1 T32768": ("fla 0.6.0", 3.0), "prefill kda varlen": ("fla 0.6.0", 3.0),
        "prefill gdn B1 T32768": ("flash-qla 0.1.3", 1.0), "prefill kda B8 T4096 H16 V128 lower_bound":
        ("FlashKDA", 1.2), "verify kda B64": (None, 104.0)}


def peer_us(r, name):
    """The named peer's time in row r (its main peer or one timed beside), or None."""
    if r.get("peer") == name:
        return r.get("peer_us")
    return r.get(f"{name}_us")


def bar_of(r):
    case = r["case"]
    for k, (peer, v) in BARS.items():
        if (case == k[:-1]) if k.endswith("$") else case.startswith(k):
            if peer is None:
                return v
            t = peer_us(r, peer)
            return t / v if t else None
    return r["floor_us"] / 0.9 if case.startswith("decode") else None


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "kda.jsonl")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "kda_bench.png")
    rows = [json.loads(l) for l in open(src) if l.strip()]
    rows = [r for r in rows if r.get("kind") == "bench" and "ours_us" in r]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    def label(r):  # the case, its peer where it has one, and its GPU (rows may come from several)
        case = r["case"].split(" (")[0].replace("prefill ", "").replace(" H16 V128", "")[:34]
        peer = (r.get("peer") or "").split(" ")[0]
        gpu = r.get("gpu", "?").replace("NVIDIA ", "").split(" ")[0]
        return f"{case}\n[{gpu}{', ' + peer if peer else ''}]"
    labels = [label(r) for r in rows]
    x = range(len(rows))
    w = 0.27
    fig, ax = plt.subplots(figsize=(13, 5.5))
    ax.bar([i - w for i in x], [r["ours_us"] for r in rows], w, label="kernrt (ours)", color="#1f77b4")
    ax.bar(list(x), [r.get("peer_us") or 0 for r in rows], w, label="peer (the same run)",
           color="#ff7f0e")
    ax.bar([i + w for i in x], [r["floor_us"] for r in rows], w, label="floor (bytes at copy rate)", color="#7f7f7f")
    for i, r in enumerate(rows):
        b = bar_of(r)
        if b:
            ax.plot([i - 1.5 * w, i + 1.5 * w], [b, b], color="red", lw=2, label="issue bar (from the same run's peer)" if i == 0 else None)
    ax.set_yscale("log")
    ax.set_ylabel("us per call (graph replay, median)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    commits = sorted({r.get("commit", "?") for r in rows}) or ["?"]  # rows may come from several
    ax.set_title(f"KDA / GDN (commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}; each "
                 f"row's GPU under it): ours vs peers vs floors")
    h, l = ax.get_legend_handles_labels()
    ax.legend(dict(zip(l, h)).values(), dict(zip(l, h)).keys(), fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print("wrote", dst)


if __name__ == "__main__":
    main()
