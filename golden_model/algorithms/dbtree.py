"""Double binary tree all-reduce, pipelined (NCCL's tree algorithm; the MultiTree paper's "double
binary tree" baseline).

Trees
-----
Ranks ``0 .. N-1`` are positions in ``Topology.ring_order()``, so ranks close in number are close
in the network (ring neighbours). Tree 1 is NCCL's in-order binary tree (``ncclGetBtree`` in
NCCL ``src/graph/trees.cc``): a rank's lowest set bit ``b`` fixes its level; rank 0 is the root
and has the single child ``P/2``, ``P`` the smallest power of two ``>= N``; the parent of rank
``r > 0`` is ``(r ^ b) | (b << 1)``, or ``r ^ b`` when that is ``>= N``; its children are
``r - b/2`` and ``r + b/2``, the second moved into range by halving the offset (``r + b/4``,
``r + b/8`` ...) and dropped when the offset reaches 0; odd ranks are leaves. Tree 2
(``ncclGetDtree``) is the mirror image (rank ``r`` -> ``N-1-r``) when N is even, and tree 1 shifted
by one rank (``r`` -> ``(r+1) mod N``) when N is odd. For even N every rank is a leaf in one tree
and an inner node (or root) in the other, so the two trees' sends spread over all nodes.

Data and pipelining
-------------------
Each tree carries half of the vector, cut into ``K`` pipeline chunks: ``2K`` near-equal chunks in
all, chunk ``2k + t`` being pipeline chunk ``k`` of tree ``t`` (interleaved, so both trees carry
data even when the vector has fewer than ``2K`` elements). By default ``K`` is one chunk per
512 KiB of the vector at 4 bytes per element (int32 / float32), clamped to ``1 .. 64``:
``K = min(64, max(1, num_elements * 4 // 524288))``; ``build(..., pipeline_chunks=K)`` overrides
it.

Step rule
---------
Let the height ``h`` of a node be the length of the longest downward path from it to a leaf
(leaves: 0) and ``H`` the root's height; its depth ``d`` is its distance from the root.

* Reduce: a non-root node sends pipeline chunk ``k`` to its parent (``REDUCE``) in step ``k + h``.
  Its children have height at most ``h - 1``, so all their chunk ``k`` arrived in earlier steps.
* Broadcast: a node at depth ``d`` sends chunk ``k`` to each child (``COPY``) in step
  ``k + H + d``. The root's last child delivered chunk ``k`` in step ``k + H - 1`` at the latest,
  so the root broadcasts each chunk as soon as it is reduced and reduce and broadcast overlap.

Both trees run at the same time with the same step rule (the mirrored or shifted tree has the same
height), so a schedule whose pipeline chunks ``0 .. K'-1`` carry data has ``K' + 2H - 1`` steps
(N > 1; none for N = 1). A node receives a broadcast chunk (step ``k + H + d - 1``) only after it
sent that chunk up (step ``k + h <= k + H - d``). Within a step transfers are ordered by tree, then
pipeline chunk, then reduce before broadcast, then child rank; two children reducing into their
parent in the same step therefore add in rank order, which fixes the floating-point summation
order.

Transfers between tree neighbours that are not adjacent in the network cross several links
(``Topology.route``); ``flow`` is the tree index (0 or 1). A node can send on several links at
once and tree edges may share links, so ``contention_free`` is False. Runs on every topology
family.
"""

from ..errors import ConfigError
from ..schedule import AllReduceSchedule, Op, Transfer

NAME = "dbtree"
BYTES_PER_ELEMENT = 4
BYTES_PER_PIPELINE_CHUNK = 512 * 1024
MAX_PIPELINE_CHUNKS = 64


