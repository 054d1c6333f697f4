"""``RequestArrival``: where M2S messages enter the CXL.mem controller (docs/hardware.md,
"CXLMemController (COARSE)").

``req`` (M2S Req) and ``rwd`` (M2S RwD) are credit-flow-controlled streams that are always
ready (CXL links have no back-pressure: the host sends only with a credit). Each arriving
message takes a **tracker** entry (its tag, until its response is accepted by the host) and is
checked against the tags in flight: a duplicate is marked, to be answered with the error
response. RwD messages go to a FIFO of ``rwd_credits`` entries (``hdl.fifo.make_fifo``: a
1R1W memory above a few entries); Req messages to a shift queue of ``req_credits`` entries,
each of which also counts the RwD messages that arrived before it and are still queued
(``ahead``): a message is older than another iff it arrived in an earlier cycle; in one
cycle the RwD message is the older. A message that finds its queue or the tracker full (the
host sent without a credit) is dropped and sets the sticky ``error``.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ..fifo import make_fifo
from ..ops import eq_const, first_set
from .config import TAG_BITS, checked_config
from .messages import M2SReq, M2SRwD

__all__ = ["RequestArrival", "queue_entries"]


def queue_entries(config):
    """``(req_entry, rwd_entry)``: the layouts of a queued message: ``{msg, dup, slot}``, the
    message, whether its tag was already in flight, and its tracker entry."""
    return tuple(data.StructLayout({"msg": msg, "dup": 1, "slot": config.slot_bits})
                 for msg in (M2SReq, M2SRwD))


class RequestArrival(wiring.Component):
    """The tag tracker and the two request queues of a ``CXLMemController``.

    Parameters
    ----------
    config : CXLMemConfig

    Members
    -------
    req, rwd : ``In(stream.Signature(M2SReq | M2SRwD, always_ready=True))``
        The M2S channels.
    req_head : ``Out(req_entry)``, req_older : ``Out(1)``
        The Req queue's head, and whether it is queued and older than every queued RwD
        message (``queue_entries``).
    req_pop : ``In(1)``
        Take the Req head (one credit goes back).
    rwd_head : ``Out(rwd_entry)``, rwd_valid : ``Out(1)``, rwd_pop : ``In(1)``
        The same for the RwD queue (``rwd_valid``: it holds a message).
    free : ``In(tracker_slots)``
        Tracker entries whose response the host accepted this cycle.
    busy : ``Out(1)``
        A tracker entry is in use (a request is in flight).
    error : ``Out(1)``
        Sticky: a message arrived with no room and was dropped.
    """

    def __init__(self, config):
        self._config = config = checked_config(config)
        req_entry, rwd_entry = queue_entries(config)
        super().__init__({
            "req": In(stream.Signature(M2SReq, always_ready=True)),
            "rwd": In(stream.Signature(M2SRwD, always_ready=True)),
            "req_head": Out(req_entry),
            "req_older": Out(1),
            "req_pop": In(1),
            "rwd_head": Out(rwd_entry),
            "rwd_valid": Out(1),
            "rwd_pop": In(1),
            "free": In(config.tracker_slots),
            "busy": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        cfg = self._config
        m = Module()
        n_trk = cfg.tracker_slots
        sw = cfg.slot_bits
        req_entry, rwd_entry = queue_entries(cfg)

        # ---- tracker (tags in flight) ----------------------------------------------------
        trk_valid = Signal(n_trk)
        trk_tag = Array(Signal(TAG_BITS, name=f"trk_tag{i}") for i in range(n_trk))
        trk_alloc = Signal(n_trk)
        m.d.sync += trk_valid.eq((trk_valid & ~self.free) | trk_alloc)
        m.d.comb += self.busy.eq(trk_valid.any())

        def tag_in_flight(tag):
            return Cat(*[trk_valid[i] & ~(trk_tag[i] ^ tag).any() for i in range(n_trk)]).any()

        free_any0, free0 = first_set(m, [~trk_valid[i] for i in range(n_trk)], "free0")
        free_any1, free1 = first_set(
            m, [~trk_valid[i] & ~eq_const(free0, i) for i in range(n_trk)], "free1")

        # ---- queues ----------------------------------------------------------------------
        m.submodules.rwd_queue = rwdq = make_fifo(width=rwd_entry.size, depth=cfg.rwd_credits)
        m.d.comb += [self.rwd_head.eq(rwdq.r_data), self.rwd_valid.eq(rwdq.r_rdy),
                     rwdq.r_en.eq(self.rwd_pop)]

        dq = cfg.req_credits
        aw = bits_for(cfg.rwd_credits)
        q_valid = Signal(dq)
        q_entry = [Signal(req_entry, name=f"reqq{i}") for i in range(dq)]
        q_ahead = [Signal(aw, name=f"reqq{i}_ahead") for i in range(dq)]
        m.d.comb += [self.req_head.eq(q_entry[0]),
                     self.req_older.eq(q_valid[0] & ~q_ahead[0].any())]

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
            req_accept.eq(req_in & (~q_valid[dq - 1] | self.req_pop)
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

        # Req shift queue: a pop shifts every entry down; a push goes to the first free entry
        # after the shift.
        new_req = Signal(req_entry)
        m.d.comb += [new_req.msg.eq(self.req.payload), new_req.dup.eq(req_dup),
                     new_req.slot.eq(req_slot)]
        new_ahead = Signal(aw)
        m.d.comb += new_ahead.eq(rwdq.level + rwd_accept - self.rwd_pop)
        shifted_valid = Signal(dq)
        m.d.comb += shifted_valid.eq(Mux(self.req_pop, q_valid >> 1, q_valid))
        for i in range(dq):
            nxt_entry = q_entry[i + 1] if i + 1 < dq else q_entry[i]
            nxt_ahead = q_ahead[i + 1] if i + 1 < dq else q_ahead[i]
            cur_entry = Mux(self.req_pop, nxt_entry.as_value(), q_entry[i].as_value())
            cur_ahead = Mux(self.req_pop, nxt_ahead, q_ahead[i])
            dec_ahead = Mux(self.rwd_pop & cur_ahead.any(), (cur_ahead - 1)[:aw], cur_ahead)
            push_here = req_accept & ~shifted_valid[i]
            if i > 0:
                push_here = push_here & shifted_valid[i - 1]
            with m.If(push_here):
                m.d.sync += [q_entry[i].eq(new_req), q_ahead[i].eq(new_ahead)]
            with m.Else():
                m.d.sync += [q_entry[i].eq(cur_entry), q_ahead[i].eq(dec_ahead)]
            m.d.sync += q_valid[i].eq(shifted_valid[i] | push_here)
        return m
