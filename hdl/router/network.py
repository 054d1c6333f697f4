"""``RouterNetwork``: one ``Router`` per node of a mesh or torus, one ``RouterLink`` per directed
link, and the local injection and ejection ports as streams.

Terminal ``t`` (``t = router * concentration + k``) injects into local port ``4 + k`` of router
``t // concentration`` through an ``InjectionPort`` and receives from it through an
``EjectionPort``. Zero-load latency of a packet's head from injection to ejection over ``H``
router-to-router links (``L`` = ``link_latency``): accepted on ``inject`` in cycle 0, on
``eject`` (``valid``) in cycle ``6 + H * (4 + L)``: 1 cycle injection register, 4 cycles per
router (``hdl.router.router``), ``L`` per link, 1 cycle through the ejection buffer. A packet of
``F`` flits ends ``F - 1`` cycles later.
"""

import dataclasses

from amaranth.back import verilog
from amaranth.hdl import Cat, ClockSignal, Instance, Module, Mux, ResetSignal, Signal, Value
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import NIConfig
from ..credit import CreditCounter
from ..ops import eq_const
from .arbiter import RoundRobinArbiter
from .flit import PacketFlit, is_tail_kind, vc_bits
from .router import Router, RouterChannel, pack_routes, RouterParams, _check_int, _onehot_select, onehot_encode
from .routing import NUM_GRID_PORTS, grid_neighbor, grid_tables

__all__ = ["RouterLink", "InjectionPort", "EjectionPort", "RouterNetwork", "to_verilog",
           "TOP_MODULE"]

TOP_MODULE = "router_network"


