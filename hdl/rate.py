"""A link's rate limit: ``rate`` flits per ``RATE_STEPS`` cycles, in windows of ``window`` cycles.

A link slower than the fastest (a file's 9 GB/s PCIe path beside its 16 GB/s one) carries a flit
in a fraction ``rate / RATE_STEPS`` of the cycles: its sender may send only while ``open`` is
high. Time is cut into windows of ``window`` cycles; of every ``RATE_STEPS`` windows, ``rate``
are open, spread evenly (Bresenham: window w is open when ``floor((w + 1) * rate / RATE_STEPS)
> floor(w * rate / RATE_STEPS)``), so over any ``RATE_STEPS * window`` cycles exactly
``rate * window`` are open and a flit that waits for an open cycle waits at most
``ceil(RATE_STEPS / rate) * window`` cycles. The pattern starts at reset and ignores traffic: an
idle link does not save up its rate.

``window`` is 1 where the sender can stop at any flit (a router's output, an injection port) and
the NI buffer's bank count K where an NI sends (``hdl.banked_buffer``: a send engine reads flit a
only in the cycles its bank has the slot, so it stops for whole multiples of K cycles to keep
its place in the rotation, ``hdl.send_engine``).

The rate is the link's bandwidth over the fastest link's, rounded to the nearest step
(``allreduce_rtl.plan.hardware_topology``, which gives the timing model the rounded bandwidth
too).
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from .config import check_int
from .ops import add_narrow, eq_const, ge_const

__all__ = ["RateLimiter", "RATE_STEPS", "open_cycles"]

#: Steps of a link's rate: a link carries ``rate / RATE_STEPS`` flits per cycle, rate 1..16.
RATE_STEPS = 16


def open_cycles(rate, window, cycles):
    """The cycles ``0..cycles-1`` in which a ``RateLimiter(rate, window)`` is open, as a list of
    bools (the rule of the module docstring, computed independently of the hardware)."""
    return [(w + 1) * rate // RATE_STEPS > w * rate // RATE_STEPS
            for w in (t // window for t in range(cycles))]


class RateLimiter(wiring.Component):
    """``open`` is high in ``rate * window`` of every ``RATE_STEPS * window`` cycles
    (:func:`open_cycles`; always high at ``rate == RATE_STEPS``).

    Parameters
    ----------
    rate : int
        1..RATE_STEPS.
    window : int
        Cycles per window, 1..64.

    Members
    -------
    open : ``Out(1)``

    Raises
    ------
    ValueError
        If ``rate`` or ``window`` is out of range.
    """

    def __init__(self, rate, window=1):
        try:
            check_int("link rate", rate, 1, RATE_STEPS)
            check_int("rate window", window, 1, 64)
        except ValueError:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise
        self.rate, self.window = rate, window
        super().__init__({"open": Out(1)})

    def elaborate(self, platform):
        m = Module()
        if self.rate == RATE_STEPS:
            m.d.comb += self.open.eq(1)
            return m
        # acc = (w * rate) mod RATE_STEPS of the current window w; the window is open when
        # adding the rate carries past RATE_STEPS.
        bits = RATE_STEPS.bit_length() - 1
        acc = Signal(bits)
        m.d.comb += self.open.eq(ge_const(acc, RATE_STEPS - self.rate))
        step = add_narrow(acc, Const(self.rate, bits))
        if self.window == 1:
            m.d.sync += acc.eq(step)
        else:
            phase = Signal(range(self.window))
            last = eq_const(phase, self.window - 1)
            m.d.sync += phase.eq(Mux(last, 0, add_narrow(phase, 1)))
            with m.If(last):
                m.d.sync += acc.eq(step)
        return m
