"""Verilator lint (-Wall, tb.toolchain default waivers only) of the router's generated Verilog."""

import pytest

from golden_model.topology import parse_topology
from hdl.router import Router, RouterNetwork, RouterParams, switch_table, to_verilog
from hdl.router.network import router_modules
from tb.toolchain import lint_verilog


@pytest.mark.parametrize("spec, args", [
    # (the whole 4x4 mesh takes about 40 s: -m slow; the 2x3 mesh below stays by default)
    pytest.param("mesh:4x4", dict(num_vcs=2, vc_buf_depth=8, flit_width=128,
                                  flow_control="wormhole"), marks=pytest.mark.slow),
    # (a whole torus with cut-through and 4 VCs takes about 50 s to lint: -m slow; one router
    # with cut-through is linted below in the default suite)
    pytest.param("torus:3x3", dict(num_vcs=4, vc_buf_depth=6, flit_width=56, link_latency=2,
                                   credit_delay=2, flow_control="cut_through"),
                 marks=pytest.mark.slow),
    pytest.param("torus:4x4", dict(num_vcs=4, vc_buf_depth=6, flit_width=56, link_latency=2,
                                   credit_delay=2, flow_control="cut_through"),
                 marks=pytest.mark.slow),
    ("mesh:2x3", dict(num_vcs=1, vc_buf_depth=2, flit_width=32, link_latency=0,
                      concentration=2)),
    # fat-tree: leaf switches use 8 ports, roots 4 (ports 4..7 tied off); BiGraph: VC classes.
    # (The whole fat-tree takes about 30 s: -m slow; one fat-tree switch is linted below.)
    pytest.param("fattree:4x2", dict(num_vcs=2, vc_buf_depth=4, flit_width=64, link_latency=1),
                 marks=pytest.mark.slow),
    pytest.param("bigraph:4x4", dict(num_vcs=4, vc_buf_depth=6, flit_width=56, link_latency=2,
                                     credit_delay=2, flow_control="cut_through"),
                 marks=pytest.mark.slow),
], ids=["mesh-4x4", "torus-3x3-vct", "torus-4x4-vct", "mesh-2x3-conc2-1vc", "fattree-4x2",
        "bigraph-4x4-vct"])
def test_lint_router_network(tmp_path, spec, args):
    path = tmp_path / "router_network.v"
    text = to_verilog(RouterNetwork(parse_topology(spec), **args), path)
    assert "module router_network(" in text and "module router_network_router(" in text
    assert router_modules(text) == ["router_network_router"]    # the router converted once
    lint_verilog(path, "router_network")


def test_lint_fat_tree_switch(tmp_path):
    """A switch of a 4-ary 2-level fat-tree with its golden routing table as constants."""
    topo = parse_topology("fattree:4x2")
    table = switch_table(topo, "s0")
    router = Router(RouterParams(table.num_ports, num_vcs=2, vc_buf_depth=4, flit_width=64), table)
    path = tmp_path / "switch.v"
    to_verilog(router, path, name="switch")
    lint_verilog(path, "switch")


@pytest.mark.parametrize("num_vcs, flow_control", [(3, "cut_through"), (3, "wormhole"),
                                                   (1, "cut_through")])
def test_lint_one_router_odd_vc_counts(tmp_path, num_vcs, flow_control):
    """Non-power-of-two and single VC counts, an odd buffer depth, credit_delay 3."""
    from hdl.router import grid_tables
    table = grid_tables(parse_topology("mesh:3x3"))[4]
    router = Router(RouterParams(5, num_vcs=num_vcs, vc_buf_depth=5, flit_width=40,
                                 credit_delay=3, flow_control=flow_control), table)
    path = tmp_path / "router.v"
    to_verilog(router, path, name="router")
    lint_verilog(path, "router")
