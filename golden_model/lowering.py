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
  delivered", generalised to every algorithm). A RECV row's ``deps`` is its order: the receives
  into the chunk at this node that come before it in the schedule (step, then transfer order),
  so the NI adds the contributions into each flit in the executor's order (``hdl.ordering``).

**Routed lowering** (``routed=True``: every NI port sits on a local port of a router, see
``hdl.routed_network``): any schedule lowers, multi-hop transfers included.

* **Ports.** On ring, mesh and torus the NI keeps one port per link (the papers' one NI per link):
  a transfer leaves by the port of its route's first link and arrives at the port of its last
  link, so single-hop traffic uses the same ports as without the router. On a switched network
  likewise, port q being the node's link to its q-th switch (``graph.successors`` order): on
  fat-tree and BiGraph an endpoint has one link, so one port.
* **Terminals.** Port ``p`` of node ``u`` is router terminal ``u * num_ports + p``; SEND rows carry
  the destination and source terminals (``dest``, ``src``) for the router's head.
* **Arrival order.** Messages from different sources reach a receive port in any order, so a
  receive engine takes them as they come (the head says where the payload goes) and its rows only
  count them. Dependency counting stays exact only if no receive into ``(u, c)`` can complete
  before a send of ``(u, c)`` that must not include it; ``lower`` checks that every receive of a
  later or equal step is caused by (reachable from) that send, and raises otherwise.
* **Staged reductions** (``stage_reductions=True``, for an add that is not associative, such as
  floating point: the sum must follow the schedule's order, not the arrival order). Where node
  ``u`` receives K >= 2 REDUCE messages into chunk c, each of them is sent as a COPY into its own
  staging slot j = 1..K at ``u`` (the j-th in schedule order), and ``u``'s loopback port (the
  NI's last port, ``num_ports - 1``, joined to itself) then adds the slots into the chunk one
  after another in schedule order: a loopback SEND row reads slot j once it has arrived and its
  RECV row reduces it into the chunk. A chunk with one REDUCE receive at a node is reduced
  directly. Layout: chunk c gets ``1 + K_c`` arrival counters and ``(1 + K_c) * flits_c`` buffer
  flits (K_c: its most staged receives at any node), slot j at counter ``chunk + j`` and flit
  address ``addr + j * flits``; rows carry ``stage`` = j and ``unstage`` (set on loopback SEND
  rows: read the slot, write the chunk; clear on network SEND rows: read the chunk, write the
  slot). The send waits of a chunk count the loopback adds, one per staged receive, so they
  are unchanged.
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
        SEND: receives into ``chunk`` this node must complete first; RECV: the receives into
        ``chunk`` at this node before this one in the schedule (its order of summation).
    dest, src : int
        Routed SEND rows: destination and source router terminals; else 0.
    stage : int
        Staged reductions (module docstring): the staging slot j >= 1 the message goes to (a
        network SEND row) or comes from (a loopback SEND row, ``unstage``); 0 otherwise.
    unstage : bool
        A loopback SEND row: it reads slot ``stage`` of ``chunk`` and the receiver adds it into
        the chunk itself.
    release : int
        Routed network SEND rows of a timetable (``lower(release=...)``): the NI cycle (its
        ``cycles`` count since start) from which the head may issue; 0: as soon as its inputs
        are in.
    """
    step: int
    op: Op
    flow: int
    chunk: int
    addr: int
    flits: int
    elements: int
    deps: int
    dest: int = 0
    src: int = 0
    stage: int = 0
    unstage: bool = False
    release: int = 0


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
        Ports per NI (largest node degree; plus the loopback port with staged reductions).
    chunk_base : numpy.ndarray, shape (num_chunks,)
        Flit address of each chunk in every node's buffer.
    buffer_flits : int
        Flits of buffer the vector (and its staging slots) needs.
    programs : list of NodeProgram, one per node
    routed : bool
        Lowered for NIs on routers (any number of hops; see the module docstring).
    ports : tuple of (int, int)
        Per transfer in schedule order: its send port at the source and receive port at the
        destination.
    chunk_ids : numpy.ndarray, shape (num_chunks,)
        The arrival counter of each chunk (``chunk`` in the rows): c itself, or with staged
        reductions c's first counter (its slots follow it).
    num_chunk_ids : int
        Arrival counters the NI needs.
    loopback : bool
        Lowered with staged reductions: port ``num_ports - 1`` is the NI's loopback port.
    staged : tuple of int
        Indices (in ``schedule.transfers()`` order) of the transfers that go to a staging slot
        and are then added by the destination's loopback port (``golden_model.timing.simulate``
        times them so).
    extents : tuple of (int, int, int)
        Per transfer in schedule order: the flit address its message is read from at the source,
        the one it is written to at the destination (a staged transfer's staging slot, which its
        loopback add then reads and adds into the chunk at the source's address), and its
        payload flits.
    """
    schedule: object
    elements_per_flit: int
    num_ports: int
    chunk_base: np.ndarray
    buffer_flits: int
    programs: list
    routed: bool = False
    ports: tuple = ()
    chunk_ids: np.ndarray = None
    num_chunk_ids: int = 0
    loopback: bool = False
    staged: tuple = ()
    extents: tuple = ()

    @property
    def terminal_ports(self):
        """Ports per NI that face the network (all but the loopback port)."""
        return self.num_ports - self.loopback

    @property
    def message_chain(self):
        """The most messages on one chain of waits: a message waits for the one before it on its
        send engine and on its receive engine, and a send for the receives it depends on. Each
        message of the chain can cost the NI's bank rotation ``2 * (banks - 1)`` cycles
        (``hdl.banked_buffer``), which bounds the RTL's cycles above the timing model's."""
        longest = {}        # (src, port) / (dst, port) / (node, chunk) -> chain length so far
        chain = 0
        for step in self._steps_with_ports():
            done = []
            for t, p, q in step:
                n = 1 + max(longest.get(("send", t.src, p), 0), longest.get(("recv", t.dst, q), 0),
                            longest.get(("have", t.src, t.chunk), 0))
                longest[("send", t.src, p)] = longest[("recv", t.dst, q)] = n
                done.append((t, n))
                chain = max(chain, n)
            for t, n in done:       # a send of a later step may depend on it
                key = ("have", t.dst, t.chunk)
                longest[key] = max(longest.get(key, 0), n)
        return chain

    def _steps_with_ports(self):
        """Per step, ``(transfer, send port, receive port)``."""
        ports = iter(self.ports)
        for step in self.schedule.steps:
            yield [(t, *next(ports)) for t in step]

    @property
    def table_depth(self):
        """Rows of the longest engine program (the table depth the NI needs)."""
        return max((len(rows) for p in self.programs for rows in p.engines.values()), default=0)

    def pack(self, vectors):
        """Lay node vectors out in buffer flits.

        Parameters
        ----------
        vectors : numpy.ndarray, shape (N, D), any element type

        Returns
        -------
        numpy.ndarray, shape (N, buffer_flits, elements_per_flit), of the vectors' dtype;
        padding is zero.
        """
        s, e = self.schedule, self.elements_per_flit
        vectors = np.asarray(vectors)
        out = np.zeros((s.num_nodes, self.buffer_flits * e), dtype=vectors.dtype)
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


def needs_router(schedule):
    """True if ``schedule`` cannot run on NIs joined by point-to-point links: its topology has
    switches (fat-tree, BiGraph) or a transfer crosses more than one link."""
    return (not schedule.topology.is_direct
            or any(len(t.route) != 1 for _, t in schedule.transfers()))


def lower(schedule, elements_per_flit=4, routed=False, max_message_flits=None,
          stage_reductions=False, max_staged=None, release=None):
    """Lower ``schedule`` to one ``NodeProgram`` per node.

    Parameters
    ----------
    schedule : AllReduceSchedule
    elements_per_flit : int
        Elements per flit (4: 32-bit elements in the MultiTree paper's 128-bit flits).
    routed : bool
        Lower for NIs attached to routers (any route; see the module docstring).
    max_message_flits : int, optional
        With ``routed``: the longest message the router carries, in payload flits (the
        hardware's limit, ``hdl.router.flit.MAX_PAYLOAD_FLITS``); default no limit.
    stage_reductions : bool
        With ``routed``: stage the REDUCE messages of a chunk that receives several at a node,
        and add them in schedule order through a loopback port (module docstring), for an
        element type whose add is not associative.
    max_staged : int, optional
        With ``stage_reductions``: the most REDUCE messages into one chunk at one node the
        hardware stages (its row's ``stage`` field, ``2 ** hdl.config.STAGE_BITS - 1``);
        default no limit.
    release : sequence of int, optional
        With ``routed``: per transfer (``schedule.transfers()`` order), the NI cycle from which
        its network SEND row may issue (``TableRow.release``; a timetable,
        ``golden_model.timetable``); default 0 for every row.

    Raises
    ------
    ConfigError
        Without ``routed``: if a transfer crosses more than one link (the NI alone only talks
        to its neighbours), or ``stage_reductions`` is set. With ``routed``: if a message is
        longer than ``max_message_flits`` payload flits, more than ``max_staged`` REDUCE
        messages go into one chunk at one node, or the schedule's dependencies are not safe for
        arrivals in any order. Either way if ``elements_per_flit`` is not a positive
        integer, or ``release`` is given without ``routed``, for another number of transfers,
        or with a value that is not a whole number of cycles >= 0.
    """
    if not isinstance(elements_per_flit, int) or elements_per_flit < 1:
        raise ConfigError(f"elements per flit must be a positive integer, not {elements_per_flit!r}")
    topo = schedule.topology
    num_transfers = sum(len(step) for step in schedule.steps)
    if release is not None:
        release = [int(r) for r in release]
        if not routed or len(release) != num_transfers or min(release, default=0) < 0:
            raise ConfigError(f"release cycles are for the network SEND rows of a routed "
                              f"lowering, one per transfer ({num_transfers}) and >= 0; got "
                              f"{len(release)} (routed={routed}, smallest "
                              f"{min(release, default=0)})")
    if not routed:
        if stage_reductions:
            raise ConfigError("staged reductions are for routed NIs: a point-to-point NI "
                              "receives in schedule order")
        for step, t in schedule.transfers():
            if len(t.route) != 1:
                raise ConfigError(
                    f"{schedule.algorithm} on {topo.spec} sends {t.src}->{t.dst} over "
                    f"{len(t.route)} links (step {step}); the network interface alone only sends "
                    f"to neighbours: lower it for the router (routed=True, --router), or use an "
                    f"algorithm whose transfers all go to neighbours")
    sizes = np.diff(schedule.bounds)
    flits = -(-sizes // elements_per_flit)
    reduces = {}        # staged reductions: (node, chunk) -> REDUCE receives
    slots = np.zeros(schedule.num_chunks, dtype=np.int64)   # staging slots per chunk
    if stage_reductions:
        for _, t in schedule.transfers():
            if t.op is Op.REDUCE:
                reduces[(t.dst, t.chunk)] = reduces.get((t.dst, t.chunk), 0) + 1
        for (u, c), k in reduces.items():
            if max_staged is not None and k > max_staged:
                raise ConfigError(
                    f"{schedule.algorithm} on {topo.spec}: node {u} receives {k} REDUCE messages "
                    f"into chunk {c}; a routed float NI stages at most {max_staged} per chunk "
                    f"(to add them in schedule order): use --dtype int32 on this network")
            if k >= 2:
                slots[c] = max(slots[c], k)
    chunk_base = np.concatenate(([0], np.cumsum((1 + slots) * flits)[:-1])).astype(np.int64)
    chunk_ids = np.concatenate(([0], np.cumsum(1 + slots)[:-1])).astype(np.int64)
    neighbors = [tuple(topo.neighbors(v)) for v in topo.nodes]
    # Routed: a port per link of the node (its neighbours, or on a switched network the switches
    # it has links to: terminal u * ports + q is its q-th switch link, hdl.router.network).
    links = neighbors if topo.is_direct else [tuple(topo.graph.successors(v)) for v in topo.nodes]
    if routed:
        if (max_message_flits is not None and flits.size
                and int(flits.max()) > max_message_flits):
            most = max_message_flits * elements_per_flit
            raise ConfigError(
                f"{schedule.algorithm} on {topo.spec} with {schedule.num_elements:,} elements "
                f"per node sends chunks of up to {int(sizes.max()):,} elements "
                f"({int(flits.max()):,} flits); a routed message holds at most "
                f"{max_message_flits:,} flits ({most:,} elements), so this schedule (chunks: "
                f"{schedule.num_chunks}) takes at most about {schedule.num_chunks * most:,} "
                f"elements per node")
        _check_any_order_safe(schedule)
        terminal_ports = max((len(n) for n in links), default=0)
    else:
        terminal_ports = max((len(n) for n in neighbors), default=0)
    loopback = bool(stage_reductions)
    num_ports = terminal_ports + loopback
    loop = num_ports - 1        # the loopback port, if any

    def ports(t):
        if not routed:
            return neighbors[t.src].index(t.dst), neighbors[t.dst].index(t.src)
        return links[t.src].index(t.route[0][1]), links[t.dst].index(t.route[-1][0])

    engines = [{(d, p): [] for d in Direction for p in range(num_ports)} for _ in topo.nodes]
    received = {}
    staged = {}         # (node, chunk) -> staged receives so far
    staged_transfers = []
    used = []
    extents = []
    for index, (step, t) in enumerate(schedule.transfers()):
        c = t.chunk
        row = dict(step=step, flow=max(t.flow, 0), chunk=int(chunk_ids[c]),
                   addr=int(chunk_base[c]), flits=int(flits[c]), elements=int(sizes[c]))
        deps = sum(1 for s in received.get((t.src, c), ()) if s < step)
        p, q = ports(t)
        used.append((p, q))
        terminals = (dict(dest=t.dst * terminal_ports + q, src=t.src * terminal_ports + p,
                          release=release[index] if release is not None else 0)
                     if routed else {})
        before = received.setdefault((t.dst, c), [])
        if loopback and t.op is Op.REDUCE and reduces[(t.dst, c)] >= 2:
            j = staged[(t.dst, c)] = staged.get((t.dst, c), 0) + 1
            staged_transfers.append(index)
            slot = dict(row, chunk=row["chunk"] + j, addr=row["addr"] + j * row["flits"])
            extents.append((row["addr"], slot["addr"], row["flits"]))
            engines[t.src][(Direction.SEND, p)].append(
                TableRow(**row, op=Op.COPY, deps=deps, **terminals, stage=j))
            engines[t.dst][(Direction.RECV, q)].append(TableRow(**slot, op=Op.COPY, deps=0))
            engines[t.dst][(Direction.SEND, loop)].append(     # no router: no terminals
                TableRow(**row, op=Op.REDUCE, deps=1, stage=j, unstage=True))
            engines[t.dst][(Direction.RECV, loop)].append(
                TableRow(**row, op=Op.REDUCE, deps=len(before)))
        else:
            extents.append((row["addr"], row["addr"], row["flits"]))
            engines[t.src][(Direction.SEND, p)].append(
                TableRow(**row, op=t.op, deps=deps, **terminals))
            engines[t.dst][(Direction.RECV, q)].append(
                TableRow(**row, op=t.op, deps=len(before)))
        before.append(step)
    programs = [NodeProgram(v, neighbors[v], engines[v]) for v in topo.nodes]
    return LoweredSchedule(schedule, elements_per_flit, num_ports, chunk_base,
                           int(((1 + slots) * flits).sum()), programs, routed, tuple(used),
                           chunk_ids, int((1 + slots).sum()), loopback,
                           tuple(staged_transfers), tuple(extents))


def _check_any_order_safe(schedule):
    """Raise ``ConfigError`` if receives arriving in any order could break a send's dependency
    count: a send of chunk c by u in step s counts the receives into (u, c) of steps before s, so
    every receive into (u, c) of step >= s must be caused by that send (reachable from it along
    transfers of c, each one a dependency of the next)."""
    by_chunk = {}
    for step, t in schedule.transfers():
        by_chunk.setdefault(t.chunk, []).append((step, t))
    for c, items in by_chunk.items():
        into = {}       # node -> list of (step, index) of receives
        for k, (step, t) in enumerate(items):
            into.setdefault(t.dst, []).append((step, k))
        # successors: transfer k (into v at step s) -> every transfer of c out of v at a later step
        out = {}
        for k, (step, t) in enumerate(items):
            out.setdefault(t.src, []).append((step, k))
        succ = [[j for s2, j in out.get(t.dst, ()) if s2 > step] for step, t in items]
        for k, (step, t) in enumerate(items):
            later = [j for s2, j in into.get(t.src, ()) if s2 >= step]
            if not later:
                continue
            seen, todo = set(), [k]
            while todo:
                for j in succ[todo.pop()]:
                    if j not in seen:
                        seen.add(j)
                        todo.append(j)
            for j in later:
                if j not in seen:
                    s2, r = items[j]
                    raise ConfigError(
                        f"{schedule.algorithm} on {schedule.topology.spec}: node {t.src} sends "
                        f"chunk {c} in step {step}, but its receive of chunk {c} from {r.src} in "
                        f"step {s2} does not depend on that send; with a router the receive may "
                        f"arrive first and be counted, so the schedule cannot be lowered routed")
