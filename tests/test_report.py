"""The training-time report: work plan, headline figures, Markdown, ``allreduce-rtl report``.

Headline figures are recomputed here from the per-workload results with the definitions the
report states (geometric mean of all-reduce speed-ups, largest training-time reduction).
"""

import json
import statistics
import subprocess
import sys
import time

import pytest

from allreduce_rtl.cli import main
from golden_model.compare import compare
from golden_model.errors import ConfigError
from golden_model.report import (PAPER_HEADLINES, PRIOR_ART, ReportSettings, assemble,
                                 markdown_table, plan, render_markdown, run_unit)
from golden_model.topology import parse_topology
from golden_model.training import TrainingOptions, train
from golden_model.workloads import get_model

SMALL = ReportSettings(topologies=("torus:4x4",), models=("ncf", "alexnet"),
                       sizes=(32 << 10, 64 << 10), batch_sweep=(16, 32))
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def small():
    units = plan(SMALL)
    return units, assemble(SMALL, units, [run_unit(u, SMALL) for u in units])


def test_plan_covers_the_standard_set():
    units = plan(ReportSettings())
    kinds = [u.kind for u in units]
    assert kinds.count("train") == 4 * 7
    assert kinds.count("sweep") == 4 * 12
    assert kinds.count("batch") == 5
    assert {u.topology for u in units if not u.kind.startswith("coarse")} == {
        "torus:4x4", "torus:8x8", "mesh:4x4", "mesh:8x8"}
    assert kinds.count("coarse") == 7 and kinds.count("coarse-sweep") == 2     # issue 5
    sizes = sorted({u.item for u in units if u.kind == "sweep"})
    assert sizes[0] == 32 << 10 and sizes[-1] == 64 << 20
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))


@pytest.mark.parametrize("settings", [ReportSettings(models=("lenet",)),
                                      ReportSettings(topologies=("donut:3",))])
def test_plan_rejects_bad_settings_before_any_work(settings):
    with pytest.raises(ConfigError):
        plan(settings)


def test_assembled_results_are_the_golden_models(small):
    units, data = small
    topo = parse_topology("torus:4x4")
    for name in ("ncf", "alexnet"):
        both = data["training"]["torus:4x4"][name]
        assert both["overlapped"] == train(get_model(name), topo)
        assert both["serial"] == train(get_model(name), topo,
                                       options=TrainingOptions(overlap=False))
    sweep = data["sweeps"]["torus:4x4"]
    direct = compare(topo, 64 << 10)["results"]
    assert [r for r in sweep if r["size_bytes"] == 64 << 10] == [
        {"size_bytes": 64 << 10, **r} for r in direct]
    assert [r["mini_batch"] for r in data["batch"]["rows"]] == [16, 32]
    assert data["batch"]["model"] == "ncf"           # resnet50 is not in this set


def test_headline_figures(small):
    _, data = small
    head = data["headline"]
    assert head["topology"] == "torus:4x4"
    for mode in ("overlapped", "serial"):
        by_model = {m: {r["algorithm"]: r for r in both[mode]["results"]}
                    for m, both in data["training"]["torus:4x4"].items()}
        speedups = [by["multitree"]["comm_speedup_vs_ring"] for by in by_model.values()]
        assert head[mode]["speedup_ring"]["value"] == pytest.approx(
            statistics.geometric_mean(speedups))
        best = max(by_model, key=lambda m: by_model[m]["multitree"]["reduction_vs_ring"])
        assert head[mode]["reduction_ring"] == {
            "value": by_model[best]["multitree"]["reduction_vs_ring"], "model": best}
        prior = [min(by[a]["comm_ms"] for a in PRIOR_ART) / by["multitree"]["comm_ms"]
                 for by in by_model.values()]
        assert head[mode]["speedup_prior"]["value"] == pytest.approx(
            statistics.geometric_mean(prior))
        red = {m: 1 - by["multitree"]["iteration_ms"] / min(by[a]["iteration_ms"]
                                                             for a in PRIOR_ART)
               for m, by in by_model.items()}
        top = max(red, key=red.get)
        assert head[mode]["reduction_prior"] == {"value": pytest.approx(red[top]), "model": top}


