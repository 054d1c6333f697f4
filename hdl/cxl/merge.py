"""``LineMerge``: the modify step of the CXL.mem controller's modify-and-write stage
(docs/hardware.md, "CXLMemController (COARSE)").

A write replaces the enabled bytes of the old line; an accumulate write replaces each enabled
byte with that byte of the sum of its int32 element (the old element plus the new, modulo
2**32, as ``golden_model.coarse.lines.accumulate_lines``); disabled bytes keep the old value.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import LINE_BITS, LINE_BYTES, LINE_ELEMENTS

__all__ = ["LineMerge"]


class LineMerge(wiring.Component):
    """Combinational merge of a 64-byte line.

    Members
    -------
    old, new : ``In(512)``
        The line in memory and the written line; byte ``i`` is bits ``8i..8i+7``, int32
        element ``e`` bytes ``4e..4e+3`` (little-endian).
    byte_enable : ``In(64)``
        Bytes written.
    accumulate : ``In(1)``
        Add element-wise instead of replacing.
    merged : ``Out(512)``
        The line to write back.
    """

    def __init__(self):
        super().__init__({
            "old": In(LINE_BITS),
            "new": In(LINE_BITS),
            "byte_enable": In(LINE_BYTES),
            "accumulate": In(1),
            "merged": Out(LINE_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        for e in range(LINE_ELEMENTS):
            old = self.old[32 * e:32 * e + 32]
            new = self.new[32 * e:32 * e + 32]
            total = Signal(32, name=f"sum{e}")
            m.d.comb += total.eq(old + new)
            for j in range(4):
                i = 4 * e + j
                byte = slice(8 * j, 8 * j + 8)
                m.d.comb += self.merged[8 * i:8 * i + 8].eq(
                    Mux(self.byte_enable[i], Mux(self.accumulate, total[byte], new[byte]),
                        old[byte]))
        return m
