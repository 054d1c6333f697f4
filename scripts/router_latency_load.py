#!/usr/bin/env python3
"""Latency against offered load, and saturation throughput, of the router network (RTL).

Runs ``hdl.router.RouterNetwork`` on mesh:4x4 (default; ``--topology`` takes any mesh, torus,
fat-tree or BiGraph) under uniform random traffic in cocotb
(Verilator by default) at a sweep of offered loads, with sinks always ready, and plots the mean
packet latency (creation to tail ejection, source queueing included, as BookSim measures it)
against the offered load to a PNG, with:

* the golden timing model's zero-load prediction (``golden_model.timing.simulate`` of a lone
  transfer of each packet over its route, averaged over the traffic's source/destination pairs
  and packet lengths), twice: by default it counts link latency and serialisation only; with the
  router's numbers (``router_delay`` = 4 cycles per transit router, and a ``send_delay`` for the
  injection and ejection registers plus, on a mesh or torus, the source and destination
  routers) it predicts the RTL;
* the documented RTL zero-load latency (``hdl.router.network.path_cost``, docs/hardware.md
  "Router": ``2 + 4 R + L K + F - 1`` over R routers and K links; ``6 + H (4 + L) + F - 1`` on a
  mesh), i.e. the golden model plus the router pipeline (4 cycles per router) and the
  injection/ejection registers.

Saturation throughput is the largest accepted throughput (flits ejected per cycle per terminal
in the measurement window) over the sweep; the script also reports the offered load at which the
mean latency first exceeds three times the zero-load latency.

Example::

    python scripts/router_latency_load.py --out out/router_latency_load.png
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from golden_model.schedule import AllReduceSchedule, Op, Transfer  # noqa: E402
from golden_model.timing import TimingParams, simulate  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402


def golden_zero_load(topology, lengths, flit_bytes, element_bytes, **timing):
    """Mean of ``golden_model.timing.simulate`` for a lone transfer of every (src, dst, length)
    (uniform random: every pair, every length, equally likely). The head flit is counted as a
    header flit; payload = length - 1 flits. The topology's links must move one flit per cycle
    (``link_bandwidth = flit_bytes`` GB/s at 1 GHz, ``parse_topology``'s default for 16-byte
    flits). ``timing``: more ``TimingParams`` fields (``hdl.router.network.model_timing``); a packet to its own
    terminal, which the model has no route for, then costs the RTL's documented time."""
    per_flit = flit_bytes // element_bytes
    params = TimingParams(flit_bytes=flit_bytes, element_bytes=element_bytes, header_flits=1,
                          **timing)
    times = []
    for length in lengths:
        elements = max(1, (length - 1) * per_flit)
        for src in topology.nodes:
            for dst in topology.nodes:
                if src == dst:
                    if timing:
                        from hdl.router.network import path_cost
                        cost = path_cost(topology, src, dst,
                                         link_latency=topology.link_latency(
                                             next(iter(topology.links))))
                        times.append(cost.head_latency + length - 1)
                    else:
                        times.append(length)   # no link: the model's time is the hold only
                    continue
                sched = AllReduceSchedule("probe", topology, elements, np.array([0, elements]),
                                          [[Transfer(src, dst, 0, Op.COPY,
                                                     topology.route(src, dst))]])
                t = simulate(sched, params).cycles
                # a head-only packet: the probe carried one payload flit more
                times.append(t if length > 1 else t - 1)
    return statistics.fmean(times)


def rtl_zero_load(topology, lengths, link_latency):
    """Mean documented RTL zero-load latency (head accepted to tail ejected) over every
    (src, dst, length) of uniform random traffic."""
    from hdl.router.network import path_cost
    heads = [path_cost(topology, s, d, link_latency=link_latency).head_latency
             for s in topology.nodes for d in topology.nodes]
    return statistics.fmean(heads) + statistics.fmean(lengths) - 1


def main(argv=None):
    """Run the sweep; bad arguments (an unsupported topology, a bad number, an output path
    that cannot be written) give one line on stderr and exit code 2."""
    try:
        return _main(argv)
    except (ValueError, OSError) as exc:
        print(f"router_latency_load: error: {exc}", file=sys.stderr)
        return 2


