"""The hybrid family's PNG: per-step microseconds of kernrt's graph-replayed step, its ops
each replayed alone (summed), and the peer stack, per case (bench rows of run.py)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot(rows, path):
    rows = [r for r in rows if "ours_us" in r]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = range(len(rows))
    wd = 0.27
    series = [("kernrt (graph; prefill eager)", "ours_us", "#2a7ab9", -wd),
              ("kernrt ops alone, summed", "ops_sum_us", "#9ecae1", 0.0),
              ("peer stack (torch graph; prefill eager)", "peer_us", "#e07b39", wd)]
    for label, key, color, dx in series:
        ax.bar([x + dx for x in xs], [r.get(key, 0) or 0 for r in rows], wd, label=label, color=color)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["case"] for r in rows], fontsize=8)
    ax.set_ylabel("us per step")
    ax.set_yscale("log")
    ax.set_title("hybrid stack (3 KDA + 1 attention layer, hidden 2048) on the H200")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
