"""Contention-aware, message-level timing model of an ``AllReduceSchedule``, and lower bounds.

What ``simulate`` models
------------------------
Every ``Transfer`` is one message of ``B = chunk elements * element_bytes`` bytes, i.e.
``flits = ceil(B / flit_bytes)`` flits. A directed link of bandwidth ``W`` GB/s moves
``W / frequency_ghz`` bytes per cycle, so the message holds each link of its route for

    hold = ceil(flits * flit_bytes * frequency_ghz / W)    cycles

(16 GB/s at 1 GHz with 16-byte flits: one flit per cycle, the MultiTree paper's network). The
message is cut-through pipelined across its hops. At hop ``h`` over link ``l``:

* the head requests ``l`` when it arrives (at the first hop: when the transfer is ready) and
  starts when the link is also free: ``start_h = max(head_arrival_h, free[l])``;
* the head reaches the next node ``latency(l)`` cycles after it starts, plus ``router_delay``
  when that node is not the destination (a router it passes through):
  ``head_arrival_{h+1} = start_h + latency(l) [+ router_delay]``;
* the tail leaves no earlier than ``start_h + hold_h`` and no earlier than it arrived from the
  previous hop: ``tail_h = max(start_h + hold_h, tail_{h-1} + latency(l_{h-1}))`` (a fast link
  after a slow one does not finish early; a slow link after a fast one sets the pace);
* the link is busy until the tail leaves: ``free[l] = tail_h``;
* the transfer finishes when its tail arrives at the destination: ``tail_last + latency(last)``.

So a lone transfer over ``k`` equal links takes ``hold + k * latency + (k - 1) * router_delay``
cycles. Concurrent
transfers share a link first come, first served by the time their head requests it; ties go to
the earlier schedule step, then to the earlier transfer in the step (``schedule.transfers()``
order). A link is never shared by two messages at once (no flit interleaving).

Dependencies: a transfer from node ``u`` of chunk ``c`` in step ``s`` may start only when every
transfer *into* ``(u, c)`` in an earlier step has finished (its inputs arrived). Transfers into
``(u, c)`` in the same step do not count (the IR reads a chunk as it was at the start of the
step). A transfer with no such input is ready at cycle 0. There is no global barrier between
steps: a transfer whose inputs are ready goes, whatever other nodes are doing. The hardware NI's
lockstep step control may add waiting that this model does not; that difference is measured
against the RTL, not modelled here.

What it ignores: per-flit credit flow control and buffer depth (a message is never stalled
mid-route by back-pressure, only delayed at a hop by a busy link), router allocation and
virtual channels (a router costs only its pipeline delay, ``router_delay``, default 0), head flits and packet headers (only payload flits are
counted unless ``header_flits`` is set), the reduction unit's throughput at the destination, and write-after-read hazards (a
node may receive a new value of a chunk while still sending the old one; the IR's step semantics
say which value is sent, the timing does not wait for the send to drain).

Staged transfers (``simulate(..., staged=...)``, a routed float NI's staged reductions,
``golden_model.lowering``): such a transfer finishes for its dependants only when its
destination's loopback port has added it into the chunk; each node adds its staged transfers in
schedule order, one flit per cycle (module ``simulate``'s docstring).

Hardware-matching options (``TimingParams``): ``header_flits`` per message, ``send_delay`` (ready
to head injection), ``retire_delay`` (tail arrival to finished) and ``router_delay`` (the router
pipeline a head crosses at each intermediate node: ``hdl.router.router``'s 4 cycles), so the
model can be configured like the RTL it is compared with. Options for configuring it like the
MultiTree authors' simulator (``golden_model.authors``): ``packet_bytes`` (a head flit per
packet), ``reduction`` (a serial reduction unit per node; a reducing transfer finishes when its
destination's unit has added it), ``node_lockstep`` with ``send_buffer_bytes`` (a node's step
waits until its previous step's sends were handed over) and ``drain_cycles`` (added to the end).

Link order (``TimingParams.link_order``): by default a link serves its transfers as the hardware
that runs the schedule does: in schedule order on NIs joined by links (the send engines walk
their tables in order; a transfer whose turn has not come waits even when its link is free),
and on routers in schedule order at injection (a transfer's first hop, which its NI's send
engine takes in table order: ``golden_model.lowering`` sends a transfer by the port of its
route's first link) and first come first served at every later hop (the routers' allocators).
``"schedule"``, ``"injection"`` and ``"fcfs"`` force one rule. The description above is the
first-come-first-served rule; in schedule order a hop requests its link as above but starts
only after the link's earlier transfers (in schedule order) have started.

Implementation: a discrete-event simulation with one heap event per hop (the head's request of a
link), keyed by ``time * T + transfer index`` (T transfers) so the heap holds plain ints and pops
in time, step, transfer order (one caveat: over a zero-latency link a head requests its next
link in the same cycle, possibly after a later transfer already took that link in that cycle).
Links are integer ids with precomputed per-hop hold and per-link
latency lists. Dependencies go through "gates", one per distinct (node, chunk, inputs so far):
a gate waits for the inputs that arrived since the previous gate of the same (node, chunk) and
for that previous gate, so the dependency graph stays linear in the schedule's size. A schedule
whose every transfer crosses one link of a direct topology, its links in schedule order (the
NIs joined by links that run it), has a closed form instead, computed a step at a time with numpy
(``_simulate_one_hop``): the same cycles, about 15 times faster (0.04 s against 0.56 s for
multitree-opt's 64,512 transfers on torus:8x8).

Lower bounds (``lower_bound``)
------------------------------
All in cycles (floats, not rounded: a simulated time, an int, is compared against them), D the
vector size in bytes per node, N endpoint nodes. Time ``D / W`` with D in bytes and W in GB/s is
in ns; times ``frequency_ghz`` gives cycles.

* Injection: every element needs at least ``2(N-1)`` messages carrying it between endpoints
  (the one-way gossip problem: N parties, each knowing one value, need ``2N - 2`` one-way calls
  before every party knows every value; Harary & Schwenk 1974. A message of this IR carries
  less than a call, a partial sum, so it needs at least as many), so the endpoints send and
  receive at least ``2(N-1) * D`` bytes in all, over their own links (reductions happen only
  at endpoints, so a switch forwards but never merges): ``2(N-1) * D / B`` with ``B`` the smaller
  of the endpoints' total outgoing and total incoming link bandwidth. With N nodes of ``d``
  links of ``bw`` each this is the classic ``2(N-1)/N * D / (d * bw)`` (Patarasuk & Yuan 2009;
  the MultiTree paper's bound).
* Reduce-scatter plus all-gather (``rsag_cycles``, reported, not a bound on every algorithm):
  ForestColl's cut bound with bandwidths (``golden_model.cutbound``), the bound of every
  all-reduce made of a reduce-scatter and an all-gather: ``D/N * (max_S |S ∩ E| / B+(S) +
  the same on the reversed links)`` over vertex sets S (switches included) holding some but not
  all endpoints E, found exactly by minimum cuts. On a network of equal links it is the classic
  figure for the node with the least bandwidth, ``2(N-1)/N * D`` over that node's links (S: every
  vertex but that node), what a ring needs, and the bound the TACOS and MultiTree papers state
  their ratios against; on unequal links another cut can bind. It equals the injection bound when
  every node has the same bandwidth (tori, rings, fat-trees, BiGraphs); where nodes differ (a
  mesh's corners) a tree algorithm can beat it, as it reduces at intermediate nodes and a leaf
  then moves only about ``D`` each way (pipelined ``multitree-opt`` on mesh:4x4 does).
* Cut: for a split of the endpoints into A and B, every element's final value on a node in B
  depends on values in A and vice versa, so at least D bytes must cross each way:
  time >= D / (bandwidth from A to B), and the same for B to A. For direct networks the cut's
  bandwidth is the sum of the links from A to B; with switches it is the maximum flow from A to B
  (the minimum over where the switches go). The cuts evaluated are the natural ones: every
  straight cut across each dimension of a mesh or torus (wrap links counted; a ring is a torus of
  one row: the arcs ``0..i`` against the rest, and with equal links every split into two arcs
  crosses the same 2 links each way), on a fat-tree each top-level group (nodes sharing the
  top digit) against the rest, on a bigraph the nodes of each half of the switches (the two
  layers, and a mixed half: the first half of each layer) against the rest and each switch's
  nodes against the rest, and everywhere every single node against the rest (D into and out of
  each node).
* Latency: information from every node must reach every other, so time >= the largest
  shortest-path latency (sum of link latencies) between two endpoints.

``cycles`` is the largest of the three; ``binding`` names it. N = 1 gives 0.

With latency (``tight_cycles``): a byte that must be delivered by time ``T`` entered its link
(of latency ``l``, bandwidth ``b``) by ``T - l``, so a link delivers at most ``b (T - l)`` bytes
by ``T``. Over the endpoints' outgoing links (and again over their incoming ones) the injection
argument needs ``sum_l b_l (T - l_l) >= 2(N-1) D``, so ``T >= injection + sum_l b_l l_l /
sum_l b_l`` (the bandwidth-weighted mean latency of those links); across a cut,
``T >= cut + (the smallest link latency)``. ``tight_cycles`` is the largest of these two and
the latency bound: at small sizes, where latency and bandwidth terms are alike, it is up to
twice as tight as ``cycles``.
"""

