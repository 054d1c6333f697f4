"""Bad input to every option of every command: exit code 2, one line naming the problem, no
traceback, nothing written. The options are found by walking the argparse parser, so a new
option is probed without being listed here; each gets values that its type or choices must
refuse before any work starts (hardware commands included).

Then the classes argparse cannot catch, command by command: values at the extremes of the
allowed ranges (in options and inside COARSE system strings), lists with empty items, and
one-node networks.
"""

import argparse
import json
import sys

import pytest

from allreduce_rtl import options
from allreduce_rtl.cli import build_parser, main

#: A valid value for each required option (so the probe reaches the option under test).
REQUIRED = {"--algorithm": "ring", "--model": "ncf", "--out": "OUT"}


def _commands():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _bad_values(action):
    """Values the action's type or choices must refuse (``--``: argparse would hand the command
    an empty list without checking it)."""
    refused = _refused(action)
    return ["--", *refused] if refused else []


def _refused(action):
    if action.choices is not None:
        return ["bogus", ""]
    t = action.type
    if t is options.text:
        return ["", "   "]
    if t is options.size:
        return ["", "12XB", "-1", "0", "1.5", "9" * 30 + "GiB"]
    if t is options.scheduler_address:
        return ["", "garbage", "http://127.0.0.1:8786", "tcp://127.0.0.1:0",
                "tcp://127.0.0.1:65536", "tcp://:8786"]
    if t is options.message_size:
        return ["", "abc", "-1", "1", "512", "256B", "1e400"]
    rng = getattr(t, "range", None)
    if rng is not None:
        kind, low, high, low_open = rng
        bad = ["", "abc", "nan", "inf", "-inf", "1e400", "9" * 30, repr(high * 2 + 1)]
        bad.append(repr(low) if low_open else repr(low - 1))
        if kind is int:
            bad.append("1.5")
        return bad
    return []


def _cases():
    for name, parser in _commands().items():
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            for value in _bad_values(action):
                yield name, action.option_strings[-1], value


CASES = list(_cases())


def test_every_typed_option_is_probed():
    """Every option that takes a value has a type or choices the probe knows (else a new option
    would escape it)."""
    untyped = [(name, a.option_strings[-1]) for name, p in _commands().items()
               for a in p._actions
               if a.option_strings and a.nargs != 0 and not _bad_values(a)
               and a.dest not in ("help", "sweep_asymmetry")]
    assert not untyped, untyped


@pytest.mark.parametrize("command, option, value", CASES)
def test_bad_value_is_one_line_and_exit_2(command, option, value, tmp_path, capsys):
    argv = [command]
    for p in _commands()[command]._actions:
        if p.required and p.option_strings and p.option_strings[-1] != option:
            given = REQUIRED[p.option_strings[0]]
            argv += [p.option_strings[0], str(tmp_path / "out") if given == "OUT" else given]
    with pytest.raises(SystemExit) as exc:       # argparse exits; a later refusal returns 2
        sys.exit(main(argv + [f"{option}={value}"]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and option in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv", [
    ["compare", "-t", "torus:4x4", "--link-bandwidth", "0.001", "--size", "1GiB"],
    ["compare", "-t", "torus:4x4", "--link-bandwidth", "1e6", "--link-latency", "1000000"],
    ["compare", "-t", "ring:8", "--frequency", "100", "--flit-bytes", "4096", "--size", "1GiB"],
    ["compare", "-t", "ring:8", "--frequency", "100", "--link-bandwidth", "0.001",
     "--link-latency", "1000000", "--size", "1GiB", "--flit-bytes", "1"],
    ["train", "-m", "ncf", "-t", "torus:2x2", "--link-bandwidth", "0.001",
     "--link-latency", "1000000", "--frequency", "100"],
    ["coarse", "--model", "ncf", "--system", "coarse:W=8,M=4,local=0.001,remote=1e6"],
    ["coarse", "--model", "vgg16", "--local-bandwidth", "0.001", "--remote-bandwidth", "0.001",
     "--gpu-bandwidth", "1e6", "--ring-bandwidth", "0.001"],
    ["coarse", "--model", "ncf", "--system", "coarse:W=8,M=4,lat_local=1000,lat_remote=0"],
    ["coarse", "--model", "ncf", "--sweep-asymmetry", "1/9000,1e5"],
])
def test_extremes_of_the_allowed_ranges(argv, capsys):
    """At the edges of every range the model computes (exit 0) with finite JSON numbers."""
    code, out, err = _run([*argv, "--json"], capsys)
    assert code == 0, err
    report = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert report


