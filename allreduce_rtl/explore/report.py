"""What an exploration shows: ``summary.md`` and its plots, from the store's rows.

* ``speedup-<topology>.png`` (with ``model``): the timing model's speed-up over ring against
  size, one line per algorithm and per combination of the other parameters that vary (the
  MultiTree paper's figure style, ``allreduce_rtl.plots.render_speedup``).
* ``pareto.png`` (with ``cost``): all-reduce time (the RTL's where simulated, else the timing
  model's on the planned hardware) against the cost of every node's NI, one panel per topology
  and size, the Pareto front solid and the dominated points faded.
"""

from __future__ import annotations

import re

from golden_model.units import format_size

from ..output import counted, format_table
from ..plots import pareto_front, render_pareto, render_speedup
from .spec import PARAMETERS

__all__ = ["render", "image_names", "varying"]

_FIXED = ("topology", "algorithm", "size")


def _slug(text):
    return re.sub(r"[^\w.-]+", "-", text).strip("-")


def image_names(spec) -> list:
    """The plot files an exploration of ``spec`` may write (checked before it runs)."""
    names = []
    if "model" in spec.evaluations:
        names += [f"speedup-{_slug(t)}.png"
                  for t in dict.fromkeys(p.params["topology"] for p in spec.points)]
    if "cost" in spec.evaluations:
        names.append("pareto.png")
    return names


def varying(rows) -> list:
    """The parameters (other than topology, algorithm and size) that take several values."""
    return [name for name in PARAMETERS if name not in _FIXED
            and len({repr(r["params"][name]) for r in rows}) > 1]


def _label(row, names):
    p = row["params"]
    extra = ", ".join(f"{n}={p[n]}" for n in names)
    return f"{p['algorithm']} ({extra})" if extra else p["algorithm"]


def _speedup(rows, names, images):
    lines = []
    by_topo = {}
    for r in rows:
        if r["figures"].get("model_speedup_vs_ring") is not None:
            by_topo.setdefault(r["params"]["topology"], []).append(r)
    for topo, group in by_topo.items():
        plot_rows = [{"size_bytes": r["params"]["size"], "algorithm": _label(r, names),
                      "speedup_vs_ring": r["figures"]["model_speedup_vs_ring"]} for r in group]
        name = f"speedup-{_slug(topo)}.png"
        images[name] = render_speedup(plot_rows, topo)
        labels = list(dict.fromkeys(p["algorithm"] for p in plot_rows))
        sizes = sorted({p["size_bytes"] for p in plot_rows})
        table = [{"size": format_size(s), **{lab: next(
            (p["speedup_vs_ring"] for p in plot_rows
             if p["size_bytes"] == s and p["algorithm"] == lab), None) for lab in labels}}
                 for s in sizes]
        cols = [("size", "size", "{}")] + [(lab, lab, "{:.2f}x") for lab in labels]
        lines += [f"### {topo}", "", "```", format_table(table, cols), "```", "",
                  f"![speed-up over ring, {topo}]({name})", ""]
    if not lines:
        return []
    return ["## Speed-up over ring (timing model)", ""] + lines


_RTL_COLUMNS = [("point", "point", "{}"), ("rtl_cycles", "RTL cycles", "{:,}"),
                ("hw_model_cycles", "model cycles", "{:,}"),
                ("rtl_over_model", "RTL/model", "{:.3f}"),
                ("rtl_verified", "bit for bit", "{}"), ("rtl_sim_s", "sim (s)", "{:.2f}"),
                ("build_key", "build", "{}")]


def _rtl(rows, names):
    table = [{"point": f"{r['params']['topology']} {_label(r, names)} "
                       f"{format_size(r['params']['size'])}",
              **r["figures"], "build_key": r["provenance"].get("build_key"),
              "rtl_verified": {True: "yes", False: "NO"}.get(r["figures"]["rtl_verified"])}
             for r in rows if "rtl_cycles" in r["figures"]]
    if not table:
        return []
    builds = len({t["build_key"] for t in table})
    return ["## RTL (simulated, checked against the golden model)", "",
            f"{counted(len(table), 'point')} on {counted(builds, 'distinct hardware build')}.",
            "", "```",
            format_table(table, _RTL_COLUMNS), "```", ""]


def _pareto(rows, names, images):
    panels, lines = [], []
    groups = {}
    for r in rows:
        f = r["figures"]
        time_us = f.get("rtl_time_us") or f.get("hw_time_us")
        if r["status"] != "ok" or f.get("cost_network_cells") is None or time_us is None:
            continue        # a failed point (a mismatch, a stall) is no design to choose
        title = f"{r['params']['topology']}, {format_size(r['params']['size'])}"
        groups.setdefault(title, []).append((f["cost_network_cells"], time_us, _label(r, names),
                                             "RTL" if f.get("rtl_time_us") else "model"))
    for title, pts in groups.items():
        panels.append((title, [p[:3] for p in pts]))
        front = sorted(pts[i] for i in pareto_front([p[:2] for p in pts]))
        table = [{"label": p[2], "cells": p[0], "time": p[1], "from": p[3]} for p in front]
        lines += [f"### {title}: {len(front)} of {len(pts)} points on the front", "", "```",
                  format_table(table, [("label", "configuration", "{}"),
                                       ("cells", "cells (all NIs)", "{:,}"),
                                       ("time", "time (us)", "{:,.2f}"),
                                       ("from", "time from", "{}")]), "```", ""]
    if not panels:
        return []
    images["pareto.png"] = render_pareto(panels, "cells of every node's NI (Yosys, generic)")
    return ["## Time against hardware cost: the Pareto front", "",
            "Time is the RTL's where simulated, else the timing model's on the planned "
            "hardware; cost counts every node's NI (routers are not counted). Dominated "
            "points are faded in the plot.", ""] + lines + ["![Pareto front](pareto.png)", ""]


def render(spec, rows, *, command, seconds, workers, export_name):
    """``(summary markdown, {file name: PNG bytes})`` of an exploration's ``rows``
    (``Store.rows`` of the spec's points, in the spec's order); ``workers`` says where the
    run's points ran (None: none ran, all were in the store)."""
    names = varying(rows)
    failed = [r for r in rows if r["status"] == "failed"]
    images = {}
    lines = [f"# {spec.title}", "",
             f"`{command}`", "",
             f"{len(rows) - len(failed):,} of {len(spec.points):,} points evaluated "
             f"({', '.join(spec.evaluations)}), {len(failed):,} failed; "
             + (f"this run took {seconds:,.1f} s on {workers}." if workers else
                "every point was already in the store.")
             + f" Every point with every parameter and figure: `{export_name}` (and "
             f"`results.sqlite`).", ""]
    if names:
        lines += ["Parameters that vary besides topology, algorithm and size: "
                  + ", ".join(names) + ".", ""]
    lines += _speedup(rows, names, images)
    lines += _rtl(rows, names)
    lines += _pareto(rows, names, images)
    if failed:
        lines += ["## Failed points", ""]
        lines += [f"- {r['params']['topology']} {_label(r, names)} "
                  f"{format_size(r['params']['size'])}: {r['error']}" for r in failed]
        lines.append("")
    return "\n".join(lines), images
