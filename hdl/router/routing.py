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

Indirect networks (fat-tree, BiGraph, a graph file with switches): a switch's ports are its
neighbours in ``Topology.graph.successors`` order (endpoints and switches alike); an endpoint
attached to the switch is reached through the port of that link; ``count`` parallel links to
another switch are that many ports (``switch_ports``), and a terminal takes the one its number
gives modulo the count, which spreads destinations over them. An endpoint with links to
several switches (a graph file's) is a terminal per link, ``node * c + q`` for its q-th switch
(``c`` the most links of an endpoint): terminal ``node * c + q`` is reached through that switch,
over fewest-hop switch paths toward it chosen by terminal. With one link per endpoint,
``switch_table`` checks that the golden routes are destination-based at every switch (they are:
d-mod-k) and the tables follow them. ``switch_tables`` gives the tables of
all switches of a network, padded to one port count (the largest switch degree; the extra ports
are never routed to), and checks that every destination is reached from every endpoint along
its golden route.

Deadlock (indirect networks): the golden d-mod-k routes of a fat-tree go up, then down, so their
channel dependency graph is acyclic and one VC class suffices. On BiGraph a packet may transit a
switch of the other half (s0 -> s2 -> s1), and the transits chain into cycles (s0 -> s2 -> s1 ->
s3 -> s0). ``switch_tables`` builds the dependency graph of the switch-to-switch links from the
tables; when it has a cycle it uses two VC classes: a switch-to-switch hop *into the
destination's switch* takes class 1 (its ``dateline`` bit), every other switch-to-switch hop
class 0, and hops to an endpoint any VC. Class-0 links then only wait on class-0 links further
from the destination or on class-1 links, and class-1 links only on endpoint links: acyclic
(checked again on the result).
"""

from dataclasses import dataclass

__all__ = ["RoutingTable", "grid_tables", "switch_table", "switch_tables", "NUM_GRID_PORTS",
           "PORT_NAMES", "walk", "dependency_cycle", "endpoint_switches", "terminals_per_endpoint",
           "switch_ports", "node_ports", "node_routers", "node_tables"]

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
    if getattr(topology, "router_kind", None) != "grid":
        raise ValueError(f"grid_tables needs a mesh or torus topology, not "
                         f"{getattr(topology, 'spec', topology)!r}")
    if isinstance(concentration, bool) or not isinstance(concentration, int) or concentration < 1:
        raise ValueError(f"concentration must be a positive integer, not {concentration!r}")
    n = topology.num_nodes
    num_ports = NUM_GRID_PORTS + concentration
    torus = topology.wraps
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


def endpoint_switches(topology, node):
    """The switches endpoint ``node`` of a switched network has links to, in ``successors``
    order: its ports, terminal ``node * c + q`` for the q-th (``c`` =
    :func:`terminals_per_endpoint`).

    Raises
    ------
    ValueError
        If a link of ``node`` goes to another endpoint, or has no link back.
    """
    g = topology.graph
    succ = list(g.successors(node))
    if not succ or any(g.nodes[v].get("kind") != "switch" or not g.has_edge(v, node)
                       for v in succ):
        raise ValueError(f"endpoint {node} of {topology.spec!r} needs links to switches only, "
                         f"each with a link back, not {succ!r}")
    return succ


def switch_ports(topology, switch):
    """The ports of ``switch``'s router, in order: ``(neighbour, k)`` for each neighbour in
    ``graph.successors`` order and each of the ``count`` parallel links to it (``k`` =
    0..count-1; one port to an endpoint). Parallel link ``k`` from switch A to B arrives at B's
    port ``(A, k)``."""
    g = topology.graph
    return [(v, k) for v in g.successors(switch)
            for k in range(g.edges[switch, v].get("count", 1)
                           if g.nodes[v].get("kind") == "switch" else 1)]


def terminals_per_endpoint(topology):
    """Router terminals per endpoint of a switched network: its most links to switches (1 on a
    fat-tree or BiGraph; an endpoint with fewer leaves the rest of its terminals unused)."""
    return max(len(endpoint_switches(topology, v)) for v in topology.nodes)


def _toward_switch(topology, target, tie):
    """{switch: next switch} on fewest-hop paths through switches toward ``target``: found
    breadth first over the reversed switch-to-switch links, each switch taking, of its
    successors one hop nearer, the one at index ``tie mod count`` (as the graph family's routes
    choose by destination, ``golden_model.families.graph``)."""
    import networkx as nx  # noqa: PLC0415
    g = topology.graph
    h = g.subgraph(topology.switches)
    dist = nx.single_source_shortest_path_length(h.reverse(copy=False), target)
    hops = {}
    for v, d in dist.items():
        if v != target:
            nearer = sorted((w for w in h.successors(v) if dist.get(w) == d - 1), key=str)
            hops[v] = nearer[tie % len(nearer)]
    return hops


def _next_hops(topology, c):
    """{switch: {destination terminal: next hop}}. One terminal per endpoint (``c`` = 1): read
    off every golden route (destination-based). Several: terminal ``d * c + q`` is reached
    through endpoint ``d``'s q-th switch S, over fewest-hop switch paths toward S
    (:func:`_toward_switch`, ties by terminal), then S's link to ``d``."""
    nxt = {sw: {} for sw in topology.switches}
    if c == 1:
        for s in topology.nodes:
            for d in topology.nodes:
                for u, v in topology.route(s, d):
                    if u in nxt and nxt[u].setdefault(d, v) != v:
                        raise ValueError(f"routes of {topology.spec!r} are not destination-based "
                                         f"at {u!r} (destination {d}: {nxt[u][d]} and {v})")
        return nxt
    for d in topology.nodes:
        for q, last in enumerate(endpoint_switches(topology, d)):
            t = d * c + q
            nxt[last][t] = d
            for sw, v in _toward_switch(topology, last, t).items():
                nxt[sw][t] = v
    return nxt


def _check_indirect(topology):
    if getattr(topology, "router_kind", None) != "table":
        raise ValueError(f"switch tables need a switched topology (fat-tree, BiGraph), not "
                         f"{getattr(topology, 'spec', topology)!r}")


def _terminal_switch(topology, t, c):
    """The switch whose link delivers to terminal ``t`` (``c`` terminals per endpoint), or
    None for an unused terminal."""
    ends = endpoint_switches(topology, t // c)
    return ends[t % c] if t % c < len(ends) else None


def _switch_table(topology, switch, hops, num_ports, vc_classes, c):
    g = topology.graph
    ports = switch_ports(topology, switch)
    out_port, dateline = [], []
    for t in range(topology.num_nodes * c):
        v = hops.get(t)
        # A destination no route leads through this switch (or an unused terminal): never
        # looked up. Of parallel links to the next switch, terminal t takes number t mod count.
        parallel = sum(1 for w, _ in ports if w == v)
        out_port.append(ports.index((v, t % parallel)) if v is not None else 0)
        last = (v is not None and g.nodes[v].get("kind") == "switch"
                and _terminal_switch(topology, t, c) == v)
        dateline.append(vc_classes == 2 and last)
    if vc_classes == 2:
        port_dim = tuple(0 if g.nodes[v].get("kind") == "switch" else None for v, _ in ports)
    else:
        port_dim = (None,) * len(ports)
    port_dim += (None,) * (num_ports - len(ports))
    return RoutingTable(num_ports=num_ports, out_port=tuple(out_port), dateline=tuple(dateline),
                        port_dim=port_dim, vc_classes=vc_classes)


def switch_table(topology, switch, num_ports=None):
    """The ``RoutingTable`` of a fat-tree or BiGraph switch (ports: ``successors`` order), one
    VC class.

    Parameters
    ----------
    num_ports : int, optional
        Pad the table to this many ports (default: the switch's degree).

    Raises
    ------
    ValueError
        If ``switch`` is not a switch of ``topology``, ``num_ports`` is smaller than its degree,
        or the golden routes are not destination-based at it.
    """
    g = topology.graph
    if switch not in g or g.nodes[switch].get("kind") != "switch":
        raise ValueError(f"{switch!r} is not a switch of {topology.spec!r}")
    degree = len(switch_ports(topology, switch))
    if num_ports is None:
        num_ports = degree
    if isinstance(num_ports, bool) or not isinstance(num_ports, int) or num_ports < degree:
        raise ValueError(f"num_ports must be an integer >= {degree} (the degree of {switch!r}), "
                         f"not {num_ports!r}")
    c = terminals_per_endpoint(topology)
    return _switch_table(topology, switch, _next_hops(topology, c)[switch], num_ports, 1, c)


def switch_tables(topology, *, vc_classes=None, num_ports=None):
    """The routing tables of every switch of a switched network (fat-tree, BiGraph, a graph
    file's; index = position in ``topology.switches``), all with the same number of ports, with
    one entry per terminal (:func:`terminals_per_endpoint` per endpoint).

    Parameters
    ----------
    topology : golden_model.topology.Topology
    vc_classes : {None, 1, 2}
        ``None``: one class when the channel dependency graph of the routes is acyclic (fat-tree),
        else two (BiGraph, see the module docstring). ``1`` forces one class (an ablation that
        can deadlock on BiGraph), ``2`` forces two.
    num_ports : int, optional
        Ports of every table (default: the largest switch degree).

    Raises
    ------
    ValueError
        If the topology has no switch routers, an endpoint links to another endpoint, a route
        is not destination-based, a terminal is not reached from some terminal (with one
        terminal per endpoint: along its golden route), or the routes stay cyclic with the
        chosen classes.
    """
    _check_indirect(topology)
    if vc_classes not in (None, 1, 2):
        raise ValueError(f"vc_classes must be None, 1 or 2, not {vc_classes!r}")
    g = topology.graph
    switches = topology.switches
    widest = max(len(switch_ports(topology, sw)) for sw in switches)
    if num_ports is None:
        num_ports = widest
    if isinstance(num_ports, bool) or not isinstance(num_ports, int) or num_ports < widest:
        raise ValueError(f"num_ports must be an integer >= {widest} (the largest switch degree), "
                         f"not {num_ports!r}")
    c = terminals_per_endpoint(topology)
    hops = _next_hops(topology, c)

    def build(classes):
        return [_switch_table(topology, sw, hops[sw], num_ports, classes, c) for sw in switches]

    tables = build(2 if vc_classes == 2 else 1)
    cycle = dependency_cycle(topology, tables)
    if cycle and vc_classes is None:
        tables = build(2)
        cycle = dependency_cycle(topology, tables)
        if cycle:
            raise ValueError(f"the routes of {topology.spec!r} have a channel dependency cycle "
                             f"even with two VC classes: {_as_in_file(topology, cycle)}")
    named = dict(zip(switches, tables))
    for s, d in _terminal_pairs(topology, c):
        try:
            hops = _switch_walk(topology, named, s, d, c)
        except RuntimeError as exc:
            raise ValueError(f"the tables of {topology.spec!r} do not reach terminal {d} "
                             f"from {s}: {exc}") from None
        links = tuple((sw, switch_ports(topology, sw)[port][0]) for sw, port, _ in hops)
        if c == 1 and s != d and links != topology.route(s, d)[1:]:
            raise ValueError(f"the tables of {topology.spec!r} route {s} -> {d} over "
                             f"{links}, not the golden {topology.route(s, d)}")
    return tables


def _as_in_file(topology, value):
    """``value`` (vertices, or tuples and lists of them) with every vertex by the id its graph
    file gave it (the node's ``label``, ``golden_model.topology_file``), for messages."""
    if isinstance(value, (tuple, list)):
        return type(value)(_as_in_file(topology, x) for x in value)
    if value in topology.graph:
        return topology.label(value)
    return value


def _terminal_pairs(topology, c):
    """(source, destination) terminals a packet can go between: both have a link (``c`` per
    endpoint, fewer where an endpoint has fewer switches) and the source's switch reaches the
    destination's over switch-to-switch links (a route never passes through an endpoint, so a
    schedule only ever sends between such terminals)."""
    import networkx as nx  # noqa: PLC0415
    h = topology.graph.subgraph(topology.switches)
    reach = {sw: nx.descendants(h, sw) | {sw} for sw in topology.switches}
    ends = {t: _terminal_switch(topology, t, c) for t in range(topology.num_nodes * c)}
    used = [t for t, sw in ends.items() if sw is not None]
    return [(a, b) for a in used for b in used if ends[b] in reach[ends[a]]]


def _walk_links(topology, tables, src, dest, c):
    """Switch-to-switch (or endpoint-router-to-router) (link, class) pairs of the walk from
    terminal ``src`` to ``dest``."""
    node = getattr(topology, "router_kind", None) == "node"
    hops = (_node_walk if node else _switch_walk)(topology, tables, src, dest, c)
    out = []
    for sw, port, cls in hops[:-1]:          # the last hop goes to the endpoint
        v, k = (node_ports if node else switch_ports)(topology, sw)[port]
        out.append(((sw, v) if k == 0 else (sw, v, k), cls or 0))
    return out


def dependency_cycle(topology, tables, concentration=None):
    """A cycle of the channel dependency graph of a switched network's switch-to-switch links,
    or of the router-to-router links of a graph's endpoint routers (``node_tables``, with their
    ``concentration``), channel = (link, VC class), under ``tables``, as a list of channels,
    or ``None`` if it is acyclic (the routes cannot deadlock). Links to and from endpoints never
    close a cycle (endpoints sink every packet)."""
    deps = {}
    if getattr(topology, "router_kind", None) == "node":
        c = concentration or 1
        pairs = [(s, d) for s in range(topology.num_nodes * c)
                 for d in range(topology.num_nodes * c)]
    else:
        c = terminals_per_endpoint(topology)
        pairs = _terminal_pairs(topology, c)
    for s, d in pairs:
        chans = _walk_links(topology, tables, s, d, c)
        for a, b in zip(chans, chans[1:]):
            deps.setdefault(a, set()).add(b)
            deps.setdefault(b, set())
    state, stack = {}, []

    def visit(c):          # iterative DFS would be longer; depth <= number of links
        state[c] = 1
        stack.append(c)
        for n in sorted(deps[c], key=str):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        state[c] = 2
        stack.pop()
        return None

    for c in sorted(deps, key=str):
        if c not in state:
            found = visit(c)
            if found:
                return found
    return None


def walk(topology, tables, src, dest, concentration=1):
    """Follow the routing tables from terminal ``src`` to terminal ``dest``.

    Parameters
    ----------
    tables
        Mesh/torus: ``grid_tables`` (index = router). Fat-tree/BiGraph: ``switch_tables``
        (index = position in ``topology.switches``) or a dict by switch name.

    Returns
    -------
    list of (router, out_port, vc_class)
        Every hop's router (node id on mesh/torus, switch name otherwise), output port and VC
        class (None: any VC), ending with the port to the destination terminal.

    Raises
    ------
    RuntimeError
        On a routing loop or a packet delivered to the wrong terminal.
    """
    if not topology.is_direct:
        return _switch_walk(topology, tables, src, dest, concentration)
    if topology.router_kind == "node":
        return _node_walk(topology, tables, src, dest, concentration)
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


def _switch_walk(topology, tables, src, dest, c):
    g = topology.graph
    if not isinstance(tables, dict):
        tables = dict(zip(topology.switches, tables))
    sw = _terminal_switch(topology, src, c)
    in_port, in_class = switch_ports(topology, sw).index((src // c, 0)), 0
    hops = []
    for _ in range(len(tables) + 1):
        table = tables[sw]
        ports = switch_ports(topology, sw)
        port = table.out_port[dest]
        if port >= len(ports):
            raise RuntimeError(f"{sw!r} routes destination {dest} to unused port {port}")
        cls = table.next_class(in_port, in_class, dest)
        hops.append((sw, port, cls))
        v, k = ports[port]
        if g.nodes[v].get("kind") != "switch":
            if v != dest // c or sw != _terminal_switch(topology, dest, c):
                raise RuntimeError(f"a packet from terminal {src} to {dest} is delivered to "
                                   f"endpoint {v} from {sw!r}")
            return hops
        in_port, in_class = switch_ports(topology, v).index((sw, k)), (cls or 0)
        sw = v
    raise RuntimeError(f"routing loop from {src} to {dest}")


# --- a router per vertex (a graph with links between endpoints) ----------------------------------

def node_ports(topology, vertex):
    """The network ports of ``vertex``'s router on a graph with links between endpoints
    (``router_kind == "node"``), in order: ``(neighbour, k)`` for each neighbour in
    ``graph.successors`` order and each of the ``count`` parallel links to it. Parallel link
    ``k`` from A to B arrives at B's port ``(A, k)``. An endpoint's router has its NI's local
    ports after the widest router's network ports (:func:`node_tables`)."""
    g = topology.graph
    return [(v, k) for v in g.successors(vertex) for k in range(g.edges[vertex, v].get("count", 1))]


def node_routers(topology):
    """The vertices that have a router on a graph with links between endpoints: every
    endpoint (``0..N-1``), then every switch (``topology.switches`` order); the index of a
    vertex here is its table's in :func:`node_tables`."""
    return list(topology.nodes) + list(topology.switches)


def _check_node(topology):
    if getattr(topology, "router_kind", None) != "node":
        raise ValueError(f"node tables need a graph with links between endpoints, not "
                         f"{getattr(topology, 'spec', topology)!r}")


def _node_width(topology):
    """Network ports of every router: the most links of a vertex."""
    return max(len(node_ports(topology, v)) for v in node_routers(topology))


def node_tables(topology, concentration, *, vc_classes=None):
    """One ``RoutingTable`` per router of a graph with links between endpoints (a router per
    vertex, :func:`node_routers` order): ports ``0 .. D-1`` the network ports
    (:func:`node_ports`, D the widest router's; a router with fewer leaves the rest unused),
    then ``concentration`` local ports, terminal ``node * concentration + q`` on local port
    ``D + q`` of its endpoint's router (a switch's local ports are unused). The next hop toward
    a destination is its golden route's (``Topology.route``, destination-based), a parallel
    link chosen by the terminal number modulo the count.

    VC classes as on switched networks (module docstring): one when the channel dependency
    graph of the router-to-router links is acyclic; else two, the hop into the destination's
    router taking class 1; a cycle that remains with two classes is refused.

    Raises
    ------
    ValueError
        If the topology has no such routers, ``concentration`` is not 1..8, a route is not
        destination-based or a terminal is not reached, or the routes stay cyclic (the message
        gives the cycle in the file's ids).
    """
    _check_node(topology)
    if isinstance(concentration, bool) or not isinstance(concentration, int) \
            or not 1 <= concentration <= 8:
        raise ValueError(f"concentration must be an integer in 1..8, not {concentration!r}")
    if vc_classes not in (None, 1, 2):
        raise ValueError(f"vc_classes must be None, 1 or 2, not {vc_classes!r}")
    c, width = concentration, _node_width(topology)
    routers = node_routers(topology)
    nxt = {u: {} for u in routers}
    for s in topology.nodes:
        for d in topology.nodes:
            for u, v in topology.route(s, d):
                if nxt[u].setdefault(d, v) != v:
                    raise ValueError(f"routes of {topology.spec!r} are not destination-based "
                                     f"at {_as_in_file(topology, u)!r} (destination {d}: "
                                     f"{_as_in_file(topology, nxt[u][d])!r} and "
                                     f"{_as_in_file(topology, v)!r})")

    def build(classes):
        tables = []
        for u in routers:
            ports = node_ports(topology, u)
            out_port, dateline = [], []
            for t in range(topology.num_nodes * c):
                d = t // c
                if d == u:
                    out_port.append(width + t % c)
                    dateline.append(False)
                    continue
                v = nxt[u].get(d)
                if v is None:           # no route to d leads through this router
                    out_port.append(0)
                    dateline.append(False)
                    continue
                parallel = sum(1 for w, _ in ports if w == v)
                out_port.append(ports.index((v, t % parallel)))
                dateline.append(classes == 2 and v == d)
            port_dim = ((0 if classes == 2 else None),) * width + (None,) * c
            tables.append(RoutingTable(num_ports=width + c, out_port=tuple(out_port),
                                       dateline=tuple(dateline), port_dim=port_dim,
                                       vc_classes=classes))
        return tables

    tables = build(2 if vc_classes == 2 else 1)
    cycle = dependency_cycle(topology, tables, c)
    if cycle and vc_classes is None:
        tables = build(2)
        cycle = dependency_cycle(topology, tables, c)
        if cycle:
            raise ValueError(f"the routes of {topology.spec!r} have a channel dependency cycle "
                             f"even with two VC classes: {_as_in_file(topology, cycle)}")
    for s in range(topology.num_nodes * c):
        for d in range(topology.num_nodes * c):
            try:
                _node_walk(topology, tables, s, d, c)
            except RuntimeError as exc:
                raise ValueError(f"the tables of {topology.spec!r} do not reach terminal {d} "
                                 f"from {s}: {exc}") from None
    return tables


def _node_walk(topology, tables, src, dest, c):
    """Hops ``(router, out_port, vc_class)`` from terminal ``src`` to ``dest`` over the routers
    of :func:`node_routers` (``tables`` in that order), ending with the local port to
    ``dest``."""
    width = _node_width(topology)
    index = {v: i for i, v in enumerate(node_routers(topology))}
    router, in_port, in_class = src // c, width + src % c, 0
    hops = []
    for _ in range(len(index) + 1):
        table = tables[index[router]]
        port = table.out_port[dest]
        cls = table.next_class(in_port, in_class, dest)
        hops.append((router, port, cls))
        if port >= width:
            if router != dest // c or port != width + dest % c:
                raise RuntimeError(f"a packet from terminal {src} to {dest} leaves router "
                                   f"{router!r} by local port {port}")
            return hops
        ports = node_ports(topology, router)
        if port >= len(ports):
            raise RuntimeError(f"router {router!r} routes destination {dest} to unused port "
                               f"{port}")
        v, k = ports[port]
        in_port, in_class = node_ports(topology, v).index((router, k)), (cls or 0)
        router = v
    raise RuntimeError(f"routing loop from {src} to {dest}")
