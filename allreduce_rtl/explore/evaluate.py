"""One exploration point, evaluated where a Dask worker runs it.

:func:`evaluate` runs the evaluations a point asks for and returns its figures, its error (one
line, or None) and its provenance; it never raises, so one bad point does not stop the others.

* ``model``: ``golden_model.compare`` on the point's network (its topology with its link
  bandwidth and latency, the timing model's link order, the element type's bytes): cycles,
  time, algbw and busbw, speed-up over ring, ratio to the lower bound (prefix ``model_``).
* ``rtl`` and ``cost`` first read the point's hardware group's plan
  (``allreduce_rtl.plan.plan_hardware`` for every algorithm and size of the group, once per
  worker process): the NI configuration, the element type, whether the NIs sit on routers, and
  the timing model's cycles on that hardware (prefix ``hw_``).
* ``rtl``: the plan's network built once per worker (and per host: the build cache is keyed by
  the design and the host's toolchain, ``tb.build``) like the demo's (Verilator's C++ driver,
  ``-O2``, the buffer backdoor, no back-pressure), the point's run simulated with the demo's
  synthetic gradients and checked bit for bit against the golden model (``tb.scoreboard``)
  (prefix ``rtl_``). A mismatch or a stall is the point's error, with its figures kept.
* ``cost``: the plan's NI synthesised (``allreduce_rtl.synth``, cached per host by its
  Verilog) generically, and for an FPGA if the spec's ``[cost] device`` names one (prefix
  ``cost_``); ``cost_network_cells`` counts every node's NI (routers are not counted).
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["evaluate", "provenance"]


@functools.cache
def _git_commit():
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def provenance() -> dict:
    """Tool version, git commit (None outside a checkout) and host of this process."""
    from golden_model.provenance import tool_version  # noqa: PLC0415
    return {"tool_version": tool_version(), "git_commit": _git_commit(),
            "host": socket.gethostname(), "pid": os.getpid()}


def _topology(params):
    from golden_model.topology import parse_topology  # noqa: PLC0415
    return parse_topology(params["topology"], link_bandwidth=params["link_bandwidth"],
                          link_latency=params["link_latency"])


def _model(params):
    from golden_model.compare import compare  # noqa: PLC0415
    from golden_model.timing import TimingParams  # noqa: PLC0415
    from .spec import elements_of  # noqa: PLC0415
    elements = elements_of(params)
    timing = TimingParams(link_order=params["timing"],
                          element_bytes=params["size"] // elements)
    report = compare(_topology(params), params["size"], [params["algorithm"]], timing)
    row = next(r for r in report["results"] if r["algorithm"] == params["algorithm"])
    keys = ("steps", "cycles", "time_us", "algbw_GBps", "busbw_GBps", "speedup_vs_ring",
            "ratio_to_lower_bound")
    return {"model_" + k: row[k] for k in keys} | {
        "model_lower_bound_cycles": report["lower_bound_cycles"]}


@functools.lru_cache(maxsize=8)
def _plan(group_json):
    from golden_model.topology import parse_topology  # noqa: PLC0415
    from ..plan import plan_hardware  # noqa: PLC0415
    from .spec import elements_of  # noqa: PLC0415
    g = json.loads(group_json)
    topo = parse_topology(g["topology"], link_latency=g["link_latency"])
    sizes = [elements_of({"size": s, "dtype": g["dtype"]}) for s in g["sizes"]]
    overrides = {k: g[k] for k in ("buffer_copies", "router_vcs", "router_vc_buf_depth",
                                   "rx_buffer_depth") if g[k] is not None}
    return plan_hardware(topo, g["algorithms"], sizes, dtype=g["dtype"],
                         flow_control=g["flow_control"], link_latency=g["link_latency"],
                         router=g["router"], **overrides)


def _hardware(point):
    from .spec import elements_of  # noqa: PLC0415
    plan = _plan(json.dumps(point.group, sort_keys=True))
    run = plan.run(point.params["algorithm"], elements_of(point.params))
    figures = {"hw_dtype": plan.element_type.name, "hw_routed": plan.routed,
               "hw_buffer_depth": plan.config.buffer_depth,
               "hw_rx_buffer_depth": plan.config.rx_buffer_depth,
               "hw_model_cycles": run.expected_cycles,
               "hw_time_us": run.expected_cycles / (plan.timing.frequency_ghz * 1e3),
               "hw_lower_bound_cycles": run.lower_bound_cycles}
    return plan, run, figures


#: Simulator builds this worker process has made or found, by build folder.
_BUILDS = {}


def _rtl(plan, run, sim, build_root, prov):
    from tb.runner import HardwareBuild, RunSpec  # noqa: PLC0415
    from tb.scoreboard import check_run  # noqa: PLC0415
    from ..demo import demo_vectors, gradients  # noqa: PLC0415
    build = HardwareBuild(plan.hardware_topology, plan.config, sim, valid_pct=100, ready_pct=100,
                          long_runs=True, backdoor=True, build_root=build_root)
    key = build.build_dir.name
    prov["build_key"] = key
    t0 = time.perf_counter()
    if key not in _BUILDS:
        build.build()
        _BUILDS[key] = build
    build_s = time.perf_counter() - t0
    build = _BUILDS[key]
    n = plan.topology.num_nodes
    vectors, _ = demo_vectors(gradients(n, run.elements), plan.element_type, n)
    result = build.run(RunSpec(run.name, run.lowered, vectors, run.expected_cycles),
                       name=f"explore-{run.name}-{os.getpid()}", timeout_factor=3.0)[0]
    verdict = check_run(result, run.schedule, vectors, plan.element_type,
                        expected_cycles=run.expected_cycles)
    figures = {"rtl_cycles": result.cycles, "rtl_over_model": verdict.ratio,
               "rtl_time_us": (result.cycles / (plan.timing.frequency_ghz * 1e3)
                               if result.cycles else None),
               "rtl_verified": verdict.passed, "rtl_mismatches": verdict.mismatches,
               "rtl_status": result.status, "rtl_build_s": round(build_s, 2),
               "rtl_sim_s": result.sim_wall_s}
    return figures, None if verdict.passed else verdict.message


def _cost(plan, device, build_root):
    from hdl.generate import TOP_MODULE, to_verilog  # noqa: PLC0415
    from hdl.ni import NetworkInterface  # noqa: PLC0415
    from ..synth import DEVICES, synthesise  # noqa: PLC0415
    fpga = device != "generic"
    result = synthesise(to_verilog(NetworkInterface(plan.config)), TOP_MODULE, fpga=fpga,
                        device=device if fpga else next(iter(DEVICES)), root=build_root)
    g = result["generic"]
    n = plan.topology.num_nodes
    figures = {"cost_ni_cells": g["cells"], "cost_ni_flip_flops": g["flip_flops"],
               "cost_ni_memory_bits": g["memory_bits"], "cost_network_cells": n * g["cells"],
               "cost_network_memory_bits": n * g["memory_bits"], "cost_synth_s": result["seconds"]}
    if fpga:
        family = DEVICES[device].family.name
        f = result[family]
        figures.update({"cost_device": device, "cost_fits": f["fits"],
                        "cost_fmax_MHz": f["fmax_MHz"]})
        figures.update({f"cost_ni_{k}": v for k, v in f.items()
                        if isinstance(v, int) and not isinstance(v, bool)})
    return figures


def _message(exc) -> str:
    from golden_model.errors import ConfigError  # noqa: PLC0415
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return first if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {first}"


def evaluate(point, build_root=None) -> dict:
    """Evaluate ``point`` (``spec.Point``); ``build_root`` is the build cache
    (``tb.toolchain.build_root``).

    Returns
    -------
    dict
        ``figures`` (every figure measured, even when a later evaluation failed), ``error``
        (one line, or None) and ``provenance`` (:func:`provenance`, ``build_key`` of an rtl
        point, ``seconds``).
    """
    t0 = time.perf_counter()
    prov = provenance()
    figures, error = {}, None
    try:
        if "model" in point.evaluations:
            figures.update(_model(point.params))
        if point.group is not None:
            plan, run, hw = _hardware(point)
            figures.update(hw)
            if "rtl" in point.evaluations:
                rtl, error = _rtl(plan, run, point.options["simulator"], build_root, prov)
                figures.update(rtl)
            if "cost" in point.evaluations:
                figures.update(_cost(plan, point.options["device"], build_root))
    except Exception as exc:        # noqa: BLE001 - recorded with the point, the rest go on
        error = _message(exc)
    prov["seconds"] = round(time.perf_counter() - t0, 3)
    return {"figures": figures, "error": error, "provenance": prov}
