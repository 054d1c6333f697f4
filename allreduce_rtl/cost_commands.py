"""The ``cost`` subcommand: hardware cost of the router, the NI and the CXL memory controller.

Each standard configuration is elaborated to Verilog with Amaranth and synthesised with Yosys
(generic cells, flip-flops, memory bits) and, where it is sized for the family, for the FPGA
that ``--device`` names: an iCE40 (LUT4s, flip-flops, 4 kbit block RAMs) or an ECP5 (LUT4s,
flip-flops, DP16KD block RAMs, MULT18X18D multipliers), with nextpnr's estimate of the maximum
frequency; see ``allreduce_rtl.synth``. Results are cached under the build folder, keyed by
the Verilog.

Bad input (an unknown design name, an unwritable ``--out``) raises ``ConfigError``, which
``cli.main`` turns into one line and exit code 2.
"""

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace

from tqdm import tqdm

from golden_model.errors import ConfigError
from golden_model.provenance import stamp
from golden_model.units import split_list


from tb.toolchain import ToolchainError, build_root

from . import options
from .errors import EnvironmentFailure
from .output import atomic_write, check_writable_file, format_table
from .synth import DEVICES, ICE40, SynthesisError, synthesise, tool_versions

#: The generic columns of the cost table; the FPGA family's own follow (``columns``).
GENERIC_COLUMNS = [("name", "design", "{}"), ("summary", "configuration", "{}"),
                   ("dtype", "adds", "{}"), ("cells", "cells", "{:,}"),
                   ("flip_flops", "FFs", "{:,}"), ("memory_bits", "memory bits", "{:,}")]


def columns(family=ICE40):
    """The cost table's columns for an FPGA ``family`` (``synth.Family``): the generic ones,
    the family's figures (``family.columns``: iCE40 LUTs, iCE40 FFs, BRAMs; or ECP5 LUTs, ECP5
    FFs, DP16KD, MULT18X18D) and fmax."""
    fpga = [("fpga_" + key, label, "{:,}") for key, label in family.columns]
    return GENERIC_COLUMNS + fpga + [("fmax", "fmax (MHz)", "{}")]


COLUMNS = columns(ICE40)
COMPARE_COLUMNS = [("metric", "NI cost", "{}"), ("message", "message", "{:,}"),
                   ("credit", "credit", "{:,}"), ("diff", "credit - message", "{:+,}"),
                   ("pct", "change", "{:+.1f}%")]


@dataclass(frozen=True)
class Design:
    """One standard configuration: ``build()`` returns ``(verilog, top module)``; ``fpgas``
    names the FPGA families (``synth.FAMILIES`` keys) it is sized for."""
    name: str
    kind: str
    summary: str
    params: dict
    fpgas: frozenset

    def build(self):
        return _BUILDERS[self.kind](**self.params)


def _router(spec, router, concentration, **params):
    from golden_model.topology import parse_topology
    from hdl.generate import TOP_MODULE, to_verilog
    from hdl.router.router import Router, RouterParams
    from hdl.router.routing import grid_tables
    table = grid_tables(parse_topology(spec), concentration)[router]
    return to_verilog(Router(RouterParams(table.num_ports, **params), table)), TOP_MODULE


def _ni(**fields):
    from hdl.config import NIConfig
    from hdl.generate import TOP_MODULE, to_verilog
    from hdl.ni import NetworkInterface
    return to_verilog(NetworkInterface(NIConfig(**fields))), TOP_MODULE


def _adder(dtype):
    from amaranth.back import verilog

    from golden_model.elements import element_type
    from hdl.adders import AdderUnit
    return verilog.convert(AdderUnit(element_type(dtype)), name="adder_unit"), "adder_unit"


def _cxl(**fields):
    from hdl.cxl import TOP_MODULE, CXLMemConfig, CXLMemController, to_verilog
    return to_verilog(CXLMemController(CXLMemConfig(**fields))), TOP_MODULE


def _coarse(dtype, **params):
    from golden_model.elements import element_type
    from hdl.coarse import QueueReducer
    from hdl.generate import to_verilog
    return to_verilog(QueueReducer(element_type(dtype), **params), name="coarse_sync"), \
        "coarse_sync"


def _coarse_system(dtype, workers, devices, queue_lines, tensors, link_latency):
    from golden_model.elements import element_type
    from golden_model.topology import parse_topology
    from hdl.coarse import CoarseSystem
    from hdl.coarse.system import ring_config
    from hdl.generate import to_verilog
    etype = element_type(dtype)
    system = CoarseSystem(parse_topology(f"ring:{devices}", link_latency=link_latency),
                          ring_config(etype, devices, queue_lines, link_latency), workers,
                          queue_lines, tensors)
    return to_verilog(system, name="coarse_system"), "coarse_system"


