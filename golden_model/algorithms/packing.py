"""Bandwidth-aware tree packing: the trees ``multitree-opt`` uses where links are unequal or the
network is any graph (a file's, a shipped machine's).

Each root ``r`` broadcasts its shard (all-gather) over a weighted set of spanning out-trees of
the endpoints, and gathers its shard's partial sums (reduce-scatter) over a weighted set of
in-trees (links of unequal bandwidth each way make the best trees of the two phases differ). A tree edge ``p -> c`` is a
transfer from endpoint ``p`` to ``c`` over one of the fewest-hop paths between them that pass
through switches only (on a network without switches: a link), so a switch forwards but never
merges or copies, as everywhere in this toolkit. The weights minimise the pipelined time bound
``T = max over links e of (bytes over e) / bandwidth(e)``, reduce-scatter and all-gather
together, by a linear program over trees:

    minimise T  subject to  sum_t x_t * load_t(e) <= T * bw(e)   for every link e,
                            sum_{t of root r, phase p} x_t = 1   for every root and phase,
                            x >= 0,

solved by column generation (the standard way to pack spanning trees, as in ForestColl's
optimality argument): from the program's dual prices of the links, each root's cheapest spanning
arborescence (Chu-Liu/Edmonds, :func:`min_arborescence`) is a new column when its reduced cost
is negative. With every route the program allows, the optimum reaches the reduce-scatter plus
all-gather cut bound (``golden_model.cutbound``) on the shipped machines, tori and fat-trees
(``tests/test_packing.py`` checks this); on a mesh it goes below it, as trees that reduce on the
way do.

:func:`packed_schedule` lowers a packing: each root's data in ``k`` sub-chunks of ``q`` pieces,
the ``k * q`` pieces shared among its trees in proportion to their weights (largest
remainders, each tree's pieces evenly spread), sub-chunk ``s`` started ``s`` steps after
sub-chunk 0, each tree edge at its child's depth (the lowering of
``trees.forests_to_schedule``), the reduce-scatter's trees and the all-gather's each shared
by their own weights. Pieces (``q > 1``) make every step load the links as the weights do on
average: where every link of a cut is busy all the time at the optimum (the shipped machines:
every endpoint's links and, on ``machine:dgx2``, the links between the boards), a step that
loads one link more than its share leaves another idle for good, so a step of one tree per
root (``q = 1``) stays 1.2x to 1.9x above the bound whatever ``k``, and ``q = 8`` pieces come
within 5% of it (``scripts/irregular_table.py``).
"""

from __future__ import annotations

import dataclasses
import itertools

import networkx as nx
import numpy as np

from ..schedule import AllReduceSchedule, Op, Transfer, chunk_bounds

__all__ = ["Packing", "pack_trees", "packed_schedule", "min_arborescence", "MAX_ROUNDS"]

#: Column-generation rounds at most (each prices one tree per root); the optimum is usually
#: reached in 5 to 25 on the networks tried.
MAX_ROUNDS = 60
#: Route options per endpoint pair at most (fewest-hop paths through switches).
MAX_ROUTES = 8


@dataclasses.dataclass(frozen=True)
class Packing:
    """Trees and weights per root, one set for each phase.

    Attributes
    ----------
    all_gather, reduce_scatter : list of list of (float, tuple)
        ``[r]``: ``(weight, edges)`` pairs, weights summing to 1, ``edges`` a tuple of
        ``(parent, child, route)``: in the all-gather the parent sends the child its copy over
        ``route``, in the reduce-scatter the child sends the parent its partial sum over
        ``route`` (the directed links, in order).
    bound : float
        The program's optimum T: the busiest link's load over its bandwidth, in shards per
        GB/s (an all-reduce of D bytes per node then takes at least ``D / N * bound`` ns).
    rounds : int
        Column-generation rounds run.
    """
    all_gather: list
    reduce_scatter: list
    bound: float
    rounds: int


