"""The hardware subcommands ``generate`` (Verilog and a manifest, no simulation) and ``demo``
(the main job: build, simulate, verify). Both start from one hardware plan
(``allreduce_rtl.plan``)."""

import dataclasses
import hashlib
import json
import sys

from golden_model.errors import ConfigError
from golden_model.provenance import stamp

from . import options
from .output import (Spinner, atomic_write_many, check_writable_file, ensure_folder,
                     removed_if_left_empty)


def register(sub):
    """Add ``generate`` and ``demo`` to the subcommand set ``sub``."""
    p = sub.add_parser("generate", help="generate the network's Verilog for one schedule, "
                       "with a manifest (parameters, schedule tables, expected cycles)")
    options.hardware_options(p)
    p.add_argument("--algorithm", "-a", type=options.text, default=None,
                   help="any algorithm (default multitree); multi-hop schedules (dbtree, "
                   "halving-doubling) and switched topologies get routers")
    p.add_argument("--elements", "-e", type=options.element_count, default=4096,
                   help="elements per node (default %(default)s)")
    p.add_argument("--router", action="store_true",
                   help="put every NI on a router even when the schedule only talks to "
                   "neighbours (default: only when needed)")
    options.schedule_file_options(p, "instead of --algorithm")
    p.add_argument("--out", "-o", type=options.text, required=True, metavar="DIR",
                   help="output folder (created): network.v, manifest.json, ports.json (the "
                   "port description), files.f (file list) and <top>.core (FuseSoC)")
    p.add_argument("--prefix", type=options.text, default=None, metavar="NAME",
                   help="put NAME before every module name (top: NAMEnetwork), so that two "
                   "generated networks can live in one design")
    p.add_argument("--json", action="store_true", help="print the manifest's summary as JSON")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("demo", help="build the network hardware once and run MultiTree and ring "
                       "all-reduce on it in a simulator, checked against the golden model")
    options.hardware_options(p)
    p.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator",
                   help="default %(default)s")
    p.add_argument("--elements", "-e", type=options.element_count, default=None,
                   help="elements per node (default: ResNet-50's largest 3x3 convolution, "
                   "2,359,296 weights, or a smaller layer if that would take over 3 minutes)")
    p.add_argument("--seed", type=options.nonnegative_int, default=0,
                   help="seed of the gradients (default %(default)s)")
    p.add_argument("--waves", action="store_true",
                   help="also write a waveform (Verilator VCD, Icarus FST); without --elements "
                   "the vector is then small (waveforms of long runs take gigabytes)")
    p.add_argument("--out", "-o", type=options.text, default=None, metavar="DIR",
                   help="output folder (default out/demo-<topology>)")
    options.build_dir_option(p)
    options.schedule_file_options(p, "run instead of MultiTree (ring stays the baseline)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_demo)


def _plan(args, algorithms, elements, **kw):
    from .plan import plan_hardware  # noqa: PLC0415
    return plan_hardware(options.topology(args), algorithms, elements, dtype=args.dtype,
                         flow_control=args.flow_control,
                         **options.uniform_links(args),
                         buffer_copies=args.buffer_copies, **kw)


def _tables(run, config):
    """Every node's engine tables: the rows and the words the host writes."""
    from hdl.schedule_table import engine_tables  # noqa: PLC0415
    lw = run.lowered
    tables = []
    for prog in lw.programs:
        engines = []
        for t in engine_tables(prog, config):
            engines.append({
                "engine": t.engine, "direction": t.direction.name.lower(), "port": t.port,
                "table": "release" if t.base else "schedule", "base": t.base,
                "neighbor": prog.neighbors[t.port] if t.port < len(prog.neighbors) else None,
                "rows": [{"step": r.step, "op": r.op.name, "flow": r.flow,
                          "chunk": r.chunk, "addr": r.addr, "flits": r.flits,
                          "elements": r.elements, "deps": r.deps,
                          **({"dest": r.dest, "src": r.src, "release": r.release}
                             if lw.routed else {}),
                          **({"stage": r.stage, "unstage": r.unstage} if lw.loopback else {}),
                          "word": f"{w:#x}"} for r, w in zip(t.rows, t.words)]})
        tables.append({"node": prog.node, "neighbors": list(prog.neighbors), "engines": engines})
    return tables


def cmd_generate(args):
    """Verilog of the network for one schedule, and a manifest: parameters, the schedule summary,
    every node's engine tables (the rows and the words the host writes) and the cycles the
    timing model expects; an output folder it created is removed again if it fails before
    writing into it."""
    with removed_if_left_empty(args.out):
        return _generate(args)


def _generate(args):
    from hdl.generate import TOP_MODULE, to_verilog  # noqa: PLC0415
    from .packaging import file_list, fusesoc_core, port_description  # noqa: PLC0415
    from .verilog_names import prefix_modules  # noqa: PLC0415
    from .cli import print_json
    file = options.schedule_file(args)
    if file is not None and args.algorithm is not None:
        raise ConfigError("give one of --algorithm NAME and --schedule FILE.xml")
    plan = _plan(args, [file or args.algorithm or "multitree"], args.elements,
                 router=args.router)
    run, config, topo = plan.runs[0], plan.config, plan.topology
    try:
        tables = _tables(run, config)
    except ValueError as exc:       # a table field that does not fit its width
        raise ConfigError(str(exc)) from None
    prefix = args.prefix or ""
    if prefix:
        prefix_modules("", prefix)                  # refuse a bad prefix before the work
    top = prefix + TOP_MODULE
    out = ensure_folder(args.out)
    written = ("network.v", "manifest.json", "ports.json", "files.f", f"{top}.core")
    for name in written:                            # refuse a bad target before the work
        check_writable_file(out / name)
    try:
        network = plan.network()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    from .plan import links_text, rates_text  # noqa: PLC0415
    with Spinner(f"generate Verilog ({topo.spec}, {links_text(plan.link_latency_range)})",
                 enabled=not args.json):
        verilog = to_verilog(network)
    if prefix:
        verilog = prefix_modules(verilog, prefix)
    summary = run.schedule.summary()
    summary.pop("ring_order", None)
    expected, lb = run.expected_cycles, run.lower_bound_cycles
    manifest = {
        "generator": "allreduce-rtl generate",
        "topology": topo.spec, "nodes": topo.num_nodes,
        "algorithm": run.algorithm, "elements": run.elements, "dtype": config.dtype,
        "bytes_per_node": run.elements * config.element_type.bytes,
        "config": {**dataclasses.asdict(config), "elem_width": config.elem_width,
                   "flit_width": config.flit_width, "initial_credits": config.initial_credits,
                   "full_rate_rx_depth": config.full_rate_rx_depth},
        "verilog": {"file": "network.v", "top": top, "bytes": len(verilog.encode()),
                    "sha256": hashlib.sha256(verilog.encode()).hexdigest()},
        "router": network.router_parameters() if plan.routed else None,
        "links": [{"from": topo.label(u), "to": topo.label(v), "latency": a["latency"],
                   "rate": a["rate"], "bandwidth": a["port_bandwidth"],
                   "rate_error": a["rate_error"]}
                  for u, v, a in plan.hardware_topology.graph.edges(data=True)],
        "schedule": summary,
        "buffer": {"flits": run.lowered.buffer_flits,
                   "elements_per_flit": run.lowered.elements_per_flit,
                   "chunk_base": [int(x) for x in run.lowered.chunk_base]},
        "expected": {"model_cycles": expected,
                     "timing_params": dataclasses.asdict(plan.timing),
                     "lower_bound_cycles": lb,
                     "ratio_to_lower_bound": expected / lb if lb else None},
        "tables": tables,
    }
    what = (f"{run.algorithm} all-reduce network on {topo.spec}, {run.elements} {config.dtype} "
            f"elements per node, generated by allreduce-rtl")
    atomic_write_many({out / "network.v": verilog,
                       out / "manifest.json": json.dumps(stamp(manifest), indent=1) + "\n",
                       out / "ports.json": json.dumps(port_description(network, top),
                                                      indent=1) + "\n",
                       out / "files.f": file_list(["network.v"]),
                       out / f"{top}.core": fusesoc_core(top, ["network.v"], what)})
    brief = {k: manifest[k] for k in ("topology", "nodes", "algorithm", "elements", "dtype")}
    brief.update(routed=plan.routed, steps=summary["steps"], transfers=summary["transfers"],
                 model_cycles=expected, lower_bound_cycles=lb,
                 verilog=str(out / "network.v"), manifest=str(out / "manifest.json"),
                 top=top, ports=str(out / "ports.json"), files=str(out / "files.f"),
                 core=str(out / f"{top}.core"))
    if args.json:
        print_json(brief)
    else:
        print(f"wrote {out / 'network.v'} ({len(verilog.encode()):,} bytes, top module {top}), "
              f"{out / 'manifest.json'}, {out / 'ports.json'}, {out / 'files.f'} and "
              f"{out / f'{top}.core'}")
        print(f"{run.algorithm} on {topo.spec}, {run.elements:,} {config.dtype} elements per "
              f"node: {summary['steps']} steps, {summary['transfers']} transfers, table depth "
              f"{run.lowered.table_depth}, {run.lowered.buffer_flits} buffer flits; "
              f"{config.flow_control} flow control, {links_text(plan.link_latency_range)}"
              f"{', NIs on routers' if plan.routed else ''}; the timing model expects "
              f"{expected:,} cycles (lower bound {lb:,.1f})")
        if plan.link_rates:
            print(rates_text(plan.link_rates))
    return 0


def cmd_demo(args):
    """Build the hardware once, run MultiTree and ring on it in a simulator with real gradients,
    verify every node against the golden model, and report cycles (``allreduce_rtl.demo``)."""
    from .demo import format_report, run_demo  # noqa: PLC0415
    from .cli import print_json
    report, code = run_demo(topology=options.topology(args), elements=args.elements,
                            sim=args.simulator, dtype=args.dtype,
                            **options.uniform_links(args),
                            flow_control=args.flow_control,
                            buffer_copies=args.buffer_copies,
                            seed=args.seed, waves=args.waves, out=args.out,
                            build_root=args.build_dir, progress=True,
                            schedule=options.schedule_file(args))
    if args.json:
        print_json(report)
    else:
        print(format_report(report))
    if code:
        print("allreduce-rtl: error: the hardware's results differ from the golden model "
              f"(see {report['files']['report']})", file=sys.stderr)
    return code
