#!/usr/bin/env python3
"""Floats on routers against int32: RTL cycles, the timing model's, and the buffer and arrival
counters of each element type's hardware (README, "Floats on routers: staged reductions").

For each element type one routed hardware plan (``allreduce_rtl.plan.plan_hardware(...,
router=True)``) of every algorithm that runs on the topology, at two vector sizes, with the
routed hardware tests' tight receive FIFOs (8 flits, sub-messages of 4), built once in the
simulator and run with random host back-pressure; every node is checked bit for bit against the
golden model (``tb.scoreboard.check_run``) and a mismatch ends the script with exit code 1.
Run: ``.venv/bin/python scripts/routed_dtype_cycles.py [--topology fattree:4x2]
[--dtypes int32,float32] [--simulator verilator] [--link-latency 4]``.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from allreduce_rtl.plan import plan_hardware  # noqa: E402
from golden_model.algorithms import ALGORITHMS, build_schedule  # noqa: E402
from golden_model.errors import ConfigError  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402
from tb.runner import HardwareBuild, RunSpec  # noqa: E402
from tb.scoreboard import check_run  # noqa: E402
from tb.vectors import random_vectors  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="fattree:4x2")
    ap.add_argument("--dtypes", default="int32,float32")
    ap.add_argument("--simulator", default="verilator", choices=["verilator", "icarus"])
    ap.add_argument("--link-latency", type=int, default=4)
    args = ap.parse_args(argv)
    topo = parse_topology(args.topology, link_latency=args.link_latency)
    n = topo.num_nodes
    algorithms = []
    for name in ALGORITHMS:
        try:
            build_schedule(name, topo, 4 * n)
            algorithms.append(name)
        except ConfigError:
            pass
    sizes = [3 * n + 1, 24 * n + 5]
    print("| dtype | algorithm | elements | RTL cycles | model cycles | RTL / model |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    failed = False
    for dtype in args.dtypes.split(","):
        plan = plan_hardware(topo, algorithms, sizes, dtype=dtype, router=True,
                             link_latency=args.link_latency, rx_buffer_depth=8,
                             submessage_flits=4)
        build = HardwareBuild(plan.hardware_topology, plan.config, args.simulator,
                              valid_pct=70, ready_pct=60).build()
        specs = [RunSpec(r.name, r.lowered, random_vectors(n, r.elements, dtype, seed=k),
                         r.expected_cycles) for k, r in enumerate(plan.runs)]
        for run, spec, res in zip(plan.runs, specs, build.run(specs, seed=3)):
            verdict = check_run(res, run.schedule, spec.vectors, plan.element_type,
                                expected_cycles=run.expected_cycles)
            failed |= not verdict.passed
            ratio = "-" if res.cycles is None else f"{res.cycles / run.expected_cycles:.3f}"
            print(f"| {dtype} | {run.algorithm} | {run.elements} | {res.cycles} | "
                  f"{run.expected_cycles} | {ratio} |"
                  + ("" if verdict.passed else f" FAILED: {verdict.message}"))
        cfg = plan.config
        print(f"\n{dtype}: {cfg.num_ports} NI ports (loopback: {cfg.loopback}), buffer "
              f"{cfg.buffer_depth:,} flits, {cfg.max_chunks:,} arrival counters\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
