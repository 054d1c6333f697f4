"""MultiTree all-reduce (Huang et al., "Communication Algorithm-Architecture Co-Design for
Distributed Deep Learning", ISCA 2021): the published tree construction, reproduced.

N spanning trees, one rooted at each endpoint node; tree ``r`` reduces and broadcasts chunk ``r``
(1/N of the data). The trees are grown together in *tree steps* so that in every step each
directed link carries at most one tree edge; the schedule then runs reduce-scatter up the trees
(steps reversed) and all-gather down them, ``2T`` steps for ``T`` tree steps, contention-free.

Construction rules, as the authors' public simulator (``farabimahmud/accelerator``,
``src/allreduce/multitree_allreduce.py``, ``compute_trees`` with ``alternate=True, sort=True``;
re-implemented here, not copied), see also ``/work/shared/references.md``:

* Tree steps ``t = 0, 1, ...``. Only nodes that were in tree ``r`` when the step began may be
  parents in tree ``r`` (a tree grows at most one hop per step). Every directed link carries at most
  one new tree edge per step over all trees; a parent adds at most ``KARY - 1`` children and a node
  joins at most ``KARY - 1`` trees per step (``KARY = 5``, the authors' 2D-torus setting: one per
  link, so implied by the link rule here).
* Roots take turns round-robin in the current root order. In its turn a root adds at most one
  edge: it scans its tree's parents in the order they joined (root first), skipping parents
  without budget, and takes the first parent with a candidate child not yet in the tree whose route
  is entirely free this step. Candidates on a direct topology are ``topology.neighbors(parent)``
  (north, south, west, east on mesh and torus, the authors' order); on fattree and bigraph all other
  endpoints ordered by (route length, node id) (the authors: nodes on the same switch first, then
  those one switch hop away); there a tree edge occupies every link of ``topology.route``.
  A root whose tree is complete takes its turn and adds nothing.
* A round always completes (authors: ``if turns % N != 0: changed = True``); the step ends after a
  round whose *last* turn added nothing (even if earlier turns of that round added edges), or when
  all trees are complete. ``turns`` restarts at 0 every step.
* After every complete round the root order becomes ``sorted(zip(priority, roots),
  reverse=True)`` (descending priority, ties by descending node id) and persists across steps.
  Priority: on a mesh, a node's largest distance to the four corners as the authors' code
  computes it (``KNCube.distance``: ``abs(src_x - dest_x) + abs(dest_x - dest_y)``, row distance
  plus a column term that slipped to ``|corner row - corner column|``; ``root_priority``), so that
  the paper's mesh figures are reproduced: mesh:8x8 takes 34 tree steps as theirs does (32 with
  the true Manhattan distance, which ``multitree-opt`` builds as a candidate); everywhere else
  all equal (so after the first round the order is N-1, ..., 0).

This variant (turn counter reset per step, resort after every complete round including the last
one of a step, complete roots counted as turns that add nothing) is what the authors' later
versions of the file do (an earlier one skipped complete roots without counting them); it gave the
published step counts at the first try: torus:4x4 5 tree steps, torus:8x8 17 (references.md).
On torus:4x4 and 8x8 the root order does not change the counts; on a mesh and the switched
families it changes the trees.

Speed: on a torus or ring (``_translated_trees``) the trees are translates of tree 0, edge for edge
in join order (the proof is in that function's docstring), so tree 0 is grown alone and moved:
torus:32x32 in 0.3 s. Elsewhere a turn resumes where the tree's previous turn left off. Within a
step links only get used, budgets only shrink and trees only grow, so a parent (or a candidate of a
parent) that failed once fails for the rest of the step; each tree keeps a cursor over its
step-start parents, so a step costs O(parents * candidates) per tree at most. A parent's budget is
capped at its links (one injection link on fattree and bigraph), so one whose links are all taken
fails at its first test. On direct topologies (``_DirectGrowth``) a tree's parents are only its
*frontier*: members with a neighbour outside the tree, since any other member would only be scanned
past (without it the scans grew as N^3: torus:32x32 100 s); a parent's candidates are bits of a
mask, so one test tells whether it can adopt; and late in a step, when few nodes have a usable link
left, a turn looks at those nodes instead of scanning (torus:32x32 grown this way: about 4.5 s
instead of 17). Fat-tree and BiGraph (``_SwitchedGrowth``) keep the full scan, with a cursor per
(tree, parent) over the parent's candidates: there every other endpoint is a candidate until the
tree is complete.
"""

