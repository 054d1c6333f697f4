"""The hardware demo behind ``allreduce-rtl demo``: real gradients through the simulated network.

One hardware plan (``allreduce_rtl.plan``: the network for the topology, sized for the vector, the
paper's link latency of 150 cycles, receive FIFOs deep enough for full rate, NIs on routers where
links are not enough) and one build of it run MultiTree and ring all-reduce (Verilator by default:
a flat ``-O2`` build driven by ``tb/verilator_driver.cpp``, one simulation per algorithm, both at
once on two cores; the vectors loaded and read back through the buffer backdoor
``tb.harness.Backdoor``: these are long runs). Each node holds one gradient vector the size of a
ResNet-50 layer (by default the largest 3x3 one, conv5_x): float32 gradients (normal, seeded, of
the magnitude of real convolution gradients), all-reduced in float32 by default (the NIs' IEEE 754
adders, in the schedule's summation order, ``hdl.adders``), in bfloat16 (the gradients rounded to
it) or, with ``--dtype int32``, converted to int32 fixed point with the scale
:data:`FIXED_POINT_SCALE` (2^16), as in-network aggregation systems do (SwitchML, NSDI 2021,
quantises float gradients to 32-bit integers with a scaling factor because switches add integers).
For floats the report gives each algorithm's error against the exactly rounded sum
(``golden_model.accuracy``). NIs on routers add int32 unless told otherwise (floats there are staged
and added through a loopback port, ``golden_model.lowering``, whose slots multiply the buffer). Every node's result is checked against the golden model bit for bit; the RTL cycle counts are
compared with the timing model, with each other (speed-up over ring) and with the lower bound.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import shutil
import sys
import threading
import time

import numpy as np

from golden_model.accuracy import accuracy, exact_reference
from golden_model.errors import ConfigError
from golden_model.provenance import stamp
from tb.runner import BuildError, HardwareBuild, RunSpec, long_runs_hierarchical
from tb.scoreboard import check_run
from tb.toolchain import ToolchainError

from .errors import EnvironmentFailure
from .output import Spinner, atomic_write_many, check_writable_file, counted, ensure_folder
from .plan import links_text, plan_hardware, rates_text

__all__ = ["RESNET50_LAYERS", "FIXED_POINT_SCALE", "DemoPlan", "plan_demo", "gradients",
           "to_fixed_point", "demo_vectors", "run_demo", "SIM_SPEED"]

#: ResNet-50's 3x3 convolutions, largest first: (name, weights).
RESNET50_LAYERS = (
    ("ResNet-50 conv5_x 3x3 convolution (512x512x3x3)", 512 * 512 * 9),
    ("ResNet-50 conv4_x 3x3 convolution (256x256x3x3)", 256 * 256 * 9),
    ("ResNet-50 conv3_x 3x3 convolution (128x128x3x3)", 128 * 128 * 9),
    ("ResNet-50 conv2_x 3x3 convolution (64x64x3x3)", 64 * 64 * 9),
)
#: Seconds the other simulations wait for the longest one to start before they start anyway.
LEADER_WAIT_S = 60.0
#: Fixed-point scale: int32 value = round(gradient * 2^16).
FIXED_POINT_SCALE = 1 << 16


def fixed_point_scale(element_type):
    """The fixed-point scale of an integer element type: 2^(bits/2), :data:`FIXED_POINT_SCALE`
    for int32 (half the bits for the fraction, the rest for the sum of the nodes' values)."""
    return 1 << (element_type.bits // 2)
#: Standard deviation of the synthetic gradients (typical of convolution weight gradients).
GRADIENT_STD = 1e-3
#: The demo stays under this many seconds of simulation, choosing a smaller layer if needed.
TIME_BUDGET_S = 180.0
#: Simulated cycles per second of a 16-node network with 150-cycle links on this project's
#: reference machine (2 cores), scaled by 16 / nodes. Verilator: the C++ driver's flat -O2 build
#: with the buffer backdoor, conv5_x's 1.48 million cycles of MultiTree and ring in 25 s with the
#: backdoor's files (59,000 per second; 80,000 while the all-reduce runs); Icarus about 55.
#: "verilator-hierarchical": the build above ``tb.runner.FLAT_MAX_NODES`` nodes, whose NI is a
#: hierarchical block, measured on torus:8x8 (64 nodes) with the backdoor: conv5_x's 1.50
#: million cycles in 263 s (5,700 per second, 22,800 per 16 nodes); "-routed": with the NIs on
#: routers, fattree:8x2 (64 nodes, 16-port routers) with conv4_x: 627,000 cycles in 315 s
#: (2,000 per second, 8,000 per 16 nodes); "-float": a float NI, always a hierarchical block,
#: measured on torus:4x4 in float32 with conv5_x: 1.48 million cycles in 72 s (20,600 per
#: second, two simulations at once: ``scripts/bench_demo.py``).
SIM_SPEED = {"verilator": 55_000.0, "verilator-hierarchical": 22_800.0,
             "verilator-hierarchical-float": 20_600.0,
             "verilator-hierarchical-routed": 8_000.0, "icarus": 55.0}
#: Vector for ``--waves`` when no size is given (waveforms of long runs take gigabytes).
WAVES_ELEMENTS = 16 * 1024
ALGORITHMS = ("multitree", "ring")


@dataclasses.dataclass
class DemoPlan:
    """The demo's vector and its hardware plan (``allreduce_rtl.plan.HardwarePlan``)."""
    elements: int
    layer: str
    note: str
    estimated_cycles: int
    estimated_seconds: float
    hardware: object


def _sim_cycles(runs, config):
    """Simulated cycles of every run: loading the tables (the vectors go through the buffer
    backdoor, ``tb.harness.Backdoor``, in no cycle), the all-reduce and the resets between."""
    return sum(2 * config.num_engines * 8 + r.expected_cycles + 200 for r in runs)


def _estimate(plan, sim):
    """(simulated cycles, seconds) of every planned run."""
    total = _sim_cycles(plan.runs, plan.config)
    n = plan.topology.num_nodes
    key = sim
    if sim == "verilator" and long_runs_hierarchical(n, plan.element_type):
        key += ("-hierarchical-routed" if plan.routed
                else "-hierarchical-float" if plan.element_type.is_float else "-hierarchical")
    return total, total / (SIM_SPEED[key] * 16 / n)


def plan_demo(topology, elements, sim, waves, hardware_options,
              algorithms=ALGORITHMS) -> DemoPlan:
    """The vector size and its hardware plan: ``elements`` if given, else the largest ResNet-50
    3x3 layer whose simulation is estimated under :data:`TIME_BUDGET_S` (the estimate uses
    :data:`SIM_SPEED`) and, on routers, whose chunks fit a routed message.

    Parameters
    ----------
    hardware_options : dict
        Keyword arguments of ``plan_hardware`` (``dtype``, ``flow_control``, ``link_latency``,
        ``link_bandwidth``).
    algorithms : sequence
        The algorithm under test (or an imported ``ScheduleFile``) and the baseline, ring.

    Raises
    ------
    ConfigError
        If the network cannot be built for the topology or the vector.
    """
    def planned(d, layer, note):
        hw = plan_hardware(topology, algorithms, d, **hardware_options)
        cycles, secs = _estimate(hw, sim)
        return DemoPlan(d, layer, note, cycles, secs, hw)

    if elements is not None:
        match = [name for name, w in RESNET50_LAYERS if w == elements]
        return planned(elements, match[0] if match else "a vector of --elements gradients", "")
    if waves:
        return planned(WAVES_ELEMENTS, f"{WAVES_ELEMENTS:,} elements",
                       f"--waves without --elements: a {WAVES_ELEMENTS:,}-element vector keeps "
                       f"the waveform small")
    # Routes do not depend on the size: a small vector says whether the NIs sit on routers
    # (and raises at once where the network cannot be built at all).
    routed = plan_hardware(topology, algorithms, 4 * topology.num_nodes,
                           **hardware_options).routed
    first = None
    too_long = []       # layers whose chunks exceed a routed message
    for name, weights in RESNET50_LAYERS:
        try:
            plan = planned(weights, name, "")
        except ConfigError:
            if not routed or weights == RESNET50_LAYERS[-1][1]:
                raise
            too_long.append(weights)
            continue
        secs = plan.estimated_seconds
        if too_long:
            from hdl.router.flit import MAX_PAYLOAD_FLITS  # noqa: PLC0415
            plan.note = (f"using {name} ({weights:,} weights): the chunks of the larger 3x3 "
                         f"layers ({', '.join(f'{w:,}' for w in too_long)} weights) exceed a "
                         f"routed message ({MAX_PAYLOAD_FLITS:,} flits)")
            if first is not None:
                plan.note += (f", and {first[1]:,} weights would take about "
                              f"{first[2] / 60:.0f} min to simulate in {sim} (budget "
                              f"{TIME_BUDGET_S / 60:.0f} min)")
            if secs <= TIME_BUDGET_S:
                return plan
        if first is None:
            first = (name, weights, secs)
        if secs <= TIME_BUDGET_S or weights == RESNET50_LAYERS[-1][1]:
            if weights != first[1]:
                plan.note = (f"using {name} ({weights:,} weights) instead of the largest 3x3 "
                             f"layer ({first[1]:,} weights): that one would take about "
                             f"{first[2] / 60:.0f} min to simulate in {sim} (budget "
                             f"{TIME_BUDGET_S / 60:.0f} min)")
            if secs > TIME_BUDGET_S:       # even the smallest layer: a vector that fits
                d = weights
                while d > 1024 and plan.estimated_seconds > TIME_BUDGET_S:
                    d //= 2
                    plan = planned(d, f"{d:,} synthetic gradients", "")
                largest = (f" (the largest, {first[1]:,} weights, about {first[2] / 60:.0f} min)"
                           if first[1] != weights else "")
                plan.note = (f"using {d:,} gradients per node: even the smallest ResNet-50 3x3 "
                             f"layer ({weights:,} weights) would take over "
                             f"{TIME_BUDGET_S / 60:.0f} min to simulate in {sim}{largest}")
            return plan
    raise AssertionError("unreachable")


def gradients(num_nodes, elements, seed=0):
    """float32 gradients, one row per node: a shared component (the true gradient) plus
    per-node noise (each worker's minibatch), both normal with std ``GRADIENT_STD``."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(elements, dtype=np.float32) * np.float32(GRADIENT_STD)
    grads = rng.standard_normal((num_nodes, elements), dtype=np.float32)
    grads *= np.float32(GRADIENT_STD)     # in place: no temporaries of the whole array
    grads += common[None, :]
    return grads


def to_fixed_point(grads, num_nodes, dtype=np.int32, scale=FIXED_POINT_SCALE):
    """Fixed point ``round(g * scale)`` in the integer ``dtype``, clipped so the sum of
    ``num_nodes`` values cannot overflow."""
    limit = np.iinfo(dtype).max // max(1, num_nodes)
    q = np.rint(np.asarray(grads, dtype=np.float64) * scale)
    return np.clip(q, -limit, limit).astype(dtype)


def demo_vectors(grads, element_type, num_nodes):
    """The gradients as the hardware adds them: fixed point (``to_fixed_point``, scale 2^16 for
    int32, 2^(bits/2) in general) for an integer type, the float type itself otherwise.
    Returns ``(vectors, description)``."""
    if element_type.dtype.kind == "i":
        scale = fixed_point_scale(element_type)
        return (to_fixed_point(grads, num_nodes, element_type.dtype, scale),
                f"{element_type.name} = round(gradient * 2^{scale.bit_length() - 1})")
    how = "no quantisation" if element_type.bits >= 32 else "the gradients rounded to it"
    return grads.astype(element_type.dtype), f"{element_type.name}, {how}"


#: The files the demo writes into its output folder, by their key in the report's ``files``.
_OUTPUT_FILES = {"verilog": "network.v", "report": "report.json", "tb_top": "tb_top.v",
                 "host_player": "host_player.v"}


def run_demo(*, topology, elements=None, sim="verilator", dtype=None, link_latency=None,
             link_bandwidth=None, flow_control="message", buffer_copies=1, seed=0, waves=False,
             out=None, build_root=None, progress=True, schedule=None):
    """Plan, build, simulate, verify; returns ``(report dict, exit code)`` (0: every node of
    every algorithm matched the golden model).

    Parameters
    ----------
    topology : golden_model.topology.Topology
    elements : int, optional
        Elements per node (default: ``plan_demo``'s layer).
    sim : {"verilator", "icarus"}
    link_latency, link_bandwidth : optional
        ``plan_hardware``'s: every link alike; default each link its own.
    dtype : str, optional
        Element type the NIs add (default ``allreduce_rtl.plan.plan_hardware``'s: float32, or
        int32 on routers).
    buffer_copies : {1, 2}
        ``NIConfig.buffer_copies``.
    build_root : path, optional
        Build cache (``tb.toolchain.build_root``).
    schedule : golden_model.algorithms.ScheduleFile, optional
        An imported MSCCL-IR schedule run instead of MultiTree (ring stays the baseline).

    Raises
    ------
    ConfigError
        Bad topology or size (a ring cannot take routers: the demo needs links or routers), or
        an output folder that cannot be written.
    EnvironmentFailure
        If the simulator build fails or a tool is missing (one line; the log is named).
    """
    wall0 = time.perf_counter()
    algorithms = (schedule, "ring") if schedule is not None else ALGORITHMS
    plan = plan_demo(topology, elements, sim, waves,
                     {"dtype": dtype, "link_latency": link_latency,
                      "link_bandwidth": link_bandwidth, "flow_control": flow_control,
                      "buffer_copies": buffer_copies}, algorithms)
    hw, d = plan.hardware, plan.elements
    config, etype = hw.config, hw.element_type
    out = ensure_folder(out or f"out/demo-{topology.spec.replace(':', '-')}")
    paths = {key: out / name for key, name in _OUTPUT_FILES.items()}
    for path in paths.values():             # refuse a bad target before the work
        check_writable_file(path)
    if progress and plan.note:
        print(f"note: {plan.note}", file=sys.stderr)

    grads = gradients(topology.num_nodes, d, seed)
    vectors, data_note = demo_vectors(grads, etype, topology.num_nodes)

    try:
        build = HardwareBuild(hw.hardware_topology, config, sim, waves=waves, valid_pct=100,
                              ready_pct=100,
                              long_runs=True, backdoor=True, build_root=build_root)
        with Spinner(f"generate Verilog ({topology.spec}, {links_text(hw.link_latency_range)})",
                     progress) as sp_gen:
            net = build.network_file()
        with Spinner(f"build ({sim})", progress) as sp_build:
            build.build()
    except (BuildError, ToolchainError) as exc:
        raise EnvironmentFailure(str(exc)) from None

    specs = [RunSpec(run.algorithm, run.lowered, vectors, run.expected_cycles) for run in hw.runs]
    est_total = _sim_cycles(hw.runs, config)
    bar = None
    if progress:
        from tqdm import tqdm  # noqa: PLC0415
        bar = tqdm(total=est_total, desc=f"simulate ({sim})", unit="cycle", unit_scale=True,
                   file=sys.stderr, dynamic_ncols=True,
                   mininterval=0.5 if sys.stderr.isatty() else 30)

    # Cycles so far of each simulation (its progress reports count from its own start).
    cycles_seen = {}
    lock = threading.Lock()

    # With the C++ driver one simulation per algorithm, as many at once as there are cores
    # (every run starts from reset, so its cycles are those it has in one simulation after the
    # other). cocotb's runner (Icarus, --waves) keeps state in the build, so there one
    # simulation runs them all, and one waveform holds every run.
    groups = [[spec] for spec in specs] if build.driver is not None else [specs]
    # The longest simulation prepares its files first; the others start once it simulates
    # (their preparation then overlaps it instead of slowing it down).
    leader = max(range(len(groups)), key=lambda k: sum(s.expected_cycles or 0 for s in groups[k]))
    leader_running = threading.Event()

    def simulate(k, group):
        def on_progress(p):
            leader_running.set()
            with lock:
                cycles_seen[k] = int(p.get("cycle", 0))
                if bar is not None:
                    cyc = min(sum(cycles_seen.values()), est_total)
                    bar.update(max(0, cyc - bar.n))
                    bar.set_postfix_str(f"{p.get('run', '')} {p.get('phase', '')}")

        if k != leader:
            leader_running.wait(LEADER_WAIT_S)
        try:
            return build.run(group, name="demo-" + "-".join(s.name for s in group),
                             seed=seed + 1, keep=waves, progress=on_progress,
                             progress_slice=50_000, timeout_factor=3.0)
        finally:
            leader_running.set()

    first = [sum(map(len, groups[:k])) for k in range(len(groups))]   # index of each group's
    results = [None] * len(specs)                                       # first run
    verdicts, accuracies, reference = {}, {}, None
    t_sim = time.perf_counter()
    try:
        with concurrent.futures.ThreadPoolExecutor(min(len(groups), os.cpu_count() or 1)) as pool:
            order = sorted(range(len(groups)), key=lambda k: k != leader)    # leader first
            futures = {pool.submit(simulate, k, groups[k]): k for k in order}
            # Verify each simulation as it ends, while the others still run.
            for fut in concurrent.futures.as_completed(futures):
                k = futures[fut]
                sim_seconds = time.perf_counter() - t_sim
                for i, res in enumerate(fut.result(), start=first[k]):
                    run = hw.runs[i]
                    results[i] = res
                    verdicts[run.algorithm] = check_run(res, run.schedule, vectors, etype,
                                                        expected_cycles=run.expected_cycles)
                    if etype.is_float and res.outputs is not None:
                        if reference is None:
                            reference = exact_reference(vectors, etype)
                        accuracies[run.algorithm] = accuracy(
                            res.outputs[0].astype(etype.dtype), vectors, etype, reference)
    finally:
        if bar is not None:
            bar.update(max(0, est_total - bar.n))
            bar.close()

    verdicts = {run.algorithm: verdicts[run.algorithm] for run in hw.runs}
    ok = all(v.passed for v in verdicts.values())
    ring = verdicts["ring"]
    rows = []
    for run, res in zip(hw.runs, results):
        v = verdicts[run.algorithm]
        lb = run.lower_bound_cycles
        rows.append({
            "algorithm": run.algorithm,
            "rtl_cycles": res.cycles,
            "model_cycles": v.model_cycles,
            "rtl_over_model": v.ratio,
            "speedup_vs_ring": (ring.rtl_cycles / res.cycles
                                if res.cycles and ring.rtl_cycles else None),
            "ratio_to_lower_bound": res.cycles / lb if res.cycles and lb else None,
            "time_us": res.cycles / 1e3 if res.cycles else None,
            "verified": v.passed,
            "mismatches": v.mismatches,
            "status": res.status,
            "message": v.message,
            "sim_wall_s": res.sim_wall_s,
        })
    # Accuracy of the all-reduced gradient: fixed point against a float64 sum, floats against
    # the exactly rounded sum, per algorithm.
    quant = {}
    mt = results[0]
    if etype.is_float:
        for row, res in zip(rows, results):
            if res.outputs is not None:
                got = res.outputs.astype(etype.dtype)
                row["accuracy"] = accuracies[row["algorithm"]]
                row["nodes_bit_identical"] = bool(
                    (etype.to_bits(got) == etype.to_bits(got[:1])).all())
    elif mt.outputs is not None:
        exact = grads.astype(np.float64).sum(axis=0)
        got = mt.outputs[0].astype(np.float64) / fixed_point_scale(etype)
        err = np.abs(got - exact)
        quant = {"max_abs_error": float(err.max()),
                 "rms_error": float(np.sqrt(np.mean(err**2))),
                 "rms_gradient_sum": float(np.sqrt(np.mean(exact**2)))}

    files = {key: str(path) for key, path in paths.items()}
    texts = {paths["verilog"]: net.read_text(),
             **{paths[key]: (build.build_dir / _OUTPUT_FILES[key]).read_text()
                for key in ("tb_top", "host_player")}}
    if waves and results[0].waves_file is not None and results[0].waves_file.is_file():
        dest = out / results[0].waves_file.name
        shutil.move(results[0].waves_file, dest)
        files["waves"] = str(dest)
        shutil.rmtree(results[0].run_dir, ignore_errors=True)

    by = {r["algorithm"]: r for r in rows}
    under_test = str(algorithms[0])
    speedup = by[under_test]["speedup_vs_ring"]
    worst_model = max((r["rtl_over_model"] for r in rows if r["rtl_over_model"]), default=None)
    report = {
        "topology": topology.spec,
        "nodes": topology.num_nodes,
        "simulator": sim,
        "dtype": etype.name,
        "layer": plan.layer,
        "elements": d,
        "bytes_per_node": d * etype.bytes,
        "note": plan.note,
        "data": {"gradients": f"float32, normal, std {GRADIENT_STD:g} (shared + per-node), "
                              f"seed {seed}",
                 "encoding": data_note,
                 "fixed_point_scale": (fixed_point_scale(etype) if etype.dtype.kind == "i"
                                       else None),
                 **quant},
        "config": dataclasses.asdict(config),
        "link_latency_cycles": list(hw.link_latency_range),
        "link_rates": hw.link_rates,
        "timing_params": dataclasses.asdict(hw.timing),
        "lower_bound_cycles": hw.runs[0].lower_bound_cycles,
        "results": rows,
        # The paper's 2.3x is MultiTree's; an imported schedule has no target (None).
        "targets": {"under_test": under_test, "speedup_vs_ring": speedup,
                    "speedup_at_least_2.3x": (bool(speedup and speedup >= 2.3)
                                              if under_test == "multitree" else None),
                    "worst_rtl_over_model": worst_model,
                    "rtl_within_10pct_of_model": bool(worst_model and worst_model <= 1.10)},
        "verified": ok,
        "seconds": {"verilog": round(sp_gen.seconds, 1), "build": round(sp_build.seconds, 1),
                    "simulation": round(sim_seconds, 1),
                    "total": round(time.perf_counter() - wall0, 1)},
        "estimated_simulation_seconds": round(plan.estimated_seconds, 1),
        "build_dir": str(build.build_dir),
        "files": files,
    }
    texts[paths["report"]] = json.dumps(stamp(report), indent=2) + "\n"
    atomic_write_many(texts)
    return report, 0 if ok else 1


COLUMNS = [("algorithm", "algorithm", "{}"), ("rtl_cycles", "RTL cycles", "{:,}"),
           ("model_cycles", "model cycles", "{:,}"), ("rtl_over_model", "RTL/model", "{:.3f}"),
           ("speedup_vs_ring", "speed-up vs ring", "{:.2f}x"),
           ("ratio_to_lower_bound", "x lower bound", "{:.3f}"),
           ("time_us", "time (us)", "{:,.1f}"), ("verified", "verified", "{}")]


def format_report(report) -> str:
    """The demo's text output (the table and the verdict lines)."""
    from .output import format_table  # noqa: PLC0415
    r = report
    rows = [{**row, "verified": "yes" if row["verified"] else "NO"} for row in r["results"]]
    q = r["data"]
    lines = [
        f"allreduce-rtl demo: {r['topology']} ({counted(r['nodes'], 'node')}), {r['simulator']}, "
        f"{links_text(r['link_latency_cycles'])}, {r['config']['flow_control']} flow control"
        + (", NIs on routers" if r["config"].get("routed") else ""),
        f"data: {r['layer']}: {r['elements']:,} gradients per node ({r['bytes_per_node']:,} "
        f"bytes), {q['gradients']}, as {q['encoding']}",
    ]
    if r["note"]:
        lines.append(f"note: {r['note']}")
    if r.get("link_rates"):
        lines.append(rates_text(r["link_rates"]))
    lines += ["", format_table(rows, COLUMNS), ""]
    how = ("NIs on routers (head flit, 4 cycles per router, links in schedule order at "
           "injection, first-come at the routers)"
           if r["config"].get("routed") else
           "the NI (head flit, send/retire delays, in-order links)")
    lines.append(f"lower bound {r['lower_bound_cycles']:,.1f} cycles; model = "
                 f"golden_model.timing configured like {how}")
    t = r["targets"]
    if t["worst_rtl_over_model"] is None:       # one node: nothing to send, nothing to model
        lines.append(f"a {r['nodes']}-node network has no transfers: no speed-up or RTL/model "
                     f"ratio to report")
    elif t["speedup_vs_ring"]:
        met = {True: "met", False: "NOT met"}
        sp = t["speedup_vs_ring"]
        how = ("as many" if sp == 1 else f"{sp:.2f}x fewer" if sp > 1 else
               f"{1 / sp:.2f}x more")
        name = "MultiTree" if t["under_test"] == "multitree" else t["under_test"]
        target = ("" if t["speedup_at_least_2.3x"] is None else
                  f" (target >= 2.3x: {met[t['speedup_at_least_2.3x']]})")
        lines.append(f"{name} takes {how} RTL cycles {'as' if sp == 1 else 'than'} "
                     f"ring{target}; RTL within "
                     f"{100 * (t['worst_rtl_over_model'] - 1):.1f}% of the model (target 10%: "
                     f"{met[t['rtl_within_10pct_of_model']]})")
    for row in r["results"]:
        a = row.get("accuracy")
        if a is not None:
            same = "the same bits on every node" if row["nodes_bit_identical"] else \
                "NODES DIFFER"
            lines.append(f"{row['algorithm']}: {r['dtype']} result vs the exactly rounded sum: "
                         f"max relative error {a['max_relative_error']:.2e}, max "
                         f"{a['max_ulp_error']:g} ulp, {100 * a['exactly_rounded']:.1f}% exactly "
                         f"rounded; {same}")
    if "max_abs_error" in q:
        lines.append(f"fixed point: max |error| of the all-reduced gradient vs a float64 sum "
                     f"{q['max_abs_error']:.2e} (rms gradient sum {q['rms_gradient_sum']:.2e})")
    lines.append("every node of every algorithm matches the golden model bit for bit"
                 if r["verified"] else "VERIFICATION FAILED: " + "; ".join(
                     row["message"] for row in r["results"] if not row["verified"]))
    s = r["seconds"]
    lines.append(f"wall time {s['total']:.0f} s (Verilog {s['verilog']:.0f} s, build "
                 f"{s['build']:.0f} s, simulation {s['simulation']:.0f} s); wrote "
                 + ", ".join(r["files"].values()))
    return "\n".join(lines)
