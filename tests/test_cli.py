"""The command line: outputs, files, and bad input (exit 2, one line, no traceback)."""

import json
import os
import stat
import subprocess
import sys

import pytest

from allreduce_rtl.cli import main
from golden_model.algorithms import ALGORITHMS, build_schedule
from golden_model.timing import TimingParams, lower_bound, simulate
from golden_model.topology import parse_topology


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_compare_headline(capsys):
    """The issue's done-when figures on torus:8x8 at 64 MiB."""
    report = run_json(capsys, "compare", "--topology", "torus:8x8", "--size", "64MiB", "--json")
    assert set(report) >= {"topology", "nodes", "size_bytes", "lower_bound_cycles", "results"}
    assert report["nodes"] == 64 and report["size_bytes"] == 64 << 20
    by = {r["algorithm"]: r for r in report["results"]}
    assert set(by) == set(ALGORITHMS)       # every algorithm runs on a torus
    for r in by.values():
        assert set(r) >= {"algorithm", "steps", "cycles", "time_us", "algbw_GBps", "busbw_GBps",
                          "speedup_vs_ring", "ratio_to_lower_bound"}
        assert r["ratio_to_lower_bound"] >= 1.0
        assert r["speedup_vs_ring"] == pytest.approx(by["ring"]["cycles"] / r["cycles"])
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 2 * 63 / 64)
        assert r["algbw_GBps"] == pytest.approx((64 << 20) / (r["cycles"] * 1e-9) / 1e9)
    assert by["multitree"]["speedup_vs_ring"] >= 2.3
    assert by["multitree-opt"]["cycles"] <= by["multitree"]["cycles"]
    # The optimal-schedules issue's target: 1.01 of the injection bound at 64 MiB.
    assert by["multitree-opt"]["ratio_to_lower_bound"] <= 1.01
    assert report["timing"] == "hardware" and report["lower_bound"]["binding"] == "injection"
    opt = by["multitree-opt"]
    assert by["multitree"]["steps"] == 2 * 17 and opt["tree_steps"] == 16
    assert opt["steps"] == 2 * 16 + opt["sub_chunks"] - 1
    assert opt["ratio_to_tight_bound"] == pytest.approx(
        opt["cycles"] / report["lower_bound"]["tight_cycles"])


