"""Routing tables for ``RouteCompute``, computed from ``golden_model.topology`` routes.

The hardware never re-derives a route: each router gets, for every destination terminal, the
output port of the next hop and whether that hop crosses a dateline, both read off
``Topology.route`` (dimension order on mesh and torus, the shorter way round on a torus with ties
going east or south; d-mod-k shortest paths through switches on fat-tree and BiGraph). The tables
are constants in the hardware (synthesis turns them into logic).

Port numbering of a mesh or torus router: ``0 = north, 1 = south, 2 = west, 3 = east`` (the
order of ``Topology.neighbors``), then the local (injection/ejection) ports ``4 ..
4 + concentration - 1``. A router on the mesh edge keeps all four network ports; the unused ones
are tied off by ``RouterNetwork``. Terminal ``t`` is local port ``t % concentration`` of router
``t // concentration``.

Datelines (torus): the wrap-around link of each ring (between the last and the first row or
column, both directions) is its dateline. ``RouteCompute`` puts a packet into VC class 1 when its
next hop crosses the dateline, keeps the class while the packet continues in the same
dimension, and returns it to class 0 when it changes dimension (or leaves a local port). A minimal
route crosses each ring's dateline at most once, so the channel dependency graph of each class
of each ring is acyclic, and dimension order removes cycles between rings: deadlock-free.

Indirect networks (fat-tree, BiGraph): a switch's ports are its neighbours in
``Topology.graph.successors`` order (endpoints and switches alike); an endpoint attached to the
switch is reached through the port of that link. ``switch_table`` checks that the golden routes
are destination-based at every switch (they are: d-mod-k).
"""

from dataclasses import dataclass

__all__ = ["RoutingTable", "grid_tables", "switch_table", "NUM_GRID_PORTS", "PORT_NAMES",
           "walk"]

#: Network ports of a mesh or torus router (north, south, west, east).
NUM_GRID_PORTS = 4
PORT_NAMES = ("north", "south", "west", "east")
_PORT_DIM = (1, 1, 0, 0)    # dimension a port's link runs in: 0 = columns (X), 1 = rows (Y)


@dataclass(frozen=True)
class RoutingTable:
    """What one router's ``RouteCompute`` needs.

    Attributes
    ----------
    num_ports : int
        Ports of the router.
    out_port : tuple of int
        Output port for destination terminal ``d`` (index ``d``).
    dateline : tuple of bool
        The hop to destination ``d`` crosses a dateline (torus wrap-around link).
    port_dim : tuple of (int or None)
        Dimension of each port's link (``None`` for local ports and switch ports).
    vc_classes : int
        1 (every VC usable on every hop) or 2 (torus: class 0 before, class 1 after a dateline).
    """
    num_ports: int
    out_port: tuple
    dateline: tuple
    port_dim: tuple
    vc_classes: int = 1

    def __post_init__(self):
        if not self.out_port or len(self.out_port) != len(self.dateline):
            raise ValueError(f"a routing table needs one out_port and one dateline entry per "
                             f"destination, not {len(self.out_port)} and {len(self.dateline)}")
        for p in self.out_port:
            if not isinstance(p, int) or not 0 <= p < self.num_ports:
                raise ValueError(f"out_port entries must be ports 0..{self.num_ports - 1}, not {p!r}")
        if len(self.port_dim) != self.num_ports:
            raise ValueError(f"port_dim needs {self.num_ports} entries, not {len(self.port_dim)}")
        if self.vc_classes not in (1, 2):
            raise ValueError(f"vc_classes must be 1 or 2, not {self.vc_classes!r}")

    @property
    def num_dests(self):
        return len(self.out_port)

    def next_class(self, in_port, in_class, dest):
        """VC class of the next hop (the function ``RouteCompute`` implements), or None when
        every VC may be used (one class, or a local/switch output port)."""
        out = self.out_port[dest]
        if self.vc_classes == 1 or self.port_dim[out] is None:
            return None
        if self.dateline[dest]:
            return 1
        if self.port_dim[in_port] is not None and self.port_dim[in_port] == self.port_dim[out]:
            return in_class
        return 0


