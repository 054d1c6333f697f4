"""Link-level flow control (``hdl.credit``): the sender's ``CreditCounter``, a ``Link`` each way
and the receiver's receive FIFO (``hdl.fifo.make_fifo``) with its ``CreditReturn``.

The harness is one link of the NI: a sender that offers a flit whenever it likes (``want`` is
free) as a legal message stream (a HEAD, then BODY flits and a TAIL; the flit's payload does not
take part in flow control, so it is left out), sends only when ``CreditCounter.ready`` says so,
and a receiver that pops whenever it likes. A reference model counts what is in flight: a shift
register of ``link_latency`` stages each way beside the link, which the link's output must
equal (``link.exact-delay`` proves that on its own).

Here the sender drives the link directly, so a credit taken in cycle t is back at the earliest
in t + 2L + 1 (L cycles out, one in the FIFO, L back), one cycle less than in the NI, whose buffer
read adds one (``hdl.credit``). With C initial credits a sender that wants to send every cycle
is therefore held at most ``max(0, 2L + 1 - C)`` cycles in a row by a receiver that pops every
cycle it can: the C credits last at least C cycles (one sub-message may be a single flit) and
the first comes back 2L + 1 cycles after it was taken.

Parameters: L = 3 (a memory delay line: above ``hdl.delay_line.REGISTER_MAX``) and a receive
FIFO of 6 entries (a ``BlockFIFO`` memory: above ``hdl.fifo.REGISTER_MAX``), sub-messages of 2
flits in message mode (3 credits). The blocks' logic does not depend on the values beyond
these comparisons: the counters count to C and back, the link and FIFO are the memories used
at every size, and sub-message positions wrap at S; S = 2 already has a first, a last and a
wrapping position.
"""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Mux, Signal

from hdl.config import NIConfig
from hdl.credit import CreditCounter, CreditReturn
from hdl.fifo import make_fifo
from hdl.flit import FlitKind
from hdl.link import Link

from . import FormalProperty, planted
from .harness import ever, reset_once

__all__ = ["PROPERTIES", "CreditLoop"]

LATENCY = 3
RX_DEPTH = 6
SUBMESSAGE = 2
#: Message mode is checked to this many cycles from reset (bounded): the receiver's position in
#: a sub-message is state of ``CreditReturn`` that no invariant over the ports can name, so
#: k-induction does not close. 24 cycles fill and drain the FIFO of 3 sub-messages twice over
#: (2L + 1 = 7 cycles a credit's round trip).
MESSAGE_DEPTH = 18


def _config(mode):
    return NIConfig(flow_control=mode, rx_buffer_depth=RX_DEPTH, link_latency=LATENCY,
                    submessage_flits=SUBMESSAGE)


class _EagerCounter(CreditCounter):
    """Planted bug: sends without a credit (``ready`` always 1)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.ready.eq(1)
        return m


class _LateCounter(CreditCounter):
    """Planted bug: a returning credit is usable one cycle after it arrives, not in the cycle
    it arrives (``ready`` ignores ``credit_in``)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.credits == 0):
            m.d.comb += self.ready.eq(0)
        return m


class _GenerousReturn(CreditReturn):
    """Planted bug: returns a credit for every popped flit, not one per sub-message."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.credit.eq(self.pop)
        return m


class _LeakyReturn(CreditReturn):
    """Planted bug: the credit of a sub-message that ends with a TAIL is never returned."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.kind == FlitKind.TAIL):
            m.d.comb += self.credit.eq(0)
        return m


