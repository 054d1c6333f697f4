"""Network topologies as networkx directed graphs.

Endpoint nodes (accelerators, each with one NI per link) are the integers ``0 .. N-1``; switches
are the strings ``"s0", "s1", ...``. Every directed link ``(u, v)`` carries the attributes
``bandwidth`` (GB/s, 10^9 bytes per second, one direction) and ``latency`` (cycles of the network
clock). Spec strings, one family each (``golden_model.families``, where each is described once):

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
import math
import numbers
import re
from dataclasses import dataclass, field

import networkx as nx

from .errors import ConfigError
from .families import FAMILIES as _FAMILY_DEFS, get_family, spec_forms

DEFAULT_LINK_BANDWIDTH = 16.0   # GB/s per direction
DEFAULT_LINK_LATENCY = 150      # cycles

#: Family names, in the order help texts list them.
FAMILIES = tuple(_FAMILY_DEFS)
# Upper bound on endpoint nodes: a schedule holds its 2N(N-1) transfers as objects (2.1 million
# and 480 MB on torus:32x32; a 64x64 torus would hold 33 million, about 7.5 GB), so lifting it
# needs an array IR; the bound also keeps a typo ("torus:800x800") from exhausting memory.
MAX_NODES = 1024
#: Bounds of link parameters: wider ones only overflow the cycle arithmetic downstream
#: (1e6 GB/s is a flit in well under a cycle; 10^6 cycles is a millisecond at 1 GHz).
MIN_LINK_BANDWIDTH, MAX_LINK_BANDWIDTH = 0.001, 1e6
MAX_LINK_LATENCY = 10**6


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
    #: The family's description when it is not one of ``FAMILIES`` (a graph from a file,
    #: ``golden_model.families.graph``).
    definition: object = field(default=None, repr=False)

    @property
    def _def(self):
        return self.definition or get_family(self.family, self.spec)

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
        """True when the endpoints are the routers (ring, mesh, torus: no switches)."""
        return self._def.direct

    @property
    def grid(self):
        """``(rows, cols)`` when the endpoints form a grid (ring ``(1, N)``, mesh, torus), else
        None."""
        return self._def.grid(self.dims)

    @property
    def wraps(self):
        """True when the grid's dimensions wrap around (ring, torus)."""
        return self._def.wraps

    @property
    def router_kind(self):
        """The router network that can carry this topology (``golden_model.families``):
        ``"grid"`` (mesh, torus), ``"table"`` (a router per switch: fat-tree, BiGraph, a
        switched graph file), ``"node"`` (a table router per vertex: a graph file with links
        between endpoints) or None (ring)."""
        return self._def.router

    @property
    def node0_is_peripheral(self):
        """True when, with equal link latencies, endpoint 0's eccentricity is the latency
        diameter (the family says so; ``golden_model.timing``'s latency bound)."""
        return self._def.node0_is_peripheral

    def cut_sinks(self):
        """Endpoints that represent every endpoint under the graph's automorphisms when every
        link has the same bandwidth (``golden_model.cutbound``)."""
        return self._def.cut_sinks(self)

    def natural_cuts(self):
        """``[(name, endpoints of side A)]`` the lower bound evaluates (not single nodes)."""
        n = self.num_nodes
        return [(name, a) for name, a in self._def.natural_cuts(self) if 0 < len(a) < n]

    def coords(self, node):
        """(row, col) of an endpoint of a grid (ring, mesh, torus); ``(0, node)`` otherwise."""
        grid = self.grid
        return divmod(node, grid[1] if grid else self.num_nodes)

    def neighbors(self, node):
        """Endpoint nodes one link away, in port order (north, south, west, east for mesh and
        torus: the order of the MultiTree authors' simulator); none on switched networks."""
        return list(self.graph.successors(node)) if self.is_direct else []

    def degree(self, node):
        """Number of outgoing links of an endpoint node (its injection links)."""
        return self.graph.out_degree(node)

    def link_bandwidth(self, link):
        return self.graph.edges[link]["bandwidth"]

    def link_latency(self, link):
        return self.graph.edges[link]["latency"]

    def label(self, vertex):
        """How the user names ``vertex``: a topology file's own id (``golden_model.topology_file``
        numbers the endpoints 0..N-1 and keeps the file's ids as ``label``), else the id."""
        return self.graph.nodes[vertex].get("label", vertex)

    def route(self, src, dst):
        """The directed links a message from endpoint ``src`` to ``dst`` crosses, in order: the
        family's routing (dimension order on ring, mesh and torus, the shorter way round where
        a dimension wraps, ties going east or south; d-mod-k on a fat-tree; shortest paths
        chosen by destination on a BiGraph), deterministic and destination-based.

        Returns
        -------
        tuple of (u, v)
            Empty when ``src == dst``.
        """
        key = (src, dst)
        if key not in self._routes:
            path = [src] if src == dst else self._def.route(self, src, dst)
            self._routes[key] = tuple(zip(path[:-1], path[1:]))
        return self._routes[key]

    @functools.cached_property
    def _ring(self):
        return self._def.ring_order(self)

    def ring_order(self):
        """The node order ring all-reduce uses: a Hamiltonian cycle of neighbours where one
        exists (a snake on mesh and torus), else the closest thing (a snake path on an odd x odd
        mesh or a line; id order on switched networks), see ``ring_is_hamiltonian``."""
        return list(self._ring[0])

    @property
    def ring_is_hamiltonian(self):
        """True when consecutive nodes of ``ring_order()`` (and last to first) are neighbours."""
        return self._ring[1]


