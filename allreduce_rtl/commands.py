"""The golden-model subcommands ``compare``, ``schedule`` and ``sweep``: each takes the parsed
arguments and returns an exit code."""

import functools
import math
import sys
from pathlib import Path

from golden_model.algorithms import ALGORITHMS, build_schedule, parse_algorithms
from golden_model.authors import MESSAGE_SIZES, authors_params
from golden_model.compare import compare, elements_for
from golden_model.errors import ConfigError
from golden_model.exporters import EXPORTERS, export, exporter_for
from golden_model.timing import LINK_ORDER_WORDS, TimingParams
from golden_model.units import format_size, parse_size

from . import options
from .errors import EnvironmentFailure
from .explore.engine import map_ordered
from .output import (atomic_write, atomic_write_many, check_writable_file, counted, ensure_folder,
                     format_table, removed_if_left_empty)


def register(sub):
    """Add ``compare``, ``schedule`` and ``sweep`` to the subcommand set ``sub``."""
    p = sub.add_parser("compare", help="time every algorithm on one topology and size")
    options.network_options(p, "torus:8x8")
    p.add_argument("--size", "-s", type=options.size, default=parse_size("64MiB"),
                   help="bytes per node, e.g. 64MiB (default 64MiB)")
    p.add_argument("--algorithms", "-a", type=options.text, default=None,
                   help="comma-separated list (default: all that can run on the topology)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    options.schedule_file_options(p, "timed besides the algorithms")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("schedule", help="build one algorithm's schedule and write it to a file "
                       f"({', '.join(EXPORTERS)})")
    # The network matters to an algorithm that times its candidates (multitree-opt).
    options.network_options(p, "torus:4x4")
    p.add_argument("--algorithm", "-a", type=options.text, default=None,
                   help=f"one of {', '.join(ALGORITHMS)} (or --schedule FILE.xml)")
    options.schedule_file_options(p, "instead of --algorithm")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--size", "-s", type=options.size, default=None,
                      help="bytes per node (default 1KiB)")
    size.add_argument("--elements", "-e", type=options.element_count, default=None,
                      help="elements per node")
    p.add_argument("--out", "-o", type=options.text, default=None, metavar="FILE",
                   help="write the whole schedule (every transfer) to this file")
    p.add_argument("--format", "-f", choices=tuple(EXPORTERS), default=None,
                   help="format of --out (default: by its suffix, else json): "
                   + "; ".join(f"{e.name}: {e.description}" for e in EXPORTERS.values()))
    p.add_argument("--write-topology", type=options.text, default=None, metavar="FILE",
                   help="also write the topology (every link's bandwidth, latency and count) to "
                   "FILE.json (networkx node-link) or FILE.graphml, readable by --topology; "
                   "with it --algorithm may be left out")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("sweep", help="speed-up over ring against size: a CSV and a PNG plot")
    options.network_options(p, "torus:8x8")
    p.add_argument("--sizes", type=options.text, default="32KiB:64MiB",
                   help="FROM:TO, sizes doubling (default %(default)s)")
    p.add_argument("--algorithms", "-a", type=options.text, default=None,
                   help="comma-separated list")
    p.add_argument("--out", "-o", type=options.text, default=None, metavar="DIR",
                   help="output folder (default out/sweep-<topology>)")
    options.engine_options(p)
    p.set_defaults(func=cmd_sweep)

COMPARE_COLUMNS = [("algorithm", "algorithm", "{}"), ("steps", "steps", "{}"),
                   ("tree_steps", "tree steps", "{}"), ("sub_chunks", "sub-chunks", "{}"),
                   ("cycles", "cycles", "{:,}"),
                   ("time_us", "time (us)", "{:.1f}"), ("algbw_GBps", "algbw GB/s", "{:.2f}"),
                   ("busbw_GBps", "busbw GB/s", "{:.2f}"),
                   ("speedup_vs_ring", "speed-up vs ring", "{:.2f}x"),
                   ("ratio_to_lower_bound", "x lower bound", "{:.3f}"),
                   ("ratio_to_tight_bound", "x with latency", "{:.3f}")]


def _params(args):
    if args.timing == "authors":
        size = args.message_size if args.message_size is not None else MESSAGE_SIZES[0]
        return authors_params(size, frequency_ghz=args.frequency, flit_bytes=args.flit_bytes)
    if args.message_size is not None:
        raise ConfigError(f"--message-size {args.message_size} applies only with --timing "
                          f"authors (the authors' simulator's message size)")
    try:
        return TimingParams(frequency_ghz=args.frequency, flit_bytes=args.flit_bytes,
                            link_order=args.timing)
    except TypeError as exc:   # pragma: no cover - argparse already typed the values
        raise ConfigError(str(exc)) from None


