"""Options shared by the subcommands: argument types with their ranges, the network and hardware
option groups, and the topology of a command that takes one.

Every type turns a bad value into an argparse error naming the value and the range, so
``cli.main`` prints one line and exits with code 2. The ranges come from where the limits live
(``golden_model.topology`` for links, ``hdl.config`` for the hardware).
"""

import argparse

from golden_model.accelerator import MAX_MINI_BATCH
from golden_model.algorithms import MAX_ELEMENTS, ScheduleFile
from golden_model.authors import MESSAGE_SIZES
from golden_model.elements import ELEMENT_TYPES
from golden_model.errors import ConfigError
from golden_model.families import spec_forms
from golden_model.topology_file import MACHINES
from golden_model.topology import (DEFAULT_LINK_BANDWIDTH, DEFAULT_LINK_LATENCY,
                                   MAX_LINK_BANDWIDTH, MAX_LINK_LATENCY, MIN_LINK_BANDWIDTH,
                                   parse_topology)
from golden_model.timing import LINK_ORDERS
from golden_model.units import parse_size

__all__ = ["number_in", "positive_float", "nonnegative_int", "positive_int", "element_count",
           "size", "message_size", "text", "network_options", "hardware_options", "topology",
           "schedule_file_options", "schedule_file", "engine_options", "build_dir_option",
           "TOPOLOGY_HELP"]

TOPOLOGY_HELP = (f"{spec_forms()}, FILE.json or FILE.graphml (a graph with per-link "
                 f"bandwidth, latency and count: docs/topologies.md), or "
                 f"{', '.join('machine:' + m for m in MACHINES)}")
#: ``--timing`` values: the link orders of ``TimingParams`` and the authors' simulator preset.
TIMINGS = (*LINK_ORDERS, "authors")


def _bound(x):
    """A limit as the help texts write numbers: 1,000,000 (not 1e+06), 0.001."""
    return f"{int(x):,}" if x == int(x) else f"{x:g}"


def number_in(kind, low, high, low_open=False):
    """An argparse type: a ``kind`` (int or float) in [low, high] ((low, high] if low_open); the
    bounds keep cycle counts within 64-bit integers."""
    what = "a whole number" if kind is int else "a number"

    def parse(value):
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None
        if number != number or not (low < number if low_open else low <= number) \
                or not number <= high:            # (number != number: NaN)
            lo = f"above {_bound(low)}" if low_open else f"at least {_bound(low)}"
            raise argparse.ArgumentTypeError(f"{value!r} must be {what} {lo} and at most "
                                             f"{_bound(high)}")
        return number
    parse.range = (kind, low, high, low_open)      # for the tests that probe every option
    return parse


positive_float = number_in(float, 0, 1e6, low_open=True)
nonnegative_int = number_in(int, 0, 10**9)
positive_int = number_in(int, 1, 10**12)
#: Elements per node: at most ``golden_model.algorithms.MAX_ELEMENTS`` (2^40), the one limit.
element_count = number_in(int, 1, MAX_ELEMENTS)
mini_batch = number_in(int, 1, MAX_MINI_BATCH)
#: Network clock: 1 MHz to 100 GHz (a slower one only makes times overflow).
frequency = number_in(float, 0.001, 100)


class PerClass(dict):
    """A link parameter given per link class (``wrap=300,default=150``); prints as written."""

    def __str__(self):
        return ",".join(f"{k}={v:g}" for k, v in self.items())


def per_class(kind_type):
    """An argparse type: one value of ``kind_type`` (``number_in``), or ``CLASS=VALUE`` pairs
    separated by commas (a :class:`PerClass`; the classes are checked against the topology's
    family by ``parse_topology``)."""
    def parse(value):
        if "=" not in value:
            return kind_type(value)
        out = PerClass()
        for item in value.split(","):
            cls, eq, number = item.partition("=")
            cls = cls.strip().lower()
            if not eq or not cls:
                raise argparse.ArgumentTypeError(
                    f"{item!r} in {value!r} is not CLASS=VALUE (e.g. wrap=300,default=150)")
            if cls in out:
                raise argparse.ArgumentTypeError(f"link class {cls!r} is given twice in "
                                                 f"{value!r}")
            out[cls] = kind_type(number.strip())
        return out
    parse.range = kind_type.range
    return parse