class CreditLoop(Elaboratable):
    """One link's flow-control loop with the claim ``claim`` asserted.

    Parameters
    ----------
    mode : str
        ``"credit"`` or ``"message"`` (``NIConfig.flow_control``).
    claim : str
        ``"no-overflow"``, ``"conserved"`` or ``"live"``.
    counter, returner : type
        The ``CreditCounter`` and ``CreditReturn`` classes (planted-bug copies or the blocks).
    """

    def __init__(self, mode, claim, counter=CreditCounter, returner=CreditReturn):
        self.config = _config(mode)
        self.claim = claim
        self.counter, self.returner = counter, returner

    def elaborate(self, platform):
        m, rst = reset_once()
        cfg = self.config
        lat, credits0, sub = cfg.link_latency, cfg.initial_credits, cfg.submessage_flits
        m.submodules.counter = counter = self.counter(cfg)
        m.submodules.link = link = Link(cfg)
        m.submodules.fifo = fifo = make_fifo(width=2, depth=cfg.rx_buffer_depth)
        m.submodules.returner = returner = self.returner(cfg)

        want, pop_wish, kind = Signal(), Signal(), Signal(FlitKind)
        m.d.comb += [want.eq(AnySeq(1)), pop_wish.eq(AnySeq(1)), kind.eq(AnySeq(2))]
        in_message = Signal()   # the sender has sent a HEAD and not yet its TAIL
        with m.If(in_message):
            m.d.comb += Assume((kind == FlitKind.BODY) | (kind == FlitKind.TAIL))
        with m.Else():
            m.d.comb += Assume(kind == FlitKind.HEAD)
        send, pop = Signal(), Signal()
        with m.If(send):
            m.d.sync += in_message.eq(kind != FlitKind.TAIL)
        m.d.comb += [
            counter.head.eq(kind == FlitKind.HEAD),
            send.eq(want & counter.ready),
            counter.send.eq(send),
            link.flit_in.valid.eq(send),
            link.flit_in.payload.kind.eq(kind),
            fifo.w_en.eq(link.flit_out.valid),
            fifo.w_data.eq(link.flit_out.payload.kind),
            pop.eq(fifo.r_rdy & pop_wish),
            fifo.r_en.eq(pop),
            returner.pop.eq(pop),
            returner.kind.eq(fifo.r_data),
            link.credit_in.eq(returner.credit),
            counter.credit_in.eq(link.credit_out),
        ]

        # Reference model. The link: what went in, L cycles back. A sub-message starts at a
        # HEAD or after ``sub`` flits (counted from the head); each start takes one credit.
        fwd, bwd = [send], [returner.credit]
        for k in range(lat):
            fwd.append(Signal(name=f"ref_flit{k}"))
            bwd.append(Signal(name=f"ref_credit{k}"))
            m.d.sync += [fwd[-1].eq(fwd[-2]), bwd[-1].eq(bwd[-2])]
        in_flight, credits_back = Signal(range(lat + 1)), Signal(range(lat + 1))
        m.d.comb += [in_flight.eq(sum(fwd[1:])), credits_back.eq(sum(bwd[1:]))]
        starts = Signal()
        per_credit = 1 if cfg.flow_control == "credit" else sub   # flits a credit covers
        if cfg.flow_control == "credit":
            m.d.comb += starts.eq(send)
        else:
            pos = Signal(range(sub))   # position of the last flit sent in its sub-message
            m.d.comb += starts.eq(send & ((kind == FlitKind.HEAD) | (pos == sub - 1)))
            with m.If(send):
                m.d.sync += pos.eq(Mux(starts, 0, pos + 1))
        held = Signal(range(credits0 + 2))   # credits taken and not yet back at the sender
        m.d.sync += held.eq(held + starts - counter.credit_in)

        with m.If(~rst):
            # What the proof needs to be inductive: the link equals its model, credits are
            # never created, and the flits in flight and queued belong to sub-messages whose
            # credit the receiver has not yet returned.
            m.d.comb += [
                Assert(link.flit_out.valid == fwd[-1]),
                Assert(link.credit_out == bwd[-1]),
                Assert(counter.credits + held == credits0),
                Assert(credits_back <= held),
            ]
            queued = in_flight + fifo.level
            if cfg.flow_control == "credit":
                m.d.comb += Assert(queued == held - credits_back)
            else:
                m.d.comb += Assert(queued <= per_credit * (held - credits_back))
            if self.claim == "no-overflow":
                m.d.comb += [
                    Assert(~(fifo.w_en & ~fifo.w_rdy)),
                    Assert(~(starts & (counter.credits == 0) & ~counter.credit_in)),
                ]
                m.d.comb += Cover(fifo.w_en & (fifo.level == cfg.rx_buffer_depth - 1)
                                  & ~fifo.r_en)
            elif self.claim == "conserved":
                idle = (in_flight == 0) & (credits_back == 0) & (fifo.level == 0)
                with m.If(idle & ~in_message):
                    m.d.comb += Assert(counter.credits == credits0)
                m.d.comb += Cover(idle & ~in_message & (counter.credits == credits0)
                                  & ever(m, counter.credit_in))
            elif self.claim == "live":
                bound = max(0, 2 * lat + 1 - credits0)
                m.d.comb += [Assume(want), Assume(pop_wish)]
                waited = Signal(range(2 * lat + 3))
                with m.If(counter.ready):
                    m.d.sync += waited.eq(0)
                with m.Elif(waited <= bound):
                    m.d.sync += waited.eq(waited + 1)
                m.d.comb += Assert(waited <= bound)
                # the bound is reached in credit mode; in message mode the sender is held
                m.d.comb += Cover(waited == (bound if cfg.flow_control == "credit" else 1))
        return m


_LIVE_BOUND = "max(0, 2L + 1 - C)"

PROPERTIES = [
    FormalProperty(
        name=f"credit.{claim}.{mode}",
        claim=text.format(mode=mode),
        build=(lambda bug, mode=mode, claim=claim, bugs=bugs:
               CreditLoop(mode, claim, *(bugs if bug else ()))),
        bug=planted(bugs[0] if bugs[0] is not CreditCounter else bugs[1]),
        depth=depth if mode == "credit" else MESSAGE_DEPTH,
        method="prove" if mode == "credit" else "bmc",
        generalises=__doc__.split("Parameters: ", 1)[1].strip())
    for mode in ("credit", "message")
    for claim, text, bugs, depth in (
        ("no-overflow", "{mode} mode: a sub-message never starts without a credit and the "
         "receive FIFO never gets a flit when full", (_EagerCounter, CreditReturn), 16),
        ("conserved", "{mode} mode: credits held plus credits outstanding always equal the "
         "initial credits, and all are back when the link is idle (each credit returned "
         "exactly once)", (CreditCounter,
                           _GenerousReturn if mode == "message" else _LeakyReturn), 16),
        ("live", "{mode} mode: a sender offering a flit every cycle to a receiver that pops "
         f"every cycle it can waits at most {_LIVE_BOUND} cycles in a row",
         (_LateCounter, CreditReturn), 16),
    )
]
