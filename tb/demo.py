"""The hardware demo behind ``allreduce-rtl demo``: real gradients through the simulated network.

One hardware build (``hdl.network.Network`` for the topology, sized for the vector, the paper's
link latency of 150 cycles, receive FIFOs deep enough for full rate) runs MultiTree and ring
all-reduce in one simulation (Verilator by default). Each node holds one gradient vector the size
of a ResNet-50 layer: float32 gradients (normal, seeded, of the magnitude of real convolution
gradients) converted to int32 fixed point with the scale :data:`FIXED_POINT_SCALE` (2^16), as
in-network aggregation systems do (SwitchML, NSDI 2021, quantises float gradients to 32-bit
integers with a scaling factor because switches add integers). Every node's result is checked
against the golden model bit for bit; the RTL cycle counts are compared with the timing model,
with each other (speed-up over ring) and with the lower bound.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import pathlib
import shutil
import sys
import threading
import time

import numpy as np

from golden_model.algorithms import build_schedule
from golden_model.errors import ConfigError
from golden_model.lowering import MAX_ROUTED_FLITS, lower, needs_router
from golden_model.topology import parse_topology

from .runner import HardwareBuild, RunSpec, config_dict
from .scoreboard import check_run, hardware_timing, model_cycles

__all__ = ["RESNET50_LAYERS", "FIXED_POINT_SCALE", "DemoPlan", "plan_demo", "gradients",
           "to_fixed_point", "run_demo", "SIM_SPEED"]

#: ResNet-50's 3x3 convolutions, largest first: (name, weights).
RESNET50_LAYERS = (
    ("ResNet-50 conv5_x 3x3 convolution (512x512x3x3)", 512 * 512 * 9),
    ("ResNet-50 conv4_x 3x3 convolution (256x256x3x3)", 256 * 256 * 9),
    ("ResNet-50 conv3_x 3x3 convolution (128x128x3x3)", 128 * 128 * 9),
    ("ResNet-50 conv2_x 3x3 convolution (64x64x3x3)", 64 * 64 * 9),
)
#: Fixed-point scale: int32 value = round(gradient * 2^16).
FIXED_POINT_SCALE = 1 << 16
#: Standard deviation of the synthetic gradients (typical of convolution weight gradients).
GRADIENT_STD = 1e-3
#: The demo stays under this many seconds of simulation, choosing a smaller layer if needed.
TIME_BUDGET_S = 180.0
#: Simulated cycles per second of a 16-node network with 150-cycle links on this project's
#: reference machine (2 cores; measured: Verilator ~17k, Icarus ~55), scaled by 16 / nodes.
SIM_SPEED = {"verilator": 17_000.0, "icarus": 55.0}
#: Vector for ``--waves`` when no size is given (waveforms of long runs take gigabytes).
WAVES_ELEMENTS = 16 * 1024
ALGORITHMS = ("multitree", "ring")


@dataclasses.dataclass
class DemoPlan:
    elements: int
    layer: str
    note: str
    estimated_cycles: int
    estimated_seconds: float


def _estimate(topology, elements, sim, config_kw):
    """(simulated cycles, seconds) of loading, running and reading back every algorithm."""
    total = 0
    for name in ALGORITHMS:
        sched = build_schedule(name, topology, elements)
        lw = lower(sched, routed=config_kw.get("routed", False))
        flits = lw.buffer_flits
        cfg = _config(lw, **config_kw)
        total += 2 * flits + 2 * cfg.num_engines * 8 + model_cycles(sched, cfg) + 200
    speed = SIM_SPEED[sim] * 16 / topology.num_nodes
    return total, total / speed


def plan_demo(topology, elements, sim, waves, config_kw) -> DemoPlan:
    """The vector size: ``elements`` if given, else the largest ResNet-50 3x3 layer whose
    simulation is estimated under :data:`TIME_BUDGET_S` (the estimate uses :data:`SIM_SPEED`)."""
    if elements is not None:
        cycles, secs = _estimate(topology, elements, sim, config_kw)
        match = [name for name, w in RESNET50_LAYERS if w == elements]
        return DemoPlan(elements, match[0] if match else "a vector of --elements gradients",
                        "", cycles, secs)
    if waves:
        cycles, secs = _estimate(topology, WAVES_ELEMENTS, sim, config_kw)
        return DemoPlan(WAVES_ELEMENTS, f"{WAVES_ELEMENTS:,} elements",
                        f"--waves without --elements: a {WAVES_ELEMENTS:,}-element vector keeps "
                        f"the waveform small", cycles, secs)
    first = None
    too_long = []       # layers whose chunks exceed a routed message
    for name, weights in RESNET50_LAYERS:
        try:
            cycles, secs = _estimate(topology, weights, sim, config_kw)
        except ConfigError:
            if not config_kw.get("routed") or weights == RESNET50_LAYERS[-1][1]:
                raise
            too_long.append(weights)
            continue
        if too_long:
            note = (f"using {name} ({weights:,} weights): the chunks of the larger 3x3 layers "
                    f"({', '.join(f'{w:,}' for w in too_long)} weights) exceed a routed "
                    f"message ({MAX_ROUTED_FLITS:,} flits)")
            if secs <= TIME_BUDGET_S:
                return DemoPlan(weights, name, note, cycles, secs)
        if first is None:
            first = (name, weights, secs)
        if secs <= TIME_BUDGET_S or weights == RESNET50_LAYERS[-1][1]:
            note = ""
            if weights != first[1]:
                note = (f"using {name} ({weights:,} weights) instead of the largest 3x3 layer "
                        f"({first[1]:,} weights): that one would take about "
                        f"{first[2] / 60:.0f} min to simulate in {sim} (budget "
                        f"{TIME_BUDGET_S / 60:.0f} min)")
            if secs > TIME_BUDGET_S:       # even the smallest layer: a vector that fits
                d = weights
                while d > 1024 and secs > TIME_BUDGET_S:
                    d //= 2
                    cycles, secs = _estimate(topology, d, sim, config_kw)
                largest = (f" (the largest, {first[1]:,} weights, about {first[2] / 60:.0f} min)"
                           if first[1] != weights else "")
                note = (f"using {d:,} gradients per node: even the smallest ResNet-50 3x3 layer "
                        f"({weights:,} weights) would take over {TIME_BUDGET_S / 60:.0f} min to "
                        f"simulate in {sim}{largest}")
                return DemoPlan(d, f"{d:,} synthetic gradients", note, cycles, secs)
            return DemoPlan(weights, name, note, cycles, secs)
    raise AssertionError("unreachable")


def gradients(num_nodes, elements, seed=0):
    """float32 gradients, one row per node: a shared component (the true gradient) plus
    per-node noise (each worker's minibatch), both normal with std ``GRADIENT_STD``."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(elements, dtype=np.float32) * np.float32(GRADIENT_STD)
    noise = rng.standard_normal((num_nodes, elements), dtype=np.float32)
    return common[None, :] + noise * np.float32(GRADIENT_STD)


def to_fixed_point(grads, num_nodes, scale=FIXED_POINT_SCALE):
    """int32 fixed point ``round(g * scale)``, clipped so the sum of ``num_nodes`` values cannot
    overflow."""
    limit = (2**31 - 1) // max(1, num_nodes)
    q = np.rint(np.asarray(grads, dtype=np.float64) * scale)
    return np.clip(q, -limit, limit).astype(np.int32)


def _config(lowered, **kw):
    from hdl.generate import network_config_for  # noqa: PLC0415
    try:
        return network_config_for(lowered, **kw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class _Spinner:
    """A tqdm line that shows elapsed time while a blocking step runs (on stderr)."""

    def __init__(self, desc, enabled=True):
        self.desc, self.enabled = desc, enabled

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.tty = self.enabled and sys.stderr.isatty()
        if self.enabled and not self.tty:
            print(f"{self.desc} ...", file=sys.stderr, flush=True)
        if not self.tty:
            return self
        from tqdm import tqdm  # noqa: PLC0415
        self.bar = tqdm(total=None, desc=self.desc, bar_format="{desc}: {elapsed}",
                        file=sys.stderr, leave=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()
        return self

    def _tick(self):
        while not self.stop.wait(0.5):
            self.bar.refresh()

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        if self.enabled and not self.tty:
            print(f"{self.desc}: {self.seconds:.0f} s", file=sys.stderr, flush=True)
        if self.tty:
            self.stop.set()
            self.thread.join()
            self.bar.refresh()
            self.bar.close()
        return False


def run_demo(*, topology_spec="torus:4x4", elements=None, sim="verilator", link_latency=150,
             flow_control="message", seed=0, waves=False, out=None, progress=True):
    """Build, simulate, verify; returns ``(report dict, exit code)`` (0: every node of every
    algorithm matched the golden model).

    Raises
    ------
    ConfigError
        Bad topology or size (a ring cannot take routers: the demo needs links or routers).
    """
    wall0 = time.perf_counter()
    topo = parse_topology(topology_spec, link_latency=link_latency)
    # NIs on routers where links are not enough (fat-tree, BiGraph; checked on a small vector:
    # routes do not depend on the size)
    routed = any(needs_router(build_schedule(name, topo, 4 * topo.num_nodes))
                 for name in ALGORITHMS)
    if routed:
        from hdl.routed_network import check_routable  # noqa: PLC0415
        check_routable(topo, f"the demo on {topo.spec} needs routers, but")
    config_kw = {"link_latency": link_latency, "flow_control": flow_control, "routed": routed}
    plan = plan_demo(topo, elements, sim, waves, config_kw)
    d = plan.elements
    schedules = {name: build_schedule(name, topo, d) for name in ALGORITHMS}
    lowered = {name: lower(s, routed=routed) for name, s in schedules.items()}
    first = lowered[ALGORITHMS[0]]
    config = _config(first, **config_kw,
                     table_depth=max(2, max(lw.table_depth for lw in lowered.values())),
                     buffer_depth=max(2, max(lw.buffer_flits for lw in lowered.values())),
                     max_chunks=max(s.num_chunks for s in schedules.values()))
    out = pathlib.Path(out or f"out/demo-{topo.spec.replace(':', '-')}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create output folder {str(out)!r}: {exc.strerror}") from None
    if progress and plan.note:
        print(f"note: {plan.note}", file=sys.stderr)

    # Data: float32 gradients -> int32 fixed point.
    grads = gradients(topo.num_nodes, d, seed)
    fixed = to_fixed_point(grads, topo.num_nodes)

    image_depth = 1 + 2 * config.num_ports * (config.table_depth + 1) + config.buffer_depth
    build = HardwareBuild(topo, config, sim, waves=waves, valid_pct=100, ready_pct=100,
                          image_depth=image_depth)
    with _Spinner(f"generate Verilog ({topo.spec}, {config.link_latency}-cycle links)",
                  progress) as sp_gen:
        net = build.network_file()
    with _Spinner(f"build ({sim})", progress) as sp_build:
        build.build()

    timing = hardware_timing(config, topo)
    specs = [RunSpec(name, lowered[name], fixed, model_cycles(schedules[name], config))
             for name in ALGORITHMS]
    est_total = sum(2 * lw.buffer_flits + s.expected_cycles + 2 * config.num_engines * 8
                    for lw, s in ((spec.lowered, spec) for spec in specs))
    bar = None
    if progress:
        from tqdm import tqdm  # noqa: PLC0415
        bar = tqdm(total=est_total, desc=f"simulate ({sim})", unit="cycle", unit_scale=True,
                   file=sys.stderr, dynamic_ncols=True,
                   mininterval=0.5 if sys.stderr.isatty() else 30)

    def on_progress(p):
        if bar is not None:
            cyc = min(int(p.get("cycle", 0)), est_total)
            bar.update(max(0, cyc - bar.n))
            bar.set_postfix_str(f"{p.get('run', '')} {p.get('phase', '')}")

    t_sim = time.perf_counter()
    try:
        results = build.run(specs, name="demo", seed=seed + 1, keep=waves,
                            progress=on_progress, progress_slice=50_000,
                            timeout_factor=3.0)
    finally:
        if bar is not None:
            bar.update(max(0, est_total - bar.n))
            bar.close()
    sim_seconds = time.perf_counter() - t_sim

    # Verify and compare.
    rows, ok = [], True
    verdicts = {}
    for spec, res in zip(specs, results):
        v = check_run(res, schedules[spec.name], fixed, config, model=spec.expected_cycles)
        verdicts[spec.name] = v
        ok &= v.passed
    ring = verdicts["ring"]
    lb = None
    for spec, res in zip(specs, results):
        v = verdicts[spec.name]
        lb = v.lower_bound_cycles
        rows.append({
            "algorithm": spec.name,
            "rtl_cycles": res.cycles,
            "model_cycles": v.model_cycles,
            "rtl_over_model": v.ratio,
            "speedup_vs_ring": (ring.rtl_cycles / res.cycles
                                if res.cycles and ring.rtl_cycles else None),
            "ratio_to_lower_bound": (res.cycles / v.lower_bound_cycles
                                     if res.cycles and v.lower_bound_cycles else None),
            "time_us": res.cycles / 1e3 if res.cycles else None,
            "verified": v.passed,
            "mismatches": v.mismatches,
            "status": res.status,
            "message": v.message,
            "sim_wall_s": res.sim_wall_s,
        })
    # Fixed-point accuracy of the all-reduced gradient against a float64 sum.
    quant = {}
    mt = results[0]
    if mt.outputs is not None:
        exact = grads.astype(np.float64).sum(axis=0)
        got = mt.outputs[0].astype(np.float64) / FIXED_POINT_SCALE
        err = np.abs(got - exact)
        quant = {"max_abs_error": float(err.max()),
                 "rms_error": float(np.sqrt(np.mean(err**2))),
                 "rms_gradient_sum": float(np.sqrt(np.mean(exact**2)))}

    files = {"verilog": str(out / "network.v"), "report": str(out / "report.json")}
    shutil.copyfile(net, out / "network.v")
    for name in ("tb_top.v", "host_player.v"):
        with contextlib.suppress(OSError):
            shutil.copyfile(build.build_dir / name, out / name)
            files[name.split(".")[0]] = str(out / name)
    if waves and results[0].waves_file is not None and results[0].waves_file.is_file():
        dest = out / results[0].waves_file.name
        shutil.move(results[0].waves_file, dest)
        files["waves"] = str(dest)
        shutil.rmtree(results[0].run_dir, ignore_errors=True)

    by = {r["algorithm"]: r for r in rows}
    speedup = by["multitree"]["speedup_vs_ring"]
    worst_model = max((r["rtl_over_model"] for r in rows if r["rtl_over_model"]), default=None)
    report = {
        "topology": topo.spec,
        "nodes": topo.num_nodes,
        "simulator": sim,
        "layer": plan.layer,
        "elements": d,
        "bytes_per_node": d * 4,
        "note": plan.note,
        "data": {"gradients": f"float32, normal, std {GRADIENT_STD:g} (shared + per-node), "
                              f"seed {seed}",
                 "fixed_point": f"int32 = round(gradient * 2^{int(math.log2(FIXED_POINT_SCALE))})",
                 "fixed_point_scale": FIXED_POINT_SCALE, **quant},
        "config": config_dict(config),
        "timing_params": dataclasses.asdict(timing),
        "lower_bound_cycles": lb,
        "results": rows,
        "targets": {"multitree_speedup_vs_ring": speedup,
                    "multitree_speedup_at_least_2.3x": bool(speedup and speedup >= 2.3),
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
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report, 0 if ok else 1


COLUMNS = [("algorithm", "algorithm", "{}"), ("rtl_cycles", "RTL cycles", "{:,}"),
           ("model_cycles", "model cycles", "{:,}"), ("rtl_over_model", "RTL/model", "{:.3f}"),
           ("speedup_vs_ring", "speed-up vs ring", "{:.2f}x"),
           ("ratio_to_lower_bound", "x lower bound", "{:.3f}"),
           ("time_us", "time (us)", "{:,.1f}"), ("verified", "verified", "{}")]


def format_report(report) -> str:
    """The demo's text output (the table and the verdict lines)."""
    from allreduce_rtl.output import format_table  # noqa: PLC0415
    r = report
    rows = [{**row, "verified": "yes" if row["verified"] else "NO"} for row in r["results"]]
    q = r["data"]
    lines = [
        f"allreduce-rtl demo: {r['topology']} ({r['nodes']} nodes), {r['simulator']}, "
        f"{r['config']['link_latency']}-cycle links, {r['config']['flow_control']} flow control"
        + (", NIs on routers" if r["config"].get("routed") else ""),
        f"data: {r['layer']}: {r['elements']:,} gradients per node ({r['bytes_per_node']:,} "
        f"bytes), {q['gradients']}, as {q['fixed_point']}",
    ]
    if r["note"]:
        lines.append(f"note: {r['note']}")
    lines += ["", format_table(rows, COLUMNS), ""]
    how = ("NIs on routers (head flit, 4 cycles per router, first-come links)"
           if r["config"].get("routed") else
           "the NI (head flit, send/retire delays, in-order links)")
    lines.append(f"lower bound {r['lower_bound_cycles']:,.0f} cycles; model = "
                 f"golden_model.timing configured like {how}")
    t = r["targets"]
    if t["multitree_speedup_vs_ring"]:
        met = {True: "met", False: "NOT met"}
        sp = t["multitree_speedup_vs_ring"]
        how = f"{sp:.2f}x fewer" if sp >= 1 else f"{1 / sp:.2f}x more"
        lines.append(f"MultiTree takes {how} RTL cycles "
                     f"than ring (target >= 2.3x: "
                     f"{met[t['multitree_speedup_at_least_2.3x']]}); RTL within "
                     f"{100 * (t['worst_rtl_over_model'] - 1):.1f}% of the model (target 10%: "
                     f"{met[t['rtl_within_10pct_of_model']]})")
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
