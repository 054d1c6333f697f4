"""Round-robin arbiter, the building block of the separable allocators."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RoundRobinArbiter", "first_one"]


def prefix_or(bits):
    """Bit ``i`` is the OR of ``bits[0:i]`` (bit 0 is 0), each one reduction of a slice.

    (A chain ``acc | bits[i - 1]`` of expressions is not shared between the bits: Amaranth's
    Verilog repeats it for every bit, n * n / 2 wires, 1,500 in a 32-input arbiter.)"""
    return [Const(0, 1)] + [bits[:i].any() for i in range(1, len(bits))]


def first_one(bits):
    """One-hot of the lowest set bit of ``bits`` (a priority chain; width-exact in Verilog)."""
    before = prefix_or(bits)
    return Cat(*(bits[i] & ~before[i] if i else bits[0] for i in range(len(bits))))


class RoundRobinArbiter(wiring.Component):
    """Grants one of ``n`` requests; the last winner has the lowest priority next time.

    The grant is combinational from ``requests``. The priority moves only in a cycle with
    ``advance`` high and a grant (so a separable allocator can keep a first-stage choice whose
    second stage lost, as iSLIP does). Priority is kept as a thermometer mask (bit ``i`` set:
    request ``i`` is at or after the pointer), so no variable shift is needed.

    Parameters
    ----------
    n : int
        Number of requesters (>= 1).

    Members
    -------
    requests : ``In(n)``
    advance : ``In(1)``
        Move the priority past this cycle's winner.
    grant : ``Out(n)``
        One-hot (zero when there is no request).
    valid : ``Out(1)``
        Some request was granted.

    Attributes
    ----------
    mask : Signal(n)
        The priority state (not a port): bit ``i`` set when request ``i`` is at or after the
        pointer; all ones after reset. Public for the formal harness (``tb/formal/router.py``).

    Raises
    ------
    ValueError
        If ``n`` is not a positive integer.
    """

    def __init__(self, n):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"arbiter size must be a positive integer, not {n!r}")
        self.n = n
        super().__init__({"requests": In(n), "advance": In(1), "grant": Out(n),
                          "valid": Out(1)})
        self.mask = Signal(n, init=(1 << n) - 1, name="mask")

    def elaborate(self, platform):
        m = Module()
        n = self.n
        if n == 1:
            m.d.comb += [self.grant.eq(self.requests), self.valid.eq(self.requests)]
            return m
        mask = self.mask   # thermometer: bits at or after the pointer
        high = Signal(n)
        m.d.comb += [
            high.eq(self.requests & mask),
            self.grant.eq(Mux(high.any(), first_one(high), first_one(self.requests))),
            self.valid.eq(self.requests.any()),
        ]
        with m.If(self.advance & self.requests.any()):
            # bits strictly after the winner: bit i set iff some grant bit j < i is set
            m.d.sync += mask.eq(Cat(*prefix_or(self.grant)))
        return m