from array import array

import numpy as np

from .trees import KARY, trees_to_schedule, without_gc

ALGORITHM = "multitree"


#: How ``root_priority`` measures a mesh node's distance to a corner: ``"authors"`` as the
#: published code does, ``"manhattan"`` the true hop count (``multitree-opt``'s candidate).
CORNER_DISTANCES = ("authors", "manhattan")


def root_priority(topology, corner_distance="authors"):
    """Priority of each root for the root order (higher goes first; ties by higher node id).

    Parameters
    ----------
    topology : Topology
    corner_distance : {"authors", "manhattan"}
        On a mesh, the distance from node (r, c) to corner (a, b): ``"authors"``
        ``|r - a| + |a - b|``, as the published code computes it (``KNCube.distance`` in
        ``farabimahmud/accelerator``, ``src/allreduce/network/kncube.py``: ``abs(src_x - dest_x)
        + abs(dest_x - dest_y)`` with x the row and y the column, a slip for the column term that
        the paper's mesh figures were made with); ``"manhattan"`` ``|r - a| + |c - b|``.

    Returns
    -------
    list of int
        Mesh: the largest distance from the node to the four corners; all zeros on every other
        family (the authors' networks leave it at 0 except on a mesh).

    Raises
    ------
    ValueError
        On another ``corner_distance``.
    """
    if corner_distance not in CORNER_DISTANCES:
        raise ValueError(f"corner distance {corner_distance!r} is not one of "
                         f"{', '.join(CORNER_DISTANCES)}")
    n = topology.num_nodes
    if topology.family != "mesh":
        return [0] * n
    rows, cols = topology.dims
    corners = [(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)]
    prio = []
    for v in range(n):
        r, c = topology.coords(v)
        if corner_distance == "authors":
            prio.append(max(abs(r - a) + abs(a - b) for a, b in corners))
        else:
            prio.append(max(abs(r - a) + abs(c - b) for a, b in corners))
    return prio


def candidate_children(topology):
    """For every endpoint, the endpoints it may adopt as children, in scan order, with routes.

    Returns
    -------
    list of list of (child, route)
        Direct topologies: ``topology.neighbors(p)`` with the single link. Switched topologies:
        every other endpoint ordered by (route length in links, node id), with
        ``topology.route(p, child)``.
    """
    n = topology.num_nodes
    cands = []
    for p in range(n):
        if topology.is_direct:
            cands.append([(c, ((p, c),)) for c in topology.neighbors(p)])
        else:
            routes = [(len(topology.route(p, c)), c, topology.route(p, c))
                      for c in range(n) if c != p]
            cands.append([(c, route) for _, c, route in sorted(routes)])
    return cands


def compute_trees(topology, kary=KARY, corner_distance="authors"):
    """Grow the N MultiTree trees with the published rules (module docstring).

    Parameters
    ----------
    topology : Topology
    kary : int
        Fan-out parameter (>= 2): per step a parent adds at most ``kary - 1`` children and a node
        joins at most ``kary - 1`` trees. Default 5, the authors' 2D-torus value.
    corner_distance : {"authors", "manhattan"}
        The mesh root priority's distance (``root_priority``); default the published one.

    Returns
    -------
    list of list of (child, parent, step)
        ``trees[r]``: the edges of the tree rooted at ``r`` in join order (see ``trees.py``).

    Raises
    ------
    ValueError
        If ``kary < 2``.
    """
    if kary < 2:
        raise ValueError(f"kary must be at least 2, not {kary}")
    if topology.num_nodes > 1 and _translations_commute(topology):
        return _translated_trees(topology, kary)
    return _grown_trees(topology, kary, corner_distance)


