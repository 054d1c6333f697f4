"""MultiTree-opt: our improvement on the MultiTree tree construction (same trees-and-steps model,
same schedule lowering, fewer tree steps).

The model is MultiTree's (``multitree.py``, Huang et al., ISCA 2021): N spanning trees, tree ``r``
rooted at node ``r`` carries chunk ``r``; trees grow in tree steps, a tree edge ``p -> c`` in step
``t`` needs ``p`` in the tree when step ``t`` began, and each directed link carries at most one tree
edge per step. The schedule is the same lowering (``trees.trees_to_schedule``): ``2T`` steps for
``T`` tree steps. Only the choice of edges differs. Candidate constructions, tried in this order:

``translation`` (torus and ring)
    These are Cayley graphs of Z_R x Z_C: every link ``u -> v`` has an *offset* ``v - u`` (mod the
    dimensions) and the links of one offset are exactly N, one leaving each node. Grow one tree,
    rooted at node 0, where each step adds at most one edge of each offset: a maximum-weight
    assignment (``scipy.optimize.linear_sum_assignment``) between the offsets and the nodes just
    outside the tree, preferring children nearest the root (breadth-first growth; ties by lower
    node id; a few seeded restarts if the bound is missed). All weights are per child, so the
    assignment is a maximum-weight basis of a transversal matroid: it uses as many offsets as
    possible. (Preferring the farthest children reaches the same step counts, but its schedules
    run slower in ``golden_model.timing``, which has no barrier between steps: more transfers are
    ready early and take links that earlier steps need.) Tree ``r`` is tree 0 translated by ``r``. Contention-free by construction: the N translates of an
    edge of offset ``o`` use the N links of offset ``o`` once each, and no two edges of one step
    share an offset. Reaches the bound ``ceil((N-1)/degree) = ceil(N(N-1)/L)`` on every torus and
    ring we tried (torus:4x4 4, 8x8 16, 16x16 64).
``matching`` (every direct topology)
    Grow all N trees together. In a step, the links into a node ``c`` can only serve trees that
    miss ``c``, a link ``p -> c`` only trees holding ``p``, each tree at most once: per node a
    bipartite assignment between its incoming links and those trees (the choices at different
    nodes are independent, so together they form a maximum matching between the step's free links
    and (tree, new child) pairs). Weight of tree ``r``: the number of nodes it still misses, so the
    trees finish together; ties by tree id. Each node's assignment has maximum weight and, as all
    weights are positive, maximum cardinality.
``shift`` (fattree, bigraph)
    A tree edge is a route through switches and every endpoint has one injection and one ejection
    link, so a step carries at most N tree edges, one sent and one received per node, and
    ``N - 1`` steps is the bound. Take the endpoints in a cyclic order (by id; on a bigraph also
    with the switches alternating between the two halves, s0, s(S/2), s1, s(S/2+1), ..., so
    consecutive switches are linked directly) and find shifts ``g`` for which "every node sends to
    the node ``g`` places further on" uses every directed link at most once, by checking the
    topology's routes (1, N-1, 2, N-2, ... until the shifts found generate Z_N; on every fattree
    and bigraph tried, 1 and N-1 already do). Grow tree 0 over positions with one edge per step,
    each a found shift (parents in join order, the first edge leading outside the tree), and
    translate it: in step ``t`` all N trees together send exactly that shift's permutation, so the
    step is contention-free, and the trees are complete after exactly ``N - 1`` steps (a set
    holding 0 and closed under adding generators of Z_N is all of Z_N): the bound.
``greedy`` (fattree, bigraph; a fallback when ``shift`` finds no generating shifts)
    Per step, a maximum-weight assignment between senders and receivers with weight
    ``1 + (missing nodes of the best tree the pair can serve)``; then, in weight order, keep the
    pairs whose routes are still free and fill up greedily with the remaining pairs; each kept pair
    serves the valid tree that misses most nodes.
``published`` (every topology)
    ``multitree.compute_trees``, the authors' construction; on a mesh also
    ``published-manhattan``, the same with the root priority's corner distance corrected to the
    Manhattan distance (``multitree.root_priority``; mesh:8x8: 32 tree steps against 34).

Tree sets: the published trees are built first; a construction replaces them only with strictly
fewer tree steps. The first candidate that meets ``trees.lower_bound`` is taken at once (no
construction can use fewer steps); otherwise all are built and the one with the fewest tree steps
kept (ties: the earlier). ``compute_trees`` returns that set.

Timed choice (``build``). Tree steps are not time: a link idle in part of a step stays idle, and
every tree carries its 1/N of the vector as one message. ``build`` therefore times candidates
with ``golden_model.timing.simulate`` (the parameters ``algorithms.build_schedule`` passes,
the timing the schedule will be judged with) and keeps the fastest (ties: fewer transfers):

* the published trees with whole chunks: exactly ``multitree``'s schedule, so multitree-opt is
  never slower than multitree under the same timing;
* the kept tree set with whole chunks;
* the kept tree set *packed* and *pipelined* (``trees.forests_to_schedule``): each root's chunk
  in ``k`` sub-chunks, sub-chunk ``s`` on the tree set moved by the ``s mod G``-th of the
  topology's ``G`` symmetries (``symmetries``: on a square torus the eight maps of the square, so
  each link carries the same load as its rotated images and, with the translation trees, every
  link exactly the same load), sub-chunk ``s`` starting ``s`` steps after sub-chunk 0. ``k``
  doubles from ``max(2, G)`` while the time falls, up to ``MAX_SUB_CHUNKS``, N*k elements and
  ``MAX_TIMED_TRANSFERS`` transfers per candidate. Each step of a pipelined candidate is put
  in arrival order (``timing.in_arrival_order``) where the receiving NIs write in schedule
  order: a chunk's contributions are then summed in the order they arrive, so none stalls its
  link waiting for one that comes first in the schedule but arrives later (on torus:4x4 at
  64 MiB that stall cost 6.7%; in arrival order it costs nothing there or on torus:8x8).

Measured with the default timing at 64 MiB (16 GB/s, 150-cycle links): torus:4x4 and torus:8x8
at 1.0003 of the lower bound with 8 sub-chunks (whole chunks: 1.067 and 1.016), at 1 MiB 1.020
and 1.019; README, "Schedules at the bandwidth optimum".

Guarantees (each checked by ``trees.check_trees`` before lowering, and by the schedule's own
``validate``): contention-free by construction (no directed link carries two tree edges, hence two
transfers, in one step); every tree spans all N nodes; ``T >= trees.lower_bound(topology)``; and
``T`` never exceeds MultiTree's, because the published construction is one of the candidates.
``meta["method"]`` names the candidate kept (``"translation:<seed>"`` for a seeded restart),
``meta["candidates"]`` the tree steps of each one built.
"""