def min_arborescence(cost, root):
    """The minimum-cost spanning arborescence rooted at ``root`` (Chu-Liu/Edmonds).

    Parameters
    ----------
    cost : numpy.ndarray (n, n)
        ``cost[u, v]``: the cost of edge ``u -> v``; ``inf`` where there is none.
    root : int

    Returns
    -------
    numpy.ndarray of int
        ``parent[v]`` for every vertex, -1 for the root.

    Raises
    ------
    ValueError
        If some vertex cannot be reached from the root.
    """
    n = cost.shape[0]
    w = np.array(cost, dtype=float)
    np.fill_diagonal(w, np.inf)
    w[:, root] = np.inf
    parent = np.argmin(w, axis=0)
    parent[root] = -1
    if np.isinf(w[parent[np.arange(n) != root], np.arange(n)[np.arange(n) != root]]).any():
        raise ValueError("a vertex cannot be reached from the root")
    # Find a cycle among the chosen parents.
    colour = np.zeros(n, dtype=int)      # 0 unvisited, 1 on the current walk, 2 done
    cycle = None
    for start in range(n):
        path, v = [], start
        while v != -1 and colour[v] == 0:
            colour[v] = 1
            path.append(v)
            v = parent[v]
        if v != -1 and colour[v] == 1:
            cycle = path[path.index(v):]
        for u in path:
            colour[u] = 2
        if cycle:
            break
    if cycle is None:
        return parent
    in_cycle = np.zeros(n, dtype=bool)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)
    c = len(rest)                        # the contracted vertex's index
    index = np.full(n, c)
    index[rest] = np.arange(c)
    small = np.full((c + 1, c + 1), np.inf)
    small[:c, :c] = w[np.ix_(rest, rest)]
    # Into the cycle: the cheapest edge u -> v (v in the cycle) less v's cycle edge.
    into = w[np.ix_(rest, cycle)] - w[parent[cycle], cycle][None, :]
    enter = np.argmin(into, axis=1)
    small[:c, c] = into[np.arange(c), enter]
    # Out of the cycle: the cheapest edge from any cycle vertex.
    out = w[np.ix_(cycle, rest)]
    leave = np.argmin(out, axis=0)
    small[c, :c] = out[leave, np.arange(c)]
    sub = min_arborescence(small, index[root])
    result = parent.copy()
    for i, v in enumerate(rest):
        p = sub[i]
        result[v] = -1 if p == -1 else (cycle[leave[i]] if p == c else rest[p])
    u = sub[c]                           # the edge into the cycle
    result[cycle[enter[u]]] = rest[u]
    return result


def _routes(topology):
    """``{(u, v): [route, ...]}``: the route options of every endpoint pair."""
    g = topology.graph
    ends = list(topology.nodes)
    if topology.is_direct:
        return {(u, v): [((u, v),)] for u, v in g.edges}
    switches = [x for x in g.nodes if g.nodes[x].get("kind") == "switch"]
    options = {}
    for u in ends:
        for v in ends:
            if u == v:
                continue
            h = g.subgraph(switches + [u, v])
            try:
                paths = list(itertools.islice(nx.all_shortest_paths(h, u, v), MAX_ROUTES))
            except nx.NetworkXNoPath:
                continue
            options[(u, v)] = [tuple(zip(p[:-1], p[1:])) for p in paths]
    return options


