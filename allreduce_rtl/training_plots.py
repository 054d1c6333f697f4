"""Training-time plots (matplotlib, no display needed): compute and exposed communication per
workload and algorithm."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COMPUTE_COLOUR, COMM_COLOUR = "#4c72b0", "#dd8452"


def render_breakdown(results, topology):
    """Stacked bars of compute and exposed communication per algorithm, one panel per workload,
    each normalised to ring's iteration time (the MultiTree paper's normalised runtime breakdown
    style). ``results``: ``{model: training.train(...) result}`` (ring among the algorithms);
    returns the PNG's bytes."""
    models = list(results)
    fig, axes = plt.subplots(1, len(models), figsize=(max(4.0, 2.0 * len(models)), 4.2),
                             sharey=True, squeeze=False)
    for ax, model in zip(axes[0], models):
        rows = results[model]["results"]
        ring = next(r for r in rows if r["algorithm"] == "ring")["iteration_ms"]
        x = range(len(rows))
        compute = [r["compute_ms"] / ring for r in rows]
        exposed = [r["exposed_comm_ms"] / ring for r in rows]
        ax.bar(x, compute, color=COMPUTE_COLOUR, label="compute")
        ax.bar(x, exposed, bottom=compute, color=COMM_COLOUR, label="exposed communication")
        ax.set_xticks(list(x), [r["algorithm"] for r in rows], rotation=90, fontsize=7)
        ax.set_title(model, fontsize=9)
        ax.axhline(1.0, color="black", linewidth=0.6, linestyle="--")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("iteration time / ring's")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", fontsize="small", ncol=2)
    fig.suptitle(f"Iteration time per workload, {topology}", x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