import math
import random

import numpy as np

from . import multitree
from .trees import check_trees, forests_to_schedule, lower_bound, num_tree_steps, tree_edge_route

ALGORITHM = "multitree-opt"
#: ``build`` chooses among candidates by the timing model (``algorithms.build_schedule`` passes
#: the timing parameters).
TIMED = True
#: Most sub-chunks per root ``build`` tries.
MAX_SUB_CHUNKS = 64
#: Largest candidate schedule (transfers) ``build`` times: building a candidate's transfers
#: and timing it (one-hop schedules in closed form) take about 0.3 s per 64,512 transfers here
#: (torus:8x8 with 8 sub-chunks), so a choice stays under a second on 64 nodes, and
#: ``allreduce-rtl report``, which builds multitree-opt for every bucket and sweep size, near
#: 90 s.
MAX_TIMED_TRANSFERS = 70_000
#: Largest packing candidate (transfers) ``build`` times where links differ or the network is
#: a graph (``bandwidth_aware``): those networks have no closed-form trees. ``machine:dgx2``
#: needs 128 sub-chunks of 8 pieces (491,520 transfers, about 4 s to build and time) to come
#: within 5% of its packing's bound (``scripts/irregular_table.py``).
MAX_PACKING_TRANSFERS = 500_000
#: Pieces per sub-chunk of the second packing sweep (``packing.packed_schedule``).
PACKING_PIECES = 8
#: A packing sweep stops after this many doublings in a row that were not faster than the best
#: so far (the time of a few sub-chunks is not monotonic on irregular graphs).
PATIENCE = 2
#: Seeded restarts of the translation method when the deterministic run misses the bound.
TRANSLATION_RESTARTS = 8
_FORBIDDEN = 0.0   # weight of an impossible pair (valid ones are positive)


