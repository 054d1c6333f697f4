"""``fattree:KxL``: the K-ary L-level fat-tree (k-ary n-tree, Petrini & Vanneschi 1997).

K^L endpoints and L levels of K^(L-1) switches. Switch (l, w), w an (L-1)-digit base-K word, is
``"s<l * K^(L-1) + w>"`` and links up to (l+1, w') where w' differs from w at most in digit l;
endpoint p hangs off leaf switch p // K. Routes: d-mod-k shortest paths (up, then down). Natural
cuts: each top-level group (the endpoints sharing the top digit) against the rest.
"""

import networkx as nx

from ..errors import ConfigError
from . import Family

__all__ = ["FatTree"]


def _add_link(g, u, v, bandwidth, latency):
    for a, b in ((u, v), (v, u)):
        g.add_edge(a, b, bandwidth=float(bandwidth), latency=int(latency))


class FatTree(Family):
    name, form, router = "fattree", "fattree:KxL", "table"
    node0_is_peripheral = True      # endpoint-symmetric

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
        name = {(l, w): f"s{l * per_level + w}" for l in range(levels) for w in range(per_level)}
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

    def natural_cuts(self, topo):
        k, levels = topo.dims
        group = k ** (levels - 1)
        if group <= 1:
            return []
        return [(f"top group {top}", list(range(top * group, (top + 1) * group)))
                for top in range(k)]
