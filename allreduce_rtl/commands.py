"""The subcommands of ``allreduce-rtl``: each takes the parsed arguments and returns an exit code."""

import json
import sys
from pathlib import Path

from tqdm import tqdm

from golden_model.algorithms import ALGORITHMS, build_schedule, parse_algorithms
from golden_model.compare import compare, elements_for
from golden_model.errors import ConfigError
from golden_model.timing import TimingParams
from golden_model.units import format_size, parse_size

from .output import atomic_write, atomic_write_many, check_writable_file, ensure_folder, format_table

COMPARE_COLUMNS = [("algorithm", "algorithm", "{}"), ("steps", "steps", "{}"),
                   ("tree_steps", "tree steps", "{}"), ("cycles", "cycles", "{:,}"),
                   ("time_us", "time (us)", "{:.1f}"), ("algbw_GBps", "algbw GB/s", "{:.2f}"),
                   ("busbw_GBps", "busbw GB/s", "{:.2f}"),
                   ("speedup_vs_ring", "speed-up vs ring", "{:.2f}x"),
                   ("ratio_to_lower_bound", "x lower bound", "{:.3f}")]


def _params(args):
    try:
        return TimingParams(frequency_ghz=args.frequency, flit_bytes=args.flit_bytes)
    except TypeError as exc:   # pragma: no cover - argparse already typed the values
        raise ConfigError(str(exc)) from None


def _algorithms(args):
    return parse_algorithms(args.algorithms) if args.algorithms is not None else None


def _note(name, reason):
    print(f"note: skipping {name}: {reason}", file=sys.stderr)


def _print_compare(report):
    lb = report["lower_bound"]
    print(f"{report['topology']} ({report['nodes']} nodes), {format_size(report['size_bytes'])} "
          f"per node; lower bound {report['lower_bound_cycles']:,.0f} cycles ({lb['binding']})")
    print(format_table(report["results"], COMPARE_COLUMNS))


def cmd_compare(args):
    from .cli import print_json
    report = compare(args.topo, args.size, _algorithms(args), _params(args),
                     on_skip=None if args.json else _note)
    if args.json:
        print_json(report)
    else:
        _print_compare(report)
    return 0


def cmd_schedule(args):
    from .cli import print_json
    params = _params(args)
    if args.elements is not None:
        elements = args.elements
    else:
        elements = elements_for(args.size if args.size is not None else 1024, params)
    sched = build_schedule(args.algorithm, args.topo, elements)
    summary = sched.summary()
    summary.pop("ring_order", None)
    if args.out is not None:
        atomic_write(args.out, json.dumps(sched.to_json()) + "\n")
        summary["out"] = str(args.out)
    if args.json:
        print_json(summary)
    else:
        for key, value in summary.items():
            print(f"{key:>14}: {value}")
    return 0


def parse_size_range(text):
    """``"32KiB:64MiB"`` -> [32 KiB, 64 KiB, ..., 64 MiB] (doubling). ``ConfigError`` on a
    malformed range or FROM > TO."""
    parts = str(text).split(":")
    if len(parts) != 2:
        raise ConfigError(f"malformed size range {text!r}: expected FROM:TO, e.g. 32KiB:64MiB")
    lo, hi = (parse_size(p) for p in parts)
    if lo > hi:
        raise ConfigError(f"size range {text!r}: FROM must not exceed TO")
    sizes = []
    while lo <= hi:
        sizes.append(lo)
        lo *= 2
    return sizes


