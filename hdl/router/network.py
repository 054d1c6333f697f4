"""``RouterNetwork``: routers with their links and the terminals' injection and ejection ports
as streams, on a mesh, torus, fat-tree or BiGraph.

Mesh and torus: one ``Router`` per node, one ``RouterLink`` per directed link; terminal ``t``
(``t = router * concentration + k``) injects into local port ``4 + k`` of router
``t // concentration`` through an ``InjectionPort`` and receives from it through an
``EjectionPort`` (no link in between).

Fat-tree, BiGraph and graph files with switches (``concentration`` = the most switch links of
an endpoint, ``hdl.router.routing.terminals_per_endpoint``: 1 on fat-tree and BiGraph): one
``Router`` per switch (``topology.switches`` order) with its ``switch_tables`` table, one
``RouterLink`` per directed switch-to-switch link (per parallel link where a link has a
``count``: ``hdl.router.routing.switch_ports``); terminal ``t = node * concentration + q`` is
endpoint ``node``'s link to its q-th switch: its ``InjectionPort`` feeds a ``RouterLink`` (the
link) into the switch's port for the node, and that port's output goes through a
``RouterLink`` (the link back) into the terminal's ``EjectionPort``. A terminal beyond its
endpoint's links has no ports (its ``inject`` is never ready, its ``eject`` never valid). Every switch gets the largest
switch degree as its port count (a 4-ary 2-tree: 8); a smaller switch's extra ports are tied off
(input idle, output never routed to), so ``to_verilog`` converts the router once per distinct
port layout (one module on fat-tree and BiGraph).

Zero-load latency (``path_cost``, ``RouterNetwork.zero_load_latency``): the head of a packet
accepted on ``inject`` in cycle 0 is valid on ``eject`` in cycle

    ``2 + 4 R + L K``

with ``R`` routers crossed, ``K`` links (``RouterLink``) crossed and ``L`` = ``link_latency``:
1 cycle in the injection register, 4 cycles per router (``hdl.router.router``), ``L`` per link,
1 cycle through the ejection buffer. ``K`` is the number of links of the golden route
(``len(topology.route(s, d))``, endpoint links included on fat-tree/BiGraph) and ``R`` is
``K + 1`` on mesh/torus (source and destination routers; so ``6 + H (4 + L)`` over ``H`` hops),
``K - 1`` on fat-tree/BiGraph (every switch on the route). A packet to its own terminal crosses
one router (and on fat-tree/BiGraph the endpoint link both ways: ``K = 2``). A packet of ``F``
flits ends ``F - 1`` cycles after its head.
"""

import contextlib
import dataclasses
import re

from amaranth.back import verilog
from amaranth.hdl import Cat, ClockSignal, Instance, Module, Mux, ResetSignal, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import MAX_LINK_STAGES, NIConfig
from ..credit import CreditCounter
from ..delay_line import DelayLine
from ..link import built_links
from ..rate import RATE_STEPS, RateLimiter
from ..fifo import make_fifo
from ..ops import eq_const
from .arbiter import RoundRobinArbiter
from .flit import PacketFlit, is_tail_kind, vc_bits
from .router import Router, RouterChannel, pack_routes, RouterParams, _check_int, _onehot_select, onehot_encode
from .routing import (NUM_GRID_PORTS, endpoint_switches, grid_neighbor, grid_tables,
                      node_ports, node_routers, node_tables,
                      switch_ports, switch_tables, terminals_per_endpoint)

__all__ = ["RouterLink", "InjectionPort", "EjectionPort", "RouterNetwork", "to_verilog",
           "TOP_MODULE", "PathCost", "path_cost", "ROUTER_CYCLES", "INJECTION_CYCLES",
           "EJECTION_CYCLES", "router_modules", "model_timing"]

TOP_MODULE = "router_network"

#: Zero-load cycles of a head through one router (BW, RC, VA, SA; ``hdl.router.router``).
ROUTER_CYCLES = 4
#: Cycles of the ``InjectionPort`` register (``inject`` handshake to its ``out``).
INJECTION_CYCLES = 1
#: Cycles through the ``EjectionPort`` buffer (flit on its input to ``eject.valid``).
EJECTION_CYCLES = 1
#: Cycles an output stays idle between two packets that follow each other in one VC class: the
#: next head repeats RC and VA after the tail before it (``hdl.router.router``, "Pipeline").
#: The timetable keeps that gap after every message on every link (``TimingParams.message_gap``;
#: with 1 cycle MultiTree on bigraph:4x4 took 773 RTL cycles against the timetable's 680, with 2
#: it takes 750 against 748, scripts/routed_trace.py).
PACKET_GAP = 2

