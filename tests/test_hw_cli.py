"""``allreduce-rtl generate`` and ``allreduce-rtl demo``: outputs, and bad input (exit 2, one line,
no traceback)."""

import json
import sys
from fractions import Fraction

import numpy as np
import pytest

from allreduce_rtl.cli import main
from golden_model.algorithms import build_schedule
from golden_model.lowering import Direction, lower
from golden_model.topology import parse_topology
from hdl.config import network_config_for
from hdl.schedule_table import pack_row
from allreduce_rtl.plan import model_cycles, plan_hardware
from tb.runner import HardwareBuild, RunSpec
from tb.scoreboard import check_run
from tb.toolchain import lint_verilog


def test_generate_writes_verilog_and_manifest(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "-t", "mesh:2x3", "-a", "multitree-opt", "--elements", "100",
                 "--out", str(out), "--flow-control", "credit", "--link-latency", "3",
                 "--json"]) == 0
    brief = json.loads(capsys.readouterr().out)
    manifest = json.loads((out / "manifest.json").read_text())
    verilog = (out / "network.v").read_text()
    assert "module network(" in verilog
    lint_verilog(out / "network.v", "network")

    topo = parse_topology("mesh:2x3", link_latency=3)
    sched = build_schedule("multitree-opt", topo, 100)
    lw = lower(sched)
    cfg = network_config_for(lw, dtype="float32", flow_control="credit", link_latency=3)
    assert manifest["dtype"] == "float32" == manifest["config"]["dtype"]    # the default
    assert manifest["config"]["flow_control"] == "credit"
    assert manifest["config"]["link_latency"] == 3
    assert manifest["config"]["num_ports"] == 3 == cfg.num_ports
    assert manifest["expected"]["model_cycles"] == model_cycles(sched, cfg) == brief["model_cycles"]
    assert manifest["schedule"]["steps"] == len(sched.active_steps)
    assert manifest["buffer"]["flits"] == lw.buffer_flits
    # Every node's tables: the rows of the lowering and the words the host writes.
    assert len(manifest["tables"]) == 6
    for node in manifest["tables"]:
        prog = lw.programs[node["node"]]
        assert node["neighbors"] == list(prog.neighbors)
        assert len(node["engines"]) == 2 * cfg.num_ports
        for eng in node["engines"]:
            rows = [r for (d, p), rs in prog.engines.items() for r in rs
                    if d.name.lower() == eng["direction"] and p == eng["port"]]
            assert [int(r["word"], 16) for r in eng["rows"]] == [pack_row(r) for r in rows]


@pytest.mark.parametrize("algorithm, forced", [("dbtree", False), ("ring", True)])
def test_generate_routed(algorithm, forced, tmp_path, capsys):
    """A multi-hop schedule gets routers by itself; --router forces them on any schedule."""
    out = tmp_path / "gen"
    argv = ["generate", "-t", "mesh:2x2", "-a", algorithm, "--elements", "40",
            "--link-latency", "1", "--out", str(out), "--json"] + (["--router"] if forced else [])
    assert main(argv) == 0
    brief = json.loads(capsys.readouterr().out)
    manifest = json.loads((out / "manifest.json").read_text())
    lint_verilog(out / "network.v", "network")
    topo = parse_topology("mesh:2x2", link_latency=1)
    sched = build_schedule(algorithm, topo, 40)
    lw = lower(sched, routed=True)
    cfg = network_config_for(lw, link_latency=1)
    assert manifest["config"]["routed"] is True and cfg.routed
    assert manifest["expected"]["model_cycles"] == model_cycles(sched, cfg) == brief["model_cycles"]
    assert manifest["expected"]["timing_params"]["router_delay"] == 4
    assert brief["routed"] is True
    # 2 VCs; buffers for one VC at full rate over 1-cycle links: max(8, 4 + 2 * 1 + 1) flits
    assert manifest["router"] == {"num_vcs": 2, "vc_buf_depth": 8, "credit_delay": 1,
                                  "flow_control": "wormhole", "link_latency": 1,
                                  "terminals_per_node": max(len(topo.neighbors(v))
                                                            for v in topo.nodes),
                                  "router_cycles": 4}
    # the rows carry the plan's timetable (release cycles), in a release table per send engine
    timed = plan_hardware(topo, [algorithm], 40, link_latency=1, router=forced).runs[0].lowered
    for node in manifest["tables"]:
        prog = timed.programs[node["node"]]
        tables = [e["table"] for e in node["engines"]]
        assert tables == ["schedule"] * 2 * cfg.num_ports + ["release"] * cfg.num_ports
        for eng in node["engines"]:
            if eng["direction"] != "send":
                continue
            rows = prog.engines[(Direction.SEND, eng["port"])]
            assert [(r["dest"], r["src"], r["release"]) for r in eng["rows"]] == \
                [(r.dest, r.src, r.release) for r in rows]
            words = ([pack_row(r) for r in rows] if eng["table"] == "schedule"
                     else [r.release for r in rows])
            assert eng["base"] == (0 if eng["table"] == "schedule" else 1 << 16)
            assert [int(r["word"], 16) for r in eng["rows"]] == words