def size(value):
    """An argparse type: a size in bytes (``64MiB``; ``golden_model.units.parse_size``)."""
    try:
        return parse_size(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def text(value):
    """An argparse type: a non-empty string (an empty path or name is never meant)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def message_size(value):
    """An argparse type: one of ``golden_model.authors.MESSAGE_SIZES`` (bytes)."""
    allowed = " or ".join(map(str, MESSAGE_SIZES))
    try:
        size = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not {allowed}") from None
    if size not in MESSAGE_SIZES:
        raise argparse.ArgumentTypeError(f"{value!r} is not {allowed} (bytes per message of the "
                                         f"authors' simulator; 0: one packet per chunk)")
    return size


def network_options(p, topology_default, topology_help="%(default)s"):
    """The link options of the golden-model commands (defaults: the MultiTree paper's network,
    1 GHz, 128-bit flits); ``topology(args)`` then parses ``--topology`` with them."""
    g = p.add_argument_group("network (defaults: the MultiTree paper's, 1 GHz, 128-bit flits)")
    g.add_argument("--topology", "-t", type=text, default=topology_default,
                   help=f"{TOPOLOGY_HELP} (default {topology_help})")
    g.add_argument("--link-bandwidth", type=per_class(number_in(float, MIN_LINK_BANDWIDTH,
                                                               MAX_LINK_BANDWIDTH)),
                   default=DEFAULT_LINK_BANDWIDTH,
                   metavar="GBPS", help="GB/s per link per direction, or per link class: "
                   "CLASS=GBPS,... (wrap on ring and torus; node and switch on fattree and "
                   "bigraph; default for the rest), e.g. switch=8,default=16 "
                   "(default %(default)s)")
    g.add_argument("--link-latency", type=per_class(number_in(int, 0, MAX_LINK_LATENCY)),
                   default=DEFAULT_LINK_LATENCY,
                   metavar="CYCLES", help="cycles per link, or per link class as "
                   "--link-bandwidth, e.g. wrap=300,default=150 (default %(default)s)")
    g.add_argument("--flit-bytes", type=number_in(int, 1, 4096), default=16, metavar="BYTES",
                   help="flit size in bytes; a message of B bytes is ceil(B/flit) flits, each "
                   "taking flit*frequency/bandwidth cycles on a link (default %(default)s)")
    g.add_argument("--frequency", type=frequency, default=1.0,
                   metavar="GHZ", help="network clock in GHz (default %(default)s)")
    g.add_argument("--timing", choices=TIMINGS, default="hardware",
                   help="how a link serves the transfers that want it: 'hardware' as the "
                   "hardware does (in schedule order on NIs joined by links; on routers "
                   "'injection'), 'schedule' always in schedule order, 'injection' each NI link "
                   "in schedule order and every later hop first come first served, 'fcfs' "
                   "always first come first served; or "
                   "'authors': count like the MultiTree authors' simulator (head flits, their "
                   "pipeline delays, lockstep and reduction unit; docs/authors-simulator.md) "
                   "(default %(default)s)")
    g.add_argument("--message-size", type=message_size, default=None,
                   metavar="|".join(map(str, MESSAGE_SIZES)),
                   help="with --timing authors: their --message-size, 256-byte messages with a "
                   "head flit each, or 0 for one packet per chunk (default 256)")


def hardware_options(p, topology_default="torus:4x4", dtype=True):
    """The options of the commands that build hardware: topology, flow control, link stages,
    element type (``dtype``: the types the NI can add) and the build cache."""
    from hdl.adders import ADDERS  # noqa: PLC0415
    from hdl.config import MAX_LINK_STAGES  # noqa: PLC0415
    g = p.add_argument_group("hardware (one NI per node, 128-bit flits, one flit per cycle per "
                             "link; NIs on routers where links between them are not enough)")
    g.add_argument("--topology", "-t", type=text, default=topology_default,
                   help=f"{TOPOLOGY_HELP} (default %(default)s; fattree and bigraph always "
                   f"with routers)")
    g.add_argument("--flow-control", choices=("message", "credit"), default="message",
                   help="per-link flow control: the paper's message-based grants or per-flit "
                   "credits (default %(default)s)")
    g.add_argument("--link-bandwidth", type=per_class(number_in(float, MIN_LINK_BANDWIDTH,
                                                               MAX_LINK_BANDWIDTH)),
                   default=None, metavar="GBPS",
                   help="GB/s of every link, or per link class as --link-latency (default: each "
                   "link its own, a topology file's per link); the fastest port carries a flit "
                   "per cycle, a slower one is rate-limited to its share rounded to 1/16 (the "
                   "rounding is reported)")
    g.add_argument("--link-latency", type=per_class(number_in(int, 0, MAX_LINK_STAGES)),
                   default=None, metavar="CYCLES",
                   help=f"cycles of every link direction, 0..{MAX_LINK_STAGES} (at least 1 "
                   f"between NIs, whose input register is its last cycle), or per link "
                   f"class of a family as CLASS=CYCLES,... (wrap on ring and torus; node and "
                   f"switch on fattree and bigraph; default for the rest), e.g. "
                   f"wrap=300,default=150 (default: each link its own, "
                   f"{DEFAULT_LINK_LATENCY} on a family, the paper's; a topology file's per "
                   f"link)")
    g.add_argument("--buffer-copies", type=int, choices=(1, 2), default=1,
                   help="copies of each NI buffer bank: 2 gives the send engines and the "
                   "reduction lanes one each, twice the buffer memory for about half the "
                   "multiplexers and shorter bank waits (default %(default)s)")
    if dtype:
        hw = [name for name in ELEMENT_TYPES if name in ADDERS]
        g.add_argument("--dtype", choices=hw, default=None,
                       help="element type the NIs add: IEEE 754 float32 or bfloat16 (round to "
                       "nearest even, subnormals kept, canonical NaN, summed in the schedule's "
                       "order), or int32 (wraps around) (default float32; int32 where the NIs "
                       "sit on routers, whose float NIs stage contributions: more buffer)")


def schedule_file_options(p, instead):
    """``--schedule FILE.xml`` (an MSCCL-IR all-reduce, ``docs/interchange.md``) and
    ``--rank-map``; ``instead`` says what the file replaces or joins."""
    p.add_argument("--schedule", type=text, default=None, metavar="FILE.xml",
                   help=f"an MSCCL-IR XML all-reduce (msccl-tools, TACCL, ForestColl or this "
                   f"toolkit's export), imported onto the topology; {instead}")
    p.add_argument("--rank-map", type=text, default=None, metavar="NODES",
                   help="with --schedule: the node of each rank, comma-separated (default: rank "
                   "r on node r)")


def schedule_file(args):
    """``--schedule`` as a ``golden_model.algorithms.ScheduleFile`` (None without it).

    Raises
    ------
    ConfigError
        If ``--rank-map`` is given without ``--schedule`` or is not a list of whole numbers.
    """
    if args.schedule is None:
        if args.rank_map is not None:
            raise ConfigError("--rank-map says where --schedule's ranks go, and no --schedule "
                              "was given")
        return None
    nodes = None
    if args.rank_map is not None:
        try:
            nodes = tuple(int(x) for x in args.rank_map.split(","))
        except ValueError:
            raise ConfigError(f"--rank-map {args.rank_map!r}: expected node numbers separated "
                              f"by commas, e.g. 0,2,1,3") from None
    return ScheduleFile(args.schedule, nodes)


def scheduler_address(value):
    """An argparse type: a Dask scheduler address (``allreduce_rtl.explore.engine.
    check_address``)."""
    from .explore.engine import check_address  # noqa: PLC0415
    try:
        check_address(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--scheduler ")) from None
    return value.strip()


def engine_options(p, local_default="run in this process"):
    """``--workers N`` (a local Dask cluster) and ``--scheduler ADDRESS`` (an existing one),
    mutually exclusive (``allreduce_rtl.explore.engine``)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--workers", "-j", type=number_in(int, 1, 4096), default=None, metavar="N",
                   help=f"worker processes of a local Dask cluster (default: {local_default})")
    g.add_argument("--scheduler", type=scheduler_address, default=None, metavar="ADDRESS",
                   help="run on an existing Dask cluster, e.g. tcp://10.0.0.1:8786")


