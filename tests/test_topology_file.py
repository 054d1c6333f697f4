"""Topologies from files (``golden_model.topology_file``): round trips through node-link JSON
and GraphML, the shipped machines, validation messages, and every algorithm on random irregular
networks (hypothesis): schedules validate, int32 sums are exact (numpy), and the timing model
gives no link more bytes than its bandwidth carries in the time it reports."""

import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allreduce_rtl.cli import main
from golden_model.algorithms import ALGORITHMS, build_schedule
from golden_model.errors import ConfigError
from golden_model.executor import execute
from golden_model.timing import TimingParams, lower_bound, simulate
from golden_model.topology import parse_topology
from golden_model.topology_file import MACHINES, write_topology


def _graph(topo):
    """Nodes with kind, links with per-link bandwidth, latency and count: what a file says."""
    g = topo.graph
    return ({v: a.get("kind") for v, a in g.nodes(data=True)},
            {(u, v): (a["bandwidth"] / a.get("count", 1), a["latency"], a.get("count", 1))
             for u, v, a in g.edges(data=True)})


@pytest.mark.parametrize("spec", ["torus:4x4", "fattree:4x2", "mesh:2x3", "machine:dgx2",
                                  "machine:cloud-v100"])
@pytest.mark.parametrize("suffix", [".json", ".graphml"])
def test_round_trip(tmp_path, spec, suffix):
    topo = parse_topology(spec, link_bandwidth=12.5, link_latency=40)
    path = tmp_path / f"t{suffix}"
    data = write_topology(topo, path)
    (path.write_bytes if isinstance(data, bytes) else path.write_text)(data)
    back = parse_topology(str(path))
    assert _graph(back) == _graph(topo)
    assert back.num_nodes == topo.num_nodes


def test_schedule_writes_a_topology_that_reads_back(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["schedule", "-t", "mesh:3x3", "--link-latency", "7", "--write-topology",
                 str(out)]) == 0
    assert "9 endpoints, 0 switches, 24 directed links" in capsys.readouterr().out
    assert _graph(parse_topology(str(out))) == _graph(parse_topology("mesh:3x3",
                                                                     link_latency=7))