_BUILDERS = {"router": _router, "ni": _ni, "cxl": _cxl, "adder": _adder, "coarse": _coarse,
             "coarse-system": _coarse_system}

_ROUTER = dict(num_vcs=2, vc_buf_depth=8, flit_width=128, credit_delay=1)
_BOTH, _ECP5 = frozenset({"ice40", "ecp5"}), frozenset({"ecp5"})
_NI_SMALL = dict(num_ports=2, elems_per_flit=4, buffer_depth=16, table_depth=8, max_chunks=8,
                 rx_buffer_depth=16, submessage_flits=8, link_latency=1)

#: The standard configurations, in report order. The full-size designs keep their memories as
#: memories in the generic flow. The NI's buffer banks, tables and link delay lines are 1R1W
#: memories that synth_ice40 maps to SB_RAM40_4K block RAMs, so the full-size NIs go through
#: synth_ice40 too (their LUTs are the logic outside the block RAMs; they need more block RAMs
#: than an iCE40 has); the routers' and the CXL controller's multi-port memories still become
#: flip-flops there, so only their small variants do (the 128-bit mesh router needs 13,284 LUTs).
#: An ECP5-85F has 11 times an HX8K's LUTs and 208 18 kbit block RAMs (DP16KD, true dual-port)
#: against 32 of 4 kbit: every design goes through synth_ecp5.
DESIGNS = [
    Design("router-mesh", "router", "mesh 5 ports, 2 VCs x 8 flits, 128 b, wormhole",
           dict(spec="mesh:4x4", router=5, concentration=1, flow_control="wormhole", **_ROUTER),
           _ECP5),
    Design("router-mesh-ct", "router", "mesh 5 ports, 2 VCs x 8 flits, 128 b, cut-through",
           dict(spec="mesh:4x4", router=5, concentration=1, flow_control="cut_through",
                **_ROUTER), _ECP5),
    Design("router-torus", "router", "torus 8 ports (4 local), 2 VCs x 8 flits, 128 b",
           dict(spec="torus:4x4", router=5, concentration=4, flow_control="wormhole", **_ROUTER),
           _ECP5),
    Design("router-mesh-32", "router", "mesh 5 ports, 2 VCs x 4 flits, 32 b, wormhole",
           dict(spec="mesh:4x4", router=5, concentration=1, flow_control="wormhole",
                num_vcs=2, vc_buf_depth=4, flit_width=32, credit_delay=1), _BOTH),
    Design("ni-message", "ni", "NI 4 ports, 1024-flit buffer, 128 b, rx 32, message FC",
           dict(flow_control="message"), _BOTH),
    Design("ni-credit", "ni", "NI 4 ports, 1024-flit buffer, 128 b, rx 32, credit FC",
           dict(flow_control="credit"), _BOTH),
    Design("ni-copies", "ni", "NI 4 ports, 1024-flit buffer x 2 copies, 128 b, message FC",
           dict(flow_control="message", buffer_copies=2), _BOTH),
    Design("ni-float32", "ni", "NI 4 ports, 1024-flit buffer, 128 b, message FC, 16 adders",
           dict(flow_control="message", dtype="float32"), _BOTH),
    Design("ni-bfloat16", "ni", "NI 4 ports, 1024-flit buffer, 128 b, message FC, 32 adders",
           dict(flow_control="message", dtype="bfloat16", elems_per_flit=8), _BOTH),
    Design("adder-float32", "adder", "one element's adder, 2 pipeline stages",
           dict(dtype="float32"), _BOTH),
    Design("adder-bfloat16", "adder", "one element's adder, 2 pipeline stages",
           dict(dtype="bfloat16"), _BOTH),
    Design("ni-small-message", "ni", "NI 2 ports, 16-flit buffer, 128 b, rx 16, message FC",
           dict(flow_control="message", **_NI_SMALL), _BOTH),
    Design("ni-small-credit", "ni", "NI 2 ports, 16-flit buffer, 128 b, rx 16, credit FC",
           dict(flow_control="credit", **_NI_SMALL), _BOTH),
    Design("cxl", "cxl", "CXL.mem 1024 lines x 512 b, 4 banks, 8 tensors", {}, _ECP5),
    Design("cxl-small", "cxl", "CXL.mem 64 lines x 512 b, 4 banks, 4 tensors",
           dict(num_lines=64, num_banks=4, req_credits=3, rwd_credits=4, hold_slots=2,
                num_tensors=4, max_group_shift=4), _BOTH),
    Design("coarse-sync", "coarse", "COARSE sync core: 8 client queues x 256 lines x 512 b",
           dict(dtype="float32", clients=8, queue_lines=256), _ECP5),
    # generic synthesis only: synth_ecp5 in YoWASP Yosys 0.70 stops in its techmap pass with
    # "wasm trap: call stack exhausted" on this design (a limit of the WebAssembly build's
    # stack, at 64 and at 128 queue lines alike)
    Design("coarse-system", "coarse-system",
           "COARSE system: 4 workers, 2 devices (4 x 128-line queues, 8 slots), ring NIs",
           dict(dtype="float32", workers=4, devices=2, queue_lines=128, tensors=8,
                link_latency=4), frozenset()),
]
#: (message, credit) design pairs of the flow-control comparison.
NI_PAIRS = [("ni-message", "ni-credit"), ("ni-small-message", "ni-small-credit")]


