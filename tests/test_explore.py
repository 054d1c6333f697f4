"""``allreduce-rtl explore``: the spec's validation and points, the SQLite store, and runs on a
real local Dask cluster, on a real ``dask scheduler`` with ``dask worker`` processes, with a
worker killed, interrupted and resumed (figures checked against ``golden_model.compare``
called here), and a hardware exploration (RTL and synthesis, slow)."""

import csv
import itertools
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from allreduce_rtl.cli import main
from allreduce_rtl.explore.spec import (HARDWARE_PARAMETERS, MAX_POINTS, examples, load_spec,
                                        parse_spec, queued)
from allreduce_rtl.explore.store import Store, export
from golden_model.compare import compare
from golden_model.errors import ConfigError
from golden_model.timing import TimingParams
from golden_model.topology import parse_topology
from golden_model.units import parse_size

REPO = Path(__file__).resolve().parent.parent
DASK = str(Path(sys.executable).with_name("dask"))

MODEL_SPEC = """
title = "small"
evaluations = ["model"]
[parameters]
topology = ["torus:4x4", "fattree:4x2"]
algorithm = ["ring", "ring2d", "multitree"]
size = ["64KiB", "1MiB"]
[[exclude]]
topology = "torus:4x4"
algorithm = "ring2d"
size = "64KiB"
"""


def _expected(params):
    """The point's model figures computed here with the golden model."""
    topo = parse_topology(params["topology"], link_bandwidth=params["link_bandwidth"],
                          link_latency=params["link_latency"])
    report = compare(topo, params["size"], [params["algorithm"]],
                     TimingParams(link_order=params["timing"]))
    return next(r for r in report["results"] if r["algorithm"] == params["algorithm"])


def _rows(db):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT key, params, status, figures, error FROM points").fetchall()
    finally:
        con.close()


# -- the spec ---------------------------------------------------------------------------------

def test_points_are_the_product_less_the_excluded():
    spec = parse_spec(MODEL_SPEC)
    want = [(t, a, parse_size(s)) for t, a, s in itertools.product(
        ["torus:4x4", "fattree:4x2"], ["ring", "ring2d", "multitree"], ["64KiB", "1MiB"])
        if (t, a, s) != ("torus:4x4", "ring2d", "64KiB")]
    got = [(p.params["topology"], p.params["algorithm"], p.params["size"]) for p in spec.points]
    assert got == want
    assert len({p.key for p in spec.points}) == len(want)
    assert all(p.group is None and p.params["link_latency"] == 150 for p in spec.points)


def test_size_ranges():
    doubling = parse_spec('evaluations = "model"\n[parameters]\ntopology = "ring:4"\n'
                          'algorithm = "ring"\nsize = "32KiB:1MiB"')
    assert [p.params["size"] for p in doubling.points] == [2**k for k in range(15, 21)]
    table = parse_spec('evaluations = "model"\n[parameters]\ntopology = "ring:4"\n'
                       'algorithm = "ring"\nsize = 4096\nlink_latency = {from = 10, to = 40, '
                       'step = 15}')
    assert [p.params["link_latency"] for p in table.points] == [10, 25, 40]


def test_hardware_groups_and_queue_order():
    spec = parse_spec("""
evaluations = ["rtl"]
[parameters]
topology = "mesh:2x2"
algorithm = ["ring", "multitree"]
size = ["1KiB", "2KiB"]
flow_control = ["message", "credit"]
""")
    groups = {json.dumps({k: p.group[k] for k in HARDWARE_PARAMETERS}) for p in spec.points}
    assert len(groups) == 2
    for p in spec.points:
        assert p.group["algorithms"] == ["ring", "multitree"]
        assert p.group["sizes"] == [1024, 2048]
    order = [p.params["flow_control"] for p in queued(spec.points)]
    # round robin: the two configurations alternate, each builds once at the start
    assert order == ["message", "credit"] * 4


