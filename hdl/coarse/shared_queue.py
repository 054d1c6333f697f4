"""``SharedQueue``: the naive queue discipline of COARSE's deadlock ablation
(``golden_model.coarse.deadlock``, scheme ``naive``).

One FIFO of ``depth`` entries shared by all clients: a client's copy of a tensor takes an
entry with its first line (``(client, tensor)``, refused when the FIFO is full) and keeps it
until the tensor starts; only the tensor of the oldest entry (the **head**) may start, once
every copy has arrived; starting it frees every entry of that tensor. With client orders that
differ the FIFO fills with copies of tensors whose other copies sit behind a full FIFO: a
deadlock (``golden_model.coarse.deadlock.simulate_queues`` says for which orders and depths).
The line storage is the sync core's as in the COARSE scheme; only admission and start order
change, which is all the ablation compares.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from ..config import check_int
from ..ops import eq_const

__all__ = ["SharedQueue"]


class SharedQueue(wiring.Component):
    """A shared FIFO of (client, tensor) entries with head-of-line start order.

    Parameters
    ----------
    clients, tensors : int
        As ``SyncCore``'s.
    depth : int
        Entries, 1..8.

    Members
    -------
    admit : ``Out(clients * tensors)``
        Bit ``c * tensors + t``: a line of client ``c``'s copy of tensor ``t`` may be written
        now (its entry is in the FIFO, or there is room for it).
    push_valid : ``In(1)``, push_client, push_tensor
        A line of that copy was written (it must have been admitted).
    start_valid : ``In(1)``, start_tensor
        The tensor started: free its entries.
    head_valid : ``Out(1)``, head : ``Out(tensor bits)``
        The oldest entry's tensor.
    used : ``Out(bits)``
        Entries in use.

    Raises
    ------
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, clients, tensors, depth):
        check_int("shared queue depth", depth, 1, 8)
        self.clients, self.tensors, self.depth = clients, tensors, depth
        cb, tb = max(1, ceil_log2(clients)), max(1, ceil_log2(tensors))
        self._entry = data.StructLayout({"valid": 1, "client": cb, "tensor": tb})
        super().__init__({
            "admit": Out(clients * tensors),
            "push_valid": In(1), "push_client": In(cb), "push_tensor": In(tb),
            "start_valid": In(1), "start_tensor": In(tb),
            "head_valid": Out(1), "head": Out(tb),
            "used": Out(bits_for(depth)),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.depth
        entries = [Signal(self._entry, name=f"entry{i}") for i in range(d)]
        valid = Cat(*[e.valid for e in entries])
        m.d.comb += [self.head_valid.eq(entries[0].valid), self.head.eq(entries[0].tensor),
                     self.used.eq(sum(e.valid for e in entries))]

        def same(field, value):
            return eq_const(field, value) if isinstance(value, int) else field == value

        def present(client, tensor):
            return Cat(*[e.valid & same(e.client, client) & same(e.tensor, tensor)
                         for e in entries]).any()

        full = valid.all()
        for c in range(self.clients):
            for t in range(self.tensors):
                m.d.comb += self.admit[c * self.tensors + t].eq(present(c, t) | ~full)

        # free the started tensor's entries and close the gaps, oldest first; then append
        kept = [Signal(name=f"kept{i}") for i in range(d)]
        for i, e in enumerate(entries):
            m.d.comb += kept[i].eq(e.valid & ~(self.start_valid & (e.tensor == self.start_tensor)))
        pos_bits = max(1, ceil_log2(d + 1))
        positions = []
        for i in range(d):
            pos = Signal(pos_bits, name=f"pos{i}")
            m.d.comb += pos.eq(sum(kept[:i]) if i else 0)
            positions.append(pos)
        count = Signal(pos_bits)
        m.d.comb += count.eq(sum(kept))
        new = Signal(self._entry)
        m.d.comb += [new.valid.eq(1), new.client.eq(self.push_client),
                     new.tensor.eq(self.push_tensor)]
        append = Signal()
        m.d.comb += append.eq(self.push_valid & ~present(self.push_client, self.push_tensor))
        for k in range(d):
            moved = 0
            for i in range(k, d):
                moved = moved | Mux(kept[i] & eq_const(positions[i], k),
                                    entries[i].as_value(), 0)
            m.d.sync += entries[k].eq(Mux(append & eq_const(count, k), new.as_value(), moved))
        return m
