"""The ordering rule of the reduction lanes: contribution k into a chunk writes flit f only after
contribution k-1 has written it, in the schedule's order.

Why: the buffer is banked and a lane reads a flit ``write_delay`` cycles before it writes it
(``hdl.reduction``), so two lanes reducing into one chunk at once could both read the old value
of a flit and one update would be lost; and for a non-associative add (floating point) the
result must follow the schedule's summation order, not the arrival timing. Each receive engine
publishes its message (``busy``, ``chunk``, ``order`` = its row's ``deps``, the next payload
address ``addr`` and ``written``, below which its flits are written; ``hdl.receive_engine``),
and lane i may read its next flit a when

* **in order** (point-to-point NI, messages in table order): the contributions before it have
  all completed (``arrivals[chunk] >= order``: completions happen in order under this rule), or
  the lane j holding the same chunk with ``order - 1`` has written a (``written_j > a``);
* **routed NI** (messages in any order: int32 gives the same bits in any order, and a float
  chunk takes at most one REDUCE from the network, its other contributions being staged and
  added by the loopback port one after another, ``golden_model.lowering``): no other lane j
  holding the
  same chunk has a in flight (``written_j <= a < addr_j``).

Deadlock freedom of the in-order rule: every wait (a receive FIFO behind an earlier message, a
send's dependencies, a send table's order, and this rule) is on a transfer earlier in the
schedule's one total order (step, then transfer), so waits cannot form a cycle.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import CHUNK_BITS, COUNT_BITS, NIConfig

__all__ = ["OrderingRule"]


class OrderingRule(wiring.Component):
    """Combinational: ``ok[i]`` says whether lane i may read its next payload flit this cycle.

    Parameters
    ----------
    config : NIConfig
        ``num_ports`` lanes; ``routed`` chooses the rule (module docstring).

    Members
    -------
    busy, chunk, order, addr, written : ``In(...).array(num_ports)``
        What each receive engine publishes (``hdl.receive_engine.ReceiveEngine``).
    arrivals : ``In(COUNT_BITS).array(num_ports)``
        Completed receives into lane i's chunk (``hdl.arrivals``: a lower bound, 0 while the
        count is loading).
    ok : ``Out(1).array(num_ports)``
    """

    def __init__(self, config):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        p = config.num_ports
        super().__init__({
            "busy": In(1).array(p), "chunk": In(CHUNK_BITS).array(p),
            "order": In(COUNT_BITS).array(p), "addr": In(20).array(p),
            "written": In(20).array(p), "arrivals": In(COUNT_BITS).array(p),
            "ok": Out(1).array(p),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._config.num_ports
        for i in range(p):
            a = self.addr[i]
            terms = []
            for j in range(p):
                if j == i:
                    continue
                same = Signal(name=f"same{i}_{j}")
                m.d.comb += same.eq(self.busy[j] & (self.chunk[j] == self.chunk[i]))
                hit = Signal(name=f"hit{i}_{j}")
                if self._config.routed:     # j has flit a in flight
                    m.d.comb += hit.eq(same & (self.written[j] <= a) & (a < self.addr[j]))
                else:                       # j is the contribution before i and has written a
                    m.d.comb += hit.eq(same & ((self.order[j] + 1)[:COUNT_BITS] == self.order[i])
                                       & (self.written[j] > a))
                terms.append(hit)
            any_hit = Cat(*terms).any() if terms else 0
            if self._config.ordering_reads_arrivals:
                m.d.comb += self.ok[i].eq((self.arrivals[i] >= self.order[i]) | any_hit)
            else:
                m.d.comb += self.ok[i].eq(~any_hit)
        return m
