"""``allreduce-rtl board``: build an all-reduce network with its self-test for an FPGA board (the
bitstream, its utilisation and timing), or run the very same design in a simulator
(``--simulate``). See ``allreduce_rtl.board`` and docs/board.md."""

import json

from golden_model.errors import ConfigError
from golden_model.provenance import stamp

from . import options
from .errors import EnvironmentFailure
from .output import atomic_write_many, check_writable_file, ensure_folder

__all__ = ["register", "cmd_board"]

DEFAULT_BOARD = "ulx3s-85f"
DEFAULT_ALGORITHMS = "multitree,ring"
DEFAULT_ELEMENTS = 256
DEFAULT_DTYPE = "int32"


def register(sub):
    """Add ``board`` to the subcommand set ``sub``."""
    from hdl.adders import ADDERS  # noqa: PLC0415

    from .board import BOARDS, FAULTS  # noqa: PLC0415
    p = sub.add_parser("board", help="build an all-reduce network with an on-chip self-test for "
                       "an FPGA board (bitstream, utilisation, timing), or simulate that design")
    p.add_argument("--board", "-b", choices=tuple(BOARDS), default=DEFAULT_BOARD,
                   help="amaranth-boards board (default %(default)s)")
    p.add_argument("--topology", "-t", type=options.text, default="ring:4",
                   help="a ring, mesh or torus whose schedules talk to neighbours only "
                   "(default %(default)s)")
    p.add_argument("--algorithm", "-a", type=options.text, default=DEFAULT_ALGORITHMS,
                   help="algorithms the self-test runs in turn, comma-separated "
                   "(default %(default)s)")
    p.add_argument("--dtype", choices=tuple(ADDERS), default=DEFAULT_DTYPE,
                   help="element type the NIs add (default %(default)s)")
    p.add_argument("--elements", "-e", type=options.element_count, default=DEFAULT_ELEMENTS,
                   help="elements per node; every chunk must fill whole flits "
                   "(default %(default)s)")
    p.add_argument("--flow-control", choices=("message", "credit"), default="message",
                   help="default %(default)s")
    p.add_argument("--simulate", choices=("verilator", "icarus"), default=None,
                   help="run the design below the board's pins in this simulator instead of "
                   "building the bitstream (the UART at 4 cycles per bit)")
    p.add_argument("--fault", choices=FAULTS, default=None,
                   help="plant a fault the self-test must catch: a stuck adder bit, or a wrong "
                   "table entry")
    p.add_argument("--out", "-o", type=options.text, default=None, metavar="DIR",
                   help="output folder (default out/board-<board>)")
    options.build_dir_option(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_board)


def _algorithms(text):
    algos = [a.strip() for a in text.split(",")]
    if not all(algos) or len(set(algos)) != len(algos):
        raise ConfigError(f"--algorithm {text!r}: give distinct algorithm names separated by "
                          f"commas")
    return algos


def cmd_board(args):
    from .board import (SIM_UART_DIVISOR, board_report, build_bitstream,  # noqa: PLC0415
                        plan_board, selftest_program)
    plan = plan_board(options.topology(args), _algorithms(args.algorithm), args.elements,
                      dtype=args.dtype, flow_control=args.flow_control)
    out = ensure_folder(args.out or f"out/board-{args.board}")
    check_writable_file(out / "report.json")
    report = board_report(args.board, plan, args.fault)
    files = {}
    if args.simulate:
        from tb.build import BuildError  # noqa: PLC0415
        from tb.selftest import SelfTestBuild  # noqa: PLC0415
        program = selftest_program(plan, uart_divisor=SIM_UART_DIVISOR, fault=args.fault)
        build = SelfTestBuild(plan, program, args.simulate, fault=args.fault,
                              build_root=args.build_dir)
        try:
            result, = build.run()
        except BuildError as exc:
            raise EnvironmentFailure(str(exc)) from None
        report["simulation"] = _simulation(args.simulate, result, plan)
        files[out / "uart.txt"] = result.text
        ok = result.passed
        failure = "the self-test failed in simulation (see uart.txt)"
    else:
        result, products = build_bitstream(args.board, plan, root=args.build_dir,
                                           fault=args.fault)
        report["build"] = result
        files.update({out / name: data for name, data in products.items()})
        ok = result["timing_met"]
        failure = (f"timing not met: fmax {result['fmax_mhz']} MHz below the network's clock "
                   f"{result['clock_mhz']:g} MHz (bitstream written, marked as failing timing)")
    files[out / "report.json"] = json.dumps(stamp(report), indent=1) + "\n"
    atomic_write_many(files)
    if args.json:
        print(json.dumps(stamp(report), indent=1))
    else:
        print(_text(report, out))
    if not ok:
        raise EnvironmentFailure(failure)
    return 0


def _simulation(sim, result, plan):
    runs = []
    for line, planned in zip(result.runs, plan.runs):
        runs.append({**line, "model_cycles": planned.expected_cycles,
                     "rtl_over_model": round(line["cycles"] / planned.expected_cycles, 4)})
    return {"simulator": sim, "passed": result.passed, "runs": runs, "uart": result.text}


def _text(report, out):
    lines = [f"{report['board']}: {report['topology']}, {report['dtype']}, "
             f"{report['elements']:,} elements per node, {', '.join(report['algorithms'])}"]
    if "simulation" in report:
        s = report["simulation"]
        for r in s["runs"]:
            lines.append(f"  {r['algorithm']}: {r['cycles']:,} cycles (model "
                         f"{r['model_cycles']:,}), {r['errors']} errors, {r['status']}")
        lines.append(f"  self-test in {s['simulator']}: {'PASS' if s['passed'] else 'FAIL'}")
    else:
        b = report["build"]
        util = ", ".join(f"{k} {v['used']:,}/{v['available']:,}"
                         for k, v in b["utilisation"].items() if v["used"])
        lines.append(f"  {b['device']}: {util}")
        lines.append(f"  fmax {b['fmax_mhz']} MHz at a {b['clock_mhz']:g} MHz network clock: "
                     f"timing {'met' if b['timing_met'] else 'NOT met'}"
                     f"{' (cached build)' if b['cached'] else ''}")
        lines.append(f"  bitstream {b['bitstream']}")
    lines.append(f"  report {out / 'report.json'}")
    return "\n".join(lines)
