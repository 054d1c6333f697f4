"""The block-RAM FIFO (``hdl.fifo.BlockFIFO``) against Amaranth's ``SyncFIFO``, cycle for cycle.

Every FIFO of more than ``REGISTER_MAX`` entries in the design (the NI's receive FIFOs, the
router's virtual-channel buffers at their default depth of 8) is a ``BlockFIFO``, whose storage
is a one-read, one-write memory; smaller ones are ``amaranth.lib.fifo.SyncFIFO``s. The router
proofs use 2-flit buffers (``SyncFIFO``: ``tb/formal/router.py``), because the no-loss check
through 5-flit ``BlockFIFO`` buffers took 815 s. This property closes that gap: it shows that a
``BlockFIFO`` is indistinguishable at its ports from a ``SyncFIFO`` of the same depth, so what
the router, credit and NI proofs show of a block with a ``SyncFIFO`` holds with a ``BlockFIFO``
in its place (the FIFOs differ only above ``REGISTER_MAX``, in depth, which the blocks see only
as full and empty).

The harness drives both FIFOs with the same free ``w_en``, ``w_data`` and ``r_en`` in every
cycle and asserts, from cycle 1, equal ``w_rdy``, ``r_rdy`` and ``level``, and equal ``r_data``
whenever ``r_rdy``. Bounded: the entries are memory words the harness cannot name, so
k-induction cannot relate the two storages.

Parameters: depth 5 (the smallest ``BlockFIFO`` ``make_fifo`` builds: an odd depth, not a
power of two, so the pointers wrap before their registers would) and 3-bit entries (every bit
takes the same path through the memory). :data:`DEPTH` is 24 cycles (11 s): enough to fill the FIFO
and empty it twice and wrap each pointer four times, with pushes and pops in the same cycle at
every level (the cover reaches a pop of the sixth entry written, read through a wrapped pointer).
"""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cover, Elaboratable, Signal
from amaranth.lib import fifo

from hdl.fifo import REGISTER_MAX, BlockFIFO

from . import FormalProperty, planted
from .harness import reset_once

__all__ = ["PROPERTIES", "FIFOEquivalence"]

ENTRIES, WIDTH = REGISTER_MAX + 1, 3
#: Cycles of the bounded check (see the module docstring).
DEPTH = 24


class _LazyReadFIFO(BlockFIFO):
    """A ``BlockFIFO`` with one fault.

    Planted bug: the memory is read only in cycles without a push (a read enable that saves
    power), so the head is stale after a cycle that pushes and pops."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += m.submodules.ram.read[0].en.eq(~self.w_en)
        return m


class FIFOEquivalence(Elaboratable):
    """A ``SyncFIFO`` and a ``BlockFIFO`` (or its planted-bug copy) of ``ENTRIES`` entries on the
    same inputs.

    Parameters
    ----------
    block : type
        ``BlockFIFO`` or a planted-bug copy.
    """

    def __init__(self, block=BlockFIFO):
        self.block = block

    def elaborate(self, platform):
        m, rst = reset_once()
        m.submodules.ref = ref = fifo.SyncFIFO(width=WIDTH, depth=ENTRIES)
        m.submodules.dut = dut = self.block(width=WIDTH, depth=ENTRIES)
        w_en, w_data, r_en = Signal(), Signal(WIDTH), Signal()
        m.d.comb += [w_en.eq(AnySeq(1)), w_data.eq(AnySeq(WIDTH)), r_en.eq(AnySeq(1))]
        for f in (ref, dut):
            m.d.comb += [f.w_en.eq(w_en), f.w_data.eq(w_data), f.r_en.eq(r_en)]
        written = Signal(range(ENTRIES + 2))       # pushes since reset, saturating
        with m.If(w_en & ref.w_rdy & (written != ENTRIES + 1)):
            m.d.sync += written.eq(written + 1)
        with m.If(~rst):
            m.d.comb += [Assert(dut.w_rdy == ref.w_rdy), Assert(dut.r_rdy == ref.r_rdy),
                         Assert(dut.level == ref.level)]
            with m.If(ref.r_rdy):
                m.d.comb += Assert(dut.r_data == ref.r_data)
        m.d.comb += Cover(~rst & (written == ENTRIES + 1) & (ref.level == 1) & r_en & w_en)
        return m


PROPERTIES = [
    FormalProperty(
        name="fifo.block-equals-sync",
        claim=f"a BlockFIFO of {ENTRIES} entries in a 1R1W memory shows the same w_rdy, r_rdy, "
              "level and (while r_rdy) r_data as amaranth.lib.fifo.SyncFIFO in every cycle, "
              "for any pushes and pops",
        build=lambda bug: FIFOEquivalence(_LazyReadFIFO if bug else BlockFIFO),
        bug=planted(_LazyReadFIFO), depth=DEPTH, method="bmc",
        generalises=__doc__.split("Parameters: ", 1)[1].strip()),
]
