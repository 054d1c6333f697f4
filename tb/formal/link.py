"""Links (``hdl.link.Link`` on ``hdl.delay_line.DelayLine``): the flit and the credit come out
exactly ``link_latency`` cycles after they went in, and nothing comes out before.

The harness drives every input freely each cycle (valid, a whole flit, a credit) and keeps a
reference model: ``link_latency`` register stages of what went in and a count of the cycles
since reset. Two latencies: 2 (a register chain, ``latency <= REGISTER_MAX``) and 5 (a circular
buffer in a one-read, one-write memory with its pointer and ``defined`` flag). Beyond 5 the
memory only gets deeper and its pointer wider; the claim is the same for every latency because
the pointer visits every word once per ``latency`` cycles, which 5 words (an odd count, not a
power of two, so the pointer wraps before its register would) already show. The flit is the
smallest a ``NIConfig`` allows (4 int32 elements: 128 bits and a 2-bit kind); every bit takes
the same path.
"""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cover, Elaboratable, Signal

from hdl.config import NIConfig
from hdl.flit import Flit
from hdl.link import Link

from . import FormalProperty, planted
from .harness import reset_once

__all__ = ["PROPERTIES", "LinkDelay"]


class _SlowCreditLink(Link):
    """Planted bug: the credit comes back one cycle late."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        late = Signal()
        m.d.sync += late.eq(self.credit_in)
        m.d.comb += self.credit_out.eq(late)
        return m


class LinkDelay(Elaboratable):
    """A ``Link`` of ``latency`` cycles beside its reference model.

    Parameters
    ----------
    latency : int
    link : type
        The ``Link`` class (or its planted-bug copy).
    """

    def __init__(self, latency, link=Link):
        self.config = NIConfig(link_latency=latency, elems_per_flit=4)
        self.link = link

    def elaborate(self, platform):
        m, rst = reset_once()
        lat = self.config.link_latency
        m.submodules.link = link = self.link(self.config)
        flit = self.config.flit_width
        valid, payload, credit = Signal(), Signal(Flit(flit)), Signal()
        m.d.comb += [valid.eq(AnySeq(1)), payload.eq(AnySeq(len(payload.as_value()))),
                     credit.eq(AnySeq(1)),
                     link.flit_in.valid.eq(valid), link.flit_in.payload.eq(payload),
                     link.credit_in.eq(credit)]
        stages = [(valid, payload.as_value(), credit)]
        for k in range(lat):
            stage = (Signal(name=f"ref_valid{k}"), Signal(len(payload.as_value()),
                                                          name=f"ref_payload{k}"),
                     Signal(name=f"ref_credit{k}"))
            m.d.sync += [new.eq(old) for new, old in zip(stage, stages[-1])]
            stages.append(stage)
        ref_valid, ref_payload, ref_credit = stages[-1]
        since = Signal(range(lat + 1))   # cycles since reset, saturating at the latency
        with m.If(since != lat):
            m.d.sync += since.eq(since + 1)
        with m.If(~rst):
            with m.If(since == lat):
                m.d.comb += [Assert(link.flit_out.valid == ref_valid),
                             Assert(link.credit_out == ref_credit)]
                with m.If(ref_valid):
                    m.d.comb += Assert(link.flit_out.payload.as_value() == ref_payload)
            with m.Else():
                m.d.comb += [Assert(~link.flit_out.valid), Assert(~link.credit_out)]
        m.d.comb += Cover((since == lat) & link.flit_out.valid & link.credit_out
                          & ~link.flit_in.valid)
        return m


PROPERTIES = [
    FormalProperty(
        name=f"link.exact-delay.{kind}",
        claim=f"{kind} link (latency {latency}): flit_out and credit_out in cycle t are "
              "flit_in and credit_in of cycle t - latency, and no flit or credit comes out "
              "in the first latency cycles after reset",
        build=lambda bug, latency=latency: LinkDelay(latency,
                                                     _SlowCreditLink if bug else Link),
        bug=planted(_SlowCreditLink),
        depth=latency + 3,
        generalises=__doc__.split("Two latencies: ", 1)[1].strip())
    for kind, latency in (("register", 2), ("memory", 5))
]
