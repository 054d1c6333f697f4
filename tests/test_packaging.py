"""``generate``'s packaging: module-name prefixes (two networks in one design), the port
description from Amaranth's metadata, the file list and the FuseSoC core file (read by FuseSoC's
own parser, then linted)."""

import json
from pathlib import Path

import pytest

from allreduce_rtl.cli import main
from allreduce_rtl.verilog_names import module_names, prefix_modules
from golden_model.errors import ConfigError
from tb.toolchain import AMARANTH_LINT_WAIVERS, lint_verilog


def _generate(tmp_path, name, *args):
    out = tmp_path / name
    assert main(["generate", *args, "--out", str(out), "--json"]) == 0
    return out


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two")
    a = _generate(tmp, "a", "-t", "ring:4", "-a", "ring", "-e", "64", "--link-latency", "2",
                  "--prefix", "a_")
    b = _generate(tmp, "b", "-t", "mesh:2x3", "-a", "multitree", "-e", "64",
                  "--link-latency", "2", "--prefix", "b_")
    return tmp, a, b


def test_prefix_renames_every_module_and_instance():
    v = ("module network(a);\n  network_ni ni0 (\n    .x(a)\n  );\nendmodule\n"
         "module network_ni(x);\n  \\network.link_0 l0 (.y(x));\nendmodule\n"
         "module \\network.link_0 (y);\nendmodule\n")
    out = prefix_modules(v, "p_")
    assert module_names(out) == ["p_network", "p_network_ni", "\\p_network.link_0"]
    assert "  p_network_ni ni0 (" in out and "  \\p_network.link_0 l0 (" in out
    for bad in ("1x", "a-b", "", "a b", "a$b"):
        with pytest.raises(ConfigError, match="prefix"):
            prefix_modules(v, bad)


def test_two_prefixed_networks_build_in_one_verilator_model(two, tmp_path):
    """A wrapper instantiates both networks (pins left open: PINMISSING is waived, as the
    wrapper only shows that the two elaborate together). Without prefixes the same two files
    collide on their module names."""
    _, a, b = two
    for out, top in ((a, "a_network"), (b, "b_network")):
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["verilog"]["top"] == top
        names = module_names((out / "network.v").read_text())
        assert names[0] == top and all(n.lstrip("\\").startswith(top[:2]) for n in names)
    wrapper = tmp_path / "two.v"
    wrapper.write_text("module two;\n  a_network a ();\n  b_network b ();\nendmodule\n")
    lint_verilog([a / "network.v", b / "network.v", wrapper], "two",
                 waive=(*AMARANTH_LINT_WAIVERS, "PINMISSING"))
    plain = tmp_path / "plain"
    for name, args in (("x", ["-t", "ring:4", "-a", "ring"]),
                       ("y", ["-t", "mesh:2x3", "-a", "ring"])):
        _generate(plain, name, *args, "-e", "64", "--link-latency", "2")
    with pytest.raises(RuntimeError, match="network"):
        lint_verilog([plain / "x" / "network.v", plain / "y" / "network.v"], "network")


def test_port_description_matches_the_verilog(two):
    """Every port of ports.json (Amaranth's metadata) is a port of the Verilog top with that
    width and direction."""
    import re
    _, a, _ = two
    ports = json.loads((a / "ports.json").read_text())
    assert ports["top"] == "a_network" and ports["schema_version"] == 1

    def leaves(members):
        for m in members.values():
            for x in (m if isinstance(m, list) else [m]):
                if x["type"] == "port":
                    yield x
                else:
                    yield from leaves(x["members"])
    verilog = (a / "network.v").read_text()
    for p in leaves(ports["interface"]["members"]):
        want = "input" if p["dir"] == "in" else "output"
        rng = "" if p["width"] == 1 else rf"\[{p['width'] - 1}:0\] "
        assert re.search(rf"^\s*{want} (wire |reg )?{rng}{re.escape(p['name'])};", verilog,
                         re.M), p
    assert set(ports["meanings"]) == {"clk", "rst"} | set(ports["interface"]["members"])


def test_fusesoc_core_parses_and_lints(two):
    """FuseSoC's own CAPI2 parser reads the core; its files and toplevel lint clean with the
    Verilator options the core names."""
    fusesoc_core = pytest.importorskip("fusesoc.capi2.core")
    from fusesoc.capi2.coreparser import Core2Parser
    _, a, _ = two
    core = fusesoc_core.CoreInterface(Core2Parser(), Path(a / "a_network.core"))
    assert str(core.name).startswith("allreduce-rtl:generated:a_network:")
    flags = {"is_toplevel": True, "target": "lint", "tool": "verilator"}
    assert core.get_toplevel(flags) == "a_network"
    files = [a / f["name"] for f in core.get_files(flags)]
    assert files == [a / "network.v"]
    assert (a / "files.f").read_text().split() == ["network.v"]
    options = core.get_tool_options(flags)
    assert options["mode"] == "lint-only" and options["verilator_options"][0] == "-Wall"
    waivers = [o.removeprefix("-Wno-") for o in options["verilator_options"][1:]]
    assert all(o.startswith("-Wno-") for o in options["verilator_options"][1:])
    lint_verilog(files, core.get_toplevel(flags), waive=waivers)


def test_core_description_is_escaped_and_generate_takes_one_schedule(tmp_path):
    """A schedule path with quotes and backslashes stays a valid core file; --algorithm and
    --schedule together are refused."""
    pytest.importorskip("fusesoc")
    from fusesoc.capi2.core import CoreInterface
    from fusesoc.capi2.coreparser import Core2Parser
    from golden_model.algorithms import build_schedule
    from golden_model.exporters import export
    from golden_model.topology import parse_topology
    weird = tmp_path / 'we"ird\\x.xml'
    weird.write_text(export(build_schedule("ring", parse_topology("ring:4"), 64), "msccl-xml"))
    out = _generate(tmp_path, "w", "-t", "ring:4", "--schedule", str(weird), "-e", "64",
                    "--link-latency", "2")
    core = CoreInterface(Core2Parser(), out / "network.core")
    assert str(weird) in core.get_description()
    assert main(["generate", "-t", "ring:4", "-a", "ring", "--schedule", str(weird), "-e",
                 "64", "--out", str(tmp_path / "both")]) == 2
    assert not (tmp_path / "both").exists()


def test_failed_generate_leaves_no_folder(tmp_path):
    """A prefix too long for a file name fails after the folder was made; it is removed."""
    out = tmp_path / "long"
    assert main(["generate", "-t", "ring:4", "-a", "ring", "-e", "64", "--prefix", "a" * 300,
                 "--out", str(out)]) == 2
    assert not out.exists()
