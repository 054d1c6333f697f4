"""Shared machinery of the MultiTree family: tree sets, their checks, bounds and the lowering of
trees to an ``AllReduceSchedule``.

A *tree set* is the result of a MultiTree-style construction: one spanning tree per endpoint node
(tree ``r`` is rooted at node ``r`` and carries chunk ``r``), each grown in *tree steps*. It is
represented as a list ``trees`` with ``trees[r]`` the list of edges ``(child, parent, step)`` of
tree ``r`` in the order the children joined (the authors' simulator keeps the same triples,
``farabimahmud/accelerator``, ``src/allreduce/multitree_allreduce.py``). ``step`` counts from 0;
a child joining at step ``t`` has a parent that was in the tree when step ``t`` began.

A tree edge ``parent -> child`` is a message along ``tree_edge_route(topology, parent, child)``:
the single link on a direct topology (ring, mesh, torus: tree edges join neighbours), the
topology's route through switches on fattree and bigraph.

Lowering (``trees_to_schedule``), as the authors' ``generate_schedule``: with ``T`` tree steps, the
reduce-scatter sends a child's partial sum of chunk ``r`` to its parent at schedule step
``T - 1 - t`` (``t`` the step the child joined), and the all-gather copies the finished chunk from
parent to child at schedule step ``T + t``; ``2T`` schedule steps in all.
"""

import functools
import gc
import math
from itertools import chain
from operator import itemgetter

import networkx as nx
import numpy as np

from ..schedule import AllReduceSchedule, Op, ScheduleError, Transfer, chunk_bounds

#: Fan-out limit of the authors' construction: a parent adds at most ``KARY - 1`` children per
#: step over all trees, a node joins at most ``KARY - 1`` trees per step (``kary = 5`` on a 2D
#: torus in the authors' runs, i.e. one child per link; never binding on the topologies here, where
#: the one-tree-edge-per-link rule is tighter).
KARY = 5


def without_gc(func):
    """``func`` with Python's cyclic garbage collector paused while it runs (its state restored
    after, also on an exception). For the builders of tree sets and schedules: they allocate
    millions of objects that form no reference cycles (tree edges, transfers), which the
    collector's passes would only traverse, again and again as the heap grows."""
    @functools.wraps(func)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return paused


def tree_edge_route(topology, parent, child):
    """The directed links a tree edge ``parent -> child`` occupies in its step.

    Parameters
    ----------
    topology : Topology
    parent, child : int
        Endpoint node ids; on a direct topology they must be neighbours.

    Returns
    -------
    tuple of (u, v)
        ``((parent, child),)`` on ring, mesh and torus; ``topology.route(parent, child)`` (through
        switches) on fattree and bigraph.
    """
    if topology.is_direct:
        return ((parent, child),)
    return topology.route(parent, child)


def reverse_route(route):
    """The links of ``route`` walked backwards: ``child -> parent`` over the same switches.

    Using the reversed route (rather than ``topology.route(child, parent)``, which may take other
    switches) makes the reduce-scatter exactly as contention-free as the all-gather.
    """
    return tuple((v, u) for u, v in reversed(route))


def num_tree_steps(trees):
    """Number of tree steps ``T`` of a tree set: 1 + the largest join step (0 without edges)."""
    return 1 + max(map(itemgetter(2), chain.from_iterable(trees)), default=-1)


def lower_bound(topology):
    """A lower bound on the tree steps of any tree set on ``topology`` (contention-free, one tree
    edge per directed link per step, trees growing one hop per step).

    The largest of:

    * the directed-link bound ``ceil(N (N-1) / L)`` on a direct topology with ``L`` directed
      links (every tree has ``N - 1`` edges, each on its own link per step; references.md,
      MultiTree section);
    * the ejection bound ``max_c ceil((N-1) / indeg(c))``: node ``c`` joins ``N - 1`` trees, each
      through one of its ``indeg(c)`` incoming links, one tree per link per step (binding on a mesh:
      a corner has 2 incoming links, so mesh:8x8 needs at least 32 steps);
    * the depth bound ``max_r ecc(r)`` on a direct topology: a tree grows at most one hop per step.

    Returns
    -------
    int
        0 for a single node.
    """
    n = topology.num_nodes
    if n <= 1:
        return 0
    g = topology.graph
    eject = max(math.ceil((n - 1) / g.in_degree(c)) for c in range(n))
    if not topology.is_direct:
        return eject
    links = g.number_of_edges()
    # The family may know that node 0 is as far from some node as any node is (one search).
    depth = (nx.eccentricity(g, v=0) if topology.node0_is_peripheral
             else max(nx.eccentricity(g).values()))
    return max(math.ceil(n * (n - 1) / links), eject, depth)


