"""Network topologies as networkx directed graphs.

Endpoint nodes (accelerators, each with one NI per link) are the integers ``0 .. N-1``; switches
are the strings ``"s0", "s1", ...``. Every directed link ``(u, v)`` carries the attributes
``bandwidth`` (GB/s, 10^9 bytes per second, one direction) and ``latency`` (cycles of the network
clock). Spec strings:

========================  =====================================================================
``ring:N``                N nodes in a bidirectional ring.
``mesh:RxC``              R rows by C columns; node id = row * C + col.
``torus:RxC``             as mesh plus wrap-around links in every dimension longer than 2 (a
                          dimension of 2 has one link per direction: the wrap would join the same
                          two nodes).
``fattree:KxL``           K-ary L-level fat-tree (k-ary n-tree, Petrini & Vanneschi 1997):
                          K^L nodes, L levels of K^(L-1) switches.
``bigraph:MxS``           S switches with M nodes each; each of the first S/2 switches links to
                          every one of the last S/2 (MultiTree paper, BiGraph 4x16).
========================  =====================================================================

Defaults are the MultiTree paper's network (references.md): 16 GB/s per link per direction
(128-bit flits at 1 GHz) and 150 cycles of link latency.
"""

import functools
import re
from dataclasses import dataclass, field

import networkx as nx

from .errors import ConfigError

DEFAULT_LINK_BANDWIDTH = 16.0   # GB/s per direction
DEFAULT_LINK_LATENCY = 150      # cycles

FAMILIES = ("ring", "mesh", "torus", "fattree", "bigraph")
_SPEC_FORMS = "ring:N, mesh:RxC, torus:RxC, fattree:KxL, bigraph:MxS"
# Upper bound on endpoint nodes: schedules grow as N^2 transfers, and a 1024-node torus already
# takes minutes; the bound keeps a typo ("torus:800x800") from exhausting memory.
MAX_NODES = 1024


@dataclass(eq=False)
class Topology:
    """A network: its graph, endpoint nodes and routing.

    Attributes
    ----------
    spec : str
        The normalised spec string, e.g. ``"torus:4x4"``.
    family : str
        One of ``FAMILIES``.
    dims : tuple of int
        The numbers in the spec (``(N,)``, ``(R, C)``, ``(K, L)`` or ``(M, S)``).
    graph : networkx.DiGraph
        Nodes have attribute ``kind`` (``"node"`` or ``"switch"``); links have ``bandwidth``
        (GB/s) and ``latency`` (cycles).
    num_nodes : int
        Number of endpoint nodes N.
    """

    spec: str
    family: str
    dims: tuple
    graph: nx.DiGraph
    num_nodes: int
    _routes: dict = field(default_factory=dict, repr=False)

    @property
    def nodes(self):
        """Endpoint node ids ``range(N)``."""
        return range(self.num_nodes)

    @property
    def switches(self):
        return [n for n, kind in self.graph.nodes(data="kind") if kind == "switch"]

    @property
    def links(self):
        """All directed links ``(u, v)``, switch links included."""
        return list(self.graph.edges)

    @property
    def is_direct(self):
        """True for ring, mesh and torus (nodes are routers; no switches)."""
        return self.family in ("ring", "mesh", "torus")

    def coords(self, node):
        """(row, col) of an endpoint of a mesh or torus (ring: (0, node))."""
        cols = self.dims[-1] if self.family in ("mesh", "torus") else self.num_nodes
        return divmod(node, cols)

    def neighbors(self, node):
        """Endpoint nodes one link away, in the order north, south, west, east for mesh and
        torus (the order of the MultiTree authors' simulator), by id otherwise."""
        return list(self.graph.successors(node)) if self.is_direct else []

    def degree(self, node):
        """Number of outgoing links of an endpoint node (its injection links)."""
        return self.graph.out_degree(node)

    def link_bandwidth(self, link):
        return self.graph.edges[link]["bandwidth"]

    def link_latency(self, link):
        return self.graph.edges[link]["latency"]

    def route(self, src, dst):
        """The directed links a message from endpoint ``src`` to ``dst`` crosses, in order.

        Dimension-order (columns first, then rows; on a torus the shorter way round, ties going
        east or south) on ring, mesh and torus; on fattree and bigraph one of the shortest paths
        through switches, chosen by destination (d-mod-k: path index ``dst mod count`` among the
        shortest paths in sorted order), so the choice is deterministic and spreads load.

        Returns
        -------
        tuple of (u, v)
            Empty when ``src == dst``.
        """
        key = (src, dst)
        if key not in self._routes:
            if src == dst:
                path = [src]
            elif self.is_direct:
                path = self._dimension_order_path(src, dst)
            else:
                paths = sorted(nx.all_shortest_paths(self.graph, src, dst), key=str)
                path = paths[dst % len(paths)]
            self._routes[key] = tuple(zip(path[:-1], path[1:]))
        return self._routes[key]

    def _dimension_order_path(self, src, dst):
        rows, cols = (1, self.num_nodes) if self.family == "ring" else self.dims
        wrap = self.family in ("ring", "torus")
        (r, c), (dr, dc) = self.coords(src), self.coords(dst)
        path = [src]
        for size, axis in ((cols, 1), (rows, 0)):
            cur, goal = (c, dc) if axis == 1 else (r, dr)
            delta = goal - cur
            if wrap and size > 2:
                fwd = delta % size
                delta = fwd if fwd <= size - fwd else fwd - size
            step = 1 if delta > 0 else -1
            for _ in range(abs(delta)):
                cur = (cur + step) % size
                if axis == 1:
                    c = cur
                else:
                    r = cur
                path.append(r * cols + c)
        return path

    @functools.cached_property
    def _ring(self):
        return _ring_order(self)

    def ring_order(self):
        """The node order ring all-reduce uses: a Hamiltonian cycle of neighbours where one
        exists (a snake on mesh and torus), else the closest thing, see ``ring_is_hamiltonian``.

        On an R x C mesh a Hamiltonian cycle exists iff R*C is even and both R, C >= 2 (a grid
        graph is bipartite, so an odd node count cannot close a cycle). Where none exists (an odd
        x odd mesh, a 1 x C line with C > 2) the order is a snake Hamiltonian *path*: consecutive
        nodes are neighbours but the last and first are not, and ring all-reduce runs the
        bidirectional line algorithm over that path instead (``algorithms.ring.line_steps``: the
        same 2(N-1) steps, every transfer between neighbours). On fattree and bigraph the order
        is by node id and every ring hop goes through switches.
        """
        return list(self._ring[0])

    @property
    def ring_is_hamiltonian(self):
        """True when consecutive nodes of ``ring_order()`` (and last to first) are neighbours."""
        return self._ring[1]