def pack_trees(topology, rounds=MAX_ROUNDS) -> Packing:
    """The bandwidth-aware packing of ``topology`` (module docstring): all-gather trees
    (out-trees from each root) and reduce-scatter trees (in-trees to it) priced apart, so
    that on links of unequal bandwidth each way each phase takes its own best trees.

    Raises
    ------
    ValueError
        If the endpoints cannot reach each other over switches and links alone.
    """
    from scipy.optimize import linprog  # noqa: PLC0415
    g = topology.graph
    n = topology.num_nodes
    links = list(g.edges)
    link_id = {link: i for i, link in enumerate(links)}
    bw = np.array([g.edges[link]["bandwidth"] for link in links], dtype=float)
    options = _routes(topology)
    # Per pair (u, v) and route option: the ids of the links a transfer u -> v loads.
    loads = {pair: [np.array([link_id[link] for link in route]) for route in routes]
             for pair, routes in options.items()}

    def cheapest(price, root, phase):
        # Edge p -> c of the arborescence: the transfer p -> c (all-gather) or c -> p
        # (reduce-scatter), over its cheapest route.
        cost = np.full((n, n), np.inf)
        best = {}
        for (u, v), ids in loads.items():
            p, c = (u, v) if phase == "ag" else (v, u)
            if c == root:
                continue
            costs = [price[i].sum() for i in ids]
            k = int(np.argmin(costs))
            cost[p, c] = costs[k] + 1e-12       # a tie prefers fewer edges of equal price
            best[(p, c)] = k
        parent = min_arborescence(cost, root)
        edges = tuple((int(parent[c]), c, best[(int(parent[c]), c)])
                      for c in range(n) if c != root)
        load = np.zeros(len(links))
        for p, c, k in edges:
            np.add.at(load, loads[(p, c) if phase == "ag" else (c, p)][k], 1.0)
        return edges, load

    phases = ("ag", "rs")
    columns = []                         # (phase, root, edges, load)
    price = 1.0 / bw
    for phase in phases:
        for r in range(n):
            columns.append((phase, r, *cheapest(price, r, phase)))
    for rounds_run in range(1, rounds + 1):
        m = len(columns)
        objective = np.zeros(m + 1)
        objective[-1] = 1.0
        a_ub = np.zeros((len(links), m + 1))
        a_eq = np.zeros((2 * n, m + 1))
        for j, (phase, r, _, load) in enumerate(columns):
            a_ub[:, j] = load
            a_eq[phases.index(phase) * n + r, j] = 1.0
        a_ub[:, -1] = -bw
        result = linprog(objective, A_ub=a_ub, b_ub=np.zeros(len(links)), A_eq=a_eq,
                         b_eq=np.ones(2 * n), bounds=[(0, None)] * (m + 1), method="highs")
        if result.status != 0:          # pragma: no cover - the program is always feasible
            raise RuntimeError(f"tree packing program: {result.message}")
        price = np.maximum(-result.ineqlin.marginals, 0.0)
        mu = result.eqlin.marginals
        added = 0
        for pi, phase in enumerate(phases):
            for r in range(n):
                edges, load = cheapest(price, r, phase)
                dual = mu[pi * n + r]
                if load @ price - dual < -1e-9 * max(1.0, abs(dual)):
                    columns.append((phase, r, edges, load))
                    added += 1
        if not added:
            break
    trees = {phase: [[] for _ in range(n)] for phase in phases}
    for (phase, r, edges, _), weight in zip(columns, result.x[:-1]):
        if weight > 1e-9:
            routed = tuple((p, c, options[(p, c) if phase == "ag" else (c, p)][k])
                           for p, c, k in edges)
            trees[phase][r].append((float(weight), routed))
    for phase in phases:
        for r in range(n):
            total = sum(w for w, _ in trees[phase][r])
            trees[phase][r] = [(w / total, e) for w, e in trees[phase][r]]
    return Packing(trees["ag"], trees["rs"], float(result.x[-1]), rounds_run)


def _shares(weights, k):
    """Sub-chunks per tree: ``k`` split in proportion to ``weights`` by largest remainders."""
    exact = np.array(weights) * k
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts), kind="stable")[:k - counts.sum()]:
        counts[i] += 1
    return counts


def _depths(edges, root):
    children = {}
    for p, c, _ in edges:
        children.setdefault(p, []).append(c)
    depth, frontier = {root: 0}, [root]
    while frontier:
        nxt = []
        for p in frontier:
            for c in children.get(p, ()):
                depth[c] = depth[p] + 1
                nxt.append(c)
        frontier = nxt
    return depth


