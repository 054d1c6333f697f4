"""The NI's arrival counters in memories: completed receives per chunk, read by several engines.

What is counted: ``arrivals[c]``, the messages into chunk ``c`` whose tail write has retired in
an earlier cycle since the counters were last cleared (modulo ``2 ** COUNT_BITS``). The send
engines wait for ``arrivals[row.chunk] >= row.deps`` and the in-order ordering rule for
``arrivals[chunk] >= order`` (``hdl.ordering``).

Why memories: ``max_chunks`` counters of ``COUNT_BITS`` bits with P increments and R reads per
cycle, as a register array, are P adders per counter and R ``max_chunks``-to-1 multiplexers (on
iCE40 about 4,000 of the 4-port NI's LUTs at 64 chunks, and they grow with the chunk count).
Here each lane ``i`` keeps its own count per chunk, ``M_i[c]``, in one-read, one-write memories
(``hdl.ram.RAM``) that only lane ``i`` writes, so no memory needs more than one write port:

* **Lane update.** Copy ``A_i`` is read every cycle at the chunk of the lane's current message
  (``lane_chunk[i]``, the receive engine's); when the lane's tail write retires in cycle x, the
  value read in x-1 plus one is written to ``A_i`` and ``B_i``. Exact because a lane carries one
  message at a time: its previous tail into that chunk retired in x-2 or earlier (a message has a
  head and at least one payload flit), and the receive engine keeps the message's chunk until its
  tail retires.
* **Readers.** Reader ``r`` (an engine) names a chunk on ``chunk[r]`` and keeps that chunk's
  total in a register, ``count[r]``, that it updates itself each cycle from the lanes' tail
  retirements (a comparator per lane): nothing is read from memory while the chunk stays the
  same. When the chunk changes, the reader asks for a load: a round-robin arbiter
  (``hdl.router.arbiter``) gives the copies ``B_i`` to one asking reader per cycle, which reads
  ``sum_i B_i[c]`` and adds the retirements of the read cycle and of the cycle after. Its count
  is valid two cycles after the grant; until then ``count[r]`` reads 0, a lower bound, so an
  engine waits and never acts early. A reader waits at most ``R - 1`` cycles for the grant: it
  asks once per chunk, and every other asking reader is served once before it again.
* **Clearing.** No memory is assumed to start at zero (ASIC SRAM does not): after reset and on
  ``clear`` (the NI pulses it when a run ends) a sweep writes zeros to every word, one per cycle,
  ``max_chunks`` cycles with ``clearing`` high; readers hold no count while it runs.

Cost of the loads in time: a reader whose chunk changes waits at most ``R + 1`` cycles before
its count is valid (:func:`load_cycles`); the engines present their next row's chunk while the
current message streams, so a load is hidden behind any message of more than ``R + 1`` flits.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .config import CHUNK_BITS, COUNT_BITS, check_int
from .ops import eq_const
from .ram import RAM
from .receive_engine import ArrivalTag
from .router.arbiter import RoundRobinArbiter

__all__ = ["ArrivalCounters", "load_cycles"]


def load_cycles(num_readers):
    """Most cycles from a reader's new chunk to its valid count: ``num_readers + 1`` (up to
    ``num_readers - 1`` waiting for the grant, the read, the register)."""
    return num_readers + 1


def _sum(m, base, terms, name):
    """``base`` (COUNT_BITS wide) plus ``terms`` (that wide or 1 bit) modulo 2 ** COUNT_BITS,
    one addition at a time onto the wide sum (Verilator's WIDTH lint accepts that)."""
    acc = base
    for k, term in enumerate(terms):
        nxt = Signal(COUNT_BITS, name=f"{name}_sum{k}")
        m.d.comb += nxt.eq((acc + term)[:COUNT_BITS])
        acc = nxt
    return acc


class ArrivalCounters(wiring.Component):
    """Arrival counters of ``max_chunks`` chunks for ``num_lanes`` lanes and ``num_readers``
    readers (module docstring).

    Parameters
    ----------
    num_lanes : int
        Reduction lanes P (>= 1), each with a ``retire`` input.
    num_readers : int
        Readers R (>= 1).
    max_chunks : int
        Chunks counted (1 .. 2 ** CHUNK_BITS); only the low ``log2(max_chunks)`` bits of a chunk
        are looked at, so a chunk at or above it aliases (the engines flag such rows as errors).

    Members
    -------
    clear : ``In(1)``
        Pulse: sweep every counter to zero (also done after reset).
    clearing : ``Out(1)``
        The sweep runs (``max_chunks`` cycles); the counters are not to be used.
    enable : ``In(1)``
        Readers ask for loads only while it is high (the NI: while running, when the engines'
        chunks come from their tables; outside a run they may be undefined, and an undefined
        request would stay in the arbiter's state in a four-state simulator).
    retire : ``In(stream.Signature(ArrivalTag, always_ready=True)).array(num_lanes)``
        Lane i's writes; a write with ``last`` counts an arrival into ``chunk``.
    lane_chunk : ``In(CHUNK_BITS).array(num_lanes)``
        The chunk of lane i's current message; a tail retiring in cycle x must be into the chunk
        shown in x-1.
    chunk : ``In(CHUNK_BITS).array(num_readers)``
        The chunk reader r needs.
    count : ``Out(COUNT_BITS).array(num_readers)``
        ``arrivals[chunk[r]]`` counted up to the previous cycle once the reader's load is done,
        else 0.

    Raises
    ------
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, num_lanes, num_readers, max_chunks):
        check_int("num_lanes", num_lanes, 1)
        check_int("num_readers", num_readers, 1)
        check_int("max_chunks", max_chunks, 1, 1 << CHUNK_BITS)
        self.num_lanes, self.num_readers, self.max_chunks = num_lanes, num_readers, max_chunks
        super().__init__({
            "clear": In(1),
            "clearing": Out(1),
            "enable": In(1),
            "retire": In(stream.Signature(ArrivalTag, always_ready=True)).array(num_lanes),
            "lane_chunk": In(CHUNK_BITS).array(num_lanes),
            "chunk": In(CHUNK_BITS).array(num_readers),
            "count": Out(COUNT_BITS).array(num_readers),
        })

    def _hits(self, m, chunk, name):
        """Per lane, 1 if its tail retires into ``chunk`` this cycle (a list of 1-bit signals)."""
        hits = []
        for i, ret in enumerate(self.retire):
            hit = Signal(name=f"{name}_{i}")
            m.d.comb += hit.eq(ret.valid & ret.payload.last
                               & (ret.payload.chunk[:len(chunk)] == chunk))
            hits.append(hit)
        return hits

    def elaborate(self, platform):
        m = Module()
        p, nr = self.num_lanes, self.num_readers
        depth = max(2, self.max_chunks)
        aw = ceil_log2(depth)

        clearing = Signal(init=1)
        clr_addr = Signal(aw)
        with m.If(self.clear):
            m.d.sync += [clearing.eq(1), clr_addr.eq(0)]
        with m.Elif(clearing):
            m.d.sync += clr_addr.eq(clr_addr + 1)
            with m.If(eq_const(clr_addr, depth - 1)):
                m.d.sync += clearing.eq(0)
        m.d.comb += self.clearing.eq(clearing)

        # Per-lane counts: copy A for the lane's own update, copy B for the readers' loads.
        rd_addr = Signal(aw)
        loads = []
        for i, ret in enumerate(self.retire):
            a = RAM(shape=COUNT_BITS, depth=depth, num_write=1, transparency=[()])
            b = RAM(shape=COUNT_BITS, depth=depth, num_write=1, transparency=[()])
            m.submodules[f"lane{i}_a"], m.submodules[f"lane{i}_b"] = a, b
            m.d.comb += [a.read[0].en.eq(1), a.read[0].addr.eq(self.lane_chunk[i][:aw]),
                         b.read[0].en.eq(1), b.read[0].addr.eq(rd_addr)]
            tail = ret.valid & ret.payload.last
            for ram in (a, b):
                w = ram.write[0]
                m.d.comb += [w.en.eq(clearing | tail),
                             w.addr.eq(Mux(clearing, clr_addr, ret.payload.chunk[:aw])),
                             w.data.eq(Mux(clearing, 0, (a.read[0].data + 1)[:COUNT_BITS]))]
            loads.append(b.read[0].data)

        # Readers: a tracked chunk, its count, and whether the count is that chunk's.
        m.submodules.arbiter = arb = RoundRobinArbiter(nr)
        ld_valid = Signal()
        ld_who = Signal(nr)
        ld_chunk = Signal(aw)
        ld_early = Signal(p)            # tails in the read cycle (not in the read data)
        requests = []
        tracked, counts, known = [], [], []
        for r in range(nr):
            tc = Signal(aw, name=f"tracked{r}")
            cnt = Signal(COUNT_BITS, name=f"count{r}")
            kn = Signal(name=f"known{r}")
            ok = Signal(name=f"ok{r}")
            m.d.comb += [ok.eq(kn & (tc == self.chunk[r][:aw])),
                         self.count[r].eq(Mux(ok, cnt, 0))]
            requests.append(self.enable & ~ok & ~(ld_valid & ld_who[r]) & ~clearing)
            tracked.append(tc)
            counts.append(cnt)
            known.append(kn)
        want = Signal(aw)
        m.d.comb += [arb.requests.eq(Cat(*requests)), arb.advance.eq(1)]
        chunk_or = 0        # the granted reader's chunk (one grant at most)
        for r in range(nr):
            chunk_or = chunk_or | Mux(arb.grant[r], self.chunk[r][:aw], 0)
        m.d.comb += [want.eq(chunk_or), rd_addr.eq(want)]
        m.d.sync += [ld_valid.eq(arb.valid), ld_who.eq(arb.grant), ld_chunk.eq(want),
                     ld_early.eq(Cat(*self._hits(m, want, "early_hits")))]
        loaded = _sum(m, loads[0], [*loads[1:], *ld_early,
                                    *self._hits(m, ld_chunk, "late_hits")], "loaded")
        for r in range(nr):
            with m.If(clearing):
                m.d.sync += known[r].eq(0)
            with m.Elif(ld_valid & ld_who[r]):
                m.d.sync += [tracked[r].eq(ld_chunk), counts[r].eq(loaded), known[r].eq(1)]
            with m.Else():
                new = _sum(m, counts[r], self._hits(m, tracked[r], f"hits{r}"), f"next{r}")
                m.d.sync += counts[r].eq(new)
        return m