def linear_sum_assignment(weights, maximize):
    """``scipy.optimize.linear_sum_assignment``, imported on first use: importing
    ``scipy.optimize`` takes about 0.6 s, more than building the published trees of torus:8x8,
    and most schedules never need it."""
    from scipy.optimize import linear_sum_assignment as solve  # noqa: PLC0415
    return solve(weights, maximize=maximize)


def translation_trees(topology, seed=None):
    """Trees of the ``translation`` method (module docstring) on a torus or ring.

    Parameters
    ----------
    topology : Topology
        Family ``torus`` or ``ring``.
    seed : int, optional
        None: deterministic ties (lower child id first). Otherwise ties are broken at random with
        ``random.Random(seed)``.

    Returns
    -------
    list of list of (child, parent, step)

    Raises
    ------
    ValueError
        On another family.
    """
    if not (topology.grid and topology.wraps):
        raise ValueError(f"translation trees need a torus or ring, not {topology.spec}")
    n = topology.num_nodes
    rows, cols = topology.grid

    def shift(v, off):
        r, c = divmod(v, cols)
        return ((r + off[0]) % rows) * cols + (c + off[1]) % cols

    def offset(u, v):
        (ru, cu), (rv, cv) = divmod(u, cols), divmod(v, cols)
        return ((rv - ru) % rows, (cv - cu) % cols)

    offsets = sorted({offset(0, v) for v in topology.graph.successors(0)})
    dist = _bfs_hops(topology, 0)
    rng = random.Random(seed) if seed is not None else None
    in_tree = {0}
    members = [0]
    tree0 = []
    step = 0
    while len(in_tree) < n:
        parent_of = {}                          # (offset index, child) -> parent
        for p in members:
            for k, off in enumerate(offsets):
                c = shift(p, off)
                if c not in in_tree:
                    parent_of.setdefault((k, c), p)
        children = sorted({c for _, c in parent_of})
        col = {c: j for j, c in enumerate(children)}
        w = np.full((len(offsets), len(children)), _FORBIDDEN)
        for (k, c), p in parent_of.items():
            tie = rng.random() if rng else 1.0 - c / n   # in (0, 1]: below one hop
            w[k, col[c]] = 1.0e6 - 10.0 * dist[c] + tie
        rows_k, cols_j = linear_sum_assignment(w, maximize=True)
        new = sorted((children[j], parent_of[(k, children[j])])
                     for k, j in zip(rows_k, cols_j) if w[k, j] > 0)
        for c, p in new:
            in_tree.add(c)
            members.append(c)
            tree0.append((c, p, step))
        step += 1
    trees = []
    for r in range(n):
        off = divmod(r, cols)
        trees.append([(shift(c, off), shift(p, off), t) for c, p, t in tree0])
    return trees


def _bfs_hops(topology, src):
    """Hop distance from ``src`` to every endpoint over the graph's links."""
    dist = {src: 0}
    frontier = [src]
    while frontier:
        nxt = []
        for u in frontier:
            for v in topology.graph.successors(u):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
        frontier = nxt
    return dist


def matching_trees(topology):
    """Trees of the ``matching`` method (module docstring) on a direct topology.

    Returns
    -------
    list of list of (child, parent, step)

    Raises
    ------
    ValueError
        On a switched topology.
    """
    if not topology.is_direct:
        raise ValueError(f"matching trees need a direct topology, not {topology.spec}")
    n = topology.num_nodes
    preds = [np.array(list(topology.graph.predecessors(c)), dtype=np.int64) for c in range(n)]
    member = np.eye(n, dtype=bool)              # member[r, v]: v in tree r
    trees = [[] for _ in range(n)]
    step = 0
    while not member.all():
        start = member.copy()
        # Trees missing more nodes first; ties by lower tree id.
        weight = (n - start.sum(axis=1)) * float(n) + (n - np.arange(n)) / n
        for c in range(n):
            missing = np.flatnonzero(~start[:, c])
            if missing.size == 0 or preds[c].size == 0:
                continue
            ok = start[np.ix_(missing, preds[c])].T          # links x trees
            # Weights depend on the tree only, so the valid pairs of the best assignment are a
            # maximum-weight basis of a transversal matroid: also a maximum-cardinality choice.
            w = np.where(ok, weight[missing][None, :], _FORBIDDEN)
            rows_i, cols_j = linear_sum_assignment(w, maximize=True)
            for i, j in zip(rows_i, cols_j):
                if ok[i, j]:
                    r = int(missing[j])
                    member[r, c] = True
                    trees[r].append((c, int(preds[c][i]), step))
        step += 1
    return trees