def _ring_order(topo):
    n = topo.num_nodes
    if topo.family == "ring" or n <= 2:
        return list(range(n)), topo.is_direct
    if not topo.is_direct:
        return list(range(n)), False
    rows, cols = topo.dims
    torus = topo.family == "torus"
    if rows == 1 or cols == 1:
        # A line: a cycle only on a torus with the wrap link (length > 2).
        return list(range(n)), torus
    if rows % 2 == 0 or (torus and cols > 2):
        return _snake_cycle(rows, cols, lambda r, c: r * cols + c), True
    if cols % 2 == 0 or (torus and rows > 2):
        return _snake_cycle(cols, rows, lambda c, r: r * cols + c), True
    # Odd x odd mesh: a boustrophedon path; the closing hop is multi-hop.
    order = []
    for r in range(rows):
        cs = range(cols) if r % 2 == 0 else range(cols - 1, -1, -1)
        order.extend(r * cols + c for c in cs)
    return order, False


def _snake_cycle(rows, cols, node):
    """Row 0 east over all columns, then rows 1.. snake over columns 1..cols-1, then back north
    along column 0. Closes when rows is even (the last row ends at column 1), or on a torus whose
    column wrap link joins column cols-1 to column 0."""
    order = [node(0, c) for c in range(cols)]
    for r in range(1, rows):
        cs = range(cols - 1, 0, -1) if r % 2 == 1 else range(1, cols)
        order.extend(node(r, c) for c in cs)
    order.extend(node(r, 0) for r in range(rows - 1, 0, -1))
    return order


def _add_link(g, u, v, bandwidth, latency):
    g.add_edge(u, v, bandwidth=float(bandwidth), latency=int(latency))
    g.add_edge(v, u, bandwidth=float(bandwidth), latency=int(latency))


def _grid(rows, cols, wrap, bw, lat):
    g = nx.DiGraph()
    g.add_nodes_from(range(rows * cols), kind="node")
    # Successor order is insertion order: north, south, west, east per node.
    for r in range(rows):
        for c in range(cols):
            u = r * cols + c
            for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                rr, cc = r + dr, c + dc
                size = rows if dr else cols
                if wrap and size > 2:
                    rr, cc = rr % rows, cc % cols
                if 0 <= rr < rows and 0 <= cc < cols and (rr, cc) != (r, c):
                    g.add_edge(u, rr * cols + cc, bandwidth=float(bw), latency=int(lat))
    return g


