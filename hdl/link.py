"""A network link: ``link_latency`` cycles forward (flits) and backward (credits), one
``DelayLine`` for both (a memory used as a circular buffer, registers for very short links)."""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import NIConfig
from .delay_line import DelayLine
from .flit import FlitStream

__all__ = ["Link"]


class Link(wiring.Component):
    """One directed link with its credit return path (BookSim ``credit_delay`` = latency).

    A flit presented on ``flit_in`` in cycle t appears on ``flit_out`` in cycle
    t + ``link_latency``; a credit pulse on ``credit_in`` (from the receiver) appears on
    ``credit_out`` (to the sender) ``link_latency`` cycles later. Latency 0 is a pair of wires.
    There is no back-pressure: the sender's credits guarantee room at the receiver. Both
    directions share one ``hdl.delay_line.DelayLine`` (they have the same latency); its valid and
    credit bits read 0 until it is ``defined``, as a register chain's would.

    Parameters
    ----------
    config : NIConfig

    Members
    -------
    flit_in : ``In(FlitStream(flit_width))``
    flit_out : ``Out(FlitStream(flit_width))``
    credit_in : ``In(1)``
        Credit pulse from the receiving NI.
    credit_out : ``Out(1)``
        Credit pulse to the sending NI.
    """

    def __init__(self, config):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        flit = FlitStream(config.flit_width)
        super().__init__({
            "flit_in": In(flit),
            "flit_out": Out(flit),
            "credit_in": In(1),
            "credit_out": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        fwd = Cat(self.flit_in.valid, self.flit_in.payload, self.credit_in)
        m.submodules.delay = delay = DelayLine(len(fwd), self._config.link_latency)
        m.d.comb += delay.i.eq(fwd)
        valid, payload, credit = delay.o[0], delay.o[1:-1], delay.o[-1]
        m.d.comb += [
            self.flit_out.valid.eq(valid & delay.defined),
            self.flit_out.payload.eq(payload),
            self.credit_out.eq(credit & delay.defined),
        ]
        return m
