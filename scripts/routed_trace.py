#!/usr/bin/env python3
"""Where a routed all-reduce spends its cycles: every message's injection and ejection in the RTL
(Amaranth simulator) against the timing model, and the RTL's critical path.

Plans the routed hardware for one algorithm and vector size (``plan_hardware(..., router=True)``),
runs it with ``tb.message_trace.trace_routed`` and prints RTL and model cycles, then the critical
path (``tb.message_trace.critical_chain``): each message with its injection head and tail, its
ejection tail and its latency in the RTL, the model's, and whether its inputs or its NI port's
previous message held it. ``--json FILE`` writes every message. Router parameters can be
overridden to see what they change (``--num-vcs``, ``--vc-buf-depth``, ``--flow-control``).
Small vectors only: the Amaranth simulator takes 20 to 35 s for bigraph:4x4 at 389 elements.

Run: ``.venv/bin/python scripts/routed_trace.py --topology bigraph:4x4 --algorithm multitree
--elements 389 --link-latency 4``. Bad arguments print one line and exit with code 2.
"""

import argparse
import dataclasses
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from allreduce_rtl.plan import model_timing, plan_hardware  # noqa: E402
from golden_model.errors import ConfigError  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402
from hdl.routed_network import check_routable  # noqa: E402
from tb.message_trace import critical_chain, trace_routed  # noqa: E402


def _write_json(path, rows):
    """Write ``rows`` to ``path`` whole or not at all (a temporary file renamed over it, with
    the permissions a new file gets)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(rows, f, indent=1)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class _Parser(argparse.ArgumentParser):
    """A usage error is one line (exit code 2)."""

    def error(self, message):
        self.exit(2, f"routed_trace: {message} (see --help)\n")


def _json_target(value):
    """``--json``: a new or regular file in an existing folder."""
    path = Path(value)
    if not value or (path.exists() and not path.is_file()):
        raise ConfigError(f"--json {value!r} is not a file name")
    if not path.resolve().parent.is_dir():
        raise ConfigError(f"--json {value}: its folder does not exist")
    return path


def main(argv=None):
    ap = _Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", "-t", default="bigraph:4x4")
    ap.add_argument("--algorithm", "-a", default="multitree")
    ap.add_argument("--elements", "-e", type=int, default=389)
    ap.add_argument("--link-latency", type=int, default=4)
    ap.add_argument("--dtype", default="int32")
    ap.add_argument("--num-vcs", type=int)
    ap.add_argument("--vc-buf-depth", type=int)
    ap.add_argument("--flow-control", choices=["wormhole", "cut_through"])
    ap.add_argument("--max-cycles", type=int, default=200_000)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    router_args = {k: v for k, v in (("num_vcs", args.num_vcs),
                                     ("vc_buf_depth", args.vc_buf_depth),
                                     ("flow_control", args.flow_control)) if v is not None}
    try:
        json_path = None if args.json is None else _json_target(args.json)
        topo = parse_topology(args.topology, link_latency=args.link_latency)
        check_routable(topo, why="a routed trace needs routers, and")
        plan = plan_hardware(topo, [args.algorithm], [args.elements], dtype=args.dtype,
                             link_latency=args.link_latency, router=True)
        run = plan.runs[0]
        trace = trace_routed(plan, run, model_timing(run.schedule, plan.config),
                             max_cycles=args.max_cycles, **router_args)
    except (ConfigError, ValueError) as exc:
        print(f"routed_trace: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"routed_trace: {exc}", file=sys.stderr)
        return 1
    print(f"{args.topology} {args.algorithm}, {args.elements} elements, {args.link_latency}-cycle "
          f"links{', ' + str(router_args) if router_args else ''}: RTL {trace.rtl_cycles:,} "
          f"cycles, model {trace.model_cycles:,} ({trace.rtl_cycles / trace.model_cycles:.2f}x)")
    chain = critical_chain(trace)
    held = {why: sum(1 for _, w in chain if w == why) for why in ("port", "inputs", "start")}
    stalls = sum(m.inject_tail - m.inject_head + 1 - m.flits for m, _ in chain)
    print(f"RTL critical path: {len(chain)} messages, held by their NI port's previous message "
          f"{held['port']}, by their inputs {held['inputs']}, first at the start "
          f"{held['start']}; injection stalls on it (cycles beyond one flit per cycle) "
          f"{stalls:,}")
    print(f"{'step':>4} {'src->dst':>8} {'chunk':>5} {'flits':>5} | {'RTL inject':>13} "
          f"{'eject':>6} {'latency':>7} | {'model':>13} {'latency':>7} | held by")
    for m, why in chain:
        print(f"{m.step:4d} {m.src:3d}->{m.dst:<4d} {m.chunk:5d} {m.flits:5d} | "
              f"{m.inject_head:6d}-{m.inject_tail:<6d} {m.eject_tail:6d} "
              f"{m.eject_tail - m.inject_head:7d} | {m.model_start:6d}-{m.model_finish:<6d} "
              f"{m.model_finish - m.model_start:7d} | {why}")
    if json_path is not None:
        try:
            _write_json(json_path, [dataclasses.asdict(m) for m in trace.messages])
        except OSError as exc:
            print(f"routed_trace: cannot write {json_path}: {exc.strerror}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)    # piped into head: stop quietly
    sys.exit(main())
