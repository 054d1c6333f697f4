"""Verilator lint of the generated Verilog (tb.toolchain.lint_verilog, -Wall, default waivers
only: AMARANTH_LINT_WAIVERS). Comparisons with constants and variable word selects go through
hdl.ops so that Amaranth's back end prints them width-exact."""

import re

import pytest

from golden_model.algorithms import build_schedule
from golden_model.lowering import lower
from golden_model.topology import parse_topology
from hdl.config import NIConfig
from hdl.config import network_config_for
from hdl.generate import NI_MODULE, TOP_MODULE, to_verilog
from hdl.network import Network
from hdl.ni import NetworkInterface
from hdl.ram import RAM
from tb.toolchain import lint_verilog


@pytest.mark.slow   # about 30 s of Verilator lint; the NIs alone are linted by default
def test_lint_network_torus_4x4_with_a_large_buffer(tmp_path):
    config = NIConfig(num_ports=4, buffer_depth=600_000, table_depth=64, max_chunks=64)
    path = tmp_path / "network.v"
    text = to_verilog(Network(parse_topology("torus:4x4"), config), path)
    assert f"module {TOP_MODULE}(" in text and f"module {NI_MODULE}(" in text
    assert len(text) < 3_000_000    # one NI definition, no per-word memory initialisation
    lint_verilog(path, TOP_MODULE)


@pytest.mark.parametrize("config", [
    NIConfig(flow_control="message"),
    NIConfig(flow_control="credit"),
    # odd sizes: no power of two anywhere, one-flit sub-messages, wire links
    NIConfig(num_ports=3, max_chunks=37, table_depth=13, buffer_depth=1000, submessage_flits=1,
             rx_buffer_depth=5, link_latency=0),
    # on routers in float32: the send engines' staging-slot arithmetic (a loopback port)
    NIConfig(num_ports=2, dtype="float32", routed=True),
    # tight network FIFOs: the loopback port's FIFO is deeper (NIConfig.loopback_rx_depth)
    NIConfig(num_ports=2, dtype="float32", routed=True, rx_buffer_depth=8, submessage_flits=4),
], ids=["message", "credit", "odd", "routed-float32", "routed-float32-tight"])
def test_lint_one_ni(tmp_path, config):
    path = tmp_path / "ni.v"
    to_verilog(NetworkInterface(config), path)
    lint_verilog(path, TOP_MODULE)


def test_lint_ram_module(tmp_path):
    """The behavioural RAM module that hdl.ram writes for to_verilog."""
    ram = RAM(shape=128, depth=1000, num_write=3, transparency=[(), (0, 1), (2,)])
    path = tmp_path / "ram.v"
    to_verilog(ram, path)
    lint_verilog(path, TOP_MODULE)


def test_top_level_ports_follow_the_contract():
    """The Verilog port names and widths the testbench codes against (docs/hardware.md)."""
    topo = parse_topology("ring:4")
    config = network_config_for(lower(build_schedule("ring", topo, 64)))
    text = to_verilog(Network(topo, config))
    header = re.search(r"module network\((.*?)\);", text, re.S).group(1)
    ports = {p.strip() for p in header.split(",")}
    widths = {name: int(w) + 1 if w else 1 for d, w, name in
              re.findall(r"^  (input|output) (?:\[(\d+):0\] )?(\w+);", text, re.M)
              if name in ports}
    fw = config.flit_width
    want = {"clk": 1, "rst": 1, "start": 1, "done": 1, "error": 1, "cycles": 32}
    for u in range(4):
        want |= {f"host_cmd__{u}__valid": 1, f"host_cmd__{u}__ready": 1,
                 f"host_cmd__{u}__payload": fw + 26, f"host_rsp__{u}__valid": 1,
                 f"host_rsp__{u}__ready": 1, f"host_rsp__{u}__payload": fw,
                 f"node_start__{u}": 1, f"node_done__{u}": 1, f"node_error__{u}": 1,
                 f"node_step__{u}": 16}
    assert ports == set(want)
    assert widths == want


def test_network_config_for_fits_the_schedule():
    schedule = build_schedule("multitree", parse_topology("torus:4x4"), 4096)
    lowered = lower(schedule)
    config = network_config_for(lowered, link_latency=3, flow_control="credit")
    assert (config.num_ports, config.max_chunks) == (4, 16)
    assert config.buffer_depth >= lowered.buffer_flits
    assert config.table_depth >= lowered.table_depth
    assert config.rx_buffer_depth == config.full_rate_rx_depth == 2 * 3 + 2 * 16 + 8  # 8 banks
    with pytest.raises(ValueError, match=r"multitree on torus:4x4 needs [0-9,]+ buffer flits, "
                                         r"the hardware has 8 \(buffer_depth\)"):
        network_config_for(lowered, buffer_depth=8)
    # A schedule beyond the hardware's range: 2^22 + 8 elements are 2^20 + 2 flits of 4.
    big = lower(build_schedule("ring", parse_topology("ring:2"), 2**22 + 8))
    with pytest.raises(ValueError, match="ring on ring:2 with 4,194,312 elements per node needs "
                                         "1,048,578 buffer flits; the NI has at most 1,048,576"):
        network_config_for(big)
    with pytest.raises(ValueError, match="'bogus'"):
        network_config_for(lowered, bogus=1)


def test_network_rejects_indirect_topologies_and_too_few_ports():
    with pytest.raises(ValueError, match="not a direct network"):
        Network(parse_topology("fattree:2x2"), NIConfig())
    with pytest.raises(ValueError, match="num_ports 2"):
        Network(parse_topology("torus:4x4"), NIConfig(num_ports=2))


@pytest.mark.slow
def test_lint_network_torus_8x8(tmp_path):
    """64 NIs (about 10 s to convert, 25 s to lint)."""
    path = tmp_path / "network.v"
    to_verilog(Network(parse_topology("torus:8x8"), NIConfig(buffer_depth=1024)), path)
    lint_verilog(path, TOP_MODULE)