def _main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="mesh:4x4")
    ap.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    ap.add_argument("--rates", default="0.02,0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.55,"
                                       "0.6,0.7,0.8")
    ap.add_argument("--cycles", type=int, default=3000, help="injection cycles per load point")
    ap.add_argument("--lengths", default="1,2,3,4,5", help="packet lengths in flits")
    ap.add_argument("--num-vcs", type=int, default=2)
    ap.add_argument("--vc-buf-depth", type=int, default=8)
    ap.add_argument("--link-latency", type=int, default=1)
    ap.add_argument("--credit-delay", type=int, default=1)
    ap.add_argument("--flow-control", default="wormhole", choices=("wormhole", "cut_through"))
    ap.add_argument("--out", default=str(REPO / "out" / "router_latency_load.png"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)     # a bad path fails before the sweep

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tb.router.build import RouterBuild
    from tb.router.traffic import TrafficSpec

    topo = parse_topology(args.topology, link_latency=args.link_latency)
    lengths = tuple(int(x) for x in args.lengths.split(","))
    rates = [float(x) for x in args.rates.split(",")]
    net_args = dict(num_vcs=args.num_vcs, vc_buf_depth=args.vc_buf_depth, flit_width=56,
                    link_latency=args.link_latency, credit_delay=args.credit_delay,
                    flow_control=args.flow_control)
    build = RouterBuild(topo, args.sim, net_args, cxx_opt="-O2")
    specs = [TrafficSpec("uniform", r, args.cycles, lengths=lengths, ready=1.0,
                         seed=args.seed + k) for k, r in enumerate(rates)]
    print(f"building {args.sim} model of {topo.spec} ...", flush=True)
    build.build()
    run = build.run(specs, name="latency-load", stall_cycles=20000)
    if not run.ok:
        print(f"simulation failed: {run.message}", file=sys.stderr)
        return 1
    gold = golden_zero_load(topo, lengths, flit_bytes=16, element_bytes=4)
    from hdl.router.network import model_timing
    gold_r = golden_zero_load(topo, lengths, flit_bytes=16, element_bytes=4,
                              **model_timing(topo))
    rtl0 = rtl_zero_load(topo, lengths, args.link_latency)
    pts = [(r["offered"], r["latency_mean"], r["throughput"]) for r in run.scenarios]
    sat = max(p[2] for p in pts)
    knee = next((p[0] for p in pts if p[1] > 3 * rtl0), None)
    print(f"{'offered':>8} {'accepted':>9} {'latency':>9}")
    for off, lat, thr in pts:
        print(f"{off:8.3f} {thr:9.3f} {lat:9.1f}")
    print(f"zero-load latency: RTL documented {rtl0:.2f} cycles, golden timing model {gold:.2f} "
          f"(links and serialisation only), {gold_r:.2f} with the router's numbers, "
          f"lowest-load RTL {pts[0][1]:.2f}")
    print(f"saturation throughput: {sat:.3f} flits/cycle/terminal"
          + (f"; latency > 3x zero-load from offered load {knee:g}" if knee else ""))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label="RTL mean latency")
    ax.axhline(gold, color="tab:green", ls="--",
               label=f"golden timing model zero-load, links only ({gold:.1f})")
    ax.axhline(gold_r, color="tab:olive", ls="-",
               label=f"golden timing model zero-load, router numbers ({gold_r:.1f})")
    ax.axhline(rtl0, color="tab:gray", ls=":",
               label=f"RTL zero-load, documented ({rtl0:.1f})")
    ax.axvline(sat, color="tab:red", ls="-.", label=f"saturation throughput ({sat:.2f})")
    ax.set_xlabel("offered load (flits/cycle/terminal)")
    ax.set_ylabel("latency (cycles)")
    ax.set_yscale("log")
    ax.set_title(f"{topo.spec} uniform random, {args.num_vcs} VCs x {args.vc_buf_depth} flits, "
                 f"{args.flow_control}, L={args.link_latency}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    out.with_suffix(".json").write_text(json.dumps({
        "topology": topo.spec, "network": net_args, "points": [
            {"offered": o, "latency": l, "accepted": t} for o, l, t in pts],
        "saturation_throughput": sat, "zero_load_rtl": rtl0, "zero_load_golden": gold,
        "zero_load_golden_router_numbers": gold_r,
        "knee_offered": knee}, indent=1))
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
