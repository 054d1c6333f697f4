"""``bigraph:MxS``: S switches with M endpoints each; each of the first S/2 switches links to
every one of the last S/2 (the MultiTree paper's BiGraph 4x16).

Endpoint ``i * M + j`` hangs off switch ``"s<i>"``. Routes: d-mod-k shortest paths. Natural
cuts: the endpoints of each half of the switches (the two layers, and a mixed half: the first
half of each layer) and of each switch, against the rest.
"""

import networkx as nx

from ..errors import ConfigError
from . import Family
from .fattree import _add_link

__all__ = ["BiGraph"]


class BiGraph(Family):
    name, form, router = "bigraph", "bigraph:MxS", "table"
    node0_is_peripheral = True      # endpoint-symmetric
    endpoints_alike = True
    link_classes = ("default", "node", "switch")

    def link_class(self, dims, u, v):
        """``"node"`` for a link of an endpoint, ``"switch"`` between switches."""
        return "node" if isinstance(u, int) or isinstance(v, int) else "switch"

    def num_nodes(self, spec, dims):
        per_switch, s = dims
        if s % 2:
            raise ConfigError(f"topology {spec!r}: bigraph switch count S must be even, not {s}")
        return per_switch * s

    def graph(self, dims, bandwidth, latency):
        m, s = dims
        g = nx.DiGraph()
        g.add_nodes_from(range(m * s), kind="node")
        g.add_nodes_from((f"s{i}" for i in range(s)), kind="switch")
        for i in range(s):
            for j in range(m):
                _add_link(g, i * m + j, f"s{i}", bandwidth, latency)
        for i in range(s // 2):
            for j in range(s // 2, s):
                _add_link(g, f"s{i}", f"s{j}", bandwidth, latency)
        return g

    def natural_cuts(self, topo):
        m, s = topo.dims

        def nodes_of(switches):
            return [sw * m + j for sw in switches for j in range(m)]

        half = s // 2
        cuts = [(f"switch layers s0..s{half - 1} | s{half}..s{s - 1}", nodes_of(range(half)))]
        if half >= 2:
            q = half // 2
            mixed = list(range(q)) + list(range(half, half + q))
            cuts.append((f"switches {mixed}", nodes_of(mixed)))
        if m > 1:
            cuts += [(f"switch s{sw}", nodes_of([sw])) for sw in range(s)]
        return cuts
