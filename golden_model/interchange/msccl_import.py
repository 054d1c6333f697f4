"""An MSCCL-IR all-reduce as this project's ``AllReduceSchedule`` on a topology the user names,
so that the golden executor, the timing model, the lowering and the hardware treat it like any
built-in algorithm (docs/interchange.md, "Import").

What can be imported: ``coll="allreduce"``, in place, step types ``s``, ``r``, ``rrc`` and
``nop`` on buffers ``i`` and ``o`` (one buffer in place), a receive writing the chunk its send
read (our transfers move chunk c to chunk c) and ``rrc`` adding into the chunk it reads. These
are what the NI executes (a send, a receive that copies, a receive that adds); other step types
(``rcs rrs rrcs cpy re``) and scratch buffers are refused with the step that uses them.

How the steps are rebuilt. The file is checked (``msccl_check.check``) and run once
(``msccl_check.run``, blocks from the first rank on); each send and the receive it matches
(FIFO order per pair and channel) become one transfer per chunk. Our schedule's meaning
(``golden_model.executor``: a step's transfers read their sources as the step begins, then
write in list order) holds the XML's data flow when, for the run's events:

* a send that reads what an earlier receive wrote is in a later step (``step >= w + 1``);
* a receive that overwrites or adds into a chunk an earlier send read is in the same or a later
  step than that send (``step >= r``);
* receives into one chunk keep their order (``step >= w``, and within a step the order the run
  completed them), which keeps the summation order, so floats come out bit for bit as the
  XML's own order gives them;
* a pair's transfers on a channel keep their FIFO order (``step >=`` the one sent before), so
  every link serves them in the file's order, as the NI's send engines and the timing model's
  links in schedule order do.

Each transfer's step is the least that meets these (longest paths over the constraints, the
dependency depth); within a step transfers are in the order the run completed their receives.
A file this project exported records each transfer's step and position in comments
(``exporters.msccl_xml``, "Order"); where they are all there and keep these rules, they are
used instead, which restores the schedule exactly (``meta["steps_from"]`` says which).
Routes come from the topology's own route function; ranks map to nodes in order or by
``rank_map``.
"""

from collections import deque

import numpy as np

from ..schedule import AllReduceSchedule, Op, ScheduleError, Transfer
from . import msccl_check
from .msccl_read import MscclError, read

__all__ = ["to_schedule", "import_file", "IMPORTABLE"]

#: Step types the NI executes.
IMPORTABLE = ("s", "r", "rrc", "nop")


def _refuse_unsupported(program):
    if program.coll != "allreduce":
        raise MscclError(f"{program.source}: coll={program.coll!r}: only an all-reduce can be "
                         f"imported")
    if not program.inplace:
        raise MscclError(f"{program.source}: inplace=0: only in-place all-reduces can be "
                         f"imported (our NIs reduce in each node's own vector)")
    for g in program.gpus:
        for tb in g.tbs:
            for st in tb.steps:
                where = f"{program.source}: gpu {g.id} tb {tb.id} step {st.s}"
                if st.type not in IMPORTABLE:
                    raise MscclError(f"{where}: step type {st.type} cannot be imported: the NI "
                                     f"executes {', '.join(IMPORTABLE)} only")
                if st.type == "nop":
                    continue
                bufs = {st.srcbuf} if st.type == "s" else {st.dstbuf} | (
                    {st.srcbuf} if st.type == "rrc" else set())
                if "s" in bufs:
                    raise MscclError(f"{where}: uses the scratch buffer, which the NI does not "
                                     f"have")
                if st.type == "rrc" and st.srcoff != st.dstoff:
                    raise MscclError(f"{where}: rrc adds chunk {st.srcoff} into chunk "
                                     f"{st.dstoff}; the NI adds a received chunk into the same "
                                     f"chunk")