#: The topologies ``RouterNetwork`` builds, by their ``router_kind`` (``golden_model.families``):
#: ``"grid"`` (a router per node, dimension order, datelines on wrap links), ``"table"`` (a
#: router per switch, tables from the golden routes) and ``"node"`` (a router per endpoint of a
#: graph without switches, tables from the golden routes).
ROUTER_KINDS = ("grid", "table", "node")


def routed_families():
    """``"mesh, torus, fattree, bigraph"``: the families that have a router network."""
    from golden_model.families import FAMILIES  # noqa: PLC0415
    return ", ".join([name for name, f in FAMILIES.items() if f.router in ROUTER_KINDS]
                     + ["graph files of two or more endpoints"])


@dataclasses.dataclass(frozen=True)
class PathCost:
    """What a packet from one terminal to another crosses, and its zero-load latency.

    Attributes
    ----------
    routers : int
        Routers (switches) crossed.
    links : int
        ``RouterLink``s crossed (router-to-router, and on fat-tree/BiGraph the endpoint links).
    link_latency : int
        Cycles per link.
    """
    routers: int
    links: int
    link_latency: int

    @property
    def head_latency(self):
        """Cycles from the head accepted on ``inject`` to the head valid on ``eject``."""
        return (INJECTION_CYCLES + ROUTER_CYCLES * self.routers + self.link_latency * self.links
                + EJECTION_CYCLES)

    def latency(self, length=1):
        """Cycles from the head accepted to the tail of a ``length``-flit packet on ``eject``."""
        return self.head_latency + length - 1


def model_timing(topology):
    """The ``golden_model.timing.TimingParams`` fields that give the timing model this router
    network's zero-load numbers (a packet's head accepted on ``inject`` to its tail on
    ``eject``, with ``header_flits=1``): ``router_delay`` = ``ROUTER_CYCLES`` per transit router,
    and ``send_delay`` = the injection and ejection cycles, minus 1 (the model's hold counts
    all F flits, the RTL's tail comes F - 1 cycles after the head), plus on a mesh or torus (or
    a graph with a router per endpoint) the source and destination routers, which a golden
    route between nodes does not pass through.
    Then ``simulate`` of a lone transfer equals ``path_cost(...).latency(F)`` for any two
    distinct nodes (tests/test_router_units.py)."""
    ends = 2 * ROUTER_CYCLES if topology.is_direct or topology.router_kind == "node" else 0
    return {"router_delay": ROUTER_CYCLES,
            "send_delay": INJECTION_CYCLES + EJECTION_CYCLES - 1 + ends}


def _check_network(topology, link_latency, concentration, what):
    """The topology's ``router_kind``, after checking the arguments ``RouterNetwork`` and
    ``path_cost`` share."""
    kind = getattr(topology, "router_kind", None)
    if kind not in ROUTER_KINDS:
        raise ValueError(f"{what} needs a topology with a router network ({routed_families()}), "
                         f"not {getattr(topology, 'spec', topology)!r}")
    _check_int("concentration", concentration, 1, 8)
    _check_int("link_latency", link_latency, 0, MAX_LINK_STAGES)
    if kind == "table" and concentration != terminals_per_endpoint(topology):
        raise ValueError(f"concentration must be {terminals_per_endpoint(topology)} on "
                         f"{topology.spec} (a terminal per link of an endpoint to a switch), not "
                         f"{concentration!r}")
    return kind


