"""Schedule exporters (``golden_model.exporters``) and the ``schedule`` command's file output."""

import json

import pytest

from allreduce_rtl.cli import main
from golden_model.algorithms import build_schedule
from golden_model.errors import ConfigError
from golden_model.exporters import EXPORTERS, export, exporter_for
from golden_model.topology import parse_topology


def test_json_export_holds_every_transfer():
    sched = build_schedule("multitree", parse_topology("torus:2x2"), 16)
    data = json.loads(export(sched, "json"))
    assert data == json.loads(json.dumps(sched.to_json()))
    transfers = [(i, t["src"], t["dst"], t["chunk"]) for i, step in enumerate(data["steps"])
                 for t in step]
    assert transfers == [(i, t.src, t.dst, t.chunk) for i, t in sched.transfers()]


def test_format_by_name_or_suffix():
    assert exporter_for("JSON").name == "json"
    assert exporter_for(None, "out/s.json").name == "json"
    assert exporter_for(None, "out/s.unknown").name == "json"     # the default
    for e in EXPORTERS.values():
        assert exporter_for(None, f"x{e.suffix}") is e
    with pytest.raises(ConfigError, match="unknown schedule format 'yaml'"):
        exporter_for("yaml")


def test_schedule_command_writes_the_format(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["schedule", "-t", "ring:4", "-a", "ring", "-e", "8", "--out", str(out),
                 "--format", "json", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["format"] == "json" and summary["out"] == str(out)
    assert json.loads(out.read_text())["transfers"] == summary["transfers"]


def test_format_without_a_file_is_refused(capsys):
    assert main(["schedule", "-a", "ring", "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--format json" in err and "--out" in err


@pytest.mark.parametrize("name", ["ring", "halving-doubling", "multitree-opt"])
def test_schedule_json_reads_back(name):
    """``from_json`` gives back the same schedule: every transfer, route, chunk and meta key;
    the JSON says which schema and tool wrote it."""
    from golden_model.provenance import SCHEMA_VERSION
    from golden_model.schedule import AllReduceSchedule
    topo = parse_topology("torus:4x4")
    sched = build_schedule(name, topo, 100_003)
    text = export(sched, "json")
    back = AllReduceSchedule.from_json(text)
    assert back.to_json() == json.loads(text)
    assert [(t.src, t.dst, t.chunk, t.op, t.route) for _, t in back.transfers()] == \
        [(t.src, t.dst, t.chunk, t.op, t.route) for _, t in sched.transfers()]
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION and data["tool"] == "allreduce-rtl"


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema_version=99), "schema_version 99; this reader reads 1"),
    (lambda d: d.pop("steps"), "missing or malformed 'steps'"),
    (lambda d: d["chunk_bounds"].__setitem__(1, 0), "not the near-equal cut"),
    (lambda d: d["steps"][0][0].update(op="ADD"), "missing or malformed 'ADD'"),
    (lambda d: d["steps"][0].pop(), "lacks contributions"),
])
def test_schedule_json_reader_errors(change, message):
    from golden_model.schedule import AllReduceSchedule
    data = build_schedule("ring", parse_topology("ring:4"), 8).to_json()
    change(data)
    with pytest.raises(ConfigError, match=message):
        AllReduceSchedule.from_json(data)
    with pytest.raises(ConfigError, match="malformed"):
        AllReduceSchedule.from_json("{not json")


def test_command_json_says_its_schema(capsys):
    from golden_model.provenance import SCHEMA_VERSION, tool_version
    assert main(["compare", "-t", "ring:4", "-s", "1KiB", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report)[:3] == ["schema_version", "tool", "tool_version"]
    assert (report["schema_version"], report["tool_version"]) == (SCHEMA_VERSION, tool_version())
