"""The cut bound with bandwidths (ForestColl, Zhao et al. 2024, section 4): on any network of
endpoints and switches, an all-gather in which every endpoint contributes M/N bytes takes at
least

    T_AG = (M / N) * max over vertex sets S with 0 < |S ∩ E| < N  of  |S ∩ E| / B+(S)

where E is the set of endpoints and B+(S) the bandwidth of the links leaving S (bytes per unit
time): the |S ∩ E| shards inside S must all leave it. Reduce-scatter is the same bound on the
reversed links (every shard's contributions from inside S must leave S); an all-reduce as
reduce-scatter then all-gather takes at least T_RS + T_AG.

The maximum ratio is found as ForestColl finds it, by minimum cuts (``scipy.sparse.csgraph``'s
maximum flow), here with Dinkelbach's
method for the fractional objective: for a ratio ``lam``, the set S that excludes endpoint c and
minimises ``lam * B+(S) - |S ∩ E|`` is a minimum s-c cut of the graph with a source s joined to
every endpoint by a link of capacity 1 and every link's capacity scaled by ``lam``. The largest
ratio of the minimisers is the next ``lam``; when no set beats ``lam`` the bound is ``lam``, the
exact ratio of a set S (returned with it).
"""

from __future__ import annotations

import functools
from fractions import Fraction

import networkx as nx

__all__ = ["CutBound", "cut_ratio", "cut_bound"]

#: Dinkelbach's iterations converge superlinearly; this many means a bug, not a hard graph.
_MAX_ITERATIONS = 200


class CutBound(tuple):
    """``(ratio, side)``: the largest |S ∩ E| / B+(S) (endpoints per GB/s, as a ``Fraction`` of
    the bandwidths' exact binary values) and its set S (a frozenset of vertices)."""
    __slots__ = ()

    def __new__(cls, ratio, side):
        return super().__new__(cls, (ratio, side))

    @property
    def ratio(self):
        return self[0]

    @property
    def side(self):
        return self[1]


def _out_bandwidth(graph, side):
    return sum((Fraction(bw) for u, v, bw in graph.edges(data="bandwidth")
                if u in side and v not in side), Fraction(0))


def _ratio(graph, ends, side):
    b = _out_bandwidth(graph, side)
    return Fraction(len(side & ends)) / b if b else None


def cut_ratio(graph, endpoints, sinks=None) -> CutBound:
    """The largest |S ∩ E| / B+(S) over vertex sets S holding some but not all ``endpoints``.

    Parameters
    ----------
    graph : networkx.DiGraph
        Every directed link with ``bandwidth`` (GB/s, positive).
    endpoints : iterable
        The endpoints E (at least two).
    sinks : iterable, optional
        The endpoints a set must leave out to be searched (default: each endpoint in turn).
        One is enough where the graph's automorphisms map every endpoint to every other (a
        torus or ring of equal links): the best set leaving out one maps to the best leaving
        out any other.

    Returns
    -------
    CutBound
        Ratio in endpoints per GB/s. A set with no link out while holding endpoints (the
        network is not strongly connected) has an infinite ratio: ``ValueError``.

    Raises
    ------
    ValueError
        If fewer than two endpoints are given, or some endpoints cannot reach the others.
    """
    ends = frozenset(endpoints)
    if len(ends) < 2:
        raise ValueError("the cut bound needs at least two endpoints")
    # Start from the complement of the endpoint with the least bandwidth in (the per-node
    # figure): B+(V - {c}) is c's incoming bandwidth.
    into = {c: Fraction(0) for c in ends}
    for _, v, bw in graph.in_edges(ends, data="bandwidth"):
        into[v] += Fraction(bw)
    c = min(sorted(ends, key=str), key=lambda e: into[e])
    if not into[c]:
        raise ValueError(f"endpoint {c} has no link into it")
    best = CutBound(Fraction(len(ends) - 1) / into[c], frozenset(graph.nodes) - {c})
    sinks = sorted(ends if sinks is None else frozenset(sinks), key=str)
    for _ in range(_MAX_ITERATIONS):
        found = _improve(graph, ends, sinks, best.ratio)
        if found is None or found.ratio <= best.ratio:
            return best
        best = found
    raise RuntimeError("the cut bound's iteration did not converge")  # pragma: no cover


#: Capacities are scaled to integers for the max-flow (scipy's needs them): the largest flow,
#: N endpoints' worth, stays within int32. Sets whose ratios differ by less than about
#: N / _SCALE relative may then be confused; the ratio returned is still a set's exact ratio.
_SCALE = 1 << 30


def _improve(graph, ends, sinks, lam):
    """The set of largest ratio among the minimisers of ``lam * B+(S) - |S ∩ E|`` (one per
    excluded endpoint), if one beats ``lam``, else None."""
    import numpy as np  # noqa: PLC0415
    from scipy.sparse import csr_array  # noqa: PLC0415
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow  # noqa: PLC0415
    names = list(graph.nodes)
    index = {v: i for i, v in enumerate(names)}
    source = len(names)
    n = len(ends)
    unit = _SCALE // (n + 1)
    rows, cols, caps = [], [], []
    for u, v, bw in graph.edges(data="bandwidth"):
        rows.append(index[u])
        cols.append(index[v])
        caps.append(min(_SCALE, int(lam * Fraction(bw) * unit)))
    for e in ends:
        rows.append(source)
        cols.append(index[e])
        caps.append(unit)
    size = source + 1
    cap = csr_array((np.array(caps, dtype=np.int32), (rows, cols)), shape=(size, size))
    cap.sum_duplicates()
    best = None
    for c in sinks:
        result = maximum_flow(cap, source, index[c])
        if result.flow_value >= n * unit:
            continue
        residual = (cap - result.flow).tocsr()
        residual.data = np.where(residual.data > 0, 1, 0).astype(np.int32)
        residual.eliminate_zeros()
        reach = breadth_first_order(residual, source, directed=True,
                                    return_predecessors=False)
        side = frozenset(names[i] for i in reach if i != source)
        if not side & ends:
            continue
        r = _ratio(graph, ends, side)
        if r is None:
            raise ValueError(f"endpoints {sorted(side & ends, key=str)[:4]} cannot reach "
                             f"endpoint {c}")
        if r > lam and (best is None or r > best.ratio):
            best = CutBound(r, side)
    return best


@functools.lru_cache(maxsize=64)
def _cached(signature, endpoints, sinks):
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(signature, weight="bandwidth")
    forward = cut_ratio(graph, endpoints, sinks)
    backward = cut_ratio(graph.reverse(copy=True), endpoints, sinks)
    return forward, backward


def cut_bound(topology):
    """``(all-gather, reduce-scatter)`` :class:`CutBound` of ``topology`` (links as given and
    reversed), cached by the graph's links and bandwidths. An all-reduce of D bytes per node
    made of a reduce-scatter and an all-gather takes at least ``D / N * (ag.ratio +
    rs.ratio)`` ns (GB/s = bytes per ns). Where every link has the same bandwidth only the
    family's representatives (``Topology.cut_sinks``) are searched as sinks."""
    edges = [(str(u), str(v), float(bw)) for u, v, bw in topology.graph.edges(data="bandwidth")]
    ends = frozenset(str(e) for e in topology.nodes)
    equal = len({bw for _, _, bw in edges}) <= 1
    sinks = frozenset(str(e) for e in topology.cut_sinks()) if equal else None
    return _cached(tuple(sorted(edges)), ends, sinks)