def test_compare_matches_the_model(capsys):
    """The CLI reports exactly what the golden model computes, with the network options applied."""
    report = run_json(capsys, "compare", "-t", "ring:6", "-s", "96KiB", "-a", "ring,dbtree",
                      "--link-latency", "20", "--link-bandwidth", "32", "--json")
    topo = parse_topology("ring:6", link_bandwidth=32, link_latency=20)
    params = TimingParams()
    for r in report["results"]:
        sched = build_schedule(r["algorithm"], topo, 96 * 1024 // 4)
        assert r["cycles"] == simulate(sched, params).cycles
    assert report["lower_bound_cycles"] == lower_bound(topo, 96 * 1024, params).cycles
    assert [r["algorithm"] for r in report["results"]] == ["ring", "dbtree"]


def test_compare_table(capsys):
    assert main(["compare", "-t", "torus:4x4", "-s", "1MiB"]) == 0
    out = capsys.readouterr().out
    for name in ("ring2d", "multitree-opt", "speed-up vs ring", "lower bound"):
        assert name in out


def test_compare_skips_what_cannot_run(capsys):
    report = run_json(capsys, "compare", "-t", "fattree:2x3", "-s", "64KiB", "--json")
    assert [s["algorithm"] for s in report["skipped"]] == ["ring2d"]
    assert "ring2d" not in {r["algorithm"] for r in report["results"]}


def test_schedule_summary_and_file(capsys, tmp_path):
    out = tmp_path / "s.json"
    summary = run_json(capsys, "schedule", "-t", "torus:4x4", "-a", "multitree",
                       "--elements", "64", "--out", str(out), "--json")
    assert summary["tree_steps"] == 5 and summary["steps"] == 10
    assert summary["algorithm"] == "multitree" and summary["topology"] == "torus:4x4"
    data = json.loads(out.read_text())
    assert summary["transfers"] == sum(len(s) for s in data["steps"]) == 2 * 16 * 15
    assert data["chunk_bounds"] == [4 * i for i in range(17)]


@pytest.mark.parametrize("argv, params", [
    ([], TimingParams()),
    (["--timing", "fcfs"], TimingParams(link_order="fcfs")),
    (["--link-latency", "4", "--frequency", "2"], TimingParams(frequency_ghz=2)),
])
def test_schedule_times_multitree_opt_on_the_network_given(capsys, argv, params):
    """``schedule`` builds multitree-opt for the network and timing it is given: its recorded
    cycles are the schedule's simulated time on that network."""
    summary = run_json(capsys, "schedule", "-t", "torus:4x4", "-a", "multitree-opt", "-s",
                       "1MiB", "--json", *argv)
    latency = 4 if "--link-latency" in argv else 150
    topo = parse_topology("torus:4x4", link_latency=latency)
    sched = build_schedule("multitree-opt", topo, (1 << 20) // 4, params)
    assert summary["sub_chunks"] == sched.meta["sub_chunks"]
    assert summary["cycles"] == simulate(sched, params).cycles


def test_sweep_writes_csv_and_plot(tmp_path, capsys):
    assert main(["sweep", "-t", "torus:2x2", "--sizes", "32KiB:128KiB", "-a", "ring,multitree",
                 "--out", str(tmp_path)]) == 0
    lines = (tmp_path / "sweep.csv").read_text().splitlines()
    assert lines[0].startswith("size_bytes,algorithm") and lines[0].endswith(",timing")
    assert len(lines) == 1 + 3 * 2 and all(line.endswith(",hardware") for line in lines[1:])
    assert (tmp_path / "speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv,needle", [
    (["compare", "-t", "donut:4"], "donut:4"),
    (["compare", "-t", "torus:4x4", "-a", "ring,bogus"], "bogus"),
    (["compare", "-t", "torus:4x4", "-s", "12XB"], "12XB"),
    (["compare", "-t", "torus:4x4", "-s", "0"], "'0'"),
    (["compare", "-t", "torus:4x4", "-s", "6"], "size 6B is not a whole number of 4-byte elements"),
    (["compare", "-t", "torus:4x4", "--link-latency", "-3"], "-3"),
    (["compare", "-t", "torus:4x4", "--link-bandwidth", "0"], "'0'"),
    (["generate", "-t", "ring:4", "--link-latency", "wrap=0,default=3", "--out", "/tmp/x"],
     "link 0->3 of ring:4 has 0 cycles; a link between NIs has at least 1"),
    (["compare", "-t", "fattree:2x3", "-a", "ring2d"], "ring2d"),
    (["schedule", "-t", "torus:4x4", "-a", "multitree", "--elements", "0"], "'0'"),
    (["schedule", "-t", "torus:4x4", "-a", "ring", "--out", "/nonexistent/x.json"], "/nonexistent"),
    (["sweep", "-t", "torus:4x4", "--sizes", "64MiB:32KiB"], "64MiB:32KiB"),
    (["sweep", "-t", "torus:4x4", "--sizes", "32KiB"], "32KiB"),
    (["frobnicate"], "frobnicate"),
    (["compare", "-t", ""], "--topology/-t: must not be empty"),
    (["compare", "-t", "torus:4x4", "-a", ""], "--algorithms/-a: must not be empty"),
    (["compare", "-t", "torus:4x4", "-a", "ring,,multitree"], "empty name"),
    (["compare", "-t", "ring:4", "-s", "8192GiB"], "above the largest supported, 4TiB"),
    (["compare", "--link-latency", "99999999999999999999"], "99999999999999999999"),
    (["compare", "--frequency", "1e30"], "1e30"),
    (["compare", "--link-bandwidth", "1e-9"], "1e-9"),
    (["compare", "-t", "ring:\u0664"], "ring:N"),
    (["schedule", "-t", "ring:4", "-a", "ring", "--out", "/dev/null"], "not a regular file"),
    (["schedule", "-t", "ring:4", "-a", "ring", "--out", ""], "empty"),
    (["sweep", "-t", "ring:4", "--sizes", "32KiB:64KiB", "--out", "/etc/hostname"], "is a file"),
    (["compare", "-t", "ring:4", "--message-size", "0"], "only with --timing authors"),
    (["compare", "-t", "ring:4", "--timing", "authors", "--message-size", "512"], "512"),
    (["compare", "-t", "ring:4", "--timing", "authors", "--message-size", "abc"],
     "'abc' is not 256 or 0"),
    (["compare", "-t", "ring:4", "--bogus", "1"],
     "allreduce-rtl compare: error: unrecognized arguments: --bogus 1 (see allreduce-rtl compare"),
])
def test_bad_input(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        sys.exit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert "Traceback" not in err


def test_console_script_exit_code():
    """The installed entry point itself: exit 2, one line, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "allreduce_rtl.cli", "compare", "-t", "torus:4"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "torus:RxC" in proc.stderr


def test_algorithm_names_ignore_case(capsys):
    report = run_json(capsys, "compare", "-t", "ring:4", "-s", "64KiB", "-a", "RING,MultiTree",
                      "--json")
    assert [r["algorithm"] for r in report["results"]] == ["ring", "multitree"]


def test_one_node_reports_null_not_infinity(capsys):
    assert main(["compare", "-t", "ring:1", "-s", "4KiB", "--json"]) == 0
    text = capsys.readouterr().out
    assert "Infinity" not in text
    report = json.loads(text)
    assert all(r["cycles"] == 0 and r["algbw_GBps"] is None and r["speedup_vs_ring"] is None
               for r in report["results"])


def test_sweep_checks_its_folder_first_and_writes_both_files(tmp_path, capsys):
    (tmp_path / "speedup.png").mkdir()
    with pytest.raises(SystemExit) as exc:
        sys.exit(main(["sweep", "-t", "ring:4", "--sizes", "32KiB:64KiB", "--out", str(tmp_path)]))
    assert exc.value.code == 2
    assert not (tmp_path / "sweep.csv").exists()
    assert "speedup.png" in capsys.readouterr().err


def test_written_files_follow_the_umask(tmp_path, capsys):
    out = tmp_path / "s.json"
    old = os.umask(0o022)
    try:
        assert main(["schedule", "-t", "ring:4", "-a", "ring", "--out", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    link = tmp_path / "link.json"
    link.symlink_to(out)
    assert main(["schedule", "-t", "ring:4", "-a", "multitree", "--out", str(link)]) == 0
    assert link.is_symlink() and json.loads(out.read_text())["algorithm"] == "multitree"


def test_compare_timing_option(capsys):
    """--timing picks the link order; the report names it and its cycles are the model's."""
    topo = parse_topology("torus:4x4")
    for rule in ("fcfs", "schedule"):
        report = run_json(capsys, "compare", "-t", "torus:4x4", "-s", "64KiB", "-a",
                          "multitree", "--timing", rule, "--json")
        params = TimingParams(link_order=rule)
        sched = build_schedule("multitree", topo, 16 * 1024)
        assert report["timing"] == rule
        assert report["results"][0]["cycles"] == simulate(sched, params).cycles
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--timing", "lifo"])
    assert exc.value.code == 2
    assert "lifo" in capsys.readouterr().err


@pytest.mark.parametrize("message_size, want", [(None, 143264), ("256", 143264), ("0", 135614)])
def test_compare_timing_authors(capsys, message_size, want):
    """--timing authors counts like the MultiTree authors' simulator: their ring on torus:4x4 at
    1 MiB per node (docs/authors-simulator.md), with their --message-size (default 256)."""
    extra = ["--message-size", message_size] if message_size else []
    report = run_json(capsys, "compare", "-t", "torus:4x4", "-s", "1MiB", "-a", "ring",
                      "--timing", "authors", *extra, "--json")
    assert report["timing"] == "authors"
    assert report["message_size"] == int(message_size or 256)
    assert report["results"][0]["cycles"] == want
    train = run_json(capsys, "train", "-t", "torus:4x4", "-m", "ncf", "-a", "ring", "--timing",
                     "authors", *extra, "--json")
    assert (train["timing"], train["message_size"]) == ("authors", int(message_size or 256))


def test_schedule_text_summary_is_readable(capsys):
    """The text summary writes numbers with separators and multitree-opt's dicts as
    ``key value`` pairs, not Python reprs."""
    assert main(["schedule", "-t", "torus:4x4", "-a", "multitree-opt", "-s", "1MiB"]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    summary = run_json(capsys, "schedule", "-t", "torus:4x4", "-a", "multitree-opt", "-s",
                       "1MiB", "--json")
    assert lines["      elements"] == f"{summary['elements']:,}"
    assert lines["         timed"] == ", ".join(f"{k} {v:,}" for k, v in summary["timed"].items())
    assert "{" not in "".join(lines.values())
    assert summary["timing"] == "hardware" and lines["        timing"] == "hardware"
