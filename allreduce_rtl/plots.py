"""Plots for reports (matplotlib, no display needed)."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from golden_model.units import format_size  # noqa: E402



def render_speedup(rows, topology):
    """PNG bytes: speed-up over ring against all-reduce size, one line per algorithm (the
    MultiTree paper's figure style). ``rows`` are dicts with ``size_bytes``, ``algorithm``,
    ``speedup_vs_ring`` (None values are left out)."""
    rows = [r for r in rows if r["speedup_vs_ring"] is not None]
    fig, ax = plt.subplots(figsize=(8.5, 4))
    sizes = sorted({r["size_bytes"] for r in rows})
    for name in dict.fromkeys(r["algorithm"] for r in rows):
        pts = sorted((r["size_bytes"], r["speedup_vs_ring"]) for r in rows if r["algorithm"] == name)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [format_size(s) for s in sizes], rotation=45, ha="right")
    ax.minorticks_off()
    ax.set_xlabel("all-reduce size per node")
    ax.set_ylabel("speed-up over ring")
    ax.set_title(f"All-reduce speed-up over ring, {topology}")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:       # a one-node network has nothing to plot
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return buf.getvalue()
