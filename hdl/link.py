"""A network link: ``link_latency`` register stages forward (flits) and backward (credits)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import NIConfig
from .flit import FlitStream

__all__ = ["Link"]


class Link(wiring.Component):
    """One directed link with its credit return path (BookSim ``credit_delay`` = latency).

    A flit presented on ``flit_in`` in cycle t appears on ``flit_out`` in cycle
    t + ``link_latency``; a credit pulse on ``credit_in`` (from the receiver) appears on
    ``credit_out`` (to the sender) ``link_latency`` cycles later. Latency 0 is a pair of wires.
    There is no back-pressure: the sender's credits guarantee room at the receiver.

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
        valid, payload, credit = self.flit_in.valid, self.flit_in.payload, self.credit_in
        for i in range(self._config.link_latency):
            next_valid = Signal(name=f"fwd{i}_valid")
            next_payload = Signal.like(payload, name=f"fwd{i}_flit")
            next_credit = Signal(name=f"bwd{i}_credit")
            m.d.sync += [next_valid.eq(valid), next_payload.eq(payload), next_credit.eq(credit)]
            valid, payload, credit = next_valid, next_payload, next_credit
        m.d.comb += [
            self.flit_out.valid.eq(valid),
            self.flit_out.payload.eq(payload),
            self.credit_out.eq(credit),
        ]
        return m
