"""The NI's banked buffer (``hdl.banked_buffer.BankedBuffer``) and the reduction lanes' ordering
rule (``hdl.ordering.OrderingRule``).

The buffer harness drives every client of the buffer from free inputs (``AnySeq``) in every
cycle, as the NI's engines may: a client may read or write whenever it likes, at any address in
the bank its slot names this cycle (``read_slot``, ``write_slot``: the block's contract), and
``restart`` may come at any time. Two claims:

* **one write per bank**: the slots are the documented rotation (read client c owns bank
  ``(c + phase) % K``, write client w bank ``(w + phase - write_delay) % K``, with a reference
  ``phase``: 0 in the cycle after ``restart``, then +1 per cycle), so each copy's clients own
  distinct banks in every cycle, and each bank RAM's single write port (and read port) carries
  exactly the one request of the client that owns it: a client's write of flit ``a`` arrives at
  bank ``a % K`` as word ``a // K`` with its data, and no bank is written that no client wrote.
  The bank RAMs are ``hdl.ram.RAM``s of one write port each, observed directly (the harness
  builds the block's module before Amaranth elaborates it and reaches its ``bank<b>``
  submodules). Bounded, and complete at its depth (:data:`SLOT_DEPTH`).
* **read returns the last write**: an ``AnyConst`` flit address and a shadow of the last data
  written to it; a read of it, once it has been written, returns the shadow one cycle later (the
  block's read latency). The words' contents before their first write are free in the formal
  model (as in an ASIC SRAM, ``hdl.arrivals``), so they are not checked. A read of the flit in
  the very cycle it is written is not checked either: the banks are ``bare`` RAMs, which leave
  that undefined, and the NI never does it (``hdl.banked_buffer``). Bounded: the harness cannot
  name a memory's words (Amaranth has no expression for a memory row in a design), so no
  invariant ties the banks' contents to the shadow and k-induction cannot close; the bound,
  :data:`READ_DEPTH`, is five rotations of the K = 4 banks.

The ordering harness models P receive engines feeding P reduction lanes, as ``hdl.receive_engine``
publishes them to the rule: each lane takes a message (a chunk, its ``order``: the contributions
before it into that chunk, each order taken once per chunk; all contributions of a chunk cover
the chunk's flits in address order), reads its next flit when it wants to and ``ok`` allows,
writes the flits it has read, in order, after any delay of at least one cycle (``written`` counts
the completed writes, from the cycle after each write), and may take its next message in the
cycle its last write retires. ``arrivals`` is any lower bound of the contributions into the
lane's chunk completed in an earlier cycle (``hdl.arrivals``: 0 while loading). For an
``AnyConst`` flit F the harness counts the writes of F, and asserts that contribution k reads F
only when exactly k writes of F have happened (so it reads the result of contributions 0..k-1,
written in an earlier cycle) and writes F when still exactly k have: the k-th update of every
flit is the one of order k, the schedule's summation order. The lane's wait for its bank slot
is part of its free choice to read; the write delay of any length covers every adder. Only the
in-order rule of a point-to-point NI is checked (``routed`` False).

Parameters: the buffer with P = 2 ports, one copy (the default): K = 4 banks of 2 words
(8 flits), 2-bit flits, write_delay = 2 (the int32 adder's, the NI's default type); the same
with two copies (K = 2, every bank twice). The ordering rule with P = 3 lanes (the rule must
pick the lane holding order k - 1 among two others), 2 chunks of 2 flits and 3 contributions per
chunk (orders 0, 1, 2: contribution 2 has a predecessor that is itself waiting). The blocks'
logic does not depend on the values beyond these: the buffer's rotation is ``log2 K`` levels of
2:1 multiplexers and per-client counters, identical for every bank and client up to the
counters' start values (K = 4 has two levels, K = 2 one), write_delay enters only as those start
values (modulo K), a bank's word address is carried unchanged and the data bits are
independent of each other (two bits tell the banks' words apart); the ordering rule compares
each lane with each other lane by equality of chunk and order and by comparison of addresses,
the same for every pair, chunk and address.
"""

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Signal

from hdl.banked_buffer import BankedBuffer, bank_name
from hdl.config import COUNT_BITS, NIConfig, buffer_banks
from hdl.ordering import OrderingRule

from . import FormalProperty, planted
from .harness import observed, reset_once

__all__ = ["PROPERTIES", "BufferHarness", "OrderingHarness"]

