"""``allreduce-rtl cost`` and its synthesis runner: counts checked against designs whose cost is
known in closed form, the cache, the port wrapper, and bad input (exit 2, one line)."""

import json

import pytest
from cost_probe import probe_verilog as _verilog

from allreduce_rtl.cli import main
from allreduce_rtl.cost_commands import (DESIGNS, flow_control_comparison, select_designs,
                                         with_dtype)
from allreduce_rtl.synth import count_flip_flops, port_wrapper, synthesise, top_ports
from golden_model.errors import ConfigError


@pytest.mark.slow      # nextpnr's first call compiles its WebAssembly: 90 s in a fresh suite
def test_generic_and_ice40_counts_of_register_and_small_memory(tmp_path):
    """13-bit register: 13 flip-flops; 8 x 5 memory: 40 memory bits; on an iCE40 the
    asynchronous-read memory is 40 more flip-flops and no block RAM; nextpnr gives an fmax."""
    n, depth, width = 13, 8, 5
    r = synthesise(_verilog(n, depth, width, sync_read=False), "cost_probe", root=tmp_path)
    g = r["generic"]
    assert g["flip_flops"] == n
    assert g["memories"] == 1 and g["memory_bits"] == depth * width
    assert g["cells_by_type"]["$mem_v2"] == 1
    ice = r["ice40"]
    assert ice["flip_flops"] == n + depth * width
    assert ice["brams"] == 0 and ice["luts"] > 0
    assert ice["fits"] and ice["note"] is None and 10 < ice["fmax_MHz"] < 1000
    assert ice["utilization"]["ICESTORM_LC"][1] == 7680   # hx8k
    assert not r["cached"]

    again = synthesise(_verilog(n, depth, width, sync_read=False), "cost_probe", root=tmp_path)
    assert again["cached"] and again["generic"] == g and again["ice40"] == ice


@pytest.mark.slow      # the same: 80 s for nextpnr's first call
def test_block_ram_memory_bits(tmp_path):
    """A 256 x 16 synchronous-read memory is 4096 bits: one iCE40 SB_RAM40_4K, and its read
    register is the RAM's, so only the 3-bit register is flip-flops in the generic count."""
    r = synthesise(_verilog(3, 256, 16, sync_read=True), "cost_probe", root=tmp_path,
                   fpga=True)
    assert r["generic"]["memory_bits"] == 4096 and r["generic"]["flip_flops"] == 3
    assert r["ice40"]["brams"] == 1


@pytest.mark.slow      # Yosys's first call compiles its WebAssembly: 75 s in a fresh suite
def test_generic_only(tmp_path):
    r = synthesise(_verilog(7, 4, 2, sync_read=False), "cost_probe", root=tmp_path, fpga=False)
    assert r["ice40"] is None
    assert r["generic"]["flip_flops"] == 7 and r["generic"]["memory_bits"] == 8


def test_top_ports_and_wrapper():
    text = _verilog(6, 4, 3, sync_read=False)
    ports = {name: (d, w) for d, name, w in top_ports(text, "cost_probe")}
    assert ports == {"clk": ("input", 1), "rst": ("input", 1), "d": ("input", 6),
                     "q": ("output", 6), "we": ("input", 1), "waddr": ("input", 2),
                     "wdata": ("input", 3), "raddr": ("input", 2), "rdata": ("output", 3)}
    ansi = "module a(input clk, input [7:0] x, y, output reg [3:0] z);\nendmodule\n"
    assert top_ports(ansi, "a") == [("input", "clk", 1), ("input", "x", 8), ("input", "y", 8),
                                    ("output", "z", 4)]
    wrapper = port_wrapper(text, "cost_probe")
    assert "reg [13:0] in_sr" in wrapper   # 6 + 1 + 2 + 3 + 2 input bits besides clk and rst
    assert "reg [8:0] out_r" in wrapper    # 6 + 3 output bits
    assert ".clk(clk)" in wrapper and ".rst(rst)" in wrapper
    with pytest.raises(ValueError, match="module 'nope' not found"):
        top_ports(text, "nope")


