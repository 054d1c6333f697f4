"""A monitor of every message of a routed all-reduce: when it entered the network and when it
left it, cycle by cycle in the Amaranth simulator, lined up with the timing model.

``trace_routed(plan, run, model)`` loads a ``HardwarePlan``'s run into a ``RoutedNetwork`` (the
plan's configuration; router parameters may be overridden), starts it and records, at every
``RouterPort``, the cycles (counted from the NIs' start, as the ``cycles`` output) of each
message's head and tail on the injection stream (``inject``: what the NI's send engine got into
the network) and on the ejection stream (``eject``: what the router delivered to the NI). Each
message is matched to its schedule transfer by the head's ``src``/``dest`` terminals and the
``HeadInfo`` ``step`` (and ``chunk``) fields, and given the timing model's ``start`` and
``finish`` of that transfer (``model``: ``allreduce_rtl.plan.model_timing``, which the caller
passes in, as the testbenches do not import the command line's package). For a float
type's staged transfers (``golden_model.lowering``) the model's finish is their add through the
loopback port; the trace has their ejection.

``critical_chain(trace)`` walks back from the last message to leave the network: at each message
the later of (a) its inputs' last ejection (a dependency) and (b) the previous message its NI
port (``MessageTimes.port``) injected (the send engine walks its table in order) is the one that
held it; the chain is the RTL's critical path, each link named by what bound it.

The Amaranth simulator runs a 16-node routed network at a few hundred to a few thousand cycles
per second: a diagnostic for small vectors (scripts/routed_trace.py), not for the demos.
"""

import dataclasses
from collections import deque

import numpy as np
from amaranth.hdl import Module
from amaranth.sim import Simulator

from hdl.flit import HeadInfo
from hdl.host import load_commands
from hdl.routed_network import RoutedNetwork
from hdl.router.flit import ROUTER_HEAD_BITS, FlitKind, RouterHead

from .amaranth_host import stream_commands

__all__ = ["MessageTimes", "MessageTrace", "trace_routed", "critical_chain"]

_HEAD = (FlitKind.HEAD.value, FlitKind.HEAD_TAIL.value)
_TAIL = (FlitKind.TAIL.value, FlitKind.HEAD_TAIL.value)
_TIMES = ("inject_head", "inject_tail", "eject_head", "eject_tail")


@dataclasses.dataclass(frozen=True)
class MessageTimes:
    """One transfer of the schedule, in the RTL and in the timing model (cycles from the NIs'
    start).

    Attributes
    ----------
    index : int
        Position in ``schedule.transfers()`` order.
    step, src, dst, chunk : int
    port : int
        The source's NI port that sent it (its router terminal ``src * ports + port``).
    flits : int
        Flits of the message, head included (its head's ``RouterHead.flits`` + 1).
    inject_head, inject_tail : int
        Cycles the head and the tail were accepted on the source's injection stream.
    eject_head, eject_tail : int
        Cycles the head and the tail left the destination's ejection stream.
    model_start, model_finish : int
        The timing model's start (the head takes its first link) and finish of the transfer.
    """
    index: int
    step: int
    src: int
    dst: int
    chunk: int
    port: int
    flits: int
    inject_head: int
    inject_tail: int
    eject_head: int
    eject_tail: int
    model_start: int
    model_finish: int


@dataclasses.dataclass(frozen=True)
class MessageTrace:
    """Every message of one routed run.

    Attributes
    ----------
    messages : tuple of MessageTimes
        In schedule order.
    rtl_cycles : int
        The network's ``cycles`` output.
    model_cycles : int
        The timing model's cycles (the plan's expected cycles).
    """
    messages: tuple
    rtl_cycles: int
    model_cycles: int


def _fields(payload, layout, base=0):
    """The fields of ``layout`` (a ``data.Struct``) held in ``payload`` from bit ``base``."""
    return {name: (payload >> (base + f.offset)) & ((1 << f.width) - 1)
            for name, f in layout.as_shape()}


def _head(payload):
    """(src terminal, dest terminal, chunk, step, payload flits) of a head flit's payload: its
    ``RouterHead`` and the ``HeadInfo`` above it."""
    router = _fields(payload, RouterHead)
    info = _fields(payload, HeadInfo, ROUTER_HEAD_BITS)
    return router["src"], router["dest"], info["chunk"], info["step"], router["flits"]


