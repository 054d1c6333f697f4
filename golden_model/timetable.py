"""Timetabled injection: every message takes its whole route at once, so no two share a link.

``golden_model.timing.simulate`` with ``TimingParams(link_order="timetable")`` comes here. It is
the discipline of a routed NI that injects each message at a cycle given in its schedule table
(``hdl.send_engine``, the row's release cycle; ``golden_model.lowering.lower(release=...)``):
the timetable is computed so that a message never meets another one on any link of its route,
so it never waits in a router, never fills a virtual channel and never stops the send engine
behind it (the head-of-line blocking that made routed runs up to 2.2 times slower than the
first-come-first-served model, README "Router and routed network"). It is the MultiTree
paper's premise, transfers scheduled so that no two share a link in a time step, with the time
step made one cycle.

The rule, transfer by transfer in schedule order (step, then transfer order; every input of a
transfer comes from an earlier step, so it is timed before the transfer):

* ready: ``send_delay`` after the last of its inputs from earlier steps finished (as
  ``simulate``), and no earlier than the previous transfer of the same first link (its NI's
  send engine walks its table in order) left that link plus ``message_gap``;
* a start ``t0`` puts hop ``h`` on its link from ``start_h = t0 + sum over earlier hops of
  (latency + router_delay)`` until its tail ``tail_h = max(start_h + hold_h, tail_{h-1} +
  latency_{h-1})`` (the hold and tail rules of ``simulate``), and the link stays reserved until
  ``tail_h + message_gap``;
* ``t0`` is the earliest ready cycle at which every hop's interval is free of the intervals
  reserved by the transfers timed before it (a later transfer may take a gap an earlier one
  left: backfilling);
* it is *held* (``TimingResult.held``, so its NI gets a release cycle) if ``t0`` is later than
  its inputs alone let it go, whether its port's previous message or another's link delays it;
* it finishes ``latency + retire_delay`` after its tail reaches the destination; a staged
  transfer (a routed float NI's staged reductions) finishes when its destination's loopback port
  has added it, as in ``simulate``.

With no two messages on a link at once the routers only add their pipeline, which the model
counts (``router_delay``), so the model is what a network of such NIs does; the RTL's own
small differences (bank-slot waits, docs/hardware.md) are measured against it in the README.

Returns the ``TimingResult`` of ``simulate``; its ``start`` is each transfer's cycle on its
first link, from which ``allreduce_rtl.plan`` derives the release cycles of the tables.
"""

import bisect

import numpy as np

from .errors import ConfigError

__all__ = ["simulate_timetable"]


def simulate_timetable(schedule, params, staged=()):
    """Time ``schedule`` with timetabled injection (module docstring).

    Parameters
    ----------
    schedule : AllReduceSchedule
    params : TimingParams
        ``link_order == "timetable"``; no ``reduction``, ``node_lockstep`` or
        ``receive_order``.
    staged : sequence of int
        As ``simulate``'s.

    Returns
    -------
    TimingResult

    Raises
    ------
    ConfigError
        If ``params`` asks for a reduction unit, node lockstep or the receive order, which
        model NIs that have no timetable, a staged index is not a transfer, or a link of a
        route is not in the topology or has a bad latency or bandwidth (as ``simulate``).
    """
    from .timing import TimingResult, _check_bandwidth, _check_latency, _hold_table  # noqa: PLC0415
    if params.reduction is not None or params.node_lockstep or params.receive_order:
        raise ConfigError("timing: link order 'timetable' models routed NIs with release "
                          "cycles; it takes no reduction unit, node lockstep or receive order")
    transfers = [t for step in schedule.steps for t in step]
    total = len(transfers)
    is_staged = bytearray(total)
    for i in staged:
        if not 0 <= i < total:
            raise ConfigError(f"staged transfer {i} is not a transfer of the schedule "
                              f"(0..{total - 1})")
        is_staged[i] = 1
    topo = schedule.topology
    link_id = {link: k for k, link in enumerate(topo.graph.edges)}
    lat = [_check_latency(link, topo.link_latency(link)) for link in link_id]
    bw = [_check_bandwidth(link, topo.link_bandwidth(link)) for link in link_id]
    sizes = np.diff(schedule.bounds) * params.element_bytes
    table, flit_vals, flit_class, bw_class = _hold_table(sizes, params, bw)
    hold = table[flit_class].tolist()          # per chunk, per bandwidth class
    link_class = bw_class.tolist()
    msg_flits = flit_vals[flit_class].tolist()
    router_delay, gap = params.router_delay, params.message_gap
    starts = [[] for _ in lat]      # per link: reserved intervals, sorted, disjoint
    ends = [[] for _ in lat]
    port_free = {}
    have = {}
    loop_free = {}
    start = [0] * total
    held = np.zeros(total, dtype=bool)
    finish = [0] * total
    step_finish = []
    i = 0
    for step in schedule.steps:
        arrived = []
        for t in step:
            try:
                ids = [link_id[link] for link in t.route]
            except KeyError as exc:
                raise ConfigError(f"transfer {t} crosses link {exc.args[0]} that is not in "
                                  f"{topo.spec}") from None
            if not ids:
                raise ConfigError(f"transfer {t} has an empty route")
            holds = [hold[t.chunk][link_class[lid]] for lid in ids]
            ready = have.get((t.src, t.chunk), 0) + params.send_delay
            t0 = max(ready, port_free.get(ids[0], 0))
            offs, span = _offsets(ids, holds, lat, router_delay)
            while True:         # move past the first conflict until none is left
                for h, lid in enumerate(ids):
                    a, b = t0 + offs[h], t0 + span[h] + gap
                    k = bisect.bisect_left(starts[lid], b) - 1
                    if k >= 0 and ends[lid][k] > a:
                        t0 = ends[lid][k] - offs[h]
                        break
                else:
                    break
            for h, lid in enumerate(ids):
                a, b = t0 + offs[h], t0 + span[h] + gap
                k = bisect.bisect_left(starts[lid], a)
                starts[lid].insert(k, a)
                ends[lid].insert(k, b)
            port_free[ids[0]] = t0 + span[0] + gap
            start[i] = t0
            held[i] = t0 > ready
            fin = t0 + span[-1] + lat[ids[-1]] + params.retire_delay
            if is_staged[i]:
                u = t.dst
                st = max(fin + params.send_delay, loop_free.get(u, 0))
                loop_free[u] = st + msg_flits[t.chunk]
                fin = loop_free[u] + params.loopback_latency + params.retire_delay
            finish[i] = fin
            arrived.append(((t.dst, t.chunk), fin))
            i += 1
        for key, fin in arrived:
            if have.get(key, -1) < fin:
                have[key] = fin
        step_finish.append(max((f for _, f in arrived), default=0))
    finish_arr = np.asarray(finish, dtype=np.int64)
    return TimingResult(cycles=int(finish_arr.max()) + params.drain_cycles if total else 0,
                        finish=finish_arr, start=np.asarray(start, dtype=np.int64),
                        step_finish=step_finish, frequency_ghz=params.frequency_ghz,
                        num_nodes=schedule.topology.num_nodes, held=held)


def _offsets(ids, holds, lat, router_delay):
    """Per hop of a message that never waits: the cycle its head takes the link and the cycle
    its tail leaves it, both from the cycle it takes its first link."""
    offs, span = [], []
    at = tail = 0
    for h, lid in enumerate(ids):
        if h:
            prev = lat[ids[h - 1]]
            at += prev + router_delay
            tail = max(at + holds[h], tail + prev)
        else:
            tail = holds[0]
        offs.append(at)
        span.append(tail)
    return offs, span
