"""The ``coarse`` subcommand: COARSE against MPI ring all-reduce over the same links.

Bad input (an unknown model, a device count that does not divide the workers, a malformed system
spec or ratio list) raises ``ConfigError``, which ``cli.main`` turns into one line and exit
code 2.
"""

from dataclasses import replace
from fractions import Fraction

from golden_model.coarse import (DEFAULT_RATIOS, CoarseConfig, compare_system, parse_system,
                                 sweep_asymmetry)
from golden_model.errors import ConfigError
from golden_model.topology import MAX_LINK_BANDWIDTH, MIN_LINK_BANDWIDTH

from golden_model.training import DEFAULT_BUCKET_BYTES, TrainingOptions
from golden_model.workloads import MODELS, get_model

from . import options
from .coarse_rtl import ORDERS, RTL_DTYPES, RTL_LAYERS, RTL_SYSTEM, cmd_coarse_rtl
from .output import format_table

_RTL_DEFAULTS = {"layers": None, "simulator": "verilator", "dtype": "float32", "seed": 1,
                 "orders": "table", "shared_queue": None, "out": None, "build_dir": None}

RESULT_COLUMNS = [("scheme", "scheme", "{}"), ("iteration_ms", "iteration (ms)", "{:.3f}"),
                  ("compute_ms", "compute (ms)", "{:.3f}"),
                  ("exposed_comm_ms", "exposed comm (ms)", "{:.3f}"),
                  ("comm_ms", "comm (ms)", "{:.3f}"), ("faster_pct", "faster", "{:+.1f}%")]
SWEEP_COLUMNS = [("ratio", "remote/local", "{:.3f}"), ("remote_GBps", "remote GB/s", "{:.2f}"),
                 ("mpi_ms", "MPI ring (ms)", "{:.3f}"), ("coarse_ms", "COARSE (ms)", "{:.3f}"),
                 ("m", "m", "{}"), ("faster_pct", "faster", "{:+.1f}%"),
                 ("proxies_only_ms", "proxies only (ms)", "{:.3f}"),
                 ("proxies_only_faster_pct", "proxies only faster", "{:+.1f}%")]

# option -> CoarseConfig field
_FIELDS = {"workers": "workers", "devices": "devices", "local_bandwidth": "local_GBps",
           "remote_bandwidth": "remote_GBps", "gpu_bandwidth": "gpu_GBps",
           "ring_bandwidth": "ring_GBps", "threshold": "threshold_bytes"}


def register(sub):
    """Add ``coarse`` to the subcommand set ``sub``."""
    size_type, positive_int = options.size, options.positive_int
    bandwidth = options.number_in(float, MIN_LINK_BANDWIDTH, MAX_LINK_BANDWIDTH)
    p = sub.add_parser("coarse", help="COARSE (disaggregated-memory parameter synchronisation) "
                       "against MPI ring all-reduce over the same links")
    p.add_argument("--model", "-m", type=options.text, default="resnet50",
                   help=f"one of {', '.join(MODELS)} (default %(default)s)")
    g = p.add_argument_group("system (default coarse:W=8,M=4,local=9,remote=16: the cloud V100 "
                             "machine's paths)")
    g.add_argument("--system", type=options.text, default=None, metavar="SPEC",
                   help="coarse:W=8,M=4,local=9,remote=16[,gpu=..][,ring=..][,lat_local=US]"
                   "[,lat_remote=US][,threshold=SIZE]; the options below override it")
    g.add_argument("--workers", type=positive_int, default=None, metavar="W",
                   help="worker GPUs (default 8)")
    g.add_argument("--devices", type=positive_int, default=None, metavar="M",
                   help="CCI memory devices, dividing W (default 4)")
    g.add_argument("--local-bandwidth", type=bandwidth, default=None, metavar="GBPS",
                   help="each worker's path to its local device (default 9)")
    g.add_argument("--remote-bandwidth", type=bandwidth, default=None, metavar="GBPS",
                   help="each worker's path to the other devices (default 16)")
    g.add_argument("--gpu-bandwidth", type=bandwidth, default=None, metavar="GBPS",
                   help="GPU-GPU peer path, used by MPI ring all-reduce (default: the local "
                   "path's)")
    g.add_argument("--ring-bandwidth", type=bandwidth, default=None, metavar="GBPS",
                   help="device-to-device sync-core ring links (default: the remote path's)")
    g.add_argument("--threshold", type=size_type, default=None, metavar="SIZE",
                   help="tensors below it go to the latency proxy (default 2MB)")
    t = p.add_argument_group("training (defaults: the MultiTree authors' and PyTorch DDP's)")
    t.add_argument("--mini-batch", "-b", type=options.mini_batch, default=None, metavar="N",
                   help="samples per worker per iteration (default: the model's, 256)")
    t.add_argument("--bucket-size", type=size_type, default=DEFAULT_BUCKET_BYTES, metavar="SIZE",
                   help="ring all-reduce bucket cap (default 25MiB)")
    t.add_argument("--no-overlap", action="store_true",
                   help="communicate after the whole backward pass")
    p.add_argument("--sweep-asymmetry", nargs="?", const="default", default=None,
                   type=options.text,
                   metavar="RATIOS", help="also sweep the remote/local bandwidth ratio "
                   "(comma-separated, fractions allowed; default 1/16,1/8,1/4,1/2,1,16/9,2,4)")
    r = p.add_argument_group("RTL (--rtl: the COARSE system in hardware, verified against the "
                             "golden model)")
    r.add_argument("--rtl", action="store_true",
                   help="run the chosen layers on the COARSE system's RTL in a simulator, "
                   f"by default on {RTL_SYSTEM} (--system and the options above change it)")
    r.add_argument("--layers", type=options.text, default=None, metavar="NAMES",
                   help="layers to run, comma-separated, or 'all' (default: "
                   f"{','.join(RTL_LAYERS)})")
    r.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator",
                   help="default %(default)s")
    r.add_argument("--dtype", choices=RTL_DTYPES, default="float32",
                   help="gradient element type (default %(default)s)")
    r.add_argument("--orders", choices=ORDERS, default="table",
                   help="the workers' shard orders: all in routing-table order, or mixed "
                   "(worker 1 reversed, workers 2.. shuffled; the deadlock test's) "
                   "(default %(default)s)")
    r.add_argument("--shared-queue", type=options.number_in(int, 1, 8), default=None,
                   metavar="N", help="build the naive ablation instead: one FIFO of N "
                   "entries shared by the clients at each device (head-of-line); with mixed "
                   "orders it can deadlock, which the run reports as stalled")
    r.add_argument("--seed", type=options.nonnegative_int, default=1,
                   help="gradients, request gaps and back-pressure (default %(default)s)")
    r.add_argument("--out", "-o", type=options.text, default=None, metavar="DIR",
                   help="where the report and the Verilog go (default out/coarse-rtl)")
    options.build_dir_option(r)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_coarse)