def shift_trees(topology):
    """Trees of the ``shift`` method (module docstring) on a switched topology, or None.

    Returns
    -------
    list of list of (child, parent, step), or None
        None when no node order tried has conflict-free shifts generating Z_N.
    """
    n = topology.num_nodes
    for order in _shift_orders(topology):
        gens = []
        for g in _shift_candidates(n):
            if _shift_is_conflict_free(topology, order, g):
                gens.append(g)
                if math.gcd(n, *gens) == 1:
                    return _translate_cyclic(order, _grow_cyclic_tree(n, gens))
    return None


def _shift_orders(topology):
    """Node orders whose cyclic shifts ``shift_trees`` tries: by id, and on a bigraph the switches
    alternating between the two halves (s0, s(S/2), s1, s(S/2+1), ...: consecutive switches are
    linked directly, so a shift by one position crosses one fabric link per switch)."""
    n = topology.num_nodes
    orders = [list(range(n))]
    if topology.family == "bigraph":
        per_switch, switches = topology.dims
        half = switches // 2
        sw = [i for q in range(half) for i in (q, half + q)]
        orders.append([i * per_switch + j for i in sw for j in range(per_switch)])
    return orders


def _shift_candidates(n):
    """Shifts 1, n-1, 2, n-2, ... (the short ones first: they stay on a switch most)."""
    seen = []
    for g in range(1, n // 2 + 1):
        for h in (g, n - g):
            if h not in seen:
                seen.append(h)
    return seen


def _shift_is_conflict_free(topology, order, g):
    """True if every node sending to the node ``g`` positions further along ``order`` uses each
    directed link at most once."""
    n = len(order)
    used = set()
    for i in range(n):
        for link in tree_edge_route(topology, order[i], order[(i + g) % n]):
            if link in used:
                return False
            used.add(link)
    return True


def _grow_cyclic_tree(n, gens):
    """Tree 0 over positions Z_n: one edge per step, the first (parent in join order, shift in
    ``gens`` order) leading outside the tree. Finishes in n - 1 steps because ``gens`` generates
    Z_n (a set holding 0 and closed under adding the generators is all of Z_n)."""
    in_tree = {0}
    members = [0]
    edges = []
    for step in range(n - 1):
        c, p = next(((p + g) % n, p) for p in members for g in gens if (p + g) % n not in in_tree)
        in_tree.add(c)
        members.append(c)
        edges.append((c, p, step))
    return edges


def _translate_cyclic(order, tree0):
    """Tree rooted at ``order[a]`` = tree 0 (over positions) shifted by ``a`` positions."""
    n = len(order)
    trees = [None] * n
    for a in range(n):
        trees[order[a]] = [(order[(c + a) % n], order[(p + a) % n], t) for c, p, t in tree0]
    return trees


def greedy_switched_trees(topology):
    """Trees of the ``greedy`` method (module docstring) on a switched topology (or any).

    Returns
    -------
    list of list of (child, parent, step)
    """
    n = topology.num_nodes
    routes = {(p, c): tree_edge_route(topology, p, c) for p in range(n) for c in range(n) if p != c}
    member = np.eye(n, dtype=bool)
    trees = [[] for _ in range(n)]
    step = 0
    while not member.all():
        start = member.copy()
        missing = n - start.sum(axis=1)
        # best[p, c]: the valid tree (p in it, c not) missing most nodes (ties: lower id); -1 none.
        best = np.full((n, n), -1, dtype=np.int64)
        for r in sorted(range(n), key=lambda r: (missing[r], -r)):
            best = np.where(start[r][:, None] & ~start[r][None, :], r, best)
        valid = best >= 0
        w = np.where(valid, 1.0 + missing[np.maximum(best, 0)], _FORBIDDEN)
        rows_p, cols_c = linear_sum_assignment(w, maximize=True)
        first = [(p, c) for p, c in zip(rows_p, cols_c) if valid[p, c]]
        first.sort(key=lambda pc: (-w[pc], pc))
        rest = sorted(zip(*np.nonzero(valid)), key=lambda pc: (-w[pc], pc))
        used = set()
        sent, got = set(), set()
        chosen = []
        for p, c in first + rest:
            p, c = int(p), int(c)
            if p in sent or c in got:
                continue
            route = routes[(p, c)]
            if any(link in used for link in route):
                continue
            used.update(route)
            sent.add(p)
            got.add(c)
            chosen.append((int(best[p, c]), c, p))
        for r, c, p in sorted(chosen):
            member[r, c] = True
            trees[r].append((c, p, step))
        step += 1
    return trees


def compute_trees(topology):
    """Build the candidate tree sets (module docstring) and keep the one with the fewest tree
    steps.

    Returns
    -------
    trees : list of list of (child, parent, step)
    method : str
        The construction kept: ``"translation"`` (``"translation:<seed>"`` for a seeded restart),
        ``"matching"``, ``"shift"``, ``"greedy"``, ``"published"`` or ``"published-manhattan"``.
    candidates : dict of str to int
        Tree steps of every construction built, by method name as above.
    """
    trees, method, candidates, _ = _tree_sets(topology)
    return trees, method, candidates


def _builders(topology):
    """(name, construction) in the order tried (module docstring)."""
    # Published first: it wins ties, so multitree-opt's tree set is multitree's wherever no
    # construction saves a tree step (e.g. torus:4x4 with 5 is beaten, ring:5 is not).
    builders = [("published", lambda: multitree.compute_trees(topology))]
    if topology.family == "mesh":
        builders.append(("published-manhattan",
                         lambda: multitree.compute_trees(topology, corner_distance="manhattan")))
    if topology.grid and topology.wraps:
        builders.append(("translation", lambda: translation_trees(topology)))
        for s in range(1, TRANSLATION_RESTARTS + 1):
            builders.append((f"translation:{s}", lambda s=s: translation_trees(topology, seed=s)))
    if topology.is_direct:
        builders.append(("matching", lambda: matching_trees(topology)))
    else:
        builders.append(("shift", lambda: shift_trees(topology)))
        builders.append(("greedy", lambda: greedy_switched_trees(topology)))
    return builders


def _tree_sets(topology):
    """``compute_trees``'s result and the published trees: (trees, method, candidates,
    published)."""
    if topology.num_nodes == 1:
        return [[]], "published", {"published": 0}, [[]]
    bound = lower_bound(topology)
    best = None
    published = None
    candidates = {}
    for name, make in _builders(topology):
        trees = make()
        if trees is None:
            continue
        steps = num_tree_steps(trees)
        candidates[name] = steps
        if name == "published":
            published = trees
        if best is None or steps < best[0]:
            best = (steps, trees, name)
        if steps <= bound:
            break
    return best[1], best[2], candidates, published


def symmetries(topology):
    """Automorphisms of ``topology`` that ``build`` packs tree sets with: node permutations
    that map every link to a link.

    Returns
    -------
    list of list of int
        ``perm[v]`` is the image of node ``v``; the identity first. Mesh and torus (rows x
        cols): the identity and the three reflections (rows, columns, both), and with square
        dimensions also the four maps that swap rows and columns (the dihedral group of the
        square: 90-degree rotations among them, which exchange the two dimensions' links).
        A ring: the identity and the reflection ``v -> -v``. Fat-tree and BiGraph: the
        identity only.

    Raises
    ------
    AssertionError
        If a map is not an automorphism (a bug).
    """
    n = topology.num_nodes
    if not topology.grid:
        return [list(range(n))]
    rows, cols = topology.grid
    maps = [lambda r, c: (r, c), lambda r, c: (r, cols - 1 - c),
            lambda r, c: (rows - 1 - r, c), lambda r, c: (rows - 1 - r, cols - 1 - c)]
    if rows == cols and rows > 1:
        maps += [lambda r, c, f=f: f(c, r) for f in list(maps)]
    perms = []
    for f in maps:
        perm = [f(*divmod(v, cols)) for v in range(n)]
        perm = [r * cols + c for r, c in perm]
        if perm not in perms:
            assert all(topology.graph.has_edge(perm[u], perm[v])
                       for u, v in topology.graph.edges), f"{topology.spec}: not an automorphism"
            perms.append(perm)
    return perms


def mapped_trees(trees, perm):
    """The tree set ``trees`` moved by the automorphism ``perm``: the tree of root ``r`` becomes
    the tree of root ``perm[r]``, every edge mapped, join steps unchanged (so the moved set obeys
    every rule the original did)."""
    out = [None] * len(trees)
    for r, edges in enumerate(trees):
        out[perm[r]] = [(perm[c], perm[p], t) for c, p, t in edges]
    return out


def one_chunk_bound(topology, num_elements, params):
    """A lower bound (cycles) on the time of any schedule that moves each of N near-equal
    chunks in whole-chunk transfers, 2(N-1) per chunk (``multitree``'s, any tree set's).

    The endpoints' outgoing links carry ``2N(N-1)`` transfers, so one of them carries at least
    ``ceil(2N(N-1) / L)`` (``L`` those links); each holds it for at least ``hold`` cycles (the
    smallest chunk's message with its header flits on the fastest link, ``timing.hold_cycles``)
    and, between two, ``message_gap``; the last one finishes ``latency + retire_delay`` after
    it leaves (the smallest latency); the first cannot start before ``send_delay``. 0 for one
    node.
    """
    from ..timing import hold_cycles  # noqa: PLC0415
    n = topology.num_nodes
    if n <= 1:
        return 0
    ends = set(topology.nodes)
    links = [(x, y) for x, y in topology.graph.edges if x in ends]
    smallest = num_elements // n * params.element_bytes
    flits = -(-smallest // params.flit_bytes) + params.header_flits
    hold = hold_cycles(flits * params.flit_bytes, max(topology.link_bandwidth(lk) for lk in links),
                       params)
    per_link = -(-2 * n * (n - 1) // len(links))
    latency = min(topology.link_latency(lk) for lk in links)
    return (params.send_delay + per_link * hold + (per_link - 1) * params.message_gap + latency
            + params.retire_delay)


def bandwidth_aware(topology):
    """True where the links differ in bandwidth or the network is a graph from a file: there
    ``build`` also times the bandwidth-aware tree packing (``packing``)."""
    bandwidths = {bw for *_, bw in topology.graph.edges(data="bandwidth")}
    return topology.family == "graph" or len(bandwidths) > 1


def _consider_packing(topology, num_elements, params, meta, options, timed):
    """Time the bandwidth-aware packing (``packing.pack_trees``) in 1, 2, 4, ... sub-chunks
    per root until ``PATIENCE`` doublings in a row were not faster (within ``MAX_SUB_CHUNKS``
    and ``MAX_PACKING_TRANSFERS``),
    first of one piece each, then of ``PACKING_PIECES``; each one joins ``options`` as
    ``(cycles, transfers, order, schedule, ())`` and ``timed`` as ``"packing/<k>"`` or
    ``"packing/<k>x<pieces>"``."""
    from ..timing import in_arrival_order, simulate  # noqa: PLC0415
    from .packing import pack_trees, packed_schedule  # noqa: PLC0415
    n = topology.num_nodes
    packing = pack_trees(topology)
    for q in (1, PACKING_PIECES):
        k, best, worse = 1, None, 0
        while ((q > 1 or k <= MAX_SUB_CHUNKS)
               and k * q * 2 * n * (n - 1) <= MAX_PACKING_TRANSFERS
               and k * q * n <= num_elements):
            sched = packed_schedule(ALGORITHM, topology, num_elements, packing, k,
                                    {**meta, "method": "packing"}, validate=False, pieces=q)
            if k * q > 1:
                sched = in_arrival_order(sched, params)
            cycles = simulate(sched, params).cycles
            timed[f"packing/{k}" if q == 1 else f"packing/{k}x{q}"] = cycles
            options.append((cycles, sched.num_transfers, len(options), sched, ()))
            worse = worse + 1 if best is not None and cycles >= best else 0
            if worse == PATIENCE:
                break
            best = cycles if best is None else min(best, cycles)
            k *= 2


def build(topology, num_elements, params=None, sub_chunks=None):
    """MultiTree-opt all-reduce schedule on ``topology`` for ``num_elements`` elements per node:
    the fastest candidate by the timing model.

    Candidates (module docstring, "Timed choice"): the published trees and the tree set with
    the fewest tree steps, each with whole chunks (``trees_to_schedule``); and that tree set
    packed with the topology's ``symmetries`` and pipelined in sub-chunks
    (``forests_to_schedule``), the sub-chunk count doubling from the packing's size while the
    time falls, up to ``MAX_SUB_CHUNKS`` and ``MAX_TIMED_TRANSFERS``.

    Parameters
    ----------
    topology : Topology
        Any family; N = 1 gives an empty schedule.
    num_elements : int
        Elements per node vector.
    params : golden_model.timing.TimingParams, optional
        The timing the candidates are compared with (default ``TimingParams()``).
    sub_chunks : int, optional
        Use exactly this many sub-chunks per root (the best tree set, packed) instead of
        choosing; 1 gives the whole-chunk schedule of that tree set.

    Returns
    -------
    AllReduceSchedule
        ``2T + k - 1`` steps for ``T`` tree steps and ``k`` sub-chunks; contention-free when
        ``k = 1``. ``meta``: ``tree_steps`` (T), ``lower_bound``, ``method`` (the tree
        construction kept), ``candidates`` (tree steps of each one built), ``sub_chunks`` (k),
        ``tree_sets`` (the packing's size), ``timed`` (cycles of every candidate timed, by
        ``"<method>/<k>"``; empty when the published trees in whole chunks are the only
        candidate, e.g. torus:16x16, where they meet the tree-step bound and a pipelined
        schedule would exceed ``MAX_TIMED_TRANSFERS``) and, when something was timed,
        ``cycles``: the kept schedule's under ``params``, for callers that time with the same
        parameters to read (``algorithms.timed_cycles``).

    Raises
    ------
    ValueError
        If ``sub_chunks`` is not a positive integer.
    ScheduleError
        If a construction breaks an invariant (a bug).
    """
    from ..timing import TimingParams, in_arrival_order, simulate  # noqa: PLC0415
    params = params or TimingParams()
    if sub_chunks is not None and (isinstance(sub_chunks, bool) or not isinstance(sub_chunks, int)
                                   or sub_chunks < 1):
        raise ValueError(f"sub_chunks must be a positive integer, not {sub_chunks!r}")
    trees, method, candidates, published = _tree_sets(topology)
    n = topology.num_nodes
    meta = {"method": method, "candidates": candidates}
    perms = symmetries(topology)

    def packed():
        return [mapped_trees(trees, perm) for perm in perms]

    def make(name, sets, k, validate=False):
        sched = forests_to_schedule(ALGORITHM, topology, num_elements, sets, k,
                                    {**meta, "method": name, "sub_chunks": k,
                                     "tree_sets": len(sets)}, validate=validate)
        return sched if k == 1 else in_arrival_order(sched, params)

    if n == 1:
        return make(method, [trees], 1, validate=True)
    if sub_chunks is not None:
        return make(method, [trees] if sub_chunks == 1 else packed(), sub_chunks, validate=True)
    timed = {}
    options = []                 # (cycles, transfers, order, schedule, tree sets)

    def consider(name, sets, k):
        sched = make(name, sets, k)
        cycles = simulate(sched, params).cycles
        timed[f"{name}/{k}"] = cycles
        options.append((cycles, sched.num_transfers, len(options), sched, sets))
        return cycles

    per_set = 2 * n * (n - 1)
    k = max(2, len(perms))

    def pipelining_fits(k):
        return (k <= MAX_SUB_CHUNKS and k * per_set <= MAX_TIMED_TRANSFERS
                and k * n <= num_elements)

    aware = bandwidth_aware(topology)
    if method == "published" and not pipelining_fits(k) and not aware:
        # One candidate: nothing to choose, so nothing to time.
        sched = make(method, [trees], 1, validate=True)
        sched.meta["timed"] = {}
        return sched
    consider("published", [published], 1)
    if method != "published":
        consider(method, [trees], 1)
    best = min(options)[0]
    forests = packed() if pipelining_fits(k) else None
    while pipelining_fits(k):
        cycles = consider(method, forests, k)
        if cycles >= best:
            break
        best = cycles
        k *= 2
    if aware:
        _consider_packing(topology, num_elements, params, meta, options, timed)
    cycles, _, _, sched, sets = min(options, key=lambda o: o[:3])
    for tree_set in sets:
        check_trees(topology, tree_set)
    sched.validate()
    sched.meta.update(timed=timed, cycles=cycles)
    return sched