@pytest.mark.parametrize("text, words", [
    ("evaluations = ['model']\n[parameters]\nalgorithm = 'ring'\nsize = 1024",
     "parameters.topology is missing"),
    ("evaluations = ['modle']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize=1024",
     "evaluations: ['modle']"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='rign'\nsize=1024",
     "parameters.algorithm: 'rign' is not one of"),
    ("evaluations = ['model']\n[parameters]\ntopology='torus:0x4'\nalgorithm='ring'\nsize=1024",
     "parameters.topology:"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize='1KiB'\n"
     "flow_control = ['message', 'credit']", "parameters.flow_control has 2 values"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize=1024\n"
     "link_latency = -1", "parameters.link_latency: -1 must be at least 0"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize=1023",
     "not a whole number of 4-byte elements"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm=['ring','ring']\n"
     "size=1024", "'ring' is listed twice"),
    ("evaluations = ['model']\ncolour = 1\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\n"
     "size=1024", "unknown key 'colour'"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize=1024\n"
     "[[exclude]]\nalgorithm = 'ring'", "every point is excluded"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize=1024\n"
     "[rtl]\nsimulator = 'verilator'", "[rtl] gives options of the rtl evaluation"),
    ("evaluations = ['cost']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize=1024\n"
     "[cost]\ndevice = 'xc7'", "[cost] device: 'xc7'"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\n"
     "size = {from = 1, to = 1024, factor = 1.0}", "factor 1.0 must be a finite number above 1"),
    ("evaluations = ['model']\n[parameters]\ntopology='ring:4'\nalgorithm='ring'\nsize=1024\n"
     "link_latency = {from = 0, to = 1000, step = 1}\nlink_bandwidth = {from = 1, to = 200, "
     "step = 1}", f"more than {MAX_POINTS:,}"),
    ("evaluations = ['model'\n", "not valid TOML"),
])
def test_bad_specs_name_the_value(text, words):
    with pytest.raises(ConfigError) as exc:
        parse_spec(text, "x.toml")
    assert words in str(exc.value)
    assert str(exc.value).startswith("in x.toml: ")


def test_shipped_examples_validate_and_resolve(tmp_path, monkeypatch):
    shipped = examples()
    assert {"paper-sweep", "hardware-pareto"} <= set(shipped)
    monkeypatch.chdir(tmp_path)             # no examples/ folder here: the packaged copy
    spec = load_spec("examples/paper-sweep.toml")
    topologies = {p.params["topology"] for p in spec.points}
    assert topologies == {"torus:4x4", "torus:8x8", "mesh:4x4", "mesh:8x8"}
    assert len({p.params["size"] for p in spec.points}) == 12       # 32 KiB .. 64 MiB
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec("nonesuch.toml")


# -- the store --------------------------------------------------------------------------------

