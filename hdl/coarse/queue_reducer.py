"""``QueueReducer``: a memory device's client queues and the sequencer that reduces a shard's
copies from them in client order (docs/hardware.md, "COARSE system in hardware").

Each of the ``clients`` workers that may send to the device has its own queue, a region of
``queue_lines`` 64-byte lines in one memory (one write port for the CXL.mem front end, one read
port for the sequencer: a block RAM or SRAM macro). Once every client of the shard's group has
written its copy (the front end's arrival count says when), ``start`` names the shard's rows
and the clients whose copies it holds (``mask``); the sequencer reads the copies in client
order and feeds them to a :class:`GroupReducer`, rows interleaved over its slots so that it
takes one line per cycle, and ``o`` gives the shard's partial sums in row order: row ``r`` is
``golden_model.coarse.functional.group_sum`` of the masked clients' row ``r``, whatever order
the copies were written in; +0 lines when the mask is empty (a device with no copy contributes
zeros to the ring).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..config import check_int, check_pow2
from ..ops import add_narrow, eq_const, first_set, last_set, lt_const
from ..ram import RAM
from .group_reducer import LINE_BITS, GroupReducer

__all__ = ["QueueReducer", "shard_layout"]


def shard_layout(queue_lines, clients):
    """A shard in the client queues: ``{base, last_row, mask}`` (``QueueReducer.start``)."""
    row_bits = ceil_log2(queue_lines)
    return data.StructLayout({"base": row_bits, "last_row": row_bits, "mask": clients})


class QueueReducer(wiring.Component):
    """Client queues in one memory, a client-order sequencer and a ``GroupReducer``.

    Parameters
    ----------
    element_type : golden_model.elements.ElementType
        As ``GroupReducer``'s.
    clients : int
        Client queues, 1..64.
    queue_lines : int
        Lines per queue (the longest shard), a power of two 2..2**20.
    slots : int or None
        The reducer's accumulators; default ``latency + 1``, the fewest for one line per cycle.

    Members
    -------
    write : ``In(stream.Signature({client, row, line}, always_ready=True))``
        A copy's line into a client's queue (one per cycle).
    start : ``In(stream.Signature({base, last_row, mask}))``
        Reduce the ``last_row + 1`` rows from row ``base`` (modulo ``queue_lines``: a queue
        is circular, and holds the slots of several tensors, as the deadlock-avoidance scheme
        needs, ``golden_model.coarse.deadlock``) of the queues of the clients set in ``mask``
        (bit ``c``: client ``c``); taken when ``busy`` is low.
    o : ``Out(stream.Signature(512))``
        The partial sums, ``last_row + 1`` lines in row order.
    busy : ``Out(1)``
        A reduction is running or its sums are not all taken.

    Raises
    ------
    ValueError
        If a parameter is out of range (the message names it and the value), or as
        ``GroupReducer`` does.
    """

    def __init__(self, element_type, clients, queue_lines, slots=None):
        check_int("clients", clients, 1, 64)
        check_pow2("queue_lines", queue_lines, 2, 1 << 20)
        self.reducer = GroupReducer(element_type, slots)
        self.clients, self.queue_lines = clients, queue_lines
        row_bits = ceil_log2(queue_lines)
        super().__init__({
            "write": In(stream.Signature(data.StructLayout({
                "client": max(1, ceil_log2(clients)), "row": row_bits, "line": LINE_BITS}),
                always_ready=True)),
            "start": In(stream.Signature(shard_layout(queue_lines, clients))),
            "o": Out(stream.Signature(LINE_BITS)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n_c, q = self.clients, self.queue_lines
        row_bits = ceil_log2(q)
        client_bits = max(1, ceil_log2(n_c))
        slots = self.reducer.slots
        m.submodules.reducer = red = self.reducer
        wiring.connect(m, red.o, wiring.flipped(self.o))

        m.submodules.queues = ram = RAM(shape=LINE_BITS, depth=n_c * q, num_write=1,
                                        transparency=[()])
        wp, rp = ram.write[0], ram.read[0]
        m.d.comb += [wp.en.eq(self.write.valid),
                     wp.addr.eq(Cat(self.write.payload.row, self.write.payload.client)),
                     wp.data.eq(self.write.payload.line)]

        # ---- the shard being reduced -------------------------------------------------------
        active = Signal()
        last_row = Signal(row_bits)
        base = Signal(row_bits)
        mask = Signal(n_c)
        zero = Signal()                     # no copy: +0 lines, one pass
        m.d.comb += zero.eq(~mask.any())
        block = Signal(row_bits + 1)        # first row of the rows being interleaved
        client = Signal(client_bits)
        offset = Signal(max(1, ceil_log2(slots)))
        _, first_client = first_set(m, [mask[c] for c in range(n_c)], "first_client")
        _, top = last_set(m, [mask[c] for c in range(n_c)], "last_client")
        _, next_client = first_set(m, [mask[c] & lt_const(client, c) for c in range(n_c)],
                                   "next_client")

        _, start_client = first_set(m, [self.start.payload.mask[c] for c in range(n_c)],
                                    "start_client")
        take_start = Signal()
        m.d.comb += [self.start.ready.eq(~self.busy),
                     take_start.eq(self.start.valid & self.start.ready)]

        # ---- the read stage: one queue line and its reducer tags ----------------------------
        held = Signal(data.StructLayout({"valid": 1, "zero": 1, "slot": len(red.i.payload.slot),
                                         "first": 1, "last": 1}))
        m.d.comb += [
            red.i.valid.eq(held.valid),
            red.i.payload.line.eq(Mux(held.zero, 0, rp.data)),
            red.i.payload.slot.eq(held.slot),
            red.i.payload.first.eq(held.first),
            red.i.payload.last.eq(held.last),
        ]
        row = Signal(row_bits + 1)
        m.d.comb += row.eq(add_narrow(block, offset))
        issue = Signal()
        m.d.comb += [issue.eq(active & (~held.valid | red.i.ready)),
                     rp.en.eq(issue),
                     rp.addr.eq(Cat(add_narrow(base, row[:row_bits]), client))]

        at_last_row = Signal()
        m.d.comb += at_last_row.eq(~row[row_bits] & ~(row[:row_bits] ^ last_row).any())
        row_end = eq_const(offset, slots - 1) | at_last_row
        is_last_client = zero | (client == top)
        with m.If(issue):
            m.d.sync += [held.valid.eq(1), held.zero.eq(zero), held.slot.eq(offset),
                         held.first.eq(zero | (client == first_client)),
                         held.last.eq(is_last_client)]
            with m.If(~row_end):
                m.d.sync += offset.eq(offset + 1)
            with m.Else():
                m.d.sync += offset.eq(0)
                with m.If(~is_last_client):
                    m.d.sync += client.eq(next_client)
                with m.Else():
                    m.d.sync += [client.eq(first_client),
                                 block.eq(add_narrow(block, Const(slots)))]
                    with m.If(at_last_row):
                        m.d.sync += active.eq(0)
        with m.Elif(held.valid & red.i.ready):
            m.d.sync += held.valid.eq(0)

        with m.If(take_start):
            m.d.sync += [active.eq(1), last_row.eq(self.start.payload.last_row),
                         base.eq(self.start.payload.base),
                         mask.eq(self.start.payload.mask), block.eq(0), offset.eq(0),
                         client.eq(start_client)]

        m.d.comb += self.busy.eq(active | held.valid | red.busy)
        return m