def _grid_direction(topology, u, v):
    """(port, crosses the dateline) of the link u -> v of a mesh or torus."""
    (ru, cu), (rv, cv) = topology.coords(u), topology.coords(v)
    if ru == rv:
        delta, ports = cv - cu, (2, 3)       # west, east
    else:
        delta, ports = rv - ru, (0, 1)       # north, south
    if abs(delta) == 1:
        return ports[delta > 0], False
    # A wrap-around link: going from the last row/column to the first is "forward".
    return ports[delta < 0], True


def grid_tables(topology, concentration=1):
    """One ``RoutingTable`` per router of a mesh or torus (index = router = golden node id).

    Parameters
    ----------
    topology : golden_model.topology.Topology
        ``mesh:RxC`` or ``torus:RxC``.
    concentration : int
        Terminals (local ports) per router.

    Raises
    ------
    ValueError
        If the topology is not a mesh or torus, or ``concentration`` is not a positive integer.
    """
    if getattr(topology, "family", None) not in ("mesh", "torus"):
        raise ValueError(f"grid_tables needs a mesh or torus topology, not "
                         f"{getattr(topology, 'spec', topology)!r}")
    if isinstance(concentration, bool) or not isinstance(concentration, int) or concentration < 1:
        raise ValueError(f"concentration must be a positive integer, not {concentration!r}")
    n = topology.num_nodes
    num_ports = NUM_GRID_PORTS + concentration
    torus = topology.family == "torus"
    port_dim = _PORT_DIM + (None,) * concentration
    tables = []
    for r in range(n):
        out_port, dateline = [], []
        for t in range(n * concentration):
            dst = t // concentration
            if dst == r:
                out_port.append(NUM_GRID_PORTS + t % concentration)
                dateline.append(False)
            else:
                u, v = topology.route(r, dst)[0]
                port, wrap = _grid_direction(topology, u, v)
                out_port.append(port)
                dateline.append(wrap and torus)
        tables.append(RoutingTable(num_ports=num_ports, out_port=tuple(out_port),
                                   dateline=tuple(dateline), port_dim=port_dim,
                                   vc_classes=2 if torus else 1))
    return tables


def grid_neighbor(topology, router, port):
    """The router that output ``port`` (0..3) of ``router`` leads to, or None (mesh edge)."""
    for v in topology.neighbors(router):
        p, _ = _grid_direction(topology, router, v)
        if p == port:
            return v
    return None


def switch_table(topology, switch):
    """The ``RoutingTable`` of a fat-tree or BiGraph switch (ports: ``successors`` order).

    Raises
    ------
    ValueError
        If ``switch`` is not a switch of ``topology`` or the golden routes are not
        destination-based at it.
    """
    g = topology.graph
    if switch not in g or g.nodes[switch].get("kind") != "switch":
        raise ValueError(f"{switch!r} is not a switch of {topology.spec!r}")
    ports = list(g.successors(switch))
    nxt = {}
    for s in topology.nodes:
        for d in topology.nodes:
            for u, v in topology.route(s, d):
                if u == switch and nxt.setdefault(d, v) != v:
                    raise ValueError(f"routes of {topology.spec!r} are not destination-based at "
                                     f"{switch!r} (destination {d}: {nxt[d]} and {v})")
    out_port = tuple(ports.index(nxt[d]) if d in nxt else 0 for d in topology.nodes)
    return RoutingTable(num_ports=len(ports), out_port=out_port,
                        dateline=(False,) * topology.num_nodes,
                        port_dim=(None,) * len(ports), vc_classes=1)


def walk(topology, tables, src, dest, concentration=1):
    """Follow the tables of a mesh/torus from terminal ``src`` to terminal ``dest``.

    Returns
    -------
    list of (router, out_port, vc_class)
        Every hop's router, output port and VC class (None: any VC), ending with the local port.
    """
    router = src // concentration
    in_port, in_class = NUM_GRID_PORTS + src % concentration, 0
    hops = []
    for _ in range(4 * topology.num_nodes):
        table = tables[router]
        port = table.out_port[dest]
        cls = table.next_class(in_port, in_class, dest)
        hops.append((router, port, cls))
        if port >= NUM_GRID_PORTS:
            return hops
        router = grid_neighbor(topology, router, port)
        in_port, in_class = port ^ 1, (cls or 0)   # north <-> south, west <-> east
    raise RuntimeError(f"routing loop from {src} to {dest}")