@without_gc
def _grown_trees(topology, kary, corner_distance):
    """``compute_trees`` turn by turn, on any topology."""
    n = topology.num_nodes
    prio = root_priority(topology, corner_distance)
    sorted_order = [r for _, r in sorted(zip(prio, range(n)), reverse=True)]
    order = list(range(n))
    trees = [[] for _ in range(n)]
    growth = (_DirectGrowth if topology.is_direct else _SwitchedGrowth)(topology, kary, trees)
    incomplete = n if n > 1 else 0
    step = 0
    while incomplete:
        turn = growth.start_step(step)
        while incomplete:                       # a round: every root takes a turn
            for root in order:
                added = len(trees[root]) < n - 1 and turn(root)
                if added and len(trees[root]) == n - 1:
                    incomplete -= 1
                    if not incomplete:
                        break
            else:
                order = sorted_order
                if not added:
                    break
        step += 1
    return trees


def _shift(topology, v, by):
    """Node ``v`` of a torus or ring moved by the translation that takes node 0 to ``by``
    (works on numpy arrays too)."""
    rows, cols = topology.grid
    (a, b), (x, y) = divmod(v, cols), divmod(by, cols)
    return (a + x) % rows * cols + (b + y) % cols


def _translations_commute(topology):
    """True for a torus or ring whose translations keep every node's neighbour order: the
    ``j``-th neighbour of ``v + s`` is the ``j``-th neighbour of ``v`` moved by ``s``. Checked
    for the translations by one row and by one column, which generate all of them."""
    if not (topology.grid and topology.wraps):
        return False
    rows, cols = topology.grid
    n = topology.num_nodes
    nbrs = [topology.neighbors(v) for v in range(n)]
    return all(nbrs[_shift(topology, v, by)] == [_shift(topology, c, by) for c in nbrs[v]]
               for by in {cols % n, 1 % n} for v in range(n))


@without_gc
def _translated_trees(topology, kary):
    """``compute_trees`` on a torus or ring where ``_translations_commute``: tree 0 grown alone,
    tree ``r`` its translate by ``r`` (each edge moved, join order and steps kept).

    Why the published rules give exactly these trees: by induction over rounds, at the start of
    every round tree ``r`` is tree 0 moved by ``r``, and the links used in the step, every
    node's budget and every node's joins are the same under all translations (each node has
    adopted one child and joined one tree per round so far). So tree ``r``'s first possible
    edge at the round's start is tree 0's moved by ``r``, ``(p + r, c + r)``. Within the round
    nothing makes it impossible before its turn: the earlier turns take the links ``(p + s, c
    + s)``, adopt into parents ``p + s`` and join nodes ``c + s`` with ``s != r``, all others;
    and as nothing becomes possible within a step, it is still the first. So every tree adds its
    translate, the step ends for all at once, and the invariant holds after the round (the root
    order never matters). For tree 0 the rounds are simple: a link ``u -> v`` is used in the
    step exactly when tree 0 has added an edge of its offset ``v - u`` in the step, and after
    ``k`` rounds every node has ``kary - 1 - k`` joins left and ``min(kary - 1, degree) - k``
    children, so a step has at most ``min(kary - 1, degree)`` rounds.
    """
    n = topology.num_nodes
    rows, cols = topology.grid
    nbrs = [topology.neighbors(v) for v in range(n)]
    rounds = min(kary - 1, len(nbrs[0]))

    def offset(u, v):
        (a, b), (x, y) = divmod(u, cols), divmod(v, cols)
        return (x - a) % rows, (y - b) % cols

    in_tree = bytearray(n)
    in_tree[0] = 1
    members = [0]                               # join order
    tree0 = []
    step = 0
    while len(members) < n:
        parents = members[:]                    # step-start members
        used = set()                            # offsets of the step's edges
        i = 0                                   # parents before i can add nothing this step
        for _ in range(rounds):
            edge = None
            while edge is None and i < len(parents):
                p = parents[i]
                edge = next(((c, p) for c in nbrs[p]
                             if not in_tree[c] and offset(p, c) not in used), None)
                if edge is None:
                    i += 1
            if edge is None:
                break
            c, p = edge
            in_tree[c] = 1
            members.append(c)
            used.add(offset(p, c))
            tree0.append((c, p, step))
            if len(members) == n:
                break
        step += 1
    children, parents, steps = (np.array(x, dtype=np.int64) for x in zip(*tree0))
    roots = np.arange(n)[:, None]
    moved_children = _shift(topology, children[None, :], roots).tolist()
    moved_parents = _shift(topology, parents[None, :], roots).tolist()
    steps = steps.tolist()
    return [list(zip(c, p, steps)) for c, p in zip(moved_children, moved_parents)]


