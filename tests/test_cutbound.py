"""The reduce-scatter plus all-gather cut bound (``golden_model.cutbound``, ForestColl): against
every vertex set enumerated on small random networks, against the per-node closed form on the
families, and on two groups joined by a slow link, where the cut between them binds."""

import itertools
from fractions import Fraction

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden_model.cutbound import cut_ratio
from golden_model.timing import lower_bound
from golden_model.topology import parse_topology


def brute_force(graph, ends):
    """max |S ∩ E| / B+(S) over every vertex set S with 0 < |S ∩ E| < |E|."""
    vertices = list(graph.nodes)
    best = Fraction(0)
    for k in range(1, len(vertices)):
        for side in itertools.combinations(vertices, k):
            side = set(side)
            inside = len(side & ends)
            if not 0 < inside < len(ends):
                continue
            out = sum(Fraction(bw) for u, v, bw in graph.edges(data="bandwidth")
                      if u in side and v not in side)
            best = max(best, Fraction(inside) / out)
    return best


@st.composite
def networks(draw):
    """A strongly connected digraph of 2..6 endpoints and 0..3 switches, bandwidths 1..8 GB/s
    (halves included), links in both directions with independent bandwidths."""
    n = draw(st.integers(2, 6))
    s = draw(st.integers(0, 3))
    vertices = list(range(n)) + [f"s{i}" for i in range(s)]
    g = nx.DiGraph()
    g.add_nodes_from(vertices)
    bandwidth = st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0])
    order = draw(st.permutations(vertices))
    for a, b in zip(order, order[1:] + order[:1]):          # a cycle: strongly connected
        g.add_edge(a, b, bandwidth=draw(bandwidth))
        g.add_edge(b, a, bandwidth=draw(bandwidth))
    for a, b in draw(st.lists(st.tuples(st.sampled_from(vertices), st.sampled_from(vertices)),
                              max_size=8)):
        if a != b:
            g.add_edge(a, b, bandwidth=draw(bandwidth))
    return g, frozenset(range(n))


@settings(max_examples=150, deadline=None)
@given(networks())
def test_equals_every_set_enumerated(net):
    graph, ends = net
    found = cut_ratio(graph, ends)
    assert found.ratio == brute_force(graph, ends)
    side = found.side
    out = sum(Fraction(bw) for u, v, bw in graph.edges(data="bandwidth")
              if u in side and v not in side)
    assert Fraction(len(side & ends)) / out == found.ratio


@pytest.mark.parametrize("spec", ["torus:4x4", "mesh:4x4", "mesh:3x5", "ring:7", "torus:2x3",
                                  "fattree:4x2", "bigraph:2x4", "mesh:1x5"])
def test_families_give_the_per_node_figure(spec):
    """With equal links the complement of the node with the least bandwidth binds:
    2(N-1)/N * D over that node's bandwidth (the searched sinks are the family's
    representatives, the enumeration above checks the search itself)."""
    topo = parse_topology(spec)
    n, d = topo.num_nodes, 1 << 20
    g = topo.graph
    least = min(min(sum(bw for *_, bw in g.out_edges(v, data="bandwidth")),
                    sum(bw for *_, bw in g.in_edges(v, data="bandwidth"))) for v in topo.nodes)
    assert lower_bound(topo, d).rsag_cycles == pytest.approx(2 * (n - 1) / n * d / least,
                                                             rel=1e-12)
    assert cut_ratio(g, topo.nodes).ratio == cut_ratio(g, topo.nodes, topo.cut_sinks()).ratio


def test_a_slow_link_between_two_groups_binds():
    """Two groups of four endpoints on a switch each (16 GB/s links), the switches joined by
    one 2 GB/s link each way: the cut between the groups holds 4 endpoints over 2 GB/s, well
    above a node's 7/16."""
    g = nx.DiGraph()
    for group, switch in ((range(4), "s0"), (range(4, 8), "s1")):
        for v in group:
            g.add_edge(v, switch, bandwidth=16.0)
            g.add_edge(switch, v, bandwidth=16.0)
    g.add_edge("s0", "s1", bandwidth=2.0)
    g.add_edge("s1", "s0", bandwidth=2.0)
    found = cut_ratio(g, range(8))
    assert found.ratio == Fraction(4, 2)
    assert found.side & set(range(8)) in ({0, 1, 2, 3}, {4, 5, 6, 7})


def test_no_way_in_is_an_error():
    g = nx.DiGraph()
    g.add_edge(0, 1, bandwidth=1.0)
    with pytest.raises(ValueError, match="endpoint 0 has no link into it"):
        cut_ratio(g, [0, 1])