def path_cost(topology, src, dst, *, link_latency=1, concentration=1):
    """``PathCost`` of a packet from terminal ``src`` to terminal ``dst`` of the
    ``RouterNetwork`` of ``topology`` (no hardware is built). See the module docstring.

    Raises
    ------
    ValueError
        On a topology ``RouterNetwork`` does not support or a terminal out of range.
    """
    kind = _check_network(topology, link_latency, concentration, "path_cost")
    n = topology.num_nodes * concentration
    for name, t in (("src", src), ("dst", dst)):
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < n:
            raise ValueError(f"{name} must be a terminal 0..{n - 1}, not {t!r}")
    if kind == "table":
        c = concentration
        links = len(topology.route(src // c, dst // c)) if src // c != dst // c else 2
        return PathCost(routers=links - 1, links=links, link_latency=link_latency)
    links = len(topology.route(src // concentration, dst // concentration))
    return PathCost(routers=links + 1, links=links, link_latency=link_latency)


class RouterLink(wiring.Component):
    """A directed router link: ``latency`` cycles for flits, ``credit_latency`` (default
    ``latency``) for the credit vector coming back, in delay lines
    (``hdl.delay_line.DelayLine``), one for both when the latencies are equal (``hdl.link.Link``
    with a credit per VC and a VC in the flit; valid and credits read 0 until their delay line
    is defined).

    With ``rate`` below ``RATE_STEPS`` (``hdl.rate``), ``open`` follows a ``RateLimiter`` (windows
    of one cycle): the sender sends only while it is high.

    Members
    -------
    sender : ``In(RouterChannel)``
        Connect to a router's ``out[o]``.
    receiver : ``Out(RouterChannel)``
        Connect to a router's ``inp[q]``.
    open : ``Out(1)``
        The sender may send a flit this cycle (connect to ``Router.out_open[o]`` or
        ``InjectionPort.open``; always 1 at full rate).
    """

    def __init__(self, params, latency, credit_latency=None, rate=RATE_STEPS):
        if not isinstance(params, RouterParams):
            raise ValueError(f"params must be a RouterParams, not {params!r}")
        credit_latency = latency if credit_latency is None else credit_latency
        _check_int("link_latency", latency, 0, MAX_LINK_STAGES)
        _check_int("credit latency", credit_latency, 0, MAX_LINK_STAGES)
        _check_int("link rate", rate, 1, RATE_STEPS)
        self.params, self.latency, self.credit_latency = params, latency, credit_latency
        self.rate = rate
        ch = RouterChannel(params.flit_width, params.num_vcs)
        super().__init__({"sender": In(ch), "receiver": Out(ch), "open": Out(1)})

    def elaborate(self, platform):
        m = Module()
        credit = self.receiver.credit
        nc = len(credit)
        if self.latency == self.credit_latency:
            word = Cat(self.sender.valid, credit, self.sender.flit)
            m.submodules.delay = delay = DelayLine(len(word), self.latency)
            m.d.comb += delay.i.eq(word)
            valid, back, flit = delay.o[0], delay.o[1:1 + nc], delay.o[1 + nc:]
            flit_defined = back_defined = delay.defined
        else:
            word = Cat(self.sender.valid, self.sender.flit)
            m.submodules.delay = delay = DelayLine(len(word), self.latency)
            m.submodules.credit_delay = cdl = DelayLine(nc, self.credit_latency)
            m.d.comb += [delay.i.eq(word), cdl.i.eq(credit)]
            valid, flit, back = delay.o[0], delay.o[1:], cdl.o
            flit_defined, back_defined = delay.defined, cdl.defined
        m.d.comb += [self.receiver.valid.eq(valid & flit_defined),
                     self.sender.credit.eq(back & back_defined.replicate(nc)),
                     self.receiver.flit.eq(flit)]
        if self.rate < RATE_STEPS:
            m.submodules.rate = limiter = RateLimiter(self.rate)
            m.d.comb += self.open.eq(limiter.open)
        else:
            m.d.comb += self.open.eq(1)
        return m


class InjectionPort(wiring.Component):
    """Stream of packets into a router's local input port.

    At a head flit the port picks a VC of the router's local input unit that has a credit
    (round-robin) and keeps it to the tail. ``inject.ready`` is high when that VC has a credit.
    The accepted flit is registered onto ``out`` (one cycle).

    Members
    -------
    inject : ``In(stream.Signature(PacketFlit(flit_width)))``
    out : ``Out(RouterChannel)``
    open : ``In(1)``
        The link's rate limit (``RouterLink.open``): no flit is accepted while it is low
        (default 1).
    """

    def __init__(self, params):
        self.params = params
        ch = RouterChannel(params.flit_width, params.num_vcs)
        super().__init__({"inject": In(stream.Signature(PacketFlit(params.flit_width))),
                          "out": Out(ch), "open": In(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        prm = self.params
        v, vcw = prm.num_vcs, vc_bits(prm.num_vcs)
        cfg = NIConfig(flow_control="credit", rx_buffer_depth=prm.vc_buf_depth)
        ready = Signal(v)
        sends = Signal(v)
        for w in range(v):
            cc = m.submodules[f"credits{w}"] = CreditCounter(cfg)
            m.d.comb += [cc.credit_in.eq(self.out.credit[w]), cc.head.eq(1),
                         cc.send.eq(sends[w]), ready[w].eq(cc.ready)]
        arb = m.submodules.vc_select = RoundRobinArbiter(v)
        in_packet = Signal()
        cur = Signal(v)          # one-hot VC of the packet being injected
        sel = Signal(v)
        m.d.comb += [arb.requests.eq(ready), sel.eq(Mux(in_packet, cur, arb.grant))]
        m.d.comb += self.inject.ready.eq((sel & ready).any() & self.open)
        accept = Signal()
        kind = self.inject.payload.kind.as_value()
        m.d.comb += [accept.eq(self.inject.valid & self.inject.ready),
                     arb.advance.eq(accept & ~in_packet),
                     sends.eq(Cat(*([accept] * v)) & sel)]
        with m.If(accept):
            m.d.sync += [in_packet.eq(~is_tail_kind(kind)), cur.eq(sel)]
        m.d.sync += [self.out.valid.eq(accept), self.out.flit.kind.eq(self.inject.payload.kind),
                     self.out.flit.payload.eq(self.inject.payload.payload)]
        if vcw:
            m.d.sync += self.out.flit.vc.eq(onehot_encode(sel, vcw))
        return m


class EjectionPort(wiring.Component):
    """A router's local output port as a stream of whole packets.

    One buffer of ``vc_buf_depth`` flits per VC (the router's credits for this port count their
    room); the stream takes a packet from one VC at a time (round-robin between packets, fair
    under back-pressure: a VC goes last once its packet is offered), so packets leave
    contiguous. A popped flit returns its credit one cycle later.

    Members
    -------
    inp : ``In(RouterChannel)``
        Connect to the router's ``out[o]``.
    eject : ``Out(stream.Signature(PacketFlit(flit_width)))``
    overflow : ``Out(1)``
        Sticky: a flit arrived at a full buffer.
    """

    def __init__(self, params):
        self.params = params
        ch = RouterChannel(params.flit_width, params.num_vcs)
        super().__init__({"inp": In(ch),
                          "eject": Out(stream.Signature(PacketFlit(params.flit_width))),
                          "overflow": Out(1)})

    def elaborate(self, platform):
        m = Module()
        prm = self.params
        v, vcw = prm.num_vcs, vc_bits(prm.num_vcs)
        layout = PacketFlit(prm.flit_width)
        bufs = []
        rdy = Signal(v)
        pops = Signal(v)
        for w in range(v):
            buf = m.submodules[f"vc{w}"] = make_fifo(width=layout.size, depth=prm.vc_buf_depth)
            bufs.append(buf)
            w_en = self.inp.valid & (eq_const(self.inp.flit.vc, w) if vcw else 1)
            m.d.comb += [buf.w_en.eq(w_en),
                         buf.w_data.eq(Cat(self.inp.flit.kind, self.inp.flit.payload)),
                         rdy[w].eq(buf.r_rdy), buf.r_en.eq(pops[w])]
            with m.If(w_en & ~buf.w_rdy):
                m.d.sync += self.overflow.eq(1)
        arb = m.submodules.vc_select = RoundRobinArbiter(v)
        locked = Signal()
        cur = Signal(v)
        sel = Signal(v)
        m.d.comb += [arb.requests.eq(rdy), sel.eq(Mux(locked, cur, arb.grant))]
        front = Signal(layout)
        m.d.comb += [front.eq(_onehot_select(sel, [b.r_data for b in bufs], layout.size)),
                     self.eject.valid.eq((sel & rdy).any()),
                     self.eject.payload.eq(front)]
        take = Signal()
        # The priority moves past a VC when its packet is chosen (offered unlocked), whether or
        # not the sink takes the head in that cycle: moving it only when the head went at once
        # left it in place after a back-pressured head, so one VC with a packet always waiting
        # starved the other (a 7-flit packet held 250 cycles on a float32 BiGraph).
        m.d.comb += [take.eq(self.eject.valid & self.eject.ready),
                     pops.eq(Cat(*([take] * v)) & sel),
                     arb.advance.eq(self.eject.valid & ~locked)]
        # Hold the choice from the first cycle it is offered until its packet's tail leaves.
        with m.If(take & is_tail_kind(front.kind.as_value())):
            m.d.sync += locked.eq(0)
        with m.Elif(self.eject.valid):
            m.d.sync += [locked.eq(1), cur.eq(sel)]
        m.d.sync += self.inp.credit.eq(pops)
        return m


class RouterNetwork(wiring.Component):
    """Routers of a mesh, torus, fat-tree or BiGraph with their links and terminal ports.

    Parameters
    ----------
    topology : golden_model.topology.Topology
        ``mesh:RxC`` or ``torus:RxC`` (routes: ``golden_model.topology`` dimension order), or
        ``fattree:KxL`` or ``bigraph:MxS`` (one router per switch, golden d-mod-k routes).
    num_vcs, vc_buf_depth, flit_width, credit_delay, flow_control
        As ``RouterParams``. A torus needs an even ``num_vcs`` >= 2 (two dateline classes), and
        so does a network whose switch routes have cyclic channel dependencies (BiGraph; see
        ``hdl.router.routing``).
    link_latency : int
        Cycles per link direction (flits and credits), 0..1024; on fat-tree/BiGraph also on
        each endpoint's link to its switch and back. A hardware topology
        (``allreduce_rtl.plan.hardware_topology``) gives each link its own latency (at most
        this) and rate (``hdl.link.built_links``): the link u -> v carries the credits of v
        back in the latency of v -> u, and its rate limit gates its sender (a router's
        output, ``Router.out_open``, or an injection port).
    concentration : int
        Terminals (local ports) per router, 1..8 on mesh/torus; on a switched network the most
        switch links of an endpoint (``hdl.router.routing.terminals_per_endpoint``; 1 on
        fat-tree/BiGraph: an endpoint node is a terminal).
    datelines : bool
        VC classes against deadlock (default): dateline classes on a torus, the two classes of
        ``switch_tables`` on BiGraph. ``False`` lets every packet use every VC on every hop: an
        ablation that shows the deadlock the classes prevent; never use it otherwise.

    Attributes
    ----------
    num_terminals : int
    params : RouterParams
        Of every router (``num_ports``: 4 + concentration on mesh/torus, the largest switch
        degree on fat-tree/BiGraph).
    tables : list of RoutingTable
        Per router: mesh/torus node id, fat-tree/BiGraph position in ``switches``.
    switches : list
        Fat-tree/BiGraph: the switch of each router (``topology.switches``); else ``[]``.
    concentration, link_latency, topology

    Members
    -------
    inject : ``In(stream.Signature(PacketFlit(flit_width)))`` per terminal
    eject : ``Out(stream.Signature(PacketFlit(flit_width)))`` per terminal
    error : ``Out(1)``
        Sticky: some buffer overflowed (never, if credits work).

    Raises
    ------
    ValueError
        Naming the bad value.
    """

    def __init__(self, topology, *, num_vcs=2, vc_buf_depth=8, flit_width=128, credit_delay=1,
                 flow_control="wormhole", link_latency=1, concentration=1, datelines=True):
        kind = _check_network(topology, link_latency, concentration, "RouterNetwork")
        indirect = kind == "table"
        self.built = built_links(topology, link_latency)
        if topology.num_nodes * concentration > 1024:
            raise ValueError(f"at most 1024 terminals, not {topology.num_nodes * concentration}")
        self.topology = topology
        self.link_latency = link_latency
        self.concentration = concentration
        if indirect:
            self.switches = topology.switches
            self.tables = switch_tables(topology, vc_classes=None if datelines else 1)
            num_ports = self.tables[0].num_ports
        elif kind == "node":
            self.switches = []
            self.tables = node_tables(topology, concentration,
                                      vc_classes=None if datelines else 1)
            num_ports = self.tables[0].num_ports
        else:
            self.switches = []
            self.tables = grid_tables(topology, concentration)
            if not datelines:
                # ablation only: every VC on every hop (a torus can then deadlock)
                self.tables = [dataclasses.replace(t, vc_classes=1) for t in self.tables]
            num_ports = NUM_GRID_PORTS + concentration
        datelined = not indirect and topology.wraps
        if (datelined or any(t.vc_classes == 2 for t in self.tables)) and (
                num_vcs % 2 if isinstance(num_vcs, int) else False):
            why = ("two dateline classes" if datelined else
                   "two VC classes break the cyclic channel dependencies of its routes")
            raise ValueError(f"num_vcs must be even on {topology.spec} ({why}), not {num_vcs!r}")
        self.params = RouterParams(num_ports, num_vcs, vc_buf_depth, flit_width, credit_delay,
                                   flow_control)
        self.num_terminals = topology.num_nodes * concentration
        self._router_modules = None
        sig = stream.Signature(PacketFlit(flit_width))
        super().__init__({"inject": In(sig).array(self.num_terminals),
                          "eject": Out(sig).array(self.num_terminals), "error": Out(1)})

    def path_cost(self, src, dst):
        """``PathCost`` (routers, links, head latency) from terminal ``src`` to ``dst``."""
        return path_cost(self.topology, src, dst, link_latency=self.link_latency,
                         concentration=self.concentration)

    def zero_load_latency(self, src, dst, length=1):
        """Cycles from a ``length``-flit packet's head accepted on ``inject[src]`` to its tail
        valid on ``eject[dst]`` in an empty network (``length=1``: the head latency)."""
        return self.path_cost(src, dst).latency(length)

    def elaborate(self, platform):
        m = Module()
        prm = self.params
        routers = []
        errors = []
        for i, table in enumerate(self.tables):
            shared = self._router_modules and self._router_modules[_layout(table)]
            router = Router(prm, table, table_input=bool(shared))
            name = f"router_{self.switches[i]}" if self.switches else f"router{i}"
            if shared:
                m.submodules[name] = _instance(router, shared)
                m.d.comb += router.routes.eq(pack_routes(table))
            else:
                m.submodules[name] = router
            routers.append(router)
            errors.append(router.error)
        # (router index, port) each terminal injects into and ejects from, and its links
        if self.switches:
            terminal_ports = self._wire_switches(m, routers)
        elif self.topology.router_kind == "node":
            terminal_ports = self._wire_nodes(m, routers)
        else:
            terminal_ports = self._wire_grid(m, routers)
        for t, ends in enumerate(terminal_ports):
            if ends is None:
                continue        # a terminal beyond its endpoint's links
            r, port = ends
            inj = m.submodules[f"inject{t}"] = InjectionPort(prm)
            ej = m.submodules[f"eject{t}"] = EjectionPort(prm)
            wiring.connect(m, wiring.flipped(self.inject[t]), inj.inject)
            wiring.connect(m, ej.eject, wiring.flipped(self.eject[t]))
            if self.switches:
                sw, node = self.switches[r], t // self.concentration
                up = m.submodules[f"link{t}_{sw}"] = self._link(node, sw)
                down = m.submodules[f"link{sw}_{t}"] = self._link(sw, node)
                wiring.connect(m, inj.out, up.sender)
                wiring.connect(m, up.receiver, routers[r].inp[port])
                wiring.connect(m, routers[r].out[port], down.sender)
                wiring.connect(m, down.receiver, ej.inp)
                m.d.comb += [inj.open.eq(up.open), routers[r].out_open[port].eq(down.open)]
            else:
                wiring.connect(m, inj.out, routers[r].inp[port])
                wiring.connect(m, routers[r].out[port], ej.inp)
            errors.append(ej.overflow)
        m.d.comb += self.error.eq(Cat(*errors).any())
        return m

    def _link(self, u, v):
        """The ``RouterLink`` of the graph link u -> v (its credits come back as fast as v -> u)."""
        (latency, rate), (back, _) = self.built[(u, v)], self.built[(v, u)]
        return RouterLink(self.params, latency, back, rate)

    def _wire_grid(self, m, routers):
        topo = self.topology
        for r in topo.nodes:
            for port in range(NUM_GRID_PORTS):
                nb = grid_neighbor(topo, r, port)
                if nb is None:
                    continue     # mesh edge: input stays idle, output is never routed to
                link = m.submodules[f"link{r}_{nb}"] = self._link(r, nb)
                wiring.connect(m, routers[r].out[port], link.sender)
                m.d.comb += routers[r].out_open[port].eq(link.open)
                wiring.connect(m, link.receiver, routers[nb].inp[port ^ 1])
        c = self.concentration
        return [(t // c, NUM_GRID_PORTS + t % c) for t in range(self.num_terminals)]

    def _wire_nodes(self, m, routers):
        topo = self.topology
        width = self.params.num_ports - self.concentration
        index = {v: i for i, v in enumerate(node_routers(topo))}
        for u, i in index.items():
            for p, (v, k) in enumerate(node_ports(topo, u)):
                count = topo.graph.edges[u, v].get("count", 1)
                name = f"link{u}_{v}" if count == 1 else f"link{u}_{v}_{k}"
                link = m.submodules[name] = self._link(u, v)
                wiring.connect(m, routers[i].out[p], link.sender)
                wiring.connect(m, link.receiver,
                               routers[index[v]].inp[node_ports(topo, v).index((u, k))])
                m.d.comb += routers[i].out_open[p].eq(link.open)
        c = self.concentration
        return [(t // c, width + t % c) for t in range(self.num_terminals)]

    def _wire_switches(self, m, routers):
        g = self.topology.graph
        index = {sw: i for i, sw in enumerate(self.switches)}
        ports = {sw: switch_ports(self.topology, sw) for sw in self.switches}
        terminal_ports = [None] * self.num_terminals
        for i, sw in enumerate(self.switches):
            # ports beyond the switch's degree: input idle, output never routed to
            for p, (v, k) in enumerate(ports[sw]):
                if v in index:
                    name = f"link{sw}_{v}" if g.edges[sw, v].get("count", 1) == 1 else \
                        f"link{sw}_{v}_{k}"
                    link = m.submodules[name] = self._link(sw, v)
                    wiring.connect(m, routers[i].out[p], link.sender)
                    m.d.comb += routers[i].out_open[p].eq(link.open)
                    wiring.connect(m, link.receiver,
                                   routers[index[v]].inp[ports[v].index((sw, k))])
                else:
                    q = endpoint_switches(self.topology, v).index(sw)
                    terminal_ports[v * self.concentration + q] = (i, p)
        return terminal_ports


def _layout(table):
    """What a shared router module bakes in besides the routes: the port dimensions and classes
    (``RouteCompute``), and the port and destination counts."""
    return (table.num_ports, table.num_dests, table.port_dim, table.vc_classes)


def _instance(component, module_name):
    """An ``Instance`` of ``module_name`` wired to the port signals of ``component``."""
    component._MustUse__used = True
    ports = {}
    for path, member, value in component.signature.flatten(component):
        prefix = "i_" if member.flow == In else "o_"
        ports[prefix + "__".join(map(str, path))] = Value.cast(value)
    return Instance(module_name, i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync"), **ports)


@contextlib.contextmanager
def shared_routers(network, name=TOP_MODULE):
    """Inside the block, ``network`` (a ``RouterNetwork``) elaborates its routers as instances
    of shared modules: one per distinct port layout (``num_ports``, port dimensions and VC
    classes; one layout on every supported topology), named ``<name>_router`` (a second layout
    would be ``<name>_router1`` ...), the routing table an input driven by a constant per
    instance. Yields the list of those modules' Verilog texts, to append to the converted top.
    """
    templates = {}
    for table in network.tables:
        templates.setdefault(_layout(table), table)
    modules, texts = {}, []
    for k, (key, table) in enumerate(templates.items()):
        modules[key] = f"{name}_router" + (str(k) if k else "")
        template = Router(network.params, table, table_input=True)
        texts.append(verilog.convert(template, name=modules[key], emit_src=False))
    network._router_modules = modules
    try:
        yield texts
    finally:
        network._router_modules = None


def to_verilog(component, path=None, name=TOP_MODULE):
    """Verilog of a ``RouterNetwork`` (or any router block), top module ``name``, no timescale.

    A ``RouterNetwork``'s routers are shared modules (``shared_routers``), so conversion time and
    file size hardly grow with the number of routers.
    """
    import pathlib
    if isinstance(component, RouterNetwork):
        with shared_routers(component, name) as texts:
            text = verilog.convert(component, name=name, emit_src=False)
        text = "\n".join([text] + texts)
    else:
        text = verilog.convert(component, name=name, emit_src=False)
    if path is not None:
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return text


def router_modules(text, name=TOP_MODULE):
    """Names of the shared router modules in the Verilog ``text`` of a ``RouterNetwork``."""
    return re.findall(rf"^module ({re.escape(name)}_router\d*)\(", text, flags=re.M)