def _per_sub_chunk(trees, k):
    """The tree of each of ``k`` sub-chunks (or pieces): shares by weight, the trees
    interleaved (each at evenly spaced positions), so that every stretch of the pipeline loads
    the links as the weights do on average."""
    shares = _shares([w for w, _ in trees], k)
    order = [t for _, t in sorted(((i + 0.5) / count, t) for t, count in enumerate(shares)
                                  for i in range(count))]
    return [trees[t][1] for t in order]


def packed_schedule(algorithm, topology, num_elements, packing, sub_chunks, meta=None,
                    validate=True, pieces=1):
    """Lower ``packing`` with ``sub_chunks`` sub-chunks of ``pieces`` pieces per root (module
    docstring).

    Chunk ``(r * k + s) * q + j`` is piece ``j`` of sub-chunk ``s`` of root ``r`` (``q`` =
    ``pieces``), carried by the tree that piece ``s * q + j`` of the root's ``k * q`` gets.
    With ``R`` and ``A`` the deepest reduce-scatter and all-gather trees, a child at depth
    ``d`` of its reduce-scatter tree sends its REDUCE at step ``s + R - d`` and a child at
    depth ``d`` of its all-gather tree receives its COPY at step ``s + R + d - 1``:
    ``R + A + k - 1`` steps. Within a step, transfers go by sub-chunk, then root, then piece,
    then depth.

    Returns
    -------
    AllReduceSchedule
        ``2 * N * (N - 1) * k * q`` transfers. ``meta``: ``tree_steps`` (``max(R, A)``),
        ``sub_chunks``, ``pieces``, ``trees`` (trees that carry a piece),
        ``packing_bound_ns_per_byte`` (the program's T: the all-reduce of D bytes per node takes
        at least ``D / N`` times it, in ns).
    """
    n = topology.num_nodes
    k, q = sub_chunks, pieces
    ag = [_per_sub_chunk(packing.all_gather[r], k * q) for r in range(n)]
    rs = [_per_sub_chunk(packing.reduce_scatter[r], k * q) for r in range(n)]
    depth_of = {}
    for r in range(n):
        for edges in ag[r] + rs[r]:
            if id(edges) not in depth_of:
                depth_of[id(edges)] = _depths(edges, r)
    deepest_rs = max((max(depth_of[id(e)].values()) for t in rs for e in t), default=1)
    deepest_ag = max((max(depth_of[id(e)].values()) for t in ag for e in t), default=1)
    steps = [[] for _ in range(deepest_rs + deepest_ag + k - 1)]
    live = (np.diff(chunk_bounds(num_elements, n * k * q)) > 0).tolist()
    used = set()
    for s, r, j in itertools.product(range(k), range(n), range(q)):
        chunk = (r * k + s) * q + j
        if not live[chunk]:
            continue
        for edges, phase in ((rs[r][s * q + j], Op.REDUCE), (ag[r][s * q + j], Op.COPY)):
            used.add(id(edges))
            depth = depth_of[id(edges)]
            for p, c, route in sorted(edges, key=lambda e: depth[e[1]]):
                d = depth[c]
                if phase is Op.REDUCE:
                    steps[s + deepest_rs - d].append(Transfer(c, p, chunk, phase, route, r))
                else:
                    steps[s + deepest_rs + d - 1].append(Transfer(p, c, chunk, phase, route, r))
    meta = {"tree_steps": max(deepest_rs, deepest_ag), "sub_chunks": k, "pieces": q,
            "trees": len(used), "packing_bound_ns_per_byte": packing.bound, **(meta or {})}
    return AllReduceSchedule.build(algorithm, topology, num_elements, n * k * q, steps,
                                   validate=validate, contention_free=False, meta=meta)
