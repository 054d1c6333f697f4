"""``CXLMemController``: a CXL.mem device memory with the COARSE accumulate window.

docs/hardware.md, "CXLMemController (COARSE)", is the contract; this is how it is built, from
components with their own tests (tests/test_cxl_components.py), in the order a request passes
them:

* **Arrival** (``hdl.cxl.arrival.RequestArrival``): the tag tracker, the duplicate check, the
  RwD FIFO and the Req shift queue with its age order; credits go back as messages leave.
* **Window** (``hdl.cxl.window.AccumulateWindow``): the registers, the per-tensor arrival
  counters, zeroing and the address decode of both queue heads.
* **Issue (stage A)**, here: at most one operation per cycle, in priority order: a held read
  that is ready (``hdl.cxl.holds.HoldSlots``: released before expired), then the older of the
  Req head and the RwD head. A Req head that must be held while every hold slot is busy lets
  younger RwD messages pass (they may be the writes it waits for). An operation issues only
  when its response queue has room (counting the operation in stage B and the response the
  host takes this cycle), so a consumed request never waits for a response slot. Stage A
  reads the line from its bank and, for an accumulate write, counts an arrival; a read of a
  tensor that is not complete goes to a hold slot instead (no memory access, no response
  yet).
* **Modify and write (stage B)**, here with ``hdl.cxl.merge.LineMerge``: the old line comes
  back, the new bytes are merged or added, the line is written back and the response goes into
  the NDR or DRS queue. Each bank's read port is transparent to its write port, so an operation
  issued in the cycle after another one to the same line sees its result (read-after-write and
  back-to-back accumulates are exact).

Memory: ``num_banks`` ``hdl.ram.RAM`` banks of ``num_lines / num_banks`` lines of 512 bits; line
``a`` is in bank ``a % num_banks``, row ``a // num_banks``.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..fifo import make_fifo
from ..ops import eq_const, lt_const, select_word
from ..ram import RAM
from .arrival import RequestArrival
from .config import LINE_BITS, LINE_BYTES, TAG_BITS, CXLMemConfig, checked_config
from .holds import HoldSlots
from .merge import LineMerge
from .messages import (CSRWrite, M2SReq, M2SReqOpcode, M2SRwD, M2SRwDOpcode, MetaField, S2MDRS,
                       S2MDRSOpcode, S2MNDR, S2MNDROpcode)
from .window import TIMER_BITS, AccumulateWindow

__all__ = ["CXLMemController", "TIMER_BITS"]


def _is(field, member):
    """``field == member`` for an enum-shaped field (width-exact in Verilog)."""
    return eq_const(Value.cast(field), member.value)


class CXLMemController(wiring.Component):
    """CXL.mem memory controller with the COARSE accumulate window.

    Parameters
    ----------
    config : CXLMemConfig

    Members
    -------
    req : ``In(stream.Signature(M2SReq, always_ready=True))``
        M2S Req (``MemRd``, ``MemInv``); one credit per message.
    rwd : ``In(stream.Signature(M2SRwD, always_ready=True))``
        M2S RwD (``MemWr``, ``MemWrPtl``); one credit per message.
    req_credit, rwd_credit : ``Out(1)``
        One-cycle pulse per returned credit (a message left its queue).
    ndr : ``Out(stream.Signature(S2MNDR))``
        S2M NDR: ``Cmp`` for writes and ``MemInv``, ``CmpErr`` for rejected ones.
    drs : ``Out(stream.Signature(S2MDRS))``
        S2M DRS: ``MemData`` for reads (``poison`` set and data zero for a duplicate tag or a
        held read that timed out), ``MemDataNXM`` with ``poison`` for an address out of range.
    csr : ``In(stream.Signature(CSRWrite))``
        Register writes (``CSR``); accepted when no operation is in stage B and the window is
        not being zeroed.
    idle : ``Out(1)``
        No request in flight (every response accepted) and no zeroing.
    error : ``Out(1)``
        Sticky: a message arrived at a full queue (the host sent without a credit); it was
        dropped.
    """

    def __init__(self, config=None):
        if config is None:
            config = CXLMemConfig()
        self._config = config = checked_config(config)
        super().__init__({
            "req": In(stream.Signature(M2SReq, always_ready=True)),
            "rwd": In(stream.Signature(M2SRwD, always_ready=True)),
            "req_credit": Out(1),
            "rwd_credit": Out(1),
            "ndr": Out(stream.Signature(S2MNDR)),
            "drs": Out(stream.Signature(S2MDRS)),
            "csr": In(stream.Signature(CSRWrite)),
            "idle": Out(1),
            "error": Out(1),
        })

    @property
    def config(self):
        return self._config

    def elaborate(self, platform):
        cfg = self._config
        m = Module()
        sw = cfg.slot_bits
        nb = cfg.num_banks

        m.submodules.arrival = arrival = RequestArrival(cfg)
        m.submodules.window = window = AccumulateWindow(cfg)
        m.submodules.holds = holds = HoldSlots(cfg)
        m.submodules.merge = merge = LineMerge()
        wiring.connect(m, wiring.flipped(self.req), arrival.req)
        wiring.connect(m, wiring.flipped(self.rwd), arrival.rwd)
        wiring.connect(m, wiring.flipped(self.csr), window.csr)
        req_head, rwd_head = arrival.req_head, arrival.rwd_head
        m.d.comb += [
            self.req_credit.eq(arrival.req_pop), self.rwd_credit.eq(arrival.rwd_pop),
            self.error.eq(arrival.error),
            window.req_addr.eq(req_head.msg.addr), window.rwd_addr.eq(rwd_head.msg.addr),
            holds.complete.eq(window.complete), holds.timeout.eq(window.timeout),
        ]

        banks = []
        for b in range(nb):
            ram = RAM(shape=LINE_BITS, depth=cfg.bank_depth, num_write=1, transparency=[(0,)])
            m.submodules[f"bank{b}"] = ram
            banks.append(ram)

        def split_line(line):
            """(bank, row) of a line address."""
            if cfg.bank_bits:
                return line[:cfg.bank_bits], line[cfg.bank_bits:cfg.line_bits]
            return Const(0, 1), line[:cfg.line_bits]

        ndr_entry = data.StructLayout({"msg": S2MNDR, "slot": sw})
        drs_entry = data.StructLayout({"msg": S2MDRS, "slot": sw})
        m.submodules.ndr_queue = ndrq = make_fifo(width=ndr_entry.size, depth=cfg.ndr_depth)
        m.submodules.drs_queue = drsq = make_fifo(width=drs_entry.size, depth=cfg.drs_depth)

        # ---- stage B registers -------------------------------------------------------------
        sb = Signal(data.StructLayout({
            "valid": 1, "drs": 1, "ndr_op": S2MNDROpcode, "drs_op": S2MDRSOpcode, "poison": 1,
            "mem_data": 1, "write": 1, "accum": 1, "be": LINE_BYTES, "data": LINE_BITS,
            "bank": max(1, cfg.bank_bits), "row": max(1, cfg.row_bits), "tag": TAG_BITS,
            "slot": sw,
        }), name="stage_b")
        nxt = Signal.like(sb, name="stage_a")
        m.d.sync += sb.eq(nxt)
        m.d.comb += window.stage_busy.eq(sb.valid)

        # response room for an operation issued now, which pushes its response next cycle:
        # the queue's level then is this cycle's, plus the push from stage B, minus the pop
        # the host takes this cycle (without the pop a 2-deep queue would allow only two
        # operations in three cycles)
        def room(queue, push, pop, depth):
            level = queue.level + push
            return Mux(pop, lt_const(level, depth + 1), lt_const(level, depth))

        ndr_ok = Signal()
        drs_ok = Signal()
        m.d.comb += [
            ndr_ok.eq(room(ndrq, sb.valid & ~sb.drs, self.ndr.valid & self.ndr.ready,
                           cfg.ndr_depth)),
            drs_ok.eq(room(drsq, sb.valid & sb.drs, self.drs.valid & self.drs.ready,
                           cfg.drs_depth)),
        ]

        # ---- stage A: choose and issue ---------------------------------------------------
        req_op = req_head.msg.opcode
        is_rd = _is(req_op, M2SReqOpcode.MemRd)
        is_inv = _is(req_op, M2SReqOpcode.MemInv)
        req_hold = Signal()
        req_drs = Signal()
        m.d.comb += [
            req_hold.eq(~req_head.dup & is_rd & window.req.in_window
                        & ~select_word(window.complete, window.req.tensor, 1,
                                       cfg.num_tensors)),
            req_drs.eq(is_rd),
        ]
        rwd_op = rwd_head.msg.opcode
        rwd_bad = Signal()
        m.d.comb += rwd_bad.eq(rwd_head.dup | rwd_head.msg.poison | ~window.rwd.in_range
                               | ~(_is(rwd_op, M2SRwDOpcode.MemWr)
                                   | _is(rwd_op, M2SRwDOpcode.MemWrPtl)))

        rwd_bank, rwd_row = split_line(window.rwd.line)
        req_bank, req_row = split_line(window.req.line)
        m.d.comb += [holds.put_entry.tag.eq(req_head.msg.tag),
                     holds.put_entry.slot.eq(req_head.slot),
                     holds.put_entry.line.eq(window.req.line),
                     holds.put_entry.tensor.eq(window.req.tensor)]

        with m.If(~window.stall):
            with m.If(holds.ready):
                with m.If(drs_ok):
                    bank, row = split_line(holds.entry.line)
                    m.d.comb += [
                        nxt.valid.eq(1), nxt.drs.eq(1), nxt.drs_op.eq(S2MDRSOpcode.MemData),
                        nxt.poison.eq(holds.poison), nxt.mem_data.eq(~holds.poison),
                        nxt.bank.eq(bank), nxt.row.eq(row),
                        nxt.tag.eq(holds.entry.tag), nxt.slot.eq(holds.entry.slot),
                        holds.take.eq(1),
                    ]
            with m.Elif(arrival.req_older & ~(req_hold & holds.full)):
                # the Req head is the oldest message and can go
                with m.If(req_hold):
                    m.d.comb += [arrival.req_pop.eq(1), holds.put.eq(1)]
                with m.Elif(Mux(req_drs, drs_ok, ndr_ok)):
                    m.d.comb += [
                        arrival.req_pop.eq(1),
                        nxt.valid.eq(1), nxt.drs.eq(req_drs),
                        nxt.tag.eq(req_head.msg.tag), nxt.slot.eq(req_head.slot),
                        nxt.bank.eq(req_bank), nxt.row.eq(req_row),
                    ]
                    with m.If(req_head.dup):
                        m.d.comb += [nxt.poison.eq(1), nxt.ndr_op.eq(S2MNDROpcode.CmpErr),
                                     nxt.drs_op.eq(S2MDRSOpcode.MemData)]
                    with m.Elif(~(is_rd | is_inv)):
                        m.d.comb += nxt.ndr_op.eq(S2MNDROpcode.CmpErr)
                    with m.Elif(~window.req.in_range):
                        m.d.comb += [nxt.poison.eq(1), nxt.ndr_op.eq(S2MNDROpcode.CmpErr),
                                     nxt.drs_op.eq(S2MDRSOpcode.MemDataNXM)]
                    with m.Else():
                        m.d.comb += [nxt.ndr_op.eq(S2MNDROpcode.Cmp),
                                     nxt.drs_op.eq(S2MDRSOpcode.MemData),
                                     nxt.mem_data.eq(is_rd)]
            with m.Elif(arrival.rwd_valid):
                with m.If(ndr_ok):
                    m.d.comb += [
                        arrival.rwd_pop.eq(1),
                        nxt.valid.eq(1), nxt.drs.eq(0),
                        nxt.tag.eq(rwd_head.msg.tag), nxt.slot.eq(rwd_head.slot),
                        nxt.bank.eq(rwd_bank), nxt.row.eq(rwd_row),
                        nxt.data.eq(rwd_head.msg.data),
                        nxt.be.eq(Mux(_is(rwd_op, M2SRwDOpcode.MemWrPtl),
                                      rwd_head.msg.byte_enable, Const(-1, LINE_BYTES))),
                    ]
                    with m.If(rwd_bad):
                        m.d.comb += nxt.ndr_op.eq(S2MNDROpcode.CmpErr)
                    with m.Else():
                        m.d.comb += [nxt.ndr_op.eq(S2MNDROpcode.Cmp), nxt.write.eq(1),
                                     nxt.accum.eq(window.rwd.in_window)]
                        with m.If(window.rwd.in_window):
                            m.d.comb += [window.count.eq(1),
                                         window.count_tensor.eq(window.rwd.tensor)]

        # stage A memory reads: every bank reads the row of the issued operation
        for ram in banks:
            m.d.comb += [ram.read[0].en.eq(1), ram.read[0].addr.eq(nxt.row)]

        # ---- stage B: modify, write, respond ---------------------------------------------
        old = Signal(LINE_BITS)
        m.d.comb += [
            old.eq(Array(ram.read[0].data for ram in banks)[sb.bank]
                   if nb > 1 else banks[0].read[0].data),
            merge.old.eq(old), merge.new.eq(sb.data), merge.byte_enable.eq(sb.be),
            merge.accumulate.eq(sb.accum),
        ]
        zb, zr = split_line(window.zero_line)
        for b, ram in enumerate(banks):
            wp = ram.write[0]
            with m.If(window.zeroing):
                m.d.comb += [wp.en.eq(eq_const(zb, b) if nb > 1 else 1), wp.addr.eq(zr),
                             wp.data.eq(0)]
            with m.Else():
                m.d.comb += [wp.en.eq(sb.valid & sb.write & (eq_const(sb.bank, b)
                                                             if nb > 1 else 1)),
                             wp.addr.eq(sb.row), wp.data.eq(merge.merged)]

        ndr_w = Signal(ndr_entry)
        drs_w = Signal(drs_entry)
        m.d.comb += [
            ndr_w.msg.opcode.eq(sb.ndr_op),
            ndr_w.msg.meta_field.eq(MetaField.NoOp),
            ndr_w.msg.tag.eq(sb.tag),
            ndr_w.slot.eq(sb.slot),
            ndrq.w_data.eq(ndr_w),
            ndrq.w_en.eq(sb.valid & ~sb.drs),
            drs_w.msg.opcode.eq(sb.drs_op),
            drs_w.msg.meta_field.eq(MetaField.NoOp),
            drs_w.msg.tag.eq(sb.tag),
            drs_w.msg.poison.eq(sb.poison),
            drs_w.msg.data.eq(Mux(sb.mem_data, old, 0)),
            drs_w.slot.eq(sb.slot),
            drsq.w_data.eq(drs_w),
            drsq.w_en.eq(sb.valid & sb.drs),
        ]

        # ---- responses out -----------------------------------------------------------------
        ndr_r = data.View(ndr_entry, ndrq.r_data)
        drs_r = data.View(drs_entry, drsq.r_data)
        m.d.comb += [
            self.ndr.valid.eq(ndrq.r_rdy), self.ndr.payload.eq(ndr_r.msg),
            ndrq.r_en.eq(self.ndr.ready),
            self.drs.valid.eq(drsq.r_rdy), self.drs.payload.eq(drs_r.msg),
            drsq.r_en.eq(self.drs.ready),
        ]
        m.d.comb += arrival.free.eq(Cat(*[
            (self.ndr.valid & self.ndr.ready & eq_const(ndr_r.slot, i))
            | (self.drs.valid & self.drs.ready & eq_const(drs_r.slot, i))
            for i in range(cfg.tracker_slots)]))
        m.d.comb += self.idle.eq(~arrival.busy & ~window.zeroing)
        return m