class _DirectGrowth:
    """The turns of ``compute_trees`` on a direct topology (module docstring, "Speed").

    Candidate ``j`` of parent ``p`` (its ``j``-th neighbour) is bit ``1 << j``; ``outside[r][p]``
    holds the bits of the candidates outside tree ``r`` and ``free[p]`` those whose link is
    unused this step while ``p`` may still adopt and the candidate still join, so a bit set in
    both is an edge ``p`` may add to tree ``r`` now. A turn adds, of the parents with such a bit,
    the one that joined tree ``r`` first, its lowest bit. It finds that parent by scanning the
    tree's frontier from its cursor, or, when fewer nodes have any bit in ``free`` than the scan
    has left, by taking the earliest-joined of those nodes (``rank``): the same parent.
    Per-tree tables are byte and int arrays, not lists: at 1024 nodes lists of them would not
    stay in the caches (a grid node has at most 4 neighbours, so a mask fits a byte).
    """

    def __init__(self, topology, kary, trees):
        n = topology.num_nodes
        nbrs = [topology.neighbors(p) for p in range(n)]
        # child[p][bit]: the neighbour on that candidate bit (the list is indexed by the bit).
        self.child = [[None] * (1 << len(cs)) for cs in nbrs]
        # adopters[c]: (p, ~bit) for every parent p that has c as a candidate on that bit.
        self.adopters = [[] for _ in range(n)]
        for p, cs in enumerate(nbrs):
            for j, c in enumerate(cs):
                self.child[p][1 << j] = c
                self.adopters[c].append((p, ~(1 << j)))
        # Masks fit a byte up to 8 neighbours (every grid); a graph from a file may have more.
        self.masks = bytearray if max(map(len, nbrs), default=0) <= 8 else list
        self.all_bits = self.masks((1 << len(cs)) - 1 for cs in nbrs)
        # A parent adds at most kary - 1 children per step and at most one per link.
        self.cap = [min(kary - 1, len(cs)) for cs in nbrs]
        self.kary = kary
        self.trees = trees
        self.outside = [self.masks(self.all_bits) for _ in range(n)]
        for r in range(n):
            for p, clear in self.adopters[r]:
                self.outside[r][p] &= clear
        # rank[r][v]: v's place in tree r's join order (n for a node outside the tree).
        self.rank = [array("i", [n]) * n for _ in range(n)]
        for r in range(n):
            self.rank[r][r] = 0
        # frontier[r]: members of tree r in join order, without those found to have no
        # candidate outside the tree (they would only be scanned past); scanned[r]: how far
        # the last step's scans went, the part of the frontier worth pruning again.
        self.frontier = [[r] for r in range(n)]
        self.scanned = [1] * n

    def start_step(self, step):
        """Tree step ``step`` begins: every link free, every budget full. Returns
        ``turn(root)``, which adds the root's first possible edge to its tree, ``(child,
        parent, step)``, and returns whether there was one."""
        n = len(self.frontier)
        outside, child, adopters, rank, trees = (self.outside, self.child, self.adopters,
                                                 self.rank, self.trees)
        self.frontier = frontier = [[p for p in f[:k] if out[p]] + f[k:]
                                    for f, k, out in zip(self.frontier, self.scanned, outside)]
        parents = [f[:] for f in frontier]      # step-start frontier
        start_size = [len(edges) + 1 for edges in trees]
        pcur = [0] * n                          # cursor over parents[r]
        scanned = self.scanned = [0] * n
        free = self.masks(self.all_bits)
        alive = {p for p in range(n) if free[p]}
        budget = self.cap[:]                    # children a parent may still add this step
        joins = [self.kary - 1] * n             # trees a node may still join this step

        def turn(root):
            out = outside[root]
            par = parents[root]
            i = pcur[root]
            if len(alive) < len(par) - i:
                order = rank[root]
                first = start_size[root]        # only the step-start members may adopt
                p = None
                for q in alive:
                    if out[q] & free[q] and order[q] < first:
                        p, first = q, order[q]
                if p is None:
                    pcur[root] = len(par)
                    return False
            else:
                for i in range(i, len(par)):
                    p = par[i]
                    if out[p] & free[p]:
                        break
                else:
                    pcur[root] = scanned[root] = len(par)
                    return False
                pcur[root] = i
                if scanned[root] <= i:
                    scanned[root] = i + 1
            m = out[p] & free[p]
            bit = m & -m                        # the first candidate, in neighbour order
            c = child[p][bit]
            budget[p] -= 1
            free[p] = free[p] ^ bit if budget[p] else 0
            if not free[p]:
                alive.discard(p)
            joins[c] -= 1
            for q, clear in adopters[c]:
                out[q] &= clear
            if not joins[c]:
                for q, clear in adopters[c]:
                    free[q] &= clear
                    if not free[q]:
                        alive.discard(q)
            edges = trees[root]
            rank[root][c] = len(edges) + 1
            edges.append((c, p, step))
            frontier[root].append(c)
            return True

        return turn


