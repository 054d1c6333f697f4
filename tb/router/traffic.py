"""Synthetic traffic for the router network, and its checker. Pure Python (no cocotb).

Open-loop traffic as BookSim generates it: every terminal creates packets by a Bernoulli process
(``rate`` flits per cycle per terminal on average, so a packet with probability
``rate / mean_length`` per cycle) into an unbounded source queue; the injector offers the queue's
flits in order. Patterns (destination of a packet from terminal ``s`` on an R x C grid; a
fat-tree's or BiGraph's endpoints are one row, ``1 x N``):

* ``uniform``: uniformly random terminal (itself included, as in BookSim);
* ``transpose``: node (r, c) sends to (c, r) (needs R = C; the diagonal sends to itself);
* ``hotspot``: with probability ``hot_fraction`` the hot terminal, else uniformly random.

Packet contents let the checker verify every flit on its own: the head carries
``RouterHead(dest, src, flits)`` and, above the 32 header bits, the source's packet sequence
number; body flit ``i`` carries ``flit_word(src, seq, i)``. ``Checker`` follows each ejection
stream (packets arrive whole: ``EjectionPort`` keeps them contiguous) and reports any flit that
is lost, duplicated, reordered or corrupted, and any packet at the wrong terminal.
"""

from __future__ import annotations

import collections
import dataclasses
import random

from hdl.flit import FlitKind
from hdl.router.flit import head_payload

__all__ = ["PATTERNS", "TrafficSpec", "Packet", "Source", "Checker", "flit_word", "destination"]

PATTERNS = ("uniform", "transpose", "hotspot")
HEAD, BODY, TAIL, HEAD_TAIL = (k.value for k in FlitKind)
SEQ_BITS = 20


