"""A network link: ``latency`` cycles forward (flits) and ``credit_latency`` backward (credits,
which ride the link of the other direction), in delay lines (``DelayLine``: a memory used as a
circular buffer, registers for very short links): one for both when the two latencies are equal."""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import NIConfig, check_int
from .delay_line import DelayLine
from .rate import RATE_STEPS, RateLimiter
from .flit import FlitStream

__all__ = ["Link", "built_links"]


class Link(wiring.Component):
    """One directed link with its credit return path (BookSim ``credit_delay``).

    A flit presented on ``flit_in`` in cycle t appears on ``flit_out`` in cycle
    t + ``latency``; a credit pulse on ``credit_in`` (from the receiver) appears on
    ``credit_out`` (to the sender) ``credit_latency`` cycles later. Latency 0 is a wire.
    There is no back-pressure: the sender's credits guarantee room at the receiver. Equal
    latencies share one ``hdl.delay_line.DelayLine``; valid and credit bits read 0 until their
    delay line is ``defined``, as a register chain's would.

    Parameters
    ----------
    config : NIConfig
    latency : int, optional
        Cycles of the flits, ``0..config.link_latency`` (default ``config.link_latency``; the
        receive FIFOs are sized for ``config.link_latency``, ``NIConfig.full_rate_rx_depth``).
    credit_latency : int, optional
        Cycles of the credits back, the latency of the link the other way (same range; default
        ``latency``).
    rate : int, optional
        Flits per ``RATE_STEPS`` cycles (``hdl.rate``; default ``RATE_STEPS``, a flit every
        cycle): below it ``open`` follows a ``RateLimiter`` in windows of the NI buffer's
        ``config.buffer_banks`` cycles, so that an NI send engine keeps its bank slots.
    registered_ends : bool, optional
        The NIs at both ends register their inputs (``NetworkInterface(registered_inputs=
        True)``): that register is the last cycle of the flits' and of the credits' latency, so
        the delay lines are a cycle shorter. The latencies must be at least 1. (The NIs also
        register their reset and start, so each runs a cycle later than without the registers,
        and sees ``open`` a cycle later: the rate pattern as it was.)

    Raises
    ------
    ValueError
        If ``config`` is not an ``NIConfig`` or a latency is out of its range (naming it).

    Members
    -------
    flit_in : ``In(FlitStream(flit_width))``
    flit_out : ``Out(FlitStream(flit_width))``
    credit_in : ``In(1)``
        Credit pulse from the receiving NI.
    credit_out : ``Out(1)``
        Credit pulse to the sending NI.
    open : ``Out(1)``
        The sender may issue a flit this cycle (the rate limit; always 1 at full rate).
    """

    def __init__(self, config, latency=None, credit_latency=None, rate=RATE_STEPS,
                 registered_ends=False):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        latency = config.link_latency if latency is None else latency
        credit_latency = latency if credit_latency is None else credit_latency
        lowest = int(bool(registered_ends))     # the NIs' input register is the last cycle
        try:
            for name, value in (("latency", latency), ("credit_latency", credit_latency)):
                check_int(f"link {name}", value, lowest, config.link_latency)
            check_int("link rate", rate, 1, RATE_STEPS)
        except ValueError:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise
        self._config = config
        self.latency, self.credit_latency, self.rate = latency, credit_latency, rate
        self.registered_ends = bool(registered_ends)
        flit = FlitStream(config.flit_width)
        super().__init__({
            "flit_in": In(flit),
            "flit_out": Out(flit),
            "credit_in": In(1),
            "credit_out": Out(1),
            "open": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        flit = Cat(self.flit_in.valid, self.flit_in.payload)
        ends = int(self.registered_ends)
        latency, credit_latency = self.latency - ends, self.credit_latency - ends
        if latency == credit_latency:
            m.submodules.delay = delay = DelayLine(len(flit) + 1, latency)
            m.d.comb += delay.i.eq(Cat(flit, self.credit_in))
            out, credit, credit_defined = delay.o[:-1], delay.o[-1], delay.defined
            flit_defined = delay.defined
        else:
            m.submodules.delay = delay = DelayLine(len(flit), latency)
            m.submodules.credit_delay = back = DelayLine(1, credit_latency)
            m.d.comb += [delay.i.eq(flit), back.i.eq(self.credit_in)]
            out, flit_defined = delay.o, delay.defined
            credit, credit_defined = back.o[0], back.defined
        m.d.comb += [
            self.flit_out.valid.eq(out[0] & flit_defined),
            self.flit_out.payload.eq(out[1:]),
            self.credit_out.eq(credit & credit_defined),
        ]
        if self.rate < RATE_STEPS:
            m.submodules.rate = limiter = RateLimiter(self.rate, self._config.buffer_banks)
            m.d.comb += self.open.eq(limiter.open)
        else:
            m.d.comb += self.open.eq(1)
        return m


def built_links(topology, most):
    """How the network builds every directed link: ``{(u, v): (latency, rate)}`` over
    ``topology.links`` (switch links included).

    A hardware topology (``allreduce_rtl.plan.hardware_topology``) gives every link its
    ``latency`` (cycles) and ``rate`` (flits per ``RATE_STEPS`` cycles, ``hdl.rate``); any other
    topology is built with ``most`` cycles at full rate on every link (the topology's own
    latencies and bandwidths are then not read).

    Parameters
    ----------
    topology : golden_model.topology.Topology
    most : int
        ``NIConfig.link_latency``: the largest latency allowed (the receive FIFOs and router
        buffers are sized for it).

    Raises
    ------
    ValueError
        If a hardware topology's link has a latency not in ``0..most`` or a rate not in
        ``1..RATE_STEPS`` (the message names the link).
    """
    g = topology.graph
    if not all("rate" in attrs for _, _, attrs in g.edges(data=True)):
        return {link: (most, RATE_STEPS) for link in topology.links}
    out = {}
    for u, v, attrs in g.edges(data=True):
        where = f"link {topology.label(u)}->{topology.label(v)}"
        check_int(f"latency of {where}", attrs["latency"], 0, most)
        check_int(f"rate of {where}", attrs["rate"], 1, RATE_STEPS)
        out[(u, v)] = (attrs["latency"], attrs["rate"])
    return out