def select_designs(text):
    """The designs named in ``text`` (comma-separated; None: all), in report order.

    Raises
    ------
    ConfigError
        If a name is unknown or the list is empty.
    """
    if text is None:
        return list(DESIGNS)
    known = {d.name: d for d in DESIGNS}
    try:
        names = [n.lower() for n in split_list(text, "design")]
    except ConfigError as exc:
        raise ConfigError(f"--design: {exc}; choose from {', '.join(known)}") from None
    for n in names:
        if n not in known:
            raise ConfigError(f"unknown design {n!r}; choose from {', '.join(known)}")
    return [d for d in DESIGNS if d.name in names]


def with_dtype(designs, dtype):
    """``designs`` with every NI built to add ``dtype`` (128-bit flits: 128 / bits elements)
    and every COARSE sync core to reduce it (a 512-bit line: 512 / bits adders), instead of
    the listed type; other designs unchanged. None: as listed."""
    if dtype is None:
        return list(designs)
    from golden_model.elements import element_type
    bits = element_type(dtype).bits
    out = []
    for d in designs:
        if d.kind in ("coarse", "coarse-system"):
            d = replace(d, params={**d.params, "dtype": dtype})
        elif d.kind == "ni":
            width = d.params.get("elems_per_flit", 4) * element_type(
                d.params.get("dtype", "int32")).bits
            params = {**d.params, "dtype": dtype, "elems_per_flit": width // bits}
            d = replace(d, params=params)
        out.append(d)
    return out


def register(sub):
    """Add ``cost`` to the subcommand set ``sub`` of ``cli.build_parser``."""
    p = sub.add_parser("cost", help="hardware cost: synthesise the router, the NI and the CXL "
                       "memory controller with Yosys (generic cells, flip-flops, memory bits; "
                       "iCE40 or ECP5 LUTs, block RAMs and nextpnr's fmax estimate)")
    p.add_argument("--design", "-d", type=options.text, default=None, metavar="NAMES",
                   help=f"comma-separated subset of {', '.join(d.name for d in DESIGNS)} "
                   "(default: all)")
    p.add_argument("--device", choices=tuple(DEVICES), default="hx8k",
                   help="FPGA for synthesis and place and route: an iCE40 (synth_ice40, "
                   "nextpnr-ice40) or an ECP5 LFE5U-25F/45F/85F (synth_ecp5, nextpnr-ecp5) "
                   "(default %(default)s)")
    p.add_argument("--generic-only", "--no-ice40", dest="generic_only", action="store_true",
                   help="generic synthesis only, for either family (no FPGA synthesis, no "
                   "nextpnr); --no-ice40 is its older name")
    p.add_argument("--jobs", "-j", type=int, choices=range(1, 9), default=2, metavar="N",
                   help="designs synthesised at once, 1..8 (default %(default)s; the first "
                   "Yosys run compiles its WebAssembly with about 1.7 GB of memory)")
    p.add_argument("--out", "-o", type=options.text, default=None, metavar="FILE.json",
                   help="also write the JSON report to this file")
    from hdl.adders import ADDERS
    p.add_argument("--dtype", choices=tuple(ADDERS), default=None,
                   help="build every NI design to add this element type (default: each "
                   "design's own: int32, and float32 / bfloat16 for ni-float32, ni-bfloat16)")
    p.add_argument("--timeout", type=options.number_in(int, 1, 604_800), default=1800,
                   metavar="SECONDS",
                   help="seconds for each Yosys or nextpnr run (default %(default)s); a place "
                   "and route stopped at it is reported without fmax, and tried again by a "
                   "later run with a longer timeout")
    options.build_dir_option(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_cost)


_ELABORATE = threading.Lock()   # Amaranth elaboration and its Yosys run one at a time


def _cost_one(design, device, fpga, root, timeout):
    with _ELABORATE:
        verilog, top = design.build()
    fpga = fpga and DEVICES[device].family.name in design.fpgas
    result = synthesise(verilog, top, fpga=fpga, device=device, root=root, timeout=timeout)
    return {"name": design.name, "kind": design.kind, "summary": design.summary,
            "config": design.params, **result}


def _fmax_cell(fpga):
    if fpga is None:
        return None
    if fpga["fmax_MHz"] is None:
        return fpga["note"] or "-"       # does not fit, or not routed within the timeout
    return f"{fpga['fmax_MHz']:.1f}"


def _rows(results, family=ICE40):
    rows = []
    for r in results:
        g, fpga = r["generic"], r[family.name]
        typed = r["kind"] in ("ni", "adder", "coarse", "coarse-system")
        dtype = r["config"].get("dtype", "int32") if typed else "-"
        rows.append({"name": r["name"], "summary": r["summary"], "dtype": dtype,
                     "cells": g["cells"],
                     "flip_flops": g["flip_flops"], "memory_bits": g["memory_bits"],
                     **{"fpga_" + key: (fpga or {}).get(key) for key, _ in family.columns},
                     "fmax": _fmax_cell(fpga)})
    return rows


def flow_control_comparison(results, family=ICE40):
    """The message-vs-credit NI comparison: one dict per pair present in ``results``, with
    ``message``, ``credit``, ``rows`` (metric, message, credit, diff, pct); the FPGA rows are
    those of ``family`` (``synth.Family``), if both designs went through it."""
    by = {r["name"]: r for r in results}
    out = []
    for msg, cred in NI_PAIRS:
        if msg not in by or cred not in by:
            continue
        a, b = by[msg], by[cred]
        metrics = [("generic cells", a["generic"]["cells"], b["generic"]["cells"]),
                   ("flip-flops", a["generic"]["flip_flops"], b["generic"]["flip_flops"]),
                   ("memory bits", a["generic"]["memory_bits"], b["generic"]["memory_bits"])]
        fa, fb = a.get(family.name), b.get(family.name)
        if fa and fb:
            metrics += [(f"{family.label} LUTs", fa["luts"], fb["luts"]),
                        (f"{family.label} FFs", fa["flip_flops"], fb["flip_flops"])]
        rows = [{"metric": m, "message": x, "credit": y, "diff": y - x,
                 "pct": 100 * (y - x) / x if x else None} for m, x, y in metrics]
        out.append({"message": msg, "credit": cred, "rows": rows})
    return out


def cmd_cost(args):
    """``allreduce-rtl cost``: synthesise the standard configurations and report their cost."""
    from .cli import print_json
    designs = with_dtype(select_designs(args.design), args.dtype)
    if args.out is not None:
        check_writable_file(args.out)
    try:
        root = build_root(args.build_dir)
    except ToolchainError as exc:
        raise EnvironmentFailure(str(exc)) from None
    fpga = not args.generic_only
    family = DEVICES[args.device].family
    started = time.monotonic()
    results = {}
    bar = tqdm(total=len(designs), desc="cost", unit="design", file=sys.stderr)
    pool = ThreadPoolExecutor(max_workers=args.jobs)
    try:
        # the FPGA runs take longest: start them first, so the two workers end together
        order = sorted(designs, key=lambda d: not (fpga and family.name in d.fpgas))
        futures = {pool.submit(_cost_one, d, args.device, fpga, root, args.timeout): d
                   for d in order}
        for future in as_completed(futures):
            d = futures[future]
            try:
                results[d.name] = future.result()
            except ValueError as exc:
                raise ConfigError(f"{d.name}: {exc}") from None
            except SynthesisError as exc:
                raise EnvironmentFailure(f"{d.name}: {exc}") from None
            bar.set_postfix_str(d.name)
            bar.update()
    finally:
        pool.shutdown(cancel_futures=True)   # on an error, start no other design
        bar.close()
    ordered = [results[d.name] for d in designs]
    report = {"device": args.device if fpga else None, "seconds": round(time.monotonic() -
              started, 1), "tools": tool_versions(family), "designs": ordered,
              "flow_control": flow_control_comparison(ordered, family)}
    if args.out is not None:
        atomic_write(args.out, json.dumps(stamp(report), indent=2) + "\n")
    if args.json:
        print_json(report)
    else:
        _print(report, family)
    return 0


def _print(report, family):
    tools = ", ".join(f"{k} {v}" for k, v in report["tools"].items())
    print(f"hardware cost ({tools}); generic: Yosys synth, memories kept as memories; "
          f"{family.label}: {family.synth} counts of the design, fmax = nextpnr's estimate "
          f"({report['device'] or 'not run'}, all ports registered)")
    print(format_table(_rows(report["designs"], family), columns(family)))
    for pair in report["flow_control"]:
        print(f"\nNI flow control: {pair['message']} against {pair['credit']} (same buffers)")
        print(format_table(pair["rows"], COMPARE_COLUMNS))
    cached = sum(r["cached"] for r in report["designs"])
    count = len(report["designs"])
    print(f"\n{count} design{'s' if count != 1 else ''} in {report['seconds']:.1f} s"
          + (f" ({cached} from the cache under {os.path.dirname(report['designs'][0]['work_dir'])})"
             if cached else ""))
