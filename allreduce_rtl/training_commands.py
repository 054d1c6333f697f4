"""The ``train`` and ``report`` subcommands: training time per iteration, and the standard report.

Both take the network options of every command; bad input (an unknown model or algorithm, an
impossible mini-batch or bucket size) raises ``ConfigError``, which ``cli.main`` turns into one line
and exit code 2.
"""

import functools
import json
import shlex
import time

from golden_model.algorithms import parse_algorithms
from golden_model.compare import elements_for
from golden_model.provenance import stamp
from golden_model.report import STANDARD_TOPOLOGIES, ReportSettings, assemble, plan, \
    render_markdown, run_unit
from golden_model.training import DEFAULT_BUCKET_BYTES, TrainingOptions, train
from golden_model.topology import DEFAULT_LINK_BANDWIDTH, DEFAULT_LINK_LATENCY
from golden_model.units import format_size, split_list
from golden_model.workloads import MODELS, get_model

from . import options
from .commands import _algorithms, _note, _params, parse_size_range
from .explore.engine import map_ordered
from .output import (atomic_write_many, check_writable_file, counted, ensure_folder, format_table,
                     removed_if_left_empty)

TRAIN_COLUMNS = [("algorithm", "algorithm", "{}"),
                 ("iteration_ms", "iteration (ms)", "{:.3f}"),
                 ("compute_ms", "compute (ms)", "{:.3f}"),
                 ("exposed_comm_ms", "exposed comm (ms)", "{:.3f}"),
                 ("comm_ms", "all-reduce (ms)", "{:.3f}"),
                 ("comm_share_pct", "comm share", "{:.1f}%"),
                 ("reduction_pct", "reduction vs ring", "{:.1f}%"),
                 ("comm_speedup_vs_ring", "all-reduce speed-up", "{:.2f}x")]