PORTS = 2
FLIT_WIDTH = 2
WRITE_DELAY = 2


def _depth(copies):
    """Flits: 2 words per bank (the smallest bank)."""
    return 2 * buffer_banks(PORTS, copies)


#: Cycles of the bounded slot check, which is complete: every rotation counter of the block
#: restarts with the others and then advances by one per cycle, so the block's reachable states
#: are the K phases (plus the cycles before the first restart, which reset makes phase 0), all
#: reached within K cycles of reset; the claim is a function of that state and of the inputs of
#: the cycle, so a violation anywhere is a violation within K + 1 cycles. 8 >= K + 1 = 5.
#: (k-induction would need the block's internal counters, which have no ports.)
SLOT_DEPTH = 8

#: Cycles of the bounded read-after-write check: a restart, a write, a read and its data take
#: at most K + 3 cycles at K = 4 (the cover is reached in 3); 20 cycles are five rotations, so
#: every client meets every bank with a write before and a read after, restarts in between,
#: more than twice within the bound.
READ_DEPTH = 20

LANES = 3
CHUNKS = 2
CHUNK_FLITS = 2
ORDERS = 3


class _SharedSlot(BankedBuffer):
    """Planted bug: write client 1 is given write client 0's bank slot (one bank, two
    clients)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.write_slot[1].eq(self.write_slot[0])
        return m


class _WrongBank(BankedBuffer):
    """Planted bug: read client 0 gets the data of read client 1's bank."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.read[0].data.eq(self.read[1].data)
        return m


