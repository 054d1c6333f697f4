"""``CXLMemController``: a CXL.mem device memory with the COARSE accumulate window.

docs/hardware.md, "CXLMemController (COARSE)", is the contract; this is how it is built.

Blocks, in the order a request passes them:

* **Arrival.** ``req`` (M2S Req) and ``rwd`` (M2S RwD) are credit-flow-controlled streams that
  are always ready (CXL links have no back-pressure: the host sends only with a credit). Each
  arriving message takes a **tracker** entry (its tag, until its response is accepted by the
  host) and is checked against the tags already in flight (a duplicate is marked and later
  answered with the error response). RwD messages go to a ``SyncFIFO`` of ``rwd_credits``
  entries; Req messages to a shift queue of ``req_credits`` entries, each of which also counts
  the RwD messages that arrived before it and are still queued (``ahead``): a message is older
  than another iff it arrived in an earlier cycle; in one cycle the RwD message is the older.
  A message that finds its queue full (the host sent without a credit) is dropped and sets the
  sticky ``error`` output.
* **Issue (stage A)**, at most one operation per cycle, in priority order: a held read whose
  tensor has completed (``released``), a held read that timed out (``expired``), then the older
  of the Req head and the RwD head. A Req head that must be held while every hold slot is busy
  lets younger RwD messages pass (they may be the writes it waits for). Popping a queue returns
  one credit (``req_credit`` / ``rwd_credit`` pulses). An operation issues only when its
  response queue has room (counting the operation in stage B), so a consumed request never
  waits for a response slot. Stage A reads the line from its bank and, for an accumulate write,
  increments the tensor's arrival counter; a read of a tensor whose counter is below
  ``CONTRIB << SHIFT`` goes to a hold slot instead (no memory access, no response yet).
* **Modify and write (stage B)**: the old line comes back; a write merges the new bytes (byte
  enables), an accumulate adds the 16 int32 elements (wrap-around) and keeps the disabled bytes;
  the line is written back; the response goes into the NDR or DRS queue. Each bank's read port
  is transparent to its write port, so an operation issued in the cycle after another one to
  the same line sees its result (read-after-write and back-to-back accumulates are exact).

Memory: ``num_banks`` ``hdl.ram.RAM`` banks of ``num_lines / num_banks`` lines of 512 bits; line
``a`` is in bank ``a % num_banks``, row ``a // num_banks``.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from ..ops import eq_const, lt_const, select_word
from ..ram import RAM
from .config import LINE_BITS, LINE_BYTES, LINE_ELEMENTS, TAG_BITS, CXLMemConfig
from .messages import (CSR, CTRL_CLEAR, CTRL_ZERO, M2SReq, M2SReqOpcode, M2SRwD, M2SRwDOpcode,
                       MetaField, S2MDRS, S2MDRSOpcode, S2MNDR, S2MNDROpcode, CSRWrite)

__all__ = ["CXLMemController", "TIMER_BITS"]

#: Width of the ``TIMEOUT`` register and of a hold slot's timer.
TIMER_BITS = 32


def _first_set(m, bits, name):
    """(any, index of the lowest set bit) of a list of 1-bit values."""
    width = max(1, ceil_log2(len(bits)))
    index = Signal(width, name=f"{name}_index")
    any_ = Signal(name=f"{name}_any")
    m.d.comb += any_.eq(Cat(*bits).any())
    expr = Const(0, width)
    for i in reversed(range(len(bits))):
        expr = Mux(bits[i], Const(i, width), expr)
    m.d.comb += index.eq(expr)
    return any_, index


def _lt(a, b):
    """``a < b`` for unsigned values of any widths, written with equal-width operands (Amaranth
    prints zero extension as a plain operand, which Verilator reports as WIDTHEXPAND)."""
    a, b = Value.cast(a), Value.cast(b)
    if len(a) > len(b):
        return ~a[len(b):].any() & (a[:len(b)] < b)
    if len(b) > len(a):
        return b[len(a):].any() | (a < b[:len(a)])
    return a < b


def _shl(value, amount, width, max_amount):
    """``(value << amount)[:width]`` for ``amount <= max_amount``, as a multiplexer over the
    constant shifts (Verilog ``<<`` of a variable amount widens its operand)."""
    value = Value.cast(value)
    expr = Const(0, width)
    for k in reversed(range(max_amount + 1)):
        shifted = Cat(Const(0, k), value)[:width] if k else value
        if len(shifted) < width:
            shifted = Cat(shifted, Const(0, width - len(shifted)))
        expr = Mux(eq_const(amount, k), shifted, expr)
    return expr


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
        if not isinstance(config, CXLMemConfig):
            raise ValueError(f"config must be a CXLMemConfig, not {config!r}")
        self._config = config
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
        n_trk = cfg.tracker_slots
        sw = max(1, ceil_log2(n_trk))             # tracker slot index width
        lw = cfg.line_bits
        cb = cfg.counter_bits
        tb = max(1, cfg.tensor_bits)
        aw = bits_for(cfg.rwd_credits)            # Req queue "ahead" counters
        nb = cfg.num_banks

        # ---- registers (CSR) -------------------------------------------------------------
        r_base = Signal(lw)
        r_groups = Signal(bits_for(cfg.num_tensors))
        r_shift = Signal(bits_for(cfg.max_group_shift))
        r_contrib = Signal(8)
        r_timeout = Signal(TIMER_BITS, init=cfg.default_timeout)
        target = Signal(cb)
        m.d.comb += target.eq(_shl(r_contrib, r_shift, cb, cfg.max_group_shift))

        counters = Array(Signal(cb, name=f"arrivals{i}") for i in range(cfg.num_tensors))

        # ---- memory banks ----------------------------------------------------------------
        banks = []
        for b in range(nb):
            ram = RAM(shape=LINE_BITS, depth=cfg.bank_depth, num_write=1, transparency=[(0,)])
            m.submodules[f"bank{b}"] = ram
            banks.append(ram)

        def split_line(line):
            """(bank, row) of a line address."""
            if cfg.bank_bits:
                return line[:cfg.bank_bits], line[cfg.bank_bits:lw]
            return Const(0, 1), line[:lw]

        # ---- tracker (tags in flight) ----------------------------------------------------
        trk_valid = Signal(n_trk)
        trk_tag = Array(Signal(TAG_BITS, name=f"trk_tag{i}") for i in range(n_trk))
        trk_alloc = Signal(n_trk)
        trk_free = Signal(n_trk)
        m.d.sync += trk_valid.eq((trk_valid & ~trk_free) | trk_alloc)

        def tag_in_flight(tag):
            return Cat(*[trk_valid[i] & ~(trk_tag[i] ^ tag).any() for i in range(n_trk)]).any()

        free_any0, free0 = _first_set(m, [~trk_valid[i] for i in range(n_trk)], "free0")
        free_any1, free1 = _first_set(
            m, [~trk_valid[i] & ~eq_const(free0, i) for i in range(n_trk)], "free1")

        # ---- queues ----------------------------------------------------------------------
        rwd_entry = data.StructLayout({"msg": M2SRwD, "dup": 1, "slot": sw})
        req_entry = data.StructLayout({"msg": M2SReq, "dup": 1, "slot": sw})
        m.submodules.rwd_queue = rwdq = fifo.SyncFIFO(width=rwd_entry.size,
                                                      depth=cfg.rwd_credits)
        rwd_head = data.View(rwd_entry, rwdq.r_data)
        rwd_pop = Signal()
        m.d.comb += rwdq.r_en.eq(rwd_pop)

        dq = cfg.req_credits
        q_valid = Signal(dq)
        q_entry = [Signal(req_entry, name=f"reqq{i}") for i in range(dq)]
        q_ahead = [Signal(aw, name=f"reqq{i}_ahead") for i in range(dq)]
        req_head = q_entry[0]
        req_pop = Signal()

        ndr_entry = data.StructLayout({"msg": S2MNDR, "slot": sw})
        drs_entry = data.StructLayout({"msg": S2MDRS, "slot": sw})
        m.submodules.ndr_queue = ndrq = fifo.SyncFIFO(width=ndr_entry.size, depth=cfg.ndr_depth)
        m.submodules.drs_queue = drsq = fifo.SyncFIFO(width=drs_entry.size, depth=cfg.drs_depth)

        # ---- arrival ---------------------------------------------------------------------
        rwd_in = self.rwd.valid
        req_in = self.req.valid
        rwd_accept = Signal()
        req_accept = Signal()
        rwd_slot = Signal(sw)
        req_slot = Signal(sw)
        m.d.comb += [
            rwd_accept.eq(rwd_in & rwdq.w_rdy & free_any0),
            rwd_slot.eq(free0),
            req_slot.eq(Mux(rwd_accept, free1, free0)),
            req_accept.eq(req_in & (~q_valid[dq - 1] | req_pop)
                          & Mux(rwd_accept, free_any1, free_any0)),
        ]
        with m.If((rwd_in & ~rwd_accept) | (req_in & ~req_accept)):
            m.d.sync += self.error.eq(1)
        rwd_dup = tag_in_flight(self.rwd.payload.tag)
        req_dup = tag_in_flight(self.req.payload.tag) | (
            rwd_in & ~(self.rwd.payload.tag ^ self.req.payload.tag).any())
        new_rwd = Signal(rwd_entry)
        m.d.comb += [
            new_rwd.msg.eq(self.rwd.payload),
            new_rwd.dup.eq(rwd_dup),
            new_rwd.slot.eq(rwd_slot),
            rwdq.w_data.eq(new_rwd),
            rwdq.w_en.eq(rwd_accept),
        ]
        alloc_bits = []
        for i in range(n_trk):
            a_rwd = rwd_accept & eq_const(rwd_slot, i)
            a_req = req_accept & eq_const(req_slot, i)
            alloc_bits.append(a_rwd | a_req)
            with m.If(a_rwd):
                m.d.sync += trk_tag[i].eq(self.rwd.payload.tag)
            with m.If(a_req):
                m.d.sync += trk_tag[i].eq(self.req.payload.tag)
        m.d.comb += trk_alloc.eq(Cat(*alloc_bits))

        # Req shift queue: pop shifts every entry down; a push goes to the first free entry
        # after the shift. ``ahead`` = RwD messages older than the entry still queued.
        new_req = Signal(req_entry)
        m.d.comb += [new_req.msg.eq(self.req.payload), new_req.dup.eq(req_dup),
                     new_req.slot.eq(req_slot)]
        new_ahead = Signal(aw)
        m.d.comb += new_ahead.eq(rwdq.level + rwd_accept - rwd_pop)
        shifted_valid = Signal(dq)
        m.d.comb += shifted_valid.eq(Mux(req_pop, q_valid >> 1, q_valid))
        for i in range(dq):
            nxt_entry = q_entry[i + 1] if i + 1 < dq else q_entry[i]
            nxt_ahead = q_ahead[i + 1] if i + 1 < dq else q_ahead[i]
            cur_entry = Mux(req_pop, nxt_entry.as_value(), q_entry[i].as_value())
            cur_ahead = Mux(req_pop, nxt_ahead, q_ahead[i])
            dec_ahead = Mux(rwd_pop & cur_ahead.any(), (cur_ahead - 1)[:aw], cur_ahead)
            push_here = req_accept & ~shifted_valid[i]
            if i > 0:
                push_here = push_here & shifted_valid[i - 1]
            with m.If(push_here):
                m.d.sync += [q_entry[i].eq(new_req), q_ahead[i].eq(new_ahead)]
            with m.Else():
                m.d.sync += [q_entry[i].eq(cur_entry), q_ahead[i].eq(dec_ahead)]
            m.d.sync += q_valid[i].eq(shifted_valid[i] | push_here)
        m.d.comb += [self.req_credit.eq(req_pop), self.rwd_credit.eq(rwd_pop)]

        # ---- address decode (window, range) ----------------------------------------------

        def decode(addr, name):
            in_range = Signal(name=f"{name}_in_range")
            in_window = Signal(name=f"{name}_in_window")
            tensor = Signal(tb, name=f"{name}_tensor")
            line = Signal(lw, name=f"{name}_line")
            offset = Signal(lw + 1, name=f"{name}_offset")
            group = Signal(lw + 1, name=f"{name}_group")
            m.d.comb += [
                in_range.eq(lt_const(addr, cfg.num_lines)),
                line.eq(addr[:lw]),
                offset.eq(line - r_base),
                group.eq(offset >> r_shift),
                in_window.eq(in_range & ~offset[lw] & _lt(group, r_groups)),
                tensor.eq(group[:tb]),
            ]
            return in_range, in_window, tensor, line

        req_range, req_window, req_tensor, req_line = decode(req_head.msg.addr, "req")
        rwd_range, rwd_window, rwd_tensor, rwd_line = decode(rwd_head.msg.addr, "rwd")

        # ---- hold slots --------------------------------------------------------------------
        nh = cfg.hold_slots
        h_valid = Signal(nh)
        h_tag = [Signal(TAG_BITS, name=f"hold{k}_tag") for k in range(nh)]
        h_slot = [Signal(sw, name=f"hold{k}_slot") for k in range(nh)]
        h_line = [Signal(lw, name=f"hold{k}_line") for k in range(nh)]
        h_tensor = [Signal(tb, name=f"hold{k}_tensor") for k in range(nh)]
        h_timer = [Signal(TIMER_BITS, name=f"hold{k}_timer") for k in range(nh)]
        released = [h_valid[k] & (counters[h_tensor[k]] >= target) for k in range(nh)]
        expired = [h_valid[k] & (h_timer[k] >= r_timeout) for k in range(nh)]
        rel_any, rel_k = _first_set(m, released, "released")
        exp_any, exp_k = _first_set(m, expired, "expired")
        hfree_any, hfree_k = _first_set(m, [~h_valid[k] for k in range(nh)], "hold_free")
        for k in range(nh):
            with m.If(h_valid[k] & ~h_timer[k].all()):
                m.d.sync += h_timer[k].eq(h_timer[k] + 1)
        h_take = Signal(nh)     # freed this cycle
        h_put = Signal(nh)      # allocated this cycle
        m.d.sync += h_valid.eq((h_valid & ~h_take) | h_put)

        # ---- stage B registers -------------------------------------------------------------
        sb = Signal(data.StructLayout({
            "valid": 1, "drs": 1, "ndr_op": S2MNDROpcode, "drs_op": S2MDRSOpcode, "poison": 1,
            "mem_data": 1, "write": 1, "accum": 1, "be": LINE_BYTES, "data": LINE_BITS,
            "bank": max(1, cfg.bank_bits), "row": max(1, cfg.row_bits), "tag": TAG_BITS,
            "slot": sw,
        }), name="stage_b")
        nxt = Signal.like(sb, name="stage_a")
        m.d.sync += sb.eq(nxt)

        # response room: the operation in stage B pushes this cycle
        ndr_ok = Signal()
        drs_ok = Signal()
        m.d.comb += [
            ndr_ok.eq(lt_const(ndrq.level + (sb.valid & ~sb.drs), cfg.ndr_depth)),
            drs_ok.eq(lt_const(drsq.level + (sb.valid & sb.drs), cfg.drs_depth)),
        ]

        # ---- CSR and zeroing -------------------------------------------------------------
        zeroing = Signal()
        z_line = Signal(lw + 1)
        z_end = Signal(lw + 1)
        csr_take = Signal()
        m.d.comb += [self.csr.ready.eq(~zeroing & ~sb.valid),
                     csr_take.eq(self.csr.valid & self.csr.ready)]
        ew = lw + 1 + cfg.max_group_shift + len(r_groups)
        window_end = Signal(ew)
        base_wide = Signal(ew)      # r_base, kept at the width of window_end
        m.d.comb += window_end.eq(base_wide + _shl(r_groups, r_shift, ew, cfg.max_group_shift))
        window_end_clip = Signal(lw + 1)
        m.d.comb += window_end_clip.eq(Mux(lt_const(window_end, cfg.num_lines + 1),
                                           window_end[:lw + 1], cfg.num_lines))
        clear_counters = Signal()
        with m.If(csr_take):
            d = self.csr.payload.data
            addr = Value.cast(self.csr.payload.addr)
            with m.If(eq_const(addr, CSR.BASE.value)):
                with m.If(lt_const(d, cfg.num_lines)):
                    m.d.sync += [r_base.eq(d[:lw]), base_wide.eq(d[:lw])]
            with m.If(eq_const(addr, CSR.GROUPS.value)):
                m.d.sync += r_groups.eq(Mux(lt_const(d, cfg.num_tensors + 1),
                                            d[:len(r_groups)], cfg.num_tensors))
            with m.If(eq_const(addr, CSR.SHIFT.value)):
                m.d.sync += r_shift.eq(Mux(lt_const(d, cfg.max_group_shift + 1),
                                           d[:len(r_shift)], cfg.max_group_shift))
            with m.If(eq_const(addr, CSR.CONTRIB.value)):
                m.d.sync += r_contrib.eq(Mux(lt_const(d, 256), d[:8], 255))
            with m.If(eq_const(addr, CSR.TIMEOUT.value)):
                m.d.sync += r_timeout.eq(d)
            with m.If(eq_const(addr, CSR.CTRL.value)):
                m.d.comb += clear_counters.eq(d[CTRL_CLEAR.bit_length() - 1])
                with m.If(d[CTRL_ZERO.bit_length() - 1] & lt_const(r_base, cfg.num_lines)
                          & (window_end > base_wide)):
                    m.d.sync += [zeroing.eq(1), z_line.eq(r_base), z_end.eq(window_end_clip)]
        with m.If(zeroing):
            m.d.sync += z_line.eq(z_line + 1)
            z_next = Signal(lw + 1)
            m.d.comb += z_next.eq(z_line + 1)
            with m.If(z_next >= z_end):
                m.d.sync += zeroing.eq(0)

        # ---- stage A: choose and issue ---------------------------------------------------
        issue_ok = Signal()
        m.d.comb += issue_ok.eq(~zeroing & ~csr_take)

        counter_inc = Signal()
        counter_idx = Signal(tb)

        req_op = req_head.msg.opcode
        is_rd = _is(req_op, M2SReqOpcode.MemRd)
        is_inv = _is(req_op, M2SReqOpcode.MemInv)
        req_hold = Signal()
        req_drs = Signal()
        m.d.comb += [
            req_hold.eq(~req_head.dup & is_rd & req_window
                        & (counters[req_tensor] < target)),
            req_drs.eq(is_rd),
        ]
        rwd_op = rwd_head.msg.opcode
        rwd_bad = Signal()
        m.d.comb += rwd_bad.eq(rwd_head.dup | rwd_head.msg.poison | ~rwd_range
                               | ~(_is(rwd_op, M2SRwDOpcode.MemWr)
                                   | _is(rwd_op, M2SRwDOpcode.MemWrPtl)))
        req_older = Signal()
        m.d.comb += req_older.eq(q_valid[0] & ~q_ahead[0].any())

        rwd_bank, rwd_row = split_line(rwd_line)
        req_bank, req_row = split_line(req_line)
        def pick(values, k):
            return select_word(Cat(*values), k, len(values[0]), len(values))

        def issue_hold(k, poison):
            bank, row = split_line(pick(h_line, k))
            m.d.comb += [
                nxt.valid.eq(1), nxt.drs.eq(1), nxt.drs_op.eq(S2MDRSOpcode.MemData),
                nxt.poison.eq(poison), nxt.mem_data.eq(~poison),
                nxt.bank.eq(bank), nxt.row.eq(row),
                nxt.tag.eq(pick(h_tag, k)), nxt.slot.eq(pick(h_slot, k)),
                h_take.eq((Const(1, nh) << k)[:nh]),
            ]

        with m.If(issue_ok):
            with m.If(rel_any):
                with m.If(drs_ok):
                    issue_hold(rel_k, 0)
            with m.Elif(exp_any):
                with m.If(drs_ok):
                    issue_hold(exp_k, 1)
            with m.Elif(req_older & ~(req_hold & ~hfree_any)):
                # the Req head is the oldest message and can go
                with m.If(req_hold):
                    m.d.comb += [req_pop.eq(1), h_put.eq((Const(1, nh) << hfree_k)[:nh])]
                    for k in range(nh):
                        with m.If(eq_const(hfree_k, k)):
                            m.d.sync += [h_tag[k].eq(req_head.msg.tag),
                                         h_slot[k].eq(req_head.slot),
                                         h_line[k].eq(req_line), h_tensor[k].eq(req_tensor),
                                         h_timer[k].eq(0)]
                with m.Elif(Mux(req_drs, drs_ok, ndr_ok)):
                    m.d.comb += [
                        req_pop.eq(1),
                        nxt.valid.eq(1), nxt.drs.eq(req_drs),
                        nxt.tag.eq(req_head.msg.tag), nxt.slot.eq(req_head.slot),
                        nxt.bank.eq(req_bank), nxt.row.eq(req_row),
                    ]
                    with m.If(req_head.dup):
                        m.d.comb += [nxt.poison.eq(1), nxt.ndr_op.eq(S2MNDROpcode.CmpErr),
                                     nxt.drs_op.eq(S2MDRSOpcode.MemData)]
                    with m.Elif(~(is_rd | is_inv)):
                        m.d.comb += nxt.ndr_op.eq(S2MNDROpcode.CmpErr)
                    with m.Elif(~req_range):
                        m.d.comb += [nxt.poison.eq(1), nxt.ndr_op.eq(S2MNDROpcode.CmpErr),
                                     nxt.drs_op.eq(S2MDRSOpcode.MemDataNXM)]
                    with m.Else():
                        m.d.comb += [nxt.ndr_op.eq(S2MNDROpcode.Cmp),
                                     nxt.drs_op.eq(S2MDRSOpcode.MemData),
                                     nxt.mem_data.eq(is_rd)]
            with m.Elif(rwdq.r_rdy):
                with m.If(ndr_ok):
                    m.d.comb += [
                        rwd_pop.eq(1),
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
                                     nxt.accum.eq(rwd_window)]
                        with m.If(rwd_window):
                            m.d.comb += [counter_inc.eq(1), counter_idx.eq(rwd_tensor)]

        # arrival counters
        for i in range(cfg.num_tensors):
            with m.If(clear_counters):
                m.d.sync += counters[i].eq(0)
            with m.Elif(counter_inc & eq_const(counter_idx, i) & ~counters[i].all()):
                m.d.sync += counters[i].eq(counters[i] + 1)

        # stage A memory reads: every bank reads the row of the issued operation
        for ram in banks:
            m.d.comb += [ram.read[0].en.eq(1), ram.read[0].addr.eq(nxt.row)]

        # ---- stage B: modify, write, respond ---------------------------------------------
        old = Signal(LINE_BITS)
        m.d.comb += old.eq(Array(ram.read[0].data for ram in banks)[sb.bank]
                           if nb > 1 else banks[0].read[0].data)
        merged = Signal(LINE_BITS)
        for e in range(LINE_ELEMENTS):
            o = old[32 * e:32 * e + 32]
            w = sb.data[32 * e:32 * e + 32]
            s = Signal(32, name=f"sum{e}")
            m.d.comb += s.eq(o + w)
            for j in range(4):
                i = 4 * e + j
                sl = slice(8 * j, 8 * j + 8)
                m.d.comb += merged[8 * i:8 * i + 8].eq(
                    Mux(sb.be[i], Mux(sb.accum, s[sl], w[sl]), o[sl]))
        for b, ram in enumerate(banks):
            wp = ram.write[0]
            zb, zr = split_line(z_line[:lw])
            with m.If(zeroing):
                m.d.comb += [wp.en.eq(eq_const(zb, b) if nb > 1 else 1), wp.addr.eq(zr),
                             wp.data.eq(0)]
            with m.Else():
                m.d.comb += [wp.en.eq(sb.valid & sb.write & (eq_const(sb.bank, b)
                                                             if nb > 1 else 1)),
                             wp.addr.eq(sb.row), wp.data.eq(merged)]

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
        free_bits = []
        for i in range(n_trk):
            free_bits.append((self.ndr.valid & self.ndr.ready & eq_const(ndr_r.slot, i))
                             | (self.drs.valid & self.drs.ready & eq_const(drs_r.slot, i)))
        m.d.comb += trk_free.eq(Cat(*free_bits))
        m.d.comb += self.idle.eq(~trk_valid.any() & ~zeroing)
        return m
