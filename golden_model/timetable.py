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
counts (``router_delay``).

**As the NIs run it** (``banks``, a ``BankSlots``; ``allreduce_rtl.plan`` passes the one of
its NIs). An NI whose buffer has K banks in a fixed rotation (``hdl.banked_buffer``) can take
a cycle only if it is its client's slot: a send engine issues a head only in a cycle after
which its first payload flit's bank is its slot, a lane pops a payload flit only in its bank's
slot, and after a message the next one waits for its slot again (up to K - 1 cycles at each
end, at every message of a chain). The timetable above is computed without those waits (it
decides the release cycles, so ``start`` and ``held`` stay its own); a second pass then runs
it as the NIs do, transfer by transfer in schedule order:

* start: the first cycle of the transfer's start residue at or after its inputs
  (``send_delay`` after they finished, as above), its release (a held transfer's ``start``)
  and its send engine's previous message (its flits, head included: the engine follows a tail
  with the next head at once, with no ``message_gap``);
* finish: the first cycle of its finish residue at or after ``start + route + retire_delay``
  at which its receive port is free: a port pops one message at a time, from its head to its
  tail, and takes the next head ``write_delay - retire_delay`` cycles after the previous
  message finished (its last write has retired); messages take a port in schedule order,
  a later one filling a gap an earlier one left, as on the links;
* a staged transfer's add likewise: its loopback start of its residue at or after its
  arrival plus ``send_delay`` and the previous add's flits, its finish of its residue on the
  loopback's receive port;
* two REDUCE receives into one chunk of a node at once (int32 on routers: the lanes' interlock,
  ``hdl.ordering``, keeps a lane from reading a flit another lane has read and not yet written):
  the one whose pop of a flit comes 1 .. ``write_delay`` cycles after the other's waits a
  rotation, K cycles (a receive of an earlier step stays where it is: its dependants have
  read it).

Returns the ``TimingResult`` of ``simulate``; its ``start`` is each transfer's cycle on its
first link in the timetable, from which ``allreduce_rtl.plan`` derives the release cycles of
the tables.
"""

import bisect
from typing import NamedTuple

import numpy as np

from .errors import ConfigError
from .schedule import Op

__all__ = ["BankSlots", "simulate_timetable"]


class BankSlots(NamedTuple):
    """The NI buffer's bank rotation as the second pass counts it (module docstring, "As the
    NIs run it"; ``allreduce_rtl.plan.bank_slots`` derives it from ``hdl.banked_buffer``).

    Attributes
    ----------
    banks : int
        K, the rotation's period (cycles), >= 1.
    residues : sequence of (int, int, int, int)
        Per transfer in schedule order, residues modulo K of the cycles it may take: its start
        (head on its first link), its finish, and for a staged transfer its loopback add's
        start and finish.
    receive_ports : sequence of int
        Per transfer, its receive port at the destination (>= 0).
    write_delay : int
        Cycles from a receive port's pop of a flit to the write that retires it
        (``hdl.reduction.write_delay``): the port takes its next head only then.
    """
    banks: int
    residues: object
    receive_ports: object
    write_delay: int


def simulate_timetable(schedule, params, staged=(), banks=None):
    """Time ``schedule`` with timetabled injection (module docstring).

    Parameters
    ----------
    schedule : AllReduceSchedule
    params : TimingParams
        ``link_order == "timetable"``; no ``reduction``, ``node_lockstep`` or
        ``receive_order``.
    staged : sequence of int
        As ``simulate``'s.
    banks : BankSlots, optional
        The NIs' bank rotation: with it the finishes are the NIs' as they run the timetable
        (module docstring, "As the NIs run it"); ``start`` and ``held`` stay the timetable's.

    Returns
    -------
    TimingResult

    Raises
    ------
    ConfigError
        If ``params`` asks for a reduction unit, node lockstep or the receive order, which
        model NIs that have no timetable, a staged index is not a transfer, a link of a route
        is not in the topology or has a bad latency or bandwidth (as ``simulate``), or
        ``banks`` does not give one residue and receive port per transfer.
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
    legs = []           # per transfer: (src, chunk, dst, first link, arrival, flits, reduces)
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
            arrival = span[-1] + lat[ids[-1]]       # its tail at the destination, from t0
            legs.append((t.src, t.chunk, t.dst, ids[0], arrival, msg_flits[t.chunk],
                         t.op is Op.REDUCE and not is_staged[i]))
            fin = t0 + arrival + params.retire_delay
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
    start_arr = np.asarray(start, dtype=np.int64)
    if banks is not None:
        finish, step_finish = _as_run(schedule, params, banks, legs, start_arr, held, is_staged)
    finish_arr = np.asarray(finish, dtype=np.int64)
    return TimingResult(cycles=int(finish_arr.max()) + params.drain_cycles if total else 0,
                        finish=finish_arr, start=start_arr,
                        step_finish=step_finish, frequency_ghz=params.frequency_ghz,
                        num_nodes=schedule.topology.num_nodes, held=held)