def test_store_writes_each_point_once(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.put("k1", {"a": 1}, {}, "boom", {"host": "h"})
        store.put("k2", {"a": 2}, {"x": 2.5}, None, {"host": "h"})
        assert store.done_keys() == {"k2"}
        store.put("k1", {"a": 1}, {"x": 1.5}, None, {"host": "h"})     # the retry replaces it
        assert store.done_keys() == {"k1", "k2"}
        rows = store.rows(["k2", "k1"])
    assert [r["figures"]["x"] for r in rows] == [2.5, 1.5]
    assert len(_rows(path)) == 2
    export(rows, tmp_path / "r.csv")
    got = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert [(g["a"], g["x"], g["status"]) for g in got] == [("2", "2.5", "ok"), ("1", "1.5", "ok")]
    pq = pytest.importorskip("pyarrow.parquet")
    export(rows, tmp_path / "r.parquet", "parquet")
    assert pq.read_table(tmp_path / "r.parquet").column("x").to_pylist() == [2.5, 1.5]


def test_a_store_that_is_not_sqlite_is_one_line(tmp_path, capsys):
    (tmp_path / "results.sqlite").write_text("not a database " * 100)
    spec = tmp_path / "s.toml"
    spec.write_text("evaluations = 'model'\n[parameters]\ntopology = 'ring:4'\n"
                    "algorithm = 'ring'\nsize = 1024\n")
    assert main(["explore", str(spec), "--out", str(tmp_path), "--resume"]) == 1
    err = capsys.readouterr().err
    assert "cannot use" in err and "results store" in err and len(err.strip().splitlines()) == 1


# -- runs on Dask -----------------------------------------------------------------------------

def test_local_cluster_run_resume_and_failures(tmp_path, capsys):
    spec = tmp_path / "small.toml"
    spec.write_text(MODEL_SPEC)
    out = tmp_path / "out"
    # ring2d cannot run on a fat tree: those points fail, the others go on
    assert main(["explore", str(spec), "--out", str(out), "--workers", "2"]) == 1
    rows = _rows(out / "results.sqlite")
    points = parse_spec(MODEL_SPEC).points
    assert len(rows) == len(points) == 11
    for key, params, status, figures, error in rows:
        params, figures = json.loads(params), json.loads(figures)
        if params["topology"] == "fattree:4x2" and params["algorithm"] == "ring2d":
            assert status == "failed" and "ring2d" in error and "fattree" in error
            continue
        want = _expected(params)
        assert status == "ok", error
        assert figures["model_cycles"] == want["cycles"]
        assert figures["model_speedup_vs_ring"] == pytest.approx(want["speedup_vs_ring"])
    summary = (out / "summary.md").read_text()
    assert "## Failed points" in summary and summary.count("fattree:4x2 ring2d") == 2
    assert (out / "speedup-torus-4x4.png").read_bytes()[:4] == b"\x89PNG"
    assert len(list(csv.DictReader(open(out / "results.csv")))) == 11
    capsys.readouterr()
    # the store is not overwritten without --resume; with it, only the failed points run again
    assert main(["explore", str(spec), "--out", str(out), "--workers", "1"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["explore", str(spec), "--out", str(out), "--workers", "1", "--resume",
                 "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["evaluated"] == 2 and result["failed"] == 2 and result["ok"] == 9
    assert len(_rows(out / "results.sqlite")) == 11


def test_unreachable_scheduler_is_one_line(tmp_path, capsys, monkeypatch):
    from allreduce_rtl.explore import engine
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 2)
    spec = tmp_path / "s.toml"
    spec.write_text("evaluations = 'model'\n[parameters]\ntopology = 'ring:4'\n"
                    "algorithm = 'ring'\nsize = 1024\n")
    t0 = time.monotonic()
    code = main(["explore", str(spec), "--out", str(tmp_path / "o"),
                 "--scheduler", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 1 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err
    assert len(err.strip().splitlines()) == 1
    assert time.monotonic() - t0 < 60


# -- an external cluster, a killed worker, an interrupted run (slow) ---------------------------

#: Points of about a second each (multitree-opt times its candidates), 16 of them.
SLOW_SPEC = """
title = "fault test"
evaluations = ["model"]
[parameters]
topology = "mesh:8x8"
algorithm = "multitree-opt"
size = ["256KiB", "1MiB", "4MiB", "16MiB"]
link_latency = [50, 100, 150, 300]
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Every point of SLOW_SPEC evaluated here, in this process, without Dask."""
    return {p.key: _expected(p.params)["cycles"] for p in parse_spec(SLOW_SPEC).points}


def _check_against(db, reference):
    rows = _rows(db)
    assert len(rows) == len({r[0] for r in rows}) == len(reference)
    for key, _params, status, figures, error in rows:
        assert status == "ok", error
        assert json.loads(figures)["model_cycles"] == reference[key]


def _wait_rows(db, n, proc, timeout=300):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert proc.poll() is None, "the exploration ended before it could be interrupted"
        try:
            if db.exists() and len(_rows(db)) >= n:
                return
        except sqlite3.OperationalError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} points in {timeout} s")


def _start(args, **kw):
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kw)


@pytest.fixture
def scheduler(tmp_path):
    """A real ``dask scheduler`` on 127.0.0.1 and two ``dask worker`` processes (no nanny, so a
    killed worker stays dead); yields (address, [worker processes])."""
    file = tmp_path / "scheduler.json"
    procs = [_start([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--no-dashboard", "--scheduler-file", str(file)], cwd=tmp_path)]
    try:
        t0 = time.monotonic()
        while not file.exists() and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        address = json.loads(file.read_text())["address"]
        workers = [_start([DASK, "worker", address, "--nthreads", "1", "--no-nanny",
                           "--no-dashboard"], cwd=REPO) for _ in range(2)]
        procs += workers
        yield address, workers
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()


def _explore(out, *extra):
    spec = out.parent / "fault.toml"
    spec.write_text(SLOW_SPEC)
    return [sys.executable, "-m", "allreduce_rtl.cli", "explore", str(spec), "--out", str(out),
            *extra]


@pytest.mark.slow
def test_external_scheduler_with_a_worker_killed(tmp_path, scheduler, reference):
    address, workers = scheduler
    out = tmp_path / "out"
    proc = _start(_explore(out, "--scheduler", address), cwd=REPO)
    _wait_rows(out / "results.sqlite", 3, proc)
    workers[0].send_signal(signal.SIGKILL)          # its points run again on the other
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    _check_against(out / "results.sqlite", reference)


@pytest.mark.slow
def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, reference):
    out = tmp_path / "out"
    proc = _start(_explore(out, "--workers", "2"), cwd=REPO)
    _wait_rows(out / "results.sqlite", 4, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "--resume" in err
    held = len(_rows(out / "results.sqlite"))
    assert 4 <= held < len(reference)
    done = subprocess.run(_explore(out, "--workers", "2", "--resume", "--json"), cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["evaluated"] == len(reference) - held
    _check_against(out / "results.sqlite", reference)


@pytest.mark.slow
def test_hardware_exploration_shares_builds(tmp_path):
    """RTL and cost points: every run bit for bit, two configurations built once each, cost
    from synthesis; the Pareto plot written."""
    spec = tmp_path / "hw.toml"
    spec.write_text("""
evaluations = ["rtl", "cost"]
[parameters]
topology = "mesh:2x2"
algorithm = ["multitree", "ring"]
size = ["1KiB", "4KiB"]
link_latency = 4
dtype = "int32"
buffer_copies = [1, 2]
""")
    out = tmp_path / "out"
    assert main(["explore", str(spec), "--out", str(out), "--workers", "2",
                 "--build-dir", str(tmp_path / "build")]) == 0
    rows = [dict(r) for r in csv.DictReader(open(out / "results.csv"))]
    assert len(rows) == 8 and all(r["rtl_verified"] == "True" for r in rows)
    assert len({r["provenance_build_key"] for r in rows}) == 2
    for r in rows:
        assert int(r["rtl_cycles"]) >= int(r["hw_model_cycles"])
        assert int(r["cost_network_cells"]) == 4 * int(r["cost_ni_cells"])
    assert (out / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    # one copy of the banks against two: the second has twice the buffer memory
    bits = {r["buffer_copies"]: int(r["cost_ni_memory_bits"]) for r in rows}
    assert bits["2"] > bits["1"]


def test_sweep_on_two_workers_writes_what_it_writes_alone(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["sweep", "-t", "torus:4x4", "--sizes", "64KiB:256KiB", "-a", "ring,multitree",
                 "-o", str(one)]) == 0
    assert main(["sweep", "-t", "torus:4x4", "--sizes", "64KiB:256KiB", "-a", "ring,multitree",
                 "-o", str(two), "--workers", "2"]) == 0
    assert (one / "sweep.csv").read_text() == (two / "sweep.csv").read_text()


# -- what a new user's trial broke -------------------------------------------------------------

def test_ranges_by_index_include_to_and_drop_repeats():
    spec = parse_spec('evaluations = "model"\n[parameters]\ntopology = "ring:4"\n'
                      'algorithm = "ring"\nsize = 4096\n'
                      'link_bandwidth = {from = 1.0, to = 1.5, step = 0.1}\n'
                      'link_latency = {from = 1, to = 10, factor = 1.5}')
    assert sorted({p.params["link_bandwidth"] for p in spec.points}) == [
        1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    # 1 * 1.5^i rounded: 1, 2 (1.5), 2 (2.25, dropped), 3, 5, 8 (7.59)
    assert sorted({p.params["link_latency"] for p in spec.points}) == [1, 2, 3, 5, 8]


@pytest.mark.parametrize("extra, words", [
    ("link_latency = {from = 1, to = 10, factor = inf}", "factor inf must be a finite number"),
    ("link_bandwidth = {from = 1.0, to = nan, step = 1.0}", "range to nan is not a finite"),
    ("link_bandwidth = {from = 1.0, to = inf, step = 1.0}", "range to inf is not a finite"),
    ("link_bandwidth = {from = 1.0, to = 2.0, step = 1e-300}", "more than 100,000"),
])
def test_bad_ranges(extra, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        parse_spec('evaluations = "model"\n[parameters]\ntopology = "ring:4"\n'
                   f'algorithm = "ring"\nsize = 4096\n{extra}')


def test_sizes_beyond_the_limit_and_bad_options_fail_at_once():
    from golden_model.algorithms import MAX_ELEMENTS
    with pytest.raises(ConfigError, match="parameters.size: .* too large"):
        parse_spec('evaluations = "model"\n[parameters]\ntopology = "ring:4"\n'
                   f'algorithm = "ring"\nsize = {(MAX_ELEMENTS + 1) * 4}')
    with pytest.raises(ConfigError, match=r"\[cost\] device: \['generic'\]"):
        parse_spec('evaluations = "cost"\n[parameters]\ntopology = "ring:4"\n'
                   'algorithm = "ring"\nsize = 4096\n[cost]\ndevice = ["generic"]')
    with pytest.raises(ConfigError, match="title"):
        parse_spec('title = "a\\nb"\nevaluations = "model"\n[parameters]\ntopology = "ring:4"\n'
                   'algorithm = "ring"\nsize = 4096')


def test_topologies_are_normalised():
    spec = parse_spec('evaluations = "model"\n[parameters]\ntopology = "TORUS:04x4"\n'
                      'algorithm = "ring"\nsize = 4096')
    assert spec.points[0].params["topology"] == "torus:4x4"
    with pytest.raises(ConfigError, match="'torus:4x4' is listed twice"):
        parse_spec('evaluations = "model"\n[parameters]\ntopology = ["torus:4x4", '
                   '"torus:04x4"]\nalgorithm = "ring"\nsize = 4096')


def test_keys_leave_out_defaults_and_hold_the_hardware_group():
    base = 'evaluations = "{e}"\n[parameters]\ntopology = "mesh:2x2"\nalgorithm = "ring"\n'
    plain = parse_spec(base.format(e="model") + "size = 4096").points[0]
    explicit = parse_spec(base.format(e="model") + "size = 4096\nlink_latency = 150").points[0]
    assert plain.key == explicit.key
    one = parse_spec(base.format(e="rtl") + 'size = "1KiB"').points[0]
    two = [p for p in parse_spec(base.format(e="rtl") + 'size = ["1KiB", "64KiB"]').points
           if p.params["size"] == 1024][0]
    assert one.params == two.params and one.key != two.key      # its hardware differs


def test_scheduler_addresses_are_checked_first(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text("evaluations = 'model'\n[parameters]\ntopology = 'ring:4'\n"
                    "algorithm = 'ring'\nsize = 1024\n")
    for bad in ("garbage", "http://127.0.0.1:8786", "tcp://127.0.0.1:99999"):
        with pytest.raises(SystemExit) as exc:      # argparse's usage error
            main(["explore", str(spec), "--out", str(tmp_path / "o"), "--scheduler", bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is not a Dask scheduler address" in err[0]
    assert not (tmp_path / "o").exists()


def test_environment_failures_before_the_run(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "s.toml"
    spec.write_text("evaluations = ['model', 'cost']\n[parameters]\ntopology = 'ring:4'\n"
                    "algorithm = 'ring'\nsize = 1024\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["explore", str(spec), "--out", str(tmp_path / "o"), "--build-dir",
                 str(blocker / "x")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot use the build folder" in err[0]
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)      # not installed
    assert main(["explore", str(spec), "--out", str(tmp_path / "o"), "--export",
                 "parquet"]) == 1
    assert "needs pyarrow" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_damaged_and_foreign_stores_are_one_line(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(MODEL_SPEC)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    con = sqlite3.connect(foreign / "results.sqlite")
    con.execute("CREATE TABLE points (id INTEGER, value TEXT)")
    con.commit()
    con.close()
    assert main(["explore", str(spec), "--out", str(foreign), "--resume"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a results store of this tool" in err[0]


def test_a_second_run_on_one_folder_is_refused(tmp_path, capsys):
    import fcntl
    spec = tmp_path / "s.toml"
    spec.write_text(MODEL_SPEC)
    out = tmp_path / "o"
    out.mkdir()
    with open(out / ".explore.lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert main(["explore", str(spec), "--out", str(out)]) == 2
    assert "another allreduce-rtl explore is writing" in capsys.readouterr().err


def test_failed_points_are_not_on_the_pareto_front():
    from allreduce_rtl.explore.report import render
    spec = parse_spec('evaluations = ["cost"]\n[parameters]\ntopology = "mesh:2x2"\n'
                      'algorithm = ["ring", "multitree"]\nsize = 1024')
    rows = [{"params": p.params, "status": status, "error": None if status == "ok" else "x",
             "figures": {"cost_network_cells": cells, "hw_time_us": t}, "provenance": {}}
            for p, status, cells, t in zip(spec.points, ("ok", "failed"), (100, 10), (5.0, 1.0))]
    summary, images = render(spec, rows, command="c", seconds=1.0, workers="w",
                             export_name="results.csv")
    front = summary.split("## Time against hardware cost")[1].split("## Failed points")[0]
    assert "1 of 1 points on the front" in front and "ring" in front
    assert "multitree" not in front and "pareto.png" in images


@pytest.mark.slow
def test_a_scheduler_without_workers_is_one_line(tmp_path, capsys, monkeypatch):
    from allreduce_rtl.explore import engine
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 3)
    file = tmp_path / "scheduler.json"
    proc = _start([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                   "--scheduler-file", str(file)], cwd=tmp_path)
    try:
        t0 = time.monotonic()
        while not file.exists() and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        address = json.loads(file.read_text())["address"]
        spec = tmp_path / "s.toml"
        spec.write_text(MODEL_SPEC)
        assert main(["explore", str(spec), "--out", str(tmp_path / "o"), "--scheduler",
                     address]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "has no workers (waited 3 s)" in err[0]
        assert not (tmp_path / "o").exists()
    finally:
        proc.kill()
        proc.wait()


def test_spec_files_odd_and_ordinary(tmp_path):
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + b"evaluations = 'model'\n[parameters]\ntopology = 'ring:4'\n"
                    b"algorithm = 'ring'\nsize = 1024\n")
    assert len(load_spec(str(bom)).points) == 1
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_spec("/dev/null")
    with pytest.raises(ConfigError, match=r"\[\[exclude\]\] #1 .* matches no point"):
        parse_spec("evaluations = 'model'\n[parameters]\ntopology = 'ring:4'\n"
                   "algorithm = 'ring'\nsize = 1024\n[[exclude]]\ntopology = 'ring:5'")