def _write(tmp_path, obj, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return str(path)


def test_edges_spelling_undirected_defaults_and_labels(tmp_path):
    spec = _write(tmp_path, {"directed": False, "nodes": [
        {"id": "gpu1"}, {"id": "gpu0"}, {"id": "sw", "kind": "switch"}],
        "edges": [{"source": "gpu0", "target": "sw", "bandwidth": 4},
                  {"source": "gpu1", "target": "sw", "count": 2}]})
    topo = parse_topology(spec, link_bandwidth=3.0, link_latency=9)
    g = topo.graph
    assert set(g.edges) == {(0, "s0"), (1, "s0"), ("s0", 0), ("s0", 1)}
    assert g.nodes[0]["label"] == "gpu0" and g.nodes["s0"]["label"] == "sw"
    assert g.edges["s0", 0]["bandwidth"] == 4.0 and g.edges["s0", 0]["latency"] == 9
    assert g.edges[1, "s0"]["bandwidth"] == 6.0 and g.edges[1, "s0"]["count"] == 2


def _net(links, nodes=None):
    ids = nodes or sorted({x for link in links for x in link[:2]}, key=str)
    return {"nodes": [{"id": v, "kind": "switch" if str(v).startswith("s") else "node"}
                      for v in ids],
            "links": [dict(source=u, target=v, **a) for u, v, a in links]}


BOTH = lambda a, b, **k: [(a, b, k), (b, a, k)]     # noqa: E731


@pytest.mark.parametrize("obj, words", [
    ("{", "is not JSON"),
    ([1, 2], "expected a node-link object"),
    ({"nodes": [{"id": 0}], "links": 3}, "expected a 'links' (or 'edges') list"),
    ({"nodes": [{"name": 0}], "links": []}, "node #0 has no 'id'"),
    ({"nodes": [{"id": 0}, {"id": 0}], "links": []}, "node 0 is listed twice"),
    (_net(BOTH(0, 1) + [(0, 2, {})], nodes=[0, 1]), "names node 2, which is not in 'nodes'"),
    (_net(BOTH(0, 1) + BOTH(0, 1)), "link 0->1 is listed twice"),
    (_net(BOTH(0, 1) + [(1, 1, {})]), "link 1->1 is a loop"),
    (_net(BOTH(0, 1, bandwidth=-2)), "link 0->1 bandwidth must be a number of GB/s"),
    (_net(BOTH(0, 1, latency=1.5)), "link 0->1 latency must be a whole number of cycles"),
    (_net(BOTH(0, 1, count=0)), "link 0->1 count must be a whole number of parallel links"),
    (_net(BOTH(0, 1, colour="red")), "unknown attribute 'colour'"),
    ({"nodes": [{"id": 0, "kind": "gpu"}], "links": []}, "node 0 has kind 'gpu'"),
    (_net(BOTH("s0", "s1")), "has no endpoint"),
    (_net(BOTH(0, 1) + BOTH(2, 3)), "cannot reach"),
    ({"nodes": [{"id": 0}, {"id": 1}], "links": []}, "node 0 has no link out"),
    (_net(BOTH(0, 1) + [(1, 2, {})]), "link 1->2 has no link back 2->1"),
    (_net([(0, 1, {}), (1, 2, {}), (2, 0, {})]), "link 0->1 has no link back 1->0"),
    ({"nodes": [{"id": 0, "colour": "r"}], "links": []}, "unknown attribute 'colour'"),
    ({"nodes": [{"id": 1}, {"id": "1"}], "links": []}, "are the same name"),
    ({"directed": "yes", "nodes": [{"id": 0}], "links": []},
     "'directed' must be true or false, not 'yes'"),
    ({"nodes": [{"id": 0}], "links": [], "edges": []}, "has both 'links' and 'edges'"),
])
def test_bad_files_name_what_is_wrong(tmp_path, obj, words):
    with pytest.raises(ConfigError) as exc:
        parse_topology(_write(tmp_path, obj))
    assert words in str(exc.value) and "t.json" in str(exc.value)


GRAPHML = """<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="bw" for="edge" attr.name="bandwidth" attr.type="double"/>
<graph edgedefault="directed">{}</graph></graphml>"""


@pytest.mark.parametrize("body, words", [
    ('<node id="0"/><node id="1"/><node id="1"/>'
     '<edge source="0" target="1"/><edge source="1" target="0"/>', "node '1' is listed twice"),
    ('<node id="0"/><node id="1"/><edge source="0" target="1"><data key="bw">4</data></edge>'
     '<edge source="0" target="1"/><edge source="1" target="0"/>', "'0'->'1' is listed twice"),
    ('<node id="0"/><edge source="0" target="9"/><edge source="9" target="0"/>',
     "names node '9', which is not declared"),
    # an undirected link listed both ways would be merged by networkx, one bandwidth lost
    (('<node id="a"/><node id="b"/><edge source="a" target="b"><data key="bw">10</data></edge>'
      '<edge source="b" target="a"><data key="bw">30</data></edge>', "undirected"),
     "link 'b'->'a' is listed twice .*an undirected link already goes both ways"),
    ('<node id="a"/><node id="b"/><edge source="a" target="b"><data key="bw">fast</data>'
     '</edge><edge source="b" target="a"/>',
     r"link 'a'->'b': bandwidth 'fast' is not a number \(the file declares it "
     r"attr.type='double'\)"),
    (('<node id="0"/></graph><graph edgedefault="directed"><node id="1"/>', "directed"),
     "holds 2 graphs; expected one"),
])
def test_graphml_is_held_to_the_json_rules(tmp_path, body, words):
    body, default = body if isinstance(body, tuple) else (body, "directed")
    path = tmp_path / "t.graphml"
    path.write_text(GRAPHML.format(body).replace('edgedefault="directed"',
                                                 f'edgedefault="{default}"', 1))
    with pytest.raises(ConfigError, match=words) as exc:
        parse_topology(str(path))
    assert str(exc.value).count("t.graphml") == 1        # said once, not wrapped twice


@pytest.mark.parametrize("suffix", [".json", ".graphml"])
def test_a_files_own_ids_survive_a_round_trip(tmp_path, suffix):
    spec = _write(tmp_path, {"nodes": [{"id": "gpu1"}, {"id": "gpu0"},
                                       {"id": "sw", "kind": "switch"}],
                             "links": [dict(source=u, target=v) for a in ("gpu0", "gpu1")
                                       for u, v in ((a, "sw"), ("sw", a))]})
    first = parse_topology(spec)
    path = tmp_path / f"again{suffix}"
    text = write_topology(first, path)
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    again = parse_topology(str(path))
    assert {v: again.label(v) for v in again.graph} == {0: "gpu0", 1: "gpu1", "s0": "sw"}
    assert again.graph.nodes(data=True) == first.graph.nodes(data=True)


def test_one_node_round_trips(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(write_topology(parse_topology("ring:1"), path))
    assert parse_topology(str(path)).num_nodes == 1


def test_bad_names(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        parse_topology(str(tmp_path / "none.json"))
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(ConfigError, match="is a folder"):
        parse_topology(str(tmp_path / "dir.json"))
    with pytest.raises(ConfigError, match="expected one of machine:"):
        parse_topology("machine:dgx3")
    (tmp_path / "bad.graphml").write_text("<graphml><oops")
    with pytest.raises(ConfigError, match="cannot read topology file"):
        parse_topology(str(tmp_path / "bad.graphml"))


def test_cli_bad_topology_file_is_one_line(tmp_path, capsys):
    spec = _write(tmp_path, _net(BOTH(0, 1, bandwidth=0)))
    assert main(["compare", "-t", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bandwidth must be a number of GB/s" in err[0]


def _exact(schedule):
    """Every node's result equals the numpy sum of the int32 inputs."""
    rng = np.random.default_rng(7)
    data = rng.integers(-1000, 1000, (schedule.num_nodes, schedule.num_elements),
                        dtype=np.int32)
    out = execute(schedule, data)
    assert (out == data.sum(axis=0, dtype=np.int32)[None, :]).all()


def _respects_bandwidth(schedule, params):
    """No link carries more bytes than its bandwidth moves in the simulated time."""
    cycles = simulate(schedule, params).cycles
    load = {}
    for _, t in schedule.transfers():
        size = schedule.chunk_elements(t.chunk) * params.element_bytes
        for link in t.route:
            load[link] = load.get(link, 0) + size
    g = schedule.topology.graph
    for link, size in load.items():
        assert size / g.edges[link]["bandwidth"] * params.frequency_ghz <= cycles + 1e-6
    return cycles


@pytest.mark.parametrize("machine", [pytest.param(m, marks=pytest.mark.slow) if m == "dgx2"
                                     else m for m in sorted(MACHINES)])
def test_machines_run_every_algorithm_exactly(machine):
    topo = parse_topology(f"machine:{machine}")
    params = TimingParams()
    ran = []
    for name in ALGORITHMS:
        try:
            sched = build_schedule(name, topo, 64 * topo.num_nodes + 3, params)
        except ConfigError as exc:
            assert name == "ring2d" and "no rows and columns" in str(exc)
            continue
        _exact(sched)
        cycles = _respects_bandwidth(sched, params)
        assert cycles >= lower_bound(topo, sched.num_elements * 4).cycles
        ran.append(name)
    assert len(ran) == len(ALGORITHMS) - 1


@st.composite
def irregular(draw):
    """A connected network of 3..10 endpoints, with or without switches, random bandwidths
    (1..32 GB/s, per direction) and latencies (0..20 cycles), written as a file's links."""
    n = draw(st.integers(3, 10))
    switches = draw(st.integers(0, 3))
    ids = list(range(n)) + [f"s{i}" for i in range(switches)]
    tree = nx.random_labeled_tree(len(ids), seed=draw(st.integers(0, 10**6)))
    pairs = {tuple(sorted((ids[a], ids[b]), key=str)) for a, b in tree.edges}
    extra = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=6))
    pairs |= {tuple(sorted(p, key=str)) for p in extra if p[0] != p[1]}
    bw = st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    links = []
    for a, b in sorted(pairs, key=str):
        for u, v in ((a, b), (b, a)):
            links.append((u, v, {"bandwidth": draw(bw), "latency": draw(st.integers(0, 20))}))
    return _net(links, nodes=ids)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(irregular())
def test_every_algorithm_on_random_irregular_networks(tmp_path, net):
    topo = parse_topology(_write(tmp_path, net))
    params = TimingParams()
    for name in ALGORITHMS:
        if name == "ring2d":
            continue
        sched = build_schedule(name, topo, 5 * topo.num_nodes + 1, params)    # validates
        _exact(sched)
        _respects_bandwidth(sched, params)


@pytest.mark.parametrize("spec, classes, want", [
    # torus:4x4: every row and column has one wrap link each way: 2 * (4 + 4)
    ("torus:4x4", {"wrap": 300}, {300: 16, 150: 48}),
    ("ring:6", {"wrap": 7, "default": 3}, {7: 2, 3: 10}),
    # fattree:4x2: 16 endpoint links each way, 4 x 4 switch links each way
    ("fattree:4x2", {"switch": 9, "node": 2}, {2: 32, 9: 32}),
])
def test_link_classes(spec, classes, want):
    topo = parse_topology(spec, link_latency=classes)
    got = {}
    for *_, lat in topo.graph.edges(data="latency"):
        got[lat] = got.get(lat, 0) + 1
    assert got == want


def test_link_classes_on_the_command_line(capsys):
    assert main(["compare", "-t", "torus:4x4", "-s", "1MiB", "-a", "ring", "--json",
                 "--link-latency", "wrap=300,default=150"]) == 0
    lb = json.loads(capsys.readouterr().out)["lower_bound"]
    g = parse_topology("torus:4x4", link_latency={"wrap": 300}).graph
    diameter = max(max(d.values()) for _, d in nx.all_pairs_dijkstra_path_length(
        g, weight="latency"))
    assert lb["latency_cycles"] == diameter == 600
    assert main(["compare", "-t", "mesh:4x4", "--link-latency", "wrap=3"]) == 2
    assert "class 'wrap' is not one of mesh's: default" in capsys.readouterr().err
    assert main(["compare", "-t", "machine:dgx2", "--link-bandwidth", "node=3"]) == 2
    assert "a file gives each link its own" in capsys.readouterr().err


def _switch_ring(tmp_path, switches, bandwidths=None):
    """One endpoint on each of ``switches`` switches joined in a ring."""
    links = [(i, f"s{i}", {}) for i in range(switches)]
    for i in range(switches):
        bw = {"bandwidth": bandwidths[i]} if bandwidths else {}
        links.append((f"s{i}", f"s{(i + 1) % switches}", bw))
    net = _net([x for u, v, a in links for x in ((u, v, a), (v, u, a))])
    return _write(tmp_path, net, f"ring{switches}.json")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(irregular())
def test_graph_routes_are_destination_based(tmp_path, net):
    """Where two routes to one destination meet, they go on alike (table routers decide by
    destination alone), and every route is a fewest-hop path."""
    topo = parse_topology(_write(tmp_path, net))
    g = topo.graph
    for dst in topo.nodes:
        after = {}
        for src in topo.nodes:
            route = topo.route(src, dst)
            path = [src] + [v for _, v in route]
            assert path[-1] == dst and all(g.has_edge(*link) for link in route)
            if src != dst:      # with table routers the path crosses switches only
                h = g.subgraph(topo.switches + [src, dst]) if topo.router_kind == "table" else g
                assert len(route) == nx.shortest_path_length(h, src, dst)
            for here, there in zip(path, path[1:]):
                assert after.setdefault(here, there) == there


def test_routes_that_deadlock_are_refused_before_any_verilog(tmp_path, capsys):
    """Seven switches in a ring: the fewest-hop routes chain switch-to-switch hops all the way
    round, a channel dependency cycle that two VC classes do not break."""
    spec = _switch_ring(tmp_path, 7)
    out = tmp_path / "gen"
    assert main(["generate", "-t", spec, "-a", "multitree", "--elements", "70", "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "channel dependency cycle" in err[0] and "('s0', 's1')" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("links, words", [
    # an endpoint's link of 2 parallel links
    (BOTH(0, "s0", count=2) + BOTH(1, "s0"), "the link 0 -> s0 of an endpoint is 2 parallel"),
    # switches joined by 2 links one way, 3 the other
    (BOTH(0, "s0") + BOTH(1, "s1") + [("s0", "s1", {"count": 2}), ("s1", "s0", {"count": 3})],
     "s0 -> s1 is 2 parallel links but s1 -> s0 is 3"),
    # the same with the file's own ids, which the message names
    (BOTH("gpu0", "swX") + BOTH("gpu1", "swY")
     + [("swX", "swY", {"count": 2}), ("swY", "swX", {"count": 3})],
     "swX -> swY is 2 parallel links but swY -> swX is 3"),
])
def test_parallel_links_the_routers_cannot_build_are_refused(tmp_path, capsys, links, words):
    """One line, exit 2, nothing written."""
    out = tmp_path / "gen"
    assert main(["generate", "-t", _write(tmp_path, _net(links)), "-a", "ring", "--elements",
                 "96", "--router", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert not out.exists()


def test_parallel_switch_links_are_router_ports(tmp_path):
    """Two switches joined by 3 parallel links each way, three endpoints on each: the routers
    get a port per parallel link, and the tables spread the destination terminals over them
    (terminal t on link t mod 3), every walk delivering to its terminal."""
    from hdl.router.routing import switch_ports, switch_tables, walk
    links = [x for i in range(6) for x in BOTH(i, "s0" if i < 3 else "s1")]
    links += BOTH("s0", "s1", count=3)
    topo = parse_topology(_write(tmp_path, _net(links)))
    assert switch_ports(topo, "s0") == [(0, 0), (1, 0), (2, 0), ("s1", 0), ("s1", 1), ("s1", 2)]
    tables = switch_tables(topo)
    for src in range(6):
        for dst in range(6):
            hops = walk(topo, tables, src, dst)
            assert [switch_ports(topo, sw)[p][0] for sw, p, _ in hops][-1] == dst
            if (src < 3) != (dst < 3):
                assert switch_ports(topo, hops[0][0])[hops[0][1]] == ("s1" if src < 3 else "s0",
                                                                     dst % 3)


def _demo_in_hardware(tmp_path, capsys, spec, sim, elements, *options):
    """``allreduce-rtl demo`` on ``spec`` with 2-cycle links: its JSON report, after checking
    that the NIs are on routers and every node of MultiTree and ring matches bit for bit."""
    assert main(["demo", "-t", spec, "--elements", str(elements), "--link-latency", "2",
                 "--simulator", sim, "--json", "--out", str(tmp_path / "demo"),
                 "--build-dir", str(tmp_path / "build"), *options]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] and report["config"]["routed"]
    assert all(r["verified"] and r["mismatches"] == 0 for r in report["results"])
    return report


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_a_machine_whose_endpoints_have_two_links_runs_in_hardware(tmp_path, capsys, sim):
    """machine:cloud-v100: every worker has a link to its pair's switch and one to the shared
    switch, so each NI has two ports, each a router terminal; MultiTree and ring bit for bit
    (every algorithm in both simulators: tests/test_hw_routed.py, -m slow)."""
    report = _demo_in_hardware(tmp_path, capsys, "machine:cloud-v100", sim, 40,
                               "--dtype", "int32")
    assert report["config"]["num_ports"] == 2


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_parallel_switch_links_run_in_hardware(tmp_path, capsys, sim):
    """Two switches joined by 3 parallel links each way, two endpoints on each: a router port
    and a link per parallel link; MultiTree and ring bit for bit."""
    links = [x for i in range(4) for x in BOTH(i, "s0" if i < 2 else "s1")]
    spec = _write(tmp_path, _net(links + BOTH("s0", "s1", count=3)), "parallel.json")
    _demo_in_hardware(tmp_path, capsys, spec, sim, 40, "--dtype", "int32")


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_an_irregular_network_runs_in_hardware(tmp_path, capsys, sim):
    """Three switches in a ring with links of 8, 16 and 32 GB/s (built as 4/16, 8/16 and a flit
    per cycle, the endpoint links at 16 GB/s as 8/16), two endpoints each: MultiTree and ring
    bit for bit."""
    links = []
    for i, sw in enumerate(("s0", "s0", "s1", "s1", "s2", "s2")):
        links += [(i, sw, {}), (sw, i, {})]
    for (a, b), bw in zip((("s0", "s1"), ("s1", "s2"), ("s2", "s0")), (8.0, 16.0, 32.0)):
        links += [(a, b, {"bandwidth": bw}), (b, a, {"bandwidth": bw})]
    report = _demo_in_hardware(tmp_path, capsys, _write(tmp_path, _net(links), "three.json"),
                               sim, 96)
    assert {(r["from"], r["to"]): r["rate"] for r in report["link_rates"]}[("s0", "s1")] == 4
    assert {r["rate"] for r in report["link_rates"]} == {4, 8}
