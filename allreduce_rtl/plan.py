"""The hardware plan: one step from (topology, algorithms, element counts, element type, hardware
options) to everything the hardware commands need, decided once and read everywhere.

``plan_hardware`` builds every schedule, decides whether the NIs sit on routers (``router``
forces them; a schedule that crosses several links or a switched topology needs them), lowers
the schedules for that network, sizes one ``NIConfig`` that runs all of them
(``hdl.config.network_config_for``, which checks the hardware's limits), configures the timing
model like the hardware and computes each run's expected cycles and lower bound. ``generate``,
``demo`` and the hardware tests read the plan; nothing downstream re-derives what it decided.

The timing model like the hardware (``hardware_timing``; docs/hardware.md, "Pipeline timing"):
link latency = ``config.link_latency`` cycles, one flit per cycle per link (bandwidth
= flit bytes per cycle at 1 GHz), flits of ``config.flit_width`` bits, one head flit per
message, the NI's send and retire delays (the retire delay plus the element type's adder
latency, ``hdl.adders``: a received tail is written that many cycles later), links serving their transfers in schedule order (the
send engines walk their tables in order), and on NIs joined by links the order in which a receive
engine writes (``TimingParams.receive_order``: one message after another per port, a chunk's
contributions in the summation order). On the routed network links are first come, first
served, a head spends the router's pipeline in every transit router, and the send delay adds
the router ports and end routers (``routed_timing``). With these the model equals the RTL
exactly when no send waits for a credit.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np

from golden_model.algorithms import build_schedule
from golden_model.elements import element_type
from golden_model.errors import ConfigError
from golden_model.lowering import lower, needs_router
from golden_model.timing import TimingParams, lower_bound, simulate
from golden_model.timetable import BankSlots

__all__ = ["FLIT_BITS", "PlannedRun", "HardwarePlan", "plan_hardware", "hardware_topology",
           "hardware_timing", "choice_timing", "routed_timing", "links_text", "rates_text",
           "link_rate", "with_uniform_links", "model_cycles", "model_timing", "as_built",
           "release_cycles", "NI_SEND_DELAY",
           "NI_RETIRE_DELAY", "ROUTED_PORT_DELAY", "DEFAULT_DTYPE", "ROUTED_DEFAULT_DTYPE"]

#: The element type the hardware adds unless told otherwise, and on routers (whose NIs take
#: messages in any order, so floats need staged reductions there, ``golden_model.lowering``:
#: their slots multiply the buffer, by N / 2 on MultiTree's star trees).
DEFAULT_DTYPE = "float32"
ROUTED_DEFAULT_DTYPE = "int32"
#: Flit width of the hardware (bits): the MultiTree paper's 128-bit flits.
FLIT_BITS = 128
#: The NI's pipeline (docs/hardware.md, "Pipeline timing"): a send's head reaches the link 2
#: cycles after its inputs are ready, and a received tail counts 1 cycle after it arrives.
NI_SEND_DELAY = 2
NI_RETIRE_DELAY = 1
#: The NI's turnaround per message on a link, as measured (``TimingParams.message_gap``): RTL
#: minus model cycles over the messages a link carries, 11 to 17 cycles on torus:4x4 and 8.5 on
#: mesh:2x3 with 4-cycle links (multitree and pipelined multitree-opt, Verilator; README,
#: "Schedules at the bandwidth optimum"). The plan's schedule choice counts it
#: (``choice_timing``); the expected cycles leave it out (``hardware_timing``), so they stay a
#: lower bound of the RTL's.
NI_MESSAGE_GAP = 12
#: The routed network (hdl.routed_network, docs/hardware.md "Routed network"): the router
#: network's own numbers (``hdl.router.network.model_timing``: a router per transit node, the
#: injection and ejection registers, the end routers of a mesh or torus), plus the NI's send
#: delay, the ``RouterPort`` FIFO (1 cycle) and 1 cycle because with the NI the model's tail
#: arrival is the cycle after the tail reaches ``rx`` (the convention of NI_RETIRE_DELAY),
#: while ``model_timing`` ends with the tail on the router's ``eject``.
ROUTED_PORT_DELAY = 1


def link_rate(port_bandwidth, fastest):
    """The rate step (``hdl.rate``: flits per ``RATE_STEPS`` cycles) of a port of
    ``port_bandwidth`` GB/s when the fastest port of the network, ``fastest`` GB/s, carries a
    flit per cycle: ``round(RATE_STEPS * port_bandwidth / fastest)``, at least 1."""
    from hdl.rate import RATE_STEPS  # noqa: PLC0415
    return max(1, min(RATE_STEPS, round(RATE_STEPS * port_bandwidth / fastest)))


def _port_bandwidth(attrs):
    return attrs.get("port_bandwidth", attrs["bandwidth"] / attrs.get("count", 1))


def hardware_topology(topology, config, per_link=False):
    """``topology`` with every link as the hardware builds it (``hdl.link.built_links`` reads
    ``latency`` and ``rate``; the timing model reads ``latency`` and ``bandwidth``).

    The fastest port carries one flit per cycle (``flit_width / 8`` GB/s at 1 GHz; parallel
    links as that many ports, ``count`` times that). With ``per_link`` (``plan_hardware``) each
    link keeps its latency (at most ``config.link_latency``) and a slower port gets the rate
    ``link_rate`` (``hdl.rate``): its bandwidth is the fastest port's times ``rate /
    RATE_STEPS``, and ``rate_error`` says how far that is from the topology's ratio (built over
    asked, minus 1). Without, every link has ``config.link_latency`` cycles and full rate."""
    from hdl.rate import RATE_STEPS  # noqa: PLC0415
    graph = topology.graph.copy()
    port = float(config.flit_width // 8)
    fastest = max((_port_bandwidth(a) for _, _, a in graph.edges(data=True)), default=port)
    for _, _, attrs in graph.edges(data=True):
        asked = _port_bandwidth(attrs) / fastest
        rate = link_rate(_port_bandwidth(attrs), fastest) if per_link else RATE_STEPS
        built = port * rate / RATE_STEPS
        attrs.update(bandwidth=built * attrs.get("count", 1), port_bandwidth=built, rate=rate,
                     rate_error=rate / RATE_STEPS / asked - 1 if per_link else 0.0)
        if not per_link:
            attrs["latency"] = int(config.link_latency)
    return dataclasses.replace(topology, graph=graph, _routes={})


def with_uniform_links(topology, latency=None, bandwidth=None):
    """A copy of ``topology`` with every link's ``latency`` (cycles) and/or ``bandwidth`` (GB/s
    per port; ``count`` times that per link) replaced where given."""
    graph = topology.graph.copy()
    for _, _, attrs in graph.edges(data=True):
        if latency is not None:
            attrs["latency"] = int(latency)
        if bandwidth is not None:
            attrs.update(bandwidth=float(bandwidth) * attrs.get("count", 1),
                         port_bandwidth=float(bandwidth))
    return dataclasses.replace(topology, graph=graph, _routes={})


def links_text(latency_range) -> str:
    """``"150-cycle links"``, or ``"links of 100 to 150 cycles"`` (``link_latency_range``)."""
    lo, hi = latency_range
    return f"{hi}-cycle links" if lo == hi else f"links of {lo} to {hi} cycles"


def rates_text(rates) -> str:
    """One line on the rate-limited links (``HardwarePlan.link_rates``)."""
    worst = max(rates, key=lambda r: abs(r["error"]))
    steps = sorted({r["rate"] for r in rates})
    return (f"rate-limited links: {len(rates)} at {', '.join(f'{p}/16' for p in steps)} of a "
            f"flit per cycle (the bandwidths rounded to 1/16: largest error "
            f"{worst['error']:+.1%}, {worst['from']}->{worst['to']})")


def routed_timing(topology) -> dict:
    """``TimingParams`` fields of the routed network on ``topology`` (``router_delay`` and
    ``send_delay``; the NIs inject by the timetable the plan writes into their tables,
    ``golden_model.timetable``)."""
    from hdl.router.network import PACKET_GAP, model_timing  # noqa: PLC0415
    fields = model_timing(topology)
    return {"router_delay": fields["router_delay"], "link_order": "timetable",
            "send_delay": NI_SEND_DELAY + ROUTED_PORT_DELAY + 1 + fields["send_delay"],
            "message_gap": PACKET_GAP}


def hardware_timing(config, topology=None, **overrides) -> TimingParams:
    """``TimingParams`` like the hardware of ``config`` (module docstring); ``topology`` is
    needed for the routed network (``config.routed``).

    Raises
    ------
    ValueError
        If ``config.routed`` and no ``topology`` is given.
    """
    from hdl.adders import hardware_adder  # noqa: PLC0415
    want = {"frequency_ghz": 1.0, "flit_bytes": config.flit_width // 8,
            "element_bytes": config.element_type.bytes, "header_flits": 1,
            "send_delay": NI_SEND_DELAY,
            "retire_delay": NI_RETIRE_DELAY + hardware_adder(config.element_type).latency,
            "link_order": "schedule", "receive_order": not config.routed}
    if config.routed:
        if topology is None:
            raise ValueError("the routed network's timing depends on the topology: pass it")
        want.update(routed_timing(topology))
    if config.loopback:
        from hdl.routed_network import LOOPBACK_LATENCY  # noqa: PLC0415
        want["loopback_latency"] = LOOPBACK_LATENCY
    want.update(overrides)
    return TimingParams(**want)


def choice_timing(element_bytes) -> TimingParams:
    """The timing an algorithm that times its candidates (``multitree-opt``) chooses with when
    the plan builds its schedules: the NI's per-message costs (a head flit, the send and retire
    delays, the turnaround ``NI_MESSAGE_GAP``) on 128-bit flits, on the topology's links,
    before the hardware is sized (the element type may still depend on whether the network
    needs routers)."""
    return TimingParams(flit_bytes=FLIT_BITS // 8, header_flits=1, send_delay=NI_SEND_DELAY,
                        retire_delay=NI_RETIRE_DELAY, element_bytes=element_bytes,
                        message_gap=NI_MESSAGE_GAP)


def as_built(schedule, config, topology):
    """``schedule`` as the hardware of ``config`` runs it on ``topology`` (its links as built,
    ``hardware_topology``): on a routed network every transfer takes the route the routers'
    tables give it, ``topology.route(src, dst)`` (``hdl.router.routing``: tables from the golden
    routes, dimension order on mesh and torus), which for a tree algorithm's reduce edge on a
    fat-tree or BiGraph is not always the reverse of its broadcast route that the schedule
    lists (``AllReduceSchedule.rerouted``). Only where the tables route by destination alone:
    mesh and torus, and switches whose endpoints have one link each (``switch_table`` checks
    that the tables follow the golden routes there); an endpoint with several links sends by the
    port of its route's first link to the terminal of its last (``hdl.router.routing``), so a
    machine's routes stay as listed."""
    from hdl.router.routing import terminals_per_endpoint  # noqa: PLC0415
    timed = dataclasses.replace(schedule, topology=topology)
    if not config.routed:
        return timed
    kind = topology.router_kind
    if kind == "grid" or (kind == "table" and terminals_per_endpoint(topology) == 1):
        return timed.rerouted(topology.route)
    return timed


