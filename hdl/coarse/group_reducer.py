"""``GroupReducer``: the sync core's near-memory reduction of a device's group, in client order.

COARSE's sync core adds the copies of a shard that the clients of its group left in their
queues at the device, in client order (``((g_a + g_b) + g_c) + ...``, each add the element
type's golden add; ``golden_model.coarse.functional``, step 2). The order is part of a float
result, so it is fixed here by the input order, never by when copies arrived: a sequencer reads
the client queues in client order and feeds the reducer one 64-byte line at a time, tagged with
an accumulator **slot** (the line's row among those being reduced at once) and whether it is
its row's **first** and **last** copy. One line per cycle goes through one adder per element
of the line (16 int32 or float32 lanes, 32 bfloat16), so the cost does not grow with the number
of clients, and a device's reduction keeps up with its CXL.mem front end, which also takes one
line per cycle.

Every accepted line takes ``latency`` = the adder's latency cycles to reach its slot: a first
copy passes unchanged (a single client's ``-0`` stays ``-0``, as the golden model's copy does;
``0 + x`` would not), a later one is added to the slot. A line whose slot still has an add in
flight waits (``i.ready`` low), so any order is correct and the sequencer gets one line per
cycle when it cycles through at least ``latency + 1`` slots. A row's last copy also goes to
``o``, in acceptance order; a last copy is accepted only when the output FIFO has room for it
and every last copy in flight, so back-pressure on ``o`` never loses a result (the adders'
pipeline registers do not stall).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from golden_model.elements import ElementType

from ..adders import hardware_adder
from ..config import check_int
from ..fifo import make_fifo
from ..ops import eq_const, lt_const, select_word

__all__ = ["GroupReducer", "reducer_input", "LINE_BITS"]

#: Bits of a CXL.mem line (64 bytes).
LINE_BITS = 512


def reducer_input(slots):
    """Layout of one input line: ``{line: 512, slot: ceil_log2(slots), first: 1, last: 1}``."""
    return data.StructLayout({"line": LINE_BITS, "slot": max(1, ceil_log2(slots)),
                              "first": 1, "last": 1})


class GroupReducer(wiring.Component):
    """Client-order reduction of 64-byte lines into ``slots`` accumulators.

    Parameters
    ----------
    element_type : golden_model.elements.ElementType
        What a line holds (``512 / bits`` elements, element ``e`` in bits ``e*bits`` upwards);
        ``hdl.adders`` must have its adder.
    slots : int or None
        Accumulators (rows reduced at once), 1..64; at least ``latency + 1`` for one line per
        cycle, which is the default.

    Members
    -------
    i : ``In(stream.Signature(reducer_input(slots)))``
        The copies, in client order per row.
    o : ``Out(stream.Signature(512))``
        Each row's sum, when its last copy has been added.
    busy : ``Out(1)``
        A line is in the adders or a sum waits in the output FIFO.

    Attributes
    ----------
    latency : int
        Cycles from a line's acceptance to its slot's new value (the adder's latency).

    Raises
    ------
    ValueError
        If ``element_type`` is not an ``ElementType`` or has no hardware adder, or ``slots``
        is out of range (the message names the value).
    """

    def __init__(self, element_type, slots=None):
        if not isinstance(element_type, ElementType):
            raise ValueError(f"element_type must be an ElementType, not {element_type!r}")
        if LINE_BITS % element_type.bits:
            raise ValueError(f"a {LINE_BITS}-bit line does not hold whole {element_type.name} "
                             f"elements")
        self.adder = hardware_adder(element_type)
        if slots is None:
            slots = self.adder.latency + 1
        check_int("slots", slots, 1, 64)
        self.element_type = element_type
        self.slots = slots
        self.latency = self.adder.latency
        super().__init__({
            "i": In(stream.Signature(reducer_input(slots))),
            "o": Out(stream.Signature(LINE_BITS)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lat = self.latency
        bits = self.element_type.bits
        acc = [Signal(LINE_BITS, name=f"acc{s}") for s in range(self.slots)]

        # the line entering the adders, and what travels beside them for `lat` cycles
        beside = data.StructLayout({"valid": 1, "slot": len(self.i.payload.slot), "first": 1,
                                    "last": 1, "line": LINE_BITS})
        stages = [Signal(beside, name=f"beside{k}") for k in range(lat + 1)]
        for k in range(1, lat + 1):
            m.d.sync += stages[k].eq(stages[k - 1])
        entering, leaving = stages[0], stages[lat]

        take = Signal()
        m.d.comb += [
            take.eq(self.i.valid & self.i.ready),
            entering.valid.eq(take),
            entering.slot.eq(self.i.payload.slot),
            entering.first.eq(self.i.payload.first),
            entering.last.eq(self.i.payload.last),
            entering.line.eq(self.i.payload.line),
        ]
        addend = select_word(Cat(*acc), self.i.payload.slot, LINE_BITS, self.slots)
        sums = Cat(*[self.adder.add(m, addend[e * bits:(e + 1) * bits],
                                    self.i.payload.line[e * bits:(e + 1) * bits])
                     for e in range(LINE_BITS // bits)])
        result = Signal(LINE_BITS)
        m.d.comb += result.eq(Mux(leaving.first, leaving.line, sums))
        for s, value in enumerate(acc):
            with m.If(leaving.valid & eq_const(leaving.slot, s)):
                m.d.sync += value.eq(result)

        # a slot with an add in flight (stages 1..lat; stage lat writes back this cycle)
        in_flight = [stages[k] for k in range(1, lat + 1)]
        slot_busy = Cat(*[st.valid & (st.slot == self.i.payload.slot) for st in in_flight]).any()

        depth = lat + 2
        m.submodules.out_fifo = out = make_fifo(width=LINE_BITS, depth=depth)
        m.d.comb += [out.w_data.eq(result), out.w_en.eq(leaving.valid & leaving.last)]
        # room for a last copy: the FIFO's level plus the last copies in flight below its
        # depth (a comparison per count, so no adder of mixed widths)
        lasts = Signal(bits_for(lat + 1))
        m.d.comb += lasts.eq(sum((st.valid & st.last for st in in_flight), start=0)
                             if in_flight else 0)
        room = Cat(*[eq_const(lasts, j) & lt_const(out.level, depth - j)
                     for j in range(lat + 1)]).any()
        m.d.comb += [
            self.i.ready.eq(~slot_busy & (~self.i.payload.last | room)),
            self.o.valid.eq(out.r_rdy),
            self.o.payload.eq(out.r_data),
            out.r_en.eq(self.o.ready),
            self.busy.eq(Cat(*[st.valid for st in in_flight]).any() | out.r_rdy),
        ]
        return m
