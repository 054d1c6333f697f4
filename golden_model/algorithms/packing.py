"""Bandwidth-aware tree packing: the trees ``multitree-opt`` uses where links are unequal or the
network is any graph (a file's, a shipped machine's).

Each root ``r`` broadcasts its shard (all-gather) over a weighted set of spanning trees of the
endpoints, and the same trees reversed carry the reduce-scatter. A tree edge ``p -> c`` is a
transfer from endpoint ``p`` to ``c`` over one of the fewest-hop paths between them that pass
through switches only (on a network without switches: a link), so a switch forwards but never
merges or copies, as everywhere in this toolkit. The weights minimise the pipelined time bound
``T = max over links e of (bytes over e) / bandwidth(e)``, reduce-scatter and all-gather
together, by a linear program over trees:

    minimise T  subject to  sum_t x_t * load_t(e) <= T * bw(e)   for every link e,
                            sum_{t of root r} x_t = 1            for every root r,  x >= 0,

solved by column generation (the standard way to pack spanning trees, as in ForestColl's
optimality argument): from the program's dual prices of the links, each root's cheapest spanning
arborescence (Chu-Liu/Edmonds, :func:`min_arborescence`) is a new column when its reduced cost
is negative. With every route the program allows, the optimum reaches the reduce-scatter plus
all-gather cut bound (``golden_model.cutbound``) on the shipped machines, tori and fat-trees
(``tests/test_packing.py`` checks this); on a mesh it goes below it, as trees that reduce on the
way do.

:func:`packed_schedule` lowers a packing: each root's data in ``k`` sub-chunks, the sub-chunks
shared among its trees in proportion to their weights (largest remainders), sub-chunk ``s``
started ``s`` steps after sub-chunk 0, each tree edge at its child's depth (the lowering of
``trees.forests_to_schedule``).
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
    """Trees and weights per root.

    Attributes
    ----------
    trees : list of list of (float, tuple)
        ``trees[r]``: ``(weight, edges)`` pairs, weights summing to 1, ``edges`` a tuple of
        ``(parent, child, route)`` (route: the directed links, in order).
    bound : float
        The program's optimum T: the busiest link's load over its bandwidth, in shards per
        GB/s (an all-reduce of D bytes per node then takes at least ``D / N * bound`` ns).
    rounds : int
        Column-generation rounds run.
    """
    trees: list
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
    """The bandwidth-aware packing of ``topology`` (module docstring).

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
    pairs = list(options)
    # Per pair and route: the link ids it loads, both ways (all-gather forward, the
    # reduce-scatter on the reversed links).
    loads = {pair: [np.array([link_id[l] for l in route] + [link_id[(l[1], l[0])]
                                                           for l in route])
                     for route in routes] for pair, routes in options.items()}

    def cheapest(price, root):
        cost = np.full((n, n), np.inf)
        best = {}
        for (u, v) in pairs:
            if v == root:
                continue
            costs = [price[ids].sum() for ids in loads[(u, v)]]
            k = int(np.argmin(costs))
            cost[u, v] = costs[k] + 1e-12       # a tie prefers fewer edges of equal price
            best[(u, v)] = k
        parent = min_arborescence(cost, root)
        edges = tuple((int(parent[v]), v, best[(int(parent[v]), v)])
                      for v in range(n) if v != root)
        load = np.zeros(len(links))
        for p, c, k in edges:
            np.add.at(load, loads[(p, c)][k], 1.0)
        return edges, load

    columns = []                         # (root, edges, load)
    price = 1.0 / bw
    for r in range(n):
        columns.append((r, *cheapest(price, r)))
    for rounds_run in range(1, rounds + 1):
        m = len(columns)
        objective = np.zeros(m + 1)
        objective[-1] = 1.0
        a_ub = np.zeros((len(links), m + 1))
        for j, (_, _, load) in enumerate(columns):
            a_ub[:, j] = load
        a_ub[:, -1] = -bw
        a_eq = np.zeros((n, m + 1))
        for j, (r, _, _) in enumerate(columns):
            a_eq[r, j] = 1.0
        result = linprog(objective, A_ub=a_ub, b_ub=np.zeros(len(links)), A_eq=a_eq,
                         b_eq=np.ones(n), bounds=[(0, None)] * (m + 1), method="highs")
        if result.status != 0:          # pragma: no cover - the program is always feasible
            raise RuntimeError(f"tree packing program: {result.message}")
        price = np.maximum(-result.ineqlin.marginals, 0.0)
        mu = result.eqlin.marginals
        added = 0
        for r in range(n):
            edges, load = cheapest(price, r)
            if load @ price - mu[r] < -1e-9 * max(1.0, abs(mu[r])):
                columns.append((r, edges, load))
                added += 1
        if not added:
            break
    x = result.x[:-1]
    trees = [[] for _ in range(n)]
    for (r, edges, _), weight in zip(columns, x):
        if weight > 1e-9:
            routed = tuple((p, c, options[(p, c)][k]) for p, c, k in edges)
            trees[r].append((float(weight), routed))
    for r in range(n):
        total = sum(w for w, _ in trees[r])
        trees[r] = [(w / total, e) for w, e in trees[r]]
    return Packing(trees, float(result.x[-1]), rounds_run)


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


