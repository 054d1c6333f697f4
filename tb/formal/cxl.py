"""The CXL.mem controller (``hdl.cxl.CXLMemController``): one response per request, carrying its
tag; the Req and RwD credits; requests whose tag is in flight rejected without a memory write.

The harness is the whole controller and a host that follows the contract of docs/hardware.md
("Credits", "Accumulate window"): it sends a Req or RwD message only while it holds a credit of
that channel (a counter beside the controller: the initial credits, minus the messages sent,
plus the ``req_credit`` / ``rwd_credit`` pulses), writes registers only while the controller is
``idle`` ("write them while nothing is in flight") and never rewrites ``TIMEOUT``; everything
else is free every cycle: whether and what it sends (opcode, tag, address, poison, byte enables,
data), the register writes (so the accumulate window, held reads and their timeout, zeroing
are reachable), and whether it takes each response (``ndr.ready``, ``drs.ready``). One tag ``T``
(and for the memory claim one line ``L``) is an ``AnyConst``: the solver picks the worst.

A request counts from the cycle it is sent (always accepted: the host has a credit, and the
claims assert ``error`` stays 0) to the cycle its response is accepted; the harness counts the
requests with tag ``T`` in flight, which is exactly how the controller's tag tracker decides a
duplicate ("A tag is in flight from the cycle its request arrives to the cycle its response is
accepted, inclusive").

All three are bounded (``bmc``), and shallow: what k-induction would need to relate the
harness's counters to the controller (the occupancy of the two request queues, the tag
tracker's ten entries and their tags, the hold slots with their 32-bit timers, the response
FIFOs) is state inside ``RequestArrival``, ``HoldSlots`` and the FIFOs, which the controller
creates in its ``elaborate`` and which the harness cannot name; and the bounded runs grow
steeply with depth (yices, measured on the 2-core machine: the credits claim to depth 11 takes
31 s, to depth 12 290 s; the response claim to depth 7 takes 7 s and to depth 8 did not finish
in 900 s, neither with the host taking every response, with tags narrowed to 2 bits, with RwD
data fixed nor with the line merge cut out; boolector is no faster). ``DEPTHS`` are the
deepest that finish in about a minute. Within them a request's round trip (3 cycles: queue,
issue, modify-and-write, then the response) fits twice, both credits of each channel are spent
and returned, and a duplicate of a request in flight is rejected; a bound on the response time is
not claimed.

Parameters: the smallest ``CXLMemConfig`` the constructor accepts, with ``default_timeout`` 2:
2 lines in 1 bank, 2 Req and 2 RwD credits, 2-deep NDR and DRS queues, 2 hold slots,
2 tensors, ``max_group_shift`` 0 (so 10 tracker entries). The tag, address and data fields keep
their CXL widths (16, 46, 512 bits). Each queue, the tracker and the hold slots have a first,
a last and a full state at 2 entries, and the logic that joins them (duplicate check: a
comparison with every tracker entry; issue priority; response room, which counts one operation
in stage B and one response taken) does not depend on the sizes beyond those comparisons; more
lines and banks only widen the address decode and the bank select, and a larger ``TIMEOUT``
only makes a held read wait longer (its timer is compared with the register).
"""

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Signal

from hdl.cxl import CXLMemController
from hdl.cxl.config import TAG_BITS, CXLMemConfig
from hdl.cxl.messages import CSR, CSRWrite, M2SReq, M2SReqOpcode, M2SRwD, S2MNDROpcode

from . import FormalProperty, planted
from .harness import ever, reset_once

__all__ = ["PROPERTIES", "CXLHarness"]

CONFIG = CXLMemConfig(num_lines=2, num_banks=1, req_credits=2, rwd_credits=2, ndr_depth=2,
                      drs_depth=2, hold_slots=2, num_tensors=2, max_group_shift=0,
                      default_timeout=2)
#: Bound of each claim's bounded runs, in cycles from reset (see the module docstring).
DEPTHS = {"one-response-per-request": 7, "credits-conserved": 11, "duplicate-tag-rejected": 8}


class _Observed(CXLMemController):
    """The controller, with its bank's write port and ``zeroing`` brought out as attributes (for
    the harness to watch; the design is unchanged)."""

    def __init__(self, config):
        super().__init__(config)
        self.mem_we = Signal()
        self.mem_waddr = Signal(max(1, config.row_bits))
        self.zeroing = Signal()

    def elaborate(self, platform):
        m = super().elaborate(platform)
        port = m.submodules.bank0.write[0]
        m.d.comb += [self.mem_we.eq(port.en), self.mem_waddr.eq(port.addr),
                     self.zeroing.eq(m.submodules.window.zeroing)]
        return m


