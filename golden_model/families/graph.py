"""Networks read from a file (``golden_model.topology_file``): any graph of endpoints and
switches, its links' bandwidths and latencies as the file gives them.

One :class:`GraphFamily` describes one loaded graph (it is not in ``FAMILIES``: there is no spec
form to parse). Routes are the default of switched networks, one of the fewest-hop paths chosen
by destination; the ring visits the endpoints in id order; the natural cuts are the sides of the
reduce-scatter plus all-gather cut bound (``golden_model.cutbound``), which the cut bound with
maximum flow then evaluates for any all-reduce. The NIs sit on table routers, one per switch,
where every endpoint's links all go to switches (one NI port per link, as a fat-tree's one),
and otherwise (links between endpoints, with or without switches) on a table router per
vertex (``"node"``: an endpoint's router has its links and its NI's ports, a switch's its
links), routes then passing through endpoints where they are shorter.
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
        switch_links = all(graph.nodes[w]["kind"] == "switch"
                           for v in ends for w in graph.successors(v))
        if not self.direct and switch_links and self._connected_through_switches(ends):
            self.router = "table"
        else:
            self.router = "node" if len(ends) > 1 else None

    def _connected_through_switches(self, ends):
        """Whether every endpoint reaches every other over switches alone (table routers carry
        nothing through an endpoint)."""
        import networkx as nx  # noqa: PLC0415
        g = self._graph
        switches = [v for v, kind in g.nodes(data="kind") if kind == "switch"]
        for dst in ends:
            h = g.subgraph(switches + [dst]).reverse(copy=False)
            reach = nx.descendants(h, dst)
            if any(v != dst and not reach.intersection(g.successors(v)) for v in ends):
                return False
        return True

    def num_nodes(self, spec, dims):     # pragma: no cover - not parsed from a spec
        raise NotImplementedError

    def graph(self, dims, bandwidth, latency):
        return self._graph

    def route(self, topo, src, dst):
        """Destination-based fewest-hop routes (a table router decides by destination alone):
        toward each destination a tree of next hops, found breadth first from it over the
        reversed links, each vertex taking, of its successors one hop nearer, the one at
        index ``dst mod count`` (ids in natural order), which spreads destinations over
        equal paths. Where every endpoint links to switches only (table routers), no route passes
        through another endpoint (an NI forwards nothing): the search crosses switches only."""
        nxt = self._next_hops(dst)
        path = [src]
        while path[-1] != dst:
            path.append(nxt[path[-1]])
        return path

    def _next_hops(self, dst):
        cache = self._toward
        if dst not in cache:
            import networkx as nx  # noqa: PLC0415
            g = self._graph
            switched = self.router == "table"       # endpoints link to switches only
            through = g.subgraph([v for v, kind in g.nodes(data="kind") if kind == "switch"]
                                 + [dst]) if switched else g
            dist = dict(nx.single_source_shortest_path_length(through.reverse(copy=False), dst))
            if switched:                # endpoints only start routes
                for v in g.nodes:
                    near = [dist[w] for w in g.successors(v) if w in through and w in dist]
                    if v not in through and near:
                        dist[v] = min(near) + 1
            hops = {}
            for v, d in dist.items():
                if v == dst:
                    continue
                nearer = sorted((w for w in g.successors(v) if dist.get(w) == d - 1
                                 and (not switched or w in through)),
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
