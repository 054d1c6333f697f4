"""A network link: ``latency`` cycles forward (flits) and ``credit_latency`` backward (credits,
which ride the link of the other direction), in delay lines (``DelayLine``: a memory used as a
circular buffer, registers for very short links): one for both when the two latencies are equal."""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import NIConfig, check_int
from .delay_line import DelayLine
from .flit import FlitStream

__all__ = ["Link", "link_latencies"]


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
    """

    def __init__(self, config, latency=None, credit_latency=None):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        latency = config.link_latency if latency is None else latency
        credit_latency = latency if credit_latency is None else credit_latency
        try:
            for name, value in (("latency", latency), ("credit_latency", credit_latency)):
                check_int(f"link {name}", value, 0, config.link_latency)
        except ValueError:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise
        self._config = config
        self.latency, self.credit_latency = latency, credit_latency
        flit = FlitStream(config.flit_width)
        super().__init__({
            "flit_in": In(flit),
            "flit_out": Out(flit),
            "credit_in": In(1),
            "credit_out": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        flit = Cat(self.flit_in.valid, self.flit_in.payload)
        if self.latency == self.credit_latency:
            m.submodules.delay = delay = DelayLine(len(flit) + 1, self.latency)
            m.d.comb += delay.i.eq(Cat(flit, self.credit_in))
            out, credit, credit_defined = delay.o[:-1], delay.o[-1], delay.defined
            flit_defined = delay.defined
        else:
            m.submodules.delay = delay = DelayLine(len(flit), self.latency)
            m.submodules.credit_delay = back = DelayLine(1, self.credit_latency)
            m.d.comb += [delay.i.eq(flit), back.i.eq(self.credit_in)]
            out, flit_defined = delay.o, delay.defined
            credit, credit_defined = back.o[0], back.defined
        m.d.comb += [
            self.flit_out.valid.eq(out[0] & flit_defined),
            self.flit_out.payload.eq(out[1:]),
            self.credit_out.eq(credit & credit_defined),
        ]
        return m


def link_latencies(topology, most, latencies=None):
    """Every directed link's latency: ``{(u, v): cycles}`` over ``topology.links`` (switch
    links included).

    Parameters
    ----------
    topology : golden_model.topology.Topology
    most : int
        The largest latency allowed (``NIConfig.link_latency``: what the receive FIFOs and
        router buffers are sized for); every link's latency when ``latencies`` is None.
    latencies : mapping, optional
        ``(u, v) -> cycles`` of every link (``allreduce_rtl.plan.HardwarePlan.link_latencies``).

    Raises
    ------
    ValueError
        If a link of the topology has no latency, a key is not a link of it, or a latency is not
        an integer in ``0..most`` (the message names the link).
    """
    links = list(topology.links)
    if latencies is None:
        return {link: most for link in links}
    latencies = dict(latencies)
    missing = [link for link in links if link not in latencies]
    extra = [key for key in latencies if key not in set(links)]
    if missing or extra:
        bad = missing[0] if missing else extra[0]
        raise ValueError(f"link latencies of {topology.spec}: {bad} "
                         f"{'has no latency' if missing else 'is not a link of it'}")
    for (u, v), value in latencies.items():
        check_int(f"latency of link {u}->{v}", value, 0, most)
    return {link: latencies[link] for link in links}
