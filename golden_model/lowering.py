"""Lowering of a schedule to per-node network-interface programs (schedule-table rows).

Pure Python: the hardware (``hdl.schedule_table``) packs these rows into ``data.Struct`` words;
the testbench uses the buffer layout to load and read back vectors.

* **Ports.** Port ``p`` of node ``u`` is the link to ``topology.neighbors(u)[p]``; every NI has
  ``num_ports`` = the largest node degree (unused ports are tied off).
* **Engines.** Each port has a send engine and a receive engine; each engine runs its own list of
  rows in schedule order (step, then transfer order in the step). A link carries the sends of one
  engine in that order, so the receiving engine's rows come in the same order: no matching of
  messages to rows is needed (the head flit is still checked).
* **Buffer layout.** Chunk ``c`` starts at flit address ``chunk_base[c]``; each chunk is padded to
  whole flits of ``elements_per_flit`` elements, so a flit never holds two chunks.
* **Dependencies.** A SEND row waits until the node has completed ``deps`` receives into the chunk:
  the receives of earlier steps (MultiTree's "a chunk goes up a tree only when all children
  delivered", generalised to every algorithm). Receives have no dependency.
"""

import enum
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError
from .schedule import Op


class Direction(enum.Enum):
    SEND = 0
    RECV = 1


@dataclass(frozen=True)
class TableRow:
    """One schedule-table row of one engine.

    Attributes
    ----------
    step : int
        Schedule step (carried in the head flit and checked by the receiver).
    op : Op
        REDUCE or COPY at the receiver (a SEND row carries it for the head flit).
    flow : int
        Tree id for tree algorithms, else 0.
    chunk : int
    addr : int
        Buffer flit address of the chunk's first flit.
    flits : int
        Payload flits of the message (ceil(elements / elements_per_flit)).
    elements : int
    deps : int
        SEND: receives into ``chunk`` this node must complete first; RECV: 0.
    """
    step: int
    op: Op
    flow: int
    chunk: int
    addr: int
    flits: int
    elements: int
    deps: int


@dataclass(frozen=True)
class NodeProgram:
    """The rows of one node: ``engines[(direction, port)]`` is that engine's row list."""
    node: int
    neighbors: tuple
    engines: dict


@dataclass(frozen=True)
class LoweredSchedule:
    """A schedule lowered for the NI.

    Attributes
    ----------
    schedule : AllReduceSchedule
    elements_per_flit : int
    num_ports : int
        Ports per NI (largest node degree).
    chunk_base : numpy.ndarray, shape (num_chunks,)
        Flit address of each chunk in every node's buffer.
    buffer_flits : int
        Flits of buffer the vector needs.
    programs : list of NodeProgram, one per node
    """
    schedule: object
    elements_per_flit: int
    num_ports: int
    chunk_base: np.ndarray
    buffer_flits: int
    programs: list

    @property
    def table_depth(self):
        """Rows of the longest engine program (the table depth the NI needs)."""
        return max((len(rows) for p in self.programs for rows in p.engines.values()), default=0)

    def pack(self, vectors):
        """Lay node vectors out in buffer flits.

        Parameters
        ----------
        vectors : numpy.ndarray, shape (N, D), int32

        Returns
        -------
        numpy.ndarray, shape (N, buffer_flits, elements_per_flit), int32; padding is zero.
        """
        s, e = self.schedule, self.elements_per_flit
        out = np.zeros((s.num_nodes, self.buffer_flits * e), dtype=np.int32)
        for c in range(s.num_chunks):
            lo, hi = s.chunk_range(c)
            base = int(self.chunk_base[c]) * e
            out[:, base:base + hi - lo] = vectors[:, lo:hi]
        return out.reshape(s.num_nodes, self.buffer_flits, e)

    def unpack(self, flits):
        """Inverse of ``pack``: (N, buffer_flits, elements_per_flit) -> (N, D)."""
        s, e = self.schedule, self.elements_per_flit
        flat = np.asarray(flits).reshape(s.num_nodes, -1)
        out = np.empty((s.num_nodes, s.num_elements), dtype=flat.dtype)
        for c in range(s.num_chunks):
            lo, hi = s.chunk_range(c)
            base = int(self.chunk_base[c]) * e
            out[:, lo:hi] = flat[:, base:base + hi - lo]
        return out


def lower(schedule, elements_per_flit=4):
    """Lower ``schedule`` to one ``NodeProgram`` per node.

    Parameters
    ----------
    schedule : AllReduceSchedule
    elements_per_flit : int
        32-bit elements per flit (4: 128-bit flits, the MultiTree paper's).

    Raises
    ------
    ConfigError
        If a transfer crosses more than one link (the NI only talks to its neighbours; multi-hop
        schedules need the router), or ``elements_per_flit`` is not a positive integer.
    """
    if not isinstance(elements_per_flit, int) or elements_per_flit < 1:
        raise ConfigError(f"elements per flit must be a positive integer, not {elements_per_flit!r}")
    topo = schedule.topology
    for step, t in schedule.transfers():
        if len(t.route) != 1:
            raise ConfigError(
                f"{schedule.algorithm} on {topo.spec} sends {t.src}->{t.dst} over {len(t.route)} "
                f"links (step {step}); the network interface only sends to neighbours, so "
                f"multi-hop schedules need the router; use ring, ring2d, multitree or "
                f"multitree-opt on ring, mesh or torus")
    sizes = np.diff(schedule.bounds)
    flits = -(-sizes // elements_per_flit)
    chunk_base = np.concatenate(([0], np.cumsum(flits)[:-1])).astype(np.int64)
    neighbors = [tuple(topo.neighbors(v)) for v in topo.nodes]
    num_ports = max((len(n) for n in neighbors), default=0)
    engines = [{(d, p): [] for d in Direction for p in range(num_ports)} for _ in topo.nodes]
    received = {}
    for step, t in schedule.transfers():
        c = t.chunk
        row = dict(step=step, op=t.op, flow=max(t.flow, 0), chunk=c, addr=int(chunk_base[c]),
                   flits=int(flits[c]), elements=int(sizes[c]))
        deps = sum(1 for s in received.get((t.src, c), ()) if s < step)
        engines[t.src][(Direction.SEND, neighbors[t.src].index(t.dst))].append(
            TableRow(**row, deps=deps))
        engines[t.dst][(Direction.RECV, neighbors[t.dst].index(t.src))].append(
            TableRow(**row, deps=0))
        received.setdefault((t.dst, c), []).append(step)
    programs = [NodeProgram(v, neighbors[v], engines[v]) for v in topo.nodes]
    return LoweredSchedule(schedule, elements_per_flit, num_ports, chunk_base,
                           int(flits.sum()), programs)
