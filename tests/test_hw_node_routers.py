"""Graphs with links between endpoints on routers: a table router per vertex
(``router_kind == "node"``, ``hdl.router.routing.node_tables``), for schedules that send
through other vertices (ring, halving-doubling, double binary tree on an irregular graph, and
beside a switch).

Checked: the tables follow the golden routes and reach every terminal; the channel dependency
check finds the cycle of one VC class on a ring of five endpoints and breaks it with two, and
refuses a ring of seven in one line (two classes are not enough there); and whole networks in
Icarus and Verilator, every node bit for bit against the golden model, RTL cycles against the
timing model of the routed network.
"""

import json

import pytest

from allreduce_rtl.plan import plan_hardware
from golden_model.errors import ConfigError
from golden_model.topology import parse_topology
from hdl.config import rotation_slack
from hdl.router.routing import dependency_cycle, node_ports, node_tables, walk

from test_hw_link_latencies import _run
from test_hw_allreduce import sizes

#: An irregular graph of six endpoints (degrees 1 to 4), both directions of every link.
EDGES = [(0, 1), (0, 4), (1, 4), (2, 4), (3, 5), (4, 5)]
ALGORITHMS = ["ring", "halving-doubling", "dbtree", "multitree"]


def _file(path, n, edges, latency=3):
    nodes = [{"id": f"n{i}", "kind": "node"} for i in range(n)]
    links = [{"source": f"n{a}", "target": f"n{b}", "bandwidth": 16, "latency": latency}
             for u, v in edges for a, b in ((u, v), (v, u))]
    path.write_text(json.dumps({"directed": True, "nodes": nodes, "links": links}))
    return parse_topology(str(path))


def _ring(path, n):
    return _file(path, n, [(i, (i + 1) % n) for i in range(n)])


def test_tables_follow_the_golden_routes(tmp_path):
    topo = _file(tmp_path / "g.json", 6, EDGES)
    assert topo.router_kind == "node"
    c = max(len(topo.neighbors(v)) for v in topo.nodes)
    tables = node_tables(topo, c)
    for s in range(6 * c):
        for d in range(6 * c):
            hops = walk(topo, tables, s, d, c)
            # the routers crossed are the golden route's vertices, then the local port of d
            routers = [r for r, _, _ in hops]
            want = [s // c] + [v for _, v in topo.route(s // c, d // c)]
            assert routers == want
            width = tables[0].num_ports - c
            assert hops[-1][1] == width + d % c
            for r, port, _ in hops[:-1]:
                assert node_ports(topo, r)[port][0] == routers[routers.index(r) + 1]


def test_two_classes_break_the_ring_of_five(tmp_path):
    topo = _ring(tmp_path / "ring5.json", 5)
    one = node_tables(topo, 2, vc_classes=1)
    cycle = dependency_cycle(topo, one, 2)
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) >= 4
    two = node_tables(topo, 2)
    assert two[0].vc_classes == 2 and dependency_cycle(topo, two, 2) is None


def test_ring_of_seven_is_refused(tmp_path, capsys):
    from allreduce_rtl.cli import main
    topo = _ring(tmp_path / "ring7.json", 7)
    with pytest.raises(ConfigError, match="channel dependency cycle even with two VC classes"):
        plan_hardware(topo, ["halving-doubling"], 64, dtype="int32")
    code = main(["generate", "-t", str(tmp_path / "ring7.json"), "-a", "halving-doubling",
                 "--elements", "64", "--dtype", "int32", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "cannot build routers" in err and "'n0'" in err      # the file's own ids
    assert not (tmp_path / "out" / "network.v").exists()


def _check(sim, topo, algorithms, sizes_):
    plan = plan_hardware(topo, algorithms, sizes_, dtype="int32")
    assert plan.routed and plan.hardware_topology.router_kind == "node"
    build, out = _run(sim, plan, algorithms)
    for run, res, verdict in out:
        # routers arbitrate flit by flit and the model message by message (test_hw_routed)
        slack = rotation_slack(build.config, run.lowered)
        assert 0.8 * verdict.model_cycles <= res.cycles <= 3 * verdict.model_cycles + slack, \
            verdict.message


# Verilator at every size takes 55 s of a 635 s default suite, Icarus at the smallest size 31 s
# of a 595 s one: -m slow (CI runs both); test_ring_of_five_with_two_classes_completes and
# test_links_between_endpoints_beside_a_switch keep node routers in the default suite
@pytest.mark.slow
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_irregular_graph_on_node_routers(sim, tmp_path):
    topo = _file(tmp_path / "g.json", 6, EDGES)
    _check(sim, topo, ALGORITHMS, sizes(6) if sim == "verilator" else sizes(6)[:1])


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=pytest.mark.slow)])
def test_ring_of_five_with_two_classes_completes(sim, tmp_path):
    _check(sim, _ring(tmp_path / "ring5.json", 5), ["halving-doubling", "dbtree"], sizes(5))


def _mixed(path):
    """Three GPUs on a switch, two of them also linked to each other (an NVLink beside PCIe)."""
    nodes = [{"id": f"g{i}", "kind": "node"} for i in range(3)] + [{"id": "sw", "kind": "switch"}]
    links = [{"source": a, "target": b, "bandwidth": 16, "latency": 3}
             for i in range(3) for a, b in ((f"g{i}", "sw"), ("sw", f"g{i}"))]
    links += [{"source": a, "target": b, "bandwidth": 16, "latency": 2}
              for a, b in (("g0", "g1"), ("g1", "g0"))]
    path.write_text(json.dumps({"directed": True, "nodes": nodes, "links": links}))
    return parse_topology(str(path))


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_links_between_endpoints_beside_a_switch(sim, tmp_path):
    topo = _mixed(tmp_path / "mixed.json")
    assert topo.router_kind == "node"
    # g0 -> g1 goes over their own link, g0 -> g2 through the switch's router
    assert topo.route(0, 1) == ((0, 1),) and [v for _, v in topo.route(0, 2)] == ["s0", 2]
    _check(sim, topo, ["ring", "dbtree", "multitree"], sizes(3)[:1] if sim == "icarus"
           else sizes(3))
