"""``allreduce-rtl coarse --rtl``: the COARSE system in RTL from the command line (Icarus here;
the README's default run, in Verilator, is measured in scripts/ and the README). Expected
values come from the golden model: the routing tables' shard count, the dual-sync m, and the
naive queue's deadlock from ``golden_model.coarse.deadlock``."""

import json

import pytest

from allreduce_rtl.cli import main
from allreduce_rtl.coarse_rtl import RTL_SYSTEM, select_layers
from golden_model.coarse import DualSync, parse_system
from golden_model.coarse.deadlock import simulate_queues
from golden_model.coarse.routing import routing_table
from golden_model.workloads import get_model

LAYERS = "conv1.bn,layer1.0.conv1.bn,layer1.0.conv3.bn"


def test_a_small_run_verifies_and_writes_its_report(tmp_path, capsys):
    out = tmp_path / "rtl"
    assert main(["coarse", "--rtl", "--layers", LAYERS, "--simulator", "icarus", "--dtype",
                 "int32", "--out", str(out), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r == json.loads((out / "report.json").read_text())
    assert "module coarse_system" in (out / "coarse_system.v").read_text()
    config = parse_system(RTL_SYSTEM)
    model = get_model("resnet50")
    shards = sum(len(route.shards) for route in
                 routing_table(config, 0, select_layers(model, LAYERS)))
    assert r["verified"] and r["system"] == config.spec and r["dtype"] == "int32"
    assert r["dual_sync_m"] == DualSync(model, config).best().m
    assert [s["scheme"] for s in r["schemes"]] == ["coarse", "coarse-proxies-only"]
    for s in r["schemes"]:
        assert s["verified"] and s["shards"] == shards and s["mismatches"] == []
        assert abs(s["rtl_cycles"] / s["model_cycles"] - 1) < 0.10


@pytest.mark.slow   # about 40 s; tests/test_coarse_system_sim.py shows the stall by default
def test_the_naive_ablation_reports_its_stall(tmp_path, capsys):
    """Two latency-proxy tensors; worker 1 sends them in the other order. With a one-entry
    shared FIFO the golden model's naive scheme deadlocks on these orders, and so does the
    hardware: exit 1, one line naming the queue, ``stalled`` in the report."""
    assert not simulate_queues([["a", "b"], ["b", "a"]], "naive", 1).completed
    out = tmp_path / "naive"
    code = main(["coarse", "--rtl", "--layers", "conv1.bn,layer1.0.conv1.bn", "--simulator",
                 "icarus", "--orders", "mixed", "--shared-queue", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("allreduce-rtl: error: stalled: device 0's shared queue (1 of 1")
    report = json.loads((out / "report.json").read_text())
    assert not report["verified"]
    assert all(s["stalled"] and s["status"] == "STALLED" for s in report["schemes"])


@pytest.mark.parametrize("argv,needle", [
    (["--layers", "nope"], "'nope' is not a layer of resnet50 with parameters"),
    (["--layers", "conv1,conv1"], "names a layer twice"),
    (["--layers", ","], "has an empty name"),
    (["--no-overlap"], "--no-overlap: not with --rtl"),
    (["--sweep-asymmetry"], "--sweep-asymmetry: not with --rtl"),
    (["--layers", "all"], "more than the 20,000 a run takes"),
    (["--system", "coarse:W=32,M=4"], "workers must be an integer from 1 to 16, not 32"),
    (["--system", "coarse:W=4,M=3"], "M=3 must divide workers W=4"),
    (["--dtype", "bfloat16"], "invalid choice: 'bfloat16'"),
    (["--shared-queue", "9"], "argument --shared-queue: '9' must be"),
])
def test_bad_input(argv, needle, capsys, tmp_path):
    try:
        code = main(["coarse", "--rtl", "--out", str(tmp_path), *argv])
    except SystemExit as exc:          # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_rtl_options_need_rtl(capsys):
    assert main(["coarse", "--layers", "conv1"]) == 2
    assert "--layers: only with --rtl" in capsys.readouterr().err


def test_an_unusable_build_folder_is_one_line(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["coarse", "--rtl", "--layers", "conv1.bn", "--build-dir", str(afile),
                 "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot use the build folder" in err[0]
