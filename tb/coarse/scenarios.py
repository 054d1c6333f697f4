"""Scenarios of the COARSE sync core (``hdl.coarse.SyncCore``) and a simulator-independent
host that drives one: adapters apply :meth:`SyncHost.drive`'s words each cycle and hand back
the settled outputs (amaranth.sim in tests/test_coarse_sync_core.py, cocotb in
``tb.coarse.cocotb_sync_core``)."""

from __future__ import annotations

import numpy as np

from golden_model.coarse.functional import group_sum

from .lines import line_value, random_lines

__all__ = ["CLIENTS", "QUEUE_LINES", "TENSORS", "client_orders", "copies_and_writes",
           "expected_lines", "SyncHost", "pack", "unpack", "layouts_of"]

CLIENTS, QUEUE_LINES = 3, 32
#: tensor -> (base, rows, mask): slots packed in the client queues; tensor 3 has no copy here
TENSORS = {0: (0, 5, 0b111), 1: (5, 1, 0b010), 2: (6, 9, 0b101), 3: (15, 3, 0b000)}


def client_orders(rng, tensors=TENSORS):
    """Client 0 sends its tensors in tensor order, client 1 in reverse, client 2 at random;
    each only the tensors whose mask has it."""
    ids = list(tensors)
    base = [ids, ids[::-1], [ids[k] for k in rng.permutation(len(ids))]]
    return [[t for t in o if tensors[t][2] >> c & 1] for c, o in enumerate(base)]


def copies_and_writes(etype, rng, orders, tensors=TENSORS, clients=CLIENTS):
    """``(copies, writes)``: every client's copy of every tensor (``{tensor: (clients, rows,
    lanes)}`` bit patterns) and the writes ``(client, tensor, row, line)``: client ``c`` sends
    its tensors in ``orders[c]``, each tensor's rows shuffled, the clients' streams
    interleaved at random."""
    copies = {t: random_lines(etype, rng, clients * rows).reshape(clients, rows, -1)
              for t, (_, rows, _) in tensors.items()}
    per_client = []
    for c, order in enumerate(orders):
        seq = []
        for t in order:
            seq += [(c, t, int(r), line_value(copies[t][c, r], etype))
                    for r in rng.permutation(tensors[t][1])]
        per_client.append(seq)
    writes = []
    while any(per_client):
        live = [s for s in per_client if s]
        writes.append(live[rng.integers(len(live))].pop(0))
    return copies, writes


def expected_lines(etype, copies, tensor, tensors=TENSORS):
    """The golden partial sums of ``tensor``'s rows (``group_sum`` over its mask's clients in
    client order), as line values."""
    _, rows, mask = tensors[tensor]
    chosen = [c for c in range(copies[tensor].shape[0]) if mask >> c & 1]
    lanes = copies[tensor].shape[2]
    return [line_value(etype.to_bits(group_sum(etype.from_bits(copies[tensor][chosen, r]),
                                               lanes, etype.dtype)), etype)
            for r in range(rows)]


def pack(layout, **fields):
    """The integer of an ``amaranth.lib.data.StructLayout`` value (its fields by name)."""
    word = 0
    for name, field in layout:
        value = int(fields[name])
        assert 0 <= value < 1 << field.width, (name, value)
        word |= value << field.offset
    return word


def unpack(layout, word):
    return {name: (int(word) >> f.offset) & ((1 << f.width) - 1) for name, f in layout}


class SyncHost:
    """Programs every tensor, then sends ``writes`` one per cycle with random gaps, under
    random back-pressure on ``o``; collects each tensor's lines.

    Parameters
    ----------
    layouts : dict
        ``{"program", "write", "o"}``: the payload layouts of the sync core's streams.
    tensors : dict
        tensor -> (base, rows, mask).
    writes : list of (client, tensor, row, line)
    seed : int
    send_pct, ready_pct : int
        Chance (%) that a write is offered in a cycle, that ``o`` is ready.
    """

    def __init__(self, layouts, tensors, writes, *, seed=1, send_pct=80, ready_pct=70):
        self.layouts = layouts
        self.rng = np.random.default_rng(seed)
        self.programs = [pack(layouts["program"], tensor=t, base=base, last_row=rows - 1,
                              mask=mask) for t, (base, rows, mask) in tensors.items()]
        self.writes = [pack(layouts["write"], client=c, tensor=t, row=r, line=line)
                       for c, t, r, line in writes]
        self.send_pct, self.ready_pct = send_pct, ready_pct
        self.expected = sum(rows for _, rows, _ in tensors.values())
        self.got, self.order = {}, []
        self.error = 0
        self.cycle = 0
        self._ready = 0

    @property
    def done(self):
        return not self.programs and not self.writes and \
            sum(map(len, self.got.values())) == self.expected

    def drive(self):
        """This cycle's inputs: ``{program_valid, program, write_valid, write, o_ready}``."""
        inp = {"program_valid": 0, "program": 0, "write_valid": 0, "write": 0}
        if self.programs:
            inp.update(program_valid=1, program=self.programs.pop(0))
        elif self.writes and self.rng.integers(100) < self.send_pct:
            inp.update(write_valid=1, write=self.writes.pop(0))
        self._ready = int(self.rng.integers(100) < self.ready_pct)
        inp["o_ready"] = self._ready
        return inp

    def sample(self, o_valid, o_payload, error):
        """The settled outputs of this cycle."""
        if o_valid and self._ready:
            out = unpack(self.layouts["o"], o_payload)
            if out["tensor"] not in self.got:
                self.order.append(out["tensor"])
            lines = self.got.setdefault(out["tensor"], [])
            assert out["row"] == len(lines), (
                f"cycle {self.cycle}: tensor {out['tensor']} row {out['row']} after "
                f"{len(lines)} lines")
            lines.append(out["line"])
        self.error = error
        self.cycle += 1


def layouts_of(core):
    """``{"program", "write", "o"}``: the payload layouts of a ``SyncCore``'s streams."""
    return {name: core.signature.members[name].signature.members["payload"].shape
            for name in ("program", "write", "o")}