def test_count_flip_flops():
    assert count_flip_flops({"$_DFF_P_": 3, "$_SDFFE_PP0P_": 2, "$_AND_": 9, "$mem_v2": 1}) == 5
    assert count_flip_flops({"SB_DFF": 4, "SB_DFFESR": 1, "SB_LUT4": 7}) == 5


def test_select_designs():
    assert [d.name for d in select_designs(None)] == [d.name for d in DESIGNS]
    assert [d.name for d in select_designs("ni-credit, router-mesh")] == ["router-mesh",
                                                                          "ni-credit"]
    with pytest.raises(ConfigError, match="unknown design 'routr'"):
        select_designs("routr")
    with pytest.raises(ConfigError, match="design list .* has an empty name"):
        select_designs(" , ")


def test_flow_control_comparison_rows():
    def result(name, cells, ffs):
        return {"name": name, "generic": {"cells": cells, "flip_flops": ffs, "memory_bits": 64},
                "ice40": None}
    [pair] = flow_control_comparison([result("ni-message", 100, 40),
                                      result("ni-credit", 120, 50)])
    rows = {r["metric"]: r for r in pair["rows"]}
    assert rows["generic cells"]["diff"] == 20 and rows["generic cells"]["pct"] == 20.0
    assert rows["flip-flops"]["diff"] == 10 and rows["memory bits"]["diff"] == 0


@pytest.mark.parametrize("argv, message", [
    (["cost", "--design", "nope"], "unknown design 'nope'"),
    (["cost", "--design", ","], "--design: design list ',' has an empty name"),
    (["cost", "--device", "ecp5"], "invalid choice"),
    (["cost", "--jobs", "0"], "invalid choice"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exc:   # argparse usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_out_to_a_folder_is_refused_before_synthesis(capsys, tmp_path):
    assert main(["cost", "--design", "router-mesh", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a regular file" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_cost_of_every_standard_design(capsys, tmp_path):
    """The whole report (several minutes without a cache): every design has cells and
    flip-flops, the NIs keep their buffers as memory, credit flow control costs more."""
    out = tmp_path / "cost.json"
    assert main(["cost", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == report
    by = {d["name"]: d for d in report["designs"]}
    assert set(by) == {d.name for d in DESIGNS}
    for d in by.values():
        assert d["generic"]["cells"] > 0 and d["generic"]["flip_flops"] > 0
    assert by["ni-message"]["generic"]["memory_bits"] >= 1024 * 128
    assert by["cxl"]["generic"]["memory_bits"] >= 1024 * 512
    for msg, cred in (("ni-message", "ni-credit"), ("ni-small-message", "ni-small-credit")):
        assert by[cred]["generic"]["cells"] != by[msg]["generic"]["cells"]
    assert len(report["flow_control"]) == 2
    # The NIs' memories are block RAMs on the iCE40, not flip-flops: the 4 kbit RAMs hold at
    # least the 1024 x 128 buffer, and the flip-flops are a small fraction of the memory bits
    # (with the multi-port buffer and SyncFIFOs they were 21,292 against 199,936).
    for name in ("ni-message", "ni-credit"):
        ice, g = by[name]["ice40"], by[name]["generic"]
        assert ice["brams"] * 4096 >= 1024 * 128
        assert ice["flip_flops"] * 10 < g["memory_bits"]
    for d in by.values():
        if d["ice40"] is not None:
            assert d["ice40"]["luts"] > 0
            assert d["ice40"]["fits"] == (d["ice40"]["fmax_MHz"] is not None)


def test_dtype_reaches_the_nis_and_the_coarse_sync_core_only():
    designs = with_dtype(select_designs("ni-message,coarse-sync,cxl,adder-float32"), "bfloat16")
    by = {d.name: d.params for d in designs}
    assert by["coarse-sync"] == {"dtype": "bfloat16", "clients": 8, "queue_lines": 256}
    assert by["ni-message"]["dtype"] == "bfloat16" and by["ni-message"]["elems_per_flit"] == 8
    assert by["cxl"] == {} and by["adder-float32"] == {"dtype": "float32"}
