#!/usr/bin/env python3
"""Where a routed all-reduce spends its cycles: every message's injection and ejection in the RTL
(Amaranth simulator) against the timing model, and the RTL's critical path.

Plans the routed hardware for one algorithm and vector size (``plan_hardware(..., router=True)``),
runs it with ``tb.message_trace.trace_routed`` and prints RTL and model cycles, then the critical
path (``tb.message_trace.critical_chain``): each message with its injection head and tail, its
ejection tail and its latency in the RTL, the model's, and whether its inputs or its NI port's
previous message held it. ``--json FILE`` writes every message. Router parameters can be
overridden to see what they change (``--num-vcs``, ``--vc-buf-depth``, ``--flow-control``).
Small vectors only: the Amaranth simulator takes about 20 s for bigraph:4x4 at 389 elements.

Run: ``.venv/bin/python scripts/routed_trace.py --topology bigraph:4x4 --algorithm multitree
--elements 389 --link-latency 4``. Bad arguments print one line and exit with code 2.
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from allreduce_rtl.plan import plan_hardware  # noqa: E402
from golden_model.errors import ConfigError  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402
from tb.message_trace import critical_chain, trace_routed  # noqa: E402


def _write_json(path, rows):
    """Write ``rows`` to ``path`` whole or not at all (a temporary file renamed over it)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        topo = parse_topology(args.topology, link_latency=args.link_latency)
        plan = plan_hardware(topo, [args.algorithm], [args.elements], dtype=args.dtype,
                             link_latency=args.link_latency, router=True)
        if args.json and not Path(args.json).resolve().parent.is_dir():
            raise ConfigError(f"--json {args.json}: its folder does not exist")
        trace = trace_routed(plan, plan.runs[0], max_cycles=args.max_cycles, **router_args)
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
          f"{held['port']}, by their inputs {held['inputs']}; injection stalls on it (cycles "
          f"beyond one flit per cycle) {stalls:,}")
    print(f"{'step':>4} {'src->dst':>8} {'flits':>5} | {'RTL inject':>13} {'eject':>6} "
          f"{'latency':>7} | {'model':>13} {'latency':>7} | held by")
    for m, why in chain:
        print(f"{m.step:4d} {m.src:3d}->{m.dst:<4d} {m.flits:5d} | {m.inject_head:6d}-"
              f"{m.inject_tail:<6d} {m.eject_tail:6d} {m.eject_tail - m.inject_head:7d} | "
              f"{m.model_start:6d}-{m.model_finish:<6d} {m.model_finish - m.model_start:7d} | "
              f"{why}")
    if args.json:
        _write_json(args.json, [dataclasses.asdict(m) for m in trace.messages])
    return 0


if __name__ == "__main__":
    sys.exit(main())