def test_markdown(small):
    _, data = small
    images = {("training", "torus:4x4"): "t.png", ("sweep", "torus:4x4"): "s.png"}
    text = render_markdown(data, images, "allreduce-rtl report --out X")
    for claim, paper, _ in PAPER_HEADLINES:
        assert f"| {claim} | {paper} |" in text
    cells = []
    for mode in ("overlapped", "serial"):   # largest T_mpi / T_coarse - 1 over the workloads
        by = {m: both[mode]["results"] for m, both in data["coarse"]["results"].items()}
        best = max(by, key=lambda m: by[m][0]["iteration_ms"] / by[m][1]["iteration_ms"])
        ratio = by[best][0]["iteration_ms"] / by[best][1]["iteration_ms"]
        cells.append(f"{100 * (ratio - 1):.1f}% ({best})")
    assert (f"| COARSE: faster training than MPI all-reduce, up to | 48.3% | {cells[0]} | "
            f"{cells[1]} |") in text
    assert "## COARSE against MPI ring all-reduce (coarse:W=8,M=4,local=9,remote=16)" in text
    assert "](t.png)" in text and "](s.png)" in text
    assert "`allreduce-rtl report --out X`" in text
    reduction = data["headline"]["overlapped"]["reduction_ring"]
    assert f"{100 * reduction['value']:.1f}% ({reduction['model']})" in text


def test_markdown_table():
    table = markdown_table([("a", 1), ("b", 22)], [("name", lambda r: r[0]),
                                                   ("n", lambda r: str(r[1]))])
    assert table.splitlines() == ["| name | n |", "| --- | ---: |", "| a | 1 |", "| b | 22 |"]


def test_report_command(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", "--out", str(out), "--topologies", "torus:4x4,mesh:4x4",
                 "--models", "ncf", "--sizes", "32KiB:64KiB", "-a", "ring,multitree",
                 "--timing", "fcfs"]) == 0
    captured = capsys.readouterr()
    assert "report.md" in captured.out
    assert "report" in captured.err                     # the progress bar
    names = {p.name for p in out.iterdir()}
    assert names == {"report.md", "report.json", "training-torus-4x4.png",
                     "training-mesh-4x4.png", "speedup-torus-4x4.png", "speedup-mesh-4x4.png"}
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == PNG
    text = (out / "report.md").read_text()
    assert "## torus:4x4: iteration time per workload" in text
    assert f"--out {out} --topologies torus:4x4,mesh:4x4 --models ncf --sizes 32KiB:64KiB " \
           f"--algorithms ring,multitree --timing fcfs" in text
    assert "links served first come first served" in text
    data = json.loads((out / "report.json").read_text())
    ncf = data["training"]["mesh:4x4"]["ncf"]["overlapped"]
    assert [r["algorithm"] for r in ncf["results"]] == ["ring", "multitree"]
    assert not list(out.glob(".*.tmp"))                 # written whole


@pytest.mark.parametrize("argv,needle", [
    (["report", "--models", "lenet"], "lenet"),
    (["report", "--topologies", "donut:3"], "donut:3"),
    (["report", "--sizes", "64KiB:32KiB"], "64KiB:32KiB"),
    (["report", "-a", "bogus"], "bogus"),
    (["report", "--mini-batch", "-3"], "-3"),
])
def test_report_bad_input(argv, needle, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        sys.exit(main(argv + ["--out", str(tmp_path / "never")]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "never").exists()


def test_report_out_is_a_file(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["report", "--out", str(blocker / "sub"), "--models", "ncf",
                 "--topologies", "torus:2x2", "--sizes", "32KiB:32KiB"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "cannot create output folder" in err


@pytest.mark.slow
def test_standard_report_under_five_minutes(tmp_path):
    """The whole standard set, as a user runs it (a new process, so no warm cache)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "allreduce_rtl.cli", "report", "--out",
                           str(tmp_path)], capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert elapsed < 300
    assert len(list(tmp_path.glob("*.png"))) == 8
    text = (tmp_path / "report.md").read_text()
    for topo in ("torus:4x4", "torus:8x8", "mesh:4x4", "mesh:8x8"):
        assert f"## {topo}: iteration time per workload" in text