import gc
import heapq
import math
import numbers
from dataclasses import dataclass, replace
from fractions import Fraction

import networkx as nx
import numpy as np

from .cutbound import cut_bound
from .errors import ConfigError
from .lowering import needs_router
from .schedule import Op

__all__ = ["TimingParams", "TimingResult", "LowerBound", "simulate", "in_arrival_order",
           "lower_bound",
           "hold_cycles", "cycles_to_us", "algbw_GBps", "busbw_GBps"]


#: The link arbitrations ``simulate`` models (``TimingParams.link_order``).
LINK_ORDERS = ("hardware", "schedule", "injection", "fcfs", "timetable")
#: How reports name each link order, and the authors' simulator preset.
LINK_ORDER_WORDS = {"hardware": "as the hardware does", "schedule": "in schedule order",
                    "injection": "in schedule order where messages enter the network, first "
                                 "come first served at routers",
                    "fcfs": "first come first served",
                    "timetable": "by a timetable of whole routes, no two messages on a link at "
                                 "once",
                    "authors": "like the MultiTree authors' simulator"}


def _whole(name, v, least):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < least:
        raise ConfigError(f"{name} must be a whole number >= {least}, not {v!r}")


@dataclass(frozen=True)
class ReductionUnit:
    """A node's one serial reduction unit (``TimingParams.reduction``).

    Every REDUCE transfer into node ``u`` counts as finished for its dependants only when ``u``'s
    unit has added it. The unit adds one transfer at a time, in the order they arrive (ties in
    schedule order): an add starts ``start_delay`` cycles after its transfer finished and not
    before the previous add ended, takes ``block_cycles * ceil(bytes / block_bytes)`` cycles and
    counts ``finish_delay`` cycles after it ends. The MultiTree authors' simulator models its
    aggregation this way (``golden_model.authors``).

    Raises
    ------
    ConfigError
        If ``block_bytes`` or ``block_cycles`` is not a positive whole number, or a delay is
        negative.
    """
    block_bytes: int
    block_cycles: int
    start_delay: int = 0
    finish_delay: int = 0

    def __post_init__(self):
        _whole("block_bytes", self.block_bytes, 1)
        _whole("block_cycles", self.block_cycles, 1)
        _whole("start_delay", self.start_delay, 0)
        _whole("finish_delay", self.finish_delay, 0)

    def add_cycles(self, num_bytes):
        """Cycles the unit takes to add a message of ``num_bytes`` bytes (int or int array)."""
        return -(-num_bytes // self.block_bytes) * self.block_cycles


@dataclass(frozen=True)
class TimingParams:
    """Clock and message granularity of the timing model.

    Link bandwidth (GB/s) and latency (cycles) are attributes of the topology's links (set when
    the topology is parsed), not parameters here.

    Parameters
    ----------
    frequency_ghz : float
        Network clock in GHz (default 1, the MultiTree paper's).
    flit_bytes : int
        Payload bytes per flit (default 16: 128-bit flits).
    element_bytes : int
        Bytes per vector element (default 4: float32 / int32).
    header_flits : int
        Flits added to every message for its header (default 0: payload only; the NI sends one
        head flit per message, so the RTL comparison uses 1).
    send_delay : int
        Cycles from a transfer's inputs being ready to its head requesting the first link
        (default 0; the NI's table read and dependency check).
    retire_delay : int
        Cycles from the tail's arrival to the transfer counting as finished for its dependants
        (default 0; the NI's read-modify-write pipeline).
    router_delay : int
        Cycles a head spends in each node it passes through, i.e. every node of its route but
        the source and the destination (a transit router of a mesh or torus, a switch of a
        fat-tree or BiGraph); default 0. The hardware router's pipeline is 4 cycles per hop
        (``hdl.router.router``: RC, VA, SA/ST, output).
    link_order : str
        How a link chooses among the transfers that want it (``LINK_ORDERS``):

        * ``"hardware"`` (default): as the hardware that runs the schedule does. A schedule whose
          every transfer crosses one link of a direct topology runs on NIs joined by links
          (``golden_model.lowering.needs_router`` is false), whose send engines walk their
          tables in order: ``"schedule"``, with those NIs' ``receive_order``. Any other runs
          on routers: ``"injection"`` (NIs that inject as soon as their inputs are in, a
          message-level approximation of the round-robin allocators; its error against such
          an RTL is in the README's routed table). The routed hardware that
          ``allreduce_rtl.plan`` builds injects by a timetable instead and is compared with
          ``"timetable"``, which the plan sets.
        * ``"schedule"``: each link serves its transfers in schedule order (step, then
          transfer order), a transfer waiting for the earlier ones to have taken the link.
          Multi-hop schedules can wait on each other in a cycle, which raises.
        * ``"injection"``: the hops that are a transfer's first (its NI's injection) in
          schedule order on each link, as ``"schedule"``; every later hop (a router's output)
          first come, first served among all the hops that want the link.
        * ``"fcfs"``: first come, first served by the time the head requests the link (ties by
          schedule order); the model of the first release.
        * ``"timetable"``: each message takes its whole route at once, at the earliest cycle no
          link of it is taken (``golden_model.timetable``): routed NIs that inject at the
          release cycles of their tables, which the plan computes with this rule.
    message_gap : int
        Cycles a link stays idle after each message it carried, before the next may start
        (default 0): the NI's per-message turnaround that the hardware adds between messages on
        a link (bank-slot waits at both ends, the receive engine taking a head only after the
        previous message's writes, docs/hardware.md); a schedule of many short messages pays it
        once per message.
    loopback_latency : int
        Cycles of the link that joins a routed float NI's loopback port to itself (the staged
        transfers of ``simulate``; ``hdl.routed_network.LOOPBACK_LATENCY``); default 1.
    packet_bytes : int
        Largest payload of one packet (default 0: a message is one packet). A message of ``B``
        bytes is ``ceil(B / packet_bytes)`` packets, each with ``header_flits`` head flits (the
        MultiTree authors' simulator cuts messages into 256-byte packets).
    reduction : ReductionUnit or None
        Each node's serial reduction unit (default None: reductions take no time).
    drain_cycles : int
        Cycles from the last transfer's finish to the end of the run (default 0; the authors'
        simulator ends when the network is idle, its last credit returned).
    node_lockstep : bool
        Steps per node (default False: a transfer waits only for its inputs). When set, a
        node's transfers of a step also wait until every transfer of the last earlier step in
        which the node sent has been handed over: its head entered its first link and all but
        its last ``send_buffer_bytes`` bytes have followed (at the link's rate). The authors'
        simulator with ``--strict-schedule``: a node takes its next step only when all its NIs
        are free, an NI being free once its message buffer holds the rest of its flow.
    send_buffer_bytes : int
        Payload bytes a sender's buffer holds (default 0; see ``node_lockstep``).
    receive_order : bool
        The order in which an NI joined by links writes what it receives (default False; link
        order ``"hardware"`` implies it wherever the NIs are joined by links and no reduction
        unit is set, and ``allreduce_rtl.plan.hardware_timing`` sets it for them). A
        transfer then finishes no earlier than the transfer before it on its last link (in
        schedule order) finished plus its own payload's cycles on that link (head flits left
        out), as the receive engine writes one message after the other at the link's rate, and no earlier than the contribution
        before it into the same chunk, as the NI's ordering rule writes a chunk's
        contributions flit by flit in the summation order (docs/hardware.md, "Step control").
        Both are bounds the hardware cannot beat, so the model stays a lower bound of the RTL;
        they matter where several messages share a link in a step (pipelined schedules). Needs
        links in schedule order; not with ``reduction`` or staged transfers.
    preset : str
        The named preset these values come from, for reports (default "": none;
        ``"authors"``: ``golden_model.authors.authors_params``).

    Raises
    ------
    ConfigError
        If a value is not positive (or the byte counts are not whole numbers), a delay or
        header count is negative, or ``receive_order`` is set with first-come-first-served
        links or a reduction unit.
    """
    frequency_ghz: float = 1.0
    flit_bytes: int = 16
    element_bytes: int = 4
    header_flits: int = 0
    send_delay: int = 0
    retire_delay: int = 0
    router_delay: int = 0
    link_order: str = "hardware"
    message_gap: int = 0
    loopback_latency: int = 1
    packet_bytes: int = 0
    reduction: ReductionUnit | None = None
    drain_cycles: int = 0
    node_lockstep: bool = False
    send_buffer_bytes: int = 0
    preset: str = ""
    receive_order: bool = False

    def describe(self):
        """How reports name this timing: ``{"timing": preset or link order}``, plus
        ``"message_size"`` (bytes; 0: one packet per chunk) for the authors' preset."""
        if self.preset == "authors":
            return {"timing": self.preset, "message_size": self.packet_bytes}
        return {"timing": self.preset or self.link_order}

    def __post_init__(self):
        f = self.frequency_ghz
        if (isinstance(f, bool) or not isinstance(f, numbers.Real) or not math.isfinite(f)
                or not f > 0):
            raise ConfigError(f"frequency_ghz must be a positive number of GHz, not {f!r}")
        for name in ("flit_bytes", "element_bytes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0:
                raise ConfigError(f"{name} must be a positive integer, not {v!r}")
        for name in ("header_flits", "send_delay", "retire_delay", "router_delay",
                     "message_gap", "loopback_latency", "packet_bytes", "drain_cycles",
                     "send_buffer_bytes"):
            _whole(name, getattr(self, name), 0)
        if self.link_order not in LINK_ORDERS:
            raise ConfigError(f"link order {self.link_order!r} is not one of "
                              f"{', '.join(LINK_ORDERS)}")
        if self.receive_order and (self.reduction is not None or self.link_order == "fcfs"):
            raise ConfigError("receive_order needs links in schedule order and no reduction unit")
        if self.reduction is not None and not isinstance(self.reduction, ReductionUnit):
            raise ConfigError(f"reduction must be a ReductionUnit or None, not "
                              f"{self.reduction!r}")


def _exact(x):
    """A float or int as the exact decimal it was written as (12.8 -> 64/5), so the ceilings of
    ``hold_cycles`` are not off by one from binary rounding."""
    return Fraction(x) if isinstance(x, numbers.Rational) else Fraction(repr(float(x)))


def hold_cycles(num_bytes, bandwidth_GBps, params=TimingParams()):
    """Cycles a message of ``num_bytes`` holds a link of ``bandwidth_GBps``:
    ``ceil(ceil(num_bytes / flit_bytes) * flit_bytes * frequency_ghz / bandwidth_GBps)``."""
    flits = -(-int(num_bytes) // params.flit_bytes)
    return math.ceil(flits * params.flit_bytes * _exact(params.frequency_ghz)
                     / _exact(bandwidth_GBps))


def cycles_to_us(cycles, frequency_ghz):
    """Microseconds of ``cycles`` network-clock cycles at ``frequency_ghz``."""
    return cycles / (frequency_ghz * 1e3)


def algbw_GBps(size_bytes, cycles, frequency_ghz):
    """NCCL's algorithm bandwidth, size / time, in GB/s (10^9 bytes per second); ``inf`` for a
    time of 0 cycles."""
    if cycles == 0:
        return math.inf
    return size_bytes * frequency_ghz / cycles


def busbw_GBps(size_bytes, cycles, frequency_ghz, num_nodes):
    """NCCL's bus bandwidth for all-reduce, algbw * 2(N-1)/N, in GB/s; 0 for one node."""
    if num_nodes <= 1:
        return 0.0
    return algbw_GBps(size_bytes, cycles, frequency_ghz) * 2 * (num_nodes - 1) / num_nodes


class _Rates:
    """Conversions shared by ``TimingResult`` and ``LowerBound`` (need ``cycles``,
    ``frequency_ghz`` and ``num_nodes``)."""

    @property
    def time_us(self):
        """``cycles`` in microseconds at ``frequency_ghz``."""
        return cycles_to_us(self.cycles, self.frequency_ghz)

    def algbw_GBps(self, size_bytes):
        """size / time in GB/s (``inf`` when ``cycles`` is 0)."""
        return algbw_GBps(size_bytes, self.cycles, self.frequency_ghz)

    def busbw_GBps(self, size_bytes, num_nodes=None):
        """algbw * 2(N-1)/N in GB/s; N defaults to the schedule's / topology's node count."""
        n = self.num_nodes if num_nodes is None else num_nodes
        return busbw_GBps(size_bytes, self.cycles, self.frequency_ghz, n)


@dataclass(frozen=True)
class TimingResult(_Rates):
    """Timing of one schedule.

    Attributes
    ----------
    cycles : int
        Completion time of the last transfer (0 for a schedule without transfers).
    finish : numpy.ndarray of int64
        Per-transfer cycle at which its tail reaches the destination, in
        ``schedule.transfers()`` order.
    start : numpy.ndarray of int64
        Per-transfer cycle at which its head entered its first link (after waiting for its
        inputs and for the link), same order.
    step_finish : list of int
        Last finish cycle of each schedule step (0 for a step without transfers). Not
        necessarily increasing: there is no barrier between steps.
    frequency_ghz : float
        Clock used to convert cycles to time.
    num_nodes : int
        Endpoint nodes of the schedule's topology (for ``busbw_GBps``).
    held : numpy.ndarray of bool or None
        Link order ``"timetable"`` only (``golden_model.timetable``): per transfer, whether
        the timetable starts it later than its inputs let it (its NI port's previous message
        or a link taken by another), so that its NI must hold it until its release cycle.
        None for the other orders.
    """
    cycles: int
    finish: np.ndarray
    start: np.ndarray
    step_finish: list
    frequency_ghz: float = 1.0
    num_nodes: int = 1
    held: np.ndarray | None = None


@dataclass(frozen=True)
class LowerBound(_Rates):
    """Lower bounds on all-reduce time on a topology, in cycles (floats, see the module docstring).

    Attributes
    ----------
    cycles : float
        The tightest (largest) of the three bounds.
    injection_cycles, cut_cycles, latency_cycles : float
        The three bounds.
    binding : str
        ``"injection"``, ``"cut"`` or ``"latency"``: which one is ``cycles`` (the first in that
        order on a tie). ``"none"`` for one node.
    cut : str
        Which cut gave ``cut_cycles`` (e.g. ``"cols 0..1 | 2..3"``, ``"node 5"``).
    rsag_cycles : float
        The reduce-scatter plus all-gather cut bound (module docstring; not a bound on every
        algorithm).
    tight_cycles : float
        The bound with latency terms (module docstring), at least ``cycles``.
    frequency_ghz : float
    num_nodes : int
    """
    cycles: float
    injection_cycles: float
    cut_cycles: float
    latency_cycles: float
    binding: str
    cut: str = ""
    rsag_cycles: float = 0.0
    tight_cycles: float = 0.0
    frequency_ghz: float = 1.0
    num_nodes: int = 1


def _check_latency(link, lat):
    if isinstance(lat, bool) or not isinstance(lat, numbers.Real) or lat < 0 or lat != int(lat):
        raise ConfigError(f"latency of link {link} must be a whole number of cycles >= 0, "
                          f"not {lat!r}")
    return int(lat)


def _check_bandwidth(link, bw):
    if isinstance(bw, bool) or not isinstance(bw, numbers.Real) or not bw > 0:
        raise ConfigError(f"bandwidth of link {link} must be a positive number of GB/s, "
                          f"not {bw!r}")
    return bw


def simulate(schedule, params=TimingParams(), staged=(), banks=None):
    """Time ``schedule`` with the contention-aware message model of the module docstring.

    Parameters
    ----------
    schedule : AllReduceSchedule
    params : TimingParams
    staged : sequence of int
        Transfers (indices in ``schedule.transfers()`` order) that a routed float NI receives
        into a staging slot and then adds into the chunk through its loopback port
        (``golden_model.lowering``, staged reductions; ``LoweredSchedule.staged``). Such a
        transfer counts as finished for its dependants when its add is: each node adds its
        staged transfers one after another in schedule order, an add starting ``send_delay``
        after its transfer arrived and after the previous add's flits, holding the loopback
        for the message's flits at one per cycle and finishing ``loopback_latency +
        retire_delay`` cycles after its last flit.
    banks : golden_model.timetable.BankSlots, optional
        With link order ``"timetable"`` only: the NIs' bank rotation, so that the finishes are
        the NIs' as they run the timetable (``golden_model.timetable``, "As the NIs run it").

    Returns
    -------
    TimingResult

    Raises
    ------
    ConfigError
        If a link of a route has a non-positive bandwidth or a latency that is not a whole
        number of cycles >= 0, or ``banks`` is given with another link order.
    """
    # The simulation allocates many small lists and ints but no reference cycles; the cyclic
    # garbage collector would repeatedly scan every Transfer of the schedule (40% of the run
    # time on a 130k-transfer schedule), so it is paused for the call.
    if params.link_order == "timetable":
        from .timetable import simulate_timetable  # noqa: PLC0415
        return simulate_timetable(schedule, params, staged, banks)
    if banks is not None:
        raise ConfigError(f"timing: bank slots are modelled with link order 'timetable', not "
                          f"{params.link_order!r}")
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simulate(schedule, params, staged)
    finally:
        if gc_was_enabled:
            gc.enable()


def _hardware_receive_order(params, staged, direct):
    """Whether link order ``"hardware"`` brings the receiving NIs' order
    (``TimingParams.receive_order``): on NIs joined by links (``direct``), without staged
    transfers or a reduction unit, which no such NI has."""
    return (params.link_order == "hardware" and direct and not staged
            and params.reduction is None)


def in_arrival_order(schedule, params=TimingParams()):
    """``schedule`` with each step's transfers in the order they arrive, where the receiving
    NIs write in schedule order (``TimingParams.receive_order``, explicit or brought by link
    order ``"hardware"``); else ``schedule`` itself.

    A receiving NI writes one message per link after the other and a chunk's contributions in
    the summation order, the schedule order of the REDUCE transfers into it; a contribution
    that comes first in the schedule but arrives later stalls its link's receive until it is
    in, and the stall spreads down that link. Sorting each step by the finish times of the
    same timing without that rule (links in schedule order, so the times do not depend on the
    order within a step) makes the summation order the arrival order within every step.
    Transfers of one link finish in their schedule order (each holds the link at least one
    cycle), so every link keeps its order; the sort is stable. Only the order of additions
    into a chunk changes (float results follow the new schedule, as always), and the time
    without the rule stays the same. Contributions in different steps keep their order.

    Parameters
    ----------
    schedule : AllReduceSchedule
    params : TimingParams
        The timing the schedule will run with.

    Returns
    -------
    AllReduceSchedule
        The same algorithm, chunks and steps, each step reordered; ``schedule`` when the
        receive order does not apply.

    Raises
    ------
    ConfigError
        As ``simulate``.
    """
    if not (params.receive_order
            or _hardware_receive_order(params, (), not needs_router(schedule))):
        return schedule
    finish = simulate(schedule, replace(params, link_order="schedule",
                                        receive_order=False)).finish.tolist()
    steps, at = [], 0
    for step in schedule.steps:
        ends = finish[at:at + len(step)]
        steps.append([step[j] for j in sorted(range(len(step)), key=ends.__getitem__)])
        at += len(step)
    return replace(schedule, steps=steps)


def _simulate(schedule, params, staged, one_hop=True):
    """``simulate`` without the collector pause; ``one_hop=False`` forces the event simulation
    where ``_simulate_one_hop`` would answer (tests compare the two)."""
    topo = schedule.topology
    links = list(topo.graph.edges)
    link_id = {link: i for i, link in enumerate(links)}
    lat = [_check_latency(link, topo.link_latency(link)) for link in links]
    bw = [_check_bandwidth(link, topo.link_bandwidth(link)) for link in links]
    direct = not needs_router(schedule)
    in_order = params.link_order == "schedule" or params.link_order == "hardware" and direct
    # Only first hops keep schedule order (the NIs' send engines); later hops go as they come.
    injection = not in_order and params.link_order in ("injection", "hardware")
    receive_order = params.receive_order or _hardware_receive_order(params, staged, direct)
    sizes = np.diff(schedule.bounds) * params.element_bytes     # bytes per chunk
    if (one_hop and in_order and not staged and params.reduction is None
            and not params.node_lockstep):
        result = _simulate_one_hop(schedule, params, link_id, lat, bw, sizes)
        if result is not None and (not receive_order
                                   or _receive_order_idle(schedule, params, result.finish,
                                                          link_id, bw, sizes)):
            return result
    route_ids = {}      # id(route) -> tuple of link ids (routes are often shared tuples)
    num_steps = len(schedule.steps)
    num_chunks = schedule.num_chunks
    hop_link = []       # link id of every hop of every transfer, in order
    route_len, chunk_of, step_len = [], [], []
    # Gates: gate g opens when its inputs (count) have finished; time = max of their finishes.
    gate_count, gate_time, gate_waiters, gate_next = [], [], [], []
    feeds = []          # transfer -> gate its finish counts toward (-1: none)
    last_gate = {}      # (node, chunk) key -> latest gate
    pending = {}        # (node, chunk) key -> transfers into it since its latest gate
    waits = []          # transfer -> gates it waits for (the data gate, the lockstep gate)
    lockstep = params.node_lockstep
    node_prev = {}      # node -> its transfers of the last step in which it sent
    node_feeds = []     # transfer -> lockstep gate its hand-over counts toward (-1: none)
    dst_of, reduce_of = [], []
    idx = 0
    for step in schedule.steps:
        base = idx
        step_len.append(len(step))
        for t in step:
            route = t.route
            ids = route_ids.get(id(route))
            if ids is None:
                try:
                    ids = tuple([link_id[link] for link in route])
                except KeyError as exc:
                    raise ConfigError(f"transfer {t} crosses link {exc.args[0]} that is not in "
                                      f"{topo.spec}") from None
                if not ids:
                    raise ConfigError(f"transfer {t} has an empty route")
                route_ids[id(route)] = ids
            hop_link.extend(ids)
            route_len.append(len(ids))
            c = t.chunk
            chunk_of.append(c)
            dst_of.append(t.dst)
            reduce_of.append(t.op is Op.REDUCE)
            feeds.append(-1)
            node_feeds.append(-1)
            waits.append(0)
            key = t.src * num_chunks + c
            pend = pending.get(key)
            if pend:
                g = len(gate_count)
                prev = last_gate.get(key, -1)
                gate_count.append(len(pend) + (prev >= 0))
                gate_time.append(0)
                gate_waiters.append([])
                gate_next.append(-1)
                if prev >= 0:
                    gate_next[prev] = g
                for j in pend:
                    feeds[j] = g
                pending[key] = []
                last_gate[key] = g
            else:
                g = last_gate.get(key, -1)
            if g >= 0:
                gate_waiters[g].append(idx)
                waits[idx] += 1
            idx += 1
        if lockstep:
            sends = {}
            for k, t in enumerate(step):
                sends.setdefault(t.src, []).append(base + k)
            for u, mine in sends.items():
                prev = node_prev.get(u)
                node_prev[u] = mine
                if not prev:
                    continue
                g = len(gate_count)
                gate_count.append(len(prev))
                gate_time.append(0)
                gate_waiters.append(mine)
                gate_next.append(-1)
                for j in prev:
                    node_feeds[j] = g
                for j in mine:
                    waits[j] += 1
        for k, t in enumerate(step):
            pending.setdefault(t.dst * num_chunks + t.chunk, []).append(base + k)

    # Per-hop holds: one exact ceiling per (chunk flit count, link bandwidth) pair.
    lens = np.array(route_len, dtype=np.int64)
    last_arr = np.cumsum(lens) - 1
    first_hop = (last_arr - lens + 1).tolist()
    last_hop = last_arr.tolist()
    table, flit_vals, flit_class, bw_class = _hold_table(sizes, params, bw)
    hop_chunk = np.repeat(np.array(chunk_of, dtype=np.int64), lens)
    hop_hold = table[flit_class[hop_chunk], bw_class[np.array(hop_link, dtype=np.int64)]].tolist()

    total = idx
    finish = [0] * total
    start = [0] * total
    cur_hop = first_hop[:]
    prev_tail = [0] * total     # tail arrival at the current hop from the previous one
    free = [0] * len(links)
    T = max(total, 1)
    send_delay, retire_delay = params.send_delay, params.retire_delay
    router_delay = params.router_delay
    gap = params.message_gap
    heap = [send_delay * T + i for i in range(total) if not waits[i]]     # already sorted
    wait_time = [0] * total
    heappush, heappop = heapq.heappush, heapq.heappop
    hop_rank = None
    if in_order or injection:
        # rank of every ordered hop among its link's ordered hops in schedule order (-1: a hop
        # that goes as it comes); next rank each link serves; hops that asked out of turn,
        # parked until their turn: link -> {rank: transfer}
        link_hops = [0] * len(links)
        hop_rank = [-1] * len(hop_link)
        for h in (first_hop if injection else range(len(hop_link))):
            lid = hop_link[h]
            hop_rank[h] = link_hops[lid]
            link_hops[lid] += 1
        next_rank = [0] * len(links)
        parked = [dict() for _ in links]
    # Staged transfers: per destination node, its adds in schedule order (the loopback port).
    is_staged = bytearray(total)
    loop_order, loop_pos, loop_free, arrived = {}, {}, {}, {}
    for i in sorted(staged):
        if not 0 <= i < total:
            raise ConfigError(f"staged transfer {i} is not a transfer of the schedule "
                              f"(0..{total - 1})")
        is_staged[i] = 1
        loop_order.setdefault(dst_of[i], []).append(i)
    msg_flits = flit_vals[flit_class].tolist()     # per chunk: flits with the header
    loop_latency = params.loopback_latency
    # The reduction unit (TimingParams.reduction): a reducing transfer's arrival is a second
    # heap event (``arriving``), so the unit takes arrivals in time order.
    unit = params.reduction
    if unit is not None:
        add_cycles = unit.add_cycles(sizes).tolist()
        arriving = bytearray(total)
        unit_free = {}
    if lockstep:
        chunk_bytes = sizes.tolist()
        buffered = params.send_buffer_bytes

    if receive_order and (staged or not in_order):
        raise ConfigError("timing: receive_order needs one-hop links in schedule order and no "
                          "staged transfers (it models an NI joined by links)")
    if receive_order:
        # The receiving NI's order (TimingParams.receive_order): a transfer's finish is settled
        # once those of the transfer before it on its last link and of the contribution before
        # it into the same chunk are (both earlier in schedule order).
        link_prev, sum_prev, settles = [-1] * total, [-1] * total, [[] for _ in range(total)]
        last_on, last_into = {}, {}
        for i in range(total):
            lid = hop_link[last_hop[i]]
            link_prev[i] = last_on.get(lid, -1)
            last_on[lid] = i
            if reduce_of[i]:
                key = dst_of[i] * num_chunks + chunk_of[i]
                sum_prev[i] = last_into.get(key, -1)
                last_into[key] = i
            for j in (link_prev[i], sum_prev[i]):
                if j >= 0:
                    settles[j].append(i)
        raw_fin = [-1] * total
        settled = bytearray(total)
        # Cycles a transfer's payload (no head flits) takes on its last link: what the receive
        # engine writes after the message before it.
        ptable, _, pclass, pbw = _hold_table(sizes, replace(params, header_flits=0), bw)
        payload = ptable[pclass[np.array(chunk_of, dtype=np.int64)],
                         pbw[np.array(hop_link, dtype=np.int64)[last_arr]]].tolist()

    def settle(i):
        """Settle the finish of ``i`` and of the transfers that waited for it, where known."""
        todo = [i]
        while todo:
            j = todo.pop()
            a, b = link_prev[j], sum_prev[j]
            if (settled[j] or raw_fin[j] < 0 or (a >= 0 and not settled[a])
                    or (b >= 0 and not settled[b])):
                continue
            f = raw_fin[j]
            if a >= 0 and finish[a] + payload[j] > f:
                f = finish[a] + payload[j]
            if b >= 0 and finish[b] > f:
                f = finish[b]
            finish[j] = f
            settled[j] = 1
            if feeds[j] >= 0:
                open_gates(feeds[j], f)
            todo.extend(settles[j])

    def open_gates(g, tm):
        """Count one finished input (at ``tm``) toward gate ``g``; open the gates it completes."""
        while g >= 0:
            if gate_time[g] < tm:
                gate_time[g] = tm
            gate_count[g] -= 1
            if gate_count[g]:
                return
            tm = gate_time[g]
            for w in gate_waiters[g]:
                if wait_time[w] < tm:
                    wait_time[w] = tm
                waits[w] -= 1
                if not waits[w]:
                    heappush(heap, (wait_time[w] + send_delay) * T + w)
            g = gate_next[g]

    done = 0
    while heap:
        key = heappop(heap)
        now, i = divmod(key, T)
        if unit is not None and arriving[i]:
            u = dst_of[i]
            st = max(now + unit.start_delay, unit_free.get(u, 0))
            unit_free[u] = st + add_cycles[chunk_of[i]]
            finish[i] = unit_free[u] + unit.finish_delay
            if feeds[i] >= 0:
                open_gates(feeds[i], finish[i])
            continue
        h = cur_hop[i]
        lid = hop_link[h]
        if hop_rank is not None and hop_rank[h] >= 0:
            if hop_rank[h] != next_rank[lid]:
                parked[lid][hop_rank[h]] = i
                continue
            next_rank[lid] += 1
            j = parked[lid].pop(next_rank[lid], None)
            if j is not None:
                heappush(heap, now * T + j)
        f = free[lid]
        st = now if now >= f else f
        tail = st + hop_hold[h]
        pt = prev_tail[i]
        if pt > tail:
            tail = pt
        free[lid] = tail + gap
        la = lat[lid]
        if h == first_hop[i]:
            start[i] = st
            if node_feeds[i] >= 0:
                b = chunk_bytes[chunk_of[i]]
                open_gates(node_feeds[i],
                           st + (-(-hop_hold[h] * (b - buffered) // b) if b > buffered else 0))
        if h != last_hop[i]:
            cur_hop[i] = h + 1
            prev_tail[i] = tail + la
            heappush(heap, (st + la + router_delay) * T + i)
            continue
        fin = tail + la + retire_delay
        finish[i] = fin
        done += 1
        if unit is not None and reduce_of[i]:
            arriving[i] = 1
            heappush(heap, fin * T + i)
            continue
        if is_staged[i]:
            u = dst_of[i]
            arrived[i] = fin
            order, pos = loop_order[u], loop_pos.get(u, 0)
            while pos < len(order) and order[pos] in arrived:
                k = order[pos]
                st = max(arrived.pop(k) + send_delay, loop_free.get(u, 0))
                loop_free[u] = st + msg_flits[chunk_of[k]]
                finish[k] = loop_free[u] + loop_latency + retire_delay
                if feeds[k] >= 0:
                    open_gates(feeds[k], finish[k])
                pos += 1
            loop_pos[u] = pos
            continue
        if receive_order:
            raw_fin[i] = fin
            settle(i)
            continue
        if feeds[i] >= 0:
            open_gates(feeds[i], fin)
    if done != total:
        # Inputs always come from earlier steps, so only in-order links can leave some waiting.
        raise ConfigError(f"timing: {total - done} transfers never started: with links in "
                          f"schedule order the schedule's multi-hop transfers wait on each other "
                          f"in a cycle (use link order fcfs)")

    finish_arr = np.asarray(finish, dtype=np.int64)
    step_max = np.zeros(num_steps, dtype=np.int64)
    np.maximum.at(step_max, np.repeat(np.arange(num_steps), step_len), finish_arr)
    step_finish = step_max.tolist()
    return TimingResult(cycles=int(finish_arr.max()) + params.drain_cycles if total else 0,
                        finish=finish_arr,
                        start=np.asarray(start, dtype=np.int64), step_finish=step_finish,
                        frequency_ghz=params.frequency_ghz, num_nodes=topo.num_nodes)


def _hold_table(sizes, params, bw):
    """(``table``, ``flit_vals``, ``flit_class``, ``bw_class``) for chunks of ``sizes`` bytes:
    the exact hold of every (message size, link bandwidth) class, ``table[flit_class[chunk],
    bw_class[link]]``, one ceiling per class (``flit_vals``: each class's flits)."""
    packets = -(-sizes // params.packet_bytes) if params.packet_bytes else 1
    flit_vals, flit_class = np.unique(-(-sizes // params.flit_bytes)
                                      + params.header_flits * np.maximum(packets, 1),
                                      return_inverse=True)
    bw_vals, bw_class = np.unique(np.array(bw, dtype=float), return_inverse=True)
    freq, fb = _exact(params.frequency_ghz), params.flit_bytes
    table = np.array([[math.ceil(int(f) * fb * freq / _exact(w)) for w in bw_vals]
                      for f in flit_vals], dtype=np.int64).reshape(len(flit_vals), len(bw_vals))
    return table, flit_vals, flit_class, bw_class


def _receive_order_idle(schedule, params, finish, link_id, bw, sizes):
    """Whether ``finish`` (a one-hop schedule's finishes without the receive order) already
    meets both of its rules (``TimingParams.receive_order``): every transfer finishes at least
    its payload's cycles after the one before it on its link, and no REDUCE before the one
    before it into the same chunk. Then the rules change nothing: by induction in schedule
    order every transfer's inputs, link and so finish are the same with them, so ``finish``
    is the answer with the receive order too, found without the event simulation."""
    if not len(finish):
        return True
    transfers = [t for step in schedule.steps for t in step]
    link = np.array([link_id[t.route[0]] for t in transfers], dtype=np.int64)
    chunk = np.array([t.chunk for t in transfers], dtype=np.int64)
    table, _, pclass, pbw = _hold_table(sizes, replace(params, header_flits=0), bw)
    payload = table[pclass[chunk], pbw[link]]
    order = np.argsort(link, kind="stable")
    lk, fin, pay = link[order], finish[order], payload[order]
    same = lk[1:] == lk[:-1]
    if np.any(same & (fin[1:] < fin[:-1] + pay[1:])):
        return False
    reduce = np.array([t.op is Op.REDUCE for t in transfers], dtype=bool)
    key = (np.array([t.dst for t in transfers], dtype=np.int64) * schedule.num_chunks
           + chunk)[reduce]
    order = np.argsort(key, kind="stable")
    k, fin = key[order], finish[reduce][order]
    return not np.any((k[1:] == k[:-1]) & (fin[1:] < fin[:-1]))


def _simulate_one_hop(schedule, params, link_id, lat, bw, sizes):
    """``simulate`` for a schedule whose every transfer crosses one link, its links serving in
    schedule order (what ``"hardware"`` means there, and ``"schedule"``); None for any other
    schedule, which the event simulation times.

    The same model in closed form, one step at a time with numpy: a transfer is ready
    ``send_delay`` after the last of its inputs from earlier steps (``have``, per node and
    chunk), and takes its link after the link's earlier transfers, ``start = max(ready, free)``;
    so along one link's transfers of a step (``a_i = hold_i + message_gap``, ``P_j`` the sum of
    ``a_i`` before ``j``) ``start_j = P_j + max(free, max_{i <= j} (ready_i - P_i))``, a prefix
    maximum per link. Equal to the event simulation cycle for cycle (tested against it on random
    schedules and every algorithm).
    """
    steps = schedule.steps
    route_of = [t.route for step in steps for t in step]
    if any(len(r) != 1 for r in route_of):
        return None
    try:
        link = np.array([link_id[r[0]] for r in route_of], dtype=np.int64)
    except KeyError as exc:
        bad = next(t for step in steps for t in step if t.route[0] == exc.args[0])
        raise ConfigError(f"transfer {bad} crosses link {exc.args[0]} that is not in "
                          f"{schedule.topology.spec}") from None
    step_len = [len(step) for step in steps]
    src = np.array([t.src for step in steps for t in step], dtype=np.int64)
    dst = np.array([t.dst for step in steps for t in step], dtype=np.int64)
    chunk = np.array([t.chunk for step in steps for t in step], dtype=np.int64)
    total = len(link)
    num_chunks = schedule.num_chunks
    table, _, flit_class, bw_class = _hold_table(sizes, params, bw)
    hold = table[flit_class[chunk], bw_class[link]] if total else np.zeros(0, np.int64)
    lat_arr = np.array(lat, dtype=np.int64)
    gap = params.message_gap
    have = np.zeros(schedule.topology.num_nodes * num_chunks, dtype=np.int64)
    free = np.zeros(len(lat), dtype=np.int64)
    start = np.zeros(total, dtype=np.int64)
    finish = np.zeros(total, dtype=np.int64)
    step_finish = []
    lo = 0
    for n_step in step_len:
        hi = lo + n_step
        if n_step == 0:
            step_finish.append(0)
            continue
        ready = have[src[lo:hi] * num_chunks + chunk[lo:hi]] + params.send_delay
        order = np.argsort(link[lo:hi], kind="stable")
        lk, rd, hd = link[lo:hi][order], ready[order], hold[lo:hi][order]
        first = np.ones(n_step, dtype=bool)
        first[1:] = lk[1:] != lk[:-1]
        seg = np.cumsum(first) - 1
        a = hd + gap
        csum = np.cumsum(a) - a                      # exclusive prefix sum over the step
        p = csum - csum[first][seg]                  # ... within each link's run
        v = rd - p
        v[first] = np.maximum(rd[first], free[lk[first]])
        big = int(v.max() - v.min()) + 1
        st = p + np.maximum.accumulate(v + seg * big) - seg * big
        tail = st + hd
        last = np.ones(n_step, dtype=bool)
        last[:-1] = first[1:]
        free[lk[last]] = tail[last] + gap
        fin = tail + lat_arr[lk] + params.retire_delay
        idx = lo + order
        start[idx] = st
        finish[idx] = fin
        step_finish.append(int(fin.max()))
        np.maximum.at(have, dst[lo:hi] * num_chunks + chunk[lo:hi], finish[lo:hi])
        lo = hi
    return TimingResult(cycles=int(finish.max()) + params.drain_cycles if total else 0,
                        finish=finish, start=start,
                        step_finish=step_finish, frequency_ghz=params.frequency_ghz,
                        num_nodes=schedule.topology.num_nodes)


# ---------------------------------------------------------------------------------------------
# Lower bounds


def _cut_bandwidths(topo, cuts):
    """(name, min over the two directions of the bandwidth across the cut) for each cut."""
    if not cuts:
        return []
    n = topo.num_nodes
    if not topo.switches:
        edges = list(topo.graph.edges(data="bandwidth"))
        u = np.array([e[0] for e in edges])
        v = np.array([e[1] for e in edges])
        w = np.array([e[2] for e in edges], dtype=float)
        out = []
        for name, a in cuts:
            in_a = np.zeros(n, dtype=bool)
            in_a[a] = True
            ab = w[in_a[u] & ~in_a[v]].sum()
            ba = w[~in_a[u] & in_a[v]].sum()
            out.append((name, min(ab, ba)))
        return out
    g = nx.DiGraph()
    for x, y, bwv in topo.graph.edges(data="bandwidth"):
        g.add_edge(x, y, capacity=bwv)
    out = []
    src, dst = ("_cut_src",), ("_cut_dst",)
    for name, a in cuts:
        a_set = set(a)
        b = [x for x in topo.nodes if x not in a_set]
        flows = []
        for side_a, side_b in ((a, b), (b, a)):
            h = g.copy()
            h.add_edges_from((src, x) for x in side_a)   # no capacity attribute: infinite
            h.add_edges_from((x, dst) for x in side_b)
            flows.append(nx.maximum_flow_value(h, src, dst))
        out.append((name, min(flows)))
    return out


def _latency_diameter(topo):
    """Largest shortest-path latency between two endpoints (cycles)."""
    g = topo.graph
    lats = [_check_latency((x, y), lt) for x, y, lt in g.edges(data="latency")]
    ends = list(topo.nodes)
    if topo.node0_is_peripheral and all(lt == lats[0] for lt in lats):
        # The family says endpoint 0's eccentricity is the diameter when all latencies are
        # equal (``golden_model.families``): one Dijkstra suffices.
        dist = nx.single_source_dijkstra_path_length(g, 0, weight="latency")
        return float(max(dist.get(v, math.inf) for v in ends))
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import dijkstra

    index = {x: i for i, x in enumerate(g.nodes)}
    rows = [index[x] for x, _ in g.edges]
    cols = [index[y] for _, y in g.edges]
    # Sparse graphs drop zero weights: give zero-latency links a tiny weight, rounded off below.
    weights = np.where(np.array(lats) > 0, np.array(lats, dtype=float), 1e-9)
    mat = csr_array((weights, (rows, cols)), shape=(len(index), len(index)))
    sources = [index[v] for v in ends]
    best = 0.0
    for i in range(0, len(sources), 256):
        dist = dijkstra(mat, directed=True, indices=sources[i:i + 256])
        best = max(best, float(dist[:, sources].max()))
    return float(round(best, 6))


def _edges(g):
    """(u, v, bandwidth, latency) of every directed link, checked."""
    return [(x, y, _check_bandwidth((x, y), bwv), _check_latency((x, y), lat))
            for x, y, bwv, lat in ((x, y, a.get("bandwidth"), a.get("latency"))
                                   for x, y, a in g.edges(data=True))]


def lower_bound(topology, size_bytes, params=TimingParams()):
    """Lower bounds on the time of any all-reduce of ``size_bytes`` per node on ``topology``.

    See the module docstring for the three bounds and their sources.

    Parameters
    ----------
    topology : Topology
    size_bytes : int
        Vector size per node in bytes (D).
    params : TimingParams
        Only ``frequency_ghz`` is used (bounds are not rounded to flits).

    Returns
    -------
    LowerBound

    Raises
    ------
    ConfigError
        If ``size_bytes`` is not a positive integer, or a link has a non-positive bandwidth or a
        bad latency.
    """
    if (isinstance(size_bytes, bool) or not isinstance(size_bytes, numbers.Integral)
            or size_bytes <= 0):
        raise ConfigError(f"size must be a positive whole number of bytes, not {size_bytes!r}")
    n = topology.num_nodes
    freq = params.frequency_ghz
    if n <= 1:
        return LowerBound(0.0, 0.0, 0.0, 0.0, "none", frequency_ghz=freq, num_nodes=n)
    g = topology.graph
    edges = _edges(g)
    d = float(size_bytes)
    ends = set(topology.nodes)
    out_links = [(bwv, lat) for x, _, bwv, lat in edges if x in ends]
    in_links = [(bwv, lat) for _, y, bwv, lat in edges if y in ends]
    injection, with_latency = 0.0, 0.0
    for links in (out_links, in_links):
        total = sum(bwv for bwv, _ in links)
        inj = 2 * (n - 1) * d * freq / total
        mean_lat = sum(bwv * lat for bwv, lat in links) / total
        injection = max(injection, inj)
        with_latency = max(with_latency, inj + mean_lat)
    # Each node's own links: out and in bandwidth; the scarcer direction of the poorest node.
    node_bw = {v: min(sum(bw for _, _, bw in g.out_edges(v, data="bandwidth")),
                      sum(bw for _, _, bw in g.in_edges(v, data="bandwidth")))
               for v in topology.nodes}
    poorest = min(topology.nodes, key=lambda v: (node_bw[v], v))
    all_gather, reduce_scatter = cut_bound(topology)
    rsag = d / n * float(all_gather.ratio + reduce_scatter.ratio) * freq
    cut_name, cut = f"node {poorest}", d * freq / node_bw[poorest]
    for name, bwv in _cut_bandwidths(topology, topology.natural_cuts()):
        c = d * freq / bwv if bwv > 0 else math.inf
        if c > cut:
            cut_name, cut = name, c
    latency = _latency_diameter(topology)
    min_latency = min(lat for _, _, _, lat in edges)
    bounds = {"injection": injection, "cut": cut, "latency": latency}
    binding = max(bounds, key=lambda k: bounds[k])      # first of equal maxima
    tight = max(with_latency, cut + min_latency, latency)
    return LowerBound(cycles=bounds[binding], injection_cycles=injection, cut_cycles=cut,
                      latency_cycles=latency, binding=binding, cut=cut_name, rsag_cycles=rsag,
                      tight_cycles=tight,
                      frequency_ghz=freq, num_nodes=n)
