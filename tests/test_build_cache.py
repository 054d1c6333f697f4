"""The simulation build cache (``tb.build``): keyed by everything it compiles.

An edit to any source the Verilog is generated from (here the router, in a subpackage of
``hdl/``) must rebuild; an edit that leaves the generated Verilog unchanged (a comment) must
regenerate the Verilog but reuse the simulator build, which is keyed by the Verilog's text. The
edits happen in a temporary copy of the packages, imported by a child Python process.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tb.build import sources_digest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ROUTER = pathlib.Path("hdl", "router", "router.py")

# A tiny router network, built in Icarus; prints what the build did.
_PROBE = """
import json, sys
from golden_model.topology import parse_topology
from tb.router.build import RouterBuild
b = RouterBuild(parse_topology("mesh:2x2"), "icarus", {"link_latency": 1},
                build_root=sys.argv[1]).build()
print(json.dumps({"built_now": b.built_now, "build_dir": str(b.build_dir),
                  "verilog_dir": str(b.verilog_dir)}))
"""


def _copy(tmp_path):
    src = tmp_path / "src"
    for pkg in ("golden_model", "hdl", "tb"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return src


def _probe(src, cache):
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", _PROBE, str(cache)], env=env, cwd=src,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # the child really imported the copy
    assert pathlib.Path(result["verilog_dir"]).is_relative_to(cache)
    return result


def test_digest_covers_subpackages_and_the_golden_model(tmp_path):
    src = _copy(tmp_path)
    packages = [src / "hdl", src / "golden_model"]
    before = sources_digest(packages)
    assert sources_digest(packages) == before
    (src / ROUTER).write_text((src / ROUTER).read_text() + "\n# edited\n")
    after_router = sources_digest(packages)
    assert after_router != before
    lowering = src / "golden_model" / "lowering.py"
    lowering.write_text(lowering.read_text() + "\n# edited\n")
    assert sources_digest(packages) != after_router


def test_a_router_edit_rebuilds_and_a_comment_reuses_the_build(tmp_path):
    src, cache = _copy(tmp_path), tmp_path / "cache"
    first = _probe(src, cache)
    assert first["built_now"]
    again = _probe(src, cache)
    assert not again["built_now"] and again["build_dir"] == first["build_dir"]

    # A comment: the Verilog is generated again (its sources changed) but is the same text,
    # so the simulator build is reused.
    router = src / ROUTER
    router.write_text(router.read_text() + "\n# a comment changes no hardware\n")
    comment = _probe(src, cache)
    assert comment["verilog_dir"] != first["verilog_dir"]
    assert not comment["built_now"] and comment["build_dir"] == first["build_dir"]

    # A change of the router's hardware (a signal's name is in the Verilog): rebuilt.
    text = router.read_text()
    assert 'name=f"won{q}"' in text
    router.write_text(text.replace('name=f"won{q}"', 'name=f"granted{q}"'))
    edited = _probe(src, cache)
    assert edited["built_now"] and edited["build_dir"] != first["build_dir"]
    assert "granted" in next(pathlib.Path(edited["build_dir"]).glob("*.v")).read_text()


@pytest.mark.parametrize("option, value", [("cxx_opt", "-O2"), ("waves", True)])
def test_build_options_are_part_of_the_key(option, value, tmp_path):
    from golden_model.topology import parse_topology
    from tb.router.build import RouterBuild
    topo = parse_topology("mesh:2x2")
    base = RouterBuild(topo, "verilator", {"link_latency": 1}, build_root=tmp_path)
    if option == "waves":
        other = RouterBuild(topo, "verilator", {"link_latency": 1}, build_root=tmp_path)
        other.waves = True
    else:
        other = RouterBuild(topo, "verilator", {"link_latency": 1}, build_root=tmp_path,
                            **{option: value})
    assert base.build_dir != other.build_dir
    assert base.verilog_dir == other.verilog_dir     # the same design, generated once