def register(sub):
    """Add ``train`` and ``report`` to the subcommand set ``sub``."""
    def training_options(p):
        g = p.add_argument_group("training (defaults: the MultiTree authors' and PyTorch DDP's)")
        g.add_argument("--mini-batch", "-b", type=options.mini_batch, default=None,
                       metavar="N", help="samples per node per iteration (default: the model's, "
                       "256)")
        g.add_argument("--bucket-size", type=options.size, default=DEFAULT_BUCKET_BYTES,
                       metavar="SIZE", help="gradient bucket cap, e.g. 25MiB (default 25MiB)")
        g.add_argument("--algorithms", "-a", type=options.text, default=None,
                       help="comma-separated list (default: all that can run on the topology; "
                       "the report always adds ring, its baseline)")

    p = sub.add_parser("train", help="iteration time of one workload for each algorithm")
    options.network_options(p, "torus:8x8")
    p.add_argument("--model", "-m", type=options.text, required=True,
                   help=f"one of {', '.join(MODELS)}")
    training_options(p)
    p.add_argument("--no-overlap", action="store_true",
                   help="all-reduce after the whole backward pass (the authors' simulator)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("report", help="the standard training-time report: Markdown and PNG plots")
    options.network_options(p, None, "the standard set; --topology T means just T")
    training_options(p)
    p.add_argument("--topologies", type=options.text, default=None,
                   help=f"comma-separated specs (default {','.join(STANDARD_TOPOLOGIES)}; "
                        f"--topology T means just T)")
    p.add_argument("--models", type=options.text, default=None,
                   help="comma-separated list (default: all)")
    p.add_argument("--sizes", type=options.text, default="32KiB:64MiB",
                   help="sweep sizes FROM:TO, doubling (default %(default)s)")
    p.add_argument("--out", "-o", type=options.text, default="out/report", metavar="DIR",
                   help="output folder (default %(default)s)")
    options.engine_options(p)
    p.set_defaults(func=cmd_report)


def _training_options(args):
    return TrainingOptions(mini_batch=args.mini_batch, bucket_bytes=args.bucket_size,
                           overlap=not getattr(args, "no_overlap", False), timing=_params(args))


def _print_train(report):
    buckets = report["buckets"]
    print(f"{report['model']} ({report['title']}) on {report['topology']} "
          f"({counted(report['nodes'], 'node')}): {report['parameters']:,} parameters "
          f"({report['gradient_bytes'] / 2**20:.1f} MiB of float32 gradients) in "
          f"{counted(len(buckets), 'bucket')} "
          f"(cap {format_size(report['bucket_bytes'])}); mini-batch {report['mini_batch']} "
          f"per node ({report['samples_per_vault']} per vault)")
    mode = ("overlapped with the backward pass" if report["overlap"]
            else "after the backward pass (no overlap)")
    print(f"compute per iteration: forward {report['forward_ms']:.3f} ms + backward "
          f"{report['backward_ms']:.3f} ms = {report['compute_ms']:.3f} ms; all-reduce {mode}")
    rows = [{**r, "comm_share_pct": 100 * r["comm_share"],
             "reduction_pct": 100 * r["reduction_vs_ring"]} for r in report["results"]]
    print(format_table(rows, TRAIN_COLUMNS))
    by = {r["algorithm"]: r for r in report["results"]}
    ring = by.get("ring")
    for name in ("multitree", "multitree-opt"):
        if name in by and ring:
            r = by[name]
            verdict = "less" if r["iteration_ms"] < ring["iteration_ms"] else "more"
            print(f"{name}: {r['iteration_ms']:.3f} ms per iteration against ring's "
                  f"{ring['iteration_ms']:.3f} ms: {abs(100 * r['reduction_vs_ring']):.1f}% "
                  f"{verdict} training time.")


def cmd_train(args):
    """``allreduce-rtl train``: iteration time of one workload for each algorithm."""
    from .cli import print_json
    model = get_model(args.model)
    report = train(model, options.topology(args), _algorithms(args), _training_options(args),
                   on_skip=None if args.json else _note)
    if args.json:
        print_json(report)
    else:
        _print_train(report)
    return 0


def _list(text, what):
    """Split a comma-separated list (names are checked by ``report.plan``)."""
    return tuple(split_list(text, what))


def _report_settings(args):
    if args.topologies:
        topologies = _list(args.topologies, "topology")
    elif args.topology:
        topologies = (args.topology,)
    else:
        topologies = STANDARD_TOPOLOGIES
    models = _list(args.models, "model") if args.models else tuple(MODELS)
    algorithms = None
    if args.algorithms:     # ring is the report's baseline: always in
        algorithms = tuple(dict.fromkeys(["ring", *parse_algorithms(args.algorithms)]))
    return ReportSettings(topologies=topologies, models=models,
                          sizes=tuple(parse_size_range(args.sizes)), algorithms=algorithms,
                          link_bandwidth=args.link_bandwidth, link_latency=args.link_latency,
                          training=_training_options(args))


def _slug(spec):
    return spec.replace(":", "-")


def _report_command(args):
    """The command line that regenerates this report (options left at their default omitted)."""
    parts = ["allreduce-rtl", "report", "--out", args.out]
    for flag, value, default in (
            ("--topologies", args.topologies or args.topology, None),
            ("--models", args.models, None), ("--sizes", args.sizes, "32KiB:64MiB"),
            ("--algorithms", args.algorithms, None), ("--mini-batch", args.mini_batch, None),
            ("--bucket-size", format_size(args.bucket_size), format_size(DEFAULT_BUCKET_BYTES)),
            ("--link-bandwidth", args.link_bandwidth, DEFAULT_LINK_BANDWIDTH),
            ("--link-latency", args.link_latency, DEFAULT_LINK_LATENCY),
            ("--flit-bytes", args.flit_bytes, 16), ("--frequency", args.frequency, 1.0),
            ("--timing", args.timing, "hardware"), ("--message-size", args.message_size, None)):
        if value is not None and value != default:
            parts += [flag, str(value)]
    return shlex.join(parts)


def cmd_report(args):
    """``allreduce-rtl report``: the standard set, a Markdown report with PNG plots, written
    together at the end (whole or not at all)."""
    settings = _report_settings(args)
    for size in settings.sizes:             # refuse a bad size before any work
        elements_for(size, settings.training.timing)
    units = plan(settings)
    with removed_if_left_empty(args.out):   # a failed report leaves no empty folder behind
        return _report(args, settings, units, ensure_folder(args.out))


def _report(args, settings, units, out):
    from .plots import render_speedup
    from .training_plots import render_breakdown
    for name in ("report.json", "report.md"):
        check_writable_file(out / name)
    t0 = time.perf_counter()
    outputs = map_ordered(functools.partial(run_unit, settings=settings), units,
                          workers=args.workers, scheduler=args.scheduler, desc="report",
                          unit="run")
    data = assemble(settings, units, outputs)
    images, files = {}, {}
    for topo, by_model in data["training"].items():
        name = f"training-{_slug(topo)}.png"
        files[out / name] = render_breakdown({m: both["overlapped"]
                                              for m, both in by_model.items()}, topo)
        images[("training", topo)] = name
    for topo, rows in data["sweeps"].items():
        name = f"speedup-{_slug(topo)}.png"
        files[out / name] = render_speedup(rows, topo)
        images[("sweep", topo)] = name
    command = _report_command(args)
    files[out / "report.json"] = json.dumps(stamp(data), indent=1) + "\n"
    files[out / "report.md"] = render_markdown(data, images, command)
    atomic_write_many(files)
    print(f"wrote {out / 'report.md'}, {out / 'report.json'} and {len(images)} plots "
          f"({len(units)} runs in {time.perf_counter() - t0:.1f} s)")
    return 0
