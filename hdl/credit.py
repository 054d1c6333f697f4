"""Link-level flow control: the sender's ``CreditCounter`` and the receiver's ``CreditReturn``.

Modes (``NIConfig.flow_control``):

* ``"credit"``: every flit (head included) takes one credit; the receiver returns one credit per
  flit it pops from its receive FIFO. Initial credits: ``rx_buffer_depth``.
* ``"message"`` (the MultiTree paper's): a message of ``H = 1 + flits`` flits is cut into
  sub-messages of ``submessage_flits`` (S) flits counted from the head, the last one shorter.
  The sender takes one credit at each sub-message's first flit and streams the rest without
  asking; the receiver returns a credit when it pops a sub-message's last flit (or the message's
  last flit). Initial credits: ``rx_buffer_depth // S``. Both sides count positions from the head
  flit, so they agree without any table.

In both modes the FIFO never holds more than ``rx_buffer_depth`` flits.

Full rate (one flit per cycle on the link). In the NI a credit taken in cycle t comes back, at
the earliest, in cycle t + 2 * link_latency + 2 (credit mode) or t + n + 2 * link_latency + 1
after a sub-message of n flits (message mode): 1 cycle buffer read to link, link_latency forward,
1 cycle receive FIFO, the pop returns the credit the same cycle, link_latency back, and the
counter accepts a returning credit in the cycle it arrives. Hence the rule:

* credit mode runs at full rate iff ``rx_buffer_depth >= 2 * link_latency + 2``;
* message mode runs at full rate on whole sub-messages iff
  ``(rx_buffer_depth // S - 1) * S >= 2 * link_latency + 1``.

``rx_buffer_depth >= 2 * link_latency + 2 * S + K`` (``NIConfig.full_rate_rx_depth``) satisfies both
with the K-bank buffer of ``hdl.banked_buffer``, whose reduction lane may pop a flit up to K - 1
cycles late while it waits for its bank slot (that lengthens the loop by as much).
A message shorter than S flits still takes a whole credit, so in message mode a stream of
H-flit messages (H < S) runs at ``min(1, (rx_buffer_depth // S) * H / (H + 2 * link_latency + 1))``
flits per cycle; the tail sub-message of a long message costs a fraction of that.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import NIConfig
from .flit import FlitKind
from .ops import eq_const

__all__ = ["CreditCounter", "CreditReturn"]


class CreditCounter(wiring.Component):
    """Sender side of a link: counts credits and says whether the next flit may go.

    Each cycle the send engine offers at most one flit; it sets ``head`` when that flit starts
    a message, and asserts ``send`` only when ``ready`` is high (``ready`` depends on ``head``
    combinationally but never on ``send``). Credits are not reset by ``start``: after a run they
    all come back by themselves.

    Parameters
    ----------
    config : NIConfig

    Members
    -------
    credit_in : ``In(1)``
        A credit returned by the link this cycle (usable in the same cycle).
    head : ``In(1)``
        The offered flit is a head flit.
    send : ``In(1)``
        The offered flit is sent this cycle.
    ready : ``Out(1)``
        The offered flit may be sent this cycle.
    credits : ``Out(range(initial_credits + 1))``
        Credits held (for tests and debugging).
    """

    def __init__(self, config):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        super().__init__({
            "credit_in": In(1),
            "head": In(1),
            "send": In(1),
            "ready": Out(1),
            "credits": Out(range(config.initial_credits + 1), init=config.initial_credits),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        need = Signal()  # the offered flit starts a sub-message and needs a credit
        if cfg.flow_control == "credit" or cfg.submessage_flits == 1:
            m.d.comb += need.eq(1)
        else:
            s = cfg.submessage_flits
            pos = Signal(range(s))  # position of the last sent flit in its sub-message
            m.d.comb += need.eq(self.head | eq_const(pos, s - 1))
            with m.If(self.send):
                with m.If(need):
                    m.d.sync += pos.eq(0)
                with m.Else():
                    m.d.sync += pos.eq(pos + 1)
        take = Signal()
        m.d.comb += [
            self.ready.eq(~need | self.credits.any() | self.credit_in),
            take.eq(self.send & need),
        ]
        with m.If(self.credit_in & ~take):
            m.d.sync += self.credits.eq(self.credits + 1)
        with m.Elif(take & ~self.credit_in):
            m.d.sync += self.credits.eq(self.credits - 1)
        return m


class CreditReturn(wiring.Component):
    """Receiver side of a link: a credit pulse for every popped flit that frees a credit.

    Parameters
    ----------
    config : NIConfig

    Members
    -------
    pop : ``In(1)``
        A flit leaves the receive FIFO this cycle.
    kind : ``In(FlitKind)``
        Its kind.
    credit : ``Out(1)``
        Credit pulse to the link (combinational from ``pop``; the link registers it).
    """

    def __init__(self, config):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        super().__init__({"pop": In(1), "kind": In(FlitKind), "credit": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        if cfg.flow_control == "credit" or cfg.submessage_flits == 1:
            m.d.comb += self.credit.eq(self.pop)   # every flit is a whole sub-message
            return m
        s = cfg.submessage_flits
        pos = Signal(range(s))   # position of the last popped flit in its sub-message
        cur = Signal(range(s))   # position of the popped flit
        kind = self.kind.as_value()
        is_head = eq_const(kind, FlitKind.HEAD.value) | eq_const(kind, FlitKind.HEAD_TAIL.value)
        is_tail = eq_const(kind, FlitKind.TAIL.value) | eq_const(kind, FlitKind.HEAD_TAIL.value)
        with m.If(is_head | eq_const(pos, s - 1)):
            m.d.comb += cur.eq(0)
        with m.Else():
            m.d.comb += cur.eq(pos + 1)
        m.d.comb += self.credit.eq(self.pop & (eq_const(cur, s - 1) | is_tail))
        with m.If(self.pop):
            m.d.sync += pos.eq(cur)
        return m