def _rank_map(program, topology, rank_map):
    n = program.ngpus
    if n != topology.num_nodes:
        raise MscclError(f"{program.source}: {n} ranks, but {topology.spec} has "
                         f"{topology.num_nodes} nodes")
    if rank_map is None:
        return list(range(n))
    nodes = list(rank_map)
    if sorted(nodes) != list(range(n)):
        raise MscclError(f"rank map {nodes} must list each node 0..{n - 1} once")
    return nodes


def to_schedule(program, topology, num_elements, rank_map=None):
    """``program`` as an ``AllReduceSchedule`` on ``topology`` (module docstring).

    Parameters
    ----------
    program : msccl_read.Program
    topology : Topology
        With as many nodes as the program has ranks.
    num_elements : int
        Elements per node; cut into ``nchunksperloop`` near-equal chunks
        (``schedule.chunk_bounds``, the exporter's rule).
    rank_map : sequence of int, optional
        ``rank_map[r]`` is the node of rank ``r`` (default: rank r on node r).

    Returns
    -------
    AllReduceSchedule
        Algorithm ``"msccl:<name>"``; ``meta``: ``source``, ``name`` and ``rank_map``.

    Raises
    ------
    MscclError
        If the program is not importable (module docstring), its ranks do not match the
        topology, the rank map is not a permutation, or its check fails (the first finding).
    """
    _refuse_unsupported(program)
    nodes = _rank_map(program, topology, rank_map)
    verdict = msccl_check.check(program)
    if verdict.errors:
        raise MscclError(f"{program.source}: not a correct all-reduce: {verdict.errors[0]}")
    trace = []
    zeros = [np.zeros((g.i_chunks, 1), dtype=np.int64) for g in program.gpus]
    msccl_check.run(program, zeros, np.add, trace=trace)
    units, edges = _units(program, trace)
    order = _recorded_order(program, units, edges)
    if order is not None:
        steps, rank = [o[0] for o in order], order
        origin = "the file's recorded order"
    else:
        steps = _levels(program, units, edges)
        rank = [(steps[u], units[u][4]) for u in range(len(units))]    # then receive order
        origin = "dependency depth"
    schedule_steps = [[] for _ in range(max(steps, default=-1) + 1)]
    for u in sorted(range(len(units)), key=rank.__getitem__):
        src, dst, chunk, op = units[u][:4]
        a, b = nodes[src], nodes[dst]
        if order is not None and order[u][2]:      # the reverse of the route back
            route = tuple((v, w) for w, v in reversed(topology.route(b, a)))
        else:
            route = tuple(topology.route(a, b))
        schedule_steps[steps[u]].append(Transfer(a, b, chunk, op, route))
    try:
        return AllReduceSchedule.build(f"msccl:{program.name}", topology, num_elements,
                                       program.nchunksperloop, schedule_steps,
                                       meta={"source": program.source, "name": program.name,
                                             "rank_map": nodes, "steps_from": origin})
    except ScheduleError as exc:     # a checked file should never get here
        raise MscclError(f"{program.source}: imported, it is not a valid schedule: "
                         f"{exc}") from None