class _EarlyRule(OrderingRule):
    """Planted bug: lane 0 (contribution k) may go on once contributions 0..k-2 have
    completed, without waiting for k-1 (an off-by-one on the arrival count)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.arrivals[0] + 1 >= self.order[0]):
            m.d.comb += self.ok[0].eq(1)
        return m


class BufferHarness(Elaboratable):
    """The banked buffer with every client free and the claim ``claim`` asserted.

    Parameters
    ----------
    claim : str
        ``"one-write-per-bank"`` or ``"read-last-write"``.
    copies : int
        ``BankedBuffer`` copies.
    block : type
        ``BankedBuffer`` or a planted-bug copy.
    """

    def __init__(self, claim, copies=1, block=BankedBuffer):
        self.claim, self.copies, self.block = claim, copies, block

    def elaborate(self, platform):
        m, rst = reset_once()
        buf = observed(self.block, num_ports=PORTS, depth=_depth(self.copies),
                        flit_width=FLIT_WIDTH, write_delay=WRITE_DELAY, copies=self.copies)
        k, bits, d, copies = buf.num_banks, buf.bank_bits, buf.write_delay, buf.copies
        inner = buf.elaborate(platform)
        banks = [[inner.submodules[bank_name(b, g)] for b in range(k)] for g in range(copies)]
        m.submodules.buffer = buf
        aw = len(buf.write[0].addr)

        # Free clients (idle in the reset cycle), each in its own bank when it asks.
        restart = Signal()
        m.d.comb += restart.eq(AnySeq(1) & ~rst)
        m.d.comb += buf.restart.eq(restart)
        for w, port in enumerate(buf.write):
            m.d.comb += [port.en.eq(AnySeq(1) & ~rst), port.addr.eq(AnySeq(aw)),
                         port.data.eq(AnySeq(FLIT_WIDTH))]
            with m.If(port.en):
                m.d.comb += Assume(port.addr[:bits] == buf.write_slot[w])
        for c, port in enumerate(buf.read):
            m.d.comb += [port.en.eq(AnySeq(1) & ~rst), port.addr.eq(AnySeq(aw))]
            with m.If(port.en):
                m.d.comb += Assume(port.addr[:bits] == buf.read_slot[c])

        # Reference rotation: 0 in the cycle after a restart (and after reset), +1 per cycle.
        phase = Signal(bits)
        m.d.sync += phase.eq((phase + 1)[:bits])
        with m.If(restart):
            m.d.sync += phase.eq(0)
        restarted = Signal()        # a restart since reset, for the cover
        with m.If(restart):
            m.d.sync += restarted.eq(1)
        all_busy = Cat(*(p.en for p in buf.write), *(p.en for p in buf.read)).all()

        if self.claim == "one-write-per-bank":
            with m.If(~rst):
                for c in range(copies * k):
                    m.d.comb += Assert(buf.read_slot[c] == (c % k + phase)[:bits])
                for w in range(k):
                    m.d.comb += Assert(buf.write_slot[w] == (w + phase - d % k + k)[:bits])
                for a in range(k):
                    for b in range(a + 1, k):
                        m.d.comb += Assert(buf.write_slot[a] != buf.write_slot[b])
                        for g in range(copies):
                            m.d.comb += Assert(buf.read_slot[g * k + a]
                                               != buf.read_slot[g * k + b])
                for g in range(copies):
                    for b in range(k):
                        wr, rd = banks[g][b].write[0], banks[g][b].read[0]
                        # every request arrives at its bank, whole
                        for w, port in enumerate(buf.write):
                            with m.If(port.en & (port.addr[:bits] == b)):
                                m.d.comb += Assert(wr.en & (wr.addr == port.addr[bits:])
                                                   & (wr.data == port.data))
                        for c in range(g * k, (g + 1) * k):
                            port = buf.read[c]
                            with m.If(port.en & (port.addr[:bits] == b)):
                                m.d.comb += Assert(rd.en & (rd.addr == port.addr[bits:]))
                        # and a bank is used only for a request of the client that owns it
                        with m.If(wr.en):
                            m.d.comb += Assert(Cat(*(p.en & (p.addr[:bits] == b)
                                                     for p in buf.write)).any())
                        with m.If(rd.en):
                            m.d.comb += Assert(Cat(*(p.en & (p.addr[:bits] == b)
                                                     for p in buf.read[g * k:(g + 1) * k]))
                                               .any())
            # every bank written and read in one cycle, after a restart
            m.d.comb += Cover(~rst & restarted & all_busy & (phase == k - 1))

        elif self.claim == "read-last-write":
            target = Signal(aw)
            m.d.comb += target.eq(AnyConst(aw))
            shadow = Signal(FLIT_WIDTH)     # the last data written to the target
            written = Signal()              # the target has been written since reset
            hit_w = Signal()
            for port in buf.write:
                with m.If(port.en & (port.addr == target)):
                    m.d.comb += hit_w.eq(1)
                    m.d.sync += [shadow.eq(port.data), written.eq(1)]
            checked = Signal()
            for c, port in enumerate(buf.read):
                pending = Signal(name=f"pending{c}")
                want = Signal(FLIT_WIDTH, name=f"want{c}")
                m.d.sync += [pending.eq(port.en & (port.addr == target) & ~hit_w & written),
                             want.eq(shadow)]
                with m.If(~rst & pending):
                    m.d.comb += Assert(port.data == want)
                m.d.comb += Cover(~rst & pending & restarted & (port.data != 0)
                                  & all_busy)
        else:
            raise ValueError(f"unknown claim {self.claim!r}")
        return m


class _Lane:
    """A modelled receive engine and its reduction lane (the harness's signals)."""

    def __init__(self, i, cbits, obits, abits):
        self.in_msg = Signal(name=f"in_msg{i}")     # payload flits left to read
        self.chunk = Signal(cbits, name=f"chunk{i}")
        self.order = Signal(obits, name=f"order{i}")
        self.addr = Signal(abits, name=f"addr{i}")          # next flit to read
        self.written = Signal(abits, name=f"written{i}")    # flits below are written
        self.end = Signal(abits, name=f"end{i}")
        self.busy = Signal(name=f"busy{i}")
        self.read = Signal(name=f"read{i}")       # reads flit ``addr`` this cycle
        self.retire = Signal(name=f"retire{i}")   # writes flit ``written`` this cycle
        self.last = Signal(name=f"last{i}")       # ... its message's last write
        self.take = Signal(name=f"take{i}")       # takes a new message this cycle
        self.new_chunk = Signal(cbits, name=f"new_chunk{i}")
        self.new_order = Signal(obits, name=f"new_order{i}")
        self.arrivals = Signal(COUNT_BITS, name=f"arrivals{i}")


class OrderingHarness(Elaboratable):
    """The in-order ordering rule between ``LANES`` modelled receive engines and reduction
    lanes, with the claim asserted (module docstring).

    Parameters
    ----------
    rule : type
        ``OrderingRule`` or a planted-bug copy.
    """

    def __init__(self, rule=OrderingRule):
        self.rule = rule

    def elaborate(self, platform):
        m, rst = reset_once()
        cfg = NIConfig(num_ports=LANES)
        assert cfg.ordering_reads_arrivals and not cfg.routed
        m.submodules.rule = rule = self.rule(cfg)
        abits = (CHUNKS * CHUNK_FLITS).bit_length()
        obits = max(1, (ORDERS - 1).bit_length())
        cbits = max(1, (CHUNKS - 1).bit_length())

        flit = Signal(abits)       # the tracked flit F, in chunk ``fchunk``
        fchunk = Signal(cbits)
        m.d.comb += [flit.eq(AnyConst(abits)), fchunk.eq(flit // CHUNK_FLITS),
                     Assume(flit < CHUNKS * CHUNK_FLITS)]
        #: contributions (orders) taken by a lane, per chunk
        taken = [Signal(ORDERS, name=f"taken{c}") for c in range(CHUNKS)]
        #: contributions whose last write has retired (in an earlier cycle), per chunk
        completed = [Signal(range(ORDERS + 1), name=f"completed{c}") for c in range(CHUNKS)]
        writes = Signal(range(ORDERS + 1))      # writes of F so far

        lanes = [_Lane(i, cbits, obits, abits) for i in range(LANES)]
        for i, ln in enumerate(lanes):
            m.d.comb += [
                ln.end.eq((ln.chunk + 1) * CHUNK_FLITS),
                ln.busy.eq(ln.in_msg | (ln.written != ln.addr)),
                ln.read.eq(AnySeq(1) & ln.in_msg & rule.ok[i] & ~rst),
                ln.retire.eq(AnySeq(1) & (ln.written != ln.addr) & ~rst),
                ln.last.eq(ln.retire & ~ln.in_msg & ((ln.written + 1)[:abits] == ln.addr)),
                ln.take.eq(AnySeq(1) & ~ln.in_msg & (~ln.busy | ln.last) & ~rst),
                ln.new_chunk.eq(AnySeq(cbits)), ln.new_order.eq(AnySeq(obits)),
                ln.arrivals.eq(AnySeq(COUNT_BITS)),
                rule.busy[i].eq(ln.busy), rule.chunk[i].eq(ln.chunk),
                rule.order[i].eq(ln.order), rule.addr[i].eq(ln.addr),
                rule.written[i].eq(ln.written), rule.arrivals[i].eq(ln.arrivals),
            ]
            for c in range(CHUNKS):
                with m.If(ln.chunk == c):
                    m.d.comb += Assume(ln.arrivals <= completed[c])
            with m.If(ln.retire):
                m.d.sync += ln.written.eq(ln.written + 1)
            with m.If(ln.read):
                m.d.sync += ln.addr.eq(ln.addr + 1)
                with m.If((ln.addr + 1)[:abits] == ln.end):
                    m.d.sync += ln.in_msg.eq(0)
            with m.If(ln.take):
                m.d.comb += [Assume(ln.new_chunk < CHUNKS), Assume(ln.new_order < ORDERS)]
                m.d.sync += [ln.in_msg.eq(1), ln.chunk.eq(ln.new_chunk),
                             ln.order.eq(ln.new_order),
                             ln.addr.eq(ln.new_chunk * CHUNK_FLITS),
                             ln.written.eq(ln.new_chunk * CHUNK_FLITS)]

        # Each contribution is taken once: by one lane, not taken before.
        for c in range(CHUNKS):
            for k in range(ORDERS):
                takers = [ln.take & (ln.new_chunk == c) & (ln.new_order == k) for ln in lanes]
                m.d.comb += Assume(sum(takers) <= 1)
                with m.If(Cat(*takers).any()):
                    m.d.comb += Assume(~taken[c][k])
                    m.d.sync += taken[c][k].eq(1)
            m.d.sync += completed[c].eq(
                completed[c] + sum(ln.last & (ln.chunk == c) for ln in lanes))
        m.d.sync += writes.eq(writes + sum(ln.retire & (ln.written == flit) for ln in lanes))

        with m.If(~rst):
            for ln in lanes:
                # the claim: contribution k reads F after exactly k writes of F (in earlier
                # cycles), and writes it before any other write of F
                with m.If(ln.read & (ln.addr == flit)):
                    m.d.comb += Assert(writes == ln.order)
                with m.If(ln.retire & (ln.written == flit)):
                    m.d.comb += Assert(writes == ln.order)
            self._invariants(m, lanes, taken, completed, writes, flit, fchunk)
            m.d.comb += Cover(Cat(*(ln.read & (ln.addr == flit) & (ln.order == ORDERS - 1)
                                    & (ln.arrivals < ln.order) for ln in lanes)).any())
        return m

    @staticmethod
    def _invariants(m, lanes, taken, completed, writes, flit, fchunk):
        """What k-induction needs: a lane holds one message within its chunk; contributions
        complete in order; every contribution before a busy one is complete or has written
        every flit the busy one has read; the writes of F are those of the completed
        contributions and of the busy ones past F."""
        for i, ln in enumerate(lanes):
            base = ln.chunk * CHUNK_FLITS
            with m.If(ln.busy):
                m.d.comb += [
                    Assert(ln.chunk < CHUNKS), Assert(ln.order < ORDERS),
                    Assert((base <= ln.written) & (ln.written <= ln.addr)
                           & (ln.addr <= ln.end)),
                    Assert(ln.in_msg == (ln.addr != ln.end)),
                ]
                for c in range(CHUNKS):
                    with m.If(ln.chunk == c):
                        m.d.comb += [Assert(taken[c].bit_select(ln.order, 1)),
                                     Assert(ln.order >= completed[c])]
                for j, other in enumerate(lanes):
                    if j == i:
                        continue
                    with m.If(other.busy & (other.chunk == ln.chunk)):
                        m.d.comb += Assert(other.order != ln.order)
                        # a busy predecessor has written all the flits its successor has read
                        with m.If(other.order < ln.order):
                            m.d.comb += Assert(ln.addr <= other.written)
                # every predecessor is complete or busy (once the lane has read a flit)
                with m.If(ln.addr != base):
                    for k in range(ORDERS):
                        for c in range(CHUNKS):
                            with m.If((ln.chunk == c) & (k < ln.order) & (k >= completed[c])):
                                m.d.comb += Assert(Cat(*(
                                    o.busy & (o.chunk == c) & (o.order == k)
                                    for o in lanes if o is not ln)).any())
            with m.Else():
                m.d.comb += Assert(~ln.in_msg)
        for c in range(CHUNKS):
            for k in range(ORDERS):
                held = Cat(*(ln.busy & (ln.chunk == c) & (ln.order == k) for ln in lanes)).any()
                m.d.comb += Assert(taken[c][k] == ((k < completed[c]) | held))
            m.d.comb += Assert(completed[c] <= ORDERS)
        for c in range(CHUNKS):
            with m.If(fchunk == c):
                m.d.comb += Assert(writes == completed[c] + sum(
                    ln.busy & (ln.chunk == c) & (ln.written > flit) for ln in lanes))


_GENERALISES = __doc__.split("Parameters: ", 1)[1].strip()

_COPIES_NAME = {1: "", 2: ".two-copies"}
_COPIES_TEXT = {1: "", 2: " (two copies: every write reaches both)"}

#: claim -> (what is proved, the planted-bug buffer, bound in cycles)
_BANK_CLAIMS = {
    "one-write-per-bank": (
        "the bank slots follow the documented rotation, each copy's clients own distinct banks "
        "in every cycle, and every bank RAM's one write (and one read) port carries exactly the "
        "request of the client that owns it: a write of flit a reaches bank a % K, word a // K, "
        "whole, and nothing else reaches a bank",
        _SharedSlot, SLOT_DEPTH),
    "read-last-write": (
        "a read of a flit written since reset returns, one cycle later, the data of the last "
        "write to it, with every client reading and writing at will in its slot and restarts "
        "at any time",
        _WrongBank, READ_DEPTH),
}

PROPERTIES = [
    FormalProperty(
        name=f"buffer.{claim}{_COPIES_NAME[copies]}", claim=text + _COPIES_TEXT[copies],
        build=lambda bug, claim=claim, copies=copies, faulty=faulty: BufferHarness(
            claim, copies, faulty if bug else BankedBuffer),
        bug=planted(faulty), depth=depth, method="bmc", generalises=_GENERALISES)
    for claim, (text, faulty, depth) in _BANK_CLAIMS.items() for copies in (1, 2)
] + [
    FormalProperty(
        name="buffer.ordering-rule",
        claim="with the in-order rule, contribution k into a chunk reads flit f only after "
              "contributions 0..k-1 have written it (in earlier cycles) and writes it before "
              "contribution k+1 does: every flit's k-th update is contribution k's",
        build=lambda bug: OrderingHarness(_EarlyRule if bug else OrderingRule),
        bug=planted(_EarlyRule),
        depth=12,
        method="prove",
        generalises=_GENERALISES),
]
