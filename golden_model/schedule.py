"""The schedule IR: the one contract between algorithms, executor, timing model and hardware.

An ``AllReduceSchedule`` holds the topology, the element count, how the elements are split into
chunks, and an ordered list of steps, each a list of ``Transfer``. Semantics (design.md):

* Within a step every transfer reads its source chunk as it was at the start of the step; then
  the step's transfers are applied in list order. ``REDUCE`` adds the payload into the
  destination's copy of the chunk (``dst = dst + payload``); ``COPY`` overwrites it.
* The order of REDUCE transfers into a chunk therefore fixes the floating-point summation order,
  so the executor, the hardware and every export give the same bits.
"""

import enum
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import ConfigError


class Op(enum.Enum):
    """What a transfer does at its destination."""
    REDUCE = 0   #: destination chunk += payload
    COPY = 1     #: destination chunk = payload


@dataclass(frozen=True, slots=True)
class Transfer:
    """One message: chunk ``chunk`` of ``src``'s buffer sent to ``dst``.

    Attributes
    ----------
    src, dst : int
        Endpoint node ids.
    chunk : int
        Chunk id (see ``AllReduceSchedule.chunk_range``).
    op : Op
        REDUCE or COPY at the destination.
    route : tuple of (u, v)
        Directed links crossed, in order (one link for a neighbour transfer).
    flow : int
        Flow id: the tree a transfer belongs to for tree algorithms, else -1.
    """
    src: int
    dst: int
    chunk: int
    op: Op
    route: tuple
    flow: int = -1


class ScheduleError(AssertionError):
    """A schedule breaks an invariant of the IR (an algorithm bug, never user input)."""


