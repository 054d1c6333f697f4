"""``fattree:KxL``: the K-ary L-level fat-tree (k-ary n-tree, Petrini & Vanneschi 1997).

K^L endpoints and L levels of K^(L-1) switches. Switch (l, w), w an (L-1)-digit base-K word, is
``"s<l * K^(L-1) + w>"`` and links up to (l+1, w') where w' differs from w at most in digit l;
endpoint p hangs off leaf switch p // K. Routes: d-mod-k (``FatTree.route``). Natural cuts: each
top-level group (the endpoints sharing the top digit) against the rest.
"""

import networkx as nx

from ..errors import ConfigError
from . import Family

__all__ = ["FatTree"]


def _switch(level, word, per_level):
    """The node name of switch (``level``, ``word``) (module docstring)."""
    return f"s{level * per_level + word}"


def _add_link(g, u, v, bandwidth, latency):
    for a, b in ((u, v), (v, u)):
        g.add_edge(a, b, bandwidth=float(bandwidth), latency=int(latency))


class FatTree(Family):
    name, form, router = "fattree", "fattree:KxL", "table"
    node0_is_peripheral = True      # endpoint-symmetric
    endpoints_alike = True
    link_classes = ("default", "node", "switch")

    def link_class(self, dims, u, v):
        """``"node"`` for a link of an endpoint, ``"switch"`` between switches."""
        return "node" if isinstance(u, int) or isinstance(v, int) else "switch"

    def num_nodes(self, spec, dims):
        k, levels = dims
        if k < 2:
            raise ConfigError(f"topology {spec!r}: fattree arity K must be at least 2, not {k}")
        # K^L overflows nothing in Python, but a huge L would take long to compute: cap it.
        return k ** levels if levels < 64 else 1 << 64

    def graph(self, dims, bandwidth, latency):
        k, levels = dims
        g = nx.DiGraph()
        n = k ** levels
        per_level = k ** (levels - 1)
        g.add_nodes_from(range(n), kind="node")
        name = {(l, w): _switch(l, w, per_level) for l in range(levels) for w in range(per_level)}
        g.add_nodes_from(name.values(), kind="switch")
        for p in range(n):
            _add_link(g, p, name[(0, p // k)], bandwidth, latency)
        for l in range(levels - 1):
            for w in range(per_level):
                digit = (w // k ** l) % k
                for d in range(k):
                    _add_link(g, name[(l, w)], name[(l + 1, w + (d - digit) * k ** l)],
                              bandwidth, latency)
        return g

    def route(self, topo, src, dst):
        """d-mod-k routing (Zahavi et al., "Optimized InfiniBand fat-tree routing for shift
        all-to-all communication patterns", 2010; Petrini & Vanneschi's up*/down* paths):
        up from ``src``'s leaf switch to the lowest level ``m`` whose switches reach ``dst``
        (``m`` = 1 + the highest digit where the two leaf switches' words differ), the climb from
        level ``l`` taking up-port ``d_l`` (digit ``l`` of ``dst`` in base K, so destinations
        that share a leaf switch spread over the top switches), then the one way down. A
        shortest path; the next hop at every switch depends only on ``dst``, so the routers'
        destination tables (``hdl.router.routing``) hold it. Closed form: routing all N^2 pairs
        of fattree:4x4 takes well under a second (the generic rule enumerated every shortest
        path).
        """
        k, levels = topo.dims
        per_level = k ** (levels - 1)
        w_src, w_dst = src // k, dst // k

        def digit(w, i):
            return w // k ** i % k

        m = max((i + 1 for i in range(levels - 1) if digit(w_src, i) != digit(w_dst, i)),
                default=0)
        w = w_src
        path = [src, _switch(0, w, per_level)]
        for level in range(m):
            w += (digit(dst, level) - digit(w, level)) * k ** level
            path.append(_switch(level + 1, w, per_level))
        for level in reversed(range(m)):
            w += (digit(w_dst, level) - digit(w, level)) * k ** level
            path.append(_switch(level, w, per_level))
        path.append(dst)
        return path

    def natural_cuts(self, topo):
        k, levels = topo.dims
        group = k ** (levels - 1)
        if group <= 1:
            return []
        return [(f"top group {top}", list(range(top * group, (top + 1) * group)))
                for top in range(k)]
