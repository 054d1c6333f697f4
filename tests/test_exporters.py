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
