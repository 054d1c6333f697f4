"""Topology families: one description per family, the only place that knows its shape.

A :class:`Family` says how its spec string reads (``torus:RxC``), builds its graph, routes,
orders a ring, lists the natural cuts of the lower bound, and names the router network that can
carry it (``router``: ``"grid"`` for dimension-order routers with datelines on wrap links,
``"table"`` for routers whose tables come from the golden routes, ``"node"`` for such a
router per vertex of a graph with links between endpoints, ``None`` for none).
``golden_model.topology.parse_topology`` looks families up in :data:`FAMILIES`; everything else
asks the ``Topology`` (``is_direct``, ``grid``, ``router_kind``, ``natural_cuts``, ...).

Adding a family: a module in this package with a ``Family`` subclass, and its instance in
:data:`FAMILIES`. ``natural_cuts`` and ``graph`` are abstract: a family without them cannot be
instantiated, so a new family cannot silently get a weaker lower bound.
"""

import abc

import networkx as nx

from ..errors import ConfigError

__all__ = ["Family", "FAMILIES", "spec_forms", "get_family"]


class Family(abc.ABC):
    """What one topology family is.

    Class attributes
    ----------------
    name : str
        The spec's prefix (``"torus"``).
    form : str
        The spec form shown in messages and help (``"torus:RxC"``).
    arity : int
        How many numbers the spec has (1: ``ring:N``; 2: ``mesh:RxC``, ``fattree:KxL``, ...).
    direct : bool
        True when the endpoints are the routers (ring, mesh, torus: no switches).
    router : {"grid", "table", "node", None}
        The router network that can carry it (``hdl.router``): ``"grid"`` (a mesh-like grid of
        rows and columns: one router per node, dimension order with dateline classes on wrap
        links), ``"table"`` (a switched network where every endpoint has exactly one link, to a
        switch: one router per switch, routing tables read off :meth:`route`, which must be
        destination-based), ``"node"`` (a graph with links between endpoints: a router per
        vertex, its ports the vertex's links and an endpoint's NI ports, tables read off
        :meth:`route` likewise), ``None`` (no router network).
    """

    name: str
    form: str
    arity: int = 2
    direct: bool = False
    router: str | None = None

    def num_nodes(self, spec, dims):
        """Endpoint count of ``dims`` (already positive integers).

        Raises
        ------
        ConfigError
            If ``dims`` do not describe a network of this family (the message names ``spec``).
        """
        n = 1
        for d in dims:
            n *= d
        return n

    @abc.abstractmethod
    def graph(self, dims, bandwidth, latency):
        """The ``networkx.DiGraph``: endpoints ``0..N-1`` (``kind="node"``), switches
        ``"s0", ...`` (``kind="switch"``), every directed link with ``bandwidth`` (GB/s) and
        ``latency`` (cycles). A node's successors are its ports, in port order."""

    def grid(self, dims):
        """``(rows, cols)`` when the endpoints form a grid (node id = row * cols + col), else
        None."""
        return None

    #: True when the grid's dimensions wrap around (ring, torus).
    wraps = False
    #: True when, with equal links, an automorphism of the graph maps any endpoint to any other
    #: (ring, torus: translations; fat-tree and BiGraph: permutations of switches and ports).
    endpoints_alike = False

    #: The classes of links whose bandwidth and latency can be set apart
    #: (``parse_topology``'s per-class values, e.g. ``wrap=300,default=150``).
    link_classes = ("default",)

    def link_class(self, dims, u, v):
        """The class of link ``u -> v`` (one of :attr:`link_classes`)."""
        return "default"

    def cut_sinks(self, topo):
        """Endpoints that represent every endpoint under the graph's automorphisms (with equal
        links): the cut bound (``golden_model.cutbound``) searches the cuts that leave out one
        of these only. Default: endpoint 0 where :attr:`endpoints_alike`, else all."""
        return [0] if self.endpoints_alike else list(topo.nodes)
    #: True when, with equal link latencies, endpoint 0 is as far from some endpoint as any two
    #: endpoints are (the latency diameter is node 0's eccentricity: one shortest-path search
    #: instead of all pairs). False (the safe default) makes the bound search from every node.
    node0_is_peripheral = False

    def route(self, topo, src, dst):
        """The nodes a message from endpoint ``src`` to ``dst != src`` visits, both ends included.

        Default (switched networks; the fat-tree has its own closed-form d-mod-k): one of the
        shortest paths, chosen by destination (index ``dst mod count`` among the shortest paths
        sorted by their text), so the choice is deterministic, destination-based and spreads
        load.
        """
        paths = sorted(nx.all_shortest_paths(topo.graph, src, dst), key=str)
        return paths[dst % len(paths)]

    def ring_order(self, topo):
        """``(order, hamiltonian)``: the node order of ring all-reduce and whether consecutive
        nodes (and last to first) are neighbours. Default: by id; every hop goes through
        switches."""
        return list(range(topo.num_nodes)), False

    @abc.abstractmethod
    def natural_cuts(self, topo):
        """``[(name, endpoints of side A)]``: the cuts the lower bound evaluates
        (``golden_model.timing.lower_bound``); single nodes need not be listed."""


def _families():
    from .fattree import FatTree  # noqa: PLC0415 - the modules import this one for Family
    from .bigraph import BiGraph  # noqa: PLC0415
    from .grid import Mesh, Ring, Torus  # noqa: PLC0415
    return {f.name: f for f in (Ring(), Mesh(), Torus(), FatTree(), BiGraph())}


#: name -> Family, in the order help texts list them.
FAMILIES = _families()


def spec_forms():
    """``"ring:N, mesh:RxC, ..."``: every family's spec form, for messages and help."""
    return ", ".join(f.form for f in FAMILIES.values())


def get_family(name, spec=None):
    """The ``Family`` called ``name``.

    Raises
    ------
    ConfigError
        If there is none (the message names ``spec`` and every form allowed).
    """
    family = FAMILIES.get(name)
    if family is None:
        raise ConfigError(f"unknown topology {spec if spec is not None else name!r}: expected "
                          f"one of {spec_forms()}, a FILE.json or FILE.graphml, or "
                          f"machine:NAME")
    return family