class RouterLink(wiring.Component):
    """A directed router link: ``latency`` register stages for flits, ``latency`` for the credit
    vector coming back (``hdl.link.Link`` with a credit per VC and a VC in the flit).

    Members
    -------
    sender : ``In(RouterChannel)``
        Connect to a router's ``out[o]``.
    receiver : ``Out(RouterChannel)``
        Connect to a router's ``inp[q]``.
    """

    def __init__(self, params, latency):
        if not isinstance(params, RouterParams):
            raise ValueError(f"params must be a RouterParams, not {params!r}")
        _check_int("link_latency", latency, 0, 1024)
        self.params, self.latency = params, latency
        ch = RouterChannel(params.flit_width, params.num_vcs)
        super().__init__({"sender": In(ch), "receiver": Out(ch)})

    def elaborate(self, platform):
        m = Module()
        valid, flit, credit = self.sender.valid, self.sender.flit, self.receiver.credit
        for i in range(self.latency):
            nv, nf = Signal(name=f"fwd{i}_valid"), Signal.like(flit, name=f"fwd{i}_flit")
            nc = Signal.like(credit, name=f"bwd{i}_credit")
            m.d.sync += [nv.eq(valid), nf.eq(flit), nc.eq(credit)]
            valid, flit, credit = nv, nf, nc
        m.d.comb += [self.receiver.valid.eq(valid), self.receiver.flit.eq(flit),
                     self.sender.credit.eq(credit)]
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
    """

    def __init__(self, params):
        self.params = params
        ch = RouterChannel(params.flit_width, params.num_vcs)
        super().__init__({"inject": In(stream.Signature(PacketFlit(params.flit_width))),
                          "out": Out(ch)})

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
        m.d.comb += self.inject.ready.eq((sel & ready).any())
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
    room); the stream takes a packet from one VC at a time (round-robin between packets), so
    packets leave contiguous. A popped flit returns its credit one cycle later.

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
            buf = m.submodules[f"vc{w}"] = fifo.SyncFIFO(width=layout.size, depth=prm.vc_buf_depth)
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
        m.d.comb += [take.eq(self.eject.valid & self.eject.ready),
                     pops.eq(Cat(*([take] * v)) & sel),
                     arb.advance.eq(take & ~locked)]
        # Hold the choice from the first cycle it is offered until its packet's tail leaves.
        with m.If(take & is_tail_kind(front.kind.as_value())):
            m.d.sync += locked.eq(0)
        with m.Elif(self.eject.valid):
            m.d.sync += [locked.eq(1), cur.eq(sel)]
        m.d.sync += self.inp.credit.eq(pops)
        return m


class RouterNetwork(wiring.Component):
    """Routers of a mesh or torus with their links and local ports.

    Parameters
    ----------
    topology : golden_model.topology.Topology
        ``mesh:RxC`` or ``torus:RxC`` (routes: ``golden_model.topology`` dimension order).
    num_vcs, vc_buf_depth, flit_width, credit_delay, flow_control
        As ``RouterParams`` (a torus needs an even ``num_vcs`` >= 2: two dateline classes).
    link_latency : int
        Register stages per link direction (flits and credits), 0..1024.
    concentration : int
        Terminals (local ports) per router, 1..8.
    datelines : bool
        Dateline VC classes on a torus (default). ``False`` lets every packet use every VC on
        every hop: an ablation that shows the deadlock the datelines prevent; never use it
        otherwise.

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
        if getattr(topology, "family", None) not in ("mesh", "torus"):
            raise ValueError(f"RouterNetwork needs a mesh or torus topology, not "
                             f"{getattr(topology, 'spec', topology)!r}")
        _check_int("concentration", concentration, 1, 8)
        _check_int("link_latency", link_latency, 0, 1024)
        if topology.num_nodes * concentration > 1024:
            raise ValueError(f"at most 1024 terminals, not {topology.num_nodes * concentration}")
        if topology.family == "torus" and (num_vcs % 2 if isinstance(num_vcs, int) else False):
            raise ValueError(f"num_vcs must be even on a torus (two dateline classes), "
                             f"not {num_vcs!r}")
        self.topology = topology
        self.params = RouterParams(NUM_GRID_PORTS + concentration, num_vcs, vc_buf_depth,
                                   flit_width, credit_delay, flow_control)
        self.link_latency = link_latency
        self.concentration = concentration
        self.tables = grid_tables(topology, concentration)
        if not datelines:
            # ablation only: every VC on every hop (a torus can then deadlock)
            self.tables = [dataclasses.replace(t, vc_classes=1) for t in self.tables]
        self.num_terminals = topology.num_nodes * concentration
        self._router_module = None
        sig = stream.Signature(PacketFlit(flit_width))
        super().__init__({"inject": In(sig).array(self.num_terminals),
                          "eject": Out(sig).array(self.num_terminals), "error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        topo, prm = self.topology, self.params
        routers = []
        errors = []
        shared = self._router_module
        for r in topo.nodes:
            router = Router(prm, self.tables[r], table_input=shared is not None)
            if shared is None:
                m.submodules[f"router{r}"] = router
            else:
                m.submodules[f"router{r}"] = _instance(router, shared)
                m.d.comb += router.routes.eq(pack_routes(self.tables[r]))
            routers.append(router)
            errors.append(router.error)
        for r in topo.nodes:
            for port in range(NUM_GRID_PORTS):
                nb = grid_neighbor(topo, r, port)
                if nb is None:
                    continue     # mesh edge: input stays idle, output is never routed to
                link = m.submodules[f"link{r}_{nb}"] = RouterLink(prm, self.link_latency)
                wiring.connect(m, routers[r].out[port], link.sender)
                wiring.connect(m, link.receiver, routers[nb].inp[port ^ 1])
        for t in range(self.num_terminals):
            r, k = divmod(t, self.concentration)
            inj = m.submodules[f"inject{t}"] = InjectionPort(prm)
            ej = m.submodules[f"eject{t}"] = EjectionPort(prm)
            wiring.connect(m, wiring.flipped(self.inject[t]), inj.inject)
            wiring.connect(m, inj.out, routers[r].inp[NUM_GRID_PORTS + k])
            wiring.connect(m, routers[r].out[NUM_GRID_PORTS + k], ej.inp)
            wiring.connect(m, ej.eject, wiring.flipped(self.eject[t]))
            errors.append(ej.overflow)
        m.d.comb += self.error.eq(Cat(*errors).any())
        return m


def _instance(component, module_name):
    """An ``Instance`` of ``module_name`` wired to the port signals of ``component``."""
    component._MustUse__used = True
    ports = {}
    for path, member, value in component.signature.flatten(component):
        prefix = "i_" if member.flow == In else "o_"
        ports[prefix + "__".join(map(str, path))] = Value.cast(value)
    return Instance(module_name, i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync"), **ports)


def to_verilog(component, path=None, name=TOP_MODULE):
    """Verilog of a ``RouterNetwork`` (or any router block), top module ``name``, no timescale.

    A ``RouterNetwork``'s routers are one module ``<name>_router`` (converted once, the routing
    table an input driven by a constant per instance ``router<r>``), so conversion time and file
    size hardly grow with the number of routers.
    """
    import pathlib
    if isinstance(component, RouterNetwork):
        router_name = f"{name}_router"
        template = Router(component.params, component.tables[0], table_input=True)
        router_text = verilog.convert(template, name=router_name, emit_src=False)
        component._router_module = router_name
        try:
            text = verilog.convert(component, name=name, emit_src=False)
        finally:
            component._router_module = None
        text = text + "\n" + router_text
    else:
        text = verilog.convert(component, name=name, emit_src=False)
    if path is not None:
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return text