@pytest.mark.parametrize("argv,needle", [
    (["generate", "-t", "ring:8", "-a", "dbtree"], "ring:8 has no router network"),
    (["generate", "-t", "ring:8", "-a", "ring", "--router"], "--router"),
    (["generate", "-t", "torus:4x4", "-a", "dbtree", "--link-latency", "2000"], "1,024"),
    (["generate", "-t", "fattree:4x2", "--elements", "262081"], "262,080 elements"),
    (["generate", "-a", "bogus"], "bogus"),
    (["generate", "-t", "torus:4"], "torus:4"),
    (["generate", "--elements", "0"], "'0'"),
    (["generate", "--elements", "100000000"], "buffer"),
    (["generate", "--flow-control", "wormhole"], "wormhole"),
    (["generate", "--link-latency", "-2"], "-2"),
])
def test_generate_bad_input(argv, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        sys.exit(main([*argv, "--out", str(tmp_path / "x")]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_generate_writes_both_files_or_neither(tmp_path, capsys):
    """A manifest path that cannot be written is refused before any Verilog is written."""
    out = tmp_path / "gen"
    (out / "manifest.json").mkdir(parents=True)
    assert main(["generate", "-t", "mesh:2x2", "-a", "ring", "--elements", "8",
                 "--link-latency", "1", "--out", str(out)]) == 2
    assert "manifest.json" in capsys.readouterr().err
    assert not (out / "network.v").exists()


def test_generate_needs_an_output_folder(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["generate"])
    assert exc.value.code == 2 and "--out" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["generate", "-t", "ring:4", "--link-latency", "1", "--elements", "8",
                 "--out", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "file" in err


@pytest.mark.parametrize("argv,needle", [
    (["demo", "--simulator", "modelsim"], "modelsim"),
    (["demo", "--elements", "0"], "'0'"),
    (["demo", "--elements", "-5"], "-5"),
    (["demo", "-t", "donut:4"], "donut:4"),
    (["demo", "--link-latency", "x"], "'x'"),
    (["demo", "--elements", "100000000"], "buffer"),
    (["demo", "--flow-control", "none"], "none"),
    (["demo", "-t", "fattree:4x2", "--link-latency", "5000"], "1,024"),
    (["demo", "-t", "fattree:4x2", "--elements", "300000"], "262,080 elements"),
    # floats on routers stage MultiTree's 63 contributions per chunk: about 64 times the
    # vector's 65,520 flits, more than the NI's largest buffer
    (["demo", "-t", "fattree:4x3", "--dtype", "float32", "--elements", "262080"],
     "buffer flits; the NI has at most 1,048,576"),
    (["demo", "--dtype", "float16"], "float16"),
])
def test_demo_bad_input(argv, needle, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        sys.exit(main([*argv, "--out", str(tmp_path / "d")]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert "Traceback" not in err


def test_demo_small_in_icarus_with_waves(tmp_path, capsys):
    """The demo's whole path (build, two runs, verification, report, waveform) on a small case."""
    out = tmp_path / "demo"
    assert main(["demo", "--simulator", "icarus", "-t", "ring:4", "--elements", "200",
                 "--link-latency", "4", "--waves", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads((out / "report.json").read_text())
    assert report["verified"] and report["elements"] == 200 and report["simulator"] == "icarus"
    by = {r["algorithm"]: r for r in report["results"]}
    assert set(by) == {"multitree", "ring"}
    for r in by.values():
        assert r["verified"] and r["mismatches"] == 0
        assert r["rtl_cycles"] >= r["model_cycles"] > 0
    assert by["ring"]["speedup_vs_ring"] == 1.0
    assert by["multitree"]["speedup_vs_ring"] == pytest.approx(
        by["ring"]["rtl_cycles"] / by["multitree"]["rtl_cycles"])
    assert (out / "network.v").is_file() and (out / "tb_top.fst").stat().st_size > 1000
    assert report["files"]["waves"] == str(out / "tb_top.fst")


def test_demo_runs_each_algorithm_alone_with_the_cycles_of_one_simulation(tmp_path, capsys):
    """In Verilator the demo runs MultiTree and ring in two simulations at once (the C++
    driver): each has the cycles and the outputs it has when one simulation runs both, one
    after the other, on the same build."""
    from allreduce_rtl.demo import demo_vectors, gradients, plan_demo
    topo = parse_topology("ring:4", link_latency=4)
    cache = tmp_path / "cache"
    assert main(["demo", "-t", "ring:4", "--elements", "200", "--link-latency", "4", "--json",
                 "--build-dir", str(cache), "--out", str(tmp_path / "demo")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"]
    plan = plan_demo(topo, 200, "verilator", False,
                     {"dtype": None, "link_latency": 4, "flow_control": "message",
                      "buffer_copies": 1}).hardware
    vectors, _ = demo_vectors(gradients(4, 200, 0), plan.element_type, 4)
    build = HardwareBuild(plan.hardware_topology, plan.config, "verilator", valid_pct=100,
                          ready_pct=100,
                          long_runs=True, backdoor=True, build_root=cache)
    together = build.run([RunSpec(r.algorithm, r.lowered, vectors, r.expected_cycles)
                          for r in plan.runs], seed=1)
    assert [r.cycles for r in together] == [r["rtl_cycles"] for r in report["results"]]
    for run, res in zip(plan.runs, together):
        assert check_run(res, run.schedule, vectors, plan.element_type,
                         expected_cycles=run.expected_cycles).passed
    # float32 by default: each algorithm's error against the exact sum, recomputed here with
    # Python fractions (exact), rounded by numpy from the correctly rounded float64
    assert report["dtype"] == "float32" and plan.element_type.name == "float32"
    for row, res in zip(report["results"], together):
        got = res.outputs[0].astype(np.float32)
        rel = []
        for j in range(vectors.shape[1]):
            exact = sum((Fraction(float(v)) for v in vectors[:, j]), Fraction(0))
            rel.append(abs(Fraction(float(got[j])) - exact) / abs(exact))
        assert row["accuracy"]["max_relative_error"] == pytest.approx(float(max(rel)), rel=1e-9)
        assert row["nodes_bit_identical"]


def test_demo_on_a_fat_tree_puts_the_nis_on_routers(tmp_path, capsys):
    """fattree: every transfer crosses a switch, so the demo builds the routed network."""
    out = tmp_path / "demo"
    assert main(["demo", "--simulator", "icarus", "-t", "fattree:2x2", "--elements", "64",
                 "--link-latency", "2", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] and report["config"]["routed"] is True
    topo = parse_topology("fattree:2x2", link_latency=2)
    for r in report["results"]:
        sched = build_schedule(r["algorithm"], topo, 64)
        cfg = network_config_for(lower(sched, routed=True), link_latency=2)
        assert r["verified"] and r["mismatches"] == 0
        assert r["model_cycles"] == model_cycles(sched, cfg)


def test_demo_picks_a_layer_that_fits_a_routed_message():
    """Without --elements the demo takes the largest ResNet-50 3x3 layer whose chunks fit a
    routed message: on fattree:4x2 MultiTree and ring cut the vector into 16 chunks of at most
    4095 flits of 4 elements."""
    from allreduce_rtl.demo import RESNET50_LAYERS, plan_demo
    from hdl.router.flit import MAX_PAYLOAD_FLITS
    topo = parse_topology("fattree:4x2", link_latency=150)
    plan = plan_demo(topo, None, "verilator", False,
                     {"link_latency": 150, "flow_control": "message"})
    limit = 16 * MAX_PAYLOAD_FLITS * 4
    assert plan.hardware.routed
    assert plan.elements == max(w for _, w in RESNET50_LAYERS if w <= limit)
    assert f"{MAX_PAYLOAD_FLITS:,} flits" in plan.note


def test_demo_report_says_when_multitree_is_slower(tmp_path, capsys):
    from allreduce_rtl.demo import format_report
    out = tmp_path / "demo"
    assert main(["demo", "--simulator", "icarus", "-t", "fattree:2x2", "--elements", "64",
                 "--link-latency", "2", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["targets"]["under_test"] == "multitree"
    report["targets"]["speedup_vs_ring"] = 0.4
    assert "MultiTree takes 2.50x more RTL cycles than ring" in format_report(report)
    report["targets"]["speedup_vs_ring"] = 2.5
    assert "MultiTree takes 2.50x fewer RTL cycles than ring" in format_report(report)


@pytest.mark.parametrize("elements", [1, 2])
def test_demo_with_a_buffer_smaller_than_its_banks(tmp_path, capsys, elements):
    """One or two elements per node on ring:4: the NI buffer holds fewer words than it has
    banks, so every bank is one address (this once failed to elaborate); the network is lint
    clean and every node matches the golden model."""
    out = tmp_path / "demo"
    assert main(["demo", "--simulator", "icarus", "-t", "ring:4", "--elements", str(elements),
                 "--link-latency", "2", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] and report["elements"] == elements
    lint_verilog([out / "network.v"], "network")