def _algorithms(args):
    return parse_algorithms(args.algorithms) if args.algorithms is not None else None


def _note(name, reason):
    print(f"note: skipping {name}: {reason}", file=sys.stderr)


def _print_compare(report):
    lb = report["lower_bound"]
    print(f"{report['topology']} ({counted(report['nodes'], 'node')}), {format_size(report['size_bytes'])} "
          f"per node, links served {LINK_ORDER_WORDS[report['timing']]}; lower bound "
          f"{report['lower_bound_cycles']:,.0f} cycles ({lb['binding']}), "
          f"{math.ceil(lb['tight_cycles']):,} with latency")
    if lb["rsag_cycles"] > lb["injection_cycles"] * (1 + 1e-9):
        print(f"(the per-node figure of the papers, 2(N-1)/N of the vector through the poorest "
              f"node, is {math.ceil(lb['rsag_cycles']):,} cycles: not a bound here, as the "
              f"nodes' bandwidths differ)")
    print(format_table(report["results"], COMPARE_COLUMNS))
    if report["timing"] == "authors":
        print(f"(their --message-size {report['message_size']}; calibrated on torus:4x4 with "
              f"their network, 16 GB/s, 150-cycle links, 16-byte flits, 1 GHz: there it "
              f"reproduces their ring cycle for cycle, not their MultiTree, whose per-NI "
              f"channels it does not model; elsewhere it extrapolates: "
              f"docs/authors-simulator.md)")


def cmd_compare(args):
    from .cli import print_json
    file = options.schedule_file(args)
    report = compare(options.topology(args), args.size, _algorithms(args), _params(args),
                     on_skip=None if args.json else _note, also=[file] if file else ())
    if args.json:
        print_json(report)
    else:
        _print_compare(report)
    return 0