def _fattree(k, levels, bw, lat):
    """k-ary n-tree: switch (l, w), w an (n-1)-digit base-k word, links up to (l+1, w') where w'
    differs from w at most in digit l; node p hangs off leaf switch p // k."""
    g = nx.DiGraph()
    n = k ** levels
    per_level = k ** (levels - 1)
    g.add_nodes_from(range(n), kind="node")
    name = {(l, w): f"s{l * per_level + w}" for l in range(levels) for w in range(per_level)}
    g.add_nodes_from(name.values(), kind="switch")
    for p in range(n):
        _add_link(g, p, name[(0, p // k)], bw, lat)
    for l in range(levels - 1):
        for w in range(per_level):
            digit = (w // k ** l) % k
            for d in range(k):
                w2 = w + (d - digit) * k ** l
                _add_link(g, name[(l, w)], name[(l + 1, w2)], bw, lat)
    return g


def _bigraph(m, s, bw, lat):
    g = nx.DiGraph()
    g.add_nodes_from(range(m * s), kind="node")
    g.add_nodes_from((f"s{i}" for i in range(s)), kind="switch")
    for i in range(s):
        for j in range(m):
            _add_link(g, i * m + j, f"s{i}", bw, lat)
    for i in range(s // 2):
        for j in range(s // 2, s):
            _add_link(g, f"s{i}", f"s{j}", bw, lat)
    return g


def parse_topology(spec, link_bandwidth=DEFAULT_LINK_BANDWIDTH, link_latency=DEFAULT_LINK_LATENCY):
    """Build a ``Topology`` from a spec string such as ``"torus:8x8"``.

    Parameters
    ----------
    spec : str
        One of ``ring:N``, ``mesh:RxC``, ``torus:RxC``, ``fattree:KxL``, ``bigraph:MxS``.
    link_bandwidth : float
        GB/s per link per direction (default 16, the MultiTree paper's 128-bit flits at 1 GHz).
    link_latency : int
        Cycles per link (default 150, the paper's board-to-board latency).

    Raises
    ------
    ConfigError
        On an unknown family, a malformed or non-positive size, fattree with K < 2 or L < 1,
        bigraph with an odd or zero switch count, more than ``MAX_NODES`` nodes, a non-positive
        bandwidth or a negative latency.
    """
    if not isinstance(link_bandwidth, (int, float)) or not link_bandwidth > 0:
        raise ConfigError(f"link bandwidth must be a positive number of GB/s, not {link_bandwidth!r}")
    if not isinstance(link_latency, int) or link_latency < 0:
        raise ConfigError(f"link latency must be a whole number of cycles >= 0, not {link_latency!r}")
    family, _, sizes = str(spec).strip().lower().partition(":")
    if family not in FAMILIES:
        raise ConfigError(f"unknown topology {spec!r}: expected one of {_SPEC_FORMS}")
    two = family != "ring"
    m = re.fullmatch(r"\s*([0-9]+)\s*x\s*([0-9]+)\s*" if two else r"\s*([0-9]+)\s*", sizes)
    if not m:
        form = next(f for f in _SPEC_FORMS.split(", ") if f.startswith(family + ":"))
        raise ConfigError(f"malformed topology {spec!r}: expected {form} with whole numbers")
    dims = tuple(int(g) for g in m.groups())
    if min(dims) < 1:
        raise ConfigError(f"topology {spec!r}: every size must be a positive integer")
    bw, lat = link_bandwidth, link_latency
    if family == "ring":
        n = dims[0]
        _check_size(spec, n)
        g = _grid(1, n, True, bw, lat)
    elif family in ("mesh", "torus"):
        n = dims[0] * dims[1]
        _check_size(spec, n)
        g = _grid(dims[0], dims[1], family == "torus", bw, lat)
    elif family == "fattree":
        k, levels = dims
        if k < 2:
            raise ConfigError(f"topology {spec!r}: fattree arity K must be at least 2, not {k}")
        n = k ** levels if levels < 64 else MAX_NODES + 1
        _check_size(spec, n)
        g = _fattree(k, levels, bw, lat)
    else:
        per_switch, s = dims
        if s % 2:
            raise ConfigError(f"topology {spec!r}: bigraph switch count S must be even, not {s}")
        n = per_switch * s
        _check_size(spec, n)
        g = _bigraph(per_switch, s, bw, lat)
    norm = f"{family}:{'x'.join(map(str, dims))}"
    return Topology(spec=norm, family=family, dims=dims, graph=g, num_nodes=n)


def _check_size(spec, n):
    if n > MAX_NODES:
        raise ConfigError(f"topology {spec!r} has {n} nodes; at most {MAX_NODES} are supported")
