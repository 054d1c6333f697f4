"""Topology families (``golden_model.families``): each is described once, and a description
without the parts the lower bound needs cannot exist."""

import networkx as nx
import pytest

from golden_model.errors import ConfigError
from golden_model.families import FAMILIES, Family, spec_forms
from golden_model.timing import TimingParams, lower_bound
from golden_model.topology import parse_topology

SAMPLES = {"ring": ["ring:5", "ring:8"], "mesh": ["mesh:3x4", "mesh:5x3"],
           "torus": ["torus:4x4", "torus:3x5", "torus:2x4"],
           "fattree": ["fattree:2x3", "fattree:4x2"], "bigraph": ["bigraph:2x4", "bigraph:3x6"]}


def test_every_family_has_samples_and_a_spec_form():
    assert set(SAMPLES) == set(FAMILIES)
    for name, family in FAMILIES.items():
        assert family.form.startswith(name + ":") and family.form in spec_forms()


def test_a_family_without_cuts_cannot_be_made():
    class NoCuts(Family):
        name, form = "nocuts", "nocuts:N"

        def graph(self, dims, bandwidth, latency):
            return nx.DiGraph()

    with pytest.raises(TypeError, match="natural_cuts"):
        NoCuts()


def test_unknown_family_names_every_form():
    with pytest.raises(ConfigError, match="unknown topology 'hypercube:3'.*" + spec_forms()):
        parse_topology("hypercube:3")


@pytest.mark.parametrize("spec", [s for specs in SAMPLES.values() for s in specs])
def test_node0_shortcut_equals_all_pairs_diameter(spec):
    """Where a family says endpoint 0 is peripheral, the latency bound's one search equals the
    all-pairs diameter computed by networkx."""
    topo = parse_topology(spec, link_latency=3)
    assert topo.node0_is_peripheral
    dist = dict(nx.all_pairs_dijkstra_path_length(topo.graph, weight="latency"))
    diameter = max(dist[u][v] for u in topo.nodes for v in topo.nodes)
    assert lower_bound(topo, 1 << 20, TimingParams()).latency_cycles == diameter


@pytest.mark.parametrize("spec", [s for specs in SAMPLES.values() for s in specs])
def test_natural_cuts_split_the_endpoints(spec):
    topo = parse_topology(spec)
    cuts = topo.natural_cuts()
    assert cuts, "every multi-node sample has natural cuts"
    for name, side in cuts:
        assert 0 < len(set(side)) == len(side) < topo.num_nodes
        assert set(side) <= set(topo.nodes), name