@pytest.mark.parametrize("argv, needle", [
    (["coarse", "--system", "coarse:W=8,M=4,local=1e-9"], "local bandwidth"),
    (["coarse", "--system", "coarse:W=8,M=4,ring=2e6"], "ring bandwidth"),
    (["coarse", "--system", "coarse:W=8,M=4,lat_remote=1e9"], "lat_remote latency"),
    (["coarse", "--system", "coarse:W=8,M=4,lat_local=-1"], "lat_local latency"),
    (["coarse", "--sweep-asymmetry", "1e-9"], "asymmetry ratio 1e-09"),
    (["coarse", "--sweep-asymmetry", ","], "','"),
    (["coarse", "--sweep-asymmetry", "1,,2"], "1,,2"),
    (["compare", "-a", "ring,,multitree"], "empty name"),
    (["compare", "-a", ","], "empty name"),
    (["report", "--models", "ncf,,alexnet"], "empty"),
    (["report", "--topologies", ","], "empty"),
    (["cost", "--design", ","], "--design: design list ',' has an empty name"),
    (["sweep", "--sizes", ":"], "':'"),
])
def test_semantic_bad_input_is_one_line_naming_what_the_user_gave(argv, needle, capsys,
                                                                  tmp_path):
    code, _, err = _run(argv, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["compare", "-t", "ring:1", "--json"],
    ["schedule", "-t", "ring:1", "-a", "multitree", "--json"],
    ["train", "-m", "ncf", "-t", "mesh:1x1", "--json"],
])
def test_one_node_networks(argv, capsys):
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    assert json.loads(out)


def test_one_node_demo_reports_without_a_speed_up(tmp_path, capsys):
    code, out, err = _run(["demo", "-t", "ring:1", "--elements", "16", "--link-latency", "2",
                           "--simulator", "icarus", "--out", str(tmp_path / "d")], capsys)
    assert code == 0, err
    assert "no transfers" in out and "matches the golden model" in out


@pytest.mark.parametrize("argv, needle", [
    (["schedule", "-a", "ring", "--out", "{tmp}/new/"], "a file name, not a folder"),
    (["schedule", "-a", "ring", "--out", "{tmp}/" + "x" * 300 + ".json"], "too long"),
    (["schedule", "-a", "ring", "--out", "{tmp}/missing/s.json"], "does not exist"),
    (["sweep", "-t", "torus:2x2", "--sizes", "32KiB:32KiB", "--out", "{tmp}/file"],
     "it is a file"),
])
def test_output_paths_that_cannot_be_written(argv, needle, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code, _, err = _run([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]     # nothing written


def test_an_unusable_build_folder_is_one_line_and_exit_1(tmp_path, capsys):
    """An environment failure, not bad input: exit code 1, one line naming the folder."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    code, _, err = _run(["demo", "-t", "ring:2", "--elements", "8", "--link-latency", "1",
                         "--simulator", "icarus", "--out", str(tmp_path / "d"),
                         "--build-dir", str(blocker)], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "cannot use the build folder" in err and str(blocker) in err


def test_report_on_one_node_and_with_ring_left_out(tmp_path, capsys):
    """A one-node network has no speed-ups to report; ring, the baseline, is always added."""
    for topo, algorithms in (("ring:1", []), ("torus:2x2", ["--algorithms", "MultiTree"])):
        out = tmp_path / topo.replace(":", "-")
        code, _, err = _run(["report", "--models", "ncf", "--topologies", topo, "--sizes",
                             "32KiB:32KiB", "--out", str(out), *algorithms], capsys)
        assert code == 0, err
        data = json.loads((out / "report.json").read_text())
        rows = data["training"][topo]["ncf"]["overlapped"]["results"]
        names = {r["algorithm"] for r in rows}
        assert "ring" in names and (not algorithms or names == {"ring", "multitree"})