def check_link_bandwidth(value, what="link bandwidth"):
    """``value`` as a float if it is a number of GB/s in ``MIN_LINK_BANDWIDTH..MAX_LINK_BANDWIDTH``.

    Raises
    ------
    ConfigError
        Otherwise (the message names ``what``, the value and the range).
    """
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
            or not MIN_LINK_BANDWIDTH <= value <= MAX_LINK_BANDWIDTH):
        raise ConfigError(f"{what} must be a number of GB/s from {MIN_LINK_BANDWIDTH:g} to "
                          f"{MAX_LINK_BANDWIDTH:g}, not {value!r}")
    return float(value)


def check_link_latency(value, what="link latency"):
    """``value`` if it is a whole number of cycles in ``0..MAX_LINK_LATENCY``.

    Raises
    ------
    ConfigError
        Otherwise (the message names ``what``, the value and the range).
    """
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or not 0 <= value <= MAX_LINK_LATENCY):
        raise ConfigError(f"{what} must be a whole number of cycles from 0 to "
                          f"{MAX_LINK_LATENCY:,}, not {value!r}")
    return int(value)


def parse_topology(spec, link_bandwidth=DEFAULT_LINK_BANDWIDTH, link_latency=DEFAULT_LINK_LATENCY):
    """Build a ``Topology`` from a spec string such as ``"torus:8x8"``.

    Parameters
    ----------
    spec : str
        One of the forms of ``golden_model.families.spec_forms()``: ``ring:N``, ``mesh:RxC``,
        ``torus:RxC``, ``fattree:KxL``, ``bigraph:MxS``; or a file ``FILE.json`` /
        ``FILE.graphml`` or a shipped ``machine:NAME`` (``golden_model.topology_file``).
    link_bandwidth : float or dict
        GB/s per link per direction, ``MIN_LINK_BANDWIDTH..MAX_LINK_BANDWIDTH`` (default 16, the
        MultiTree paper's 128-bit flits at 1 GHz); for a file, of the links that give none. A
        dict gives it per link class of the family (``Family.link_classes``: ``wrap`` on ring
        and torus, ``node`` and ``switch`` on fat-tree and BiGraph), ``default`` for the rest.
    link_latency : int or dict
        Cycles per link, ``0..MAX_LINK_LATENCY`` (default 150, the paper's board-to-board
        latency); for a file, of the links that give none; per class as ``link_bandwidth``.

    Raises
    ------
    ConfigError
        On an unknown family, a malformed or non-positive size, a size the family refuses
        (fattree with K < 2, bigraph with an odd switch count), more than ``MAX_NODES`` nodes, a
        bandwidth or latency out of its range, or a link class the family does not have.
    """
    from .topology_file import is_file_spec, read_topology  # noqa: PLC0415
    bws = _per_class(link_bandwidth, DEFAULT_LINK_BANDWIDTH, check_link_bandwidth, "bandwidth")
    lats = _per_class(link_latency, DEFAULT_LINK_LATENCY, check_link_latency, "latency")
    if is_file_spec(spec):
        for values, what in ((bws, "bandwidth"), (lats, "latency")):
            if set(values) - {"default"}:
                raise ConfigError(f"link {what} classes "
                                  f"({', '.join(sorted(set(values) - {'default'}))}) apply to "
                                  f"the families; a file gives each link its own")
        return read_topology(spec, bws["default"], lats["default"])
    name, _, sizes = str(spec).strip().lower().partition(":")
    family = get_family(name, spec)
    number = r"\s*([0-9]+)\s*"
    m = re.fullmatch("x".join([number] * family.arity), sizes)
    if not m:
        raise ConfigError(f"malformed topology {spec!r}: expected {family.form} with whole "
                          f"numbers")
    dims = tuple(int(g) for g in m.groups())
    if min(dims) < 1:
        raise ConfigError(f"topology {spec!r}: every size must be a positive integer")
    n = family.num_nodes(spec, dims)
    if n > MAX_NODES:
        raise ConfigError(f"topology {spec!r} has {n} nodes; at most {MAX_NODES} are supported")
    norm = f"{family.name}:{'x'.join(map(str, dims))}"
    for values, what in ((bws, "bandwidth"), (lats, "latency")):
        unknown = set(values) - set(family.link_classes) - {"default"}
        if unknown:
            raise ConfigError(f"link {what} class {sorted(unknown)[0]!r} is not one of "
                              f"{family.name}'s: {', '.join(family.link_classes)}")
    graph = family.graph(dims, bws["default"], lats["default"])
    if len(bws) > 1 or len(lats) > 1:
        for u, v, attrs in graph.edges(data=True):
            cls = family.link_class(dims, u, v)
            attrs["bandwidth"] = bws.get(cls, bws["default"])
            attrs["latency"] = lats.get(cls, lats["default"])
    return Topology(spec=norm, family=family.name, dims=dims, graph=graph, num_nodes=n)


def _per_class(value, default, check, what):
    """``{class: value}`` of a link parameter given as one number or per class (a dict, e.g.
    ``{"wrap": 300, "default": 150}``; classes not given take ``"default"``, itself
    ``default`` when absent), every value checked."""
    if not isinstance(value, dict):
        return {"default": check(value)}
    values = {str(k): check(v, f"link {what} of class {k!r}") for k, v in value.items()}
    values.setdefault("default", default)
    return values


__all__ = ["Topology", "parse_topology", "FAMILIES", "MAX_NODES", "DEFAULT_LINK_BANDWIDTH",
           "DEFAULT_LINK_LATENCY", "spec_forms", "check_link_bandwidth", "check_link_latency",
           "MIN_LINK_BANDWIDTH", "MAX_LINK_BANDWIDTH", "MAX_LINK_LATENCY"]