class _SwitchedGrowth:
    """The turns of ``compute_trees`` on a fat-tree or BiGraph: every other endpoint is a
    candidate (``candidate_children``) and a tree edge takes every link of its route; each tree
    keeps a cursor over its parents and each (tree, parent) one over the parent's candidates
    (module docstring, "Speed")."""

    def __init__(self, topology, kary, trees):
        n = topology.num_nodes
        self.cands = candidate_children(topology)
        # At most kary - 1 children per step and one per injection link.
        self.cap = [min(kary - 1, len({route[0] for _, route in plist})) for plist in self.cands]
        self.kary = kary
        self.trees = trees
        self.members = [{r} for r in range(n)]
        self.joined = [[r] for r in range(n)]   # members in join order

    def start_step(self, step):
        """As ``_DirectGrowth.start_step``."""
        n = len(self.members)
        cands, members, joined, trees = self.cands, self.members, self.joined, self.trees
        parents = [j[:] for j in joined]        # step-start members, join order
        pcur = [0] * n
        ccur = [dict() for _ in range(n)]       # ccur[r][p]: cursor over cands[p]
        used = set()                            # directed links used this step
        budget = self.cap[:]
        joins = [self.kary - 1] * n

        def turn(root):
            added = _turn(root, parents[root], pcur, ccur[root], cands, members[root], budget,
                          joins, used)
            if added:
                joined[root].append(added[0])
                trees[root].append((*added, step))
            return bool(added)

        return turn


def _turn(root, parents, pcur, ccur, cands, members, budget, joins, used):
    """One root's turn on a switched topology: add the first possible edge and return
    (child, parent), or return None (cursors as in the module docstring: everything skipped
    here stays impossible for the rest of the step)."""
    i = pcur[root]
    num_parents = len(parents)
    while i < num_parents:
        p = parents[i]
        if budget[p] > 0:
            plist = cands[p]
            for j in range(ccur.get(p, 0), len(plist)):
                c, route = plist[j]
                if c in members or joins[c] == 0 or any(link in used for link in route):
                    continue
                used.update(route)
                budget[p] -= 1
                joins[c] -= 1
                members.add(c)
                ccur[p] = j + 1
                pcur[root] = i
                return c, p
            ccur[p] = len(plist)
        i += 1
    pcur[root] = i
    return None


def build(topology, num_elements):
    """MultiTree all-reduce schedule on ``topology`` for ``num_elements`` elements per node.

    Parameters
    ----------
    topology : Topology
        Any family; N = 1 gives an empty schedule.
    num_elements : int
        Elements per node vector (cut into N near-equal chunks, one per tree).

    Returns
    -------
    AllReduceSchedule
        ``2T`` steps for ``T`` tree steps, ``contention_free=True``; ``meta`` holds ``tree_steps``
        (T), ``lower_bound`` (``trees.lower_bound``), ``kary`` and ``method="published"``.

    Raises
    ------
    ScheduleError
        If the construction breaks an invariant (a bug).
    """
    trees = compute_trees(topology)
    return trees_to_schedule(ALGORITHM, topology, num_elements, trees,
                             meta={"kary": KARY, "method": "published"})