def _as_run(schedule, params, banks, legs, start, held, is_staged):
    """Finishes and step finishes of the timetable ``start``/``held`` as the NIs run it (module
    docstring, "As the NIs run it")."""
    num_banks, res, rx_port, write_delay = banks
    res = np.asarray(res, dtype=np.int64).reshape(-1, 4).tolist()
    rx_port = list(rx_port)
    if len(res) != len(legs) or len(rx_port) != len(legs):
        raise ConfigError(f"bank slots give {len(res)} residues and {len(rx_port)} receive "
                          f"ports for a schedule of {len(legs)} transfers")

    def up(x, r):
        return x + (r - x) % num_banks

    rd = params.retire_delay
    after = write_delay - rd            # a receive port's next head: after the last write

    def receive(busy, lo, flits, r):
        """The first finish >= lo of residue r whose receive leaves ``busy`` free."""
        starts, ends = busy
        before = rd + flits - 1         # its head's pop, before its finish
        fin = up(lo, r)
        while True:
            k = bisect.bisect_left(starts, fin + after) - 1
            if k < 0 or ends[k] <= fin - before:
                break
            fin = up(ends[k] + before, r)
        k = bisect.bisect_left(starts, fin - before)
        starts.insert(k, fin - before)
        ends.insert(k, fin + after)
        return fin

    have, port_free, loop_free, rx_busy, into = {}, {}, {}, {}, {}
    finish, step_finish = [0] * len(legs), []
    i = 0
    for step in schedule.steps:
        first_of_step = i
        for _ in step:
            src, chunk, dst, first, arrival, flits, reduces = legs[i]
            r = res[i]
            go = max(have.get((src, chunk), 0) + params.send_delay, port_free.get(first, 0),
                     int(start[i]) if held[i] else 0)
            t0 = up(go, r[0])
            port_free[first] = t0 + flits
            fin = receive(rx_busy.setdefault((dst, rx_port[i]), ([], [])),
                          t0 + arrival + rd, flits, r[1])
            if is_staged[i]:
                st = up(max(fin + params.send_delay, loop_free.get(dst, 0)), r[2])
                loop_free[dst] = st + flits
                fin = receive(rx_busy.setdefault((dst, -1), ([], [])),
                              st + flits + params.loopback_latency + rd, flits, r[3])
            finish[i] = fin
            if reduces:
                _interlock(into.setdefault((dst, chunk), []), i, first_of_step, finish,
                           flits - 1, rd, write_delay, num_banks)
            i += 1
        for k in range(first_of_step, i):
            key = (legs[k][2], legs[k][1])
            if have.get(key, -1) < finish[k]:
                have[key] = finish[k]
        step_finish.append(max(finish[first_of_step:i], default=0))
    return finish, step_finish


def _interlock(placed, i, first_of_step, finish, payload, rd, write_delay, num_banks):
    """Two lanes reducing into one chunk at once (module docstring, "As the NIs run it"): the
    one whose pop of a flit falls 1 .. ``write_delay`` cycles after the other's (the flit is
    in flight) waits a rotation. ``placed``: the earlier receives into the chunk (indices into
    ``finish``, each of ``payload`` flits, updated in place); a receive of an earlier step has
    been read by its dependants and stays."""
    def window(k):
        last = finish[k] - rd
        return last - payload + 1, last

    moved = True
    while moved:
        moved = False
        lo, hi = window(i)
        for k in placed:
            a, b = window(k)
            if a > hi or lo > b:
                continue
            if 1 <= lo - a <= write_delay:
                finish[i] += num_banks
                moved = True
                break
            if 1 <= a - lo <= write_delay and k >= first_of_step:
                finish[k] += num_banks
                moved = True
                break
    placed.append(i)


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
