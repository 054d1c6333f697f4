"""Formal proofs (``tb.formal``, ``make formal``): every property proved, its cover reached and
its planted bug caught with a counterexample trace; the command's report and its bad input."""

import subprocess
import sys

import pytest

from tb.formal import FormalProperty, all_properties
from tb.formal.run import check, format_result

PROPS = all_properties()


def _assert_holds(result, out):
    prop = result.prop
    assert result.proof.status == "pass", (prop.name, result.proof.log[-2000:])
    assert result.cover.status == "pass" and result.cover.step is not None, prop.name
    assert 1 <= result.cover.step <= prop.depth
    assert result.bug.status == "fail", (prop.name, prop.bug)
    assert result.bug.trace == out / f"{prop.name}.bug.vcd"
    assert result.bug.trace.read_text().startswith("$")   # a VCD's header


def test_register_link_is_proved_with_its_cover_and_planted_bug(tmp_path):
    """One property end to end in the default suite (5 s): the runner, SymbiYosys and yices."""
    (prop,) = [p for p in PROPS if p.name == "link.exact-delay.register"]
    result = check(prop, tmp_path)
    _assert_holds(result, tmp_path)
    line = format_result(result)
    assert line.startswith("link.exact-delay.register") and "proved" in line
    assert f"k-induction, depth {prop.depth}" in line


@pytest.mark.slow
@pytest.mark.parametrize("prop", PROPS, ids=[p.name for p in PROPS])
def test_property_is_proved_covered_and_catches_its_planted_bug(prop, tmp_path):
    _assert_holds(check(prop, tmp_path), tmp_path)


def test_every_property_is_described():
    names = [p.name for p in PROPS]
    assert len(names) == len(set(names))
    blocks = {name.split(".")[0] for name in names}
    assert blocks == {"credit", "link", "fifo", "router", "buffer", "cxl"}
    for prop in PROPS:
        assert prop.claim and prop.bug and prop.generalises, prop.name


@pytest.mark.parametrize("field, value, message", [
    ("method", "pdr", "method must be one of"),
    ("depth", 0, "depth must be an integer >= 1"),
])
def test_bad_property_is_refused(field, value, message):
    kwargs = dict(name="x.y", claim="c", build=lambda bug: None, bug="b", depth=3)
    kwargs[field] = value
    with pytest.raises(ValueError, match=message):
        FormalProperty(**kwargs)


@pytest.mark.parametrize("args, message", [
    (["-k", "no-such-block"], "no property name contains 'no-such-block'"),
    (["--jobs", "0"], "--jobs must be at least 1, not 0"),
])
def test_command_refuses_bad_input_in_one_line(args, message):
    done = subprocess.run([sys.executable, "-m", "tb.formal", *args], capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_command_lists_the_properties():
    done = subprocess.run([sys.executable, "-m", "tb.formal", "--list"], capture_output=True,
                          text=True, check=True)
    assert [line.split()[0] for line in done.stdout.splitlines()] == [p.name for p in PROPS]
