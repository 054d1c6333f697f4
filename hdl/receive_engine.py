"""The receive engine of one port: receive FIFO, head check, hand-off to a reduction lane.

Flits from the link go into a FIFO of ``rx_buffer_depth`` flits (``hdl.fifo.make_fifo``: a
one-read, one-write memory above 4 entries; a flit arriving at a full FIFO is an error). The engine pops one flit per cycle: a head is checked against the row on
``table.data`` (kind, flow, step, chunk, op, flits; a mismatch is an error, the engine carries on
with the row's values), then payload flit i goes to the reduction lane with address ``addr + i``
and the row's op, tagged ``last`` on the tail so the NI counts the arrival when its write retires.
Rows are prefetched as in the send engine (the next row is on ``table.data`` one cycle after a
head is popped; a message has at least two flits), so heads cost no extra cycle. The credit
return (``CreditReturn``) sees every pop.

A payload flit is popped only in a cycle where (1) its address is in the bank of the lane's slot
(``slot``, ``hdl.banked_buffer``) and (2) ``order_ok`` allows it. The NI computes ``order_ok``
from what every engine publishes (``busy``, ``chunk``, ``order``, ``addr``, ``written``): the
ordering rule (``hdl.ordering``) that a contribution writes a flit only after the contribution
before it in the schedule's order has written it. ``order`` is the row's ``deps``: the receives
into the chunk at this node that come before this one in the schedule (``golden_model.lowering``);
on a routed NI, whose messages arrive in any order, it is 0 and the rule is an interlock on the
flits other lanes have in flight. ``written`` counts this message's completed writes (the lane's
retirements); a head is taken only once every write of the message before it has completed (with
the int32 adder that costs nothing: the tail's write retires in the cycle the next head may be
taken), so what an engine publishes always describes one message.

Latency: a flit on ``flit_in`` in cycle t is popped in t+1 (if the engine is not behind, its
slot has come and nothing orders it to wait) and written by the reduction unit in t+2 (with the
int32 adder); the arrival of a message is counted at the end of the tail's
write cycle, so a dependent send can issue its head in t+3 after the tail reached ``flit_in``
(on its link in t+4). After the last message, ``done`` is 1 in the cycle of its last write,
t+2 with the int32 adder (t+2+L with an adder of L cycles).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .config import CHUNK_BITS, COUNT_BITS, NIConfig, ROUTER_HEAD_BITS
from .credit import CreditReturn
from .fifo import make_fifo
from .flit import Flit, FlitKind, FlitStream, HeadInfo
from .ops import eq_const, ge_const, is_zero
from .reduction import LaneRequest
from .schedule_table import ScheduleRow

__all__ = ["ReceiveEngine", "ArrivalTag"]


class ArrivalTag(data.Struct):
    """Tag of a lane request: the tail flit of a message into ``chunk``."""
    last: 1
    chunk: CHUNK_BITS


class ReceiveEngine(wiring.Component):
    """Receive engine of one port.

    Parameters
    ----------
    config : NIConfig

    Members
    -------
    start : ``In(1)``
        Pulse: restart from row 0.
    arm : ``In(1)``
        Pulse: a run of the network begins (it may come before ``start`` when the nodes start
        one after another). From ``arm`` (and from reset) until ``start`` a flit waits in the
        receive FIFO, its room held by the sender's credits; after ``start`` a flit with no
        row left is an error. Tie to 0 when every node starts in the same cycle.
    table : ``In(ReadPort.Signature(table_addr_width, ScheduleRow))``
    flit_in : ``In(FlitStream(flit_width))``
        From the link.
    credit_out : ``Out(1)``
        Credit pulses to the link.
    lane : ``Out(stream.Signature(LaneRequest(config, ArrivalTag), always_ready=True))``
        To this port's reduction lane.
    retire : ``In(stream.Signature(ArrivalTag, always_ready=True))``
        The lane's retirements (its writes).
    slot : ``In(bank_bits)``
        The bank the lane may read this cycle.
    order_ok : ``In(1)``
        The ordering rule allows the payload flit at ``addr`` this cycle.
    count_chunk : ``Out(CHUNK_BITS)``
        The chunk whose arrival count the ordering rule needs now or next: the message's while
        ``busy``, else the next row's (so that the count is loaded before its head arrives,
        ``hdl.arrivals``).
    busy, chunk, order, addr, written : ``Out``
        A message is in progress or has writes in flight; its chunk, its order (row ``deps``), the address of its next
        payload flit, and the address below which its flits are written (all of the message's
        flits from its first address up to ``written`` have completed their writes).
    done : ``Out(1)``
        Nothing left: no message in progress and the table exhausted (high after reset). The
        tail's write is then in the reduction unit's write stage, which completes at the end of
        this very cycle, so the buffer is final from the next cycle on.
    step : ``Out(16)``
        Step of the message being received or awaited.
    error : ``Out(1)``
        Pulse: receive FIFO overflow, a flit that does not match the table (kind or head
        fields), a flit after the table ended or before start, or a row whose chunk is not
        below ``max_chunks`` or whose message has no payload.
    """

    def __init__(self, config):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        super().__init__({
            "start": In(1),
            "arm": In(1),
            "table": In(memory.ReadPort.Signature(addr_width=config.table_addr_width,
                                                  shape=ScheduleRow)),
            "flit_in": In(FlitStream(config.flit_width)),
            "credit_out": Out(1),
            "lane": Out(stream.Signature(LaneRequest(config, ArrivalTag), always_ready=True)),
            "retire": In(stream.Signature(ArrivalTag, always_ready=True)),
            "slot": In(ceil_log2(config.buffer_banks)),
            "order_ok": In(1),
            "busy": Out(1),
            "chunk": Out(CHUNK_BITS),
            "count_chunk": Out(CHUNK_BITS),
            "order": Out(COUNT_BITS),
            "addr": Out(20),
            "written": Out(20),
            "done": Out(1),
            "step": Out(16),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        depth = cfg.table_depth
        flit_layout = Flit(cfg.flit_width)
        m.submodules.fifo = rx = make_fifo(width=flit_layout.size, depth=cfg.rx_buffer_depth)
        m.submodules.credit = ret = CreditReturn(cfg)
        overflow = Signal()
        m.d.comb += [
            rx.w_stream.valid.eq(self.flit_in.valid),
            rx.w_stream.payload.eq(self.flit_in.payload),
            overflow.eq(self.flit_in.valid & ~rx.w_stream.ready),
        ]

        active = Signal()
        idx = Signal(range(depth + 1))
        in_msg = Signal()
        remaining = Signal(20)
        addr = Signal(20)
        op = Signal.like(self.lane.payload.op)
        chunk = Signal(CHUNK_BITS)
        order = Signal(COUNT_BITS)
        written = Signal(20)
        cur_step = Signal(16)
        bank_bits = len(self.slot)

        row = self.table.data
        row_valid = Signal()
        m.d.comb += row_valid.eq(active & row.valid & ~eq_const(idx, depth))
        flit = flit_layout(rx.r_stream.payload)
        head_lo = ROUTER_HEAD_BITS if cfg.routed else 0
        head = HeadInfo(flit.payload[head_lo:head_lo + HeadInfo.as_shape().size])
        have = rx.r_stream.valid
        take_head = Signal()
        take_body = Signal()
        drop = Signal()
        waiting = Signal(init=1)    # armed, not started: flits wait
        slot_ok = Signal()
        m.d.comb += slot_ok.eq(addr[:bank_bits] == self.slot)
        drained = Signal()      # every write of the previous message has completed
        m.d.comb += drained.eq((written + self.retire.valid)[:len(written)] == addr)
        m.d.comb += [
            take_head.eq(have & ~in_msg & row_valid & drained),
            take_body.eq(have & in_msg & slot_ok & self.order_ok),
            # a flit after the table's end is an error; before start it waits (a neighbour
            # may start earlier)
            drop.eq(have & ~in_msg & ~row_valid & ~waiting),
            rx.r_stream.ready.eq(take_head | take_body | drop),
            ret.pop.eq(rx.r_stream.valid & rx.r_stream.ready),
            ret.kind.eq(flit.kind),
            self.credit_out.eq(ret.credit),
        ]

        head_bad = Signal()
        not_head = ~eq_const(flit.kind.as_value(), FlitKind.HEAD.value)
        if cfg.routed:      # any order: the head itself says what to do
            m.d.comb += head_bad.eq(not_head | is_zero(head.flits)
                                    | ge_const(head.chunk, cfg.max_chunks))
            use = head
        else:
            m.d.comb += head_bad.eq(not_head | (head.flow != row.flow)
                                    | (head.step != row.step) | (head.chunk != row.chunk)
                                    | (head.op != row.op) | (head.flits != row.flits)
                                    | (head.addr != row.addr))
            use = row
        last = Signal()     # the next payload flit is the tail
        m.d.comb += last.eq(eq_const(remaining, 1))
        body_kind = Mux(last, FlitKind.TAIL.value, FlitKind.BODY.value)
        row_bad = row_valid & (ge_const(row.chunk, cfg.max_chunks) | is_zero(row.flits))
        m.d.comb += self.error.eq(overflow | drop | row_bad | (take_head & head_bad)
                                  | (take_body & (flit.kind.as_value() != body_kind)))

        idx_next = Signal(range(depth + 1))
        m.d.comb += [
            idx_next.eq(Mux(self.start, 0, idx + take_head)),
            self.table.en.eq(1),
            self.table.addr.eq(Mux(eq_const(idx_next, depth), 0, idx_next)),
        ]
        m.d.sync += idx.eq(idx_next)

        with m.If(take_head):
            m.d.sync += [
                in_msg.eq(use.flits.any()),
                remaining.eq(use.flits),
                addr.eq(use.addr),
                op.eq(use.op),
                chunk.eq(use.chunk),
                order.eq(0 if cfg.routed else row.deps),
                written.eq(use.addr),
                cur_step.eq(use.step),
            ]
        with m.Elif(self.retire.valid):
            m.d.sync += written.eq(written + 1)
        with m.If(take_body):
            m.d.sync += [remaining.eq(remaining - 1), addr.eq(addr + 1)]
            with m.If(last):
                m.d.sync += in_msg.eq(0)

        lane = self.lane.payload
        m.d.comb += [
            self.lane.valid.eq(take_body),
            lane.addr.eq(addr),
            lane.data.eq(flit.payload),
            lane.op.eq(op),
            lane.tag.last.eq(last),
            lane.tag.chunk.eq(chunk),
            self.busy.eq(in_msg | (written != addr)),
            self.chunk.eq(chunk),
            self.count_chunk.eq(Mux(self.busy, chunk, row.chunk)),
            self.order.eq(order),
            self.addr.eq(addr),
            self.written.eq(written),
        ]

        with m.If(self.start):
            m.d.sync += [active.eq(1), in_msg.eq(0)]
        with m.Elif(active & ~in_msg & ~row_valid):
            m.d.sync += active.eq(0)
        with m.If(self.start):
            m.d.sync += waiting.eq(0)
        with m.Elif(self.arm):
            m.d.sync += waiting.eq(1)

        # done once the last write is in its write stage (its retirement), whatever the
        # adder's latency: a backdoor read in the next cycle sees every flit written
        last_write = (written == addr) | (self.retire.valid & ((written + 1)[:len(addr)] == addr))
        m.d.comb += [
            self.done.eq(~in_msg & ~row_valid & last_write),
            self.step.eq(Mux(in_msg, cur_step, row.step)),
        ]
        return m
