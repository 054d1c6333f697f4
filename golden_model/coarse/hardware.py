"""Cycle model of the COARSE system in hardware (``hdl.coarse.CoarseSystem``) as its host and
workers drive it (``tb.coarse.system``): the proxy pipeline of ``pipeline.proxy_timeline``
with this hardware's stages and widths.

The parameter set (``HardwareTiming``) describes the hardware: one clock; CXL.mem channels of
one 64-byte line per cycle (each device's client-write port and parameter-storage read port
take one line per cycle from all workers together, round-robin); the devices' NIs with
128-bit flits (a line is 4 flits) on device-ring links of one flit per cycle and
``ring_link_latency`` cycles; the NI host port of one flit per cycle. The workers offer a
request in a cycle with probability ``request_rate`` and take a response with probability
``response_rate``.

A batch of shards (the tensor slots the host programs at once) runs as:

1. *program*: one slot per cycle (every device at once);
2. *push* (each worker in its own order): a worker's ``rows`` lines of a shard take
   ``rows * max(1 / request_rate, g)`` cycles (a device takes its group's lines one per cycle,
   a worker offers ``request_rate`` lines per cycle; g: the largest group of workers writing
   one device); a shard is complete when its last copy is in;
3. *sync* (per shard, one at a time, all devices together, the earliest complete first; the
   NI buffer holds one shard):
   from ``max(complete, previous shard drained)``: the partial sums into the NI buffer, 4
   flits a line (``4 * rows + reduce_latency``); the host loads the ring's tables (one command
   a cycle, ``table_commands``) and starts the ring (``control_cycles``); the ring
   (``ring_cycles``: the golden timing model's ring all-reduce of the shard on ``ring:M`` at a
   flit per cycle); the reduced shard back out of the NI buffer, 4 flits a line
   (``4 * rows + drain_latency``);
4. *pull* (each worker in its own order): ``rows`` lines at
   ``min(request_rate, response_rate, 1 / g)`` lines per cycle from the shard's drain.

The next batch is programmed when every worker has all its lines of this one. The random
gaps and back-pressure are modelled by their rates, so the model predicts a mean; arbitration
collisions and the drain of the last response queue are not modelled.
"""

import math
from dataclasses import asdict, dataclass

__all__ = ["HardwareTiming", "ShardWork", "hardware_timeline"]


@dataclass(frozen=True)
class HardwareTiming:
    """The cycle-level parameter set of ``hdl.coarse.CoarseSystem`` (module docstring).

    Attributes
    ----------
    flits_per_line : int
        128-bit flits in a 64-byte line (the NI host port moves one per cycle).
    ring_link_latency : int
        Cycles of a device-ring link.
    request_rate, response_rate : float
        Lines per cycle a worker offers, takes (the testbench's 80%).
    reduce_latency : int
        Cycles from a shard's last copy to its first flit in the NI buffer (slot selection,
        the client queues' read and the reducer's pipeline).
    drain_latency : int
        Cycles from the ring's end to the last line in the parameter storage beyond the 4 a
        line (the NI's read latency).
    control_cycles : int
        Cycles the host takes from ``staged`` to ``start`` besides the table commands.
    """
    flits_per_line: int = 4
    ring_link_latency: int = 4
    request_rate: float = 0.8
    response_rate: float = 0.8
    reduce_latency: int = 4
    drain_latency: int = 3
    control_cycles: int = 3

    def as_dict(self):
        return asdict(self)


@dataclass(frozen=True)
class ShardWork:
    """One shard as the hardware sees it.

    Attributes
    ----------
    rows : int
        64-byte lines.
    group : int
        The most workers that push the shard to one device.
    ring_cycles : int
        The device ring's all-reduce of the shard (golden timing model).
    table_commands : int
        Host-port commands that load one device's ring tables.
    """
    rows: int
    group: int
    ring_cycles: int
    table_commands: int


def hardware_timeline(batches, params=HardwareTiming()):
    """Cycles of a run (module docstring).

    Parameters
    ----------
    batches : sequence of (sequence of ShardWork, sequence of sequence of int)
        Each batch's shards (indexed by their tensor slot) and each worker's order of them.
    params : HardwareTiming

    Returns
    -------
    int
        Cycles from the first program to the last line pulled.
    """
    t = 0.0
    per_line = params.flits_per_line
    for works, orders in batches:
        t += len(works)                                   # programs, one slot a cycle
        # push: each worker in its own order; a shard is complete when its last copy is in
        complete = [t] * len(works)
        for order in orders:
            clock = t
            for k in order:
                clock += works[k].rows * max(1 / params.request_rate, works[k].group)
                complete[k] = max(complete[k], clock)
        # sync: one shard at a time, the earliest complete first (the lowest slot on a tie)
        drained, ready = t, [0.0] * len(works)
        for k in sorted(range(len(works)), key=lambda k: (complete[k], k)):
            s = works[k]
            begin = max(complete[k], drained)
            staged = begin + params.reduce_latency + per_line * s.rows
            done = staged + s.table_commands + params.control_cycles + s.ring_cycles
            drained = ready[k] = done + params.drain_latency + per_line * s.rows
        # pull: each worker in its own order, from each shard's drain
        end = drained
        for order in orders:
            clock = t
            for k in order:
                rate = min(params.request_rate, params.response_rate, 1 / works[k].group)
                clock = max(clock, ready[k]) + works[k].rows / rate
            end = max(end, clock)
        t = end
    return math.ceil(t)