def model_timing(schedule, config, **overrides):
    """``golden_model.timing.simulate`` of ``schedule`` on the hardware of ``config`` (its links,
    its routes and timing, its staged transfers and bank slots, ``as_built``; ``overrides``
    replace ``TimingParams`` fields): a ``TimingResult`` with every transfer's start and
    finish."""
    topo = hardware_topology(schedule.topology, config)
    timing = hardware_timing(config, topo, **overrides)
    lowered = lower(schedule, **_lowering_args(config)) if config.routed else None
    return _simulate(schedule, config, topo, timing, lowered)


def _simulate(schedule, config, topo, timing, lowered):
    """``simulate`` of ``schedule`` as built on ``topo``, with ``lowered``'s staged transfers and
    (timetable) its bank slots."""
    if lowered is None:
        return simulate(as_built(schedule, config, topo), timing)
    banks = bank_slots(lowered, config, timing) if timing.link_order == "timetable" else None
    return simulate(as_built(schedule, config, topo), timing, lowered.staged, banks)


def bank_slots(lowered, config, timing) -> BankSlots:
    """The bank rotation of the routed NIs of ``config`` for the timetable's second pass
    (``golden_model.timetable.BankSlots``): K = ``config.buffer_banks`` and, per transfer of
    ``lowered`` timed with ``timing`` (its ``TimingParams``), the residues modulo K of the
    cycles its start, finish, loopback start and loopback finish can take (model cycles are the
    NIs' ``cycles``). From ``hdl.banked_buffer``: read client c owns bank ``(c % K + x - 1) % K``
    in NI cycle x. A head issues in cycle x only if its first payload flit's bank is client
    p's (send engine p's) in x + 1 (``hdl.send_engine``), and the message starts on its link
    ``send_delay - 1`` cycles later (``release_cycles``; ``NI_SEND_DELAY - 1`` on the loopback
    port, which has no router); a lane (client ``lane_read_client + q`` for receive port q)
    pops payload flit f only in its bank's slot (``hdl.receive_engine``) and the transfer
    finishes ``retire_delay`` after its tail's pop (docs/hardware.md, "Pipeline timing"). The
    addresses, ports and flits are the lowering's (``LoweredSchedule.extents`` and ``ports``);
    a receive port takes its next head when the last write of the one before retired,
    ``hdl.reduction.write_delay`` after its pop."""
    from hdl.adders import hardware_adder  # noqa: PLC0415
    from hdl.banked_buffer import lane_read_client  # noqa: PLC0415
    from hdl.reduction import write_delay  # noqa: PLC0415
    k = config.buffer_banks
    lane = lane_read_client(config.num_ports, config.buffer_copies)
    loop = config.num_ports - 1
    sd, rd = timing.send_delay, timing.retire_delay
    res = [((a_src - p + sd - 1) % k, (a_dst + flits - lane - q + rd) % k,
            (a_dst - loop + NI_SEND_DELAY - 1) % k, (a_src + flits - lane - loop + rd) % k)
           for (p, q), (a_src, a_dst, flits) in zip(lowered.ports, lowered.extents)]
    return BankSlots(k, res, [q for _, q in lowered.ports],
                     write_delay(hardware_adder(config.element_type)))