def cmd_sweep(args):
    from .plots import render_speedup
    params = _params(args)
    sizes = parse_size_range(args.sizes)
    for s in sizes:
        elements_for(s, params)
    names = _algorithms(args)
    out = ensure_folder(args.out if args.out is not None
                        else f"out/sweep-{args.topo.spec.replace(':', '-')}")
    for name in ("sweep.csv", "speedup.png"):   # refuse a bad target before the sweep runs
        check_writable_file(out / name)
    rows, skipped = [], set()
    for size in tqdm(sizes, desc=f"sweep {args.topo.spec}", unit="size", file=sys.stderr):
        report = compare(args.topo, size, names, params)
        skipped.update(s["algorithm"] for s in report["skipped"])
        rows.extend({"size_bytes": size, **r} for r in report["results"])
    for name in sorted(skipped & set(names or ALGORITHMS)):
        _note(name, "cannot run on this topology")
    cols = ["size_bytes", "algorithm", "steps", "cycles", "time_us", "algbw_GBps", "busbw_GBps",
            "speedup_vs_ring", "ratio_to_lower_bound"]
    def cell(v):
        return f"{v:.6g}" if isinstance(v, float) else "" if v is None else str(v)
    csv = ",".join(cols) + "\n" + "".join(",".join(cell(r[c]) for c in cols) + "\n" for r in rows)
    atomic_write_many({out / "sweep.csv": csv,
                       out / "speedup.png": render_speedup(rows, args.topo.spec)})
    print(f"wrote {out / 'sweep.csv'} and {out / 'speedup.png'} "
          f"({len(sizes)} sizes x {len(rows) // len(sizes)} algorithms)")
    return 0


def _hardware_schedule(args, name):
    """Schedule of ``name`` on ``args.topo`` with ``args.elements``, lowered for NIs on links,
    or on routers when ``args.router`` is set or the schedule needs them
    (``golden_model.lowering.needs_router``)."""
    from golden_model.lowering import lower, needs_router
    from hdl.config import FIELD_ADDR_BITS
    from hdl.routed_network import check_routable
    sched = build_schedule(name, args.topo, args.elements)
    forced = bool(getattr(args, "router", False))
    routed = forced or needs_router(sched)
    if routed:
        why = ("--router:" if forced else
               f"{name} on {args.topo.spec} sends over several links, so it needs routers, but")
        check_routable(args.topo, why)
    lw = lower(sched, routed=routed)
    if lw.buffer_flits > 1 << FIELD_ADDR_BITS:
        raise ConfigError(f"{args.elements:,} elements per node need {lw.buffer_flits:,} buffer "
                          f"flits; the NI's buffer holds at most {1 << FIELD_ADDR_BITS:,} flits "
                          f"({(1 << FIELD_ADDR_BITS) * lw.elements_per_flit:,} elements)")
    return sched, lw


