"""Topologies: link counts by closed form, routing, ring orders, bad specs."""

import itertools

import networkx as nx
import pytest

from golden_model.errors import ConfigError
from golden_model.topology import parse_topology


def grid_links(r, c, wrap):
    """Directed links of an R x C grid: per dimension of size s, s-1 links per line as a mesh,
    s with wrap when s > 2."""
    def per_line(s):
        return s if wrap and s > 2 else s - 1
    return 2 * (r * per_line(c) + c * per_line(r))


@pytest.mark.parametrize("spec,nodes,links", [
    ("ring:1", 1, 0), ("ring:2", 2, 2), ("ring:7", 7, 14),
    ("mesh:3x3", 9, grid_links(3, 3, False)), ("mesh:1x5", 5, grid_links(1, 5, False)),
    ("torus:4x4", 16, 64), ("torus:8x8", 64, 256), ("torus:2x3", 6, grid_links(2, 3, True)),
    # k-ary n-tree: K^L node links plus (L-1) * K^L switch links, both directions
    ("fattree:4x2", 16, 2 * (16 + 16)), ("fattree:2x3", 8, 2 * (8 + 2 * 8)),
    ("fattree:8x2", 64, 2 * (64 + 64)),
    # bigraph M x S: M*S node links plus (S/2)^2 switch links, both directions
    ("bigraph:4x16", 64, 2 * (64 + 64)), ("bigraph:4x4", 16, 2 * (16 + 4)),
])
def test_sizes(spec, nodes, links):
    t = parse_topology(spec)
    assert t.num_nodes == nodes
    assert len(t.links) == links
    assert all(t.graph.nodes[n]["kind"] == "node" for n in t.nodes)
    assert all(isinstance(s, str) and t.graph.nodes[s]["kind"] == "switch" for s in t.switches)
    for u, v in t.links:
        assert t.link_bandwidth((u, v)) == 16.0 and t.link_latency((u, v)) == 150
    if nodes > 1:
        assert nx.is_strongly_connected(t.graph)


def test_link_options():
    t = parse_topology("torus:2x2", link_bandwidth=32, link_latency=3)
    assert {t.link_bandwidth(l) for l in t.links} == {32.0}
    assert {t.link_latency(l) for l in t.links} == {3}


def torus_distance(t, a, b):
    (r1, c1), (r2, c2) = t.coords(a), t.coords(b)
    rows, cols = t.dims
    dr, dc = abs(r1 - r2), abs(c1 - c2)
    return min(dr, rows - dr) + min(dc, cols - dc)


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:5x3", "mesh:3x4", "ring:6"])
def test_dimension_order_routes(spec):
    t = parse_topology(spec)
    for a, b in itertools.product(t.nodes, repeat=2):
        route = t.route(a, b)
        expect = (nx.shortest_path_length(t.graph, a, b))
        assert len(route) == expect
        if spec.startswith("torus"):
            assert expect == torus_distance(t, a, b)
        # columns first: once the route changes row, it never changes column again
        moves = [t.coords(v)[0] != t.coords(u)[0] for u, v in route]
        assert moves == sorted(moves)


@pytest.mark.parametrize("spec", ["fattree:4x2", "fattree:2x3", "bigraph:4x4"])
def test_switched_routes_are_shortest(spec):
    t = parse_topology(spec)
    for a, b in itertools.permutations(t.nodes, 2):
        route = t.route(a, b)
        assert len(route) == nx.shortest_path_length(t.graph, a, b)
        assert all(isinstance(v, str) for _, v in route[:-1])   # only switches in between


@pytest.mark.parametrize("spec", ["fattree:2x3", "fattree:3x3", "fattree:4x3", "fattree:8x2"])
def test_fattree_routes_are_d_mod_k(spec):
    """Climbing from level l a route takes up-port d_l, digit l of the destination in base K
    (Zahavi's d-mod-k), so the next hop at every switch depends only on the destination."""
    t = parse_topology(spec)
    k, levels = t.dims
    per_level = k ** (levels - 1)
    level_of = {f"s{i}": i // per_level for i in range(levels * per_level)}
    next_hop = {}
    for a, b in itertools.permutations(t.nodes, 2):
        route = t.route(a, b)
        assert len(route) == nx.shortest_path_length(t.graph, a, b)
        for u, v in route[1:-1]:
            if level_of[v] > level_of[u]:           # up-port d_l: digit l of the switch word
                w = int(v[1:]) % per_level
                assert w // k ** level_of[u] % k == b // k ** level_of[u] % k
            assert next_hop.setdefault((u, b), v) == v


def has_hamiltonian_cycle(g, n):
    """Brute force over permutations (small n only)."""
    if n <= 2:
        return True
    for perm in itertools.permutations(range(1, n)):
        cyc = (0, *perm)
        if all(g.has_edge(cyc[i], cyc[(i + 1) % n]) for i in range(n)):
            return True
    return False


@pytest.mark.parametrize("spec", ["mesh:2x3", "mesh:3x3", "mesh:1x4", "mesh:2x2", "torus:3x3",
                                  "torus:2x3", "mesh:3x2", "ring:5", "torus:1x4"])
def test_ring_order(spec):
    t = parse_topology(spec)
    order = t.ring_order()
    assert sorted(order) == list(t.nodes)
    n = t.num_nodes
    neighbours = all(t.graph.has_edge(order[i], order[(i + 1) % n]) for i in range(n))
    assert t.ring_is_hamiltonian == neighbours
    assert t.ring_is_hamiltonian == has_hamiltonian_cycle(t.graph, n)
    if not t.ring_is_hamiltonian:
        # A snake path: every hop but the closing one is a single link.
        assert all(t.graph.has_edge(order[i], order[i + 1]) for i in range(n - 1))


def test_larger_snakes_are_hamiltonian():
    for spec in ["torus:8x8", "torus:5x7", "mesh:6x5", "mesh:4x4", "torus:16x16"]:
        t = parse_topology(spec)
        order = t.ring_order()
        assert t.ring_is_hamiltonian and sorted(order) == list(t.nodes)
        assert all(t.graph.has_edge(order[i], order[(i + 1) % len(order)]) for i in range(len(order)))
    assert not parse_topology("mesh:5x7").ring_is_hamiltonian   # odd x odd: bipartite, odd count


@pytest.mark.parametrize("spec,match", [
    ("donut:4", "unknown topology"), ("torus:4", "torus:RxC"), ("ring:3x3", "ring:N"),
    ("mesh:0x3", "positive"), ("fattree:1x3", "at least 2"), ("bigraph:4x3", "even"),
    ("torus:100x100", "at most"), ("torus:-1x4", "malformed"), ("mesh:axb", "mesh:RxC"), ("", "unknown"),
])
def test_bad_specs(spec, match):
    with pytest.raises(ConfigError, match=match):
        parse_topology(spec)


def test_bad_link_values():
    with pytest.raises(ConfigError, match="bandwidth"):
        parse_topology("ring:4", link_bandwidth=0)
    with pytest.raises(ConfigError, match="latency"):
        parse_topology("ring:4", link_latency=-1)