def _units(program, trace):
    """One unit per (transfer, chunk): ``(src, dst, chunk, op, receive time)`` and the
    constraint edges ``(a, b, w)``: unit b's step >= unit a's + w."""
    gpus = program.gpus
    pending = {}            # (src, dst, chan) -> queue of (unit ids, srcoff)
    last_sent = {}          # (src, dst, chan) -> the unit sent last on that connection
    units, edges = [], []
    last_write, reads = {}, {}
    for time, (g, t, s) in enumerate(trace):
        tb = gpus[g].tbs[t]
        st = tb.steps[s]
        if st.type == "s":
            ids = []
            for k in range(st.cnt):
                u = len(units)
                units.append([g, None, st.srcoff + k, None, None, (g, t, s), None])
                key = (g, st.srcoff + k)
                if key in last_write:
                    edges.append((last_write[key], u, 1))
                reads.setdefault(key, []).append(u)
                ids.append(u)
            conn = (g, tb.send, tb.chan)
            if conn in last_sent:
                edges.append((last_sent[conn], ids[0], 0))
            for a, b in zip(ids, ids[1:]):
                edges.append((a, b, 0))
            last_sent[conn] = ids[-1]
            pending.setdefault(conn, deque()).append((ids, st.srcoff))
        elif st.type in ("r", "rrc"):
            ids, srcoff = pending[(tb.recv, g, tb.chan)].popleft()
            if srcoff != st.dstoff:
                raise MscclError(f"{program.source}: gpu {g} tb {t} step {s} writes chunk "
                                 f"{st.dstoff} with what rank {tb.recv} sent from chunk "
                                 f"{srcoff}; our transfers keep the chunk")
            for k, u in enumerate(ids):
                key = (g, st.dstoff + k)
                units[u][1:5] = [g, st.dstoff + k, Op.REDUCE if st.type == "rrc" else Op.COPY,
                                 time]
                units[u][6] = (g, t, s)
                if key in last_write:
                    edges.append((last_write[key], u, 0))
                edges += [(r, u, 0) for r in reads.pop(key, ()) if r != u]
                last_write[key] = u
    return units, edges


def _recorded_order(program, units, edges):
    """Each unit's ``(step, position)`` from the order comments this project's exporter writes
    in every thread block (``exporters.msccl_xml.ORDER_MARK``), or None when a block has none,
    one does not match its steps, a transfer's two ends disagree, or the order breaks one of
    the data-flow rules (a hand-edited file): the steps then come from the dependency
    depth."""
    from ..exporters.msccl_xml import ORDER_MARK  # noqa: PLC0415
    marks = {}
    for g in program.gpus:
        for tb in g.tbs:
            text = next((c for c in tb.comments if c.startswith(ORDER_MARK)), None)
            words = text[len(ORDER_MARK):].split() if text is not None else None
            if words is None or len(words) != len(tb.steps):
                return None
            for st, word in zip(tb.steps, words):
                if st.type != "nop":
                    back = word.endswith("~")
                    try:
                        k, i = (int(x) for x in word.rstrip("~").split("."))
                    except ValueError:
                        return None
                    if st.cnt != 1:
                        return None
                    marks[(g.id, tb.id, st.s)] = (k, i, back)
    order = []
    for unit in units:
        here = marks.get(unit[5])
        if here is None or here != marks.get(unit[6]):
            return None
        order.append(here)
    if len({o[:2] for o in order}) != len(order):
        return None
    for a, b, w in edges:
        (ka, ia, _), (kb, ib, _) = order[a], order[b]
        if kb < ka + w or (w == 0 and kb == ka and ib < ia and units[a][1] == units[b][1]
                           and units[a][2] == units[b][2]):
            return None
    return order


def _levels(program, units, edges):
    """The least steps meeting ``edges`` (longest paths; a cycle through a +1 edge would need
    a read before the write it reads, which a run cannot produce, and raises)."""
    n = len(units)
    out = [[] for _ in range(n)]
    for a, b, w in edges:
        out[a].append((b, w))
    level = [0] * n
    work = deque(range(n))
    queued = [True] * n
    while work:
        a = work.popleft()
        queued[a] = False
        for b, w in out[a]:
            if level[a] + w > level[b]:
                level[b] = level[a] + w
                if level[b] > n:
                    raise MscclError(f"{program.source}: its data flow has no step order "
                                     f"(a cycle of dependencies)")
                if not queued[b]:
                    queued[b] = True
                    work.append(b)
    return level


def import_file(path, topology, num_elements, rank_map=None):
    """``to_schedule`` of the MSCCL-IR file at ``path`` (``msccl_read.read``).

    Raises
    ------
    MscclError
        As ``msccl_read.read`` and ``to_schedule``.
    """
    return to_schedule(read(path), topology, num_elements, rank_map)
