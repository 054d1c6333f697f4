"""An input-queued virtual-channel router (Dally & Towles ch. 16; BookSim's ``iq_router``).

Blocks, named as in the textbook and BookSim:

* ``InputUnit`` per input port: one ``VirtualChannel`` buffer (``hdl.fifo.make_fifo``
  of ``vc_buf_depth`` flits: a one-read, one-write memory above 4 entries) and one state machine per VC (``VCState``: idle, routing, vc_alloc,
  active) and one ``RouteCompute`` per VC;
* ``RouteCompute``: the output port from a constant ``RoutingTable`` (``hdl.router.routing``:
  dimension order on mesh and torus, golden routes through fat-tree/BiGraph switches) and the
  set of output VCs the packet may take (torus: dateline VC classes);
* ``VCAllocator``: separable input-first, round-robin at both stages;
* ``SwitchAllocator``: separable input-first, round-robin at both stages;
* ``Crossbar``: a one-hot AND-OR multiplexer per output port, into the output register (ST);
* ``CreditCounter`` (``hdl.credit``, credit mode) per output VC.

Flow control: credit-based, one credit per flit per VC. ``flow_control="wormhole"``: an output
VC is allocated to a head when it is free (its previous packet's tail has left this router);
flits then advance as credits allow. ``flow_control="cut_through"`` (virtual cut-through): an
output VC is allocated only when it is free *and* the downstream VC has room for the whole
packet (credits >= 1 + the head's ``flits``), so a packet never stops mid-link; packets must
then be at most ``vc_buf_depth`` flits.

Pipeline (one flit per cycle per port at full load; cycle numbers for a head flit that finds the
router empty):

==========  =========================================================================
cycle 0     BW: the head is on the input port and is written into its VC buffer; the VC
            goes idle -> routing.
cycle 1     RC: the head is at the buffer front; ``RouteCompute`` gives port and VC set
            (latched); routing -> vc_alloc.
cycle 2     VA: the ``VCAllocator`` grants an output VC; vc_alloc -> active.
cycle 3     SA: the ``SwitchAllocator`` grants the crossbar (the output VC has a credit);
            the flit leaves the buffer, a credit goes upstream, the crossbar output is
            registered (ST).
cycle 4     the head is on the output port (``out[o].valid``).
==========  =========================================================================

So the zero-load latency per hop is **4 cycles of router + the link latency** for the head
(``4 + link_latency`` from input port to the next router's input port); body flits follow one
per cycle (a body flit that does not wait takes 2 cycles from input to output port: BW, SA). A tail
that leaves with another packet's head behind it in the same VC sends the VC straight to
routing, so back-to-back packets on one VC lose only the RC and VA cycles.

Credits: a flit popped in cycle t returns a credit on ``inp[p].credit`` in cycle
t + ``credit_delay`` (register stages; BookSim's ``credit_delay``); the upstream counter can use
it in the cycle it arrives. Over links of latency L the credit round trip of a body flit is
``2 + 2 L + credit_delay`` cycles; a head waits 2 cycles longer in the buffer (RC, VA), and the
flits behind it keep coming meanwhile. So one VC alone takes a packet at a flit per cycle, its
head included, iff ``vc_buf_depth >= 4 + 2 L + credit_delay`` (:func:`full_rate_depth`). With 2
flits less, an injection port over a link of latency L (fat-tree, BiGraph) stalls 2 cycles in
each packet.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from ..config import NIConfig
from ..credit import CreditCounter
from ..fifo import make_fifo
from ..ops import eq_const, ge_const, select_word
from .arbiter import RoundRobinArbiter
from .flit import ROUTER_HEAD_BITS, RouterFlit, is_tail_kind, vc_bits
from .routing import RoutingTable

__all__ = ["VCState", "RouterChannel", "RouteCompute", "InputUnit", "VCAllocator",
           "SwitchAllocator", "Crossbar", "Router", "RouterParams", "FLOW_CONTROLS",
           "full_rate_depth", "onehot_encode"]

FLOW_CONTROLS = ("wormhole", "cut_through")


def full_rate_depth(link_latency, credit_delay):
    """Flits per VC buffer for one VC to take a packet at a flit per cycle, head included, over
    links of ``link_latency`` cycles: ``4 + 2 * link_latency + credit_delay`` (the credit round
    trip, module docstring "Credits")."""
    return 4 + 2 * link_latency + credit_delay


#: Destination field of ``RouterHead`` (bits 0..9 of a head's payload).
DEST_BITS = 10
#: ``1 + flits`` of a head (13 bits).
LENGTH_BITS = 13


class VCState(enum.Enum, shape=2):
    """State of an input virtual channel (BookSim's ``VC::eVCState``)."""
    IDLE = 0       #: no packet
    ROUTING = 1    #: head at the buffer front, route being computed
    VC_ALLOC = 2   #: waiting for an output VC
    ACTIVE = 3     #: output VC held; flits compete for the switch


def _check_int(name, value, lo, hi=None):
    if (isinstance(value, bool) or not isinstance(value, int) or value < lo
            or (hi is not None and value > hi)):
        bound = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
        raise ValueError(f"{name} must be {bound}, not {value!r}")


#: Virtual channels per port and flits per VC buffer at most (``RouterParams``).
MAX_VCS = 16
MAX_VC_BUF_DEPTH = 4096


class RouterParams:
    """The router's parameters (BookSim names), checked at construction.

    Parameters
    ----------
    num_ports : int
        Input and output ports (network and local ports together; several local ports give
        concentration), 1..32.
    num_vcs : int
        Virtual channels per port, 1..16.
    vc_buf_depth : int
        Flits per VC buffer, 2..4096.
    flit_width : int
        Payload bits per flit, at least 32 (a ``RouterHead``).
    credit_delay : int
        Register stages on the credit path out of the router, 1..16 (at least one: with none,
        credits would form combinational paths through neighbouring routers).
    flow_control : str
        ``"wormhole"`` or ``"cut_through"``.

    Raises
    ------
    ValueError
        Naming the parameter and the value.
    """

    def __init__(self, num_ports, num_vcs=2, vc_buf_depth=8, flit_width=128, credit_delay=1,
                 flow_control="wormhole"):
        _check_int("num_ports", num_ports, 1, 32)
        _check_int("num_vcs", num_vcs, 1, MAX_VCS)
        _check_int("vc_buf_depth", vc_buf_depth, 2, MAX_VC_BUF_DEPTH)
        _check_int("flit_width", flit_width, ROUTER_HEAD_BITS)
        _check_int("credit_delay", credit_delay, 1, 16)
        if flow_control not in FLOW_CONTROLS:
            raise ValueError(f"flow_control must be one of {', '.join(map(repr, FLOW_CONTROLS))}, "
                             f"not {flow_control!r}")
        self.num_ports = num_ports
        self.num_vcs = num_vcs
        self.vc_buf_depth = vc_buf_depth
        self.flit_width = flit_width
        self.credit_delay = credit_delay
        self.flow_control = flow_control

    def __repr__(self):
        return (f"RouterParams(num_ports={self.num_ports}, num_vcs={self.num_vcs}, "
                f"vc_buf_depth={self.vc_buf_depth}, flit_width={self.flit_width}, "
                f"credit_delay={self.credit_delay}, flow_control={self.flow_control!r})")

    @property
    def flit_layout(self):
        return RouterFlit(self.flit_width, self.num_vcs)

    def full_rate_depth(self, link_latency):
        """``vc_buf_depth`` one VC needs for a flit per cycle over links of ``link_latency``
        (:func:`full_rate_depth` with these parameters' ``credit_delay``)."""
        return full_rate_depth(link_latency, self.credit_delay)


class RouterChannel(wiring.Signature):
    """A router link seen from its sender: a flit out (no ready: credits guarantee room) and a
    credit pulse per VC back.

    Members
    -------
    valid : ``Out(1)``
    flit : ``Out(RouterFlit(flit_width, num_vcs))``
    credit : ``In(num_vcs)``
        Bit ``v``: one credit of VC ``v`` returned this cycle.
    """

    def __init__(self, flit_width, num_vcs):
        super().__init__({"valid": Out(1), "flit": Out(RouterFlit(flit_width, num_vcs)),
                          "credit": In(num_vcs)})


def pack_routes(table):
    """A routing table as one constant word: the output ports (``len(range(num_ports))`` bits
    each, destination 0 lowest), then one dateline bit per destination."""
    pw = len(Signal(range(table.num_ports)))
    word = sum(p << (i * pw) for i, p in enumerate(table.out_port))
    return word | sum(int(d) << i for i, d in enumerate(table.dateline)) << (pw * table.num_dests)


def routes_width(table):
    return table.num_dests * (len(Signal(range(table.num_ports))) + 1)


def onehot_encode(bits, width):
    """Binary index of a one-hot ``bits`` (``width`` bits; 0 when empty)."""
    if width == 0:
        return Const(0, 0)
    return Cat(*(Cat(*(bits[i] for i in range(len(bits)) if i >> k & 1)).any()
                 for k in range(width)))


def _onehot_select(sel, values, width):
    """AND-OR multiplexer: the value whose ``sel`` bit is set (0 when none)."""
    acc = Const(0, width)
    for i, v in enumerate(values):
        acc = acc | (v.as_value() if hasattr(v, "as_value") else v) & Cat(*([sel[i]] * width))
    return acc


class RouteCompute(wiring.Component):
    """Output port and allowed output VCs of a head flit (combinational).

    Parameters
    ----------
    table : RoutingTable
        This router's table.
    in_port : int
        The input port this instance serves (its dimension decides whether the VC class is
        kept).
    num_vcs : int

    Members
    -------
    dest : ``In(10)``
        The head's destination.
    in_class : ``In(1)``
        VC class of the input VC (1 if its index is in the upper half, torus only).
    port : ``Out(range(num_ports))``
    vc_mask : ``Out(num_vcs)``
        Output VCs the packet may take: all VCs with one VC class or at a local/switch port;
        on a torus link ``[0, V/2)`` for class 0 and ``[V/2, V)`` for class 1.
    """

    def __init__(self, table, in_port, num_vcs, routes=None):
        if not isinstance(table, RoutingTable):
            raise ValueError(f"table must be a RoutingTable, not {table!r}")
        _check_int("in_port", in_port, 0, table.num_ports - 1)
        _check_int("num_vcs", num_vcs, 1, 16)
        if table.vc_classes == 2 and num_vcs % 2:
            raise ValueError(f"num_vcs must be even with dateline VC classes (torus), "
                             f"not {num_vcs!r}")
        if table.num_dests > 1 << DEST_BITS:
            raise ValueError(f"a routing table has at most {1 << DEST_BITS} destinations, "
                             f"not {table.num_dests!r}")
        self.table = table
        self.in_port = in_port
        self.num_vcs = num_vcs
        self._routes = routes
        super().__init__({"dest": In(DEST_BITS), "in_class": In(1),
                          "port": Out(range(table.num_ports)), "vc_mask": Out(num_vcs)})

    def elaborate(self, platform):
        m = Module()
        t, v = self.table, self.num_vcs
        pw = len(self.port)
        routes = self._routes if self._routes is not None else Const(
            pack_routes(t), t.num_dests * (pw + 1))
        m.d.comb += self.port.eq(select_word(routes[:pw * t.num_dests], self.dest, pw,
                                             t.num_dests))
        if t.vc_classes == 1:
            m.d.comb += self.vc_mask.eq((1 << v) - 1)
            return m
        here = t.port_dim[self.in_port]
        local = sum(int(d is None) << o for o, d in enumerate(t.port_dim))
        same = sum(int(here is not None and d == here) << o for o, d in enumerate(t.port_dim))
        cross = select_word(routes[pw * t.num_dests:], self.dest, 1, t.num_dests)
        is_local = select_word(Const(local, t.num_ports), self.port, 1, t.num_ports)
        keep = select_word(Const(same, t.num_ports), self.port, 1, t.num_ports)
        cls = Signal()
        half = v // 2
        m.d.comb += cls.eq(cross | (keep & self.in_class))
        with m.If(is_local):
            m.d.comb += self.vc_mask.eq((1 << v) - 1)
        with m.Elif(cls):
            m.d.comb += self.vc_mask.eq(((1 << half) - 1) << half)
        with m.Else():
            m.d.comb += self.vc_mask.eq((1 << half) - 1)
        return m


class InputUnit(wiring.Component):
    """One input port: a buffer, a state machine and a ``RouteCompute`` per virtual channel.

    Parameters
    ----------
    params : RouterParams
    table : RoutingTable
    port : int
        This input port's index.

    Members
    -------
    valid, flit : ``In(1)``, ``In(RouterFlit)``
        The flit arriving this cycle (BW: written into buffer ``flit.vc``).
    credit : ``Out(num_vcs)``
        Credit pulses for popped flits (combinational from ``pop``).
    state : ``Out(VCState)`` per VC
    front_valid : ``Out(num_vcs)``
        The VC's buffer is not empty.
    front : ``Out(RouterFlit)`` per VC
        The flit at the buffer front.
    route_port : ``Out(range(num_ports))`` per VC
        Output port of the current packet (valid from vc_alloc on).
    route_mask : ``Out(num_vcs)`` per VC
        Output VCs the current packet may take.
    length : ``Out(13)`` per VC
        Flits of the current packet (1 + the head's ``flits``).
    out_vc : ``Out(range(num_vcs))`` per VC
        Output VC granted (valid in active).
    vc_grant : ``In(num_vcs)``; ``vc_grant_vc`` : ``In(range(num_vcs))`` per VC
        From the ``VCAllocator``.
    pop : ``In(num_vcs)``
        From the ``SwitchAllocator``: the VC's front flit leaves this cycle.
    overflow : ``Out(1)``
        Sticky: a flit arrived at a full buffer (a credit error; never happens when the
        upstream counts credits).
    """

    def __init__(self, params, table, port, routes=None):
        self.params, self.table, self.port = params, table, port
        self._routes = routes
        p, v = params.num_ports, params.num_vcs
        layout = params.flit_layout
        vcw = max(1, vc_bits(v))
        super().__init__({
            "valid": In(1), "flit": In(layout), "credit": Out(v),
            "state": Out(VCState).array(v), "front_valid": Out(v),
            "front": Out(layout).array(v), "route_port": Out(range(p)).array(v),
            "route_mask": Out(v).array(v), "length": Out(LENGTH_BITS).array(v),
            "out_vc": Out(vcw).array(v), "vc_grant": In(v), "vc_grant_vc": In(vcw).array(v),
            "pop": In(v), "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        prm = self.params
        v = prm.num_vcs
        layout = prm.flit_layout
        half = v // 2
        for i in range(v):
            buf = make_fifo(width=layout.size, depth=prm.vc_buf_depth)
            m.submodules[f"vc{i}"] = buf
            rc = RouteCompute(self.table, self.port, v, routes=self._routes)
            m.submodules[f"rc{i}"] = rc
            w_en = Signal(name=f"w_en{i}")
            m.d.comb += w_en.eq(self.valid & (eq_const(self.flit.vc, i) if v > 1 else 1))
            front = data.View(layout, buf.r_data)
            m.d.comb += [
                buf.w_en.eq(w_en), buf.w_data.eq(self.flit),
                buf.r_en.eq(self.pop[i]),
                self.front[i].eq(buf.r_data), self.front_valid[i].eq(buf.r_rdy),
                self.credit[i].eq(self.pop[i] & buf.r_rdy),
                rc.dest.eq(front.payload[:DEST_BITS]),
                rc.in_class.eq(i >= half if self.table.vc_classes == 2 else 0),
            ]
            with m.If(w_en & ~buf.w_rdy):
                m.d.sync += self.overflow.eq(1)
            state = self.state[i]
            st = state.as_value()
            with m.If(eq_const(st, VCState.IDLE.value)):
                with m.If(buf.r_rdy | w_en):
                    m.d.sync += state.eq(VCState.ROUTING)
            with m.Elif(eq_const(st, VCState.ROUTING.value)):
                m.d.sync += [
                    self.route_port[i].eq(rc.port),
                    self.route_mask[i].eq(rc.vc_mask),
                    self.length[i].eq(front.payload[20:ROUTER_HEAD_BITS] + 1),
                    state.eq(VCState.VC_ALLOC),
                ]
            with m.Elif(eq_const(st, VCState.VC_ALLOC.value)):
                with m.If(self.vc_grant[i]):
                    m.d.sync += [self.out_vc[i].eq(self.vc_grant_vc[i]),
                                 state.eq(VCState.ACTIVE)]
            with m.Else():
                with m.If(self.pop[i] & is_tail_kind(front.kind.as_value())):
                    with m.If(ge_const(buf.level, 2) | w_en):
                        m.d.sync += state.eq(VCState.ROUTING)
                    with m.Else():
                        m.d.sync += state.eq(VCState.IDLE)
        return m


class VCAllocator(wiring.Component):
    """Separable input-first VC allocator with round-robin arbiters.

    Stage 1: each requesting input VC picks one output VC among ``req_mask`` (round-robin).
    Stage 2: each output VC picks one of the input VCs that picked it (round-robin over all
    ``num_ports * num_vcs`` input VCs). A stage-1 arbiter moves its priority only when its
    choice won stage 2.

    Parameters
    ----------
    num_ports, num_vcs : int

    Members
    -------
    req : ``In(num_ports * num_vcs)``
        Input VC ``i = port * num_vcs + vc`` is in vc_alloc.
    req_port : ``In(range(num_ports))`` per input VC
    req_mask : ``In(num_vcs)`` per input VC
        Output VCs of ``req_port`` it may take and that are free (and, for cut-through, have
        room for the packet).
    grant : ``Out(num_ports * num_vcs)``
    grant_vc : ``Out(range(num_vcs))`` per input VC
    taken : ``Out(num_ports * num_vcs)``
        Output VC ``port * num_vcs + vc`` is granted to some input VC this cycle.
    """

    def __init__(self, num_ports, num_vcs):
        _check_int("num_ports", num_ports, 1, 32)
        _check_int("num_vcs", num_vcs, 1, 16)
        self.num_ports, self.num_vcs = num_ports, num_vcs
        n = num_ports * num_vcs
        vcw = max(1, vc_bits(num_vcs))
        super().__init__({"req": In(n), "req_port": In(range(num_ports)).array(n),
                          "req_mask": In(num_vcs).array(n), "grant": Out(n),
                          "grant_vc": Out(vcw).array(n), "taken": Out(n)})

    def elaborate(self, platform):
        m = Module()
        p, v = self.num_ports, self.num_vcs
        n = p * v
        choice = []
        for i in range(n):
            arb = m.submodules[f"in{i}"] = RoundRobinArbiter(v)
            m.d.comb += [arb.requests.eq(self.req_mask[i] & Cat(*([self.req[i]] * v))),
                         arb.advance.eq(self.grant[i])]
            choice.append(arb.grant)
            m.d.comb += self.grant_vc[i].eq(onehot_encode(arb.grant, len(self.grant_vc[i])))
        # to_port[i][o]: input VC i asks for output port o (one comparison, shared by the VCs)
        to_port = []
        for i in range(n):
            row = Signal(p, name=f"to_port{i}")
            m.d.comb += row.eq(Cat(*(eq_const(self.req_port[i], o) if p > 1 else 1
                                     for o in range(p))))
            to_port.append(row)
        grants = []
        for o in range(p):
            for w in range(v):
                arb = m.submodules[f"out{o}_{w}"] = RoundRobinArbiter(n)
                m.d.comb += [
                    arb.requests.eq(Cat(*(choice[i][w] & to_port[i][o] for i in range(n)))),
                    arb.advance.eq(1),
                    self.taken[o * v + w].eq(arb.valid),
                ]
                grants.append(arb.grant)
        m.d.comb += self.grant.eq(Cat(*(Cat(*(g[i] for g in grants)).any() for i in range(n))))
        return m


class SwitchAllocator(wiring.Component):
    """Separable input-first switch allocator with round-robin arbiters.

    Stage 1: each input port picks one of its requesting VCs; stage 2: each output port picks one
    of the input ports whose choice targets it. At most one flit per input and per output port.

    Parameters
    ----------
    num_ports, num_vcs : int

    Members
    -------
    req : ``In(num_ports * num_vcs)``
        Input VC ``i`` is active, has a flit and a credit for its output VC.
    req_port : ``In(range(num_ports))`` per input VC
    grant : ``Out(num_ports * num_vcs)``
        The VC's front flit crosses the switch this cycle.
    in_sel : ``Out(num_vcs)`` per input port
        One-hot: the VC this input port sends (valid when the port is granted).
    out_valid : ``Out(num_ports)``
    out_sel : ``Out(num_ports)`` per output port
        One-hot: the input port this output port takes.
    """

    def __init__(self, num_ports, num_vcs):
        _check_int("num_ports", num_ports, 1, 32)
        _check_int("num_vcs", num_vcs, 1, 16)
        self.num_ports, self.num_vcs = num_ports, num_vcs
        n = num_ports * num_vcs
        super().__init__({"req": In(n), "req_port": In(range(num_ports)).array(n),
                          "grant": Out(n), "in_sel": Out(num_vcs).array(num_ports),
                          "out_valid": Out(num_ports), "out_sel": Out(num_ports).array(num_ports)})

    def elaborate(self, platform):
        m = Module()
        p, v = self.num_ports, self.num_vcs
        pw = len(self.req_port[0])
        in_arbs, in_port = [], []
        for q in range(p):
            arb = m.submodules[f"in{q}"] = RoundRobinArbiter(v)
            m.d.comb += [arb.requests.eq(self.req[q * v:(q + 1) * v]),
                         self.in_sel[q].eq(arb.grant)]
            in_arbs.append(arb)
            target = Signal(range(p), name=f"target{q}")
            m.d.comb += target.eq(_onehot_select(arb.grant, [self.req_port[q * v + w]
                                                             for w in range(v)], pw))
            in_port.append(target)
        out_grants = []
        for o in range(p):
            arb = m.submodules[f"out{o}"] = RoundRobinArbiter(p)
            m.d.comb += [
                arb.requests.eq(Cat(*(in_arbs[q].valid & (eq_const(in_port[q], o) if p > 1 else 1)
                                      for q in range(p)))),
                arb.advance.eq(1),
                self.out_valid[o].eq(arb.valid),
                self.out_sel[o].eq(arb.grant),
            ]
            out_grants.append(arb.grant)
        for q in range(p):
            won = Signal(name=f"won{q}")
            m.d.comb += [won.eq(Cat(*(g[q] for g in out_grants)).any()),
                         in_arbs[q].advance.eq(won)]
            for w in range(v):
                m.d.comb += self.grant[q * v + w].eq(won & in_arbs[q].grant[w])
        return m


class Crossbar(wiring.Component):
    """``num_ports`` x ``num_ports`` crossbar: output ``o`` takes the input whose bit is set in
    ``sel[o]`` (one-hot; all-zero gives zero).

    Members
    -------
    inp : ``In(shape)`` per input port
    sel : ``In(num_ports)`` per output port
    out : ``Out(shape)`` per output port
    """

    def __init__(self, num_ports, shape):
        _check_int("num_ports", num_ports, 1, 32)
        self.num_ports, self.shape = num_ports, shape
        super().__init__({"inp": In(shape).array(num_ports), "sel": In(num_ports).array(num_ports),
                          "out": Out(shape).array(num_ports)})

    def elaborate(self, platform):
        m = Module()
        width = len(self.inp[0].as_value())
        for o in range(self.num_ports):
            m.d.comb += self.out[o].eq(_onehot_select(self.sel[o], list(self.inp), width))
        return m


class Router(wiring.Component):
    """The router (see the module docstring for the pipeline and its timing).

    Parameters
    ----------
    params : RouterParams
    table : RoutingTable
        This router's routes; ``table.num_ports`` must equal ``params.num_ports``.
    table_input : bool
        Take the routes from the input ``routes`` (``pack_routes(table)``, driven by a constant
        at the instance) instead of constants inside: then every router of a network is the
        same Verilog module (``RouterNetwork`` converts it once).

    Members
    -------
    inp : ``In(RouterChannel(flit_width, num_vcs))`` per port
        Flits in, credits out.
    out : ``Out(RouterChannel(flit_width, num_vcs))`` per port
        Flits out (registered), credits in.
    error : ``Out(1)``
        Sticky: some VC buffer overflowed.
    out_open : ``In(num_ports)``
        Bit ``o``: output ``o`` may send this cycle (its link's rate limit, ``hdl.rate``;
        default all ones): switch allocation treats a closed output like one without credit.
    routes : ``In(routes_width(table))``
        Only with ``table_input``.

    Attributes
    ----------
    busy : list of list of Signal
        ``busy[o][w]``: output VC ``w`` of port ``o`` is held by a packet (not a port; public
        for the formal harness, ``tb/formal/router.py``).

    Raises
    ------
    ValueError
        If ``params`` is not a ``RouterParams``, ``table`` not a ``RoutingTable`` of as many
        ports, or a torus table is given an odd ``num_vcs``.
    """

    def __init__(self, params, table, *, table_input=False):
        if not isinstance(params, RouterParams):
            raise ValueError(f"params must be a RouterParams, not {params!r}")
        if not isinstance(table, RoutingTable):
            raise ValueError(f"table must be a RoutingTable, not {table!r}")
        if table.num_ports != params.num_ports:
            raise ValueError(f"the routing table has {table.num_ports} ports but num_ports is "
                             f"{params.num_ports!r}")
        if table.vc_classes == 2 and params.num_vcs % 2:
            raise ValueError(f"num_vcs must be even with dateline VC classes (torus), "
                             f"not {params.num_vcs!r}")
        self.params, self.table = params, table
        self.table_input = bool(table_input)
        ch = RouterChannel(params.flit_width, params.num_vcs)
        members = {"inp": In(ch).array(params.num_ports),
                   "out": Out(ch).array(params.num_ports), "error": Out(1),
                   "out_open": In(params.num_ports, init=(1 << params.num_ports) - 1)}
        if self.table_input:
            members["routes"] = In(routes_width(table))
        super().__init__(members)
        self.busy = [[Signal(name=f"busy{o}_{w}") for w in range(params.num_vcs)]
                     for o in range(params.num_ports)]

    def elaborate(self, platform):
        m = Module()
        prm = self.params
        p, v, d = prm.num_ports, prm.num_vcs, prm.vc_buf_depth
        n = p * v
        layout = prm.flit_layout
        vcw = vc_bits(v)
        units = []
        for q in range(p):
            iu = m.submodules[f"input{q}"] = InputUnit(
                prm, self.table, q, routes=self.routes if self.table_input else None)
            units.append(iu)
            m.d.comb += [iu.valid.eq(self.inp[q].valid), iu.flit.eq(self.inp[q].flit)]
            credit = iu.credit
            for k in range(prm.credit_delay):
                reg = Signal(v, name=f"credit{q}_d{k}")
                m.d.sync += reg.eq(credit)
                credit = reg
            m.d.comb += self.inp[q].credit.eq(credit)
        m.d.comb += self.error.eq(Cat(*(iu.overflow for iu in units)).any())

        # Output VC state: credit counters (hdl.credit in credit mode) and busy flags.
        cc_config = NIConfig(flow_control="credit", rx_buffer_depth=d)
        counters = [[None] * v for _ in range(p)]
        busy = self.busy
        has_credit = Signal(n)
        credits = []
        for o in range(p):
            row = []
            for w in range(v):
                cc = m.submodules[f"credits{o}_{w}"] = CreditCounter(cc_config)
                counters[o][w] = cc
                m.d.comb += [cc.credit_in.eq(self.out[o].credit[w]), cc.head.eq(1),
                             has_credit[o * v + w].eq(cc.ready & self.out_open[o])]
                row.append(cc.credits)
            credits.append(row)

        # VC allocation.
        va = m.submodules.vc_allocator = VCAllocator(p, v)
        cut_through = prm.flow_control == "cut_through"
        busy_vec = Cat(*(busy[o][w] for o in range(p) for w in range(v)))
        for q, iu in enumerate(units):
            for w in range(v):
                i = q * v + w
                free = ~select_word(busy_vec, iu.route_port[w], v, p)
                mask = Signal(v, name=f"va_mask{i}")
                if cut_through:
                    cw = len(credits[0][0])
                    cred_vec = Cat(*(credits[o][x] for o in range(p) for x in range(v)))
                    short = ~iu.length[w][cw:].any() if cw < LENGTH_BITS else Const(1, 1)
                    port_credits = select_word(cred_vec, iu.route_port[w], cw * v, p)
                    room = Cat(*(short & (port_credits[x * cw:(x + 1) * cw] >= iu.length[w][:cw])
                                 for x in range(v)))
                    m.d.comb += mask.eq(iu.route_mask[w] & free & room)
                else:
                    m.d.comb += mask.eq(iu.route_mask[w] & free)
                m.d.comb += [
                    va.req[i].eq(eq_const(iu.state[w].as_value(), VCState.VC_ALLOC.value)),
                    va.req_port[i].eq(iu.route_port[w]),
                    va.req_mask[i].eq(mask),
                    iu.vc_grant[w].eq(va.grant[i]),
                    iu.vc_grant_vc[w].eq(va.grant_vc[i]),
                ]
        for o in range(p):
            for w in range(v):
                with m.If(va.taken[o * v + w]):
                    m.d.sync += busy[o][w].eq(1)

        # Switch allocation and traversal.
        sa = m.submodules.switch_allocator = SwitchAllocator(p, v)
        for q, iu in enumerate(units):
            for w in range(v):
                i = q * v + w
                port_credit = select_word(has_credit, iu.route_port[w], v, p)
                m.d.comb += [
                    sa.req[i].eq(eq_const(iu.state[w].as_value(), VCState.ACTIVE.value) & iu.front_valid[w]
                                 & select_word(port_credit, iu.out_vc[w][:vcw], 1, v)),
                    sa.req_port[i].eq(iu.route_port[w]),
                    iu.pop[w].eq(sa.grant[i]),
                ]
        xbar = m.submodules.crossbar = Crossbar(p, layout)
        for q, iu in enumerate(units):
            # the flit this input port sends, with its output VC
            flits = []
            for w in range(v):
                f = Signal(layout, name=f"xin{q}_{w}")
                m.d.comb += [f.kind.eq(iu.front[w].kind), f.payload.eq(iu.front[w].payload)]
                if vcw:
                    m.d.comb += f.vc.eq(iu.out_vc[w][:vcw])
                flits.append(f)
            m.d.comb += xbar.inp[q].eq(_onehot_select(sa.in_sel[q], flits, layout.size))
        for o in range(p):
            m.d.comb += xbar.sel[o].eq(sa.out_sel[o])
            flit = data.View(layout, xbar.out[o].as_value())
            m.d.sync += [self.out[o].valid.eq(sa.out_valid[o]), self.out[o].flit.eq(flit)]
            for w in range(v):
                sent = Signal(name=f"sent{o}_{w}")
                m.d.comb += [sent.eq(sa.out_valid[o] & (eq_const(flit.vc, w) if vcw else 1)),
                             counters[o][w].send.eq(sent)]
                with m.If(sent & is_tail_kind(flit.kind.as_value())):
                    m.d.sync += busy[o][w].eq(0)
        return m