def packed_schedule(algorithm, topology, num_elements, packing, sub_chunks, meta=None,
                    validate=True):
    """Lower ``packing`` with ``sub_chunks`` sub-chunks per root (module docstring).

    Chunk ``r * k + s`` is sub-chunk ``s`` of root ``r``; a child at depth ``d`` of its tree
    sends its REDUCE at step ``s + T - d`` and receives its COPY at step ``s + T + d - 1``,
    with ``T`` the deepest tree: ``2T + k - 1`` steps. Within a step, transfers go by
    sub-chunk, then root, then depth.

    Returns
    -------
    AllReduceSchedule
        ``meta``: ``tree_steps`` (T), ``sub_chunks``, ``trees`` (trees with a sub-chunk),
        ``packing_bound`` (the program's T).
    """
    n = topology.num_nodes
    k = sub_chunks
    per_root = []
    for r in range(n):
        shares = _shares([w for w, _ in packing.trees[r]], k)
        # Trees interleaved (each at evenly spaced sub-chunks), so that every stretch of the
        # pipeline loads the links as the weights do on average.
        order = [t for _, t in sorted(((i + 0.5) / count, t) for t, count in enumerate(shares)
                                      for i in range(count))]
        per_root.append([packing.trees[r][t][1] for t in order])
    depth_of = {}
    deepest = 1
    for r in range(n):
        for edges in per_root[r]:
            if id(edges) not in depth_of:
                depth_of[id(edges)] = _depths(edges, r)
                deepest = max(deepest, max(depth_of[id(edges)].values()))
    steps = [[] for _ in range(2 * deepest + k - 1)]
    live = (np.diff(chunk_bounds(num_elements, n * k)) > 0).tolist()
    used = set()
    for s in range(k):
        for r in range(n):
            chunk = r * k + s
            if not live[chunk]:
                continue
            edges = per_root[r][s]
            used.add(id(edges))
            depth = depth_of[id(edges)]
            for p, c, route in sorted(edges, key=lambda e: depth[e[1]]):
                d = depth[c]
                back = tuple((b, a) for a, b in reversed(route))
                steps[s + deepest - d].append(Transfer(c, p, chunk, Op.REDUCE, back, r))
                steps[s + deepest + d - 1].append(Transfer(p, c, chunk, Op.COPY, route, r))
    meta = {"tree_steps": deepest, "sub_chunks": k, "trees": len(used),
            "packing_bound": packing.bound, **(meta or {})}
    return AllReduceSchedule.build(algorithm, topology, num_elements, n * k, steps,
                                   validate=validate, contention_free=False, meta=meta)