def default_pipeline_chunks(num_elements):
    """Default pipeline depth K: one chunk per 512 KiB at 4 bytes per element, in ``1 .. 64``."""
    return min(MAX_PIPELINE_CHUNKS,
               max(1, num_elements * BYTES_PER_ELEMENT // BYTES_PER_PIPELINE_CHUNK))


def btree_parent(nranks, rank):
    """Parent of ``rank`` in NCCL's in-order binary tree on ``nranks`` ranks (``ncclGetBtree``).

    Returns
    -------
    int
        The parent rank, or -1 for the root (rank 0).
    """
    if rank == 0:
        return -1
    bit = rank & -rank
    up = (rank ^ bit) | (bit << 1)
    return up if up < nranks else rank ^ bit


def btree_children(nranks, rank):
    """Children of ``rank`` in NCCL's in-order binary tree (``ncclGetBtree``), in the order
    (down0, down1) with absent children left out.

    Returns
    -------
    list of int
        At most two ranks.
    """
    if rank == 0:
        bit = 1
        while bit < nranks:
            bit <<= 1
        return [bit >> 1] if nranks > 1 else []
    low = (rank & -rank) >> 1
    if low == 0:
        return []
    children = [rank - low]
    while low and rank + low >= nranks:
        low >>= 1
    if low:
        children.append(rank + low)
    return children


def dtree(nranks):
    """NCCL's double binary tree (``ncclGetDtree``) as two parent lists.

    Parameters
    ----------
    nranks : int
        Number of ranks N >= 1.

    Returns
    -------
    (list of int, list of int)
        ``parents[t][r]`` is the parent of rank ``r`` in tree ``t`` (-1 at the root). Tree 0 is
        ``ncclGetBtree``'s tree; tree 1 is its mirror (``r -> N-1-r``) for even N and its shift by
        one rank (``r -> (r+1) mod N``) for odd N.
    """
    tree0 = [btree_parent(nranks, r) for r in range(nranks)]
    if nranks % 2 == 0:
        def f(r):
            return nranks - 1 - r
        def f_inv(r):
            return nranks - 1 - r
    else:
        def f(r):
            return (r + 1) % nranks
        def f_inv(r):
            return (r - 1) % nranks
    tree1 = []
    for r in range(nranks):
        p = tree0[f_inv(r)]
        tree1.append(-1 if p < 0 else f(p))
    return tree0, tree1


def _children(parents):
    kids = [[] for _ in parents]
    for r, p in enumerate(parents):
        if p >= 0:
            kids[p].append(r)
    return kids


def tree_heights(parents):
    """Height of every rank (longest downward path to a leaf; leaves 0) in a parent list."""
    kids = _children(parents)
    height = [0] * len(parents)

    def visit(r):
        height[r] = max((visit(c) + 1 for c in kids[r]), default=0)
        return height[r]

    for r, p in enumerate(parents):
        if p < 0:
            visit(r)
    return height


def tree_depths(parents):
    """Depth of every rank (distance from the root; root 0) in a parent list."""
    depth = [None] * len(parents)

    def visit(r):
        if depth[r] is None:
            depth[r] = 0 if parents[r] < 0 else visit(parents[r]) + 1
        return depth[r]

    for r in range(len(parents)):
        visit(r)
    return depth


def build(topology, num_elements, pipeline_chunks=None):
    """Pipelined double binary tree all-reduce schedule.

    Parameters
    ----------
    topology : Topology
        Any family.
    num_elements : int
        Elements per node vector (D).
    pipeline_chunks : int, optional
        Pipeline chunks K per tree (default ``default_pipeline_chunks(num_elements)``: one per
        512 KiB at 4 bytes per element, clamped to 1 .. 64).

    Returns
    -------
    AllReduceSchedule
        ``2K`` chunks (chunk ``2k + t`` is pipeline chunk ``k`` of tree ``t``); ``K' + 2H - 1``
        steps for N > 1 where ``H`` is the trees' height and ``K'`` the number of pipeline chunks
        that carry data; ``meta = {"pipeline_chunks": K, "tree_height": H}``.

    Raises
    ------
    ConfigError
        If ``pipeline_chunks`` is not a positive integer.
    """
    if pipeline_chunks is None:
        pipeline_chunks = default_pipeline_chunks(num_elements)
    if isinstance(pipeline_chunks, bool) or not isinstance(pipeline_chunks, int) \
            or pipeline_chunks < 1:
        raise ConfigError(f"pipeline_chunks must be a positive integer, not {pipeline_chunks!r}")
    k_chunks = pipeline_chunks
    n = topology.num_nodes
    node = topology.ring_order()
    trees = dtree(n)
    height = tree_heights(trees[0])[0] if n > 1 else 0
    steps = [[] for _ in range(k_chunks + 2 * height - 1)] if n > 1 else []
    for t, parents in enumerate(trees):
        h = tree_heights(parents)
        d = tree_depths(parents)
        if n > 1:
            assert max(h) == height, "both trees must have the same height"
        for k in range(k_chunks):
            chunk = 2 * k + t
            for r, p in enumerate(parents):
                if p >= 0:
                    steps[k + h[r]].append(
                        Transfer(node[r], node[p], chunk, Op.REDUCE,
                                 topology.route(node[r], node[p]), flow=t))
            for r, p in enumerate(parents):
                if p >= 0:
                    s = k + height + d[p]
                    steps[s].append(Transfer(node[p], node[r], chunk, Op.COPY,
                                             topology.route(node[p], node[r]), flow=t))
    # Order inside a step is the generation order above: tree, pipeline chunk, reduce before
    # broadcast, child rank.
    return AllReduceSchedule.build(
        NAME, topology, num_elements, 2 * k_chunks, steps, contention_free=False,
        meta={"pipeline_chunks": k_chunks, "tree_height": height})