class _RepeatedNDR(_Observed):
    """The controller with one fault.

    Planted bug: the NDR queue is not popped when a DRS response is taken in the same cycle,
    so that NDR response is sent twice."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += m.submodules.ndr_queue.r_en.eq(
            self.ndr.ready & ~(self.drs.valid & self.drs.ready))
        return m


class _HeldCreditTwice(_Observed):
    """The controller with one fault.

    Planted bug: a held read returns its Req credit a second time when it leaves its hold
    slot."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.req_credit.eq(m.submodules.arrival.req_pop
                                       | m.submodules.holds.take)
        return m


class _WritesDuplicate(_Observed):
    """The controller with one fault.

    Planted bug: a RwD message rejected as a duplicate tag is still written to memory (only
    its response is the error)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        arrival = m.submodules.arrival
        dup_in_b = Signal()   # stage B holds a duplicate-tag write
        m.d.sync += dup_in_b.eq(arrival.rwd_pop & arrival.rwd_head.dup)
        with m.If(dup_in_b):
            m.d.comb += m.submodules.bank0.write[0].en.eq(1)
        return m


class CXLHarness(Elaboratable):
    """A ``CXLMemController`` and a legal host, with the claim ``claim`` asserted.

    Parameters
    ----------
    claim : str
        ``"one-response-per-request"``, ``"credits-conserved"`` or ``"duplicate-tag-rejected"``.
    dut : type
        The controller class (``_Observed`` or a planted-bug copy).
    """

    def __init__(self, claim, dut=_Observed):
        self.config = CONFIG
        self.claim = claim
        self.dut = dut

    def elaborate(self, platform):
        m, rst = reset_once()
        cfg = self.config
        m.submodules.dut = dut = self.dut(cfg)

        # ---- the host: free inputs -------------------------------------------------------
        m.d.comb += [
            dut.req.valid.eq(AnySeq(1)), dut.req.payload.eq(AnySeq(M2SReq.size)),
            dut.rwd.valid.eq(AnySeq(1)), dut.rwd.payload.eq(AnySeq(M2SRwD.size)),
            dut.csr.valid.eq(AnySeq(1)), dut.csr.payload.eq(AnySeq(CSRWrite.size)),
            dut.ndr.ready.eq(AnySeq(1)), dut.drs.ready.eq(AnySeq(1)),
        ]
        # ... within the contract: a message only with a credit, registers only while idle,
        # TIMEOUT kept
        req_credits = Signal(range(2 * cfg.req_credits + 2), init=cfg.req_credits)
        rwd_credits = Signal(range(2 * cfg.rwd_credits + 2), init=cfg.rwd_credits)
        m.d.sync += [req_credits.eq(req_credits - dut.req.valid + dut.req_credit),
                     rwd_credits.eq(rwd_credits - dut.rwd.valid + dut.rwd_credit)]
        m.d.comb += [
            Assume(~dut.req.valid | (req_credits != 0)),
            Assume(~dut.rwd.valid | (rwd_credits != 0)),
            Assume(~dut.csr.valid | dut.idle),
            Assume(~dut.csr.valid | (dut.csr.payload.addr != CSR.TIMEOUT)),
        ]

        # ---- requests and responses with tag T -------------------------------------------
        tag = Signal(TAG_BITS)
        m.d.comb += tag.eq(AnyConst(TAG_BITS))
        req_t = Signal()
        rwd_t = Signal()
        ndr_t = Signal()
        drs_t = Signal()
        m.d.comb += [
            req_t.eq(dut.req.valid & (dut.req.payload.tag == tag)),
            rwd_t.eq(dut.rwd.valid & (dut.rwd.payload.tag == tag)),
            ndr_t.eq(dut.ndr.valid & dut.ndr.ready & (dut.ndr.payload.tag == tag)),
            drs_t.eq(dut.drs.valid & dut.drs.ready & (dut.drs.payload.tag == tag)),
        ]
        pending = Signal(range(cfg.tracker_slots + 3))   # requests with tag T in flight
        m.d.sync += pending.eq(pending + req_t + rwd_t - ndr_t - drs_t)

        with m.If(~rst):
            m.d.comb += Assert(~dut.error)   # every message found room (the host had a credit)
            if self.claim == "one-response-per-request":
                self._one_response(m, dut, pending, req_t, rwd_t, ndr_t, drs_t)
            elif self.claim == "credits-conserved":
                self._credits(m, dut, req_credits, rwd_credits)
            elif self.claim == "duplicate-tag-rejected":
                self._duplicates(m, dut, tag, pending, req_t, rwd_t, ndr_t)
            else:
                raise ValueError(f"unknown claim {self.claim!r}")
        return m

    def _one_response(self, m, dut, pending, req_t, rwd_t, ndr_t, drs_t):
        cfg = self.config
        # no response with tag T unless as many requests with tag T are in flight; every
        # request in flight holds a tracker entry; when the controller is idle every request
        # has had its response
        m.d.comb += [
            Assert(ndr_t + drs_t <= pending),
            Assert(pending <= cfg.tracker_slots),
        ]
        with m.If(dut.idle):
            m.d.comb += Assert(pending == 0)
        served = Signal(range(3))
        with m.If((ndr_t | drs_t) & (served != 2)):
            m.d.sync += served.eq(served + 1)
        m.d.comb += [
            Cover((served == 2) & (pending == 0) & ever(m, drs_t) & ever(m, ndr_t)),
        ]

    def _credits(self, m, dut, req_credits, rwd_credits):
        cfg = self.config
        # never more credits than advertised (each returned once), never one missing (error
        # stays 0: the host never needs more than it holds), all back when idle
        m.d.comb += [Assert(req_credits <= cfg.req_credits),
                     Assert(rwd_credits <= cfg.rwd_credits)]
        with m.If(dut.idle):
            m.d.comb += [Assert(req_credits == cfg.req_credits),
                         Assert(rwd_credits == cfg.rwd_credits)]
        spent = ever(m, (req_credits == 0) & (rwd_credits == 0))
        m.d.comb += Cover(spent & dut.idle & ever(m, dut.csr.valid & dut.csr.ready)
                          & (req_credits == cfg.req_credits)
                          & (rwd_credits == cfg.rwd_credits))

    def _duplicates(self, m, dut, tag, pending, req_t, rwd_t, ndr_t):
        cfg = self.config
        line = Signal(cfg.line_bits)
        m.d.comb += [line.eq(AnyConst(cfg.line_bits)), Assume(line < cfg.num_lines)]
        to_line = dut.rwd.valid & (dut.rwd.payload.addr == line)
        # the only RwD messages to line L are duplicates of tag T (sent while T is in flight);
        # a request with tag T that is not a duplicate is a MemRd (answered on DRS)
        m.d.comb += [
            Assume(~rwd_t | ((pending != 0) & to_line)),
            Assume(~to_line | rwd_t),
            Assume(~(req_t & (pending == 0))
                   | (dut.req.payload.opcode == M2SReqOpcode.MemRd)),
        ]
        # nothing but zeroing writes line L (one bank: the row is the line), and every NDR with
        # tag T (a duplicate's) is the error completion
        m.d.comb += Assert(~(dut.mem_we & ~dut.zeroing & (dut.mem_waddr == line)))
        with m.If(dut.ndr.valid & (dut.ndr.payload.tag == tag)):
            m.d.comb += Assert(dut.ndr.payload.opcode == S2MNDROpcode.CmpErr)
        m.d.comb += [
            Cover(ndr_t & ever(m, ndr_t)),
            Cover(dut.mem_we & ~dut.zeroing & (dut.mem_waddr != line)),
        ]


#: claim -> (what is proved, the planted-bug controller)
_CLAIMS = {
    "one-response-per-request": (
        "every request gets exactly one response, carrying its tag: never a response with a "
        "tag that has no request in flight, and none left when the controller is idle",
        _RepeatedNDR),
    "credits-conserved": (
        "the host's Req and RwD credits never exceed the initial credits (each returned once), "
        "a message sent with a credit is never dropped, and all are back when the controller "
        "is idle",
        _HeldCreditTwice),
    "duplicate-tag-rejected": (
        "a RwD message whose tag is in flight never writes memory and its NDR is CmpErr",
        _WritesDuplicate),
}

PROPERTIES = [
    FormalProperty(
        name=f"cxl.{claim}", claim=text,
        build=lambda bug, claim=claim, faulty=faulty: CXLHarness(
            claim, faulty if bug else _Observed),
        bug=planted(faulty), depth=DEPTHS[claim], method="bmc",
        generalises=__doc__.split("Parameters: ", 1)[1].strip())
    for claim, (text, faulty) in _CLAIMS.items()
]
