"""A fixed delay of ``latency`` cycles: a circular buffer in a one-read, one-write memory.

Long links (the MultiTree paper's 150 cycles board to board) were chains of registers: 150
stages x ~140 bits per direction and link made the torus:4x4 network 12 MB of Verilog and most
of its Verilator build and simulation time. A delay line keeps the words in a ``hdl.ram.RAM`` of
``latency`` words (one write port, one synchronous read port, no transparency: block RAM on an
FPGA, an SRAM macro in an ASIC flow) with one pointer: in cycle t word ``ptr`` is written and word
``ptr + 1`` (mod ``latency``) is read, which was written ``latency - 1`` cycles before, and the
read data is on the output one cycle later, so a word in at t is out at t + ``latency``.

The memory's contents are not defined after reset (an ASIC SRAM's are not). ``defined`` is 0 for
the first ``latency`` cycles after reset, while the output still shows words never written; the
user masks the bits that must read 0 there (a link masks its valid and credit bits, which is what
a register chain reset to 0 gives). Short delays (``latency <= REGISTER_MAX``) are register
chains (reset to 0, ``defined`` always 1), which are smaller there than a memory with its pointer.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .ram import RAM

__all__ = ["DelayLine", "REGISTER_MAX"]

#: Delays up to this many cycles are register chains: a memory needs its pointer, its address
#: compare and an output register besides the words, more than two register stages.
REGISTER_MAX = 2


class DelayLine(wiring.Component):
    """``o`` in cycle t + ``latency`` is ``i`` of cycle t.

    Parameters
    ----------
    width : int
        Bits per word (at least 1).
    latency : int
        Cycles of delay (at least 0; 0 is a wire).

    Members
    -------
    i : ``In(width)``
    o : ``Out(width)``
    defined : ``Out(1)``
        ``o`` is a word that was put on ``i`` since reset (0 in the first ``latency`` cycles of a
        memory delay line; always 1 for a register chain, whose stages reset to 0).

    Raises
    ------
    ValueError
        If ``width`` < 1 or ``latency`` < 0 (or either is not an integer).
    """

    def __init__(self, width, latency):
        for name, value, lo in (("width", width, 1), ("latency", latency, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise ValueError(f"delay line {name} must be an integer >= {lo}, not {value!r}")
        self.width, self.latency = width, latency
        super().__init__({"i": In(width), "o": Out(width), "defined": Out(1)})

    @property
    def uses_memory(self):
        """True when the delay is a memory (``latency > REGISTER_MAX``)."""
        return self.latency > REGISTER_MAX

    def elaborate(self, platform):
        m = Module()
        n = self.latency
        if not self.uses_memory:
            word = self.i
            for k in range(n):
                nxt = Signal(self.width, name=f"stage{k}")
                m.d.sync += nxt.eq(word)
                word = nxt
            m.d.comb += [self.o.eq(word), self.defined.eq(1)]
            return m
        m.submodules.ram = ram = RAM(shape=self.width, depth=n, num_write=1, transparency=[()],
                                     bare=True)
        ptr = Signal(range(n))
        after = Signal(range(n))
        m.d.comb += after.eq(Mux(ptr == n - 1, 0, ptr + 1))
        m.d.sync += ptr.eq(after)
        wr, rd = ram.write[0], ram.read[0]
        m.d.comb += [wr.en.eq(1), wr.addr.eq(ptr), wr.data.eq(self.i),
                     rd.en.eq(1), rd.addr.eq(after), self.o.eq(rd.data)]
        # The word read in cycle t (on o in t+1) was written in t - (n-1); it exists once
        # t >= n-1, i.e. once ptr has reached n-1 for the first time.
        with m.If(ptr == n - 1):
            m.d.sync += self.defined.eq(1)
        return m
