"""``MemoryDevice``: one COARSE memory device around its sync core (docs/hardware.md, "COARSE
system in hardware").

A tensor passes four states; the device's NI buffer holds one tensor at a time:

* **idle**: the buffer is free. When the sync core starts a tensor (only one that ``allow``
  lets start), its partial-sum lines go into the NI's buffer through the NI's host port
  (``ni_cmd``), four 128-bit flits per line, line ``r`` at flits ``4r .. 4r + 3`` (the layout
  of ``golden_model.coarse.functional.device_ring_schedule``, whose ring chunks are whole
  lines).
* **staged**: the tensor's last line is in the buffer; ``staged`` is 1 and ``staged_tensor``
  names it. The system's host loads the ring's tables through ``host_cmd`` and starts the
  ring; the network runs it.
* **drain** (after the ``ring_done`` pulse): the reduced tensor is read out of the NI's buffer,
  four flits a line, and written into the **parameter storage**, a 1R1W memory of
  ``queue_lines`` lines laid out as the client queues' slots (row ``r`` of tensor ``t`` at line
  ``base_t + r``); then the tensor is **reduced** (bit ``t`` of ``reduced``, cleared when the
  tensor is programmed again) and the device is idle again.

``read`` serves the parameter storage at any time: ``ready`` is bit ``tensor`` of ``reduced``
(a read of a tensor not yet reduced waits), and the line is on ``rdata`` in the next cycle.
``host_cmd``/``host_rsp`` pass to the NI's host port whenever the device is not using it (idle
or staged with no line being copied in); the host must not have reads of its own in flight
when the ring finishes.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..host import TARGET_BUFFER, HostCmd, HostRsp
from ..ops import add_narrow, eq_const, select_word
from ..ram import RAM
from .group_reducer import LINE_BITS
from .sync_core import SyncCore

__all__ = ["MemoryDevice", "FLITS_PER_LINE"]

#: 128-bit flits per 64-byte line.
FLITS_PER_LINE = 4
FLIT_BITS = LINE_BITS // FLITS_PER_LINE


class MemoryDevice(wiring.Component):
    """A memory device's sync core, its traffic with its NI and its parameter storage.

    Parameters
    ----------
    element_type : golden_model.elements.ElementType
    clients, queue_lines, tensors, shared_queue
        As ``SyncCore``'s.

    Members
    -------
    program, write, allow, complete, slots, admit, head_valid, head, queue_used, error
        The sync core's.
    ni_cmd : ``Out(stream.Signature(HostCmd(128)))``, ni_rsp : ``In(...HostRsp(128))``
        To the NI's host port.
    host_cmd : ``In(stream.Signature(HostCmd(128)))``, host_rsp : ``Out(...)``
        The system host's access to the NI (module docstring).
    idle : ``Out(1)``
        The buffer is free and no tensor is being reduced.
    staged : ``Out(1)``, staged_tensor : ``Out(tensor bits)``
        The tensor whose partial sums are all in the NI's buffer, waiting for the ring.
    ring_done : ``In(1)``
        Pulse: the ring has finished; drain the staged tensor into the parameter storage.
    reduced : ``Out(tensors)``
        Bit ``t``: tensor ``t``'s reduced lines are in the parameter storage.
    read : ``In(stream.Signature({tensor, row}))``
        A line of the parameter storage; ready when its tensor is reduced.
    rdata : ``Out(512)``
        The line of the read accepted in the previous cycle.
    busy : ``Out(1)``
        Not idle, or the sync core is busy.

    Raises
    ------
    ValueError
        As ``SyncCore`` does.
    """

    def __init__(self, element_type, clients, queue_lines, tensors, shared_queue=None):
        self.core = SyncCore(element_type, clients, queue_lines, tensors, shared_queue)
        core = self.core.signature.members
        tb = max(1, ceil_log2(tensors))
        rb = ceil_log2(queue_lines)
        self.queue_lines, self.tensors = queue_lines, tensors
        super().__init__({
            "program": core["program"],
            "write": core["write"],
            "allow": In(tensors, init=(1 << tensors) - 1),
            "complete": Out(tensors),
            "slots": core["slots"],
            "admit": core["admit"], "head_valid": core["head_valid"], "head": core["head"],
            "queue_used": core["queue_used"],
            "ni_cmd": Out(stream.Signature(HostCmd(FLIT_BITS))),
            "ni_rsp": In(stream.Signature(HostRsp(FLIT_BITS))),
            "host_cmd": In(stream.Signature(HostCmd(FLIT_BITS))),
            "host_rsp": Out(stream.Signature(HostRsp(FLIT_BITS))),
            "idle": Out(1),
            "staged": Out(1),
            "staged_tensor": Out(tb),
            "ring_done": In(1),
            "reduced": Out(tensors),
            "read": In(stream.Signature(data.StructLayout({"tensor": tb, "row": rb}))),
            "rdata": Out(LINE_BITS),
            "busy": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        n_t, lines = self.tensors, self.queue_lines
        rb = ceil_log2(lines)
        for name in ("program", "write"):          # always ready: nothing to connect back
            outer, inner = getattr(self, name), getattr(core, name)
            m.d.comb += [inner.valid.eq(outer.valid), inner.payload.eq(outer.payload)]
        m.d.comb += [core.allow.eq(self.allow), self.complete.eq(core.complete),
                     self.error.eq(core.error)]
        for name in ("admit", "head_valid", "head", "queue_used"):
            m.d.comb += getattr(self, name).eq(getattr(core, name))
        for t in range(n_t):
            m.d.comb += self.slots[t].eq(core.slots[t])

        m.submodules.storage = storage = RAM(shape=LINE_BITS, depth=lines, num_write=1,
                                             transparency=[()], kind="coarse_storage")
        rd, wr = storage.read[0], storage.write[0]
        slots = Cat(*core.slots)
        layout = core.slots[0].shape()

        def slot_of(tensor):
            """Tensor ``tensor``'s slot ``{base, last_row, mask}``."""
            return data.View(layout, select_word(slots, tensor, layout.size, n_t))

        # ---- parameter storage reads --------------------------------------------------------
        reduced = Signal(n_t)
        m.d.comb += [
            self.reduced.eq(reduced),
            self.read.ready.eq(select_word(reduced, self.read.payload.tensor, 1, n_t)),
            rd.en.eq(self.read.valid & self.read.ready),
            rd.addr.eq(add_narrow(slot_of(self.read.payload.tensor).base, self.read.payload.row)),
            self.rdata.eq(rd.data),
        ]

        # ---- copy-in: the sync core's lines into the NI's buffer ---------------------------
        staged, draining = Signal(), Signal()
        tensor = Signal.like(self.staged_tensor)
        last_row = Signal(rb)
        m.d.comb += last_row.eq(slot_of(tensor).last_row)
        line = Signal(LINE_BITS)
        row = Signal(rb)
        flit = Signal(2)
        holding = Signal()
        cmd, rsp = self.ni_cmd, self.ni_rsp
        # the next line loads as the last flit of the current one goes: four cycles a line
        last_flit = Signal()
        m.d.comb += [
            last_flit.eq(holding & cmd.ready & eq_const(flit, FLITS_PER_LINE - 1)
                         & (row != last_row)),
            core.o.ready.eq((~holding | last_flit) & ~staged & ~draining),
        ]

        # ---- drain: the reduced tensor from the NI's buffer into the parameter storage ------
        issue = Signal(rb + 3)                     # next flit to read
        issued_all = Signal()
        got = Signal(rb + 2)                       # flits received
        assembled = Signal(LINE_BITS)
        m.d.comb += issued_all.eq(issue[2:] == last_row + 1)
        with m.If(self.ring_done & staged):
            m.d.sync += [staged.eq(0), draining.eq(1), issue.eq(0), got.eq(0)]

        with m.If(holding):
            m.d.comb += [
                cmd.valid.eq(1),
                cmd.payload.write.eq(1),
                cmd.payload.target.eq(TARGET_BUFFER),
                cmd.payload.addr.eq(Cat(flit, row)),
                cmd.payload.data.eq(select_word(line, flit, FLIT_BITS, FLITS_PER_LINE)),
            ]
            with m.If(cmd.ready):
                m.d.sync += flit.eq(flit + 1)
                with m.If(eq_const(flit, FLITS_PER_LINE - 1)):
                    m.d.sync += holding.eq(0)
                    with m.If(row == last_row):
                        m.d.sync += staged.eq(1)
        with m.Elif(draining):
            m.d.comb += [
                cmd.valid.eq(~issued_all),
                cmd.payload.write.eq(0),
                cmd.payload.target.eq(TARGET_BUFFER),
                cmd.payload.addr.eq(issue),
                rsp.ready.eq(1),
            ]
            with m.If(cmd.valid & cmd.ready):
                m.d.sync += issue.eq(issue + 1)
            with m.If(rsp.valid):
                m.d.sync += [got.eq(got + 1),
                             assembled.eq(Cat(assembled[FLIT_BITS:], rsp.payload.data))]
                with m.If(eq_const(got[:2], FLITS_PER_LINE - 1)):
                    m.d.comb += [
                        wr.en.eq(1),
                        wr.addr.eq(add_narrow(slot_of(tensor).base, got[2:])),
                        wr.data.eq(Cat(assembled[FLIT_BITS:], rsp.payload.data)),
                    ]
                    with m.If(got[2:] == last_row):
                        m.d.sync += draining.eq(0)
        with m.Else():
            wiring.connect(m, wiring.flipped(self.host_cmd), wiring.flipped(cmd))
            wiring.connect(m, wiring.flipped(rsp), wiring.flipped(self.host_rsp))

        with m.If(core.o.valid & core.o.ready):
            m.d.sync += [line.eq(core.o.payload.line), row.eq(core.o.payload.row),
                         tensor.eq(core.o.payload.tensor), flit.eq(0), holding.eq(1)]

        # reduced: set when drained, cleared when the tensor is programmed again
        p = self.program
        for t in range(n_t):
            with m.If(p.valid & eq_const(p.payload.tensor, t)):
                m.d.sync += reduced[t].eq(0)
            with m.Elif(draining & rsp.valid & eq_const(got[:2], FLITS_PER_LINE - 1)
                        & (got[2:] == last_row) & eq_const(tensor, t)):
                m.d.sync += reduced[t].eq(1)

        m.d.comb += [
            self.staged.eq(staged),
            self.staged_tensor.eq(tensor),
            self.idle.eq(~holding & ~staged & ~draining & ~core.busy),
            self.busy.eq(~self.idle),
        ]
        return m