def _text(value):
    """A summary value for the text output: numbers with thousands separators, a dict as
    ``key value, ...`` (multitree-opt's ``timed``: candidate and its cycles)."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def cmd_schedule(args):
    from .cli import print_json
    topo = options.topology(args)
    params = _params(args)
    if args.elements is not None:
        elements = args.elements
    else:
        elements = elements_for(args.size if args.size is not None else 1024, params)
    if args.format is not None and args.out is None:
        raise ConfigError(f"--format {args.format} says how to write --out FILE, and no --out "
                          f"was given")
    exporter = exporter_for(args.format, args.out) if args.out is not None else None
    if args.out is not None:
        check_writable_file(args.out)
    file = options.schedule_file(args)
    if args.write_topology is not None:
        from golden_model.topology_file import write_topology  # noqa: PLC0415
        target = check_writable_file(args.write_topology)
        if args.out is not None and check_writable_file(args.out) == target:
            raise ConfigError(f"--out and --write-topology both name {args.write_topology!r}: "
                              f"give the schedule and the topology a file each")
        topology_text = write_topology(topo, args.write_topology)
        if file is None and args.algorithm is None:
            atomic_write(args.write_topology, topology_text)
            print(f"wrote {args.write_topology} ({counted(topo.num_nodes, 'endpoint')}, "
                  f"{len(topo.switches):,} switch{'' if len(topo.switches) == 1 else 'es'}, "
                  f"{counted(topo.graph.number_of_edges(), 'directed link')})")
            return 0
    if (file is None) == (args.algorithm is None):
        raise ConfigError("give one of --algorithm NAME and --schedule FILE.xml")
    sched = build_schedule(file or args.algorithm, topo, elements, params)
    summary = sched.summary()
    summary.pop("ring_order", None)
    if "cycles" in summary:     # an algorithm that timed its candidates: say with what
        summary.update(params.describe())
    files = {}
    if args.write_topology is not None:
        files[args.write_topology] = topology_text
        summary["topology_file"] = str(args.write_topology)
    if args.out is not None:
        text = export(sched, exporter.name)
        if exporter.name == "msccl-xml":
            summary["check"] = (_check_export(text, args.out)
                                if sched.num_transfers <= EXPORT_CHECK_TRANSFERS else
                                f"skipped above {EXPORT_CHECK_TRANSFERS:,} transfers (run "
                                f"allreduce-rtl check {args.out})")
        files[args.out] = text
        summary["out"] = str(args.out)
        summary["format"] = exporter.name
    atomic_write_many(files)
    if args.json:
        print_json(summary)
    else:
        for key, value in summary.items():
            print(f"{key:>14}: {_text(value)}")
    return 0


#: Largest schedule whose MSCCL-IR export ``schedule`` checks before writing it: the check
#: runs the file four times in Python, about 15 s at 130,560 transfers (torus:16x16 multitree).
EXPORT_CHECK_TRANSFERS = 150_000


def _check_export(text, name):
    """Run ``allreduce-rtl check`` on an exported MSCCL-IR text before it is written; its
    verdict for the summary. Raises ``EnvironmentFailure`` (nothing written) if it fails,
    which would be a bug of the exporter."""
    from golden_model.interchange import msccl_check, msccl_read
    result = msccl_check.check(msccl_read.parse(text, str(name)))
    if result.errors:
        raise EnvironmentFailure(f"the exported MSCCL-IR fails its own check (a bug of the "
                                 f"exporter; nothing written): {result.errors[0]}")
    return "correct: " + ", ".join(result.summary["checks"])


def parse_size_range(text):
    """``"32KiB:64MiB"`` -> [32 KiB, 64 KiB, ..., 64 MiB] (doubling). ``ConfigError`` on a
    malformed range or FROM > TO."""
    parts = str(text).split(":")
    if len(parts) != 2:
        raise ConfigError(f"malformed size range {text!r}: expected FROM:TO, e.g. 32KiB:64MiB")
    try:
        lo, hi = (parse_size(p) for p in parts)
    except ConfigError as exc:
        raise ConfigError(f"size range {text!r}: {exc}") from None
    if lo > hi:
        raise ConfigError(f"size range {text!r}: FROM must not exceed TO")
    sizes = []
    while lo <= hi:
        sizes.append(lo)
        lo *= 2
    return sizes


def cmd_sweep(args):
    topo = options.topology(args)
    params = _params(args)
    sizes = parse_size_range(args.sizes)
    for s in sizes:
        elements_for(s, params)
    names = _algorithms(args)
    from golden_model.topology_file import FILE_SUFFIXES  # noqa: PLC0415
    name = (Path(topo.spec).stem if topo.spec.lower().endswith(FILE_SUFFIXES)
            else topo.spec.replace(":", "-"))
    folder = args.out if args.out is not None else f"out/sweep-{name}"
    with removed_if_left_empty(folder):     # a failed sweep leaves no empty folder behind
        return _sweep(args, topo, params, sizes, names, ensure_folder(folder))


def _sweep(args, topo, params, sizes, names, out):
    from .plots import render_speedup
    for name in ("sweep.csv", "speedup.png"):   # refuse a bad target before the sweep runs
        check_writable_file(out / name)
    rows, skipped = [], set()
    # The first size runs before the others, so that an algorithm that cannot run on the
    # topology is one error line, not a bar and then the error.
    reports = [compare(topo, sizes[0], names, params)]
    reports += map_ordered(functools.partial(compare, topo, algorithms=names, params=params),
                           sizes[1:], workers=args.workers, scheduler=args.scheduler,
                           desc=f"sweep {topo.spec}", unit="size")
    timing = params.describe()
    for size, report in zip(sizes, reports):
        skipped.update(s["algorithm"] for s in report["skipped"])
        rows.extend({"size_bytes": size, **r, **timing} for r in report["results"])
    for name in sorted(skipped & set(names or ALGORITHMS)):
        _note(name, "cannot run on this topology")
    cols = ["size_bytes", "algorithm", "steps", "sub_chunks", "cycles", "time_us", "algbw_GBps",
            "busbw_GBps", "speedup_vs_ring", "ratio_to_lower_bound", "ratio_to_tight_bound",
            *timing]
    def cell(v):
        return f"{v:.6g}" if isinstance(v, float) else "" if v is None else str(v)
    csv = ",".join(cols) + "\n" + "".join(",".join(cell(r[c]) for c in cols) + "\n" for r in rows)
    atomic_write_many({out / "sweep.csv": csv,
                       out / "speedup.png": render_speedup(rows, topo.spec)})
    print(f"wrote {out / 'sweep.csv'} and {out / 'speedup.png'} "
          f"({counted(len(sizes), 'size')} x {counted(len(rows) // len(sizes), 'algorithm')})")
    return 0
