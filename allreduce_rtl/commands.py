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

from .output import atomic_write, format_table

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
    return parse_algorithms(args.algorithms) if args.algorithms else None


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
    if args.out:
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
    from .plots import plot_speedup
    params = _params(args)
    sizes = parse_size_range(args.sizes)
    for s in sizes:
        elements_for(s, params)
    names = _algorithms(args)
    out = Path(args.out or f"out/sweep-{args.topo.spec.replace(':', '-')}")
    rows, skipped = [], set()
    for size in tqdm(sizes, desc=f"sweep {args.topo.spec}", unit="size", file=sys.stderr):
        report = compare(args.topo, size, names, params)
        skipped.update(s["algorithm"] for s in report["skipped"])
        rows.extend({"size_bytes": size, **r} for r in report["results"])
    for name in sorted(skipped & set(names or ALGORITHMS)):
        _note(name, "cannot run on this topology")
    cols = ["size_bytes", "algorithm", "steps", "cycles", "time_us", "algbw_GBps", "busbw_GBps",
            "speedup_vs_ring", "ratio_to_lower_bound"]
    csv = ",".join(cols) + "\n" + "".join(",".join(str(r[c]) for c in cols) + "\n" for r in rows)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "sweep.csv", csv)
    plot_speedup(rows, args.topo.spec, out / "speedup.png")
    print(f"wrote {out / 'sweep.csv'} and {out / 'speedup.png'} "
          f"({len(sizes)} sizes x {len(rows) // len(sizes)} algorithms)")
    return 0


def cmd_demo(args):
    from .cli import print_json
    report = compare(args.topo, args.size, None, _params(args), on_skip=None if args.json else _note)
    if args.json:
        print_json(report)
        return 0
    print("allreduce-rtl demo: golden-model comparison of every all-reduce algorithm "
          "(contention-aware timing model, the MultiTree paper's network).")
    _print_compare(report)
    by = {r["algorithm"]: r for r in report["results"]}
    if "multitree" in by:
        print(f"\nMultiTree is {by['multitree']['speedup_vs_ring']:.2f}x faster than ring "
              f"all-reduce here (paper: 2.3x on its workloads).")
    return 0