def model_cycles(schedule, config, **overrides) -> int:
    """Cycles ``golden_model.timing.simulate`` predicts for ``schedule`` on the hardware of
    ``config`` (``overrides`` replace ``TimingParams`` fields; ``model_timing``)."""
    return model_timing(schedule, config, **overrides).cycles


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One all-reduce on a plan's hardware.

    Attributes
    ----------
    algorithm : str
    elements : int
        Elements per node.
    schedule : golden_model.schedule.AllReduceSchedule
    lowered : golden_model.lowering.LoweredSchedule
        Lowered for the plan's network (routed or not, elements per flit).
    expected_cycles : int
        The timing model's cycles on the hardware (``model_cycles``).
    lower_bound_cycles : float
        The lower bound of any all-reduce of this size on the hardware's links (cycles).
    """
    algorithm: str
    elements: int
    schedule: object
    lowered: object
    expected_cycles: int
    lower_bound_cycles: float

    @property
    def name(self) -> str:
        """The run's name in builds and reports (an imported file's path made a file name)."""
        return re.sub(r"[^\w.-]", "_", f"{self.algorithm}-{self.elements}")


@dataclasses.dataclass(frozen=True)
class HardwarePlan:
    """What ``plan_hardware`` decided.

    Attributes
    ----------
    topology : golden_model.topology.Topology
        As given (its link latency is the user's; the hardware's is ``config.link_latency``).
    element_type : golden_model.elements.ElementType
    config : hdl.config.NIConfig
        Runs every planned schedule.
    hardware_topology : golden_model.topology.Topology
        ``topology`` with the links as the hardware builds them (``hardware_topology``).
    timing : golden_model.timing.TimingParams
        The timing model configured like the hardware (``hardware_timing``).
    runs : tuple of PlannedRun
        Every (algorithm, elements), algorithms in the order given, sizes within each.
    router_reason : str or None
        Why the NIs sit on routers (``"--router"`` or the schedule that needs them), None when
        they are joined by links.
    """
    topology: object
    element_type: object
    config: object
    hardware_topology: object
    timing: TimingParams
    runs: tuple
    router_reason: str | None

    @property
    def routed(self) -> bool:
        """True when the NIs sit on routers."""
        return self.config.routed

    @property
    def link_latency_range(self) -> tuple[int, int]:
        """(shortest, longest) latency of a link as built, in cycles (``hardware_topology``)."""
        hw = self.hardware_topology
        lat = [hw.link_latency(link) for link in hw.links] or [self.config.link_latency]
        return min(lat), max(lat)

    @property
    def link_rates(self) -> list[dict]:
        """Every link slower than the fastest as built: ``{"from", "to"`` (the topology's own
        ids), ``"rate"`` (flits per ``hdl.rate.RATE_STEPS`` cycles), ``"bandwidth"`` (GB/s per
        port at 1 GHz), ``"error"`` (built over asked, minus 1)``}``; empty when every link runs
        at a flit per cycle."""
        from hdl.rate import RATE_STEPS  # noqa: PLC0415
        hw = self.hardware_topology
        return [{"from": hw.label(u), "to": hw.label(v), "rate": a["rate"],
                 "bandwidth": a["port_bandwidth"], "error": a["rate_error"]}
                for u, v, a in hw.graph.edges(data=True) if a["rate"] < RATE_STEPS]

    def run(self, algorithm, elements=None) -> PlannedRun:
        """The planned run of ``algorithm`` (with ``elements``, or its only size).

        Raises
        ------
        KeyError
            If no such run was planned.
        """
        found = [r for r in self.runs if r.algorithm == algorithm
                 and (elements is None or r.elements == elements)]
        if len(found) != 1:
            raise KeyError(f"no single planned run of {algorithm!r} with {elements!r} elements")
        return found[0]

    def plan_run(self, algorithm, elements) -> PlannedRun:
        """Plan one more run on this hardware (as built: the config does not grow).

        Raises
        ------
        ConfigError
            If the algorithm cannot run on the topology, or its schedule does not fit the
            hardware (``hdl.config.check_schedule_fits``).
        """
        from hdl.config import check_schedule_fits  # noqa: PLC0415
        run = _plan_run(self.topology, algorithm, elements, self.config, self.hardware_topology,
                        self.timing)
        try:
            check_schedule_fits(self.config, run.lowered)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return run

    def network(self):
        """The network top of this plan (``hdl.generate.build_network``)."""
        from hdl.generate import build_network  # noqa: PLC0415
        return build_network(self.hardware_topology, self.config)


def _lowering_args(config):
    from hdl.config import STAGE_BITS  # noqa: PLC0415
    from hdl.router.flit import MAX_PAYLOAD_FLITS  # noqa: PLC0415
    return {"elements_per_flit": config.elems_per_flit, "routed": config.routed,
            "max_message_flits": MAX_PAYLOAD_FLITS if config.routed else None,
            "stage_reductions": config.loopback,
            "max_staged": (1 << STAGE_BITS) - 1 if config.loopback else None}


def release_cycles(result, timing):
    """Per transfer, the NI cycle from which its head may issue (``TableRow.release``) for the
    timetable ``result`` (a ``TimingResult`` of link order ``"timetable"``, ``timing`` its
    ``TimingParams``): 0 (go when the inputs are in) for a transfer the timetable does not hold,
    else the cycle of its start: a head issued in NI cycle c (``cycles`` = c) takes its first
    link ``send_delay - 1`` cycles later, as a transfer with no inputs issues in cycle 1 and
    starts at ``send_delay`` (docs/hardware.md, "Pipeline timing"). Releasing only the held
    transfers keeps the others as early as the NI's bank rotation lets them go (a head waits up
    to K - 1 cycles for its bank slot, ``hdl.send_engine``), which a release of every transfer
    would add at every step. A transfer that waits for its port's previous message is held:
    the NI's send engine follows a tail with the next head after the bank-slot wait only (0 or
    1 cycle with one port), sooner than the ``message_gap`` the timetable keeps, and a message
    sent early meets the messages timed around it (MultiTree on bigraph:4x8 took 1,041 RTL
    cycles against 900 with only link-delayed transfers held, 902 with these too)."""
    release = (result.start - (timing.send_delay - 1)).clip(min=0)
    return np.where(result.held, release, 0).tolist()


def _plan_run(topology, algorithm, elements, config, hw_topology, timing, schedule=None,
              lowered=None) -> PlannedRun:
    schedule = schedule or build_schedule(algorithm, topology, elements,
                                          choice_timing(config.element_type.bytes))
    lowered = lowered or lower(schedule, **_lowering_args(config))
    result = _simulate(schedule, config, hw_topology, timing, lowered)
    expected = result.cycles
    if timing.link_order == "timetable":
        lowered = lower(schedule, **_lowering_args(config),
                        release=release_cycles(result, timing))
    lb = lower_bound(hw_topology, schedule.num_elements * config.element_type.bytes, timing)
    return PlannedRun(str(algorithm), elements, schedule, lowered, expected, lb.cycles)


def _check_routers_buildable(topology):
    """Refuse, before any hardware is built, a table-routed network whose routes the routers
    cannot carry without deadlock: ``hdl.router.routing.switch_tables`` (a router per switch)
    and ``node_tables`` (a router per vertex of a graph with links between endpoints) check the
    channel dependency graph and give hops into the destination's router a second
    virtual-channel class where one class leaves a cycle; a cycle that remains with two classes (or routes that are
    not destination-based), parallel links of an endpoint to a switch and parallel links of
    unequal count each way are refused here in one line."""
    kind = topology.router_kind
    if kind not in ("table", "node"):
        return                  # grid routers: dateline classes on the wrap links
    g = topology.graph
    for a, b, n in g.edges(data="count", default=1):
        if n == 1:
            continue
        u, v = topology.label(a), topology.label(b)
        if kind == "table" and "node" in (g.nodes[a]["kind"], g.nodes[b]["kind"]):
            raise ConfigError(f"cannot build routers for {topology.spec}: the link {u} -> {v} "
                              f"of an endpoint is {n} parallel links; an NI port per parallel "
                              f"link is not built yet (parallel links between switches are)")
        back = g.edges[b, a].get("count", 1)
        if n != back:
            raise ConfigError(f"cannot build routers for {topology.spec}: {u} -> {v} is {n} "
                              f"parallel links but {v} -> {u} is {back}; a router port joins "
                              f"one link each way")
    from hdl.router.routing import node_tables, switch_tables  # noqa: PLC0415
    try:
        if kind == "node":      # a local port per link of the widest endpoint (its NI's)
            node_tables(topology, max(topology.degree(v) for v in topology.nodes))
        else:
            switch_tables(topology)
    except ValueError as exc:
        raise ConfigError(f"cannot build routers for {topology.spec}: {exc}") from None


def _check_direct_links(built):
    """Raise ``ConfigError`` naming a link of ``built`` (a topology with its links' latencies)
    shorter than a link between NIs can be (``hdl.network.Network``: the receiving NI's input
    register is the last cycle of every link)."""
    from hdl.network import Network  # noqa: PLC0415
    lowest = Network.NI_INPUT_CYCLES
    for u, v in built.links:
        if built.link_latency((u, v)) < lowest:
            raise ConfigError(f"link {built.label(u)}->{built.label(v)} of {built.spec} has "
                              f"{built.link_latency((u, v))} cycles; a link between NIs has at "
                              f"least {lowest} (the receiving NI's input register is its last "
                              f"cycle)")


def plan_hardware(topology, algorithms: Sequence[str] | str, elements: Sequence[int] | int, *,
                  dtype=None, flow_control="message", link_latency=None, link_bandwidth=None,
                  router=False, **config_overrides) -> HardwarePlan:
    """Plan the hardware that runs every algorithm of ``algorithms`` with every size of
    ``elements`` on ``topology``.

    Parameters
    ----------
    topology : golden_model.topology.Topology
    algorithms : str or sequence of str
    elements : int or sequence of int
        Elements per node.
    dtype : str, optional
        Element type (``golden_model.elements``; the NI must have its adder, ``hdl.adders``).
        Default :data:`DEFAULT_DTYPE` (float32), or :data:`ROUTED_DEFAULT_DTYPE` (int32) on
        routers, where a float type needs staged reductions (``golden_model.lowering``), whose
        staging slots multiply the buffer (up to N / 2 times on MultiTree's star trees).
    flow_control : {"message", "credit"}
    link_latency : int, optional
        Cycles of every link direction; default: each link its own latency, the topology's
        (``config.link_latency`` is then the largest, what the receive FIFOs and router
        buffers are sized for).
    link_bandwidth : float, optional
        GB/s of every port (every link at full rate); default: each link its own bandwidth,
        the fastest port at a flit per cycle and the others rate-limited
        (``hardware_topology``, ``HardwarePlan.link_rates``).
    router : bool
        Put the NIs on routers even if every schedule only talks to neighbours.
    **config_overrides
        Further ``NIConfig`` fields (e.g. tight ``rx_buffer_depth`` in tests); sized fields may
        only grow.

    Returns
    -------
    HardwarePlan

    Raises
    ------
    ConfigError
        On an unknown algorithm or element type, an algorithm that cannot run on the topology,
        routers asked for (or needed) on a topology without a router network, a schedule the
        hardware cannot hold (the message names the algorithm, the topology, the element count
        and the limit), or a bad hardware option.
    """
    from hdl.routed_network import check_routable  # noqa: PLC0415
    from hdl.config import network_config_for  # noqa: PLC0415
    algorithms = [algorithms] if isinstance(algorithms, str) else list(algorithms)
    sizes = [elements] if isinstance(elements, int) else list(elements)
    if not algorithms or not sizes:
        raise ConfigError("a hardware plan needs at least one algorithm and one element count")
    if dtype is not None:
        etype = element_type(dtype)
    built = with_uniform_links(topology, link_latency, link_bandwidth)
    if link_latency is None:
        from hdl.config import MAX_LINK_STAGES  # noqa: PLC0415
        link_latency = max((built.link_latency(link) for link in built.links), default=0)
        if link_latency > MAX_LINK_STAGES:
            u, v = next(link for link in built.links if built.link_latency(link) == link_latency)
            raise ConfigError(f"link {built.label(u)}->{built.label(v)} of {topology.spec} has "
                              f"{link_latency:,} cycles; the hardware builds links of at most "
                              f"{MAX_LINK_STAGES:,} (give --link-latency to build every link "
                              f"alike)")
    pairs = [(a, d) for a in algorithms for d in sizes]
    choice = choice_timing(etype.bytes if dtype is not None else 4)
    schedules = [build_schedule(a, topology, d, choice) for a, d in pairs]
    reason = None
    if router:
        reason = "--router:"
    else:
        needing = next((s for s in schedules if needs_router(s)), None)
        if needing is not None:
            reason = (f"{needing.algorithm} on {topology.spec} sends over several links, so it "
                      f"needs routers, but")
    if reason is not None:
        check_routable(topology, reason)
        _check_routers_buildable(topology)
    else:
        _check_direct_links(built)
    if dtype is None:
        etype = element_type(DEFAULT_DTYPE if reason is None else ROUTED_DEFAULT_DTYPE)
    try:
        # The lowering depends on the network only through these NIConfig fields, so they are
        # settled first with a minimal config of the same kind.
        probe = dict(dtype=etype.name, elems_per_flit=FLIT_BITS // etype.bits,
                     routed=reason is not None)
        from hdl.config import NIConfig  # noqa: PLC0415
        shape = NIConfig(**probe)
        lowered = [lower(s, **_lowering_args(shape)) for s in schedules]
        config = network_config_for(lowered, **probe, flow_control=flow_control,
                                    link_latency=link_latency, **config_overrides)
    except ValueError as exc:       # NIConfig limits (ConfigError passes through unchanged)
        raise ConfigError(str(exc)) from None
    hw_topology = hardware_topology(built, config, per_link=True)
    timing = hardware_timing(config, hw_topology)
    runs = tuple(_plan_run(topology, a, d, config, hw_topology, timing, schedule=s, lowered=lw)
                 for (a, d), s, lw in zip(pairs, schedules, lowered))
    return HardwarePlan(topology, etype, config, hw_topology, timing, runs, reason)
