"""First-word-fall-through FIFOs whose storage is a memory real flows have.

``amaranth.lib.fifo.SyncFIFO`` reads its storage combinationally, which no block RAM or SRAM
macro does, so synthesis makes its entries flip-flops (the NI's four 48-flit receive FIFOs were
most of its flip-flops). ``SyncFIFOBuffered`` reads synchronously but costs one more cycle from
write to read, which would change every cycle count. ``BlockFIFO`` keeps ``SyncFIFO``'s timing
(an entry written in cycle t is on ``r_stream`` in t+1) with a one-write, one-read memory
(``hdl.ram.RAM``): the memory is read in every cycle at the address the head will have in the
next cycle, and that read port is transparent to the write port, so an entry written in the
same cycle is read as written. Block RAMs without a transparent mode get it from Yosys as a
bypass register. Nothing relies on the memory's contents after reset (``r_stream.valid`` comes
from the pointers). Depths up to ``REGISTER_MAX`` entries stay a ``SyncFIFO``, which is smaller
there.
"""

from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib import fifo

from .ram import RAM

__all__ = ["BlockFIFO", "REGISTER_MAX", "make_fifo"]

#: FIFOs up to this many entries are registers (``amaranth.lib.fifo.SyncFIFO``).
REGISTER_MAX = 4


class BlockFIFO(Elaboratable, fifo.FIFOInterface):
    """A FIFO of ``depth`` entries of ``width`` bits in a 1R1W memory, with ``SyncFIFO``'s
    interface (``amaranth.lib.fifo.FIFOInterface``: ``w_en``/``w_data``/``w_rdy``,
    ``r_en``/``r_data``/``r_rdy``, ``w_stream``/``r_stream``, ``level``) and timing.

    Parameters
    ----------
    width : int
    depth : int
        At least 2.

    Raises
    ------
    ValueError
        If ``width`` < 1 or ``depth`` < 2.
    """

    def __init__(self, *, width, depth):
        for name, value, lo in (("width", width, 1), ("depth", depth, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise ValueError(f"FIFO {name} must be an integer >= {lo}, not {value!r}")
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        n = self.depth
        m.submodules.ram = ram = RAM(shape=self.width, depth=n, num_write=1, transparency=[(0,)])
        wp = Signal(range(n))
        rp = Signal(range(n))
        push = self.w_en & self.w_rdy
        pop = self.r_en & self.r_rdy
        rp_next = Signal(range(n))
        m.d.comb += [
            self.w_rdy.eq(self.level != n),
            self.r_rdy.eq(self.level != 0),
            self.w_level.eq(self.level),
            self.r_level.eq(self.level),
            rp_next.eq(Mux(pop, Mux(rp == n - 1, 0, rp + 1), rp)),
            ram.write[0].en.eq(push), ram.write[0].addr.eq(wp),
            ram.write[0].data.eq(self.w_data),
            ram.read[0].en.eq(1), ram.read[0].addr.eq(rp_next),
            self.r_data.eq(ram.read[0].data),
        ]
        m.d.sync += rp.eq(rp_next)
        with m.If(push):
            m.d.sync += wp.eq(Mux(wp == n - 1, 0, wp + 1))
        with m.If(push & ~pop):
            m.d.sync += self.level.eq(self.level + 1)
        with m.Elif(pop & ~push):
            m.d.sync += self.level.eq(self.level - 1)
        return m


def make_fifo(*, width, depth):
    """A ``SyncFIFO`` up to ``REGISTER_MAX`` entries, else a ``BlockFIFO`` (same interface and
    timing)."""
    if depth <= REGISTER_MAX:
        return fifo.SyncFIFO(width=width, depth=depth)
    return BlockFIFO(width=width, depth=depth)