def build_dir_option(p):
    """``--build-dir``: where simulator and synthesis builds are cached."""
    p.add_argument("--build-dir", type=text, default=None, metavar="DIR",
                   help="build cache (default $ALLREDUCE_BUILD_ROOT, else the per-user cache "
                   "~/.cache/allreduce-rtl, or $XDG_CACHE_HOME/allreduce-rtl)")


def topology(args):
    """The ``Topology`` of ``--topology`` with the command's link options (those it has)."""
    latency = getattr(args, "link_latency", None)
    bandwidth = getattr(args, "link_bandwidth", None)
    return parse_topology(
        args.topology,
        link_bandwidth=DEFAULT_LINK_BANDWIDTH if bandwidth is None else bandwidth,
        link_latency=DEFAULT_LINK_LATENCY if latency is None else latency)


def uniform_links(args):
    """``plan_hardware``'s ``link_latency`` and ``link_bandwidth`` from a hardware command's
    ``--link-latency`` and ``--link-bandwidth``: each when it is one number (every link alike),
    else None (each link keeps what ``topology(args)`` gives it)."""
    return {"link_latency": None if isinstance(args.link_latency, dict) else args.link_latency,
            "link_bandwidth": (None if isinstance(args.link_bandwidth, dict)
                               else args.link_bandwidth)}
