"""The send engine of one port: walks its table and streams messages onto the link.

Pipeline (one flit per cycle when credits allow):

* issue stage, cycle t: the engine decides to send a flit and takes its credit. A head needs the
  row in hand (``table.data``), ``dep_count >= row.deps`` (arrivals of ``row.chunk``) and a credit;
  a payload flit needs only its credit and puts its buffer address on ``buf``.
* output stage, cycle t+1: ``flit_out`` carries the flit (the head from a register, payload
  straight from the buffer read port).

Rows are prefetched: when a head issues in cycle t, the table read of the next row is issued in
the same cycle, so the next row is on ``table.data`` from t+1. A message has at least one payload
flit, so the next head can issue right after the current tail: **no idle cycle between messages**
when the next row's dependencies are met and a credit is there. After ``start`` (cycle s) the
first row is read in cycle s and the first head can issue in s+1 (on the link input in s+2).

Bank slots (``hdl.banked_buffer``): a payload flit is read only in a cycle where its address is
in the bank of the engine's ``slot``; a head issues only when the message's first payload flit
will be in the next cycle's slot (or the message has no payload), so a message streams at one
flit per cycle from its head on. Waiting for the slot costs at most K - 1 cycles per message and
per stall (a credit the engine waited for).

Routed NI (``NIConfig.routed``): the head carries the router's ``RouterHead`` (the row's
``dest`` and ``src`` terminals, ``flits``) in its low 32 bits and the ``HeadInfo`` above it.
A head also waits for its row's release cycle (``release``, read from the release table with the
row, ``hdl.schedule_table``): it issues only once the NI's cycle count ``now`` has reached it
(a timetable, ``golden_model.timetable``; 0 never waits).
With a loopback port (``NIConfig.loopback``, staged reductions of ``golden_model.lowering``) a
row with ``stage`` j reads its chunk and sends to staging slot j (``chunk + j``, from flit
``addr + j * flits``), or with ``unstage`` reads slot j (and waits for its arrival) and sends to
the chunk.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .config import (CHUNK_BITS, COUNT_BITS, FIELD_ADDR_BITS, NIConfig, RELEASE_BITS,
                     ROUTER_HEAD_BITS)
from .credit import CreditCounter
from .ops import add_narrow, eq_const, ge_const, is_zero
from .flit import FlitKind, FlitStream, HeadInfo
from .schedule_table import ScheduleRow

__all__ = ["SendEngine"]


class SendEngine(wiring.Component):
    """Send engine of one port.

    Parameters
    ----------
    config : NIConfig

    Members
    -------
    start : ``In(1)``
        Pulse: restart from row 0 (the NI's start).
    table : ``In(ReadPort.Signature(table_addr_width, ScheduleRow))``
        The engine's table (driven while running).
    buf : ``In(ReadPort.Signature(buffer_addr_width, flit_width))``
        The engine's read client of the banked buffer.
    slot : ``In(bank_bits)``
        The bank that client may read this cycle.
    dep_chunk : ``Out(CHUNK_BITS)``
        The chunk of the row waiting to be sent.
    dep_count : ``In(COUNT_BITS)``
        Completed receives into ``dep_chunk`` (``hdl.arrivals``; a lower bound, 0 while the
        count is loading).
    flit_out : ``Out(FlitStream(flit_width))``
        To the link.
    credit_in : ``In(1)``
        Credit pulses from the link.
    open : ``In(1)``
        The link's rate limit (``hdl.rate``, default 1): no flit issues while it is low. It
        closes for whole multiples of the bank count K (``hdl.link.Link``), so a message that
        waits keeps its bank slots.
    done : ``Out(1)``
        Not running: the table is exhausted and the last flit has left (high after reset).
    step : ``Out(16)``
        Step of the row being sent or waited for.
    error : ``Out(1)``
        Pulse: the row's chunk is not below ``max_chunks`` (its dependency cannot be counted).
    release : ``In(RELEASE_BITS)``
        Routed only: the release cycle of the row on ``table.data`` (read with it).
    now : ``In(32)``
        Routed only: the NI's cycle count since start (``NetworkInterface.cycles``).
    """

    def __init__(self, config):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        timed = {"release": In(RELEASE_BITS), "now": In(32)} if config.routed else {}
        super().__init__({
            **timed,
            "start": In(1),
            "table": In(memory.ReadPort.Signature(addr_width=config.table_addr_width,
                                                  shape=ScheduleRow)),
            "buf": In(memory.ReadPort.Signature(addr_width=config.buffer_addr_width,
                                                shape=unsigned(config.flit_width))),
            "slot": In(ceil_log2(config.buffer_banks)),
            "dep_chunk": Out(CHUNK_BITS),
            "dep_count": In(COUNT_BITS),
            "flit_out": Out(FlitStream(config.flit_width)),
            "credit_in": In(1),
            "open": In(1, init=1),
            "done": Out(1),
            "step": Out(16),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        depth = cfg.table_depth
        m.submodules.credit_counter = credits = CreditCounter(cfg)
        m.d.comb += credits.credit_in.eq(self.credit_in)

        active = Signal()                 # running (between start and the end of the table)
        idx = Signal(range(depth + 1))    # row on table.data
        in_msg = Signal()                 # sending payload flits
        remaining = Signal(20)            # payload flits still to issue
        addr = Signal(20)                 # buffer address of the next payload flit
        cur_step = Signal(16)
        out_valid = Signal()
        out_kind = Signal(FlitKind)
        out_is_head = Signal()
        out_head = Signal(HeadInfo)
        out_route = Signal(ROUTER_HEAD_BITS)    # routed: dest(10) | src(10) | flits(12)

        row = self.table.data
        row_valid = Signal()
        deps_ok = Signal()
        last = Signal()     # the next payload flit is the tail
        m.d.comb += [
            last.eq(eq_const(remaining, 1)),
            row_valid.eq(active & row.valid & ~eq_const(idx, depth)),
            deps_ok.eq(self.dep_count >= row.deps),
        ]
        head_go = Signal()
        body_go = Signal()
        bits = len(self.slot)
        # Where the message is read (its chunk and first flit) and where its head says it goes:
        # the row's chunk, or with staged reductions one of them its staging slot
        # (golden_model.lowering: slot j at chunk + j, addr + j * flits).
        src_chunk, src_addr = row.chunk, row.addr
        dst_chunk, dst_addr = row.chunk, row.addr
        if cfg.loopback:
            slot_chunk = Signal(CHUNK_BITS)
            slot_addr = Signal(FIELD_ADDR_BITS)
            offset = Signal(FIELD_ADDR_BITS)        # j * flits: at most buffer_depth - 1
            m.d.comb += [offset.eq(row.stage * row.flits),
                         slot_chunk.eq(add_narrow(row.chunk, row.stage)),
                         slot_addr.eq(row.addr + offset)]
            src_chunk = Mux(row.unstage, slot_chunk, row.chunk)
            src_addr = Mux(row.unstage, slot_addr, row.addr)
            dst_chunk = Mux(row.unstage, row.chunk, slot_chunk)
            dst_addr = Mux(row.unstage, row.addr, slot_addr)
        released = Signal(init=1)   # routed: the row's release cycle has come
        if cfg.routed:
            m.d.comb += released.eq(self.now[RELEASE_BITS:].any()
                                    | (self.now[:RELEASE_BITS] >= self.release))
        aligned = Signal()        # the first payload flit's bank is next cycle's slot
        slot_ok = Signal()        # the next payload flit's bank is this cycle's slot
        m.d.comb += [aligned.eq(is_zero(row.flits) | (src_addr[:bits] == (self.slot + 1)[:bits])),
                     slot_ok.eq(addr[:bits] == self.slot)]
        m.d.comb += [
            self.dep_chunk.eq(src_chunk),
            credits.head.eq(~in_msg),
            head_go.eq(~in_msg & row_valid & deps_ok & aligned & credits.ready & self.open
                       & released),
            body_go.eq(in_msg & slot_ok & credits.ready & self.open),
            credits.send.eq(head_go | body_go),
            self.error.eq(row_valid & (ge_const(src_chunk, cfg.max_chunks)
                                       | ge_const(dst_chunk, cfg.max_chunks))),
        ]

        # Table read: row 0 on start, else the row after the one on table.data once it issues.
        idx_next = Signal(range(depth + 1))
        m.d.comb += [
            idx_next.eq(Mux(self.start, 0, idx + head_go)),
            self.table.en.eq(1),
            self.table.addr.eq(Mux(eq_const(idx_next, depth), 0, idx_next)),
            self.buf.en.eq(body_go),     # only real reads (bare banks, hdl.ram)
            self.buf.addr.eq(addr),
        ]
        m.d.sync += idx.eq(idx_next)

        m.d.sync += out_valid.eq(head_go | body_go)
        with m.If(head_go):
            m.d.sync += [
                in_msg.eq(row.flits.any()),
                remaining.eq(row.flits),
                addr.eq(src_addr),
                cur_step.eq(row.step),
                out_is_head.eq(1),
                out_kind.eq(Mux(is_zero(row.flits), FlitKind.HEAD_TAIL, FlitKind.HEAD)),
                out_head.flow.eq(row.flow),
                out_head.step.eq(row.step),
                out_head.chunk.eq(dst_chunk),
                out_head.op.eq(row.op),
                out_head.flits.eq(row.flits),
                out_head.addr.eq(dst_addr),
            ]
            if cfg.routed:
                m.d.sync += out_route.eq(Cat(row.dest, row.src, row.flits[:12]))
        with m.If(body_go):
            m.d.sync += [
                remaining.eq(remaining - 1),
                addr.eq(addr + 1),
                out_is_head.eq(0),
                out_kind.eq(Mux(last, FlitKind.TAIL, FlitKind.BODY)),
            ]
            with m.If(last):
                m.d.sync += in_msg.eq(0)

        with m.If(self.start):
            m.d.sync += [active.eq(1), in_msg.eq(0)]
        with m.Elif(active & ~in_msg & ~row_valid):
            m.d.sync += active.eq(0)

        head_word = Cat(out_route, out_head) if cfg.routed else out_head.as_value()
        m.d.comb += [
            self.flit_out.valid.eq(out_valid),
            self.flit_out.payload.kind.eq(out_kind),
            self.flit_out.payload.payload.eq(Mux(out_is_head, head_word, self.buf.data)),
            self.done.eq(~active & ~out_valid),
            self.step.eq(Mux(in_msg, cur_step, row.step)),
        ]
        return m