def flit_word(src, seq, index, width):
    """Payload of body flit ``index`` (1..) of packet ``seq`` of terminal ``src``."""
    x = (src * 0x9E3779B1 + seq * 0x85EBCA77 + index * 0xC2B2AE3D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    x ^= x >> 12
    word = x | (x << 32)
    return (word ^ (index << 24)) & ((1 << width) - 1)


@dataclasses.dataclass(frozen=True)
class TrafficSpec:
    """One traffic scenario.

    Attributes
    ----------
    pattern : str
        One of ``PATTERNS``.
    rate : float
        Offered load, flits per cycle per terminal (0 < rate <= 1).
    cycles : int
        Cycles during which packets are created (then the network drains).
    lengths : tuple of int
        Packet lengths in flits (head included), drawn uniformly.
    ready : float
        Probability that an ejection port accepts a flit in a cycle (random back-pressure).
    hot : int
        The hot-spot terminal.
    hot_fraction : float
    seed : int
    """
    pattern: str = "uniform"
    rate: float = 0.2
    cycles: int = 500
    lengths: tuple = (1, 2, 3, 4, 5)
    ready: float = 0.8
    hot: int = 5
    hot_fraction: float = 0.25
    seed: int = 1

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {self.pattern!r}")
        if not 0 < self.rate <= 1:
            raise ValueError(f"rate must be in (0, 1] flits per cycle, not {self.rate!r}")
        if not 0 < self.ready <= 1:
            raise ValueError(f"ready must be a probability in (0, 1], not {self.ready!r}")

    @property
    def name(self):
        return f"{self.pattern}@{self.rate:g}"

    @property
    def mean_length(self):
        return sum(self.lengths) / len(self.lengths)


def destination(spec, src, rows, cols, rng, concentration=1):
    n = rows * cols * concentration
    if spec.pattern == "uniform":
        return rng.randrange(n)
    if spec.pattern == "hotspot":
        return spec.hot % n if rng.random() < spec.hot_fraction else rng.randrange(n)
    if rows != cols:
        raise ValueError(f"transpose needs a square grid, not {rows}x{cols}")
    node, k = divmod(src, concentration)
    r, c = divmod(node, cols)
    return (c * cols + r) * concentration + k


@dataclasses.dataclass
class Packet:
    src: int
    dest: int
    seq: int
    length: int
    created: int
    injected: int | None = None    # cycle its head was accepted
    delivered: int | None = None   # cycle its tail was ejected

    def flits(self, width):
        """(kind, payload) of every flit."""
        head = head_payload(self.dest, self.src, self.length - 1,
                            extra=self.seq if width >= 32 + SEQ_BITS else 0)
        if self.length == 1:
            return [(HEAD_TAIL, head)]
        out = [(HEAD, head)]
        for i in range(1, self.length):
            out.append((TAIL if i == self.length - 1 else BODY, flit_word(self.src, self.seq, i,
                                                                           width)))
        return out


class Source:
    """One terminal's packet generator and source queue."""

    def __init__(self, terminal, spec, rows, cols, width, concentration=1, seq0=0):
        self.terminal = terminal
        self.spec = spec
        self.rows, self.cols, self.width = rows, cols, width
        self.concentration = concentration
        self.rng = random.Random(spec.seed * 7919 + terminal)
        self.queue = collections.deque()   # packets not fully injected
        self.flits = collections.deque()   # flits of the packet at the queue head
        self.seq = seq0
        self.p = min(1.0, spec.rate / spec.mean_length)

    def generate(self, cycle):
        """Maybe create a packet in ``cycle``; returns it or None."""
        if self.rng.random() >= self.p:
            return None
        dest = destination(self.spec, self.terminal, self.rows, self.cols, self.rng,
                           self.concentration)
        pkt = Packet(self.terminal, dest, self.seq % (1 << SEQ_BITS), self.rng.choice(
            self.spec.lengths), cycle)
        self.seq += 1
        self.queue.append(pkt)
        return pkt

    def offer(self):
        """The flit offered this cycle, (kind, payload), or None."""
        if not self.flits and self.queue:
            self.flits.extend(self.queue[0].flits(self.width))
        return self.flits[0] if self.flits else None

    def accepted(self, cycle):
        """The offered flit was taken in ``cycle``."""
        kind, _ = self.flits.popleft()
        pkt = self.queue[0]
        if kind in (HEAD, HEAD_TAIL):
            pkt.injected = cycle
        if kind in (TAIL, HEAD_TAIL):
            self.queue.popleft()


class Checker:
    """Checks the ejection streams against the packets sent.

    Parameters
    ----------
    num_terminals, width : int
    """

    def __init__(self, num_terminals, width):
        self.width = width
        self.outstanding = {}             # (src, seq) -> Packet
        self.current = [None] * num_terminals   # (packet, next flit index) per terminal
        self.errors = []
        self.delivered = []
        self.flits_delivered = 0

    def sent(self, pkt):
        key = (pkt.src, pkt.seq)
        if key in self.outstanding:
            raise RuntimeError(f"sequence number wrapped with {key} outstanding")
        self.outstanding[key] = pkt

    def _error(self, msg):
        if len(self.errors) < 50:
            self.errors.append(msg)

    def eject(self, terminal, kind, payload, cycle):
        self.flits_delivered += 1
        cur = self.current[terminal]
        if cur is None:
            if kind not in (HEAD, HEAD_TAIL):
                self._error(f"cycle {cycle}: terminal {terminal} got a {FlitKind(kind).name} "
                            f"flit outside a packet (payload {payload:#x})")
                return
            dest, src, flits = payload & 0x3FF, payload >> 10 & 0x3FF, payload >> 20 & 0xFFF
            seq = payload >> 32 & ((1 << SEQ_BITS) - 1) if self.width >= 32 + SEQ_BITS else None
            pkt = self.outstanding.pop((src, seq), None)
            if pkt is None:
                self._error(f"cycle {cycle}: terminal {terminal} got an unknown or duplicated "
                            f"packet src {src} seq {seq} (head {payload:#x})")
                return
            if dest != terminal or pkt.dest != terminal:
                self._error(f"cycle {cycle}: packet src {src} seq {seq} for {pkt.dest} "
                            f"(head dest {dest}) delivered to terminal {terminal}")
            if flits != pkt.length - 1:
                self._error(f"cycle {cycle}: packet src {src} seq {seq} head says {flits} "
                            f"flits follow, sent {pkt.length - 1}")
            if (kind == HEAD_TAIL) != (pkt.length == 1):
                self._error(f"cycle {cycle}: packet src {src} seq {seq} head kind "
                            f"{FlitKind(kind).name} for a {pkt.length}-flit packet")
            if kind == HEAD_TAIL:
                self._done(pkt, cycle)
            else:
                self.current[terminal] = (pkt, 1)
            return
        pkt, i = cur
        want_kind = TAIL if i == pkt.length - 1 else BODY
        want = flit_word(pkt.src, pkt.seq, i, self.width)
        if kind != want_kind or payload != want:
            self._error(f"cycle {cycle}: terminal {terminal}, packet src {pkt.src} seq {pkt.seq}"
                        f" flit {i}: got {FlitKind(kind).name} {payload:#x}, want "
                        f"{FlitKind(want_kind).name} {want:#x} (lost, reordered or corrupted)")
        if kind in (TAIL, HEAD_TAIL) or i == pkt.length - 1:
            self.current[terminal] = None
            self._done(pkt, cycle)
        else:
            self.current[terminal] = (pkt, i + 1)

    def _done(self, pkt, cycle):
        pkt.delivered = cycle
        self.delivered.append(pkt)

    def finish(self):
        """Errors for packets never delivered (call after draining)."""
        missing = sorted(self.outstanding)
        if missing:
            self._error(f"{len(missing)} packets never delivered, e.g. (src, seq) "
                        f"{missing[:8]}")
        for t, cur in enumerate(self.current):
            if cur is not None:
                self._error(f"terminal {t}: packet src {cur[0].src} seq {cur[0].seq} "
                            f"incomplete ({cur[1]} of {cur[0].length} flits)")
        return self.errors