def check_trees(topology, trees):
    """Check that a tree set is what the lowering assumes; raise ``ScheduleError`` if not.

    * ``trees[r]`` spans all N nodes, rooted at ``r``, every node joining once;
    * a parent was in its tree before the step its child joined (one hop per step);
    * on a direct topology every edge joins neighbours;
    * no directed link carries two tree edges (over all trees) in one step.

    The rules are checked on arrays of all edges at once; the error is the one a walk through
    the trees in order, edge by edge and rule by rule as listed, meets first.

    Raises
    ------
    ScheduleError
        Naming the first broken rule (a construction bug, never user input).
    """
    n = topology.num_nodes
    if len(trees) != n:
        raise ScheduleError(f"{len(trees)} trees for {n} nodes")
    counts = np.fromiter(map(len, trees), np.int64, n)
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(trees)), np.int64,
                       3 * int(counts.sum())).reshape(-1, 3)
    child, parent, step = flat.T
    tree = np.repeat(np.arange(n), counts)
    index = np.arange(len(flat))
    # An edge's first earlier edge with the same (tree, child), by a stable sort.
    key = tree * n + child
    by_key = np.argsort(key, kind="stable")
    sorted_key = key[by_key]
    rejoins = np.zeros(len(flat), dtype=bool)
    rejoins[by_key[1:][sorted_key[1:] == sorted_key[:-1]]] = True
    bad_child = rejoins | (child < 0) | (child >= n) | (child == tree)
    # The parent's join: the root at step -1, else the first edge making it a child in the tree.
    pos = np.minimum(np.searchsorted(sorted_key, tree * n + parent), max(len(flat) - 1, 0))
    join = by_key[pos]
    joined_before = ((parent >= 0) & (parent < n) & (sorted_key[pos] == tree * n + parent)
                     & (join < index))
    # As the walk's ``joined.get(parent, step) >= step``: a parent that never joined fails.
    parent_step = np.where(parent == tree, -1, np.where(joined_before, step[join], step))
    bad_parent = parent_step >= step
    bad = bad_child | bad_parent
    if topology.is_direct:
        links = np.array([u * n + v for u, v in topology.graph.edges], dtype=np.int64)
        bad |= ~np.isin(parent * n + child, links)
    first = int(np.argmax(bad)) if bad.any() else len(flat)
    # Links used twice in a step, among the edges before the first other error: each edge's
    # route as a row of link ids (-1 past its end), read in walk order.
    pairs, pair_of = np.unique(parent[:first] * n + child[:first], return_inverse=True)
    routes = [tree_edge_route(topology, *divmod(int(pc), n)) for pc in pairs]
    link_ids = {}
    route_ids = np.full((len(routes), max(map(len, routes), default=1)), -1, dtype=np.int64)
    for i, route in enumerate(routes):
        route_ids[i, :len(route)] = [link_ids.setdefault(link, len(link_ids)) for link in route]
    width = route_ids.shape[1]
    uses = route_ids[pair_of].ravel()
    at = np.flatnonzero(uses >= 0)              # edge * width + place in the route
    use_link, use_step = uses[at], step[at // width]
    by_use = np.lexsort((use_step, use_link))   # stable: a link's uses in a step in walk order
    again = by_use[1:][(use_link[by_use[1:]] == use_link[by_use[:-1]])
                       & (use_step[by_use[1:]] == use_step[by_use[:-1]])]
    reused = int(at[again.min()]) if len(again) else None
    error = first if reused is None else reused // width
    short = np.flatnonzero(counts != n - 1)
    if len(short) and (error == len(flat) or short[0] < tree[error]):
        r = int(short[0])
        raise ScheduleError(f"tree {r} spans {int(counts[r]) + 1} of {n} nodes")
    if error == len(flat):
        return
    r, c, p, s = (int(x) for x in (tree[error], child[error], parent[error], step[error]))
    if reused is not None:
        link = routes[pair_of[error]][reused % width]
        raise ScheduleError(f"tree {r}: link {link} used twice in step {s}")
    if bad_child[error]:
        raise ScheduleError(f"tree {r}: node {c} joins twice or is no node")
    if bad_parent[error]:
        raise ScheduleError(f"tree {r}: parent {p} of {c} not in the tree before step {s}")
    raise ScheduleError(f"tree {r}: {p} -> {c} is not a link")


def trees_to_schedule(algorithm, topology, num_elements, trees, meta=None):
    """Lower a tree set to an ``AllReduceSchedule`` (reduce-scatter up the trees, all-gather down).

    Chunk ``r`` (of N near-equal chunks) is the data of tree ``r``; every transfer has
    ``flow = r``. A child that joined tree ``r`` at tree step ``t`` sends a REDUCE of chunk ``r``
    to its parent at schedule step ``T - 1 - t`` (over the reversed tree-edge route) and receives a
    COPY of chunk ``r`` from it at step ``T + t`` (over the tree-edge route): ``2T`` steps, as the
    authors' ``generate_schedule`` (``farabimahmud/accelerator``,
    ``src/allreduce/multitree_allreduce.py``). Within a step transfers are ordered by tree, then by
    the order the children joined; that order fixes the summation order of REDUCEs into a chunk.
    This is ``forests_to_schedule`` with one tree set and one sub-chunk.

    Parameters
    ----------
    algorithm : str
        Name recorded in the schedule.
    topology : Topology
    num_elements : int
        Elements per node vector.
    trees : list of list of (child, parent, step)
        The tree set (module docstring); checked with ``check_trees``.
    meta : dict, optional
        Extra facts; ``tree_steps`` (T) and ``lower_bound`` are added.

    Returns
    -------
    AllReduceSchedule
        ``contention_free=True``: no directed link carries two transfers in one step.

    Raises
    ------
    ScheduleError
        If the trees or the schedule break an invariant (an algorithm bug).
    """
    return forests_to_schedule(algorithm, topology, num_elements, [trees], 1, meta)


@without_gc
def forests_to_schedule(algorithm, topology, num_elements, forests, sub_chunks, meta=None,
                        validate=True):
    """Lower tree sets to a pipelined ``AllReduceSchedule``: each root's data in ``sub_chunks``
    sub-chunks, sub-chunk ``s`` carried by the tree of its root in ``forests[s % len(forests)]``
    and started ``s`` steps after sub-chunk 0.

    Chunk ``r * sub_chunks + s`` (of ``N * sub_chunks`` near-equal chunks, so root ``r``'s
    sub-chunks are contiguous) is sub-chunk ``s`` of root ``r``. With ``T`` the most tree steps
    of any tree set, sub-chunk ``s`` is lowered as ``trees_to_schedule`` lowers a whole chunk,
    its steps shifted by ``s``: a child that joined at tree step ``t`` sends its REDUCE at step
    ``s + T - 1 - t`` and receives its COPY at step ``s + T + t``; ``2T + sub_chunks - 1``
    steps in all. Within a step transfers are ordered by sub-chunk (the one furthest along
    first), then tree, then join order. Steps may now use a link several times (one transfer
    per sub-chunk in flight), so ``contention_free`` is set only for one sub-chunk; the
    NI's send engines and the timing model (links in schedule order) serve a link's transfers
    in this order, which keeps the pipeline's sub-chunks in step.

    Parameters
    ----------
    algorithm : str
    topology : Topology
    num_elements : int
        Elements per node vector.
    forests : list of tree sets
        Each a list of N trees (``check_trees``); a packing when there are several.
    sub_chunks : int
        Sub-chunks per root (>= 1).
    meta : dict, optional
        Extra facts; ``tree_steps`` (T), ``lower_bound`` and, with more than one sub-chunk or
        tree set, ``sub_chunks`` and ``tree_sets`` are added.
    validate : bool
        Check the trees and the schedule (``check_trees``, ``AllReduceSchedule.validate``);
        a caller timing many candidates checks only the one it keeps.

    Returns
    -------
    AllReduceSchedule

    Raises
    ------
    ScheduleError
        If the trees or the schedule break an invariant (an algorithm bug).
    ValueError
        If ``sub_chunks < 1`` or ``forests`` is empty.
    """
    if sub_chunks < 1 or not forests:
        raise ValueError(f"need at least one tree set and one sub-chunk, not {len(forests)} "
                         f"and {sub_chunks}")
    if validate:
        for trees in forests:
            check_trees(topology, trees)
    t_steps = max(num_tree_steps(trees) for trees in forests)
    steps = [[] for _ in range(2 * t_steps + sub_chunks - 1)]
    num_chunks = topology.num_nodes * sub_chunks
    # ``AllReduceSchedule.build`` drops the transfers of empty chunks: none are made.
    live = (np.diff(chunk_bounds(num_elements, num_chunks)) > 0).tolist()
    routes = {}
    reduce, copy = Op.REDUCE, Op.COPY
    for s in range(sub_chunks):
        for r, edges in enumerate(forests[s % len(forests)]):
            chunk = r * sub_chunks + s
            if not live[chunk]:
                continue
            for child, parent, t in edges:
                pair = routes.get((parent, child))
                if pair is None:
                    route = tree_edge_route(topology, parent, child)
                    pair = routes[(parent, child)] = (route, reverse_route(route))
                route, back = pair
                steps[s + t_steps - 1 - t].append(Transfer(child, parent, chunk, reduce, back, r))
                steps[s + t_steps + t].append(Transfer(parent, child, chunk, copy, route, r))
    meta = {"tree_steps": t_steps, "lower_bound": lower_bound(topology), **(meta or {})}
    if sub_chunks > 1 or len(forests) > 1:
        meta.update(sub_chunks=sub_chunks, tree_sets=len(forests))
    return AllReduceSchedule.build(algorithm, topology, num_elements, num_chunks, steps,
                                   validate=validate,
                                   contention_free=sub_chunks == 1, meta=meta)
