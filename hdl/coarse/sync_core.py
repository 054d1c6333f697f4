"""``SyncCore``: a memory device's proxy queues and sync core (docs/hardware.md, "COARSE system
in hardware").

COARSE's proxy keeps one queue per client and synchronises all queues together: a tensor is
reduced as soon as every client of its group has written its copy, whatever order the clients
send their tensors in (``golden_model.coarse.deadlock``, scheme ``coarse``; with a slot per
tensor in every client queue no order can deadlock). Here each tensor has a **slot**, rows
``base .. base + last_row`` of every client's circular queue (``QueueReducer``), and a client
mask (the group whose copies the device receives, from the routing tables,
``golden_model.coarse.routing``), set by ``program``, which also arms the tensor. Every line
written counts one arrival for its (client, tensor); when every masked client's count of an
armed tensor reaches its rows, the tensor is complete, and when the reducer is free the lowest
complete tensor is started (its counts cleared, disarmed until programmed again) and its partial
sums leave on ``o``, tagged with the tensor. A write the program does not expect (an unarmed
tensor, a client outside the mask, a row past the slot, a line already counted in full, a
line the naive ablation's shared FIFO does not admit) is dropped and sets the sticky
``error``.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from ..config import check_int
from ..ops import add_narrow, eq_const, first_set, lt_unsigned, select_word
from .group_reducer import LINE_BITS
from .queue_reducer import QueueReducer, shard_layout
from .shared_queue import SharedQueue

__all__ = ["SyncCore"]


class SyncCore(wiring.Component):
    """Client queues with a slot per tensor, arrival counts, and the client-order reducer.

    Parameters
    ----------
    element_type : golden_model.elements.ElementType
    clients : int
        Client queues, 1..16.
    queue_lines : int
        Lines per client queue (the sum of the tensor slots), a power of two 2..2**20.
    tensors : int
        Tensor slots, 1..16.
    shared_queue : int, optional
        Build the naive ablation instead (``SharedQueue`` of this many entries: one FIFO
        shared by the clients, head-of-line start order); default the COARSE discipline.

    Members
    -------
    program : ``In(stream.Signature({tensor, base, last_row, mask}, always_ready=True))``
        Set tensor ``tensor``'s slot (``last_row + 1`` rows from queue row ``base``) and client
        mask, clear its counts and arm it.
    write : ``In(stream.Signature({client, tensor, row, line}, always_ready=True))``
        Row ``row`` (from 0) of client ``client``'s copy of tensor ``tensor``.
    o : ``Out(stream.Signature({tensor, row, line}))``
        Each started tensor's partial sums, ``last_row + 1`` lines in row order (``row`` from
        0).
    allow : ``In(tensors)``, all ones after reset
        Only a complete tensor whose bit is set may start (a system starts the same tensor on
        every device with it).
    complete : ``Out(tensors)``
        Bit ``t``: tensor ``t`` is armed and every masked client's copy is in.
    slots : ``Out(shard_layout).array(tensors)``
        Each tensor's slot as last programmed (``{base, last_row, mask}``).
    admit : ``Out(clients * tensors)``
        Bit ``c * tensors + t``: a line of client ``c``'s copy of tensor ``t`` is taken now
        (always, but in the naive ablation); a write that is not admitted is dropped and sets
        ``error``.
    head_valid, head, queue_used : ``Out(...)``
        The naive ablation's shared FIFO: its oldest entry's tensor and its entries in use
        (0 for COARSE).
    busy : ``Out(1)``
        A tensor is complete and not yet started, or is being reduced, or its sums are not all
        taken.
    error : ``Out(1)``
        Sticky: a write was dropped (see the module's docstring).

    Raises
    ------
    ValueError
        If a parameter is out of range (the message names it and the value), or as
        ``QueueReducer`` does.
    """

    def __init__(self, element_type, clients, queue_lines, tensors, shared_queue=None):
        check_int("clients", clients, 1, 16)
        check_int("tensors", tensors, 1, 16)
        self.queues = QueueReducer(element_type, clients, queue_lines)
        self.shared = (None if shared_queue is None
                       else SharedQueue(clients, tensors, shared_queue))
        self.clients, self.queue_lines, self.tensors = clients, queue_lines, tensors
        rb = ceil_log2(queue_lines)
        tb = max(1, ceil_log2(tensors))
        super().__init__({
            "program": In(stream.Signature(data.StructLayout({
                "tensor": tb, "base": rb, "last_row": rb, "mask": clients}), always_ready=True)),
            "write": In(stream.Signature(data.StructLayout({
                "client": max(1, ceil_log2(clients)), "tensor": tb, "row": rb,
                "line": LINE_BITS}), always_ready=True)),
            "o": Out(stream.Signature(data.StructLayout({"tensor": tb, "row": rb,
                                                         "line": LINE_BITS}))),
            "allow": In(tensors, init=(1 << tensors) - 1),
            "complete": Out(tensors),
            "slots": Out(shard_layout(queue_lines, clients)).array(tensors),
            "admit": Out(clients * tensors),
            "head_valid": Out(1),
            "head": Out(tb),
            "queue_used": Out(4),
            "busy": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n_c, n_t = self.clients, self.tensors
        rb = ceil_log2(self.queue_lines)
        tb = max(1, ceil_log2(n_t))
        cw = bits_for(self.queue_lines)          # an arrival count: 0 .. queue_lines
        m.submodules.queues = q = self.queues

        slot = shard_layout(self.queue_lines, n_c)
        slots = [Signal(slot, name=f"slot{t}") for t in range(n_t)]
        armed = Signal(n_t)
        counts = [[Signal(cw, name=f"count_c{c}_t{t}") for t in range(n_t)]
                  for c in range(n_c)]

        # ---- a write: check it against its tensor's slot, store it, count it -------------------
        w = self.write.payload
        w_slot = Signal(slot)
        m.d.comb += w_slot.eq(select_word(Cat(*slots), w.tensor, slot.size, n_t))
        w_count, w_rows = Signal(cw), Signal(cw)
        per_client = [select_word(Cat(*counts[c]), w.tensor, cw, n_t) for c in range(n_c)]
        m.d.comb += [w_count.eq(select_word(Cat(*per_client), w.client, cw, n_c)),
                     w_rows.eq(w_slot.last_row + 1)]
        w_ok = Signal()
        m.d.comb += w_ok.eq(
            select_word(armed, w.tensor, 1, n_t) & select_word(w_slot.mask, w.client, 1, n_c)
            & (w.row <= w_slot.last_row) & lt_unsigned(w_count, w_rows)
            & select_word(select_word(self.admit, w.client, n_t, n_c), w.tensor, 1, n_t))
        # the queue discipline: COARSE admits every line; the naive ablation's shared FIFO
        # admits a copy while it has an entry for it and starts only its head's tensor
        order = Signal(n_t)
        if self.shared is None:
            m.d.comb += [self.admit.eq(-1), order.eq(-1)]
        else:
            m.submodules.shared = sq = self.shared
            m.d.comb += [
                self.admit.eq(sq.admit), self.head_valid.eq(sq.head_valid),
                self.head.eq(sq.head), self.queue_used.eq(sq.used),
                order.eq(Cat(*[sq.head_valid & eq_const(sq.head, t) for t in range(n_t)])),
                sq.push_valid.eq(self.write.valid & w_ok),
                sq.push_client.eq(w.client), sq.push_tensor.eq(w.tensor),
            ]
        with m.If(self.write.valid & ~w_ok):
            m.d.sync += self.error.eq(1)
        m.d.comb += [
            q.write.valid.eq(self.write.valid & w_ok),
            q.write.payload.client.eq(w.client),
            q.write.payload.row.eq(add_narrow(w_slot.base, w.row)),
            q.write.payload.line.eq(w.line),
        ]

        # ---- completion and start -----------------------------------------------------------
        complete = []
        for t in range(n_t):
            rows = Signal(cw, name=f"rows_t{t}")
            m.d.comb += rows.eq(slots[t].last_row + 1)
            done = [~slots[t].mask[c] | (counts[c][t] == rows) for c in range(n_c)]
            complete.append(armed[t] & Cat(*done).all())
        m.d.comb += self.complete.eq(Cat(*complete))
        for t in range(n_t):
            m.d.comb += self.slots[t].eq(slots[t])
        startable = self.complete & self.allow & order
        any_complete, next_t = first_set(m, list(startable), "complete")
        start = Signal()
        m.d.comb += [start.eq(any_complete & q.start.ready),
                     q.start.valid.eq(any_complete),
                     q.start.payload.eq(select_word(Cat(*slots), next_t, slot.size, n_t))]
        current = Signal(tb)
        out_row = Signal(rb)
        with m.If(start):
            m.d.sync += [current.eq(next_t), out_row.eq(0)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += out_row.eq(out_row + 1)
        m.d.comb += self.busy.eq(any_complete | q.busy)
        if self.shared is not None:
            m.d.comb += [self.shared.start_valid.eq(start), self.shared.start_tensor.eq(next_t)]

        # counts and arming: a start clears its tensor, a program sets one, a write counts
        p = self.program.payload
        for t in range(n_t):
            started = start & eq_const(next_t, t)
            programmed = self.program.valid & eq_const(p.tensor, t)
            with m.If(programmed):
                m.d.sync += [slots[t].base.eq(p.base), slots[t].last_row.eq(p.last_row),
                             slots[t].mask.eq(p.mask), armed[t].eq(1)]
            with m.Elif(started):
                m.d.sync += armed[t].eq(0)
            for c in range(n_c):
                counted = (self.write.valid & w_ok & eq_const(w.tensor, t)
                           & eq_const(w.client, c))
                with m.If(programmed | started):
                    m.d.sync += counts[c][t].eq(0)
                with m.Elif(counted):
                    m.d.sync += counts[c][t].eq(counts[c][t] + 1)

        m.d.comb += [
            self.o.valid.eq(q.o.valid),
            self.o.payload.tensor.eq(current),
            self.o.payload.row.eq(out_row),
            self.o.payload.line.eq(q.o.payload),
            q.o.ready.eq(self.o.ready),
        ]
        return m
