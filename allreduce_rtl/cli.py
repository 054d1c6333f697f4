"""The ``allreduce-rtl`` command line.

Every subcommand turns bad input into one line on stderr and exit code 2 (``ConfigError`` from the
golden model, or an argparse usage error); files are written whole or not at all.
"""

import argparse
import json
import sys

from golden_model.errors import ConfigError
from golden_model.topology import DEFAULT_LINK_BANDWIDTH, DEFAULT_LINK_LATENCY, parse_topology
from golden_model.units import parse_size

from . import commands

PROG = "allreduce-rtl"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (exit code 2)."""

    def error(self, message):
        if "expected one argument" in message:
            message += " (for a value that starts with '-', write it as --option=VALUE)"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _number_in(kind, low, high, low_open=False):
    """An argparse type: a ``kind`` (int or float) in [low, high] ((low, high] if low_open);
    the bounds keep cycle counts within 64-bit integers."""
    what = "a whole number" if kind is int else "a number"

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (low < value if low_open else low <= value) or not value <= high:
            lo = f"above {low:g}" if low_open else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text!r} must be {what} {lo} and at most {high:g}")
        return value
    return parse


_positive_float = _number_in(float, 0, 1e6, low_open=True)
_nonnegative_int = _number_in(int, 0, 10**9)
_positive_int = _number_in(int, 1, 10**12)
#: Register stages per link in the hardware (``hdl.router.network``'s limit; a link of more
#: stages would only make a huge design).
_link_stages = _number_in(int, 0, 1024)


def _size(text):
    try:
        return parse_size(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _network_options(p):
    g = p.add_argument_group("network (defaults: the MultiTree paper's, 1 GHz, 128-bit flits)")
    g.add_argument("--topology", "-t", default=None,
                   help="ring:N, mesh:RxC, torus:RxC, fattree:KxL or bigraph:MxS")
    g.add_argument("--link-bandwidth", type=_number_in(float, 0.001, 1e6),
                   default=DEFAULT_LINK_BANDWIDTH,
                   metavar="GBPS", help="GB/s per link per direction (default %(default)s)")
    g.add_argument("--link-latency", type=_number_in(int, 0, 10**6), default=DEFAULT_LINK_LATENCY,
                   metavar="CYCLES", help="cycles per link (default %(default)s)")
    g.add_argument("--flit-bytes", type=_number_in(int, 1, 4096), default=16, metavar="BYTES",
                   help="flit size in bytes; a message of B bytes is ceil(B/flit) flits, each "
                   "taking flit*frequency/bandwidth cycles on a link (default %(default)s)")
    g.add_argument("--frequency", type=_number_in(float, 0, 100, low_open=True), default=1.0,
                   metavar="GHZ", help="network clock in GHz (default %(default)s)")


def _version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("allreduce-rtl")
    except PackageNotFoundError:   # running from a checkout that is not installed
        return "unknown"


def build_parser():
    parser = _Parser(prog=PROG, description="Design, generate and verify all-reduce network "
                     "hardware; compare all-reduce algorithms with the golden model.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("compare", help="time every algorithm on one topology and size")
    _network_options(p)
    p.add_argument("--size", "-s", type=_size, default=parse_size("64MiB"),
                   help="bytes per node, e.g. 64MiB (default 64MiB)")
    p.add_argument("--algorithms", "-a", default=None,
                   help="comma-separated list (default: all that can run on the topology)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=commands.cmd_compare, topology_default="torus:8x8")

    p = sub.add_parser("schedule", help="build one algorithm's schedule and write it as JSON")
    p.add_argument("--topology", "-t", default=None,
                   help="ring:N, mesh:RxC, torus:RxC, fattree:KxL or bigraph:MxS")
    p.add_argument("--algorithm", "-a", required=True)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--size", "-s", type=_size, default=None,
                      help="bytes per node (default: one element per chunk's worth, 1KiB)")
    size.add_argument("--elements", "-e", type=_positive_int, default=None,
                      help="elements per node")
    p.add_argument("--out", "-o", default=None, metavar="FILE.json",
                   help="write the whole schedule (every transfer) to this file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=commands.cmd_schedule, topology_default="torus:4x4",
                   link_bandwidth=DEFAULT_LINK_BANDWIDTH, link_latency=DEFAULT_LINK_LATENCY,
                   flit_bytes=16, frequency=1.0)

    p = sub.add_parser("sweep", help="speed-up over ring against size: a CSV and a PNG plot")
    _network_options(p)
    p.add_argument("--sizes", default="32KiB:64MiB",
                   help="FROM:TO, sizes doubling (default %(default)s)")
    p.add_argument("--algorithms", "-a", default=None, help="comma-separated list")
    p.add_argument("--out", "-o", default=None, metavar="DIR",
                   help="output folder (default out/sweep-<topology>)")
    p.set_defaults(func=commands.cmd_sweep, topology_default="torus:8x8")

    p = sub.add_parser("generate", help="generate the network's Verilog for one schedule, "
                       "with a manifest (parameters, schedule tables, expected cycles)")
    _hardware_options(p, latency_default=DEFAULT_LINK_LATENCY)
    p.add_argument("--algorithm", "-a", default="multitree",
                   help="any algorithm (default %(default)s); multi-hop schedules (dbtree, "
                   "halving-doubling) and fat-tree/BiGraph get routers")
    p.add_argument("--elements", "-e", type=_positive_int, default=4096,
                   help="elements (int32) per node (default %(default)s)")
    p.add_argument("--router", action="store_true",
                   help="put every NI on a router even when the schedule only talks to "
                   "neighbours (default: only when needed)")
    p.add_argument("--out", "-o", required=True, metavar="DIR",
                   help="output folder (created): network.v and manifest.json")
    p.add_argument("--json", action="store_true", help="print the manifest's summary as JSON")
    p.set_defaults(func=commands.cmd_generate, topology_default="torus:4x4",
                   link_bandwidth=DEFAULT_LINK_BANDWIDTH)

    p = sub.add_parser("demo", help="build the network hardware once and run MultiTree and ring "
                       "all-reduce on it in a simulator, checked against the golden model")
    _hardware_options(p, latency_default=DEFAULT_LINK_LATENCY)
    p.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator",
                   help="default %(default)s")
    p.add_argument("--elements", "-e", type=_positive_int, default=None,
                   help="elements (int32) per node (default: ResNet-50's largest 3x3 "
                   "convolution, 2,359,296 weights, or a smaller layer if that would take over "
                   "3 minutes)")
    p.add_argument("--seed", type=_nonnegative_int, default=0,
                   help="seed of the gradients (default %(default)s)")
    p.add_argument("--waves", action="store_true",
                   help="also write a waveform (Verilator VCD, Icarus FST); without --elements "
                   "the vector is then small (waveforms of long runs take gigabytes)")
    p.add_argument("--out", "-o", default=None, metavar="DIR",
                   help="output folder (default out/demo-<topology>)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=commands.cmd_demo, topology_default="torus:4x4",
                   link_bandwidth=DEFAULT_LINK_BANDWIDTH)

    from . import training_commands   # train, report (issue 4)
    training_commands.add_parsers(sub, _network_options, _size, _positive_int)
    from . import coarse_commands     # coarse (issue 5)
    coarse_commands.add_parser(sub, _size, _positive_int, _positive_float)
    from . import cost_commands       # cost (issue 6)
    cost_commands.add_parser(sub)
    return parser


def _hardware_options(p, latency_default):
    g = p.add_argument_group("hardware (one NI per node, 128-bit flits, one flit per cycle per "
                             "link; NIs on routers where links between them are not enough)")
    g.add_argument("--topology", "-t", default=None,
                   help="ring:N, mesh:RxC, torus:RxC, fattree:KxL or bigraph:MxS (the last two "
                   "always with routers)")
    g.add_argument("--flow-control", choices=("message", "credit"), default="message",
                   help="per-link flow control: the paper's message-based grants or per-flit "
                   "credits (default %(default)s)")
    g.add_argument("--link-latency", type=_link_stages, default=latency_default,
                   metavar="CYCLES", help="register stages per link direction, 0..1024 "
                   "(default %(default)s, the paper's)")


def main(argv=None):
    """Entry point of ``allreduce-rtl``; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.topo = parse_topology(args.topology if args.topology is not None
                                   else args.topology_default,
                                   link_bandwidth=args.link_bandwidth,
                                   link_latency=args.link_latency)
        return args.func(args) or 0
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def print_json(obj):
    json.dump(obj, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    sys.exit(main())