def cmd_generate(args):
    """Verilog of the network for one schedule, and a manifest: parameters, the schedule summary,
    every node's engine tables (the rows and the words the host writes) and the cycles the
    timing model expects."""
    import dataclasses
    import hashlib

    from .cli import print_json
    from golden_model.lowering import Direction
    from golden_model.timing import lower_bound
    sched, lw = _hardware_schedule(args, args.algorithm)
    from hdl.generate import network_config_for, to_verilog
    from hdl.network import Network
    from hdl.routed_network import RoutedNetwork
    from hdl.schedule_table import engine_index, pack_row
    from tb.runner import config_dict
    from tb.scoreboard import hardware_timing, hardware_topology, model_cycles
    try:
        config = network_config_for(lw, flow_control=args.flow_control,
                                    link_latency=args.link_latency)
        tables = []
        for prog in lw.programs:
            engines = []
            for direction in Direction:
                for port in range(config.num_ports):
                    rows = prog.engines.get((direction, port), [])
                    engines.append({
                        "engine": engine_index(direction, port, config.num_ports),
                        "direction": direction.name.lower(), "port": port,
                        "neighbor": (prog.neighbors[port] if port < len(prog.neighbors)
                                     else None),
                        "rows": [{"step": r.step, "op": r.op.name, "flow": r.flow,
                                  "chunk": r.chunk, "addr": r.addr, "flits": r.flits,
                                  "elements": r.elements, "deps": r.deps,
                                  **({"dest": r.dest, "src": r.src} if lw.routed else {}),
                                  "word": f"{pack_row(r):#x}"} for r in rows]})
            tables.append({"node": prog.node, "neighbors": list(prog.neighbors),
                           "engines": engines})
    except ValueError as exc:       # NIConfig / table fields that do not fit
        raise ConfigError(str(exc)) from None
    out = ensure_folder(args.out)
    for name in ("network.v", "manifest.json"):     # refuse a bad target before the work
        check_writable_file(out / name)
    try:
        network = (RoutedNetwork if lw.routed else Network)(args.topo, config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    from tb.demo import _Spinner
    with _Spinner(f"generate Verilog ({args.topo.spec}, {config.link_latency}-cycle links)",
                  enabled=not args.json):
        verilog = to_verilog(network)
    expected = model_cycles(sched, config)
    size = args.elements * config.elem_width // 8
    timing = hardware_timing(config, args.topo)
    lb = lower_bound(hardware_topology(args.topo, config), size, timing)
    summary = sched.summary()
    summary.pop("ring_order", None)
    manifest = {
        "generator": "allreduce-rtl generate",
        "topology": args.topo.spec, "nodes": args.topo.num_nodes,
        "algorithm": args.algorithm, "elements": args.elements, "bytes_per_node": size,
        "config": {**config_dict(config), "flit_width": config.flit_width,
                   "initial_credits": config.initial_credits,
                   "full_rate_rx_depth": config.full_rate_rx_depth},
        "verilog": {"file": "network.v", "top": "network", "bytes": len(verilog.encode()),
                    "sha256": hashlib.sha256(verilog.encode()).hexdigest()},
        "router": network.router_parameters() if lw.routed else None,
        "schedule": summary,
        "buffer": {"flits": lw.buffer_flits, "elements_per_flit": lw.elements_per_flit,
                   "chunk_base": [int(x) for x in lw.chunk_base]},
        "expected": {"model_cycles": expected,
                     "timing_params": dataclasses.asdict(timing),
                     "lower_bound_cycles": lb.cycles,
                     "ratio_to_lower_bound": expected / lb.cycles if lb.cycles else None},
        "tables": tables,
    }
    atomic_write_many({out / "network.v": verilog,
                       out / "manifest.json": json.dumps(manifest, indent=1) + "\n"})
    brief = {k: manifest[k] for k in ("topology", "nodes", "algorithm", "elements")}
    brief.update(routed=lw.routed, steps=summary["steps"], transfers=summary["transfers"],
                 model_cycles=expected, lower_bound_cycles=lb.cycles,
                 verilog=str(out / "network.v"), manifest=str(out / "manifest.json"))
    if args.json:
        print_json(brief)
    else:
        print(f"wrote {out / 'network.v'} ({len(verilog.encode()):,} bytes, top module network) "
              f"and {out / 'manifest.json'}")
        print(f"{args.algorithm} on {args.topo.spec}, {args.elements:,} elements per node: "
              f"{summary['steps']} steps, {summary['transfers']} transfers, table depth "
              f"{lw.table_depth}, {lw.buffer_flits} buffer flits; {config.flow_control} flow "
              f"control, {config.link_latency}-cycle links"
              f"{', NIs on routers' if lw.routed else ''}; the timing model expects "
              f"{expected:,} cycles (lower bound {lb.cycles:,.0f})")
    return 0


def cmd_demo(args):
    """Build the hardware once, run MultiTree and ring on it in a simulator with real gradients,
    verify every node against the golden model, and report cycles (tb/demo.py)."""
    from tb.demo import format_report, run_demo
    from .cli import print_json
    report, code = run_demo(topology_spec=args.topo.spec, elements=args.elements,
                            sim=args.simulator, link_latency=args.link_latency,
                            flow_control=args.flow_control, seed=args.seed, waves=args.waves,
                            out=args.out, progress=True)
    if args.json:
        print_json(report)
    else:
        print(format_report(report))
    if code:
        print("allreduce-rtl: error: the hardware's results differ from the golden model "
              f"(see {report['files']['report']})", file=sys.stderr)
    return code