def trace_routed(plan, run, model, *, max_cycles=200_000, **router_args):
    """Run ``run`` (a ``PlannedRun`` of ``plan``) on the plan's routed network in the Amaranth
    simulator and record every message (module docstring).

    Parameters
    ----------
    plan : allreduce_rtl.plan.HardwarePlan
        A routed plan (``plan.routed``).
    run : allreduce_rtl.plan.PlannedRun
    model : golden_model.timing.TimingResult
        The timing model's result for ``run.schedule`` on the plan's hardware
        (``allreduce_rtl.plan.model_timing(run.schedule, plan.config)``).
    max_cycles : int
        Cycles to wait for ``done`` after the start.
    **router_args
        ``RoutedNetwork`` router parameters (``num_vcs``, ``vc_buf_depth``, ``flow_control``)
        in place of the plan's.

    Returns
    -------
    MessageTrace

    Raises
    ------
    ValueError
        If the plan is not routed, ``model`` does not time every transfer of the run, or
        ``max_cycles`` is not a positive integer.
    RuntimeError
        If the network raises ``error``, does not finish within ``max_cycles``, or a message
        cannot be matched to exactly one transfer.
    """
    if not plan.routed:
        raise ValueError("trace_routed needs a routed plan (NIs on routers)")
    transfers = sum(len(step) for step in run.schedule.steps)
    if len(model.finish) != transfers:
        raise ValueError(f"model times {len(model.finish)} transfers, the run has {transfers}")
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
        raise ValueError(f"max_cycles must be a positive integer, not {max_cycles!r}")
    cfg, topo, lowered = plan.config, plan.hardware_topology, run.lowered
    net = RoutedNetwork(topo, cfg, **router_args)
    n = topo.num_nodes
    vectors = np.zeros((n, run.elements), dtype=cfg.element_type.dtype)
    packed = lowered.pack(vectors)
    loads = [load_commands(cfg, lowered, u, packed[u]) for u in range(n)]
    top = Module()
    top.submodules.net = net
    seen, out = [], {}

    async def bench(ctx):
        await stream_commands(ctx, net, loads)
        ctx.set(net.start, 1)
        await ctx.tick()
        ctx.set(net.start, 0)
        ports = sorted(net.ports.items())
        for t in range(max_cycles):
            if ctx.get(net.done):
                break
            for (u, p), rp in ports:
                for side, stream in (("inject", rp.inject), ("eject", rp.eject)):
                    if ctx.get(stream.valid) and ctx.get(stream.ready):
                        seen.append((side, (u, p), t, ctx.get(stream.payload.kind).value,
                                     int(ctx.get(stream.payload.payload))))
            await ctx.tick()
        else:
            raise RuntimeError(f"the routed network did not finish within {max_cycles} cycles")
        if ctx.get(net.error):
            raise RuntimeError("the routed network raised error")
        out["cycles"] = ctx.get(net.cycles)

    sim = Simulator(top)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return _match(run, model, seen, out["cycles"], net.terminal_ports)


def _match(run, model, seen, rtl_cycles, c):
    """MessageTrace from the recorded handshakes ``seen``: (side, (node, port), cycle, kind,
    payload); ``c`` terminals per node."""
    current, times, in_flight = {}, [], {}
    for side, port, t, kind, payload in seen:
        if kind in _HEAD:
            head = _head(payload)
            if side == "inject":
                src, dst, chunk, step, flits = head
                msg = {"src": src, "dst": dst, "chunk": chunk, "step": step, "port": port[1],
                       "flits": flits + 1}
                times.append(msg)
                in_flight.setdefault(head, deque()).append(msg)
            elif in_flight.get(head):
                msg = in_flight[head].popleft()
            else:
                raise RuntimeError(f"a message left the network at cycle {t} that never "
                                   f"entered it (head {head}; a monitor error)")
            current[(side, port)] = msg
            msg[side + "_head"] = t
        if kind in _TAIL:
            current[(side, port)][side + "_tail"] = t
    # Messages of one (source, destination, step) to their transfers: by chunk where the heads
    # name the chunks, else in injection order (a staged transfer's head names its staging
    # slot's counter; each NI port sends its table in schedule order).
    groups = {}
    for m in sorted(times, key=lambda m: m["inject_head"]):
        groups.setdefault((m["src"] // c, m["dst"] // c, m["step"]), []).append(m)
    transfers = [(s, t) for s, st in enumerate(run.schedule.steps) for t in st]
    wanted = {}
    for i, (step, t) in enumerate(transfers):
        wanted.setdefault((t.src, t.dst, step), []).append(i)
    pick = {}
    for key, idx in wanted.items():
        msgs = groups.get(key, [])
        if len(msgs) != len(idx) or any(k not in m for m in msgs for k in _TIMES):
            raise RuntimeError(f"the trace has {len(msgs)} whole messages from node {key[0]} to "
                               f"node {key[1]} in step {key[2]} where the schedule has "
                               f"{len(idx)} transfers (a monitor error)")
        if sorted(m["chunk"] for m in msgs) == sorted(transfers[i][1].chunk for i in idx):
            left = list(msgs)
            for i in idx:
                pick[i] = left.pop(next(k for k, m in enumerate(left)
                                        if m["chunk"] == transfers[i][1].chunk))
        else:
            pick.update(zip(idx, msgs))
    messages = []
    for i, (step, t) in enumerate(transfers):
        m = pick[i]
        messages.append(MessageTimes(i, step, t.src, t.dst, t.chunk, m["port"], m["flits"],
                                     m["inject_head"], m["inject_tail"], m["eject_head"],
                                     m["eject_tail"], int(model.start[i]),
                                     int(model.finish[i])))
    return MessageTrace(tuple(messages), int(rtl_cycles), run.expected_cycles)


def critical_chain(trace):
    """The RTL's critical path through ``trace`` (module docstring), first message first.

    Returns
    -------
    list of (MessageTimes, str)
        Each message and what held it: ``"inputs"`` (its last input's ejection came after its
        NI port's previous injection), ``"port"`` (the reverse) or ``"start"`` (neither).
    """
    msgs = trace.messages
    into, prev_on_port = {}, {}
    for m in msgs:
        into.setdefault((m.dst, m.chunk), []).append(m)
    by_port = {}
    for m in sorted(msgs, key=lambda m: m.inject_head):
        by_port.setdefault((m.src, m.port), []).append(m)
    for lst in by_port.values():
        for a, b in zip(lst, lst[1:]):
            prev_on_port[b.index] = a
    chain = []
    m = max(msgs, key=lambda m: m.eject_tail)
    while m is not None:
        inputs = [q for q in into.get((m.src, m.chunk), ()) if q.index < m.index]
        last_input = max(inputs, key=lambda q: q.eject_tail) if inputs else None
        prev = prev_on_port.get(m.index)
        if prev is not None and (last_input is None
                                 or prev.inject_tail >= last_input.eject_tail):
            chain.append((m, "port"))
            m = prev
        elif last_input is not None:
            chain.append((m, "inputs"))
            m = last_input
        else:
            chain.append((m, "start"))
            m = None
    return chain[::-1]