def system_config(args, default=None):
    """The ``CoarseConfig`` of the options: ``--system`` (or ``default``, a spec, or the
    defaults), then each option given. ``ConfigError`` on a bad spec or combination."""
    spec = args.system or default
    config = parse_system(spec) if spec else CoarseConfig()
    given = {field: getattr(args, opt) for opt, field in _FIELDS.items()
             if getattr(args, opt) is not None}
    return replace(config, **given) if given else config


def parse_ratios(text):
    """``"1/4,0.5,2"`` -> ``[0.25, 0.5, 2.0]`` (``"default"``: ``DEFAULT_RATIOS``).

    Raises
    ------
    ConfigError
        If an item is not a positive number or fraction, or the list is empty.
    """
    if text == "default":
        return list(DEFAULT_RATIOS)
    ratios = []
    for item in (x.strip() for x in str(text).split(",")):
        try:
            value = Fraction(item)
            float(value)
        except (ValueError, ZeroDivisionError, OverflowError):
            value = None
        if value is None or value <= 0:
            raise ConfigError(f"asymmetry ratio {item!r} in {text!r} is not a positive number "
                              f"such as 0.5 or 16/9")
        ratios.append(float(value))
    return ratios


def _bytes(n):
    """A byte count for people: ``97.5 MiB``, ``36.8 KiB``, ``512 B``."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _count(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def _print(report):
    cfg = report["config"]
    routing, part, dual = report["routing"], report["partitioning"], report["dual_sync"]
    print(f"{report['model']} ({report['title']}): {report['parameters']:,} parameters "
          f"({_bytes(report['gradient_bytes'])} of float32 gradients), mini-batch "
          f"{report['mini_batch']} per worker; compute {report['compute_ms']:.3f} ms per "
          f"iteration; communication "
          f"{'overlapped with the backward pass' if report['overlap'] else 'after it'}")
    print(f"system {cfg['spec']}: {cfg['workers']} workers, {cfg['devices']} memory devices "
          f"({cfg['workers'] // cfg['devices']} local workers each); paths per direction: local "
          f"{cfg['local_GBps']:g} GB/s ({cfg['local_latency_us']:g} us), remote "
          f"{cfg['remote_GBps']:g} GB/s ({cfg['remote_latency_us']:g} us), device ring "
          f"{cfg['ring_GBps']:g} GB/s, GPU-GPU {cfg['gpu_GBps']:g} GB/s")
    lat = routing["latency_proxy"]
    measured = ", ".join(f"{bw:.2f} GB/s {path}" for path, bw in routing["measured_GBps"].items())
    print(f"routing (profiling pass): latency proxy on device {lat['device']} ({lat['path']} "
          f"path); measured {measured}; below {routing['threshold_bytes']:,} B: "
          f"{_count(routing['latency_tensors'], 'tensor')} ({_bytes(routing['latency_bytes'])}) "
          f"to the latency proxy, {_count(routing['bandwidth_tensors'], 'tensor')} "
          f"({_bytes(routing['bandwidth_bytes'])}) partitioned to the bandwidth proxies")
    sat = ", ".join(f"{p} {b:,} B" for p, b in part["saturating_bytes"].items())
    print(f"partitioning: shards of {part['shard_bytes']:,} B (the largest size saturating a "
          f"path at {100 * part['saturation']:.0f}%: {sat}); {_count(part['shards'], 'shard')}, "
          f"{part['local_shards']} over the local path ({_bytes(part['local_bytes'])}) and "
          f"{part['remote_shards']} over the remote path ({_bytes(part['remote_bytes'])}), "
          f"{part['clockwise']} clockwise and {part['counter_clockwise']} counter-clockwise "
          f"sync-core rings")
    print(f"dual synchronisation: m = {dual['m']} of {dual['layers']} layers GPU to GPU "
          f"({_count(dual['gpu_tensors'], 'tensor')}, {_bytes(dual['gpu_bytes'])}, in "
          f"{_count(dual['gpu_buckets'], 'ring all-reduce bucket')}), "
          f"{_count(dual['proxy_tensors'], 'tensor')} ({_bytes(dual['proxy_bytes'])}) through "
          f"the proxies")
    rows = [{**r, "faster_pct": 100 * r["faster"] if "faster" in r else None}
            for r in report["results"]]
    print(format_table(rows, RESULT_COLUMNS))
    mpi, coarse = report["results"][0], report["results"][1]
    verdict = ("faster" if report["faster"] > 0 else "slower" if report["faster"] < 0
               else "as fast")
    print(f"COARSE (m = {coarse['m']}): {coarse['iteration_ms']:.3f} ms per iteration against "
          f"MPI ring all-reduce's {mpi['iteration_ms']:.3f} ms: "
          f"{abs(100 * report['faster']):.1f}% {verdict} training "
          f"({100 * report['time_reduction']:.1f}% less time per iteration).")
    print(f"MPI ring all-reduce: a ring over the {cfg['workers']} workers on the GPU-GPU path "
          f"({cfg['gpu_GBps']:g} GB/s; assumption: the local path's unless --gpu-bandwidth); "
          f"the assumptions are listed in --json and the README.")


def _print_sweep(rows, local):
    print(f"\nasymmetry sweep: remote path = ratio x the local path's {local:g} GB/s "
          f"(everything else as above)")
    print(format_table([{**r, "faster_pct": 100 * r["faster"],
                         "proxies_only_faster_pct": 100 * r["proxies_only_faster"]}
                        for r in rows], SWEEP_COLUMNS))
    lose = [r["ratio"] for r in rows if r["proxies_only_winner"] == "mpi-ring"]
    wins = sum(r["winner"] == "coarse" for r in rows)
    print(f"COARSE wins at {wins} of {len(rows)} ratios"
          + (f"; through the proxies alone it loses at ratio "
             f"{', '.join(f'{x:.3g}' for x in lose)}, where dual synchronisation moves layers "
             f"back to the GPU ring" if lose else "") + ".")


def cmd_coarse(args):
    """``allreduce-rtl coarse``: COARSE against MPI ring all-reduce for one workload."""
    from .cli import print_json
    if not args.rtl:
        given = [f"--{o.replace('_', '-')}" for o, default in _RTL_DEFAULTS.items()
                 if getattr(args, o) != default]
        if given:
            raise ConfigError(f"{', '.join(given)}: only with --rtl")
    else:
        given = [o for o, default in (("--sweep-asymmetry", None), ("--mini-batch", None),
                                      ("--bucket-size", DEFAULT_BUCKET_BYTES),
                                      ("--no-overlap", False))
                 if getattr(args, o[2:].replace("-", "_")) != default]
        if given:
            raise ConfigError(f"{', '.join(given)}: not with --rtl (the RTL run synchronises "
                              f"the chosen layers once, outside a training iteration)")
    config = system_config(args, RTL_SYSTEM if args.rtl else None)
    model = get_model(args.model)
    if args.rtl:
        return cmd_coarse_rtl(args, config, model)
    options = TrainingOptions(mini_batch=args.mini_batch, bucket_bytes=args.bucket_size,
                              overlap=not args.no_overlap)
    ratios = parse_ratios(args.sweep_asymmetry) if args.sweep_asymmetry else None
    report = compare_system(model, config, options)
    if ratios is not None:
        report["sweep"] = sweep_asymmetry(model, config, ratios, options)
    if args.json:
        print_json(report)
        return 0
    _print(report)
    if ratios is not None:
        _print_sweep(report["sweep"], config.local_GBps)
    return 0