def chunk_bounds(num_elements, num_chunks):
    """Offsets of ``num_chunks`` near-equal chunks of ``num_elements`` elements.

    Chunk ``i`` is ``[bounds[i], bounds[i+1])``; the first ``num_elements % num_chunks`` chunks are
    one element longer (as ``numpy.array_split``). Some chunks are empty when there are fewer
    elements than chunks.

    Returns
    -------
    numpy.ndarray of int64, shape (num_chunks + 1,)
    """
    base, extra = divmod(num_elements, num_chunks)
    sizes = np.full(num_chunks, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


def _live_transfers(steps, sizes):
    """``steps`` without the transfers of chunks whose ``sizes`` entry is 0 (each step a new
    list)."""
    live = (sizes > 0).tolist()
    if all(live):
        return [list(step) for step in steps]
    return [[t for t in step if live[t.chunk]] for step in steps]


@dataclass(eq=False)
class AllReduceSchedule:
    """An all-reduce as ordered steps of transfers.

    Attributes
    ----------
    algorithm : str
        Name of the algorithm that built it.
    topology : Topology
    num_elements : int
        Elements per node vector (D).
    bounds : numpy.ndarray, shape (num_chunks + 1,)
        Chunk element offsets (``chunk_bounds``).
    steps : list of list of Transfer
        Transfers of empty chunks are dropped by ``build``.
    contention_free : bool
        True when the algorithm promises that no directed link is used twice in one step;
        ``validate`` then checks it.
    meta : dict
        Algorithm facts for reports (e.g. ``tree_steps`` for tree algorithms).
    """
    algorithm: str
    topology: object
    num_elements: int
    bounds: np.ndarray
    steps: list
    contention_free: bool = False
    meta: dict = field(default_factory=dict)

    @classmethod
    def build(cls, algorithm, topology, num_elements, num_chunks, steps, validate=True,
              **kwargs):
        """Make a schedule with ``num_chunks`` near-equal chunks, drop transfers of empty chunks
        and, unless ``validate`` is false (a caller that times many candidates validates only
        the one it keeps), validate it.

        Raises
        ------
        ScheduleError
            If the result breaks an invariant (see ``validate``).
        """
        bounds = chunk_bounds(num_elements, num_chunks)
        steps = _live_transfers(steps, np.diff(bounds))
        sched = cls(algorithm, topology, num_elements, bounds, steps, **kwargs)
        if validate:
            sched.validate()
        return sched

    @property
    def num_nodes(self):
        return self.topology.num_nodes

    @property
    def num_chunks(self):
        return len(self.bounds) - 1

    def chunk_range(self, chunk):
        """(start, stop) element offsets of ``chunk``."""
        return int(self.bounds[chunk]), int(self.bounds[chunk + 1])

    def chunk_elements(self, chunk):
        return int(self.bounds[chunk + 1] - self.bounds[chunk])

    @property
    def active_steps(self):
        """The steps that carry at least one transfer, in order."""
        return [s for s in self.steps if s]

    @property
    def num_transfers(self):
        return sum(len(s) for s in self.steps)

    def transfers(self):
        """Iterate ``(step_index, transfer)`` over the whole schedule in order."""
        for i, step in enumerate(self.steps):
            for t in step:
                yield i, t

    def rerouted(self, route):
        """This schedule with every transfer's route replaced by ``route(src, dst)`` (a tuple
        of directed links, as ``Topology.route``), everything else unchanged: the schedule as
        a network that routes by destination runs it (``allreduce_rtl.plan``, routed
        hardware), where a tree algorithm's reduce edge may have taken the reverse of its
        broadcast route. ``contention_free`` stays set only if no step has two transfers on
        one link with the new routes. Validated on this schedule's topology.

        Raises
        ------
        ScheduleError
            If a new route does not lead from its transfer's source to its destination over
            the topology's links.
        """
        routes = {}
        steps = [[replace(t, route=routes.setdefault(
                     (t.src, t.dst), tuple(route(t.src, t.dst)))) for t in step]
                 for step in self.steps]
        free = self.contention_free and all(
            len(links) == len(set(links))
            for links in ([link for t in step for link in t.route] for step in steps))
        sched = AllReduceSchedule(self.algorithm, self.topology, self.num_elements,
                                  self.bounds.copy(), steps, free, dict(self.meta))
        sched.validate()
        return sched

    def relabeled(self, mapping, topology=None):
        """This schedule with node ``u``'s role played by node ``mapping[u]``: every transfer's
        ends and route mapped, chunks, steps and their order unchanged, so node ``mapping[u]``
        computes exactly what node ``u`` did, operation for operation (COARSE's device ring
        runs the ring in either direction this way). Validated on ``topology`` (default this
        schedule's), which must have every mapped link.

        Parameters
        ----------
        mapping : sequence of int
            A permutation of ``range(num_nodes)``.

        Raises
        ------
        ValueError
            If ``mapping`` is not a permutation of the nodes.
        ScheduleError
            If a mapped route uses a link the topology lacks.
        """
        mapping = [int(v) for v in mapping]
        if sorted(mapping) != list(range(self.num_nodes)):
            raise ValueError(f"mapping must be a permutation of 0..{self.num_nodes - 1}, not "
                             f"{mapping}")
        steps = [[Transfer(mapping[t.src], mapping[t.dst], t.chunk, t.op,
                           tuple((mapping[u], mapping[v]) for u, v in t.route), t.flow)
                  for t in step] for step in self.steps]
        sched = AllReduceSchedule(self.algorithm, topology or self.topology, self.num_elements,
                                  self.bounds.copy(), steps, self.contention_free,
                                  dict(self.meta))
        sched.validate()
        return sched

    def rechunked(self, bounds):
        """This schedule with chunk ``c`` covering ``[bounds[c], bounds[c+1])`` instead: the same
        steps and transfers, those of chunks the new bounds leave empty dropped (as ``build``
        does), validated. COARSE's device ring cuts a shard at whole 64-byte lines this way.

        Parameters
        ----------
        bounds : sequence of int, shape (num_chunks + 1,)
            Non-decreasing offsets from 0 to ``num_elements``.

        Raises
        ------
        ValueError
            If ``bounds`` has the wrong length, does not run from 0 to ``num_elements`` or
            decreases.
        """
        bounds = np.asarray(bounds, dtype=np.int64)
        if (bounds.shape != self.bounds.shape or bounds[0] != 0
                or bounds[-1] != self.num_elements or np.any(np.diff(bounds) < 0)):
            raise ValueError(f"chunk bounds must be {self.num_chunks + 1} non-decreasing offsets "
                             f"from 0 to {self.num_elements}, not {bounds.tolist()}")
        steps = _live_transfers(self.steps, np.diff(bounds))
        sched = AllReduceSchedule(self.algorithm, self.topology, self.num_elements, bounds,
                                  steps, self.contention_free, dict(self.meta))
        sched.validate()
        return sched

    def validate(self):
        """Check the IR's invariants; raise ``ScheduleError`` naming the first one broken.

        * every transfer joins two distinct endpoint nodes over a connected route of links that
          exist in the topology;
        * no contribution is added twice: a REDUCE never adds a partial sum into a copy that
          already holds one of the same node's contributions (that is what "reading a chunk
          before its inputs arrived" produces);
        * at the end every chunk on every node holds the contributions of all N nodes;
        * where ``contention_free`` is set, no directed link carries two transfers in one step.

        Contributions are tracked as bit sets per (node, chunk), with the step semantics of the
        module docstring.
        """
        topo = self.topology
        n = topo.num_nodes
        nc = self.num_chunks
        full = (1 << n) - 1
        sizes = np.diff(self.bounds)
        live = [c for c in range(nc) if sizes[c] > 0]
        # have[v * nc + c]: contributions in node v's copy of chunk c, a bit per node (the
        # list starts with one int per node, shared by its chunks: ints are immutable).
        have = []
        for v in range(n):
            have.extend([1 << v] * nc)
        edges = set(topo.graph.edges)
        good = set()                 # (src, dst, route) already checked
        contention_free = self.contention_free
        for i, step in enumerate(self.steps):
            used = set()
            snapshot = {}
            for t in step:
                src, chunk, route = t.src, t.chunk, t.route
                if (src, t.dst, route) not in good:
                    if not (0 <= t.src < n and 0 <= t.dst < n) or t.src == t.dst:
                        raise ScheduleError(f"step {i}: bad endpoints in {t}")
                    hops = [t.src] + [v for _, v in route]
                    if (not route or route[0][0] != t.src or hops[-1] != t.dst
                            or any(a != b for (_, a), (b, _) in zip(route[:-1], route[1:]))
                            or any(link not in edges for link in route)):
                        raise ScheduleError(f"step {i}: route {route} does not lead "
                                            f"{t.src}->{t.dst}")
                    good.add((t.src, t.dst, route))
                if not 0 <= chunk < nc:
                    raise ScheduleError(f"step {i}: chunk {chunk} out of range in {t}")
                if contention_free:
                    for link in route:
                        if link in used:
                            raise ScheduleError(f"step {i}: link {link} used twice")
                        used.add(link)
                key = src * nc + chunk
                snapshot[key] = have[key]
            for t in step:
                chunk = t.chunk
                payload = snapshot[t.src * nc + chunk]
                key = t.dst * nc + chunk
                if t.op is Op.REDUCE:
                    if have[key] & payload:
                        raise ScheduleError(f"step {i}: {t} adds contributions "
                                            f"{payload & have[key]:#x} twice")
                    have[key] |= payload
                else:
                    have[key] = payload
        for v in range(n):
            for c in live:
                mask = have[v * nc + c]
                if mask != full:
                    missing = [u for u in range(n) if not mask >> u & 1]
                    raise ScheduleError(f"node {v} chunk {c} lacks contributions of nodes "
                                        f"{missing}")

    def summary(self):
        """A dict for reports: algorithm, topology, nodes, elements, chunks, steps (steps that carry
        transfers), transfers, plus ``meta`` (e.g. ``tree_steps``)."""
        return {"algorithm": self.algorithm, "topology": self.topology.spec,
                "nodes": self.num_nodes, "elements": self.num_elements,
                "chunks": self.num_chunks, "steps": len(self.active_steps),
                "transfers": self.num_transfers, **self.meta}

    def to_json(self):
        """The whole schedule as JSON-ready data: ``schema_version``, ``tool``,
        ``tool_version`` (``golden_model.provenance``), the summary, chunk bounds and steps of
        transfers; ``from_json`` reads it back."""
        from .provenance import stamp  # noqa: PLC0415
        return stamp({**self.summary(), "contention_free": self.contention_free,
                      "chunk_bounds": [int(b) for b in self.bounds],
                      "steps": [[{"src": t.src, "dst": t.dst, "chunk": t.chunk,
                                  "op": t.op.name, "flow": t.flow,
                                  "route": [[u, v] for u, v in t.route]}
                                 for t in step] for step in self.steps]})

    @classmethod
    def from_json(cls, data, topology=None):
        """The schedule ``to_json`` wrote (the dict, or its JSON text).

        Parameters
        ----------
        data : dict or str
        topology : Topology, optional
            The network to put it on (default: its ``topology`` spec with the default link
            bandwidth and latency); must have the spec's nodes and every route's links.

        Raises
        ------
        ConfigError
            If the data is not JSON, its ``schema_version`` is not this reader's, a key is
            missing or malformed, the chunk bounds are not the near-equal cut of its elements,
            or the schedule breaks an invariant (``validate``).
        """
        import json  # noqa: PLC0415
        from .provenance import SCHEMA_VERSION  # noqa: PLC0415
        from .topology import parse_topology  # noqa: PLC0415
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"schedule JSON: malformed: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError("schedule JSON: expected an object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ConfigError(f"schedule JSON: schema_version {version!r}; this reader reads "
                              f"{SCHEMA_VERSION}")
        try:
            topo = topology or parse_topology(data["topology"])
            chunks, elements = int(data["chunks"]), int(data["elements"])
            steps = [[Transfer(int(t["src"]), int(t["dst"]), int(t["chunk"]), Op[t["op"]],
                               tuple((int(u), int(v)) for u, v in t["route"]), int(t["flow"]))
                      for t in step] for step in data["steps"]]
            bounds = [int(b) for b in data["chunk_bounds"]]
            algorithm = str(data["algorithm"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"schedule JSON: missing or malformed {exc}") from None
        if bounds != chunk_bounds(elements, chunks).tolist():
            raise ConfigError("schedule JSON: chunk_bounds are not the near-equal cut of "
                              f"{elements} elements into {chunks} chunks")
        standard = {"schema_version", "tool", "tool_version", "algorithm", "topology", "nodes",
                    "elements", "chunks", "steps", "transfers", "contention_free",
                    "chunk_bounds"}
        meta = {k: v for k, v in data.items() if k not in standard}
        try:
            return cls.build(algorithm, topo, elements, chunks, steps,
                             contention_free=bool(data.get("contention_free", False)),
                             meta=meta)
        except ScheduleError as exc:
            raise ConfigError(f"schedule JSON: not a valid all-reduce schedule: {exc}") from None


def require_nodes(topology, algorithm, predicate, allowed):
    """Raise ``ConfigError`` unless ``predicate(topology)``; ``allowed`` says what is allowed."""
    if not predicate(topology):
        raise ConfigError(f"algorithm {algorithm!r} cannot run on {topology.spec}: {allowed}")
