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


def pareto_front(points):
    """Indices of the points not dominated in ``(cost, time)`` (both smaller is better; a point
    is dominated when another is no worse in both and better in one)."""
    front = []
    for i, (c, t) in enumerate(points):
        if not any((c2 <= c and t2 <= t) and (c2 < c or t2 < t) for c2, t2 in points):
            front.append(i)
    return front


def render_pareto(panels, cost_label, time_label="all-reduce time (us)"):
    """PNG bytes: all-reduce time against hardware cost, one panel per ``(title, points)`` of
    ``panels``, where ``points`` are ``(cost, time, label)``; the Pareto front (``pareto_front``)
    is drawn solid and labelled, the dominated points faded."""
    n = len(panels)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax, (title, points) in zip(axes.flat, panels):
        front = set(pareto_front([(c, t) for c, t, _ in points]))
        faded = [p for i, p in enumerate(points) if i not in front]
        best = sorted(p for i, p in enumerate(points) if i in front)
        if faded:
            ax.scatter([p[0] for p in faded], [p[1] for p in faded], color="tab:gray",
                       alpha=0.3, label="dominated")
        ax.plot([p[0] for p in best], [p[1] for p in best], marker="o", color="tab:blue",
                label="Pareto front")
        for c, t, label in best:
            ax.annotate(label, (c, t), textcoords="offset points", xytext=(4, 4),
                        fontsize="x-small")
        ax.set_xlabel(cost_label)
        ax.set_ylabel(time_label)
        ax.set_title(title, fontsize="medium")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return buf.getvalue()
