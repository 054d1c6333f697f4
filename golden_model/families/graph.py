"""Networks read from a file (``golden_model.topology_file``): any graph of endpoints and
switches, its links' bandwidths and latencies as the file gives them.

One :class:`GraphFamily` describes one loaded graph (it is not in ``FAMILIES``: there is no spec
form to parse). Routes are the default of switched networks, one of the fewest-hop paths chosen
by destination; the ring visits the endpoints in id order; the natural cuts are the sides of the
reduce-scatter plus all-gather cut bound (``golden_model.cutbound``), which the cut bound with
maximum flow then evaluates for any all-reduce. The NIs sit on table routers where every
endpoint has one link, to a switch (as on a fat-tree); other graphs have no router network yet.
"""

from . import Family

__all__ = ["GraphFamily"]


class GraphFamily(Family):
    """The family of one graph read from a file.

    Parameters
    ----------
    graph : networkx.DiGraph
        As ``Family.graph`` returns it (endpoints ``0..N-1``, switches ``"s0", ...``).
    """

    name, form, arity = "graph", "FILE.json or FILE.graphml", 0

    def __init__(self, graph):
        self._graph = graph
        self._toward = {}           # destination -> {vertex: next hop} (``route``)
        ends = [v for v, kind in graph.nodes(data="kind") if kind == "node"]
        self.direct = len(ends) == graph.number_of_nodes()
        one_switch_link = all(
            graph.out_degree(v) == 1 and graph.nodes[next(iter(graph.successors(v)))]["kind"]
            == "switch" and graph.edges[v, next(iter(graph.successors(v)))].get("count", 1) == 1
            for v in ends)
        self.router = "table" if not self.direct and one_switch_link else None

    def num_nodes(self, spec, dims):     # pragma: no cover - not parsed from a spec
        raise NotImplementedError

    def graph(self, dims, bandwidth, latency):
        return self._graph

    def route(self, topo, src, dst):
        """Destination-based fewest-hop routes (a table router decides by destination alone):
        toward each destination a tree of next hops, found breadth first from it over the
        reversed links, each vertex taking, of its successors one hop nearer, the one at
        index ``dst mod count`` (ids in natural order), which spreads destinations over
        equal paths."""
        nxt = self._next_hops(dst)
        path = [src]
        while path[-1] != dst:
            path.append(nxt[path[-1]])
        return path

    def _next_hops(self, dst):
        cache = self._toward
        if dst not in cache:
            import networkx as nx  # noqa: PLC0415
            dist = nx.single_source_shortest_path_length(self._graph.reverse(copy=False), dst)
            hops = {}
            for v, d in dist.items():
                if v == dst:
                    continue
                nearer = sorted((w for w in self._graph.successors(v) if dist.get(w) == d - 1),
                                key=lambda w: (isinstance(w, str), str(w) if isinstance(w, str)
                                               else w))
                hops[v] = nearer[dst % len(nearer)]
            cache[dst] = hops
        return cache[dst]

    def ring_order(self, topo):
        """A depth-first walk from endpoint 0 over the whole graph (neighbours in id order),
        endpoints in the order it reaches them: consecutive endpoints are near each other
        (neighbours where the walk allows, else behind the same switches). Hamiltonian when
        the graph has no switches and every consecutive pair, and last to first, is a link."""
        import networkx as nx  # noqa: PLC0415
        undirected = self._graph.to_undirected(as_view=True)
        order = [v for v in nx.dfs_preorder_nodes(undirected, 0, sort_neighbors=lambda vs:
                                                  sorted(vs, key=str))
                 if isinstance(v, int)]
        cycle = order + order[:1]
        hamiltonian = self.direct and len(order) > 2 and all(
            self._graph.has_edge(a, b) for a, b in zip(cycle, cycle[1:]))
        return order, hamiltonian

    def natural_cuts(self, topo):
        from ..cutbound import cut_bound  # noqa: PLC0415
        cuts = []
        for name, found in zip(("all-gather", "reduce-scatter"), cut_bound(topo)):
            side = sorted(int(v) for v in found.side if str(v).isdigit())
            if 0 < len(side) < topo.num_nodes and side not in [c[1] for c in cuts]:
                cuts.append((f"the {name} cut bound's side", side))
        return cuts
