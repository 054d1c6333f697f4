"""Build the COARSE hardware once per simulator and run its cocotb tests, as ``tb.cxl.run``
does for the CXL controller: the sync core (``tb.coarse.cocotb_sync_core``) and the devices with
their ring (``tb.coarse.cocotb_devices``)."""

from __future__ import annotations

import dataclasses

from golden_model.elements import element_type
from hdl.coarse import SyncCore
from hdl.generate import to_verilog

from ..build import SimBuild, cocotb_results
from .scenarios import CLIENTS, PARAMS_ENV, QUEUE_LINES, TENSORS, DeviceRingScenario

__all__ = ["SyncCoreBuild", "DevicesBuild", "SystemBuild"]

class _CoarseBuild(SimBuild):
    """A COARSE design's simulator build and its cocotb module (``TEST_MODULE``), run with
    ``test_params()`` and a seed. Verilator compiles at ``-O0`` by default: these runs are a few
    hundred cycles, and for the devices ``-O0`` built in 54 s against 93 s at ``-O1`` (4 s to
    run either way)."""

    TOP = TEST_MODULE = None

    def __init__(self, sim: str, label: str, *, cxx_opt: str | None = "-O0", build_root=None):
        super().__init__(sim, kind="coarse", label=label, top=self.TOP, waves=False,
                         cxx_opt=cxx_opt, build_root=build_root)

    def test_params(self) -> dict:
        raise NotImplementedError

    def run(self, seed: int = 1) -> dict:
        """Run the test with ``seed``; ``{test name: TestResult}``."""
        params = {**self.test_params(), "seed": seed}
        outcome = self.test(self.TEST_MODULE,
                            self.run_dir("run-" + "-".join(map(str, params.values()))),
                            params, PARAMS_ENV)
        return cocotb_results(outcome)


class SyncCoreBuild(_CoarseBuild):
    """The scenarios' ``SyncCore`` for element type ``dtype``."""

    TOP, TEST_MODULE = "sync_core", "tb.coarse.cocotb_sync_core"

    def __init__(self, sim: str, dtype: str = "float32", **kwargs):
        super().__init__(sim, f"sync-{dtype}", **kwargs)
        self.dtype = dtype

    @property
    def design_key(self):
        return {"dtype": self.dtype, "clients": CLIENTS, "queue_lines": QUEUE_LINES,
                "tensors": len(TENSORS)}

    def generate(self):
        core = SyncCore(element_type(self.dtype), CLIENTS, QUEUE_LINES, len(TENSORS))
        return to_verilog(core, name=self.TOP)

    def test_params(self):
        return {"dtype": self.dtype}


class DevicesBuild(_CoarseBuild):
    """The ``DeviceRingScenario``'s ``CoarseDevices`` for element type ``dtype`` and ring
    ``direction`` (the NIs' schedule tables are loaded at run time; their sizes, and so the
    build, are the scenario's)."""

    TOP, TEST_MODULE = "coarse_devices", "tb.coarse.cocotb_devices"

    def __init__(self, sim: str, dtype: str = "float32", direction: int = 1, **kwargs):
        super().__init__(sim, f"devices-{dtype}", **kwargs)
        self.dtype, self.direction = dtype, direction
        self.scenario = DeviceRingScenario(element_type(dtype), direction)

    @property
    def design_key(self):
        return {"config": dataclasses.asdict(self.scenario.config), "clients": CLIENTS}

    def generate(self):
        return to_verilog(self.scenario.devices(), name=self.TOP)

    def test_params(self):
        return {"dtype": self.dtype, "direction": self.direction}


class SystemBuild(_CoarseBuild):
    """A ``SystemScenario``'s ``CoarseSystem`` (the scenario's ``design_key`` sizes the
    build; the shards' ring tables are loaded at run time)."""

    TOP, TEST_MODULE = "coarse_system", "tb.coarse.cocotb_system"

    def __init__(self, sim: str, scenario, **kwargs):
        super().__init__(sim, f"system-{scenario.etype.name}", **kwargs)
        self.scenario = scenario

    @property
    def design_key(self):
        return self.scenario.design_key

    def generate(self):
        return to_verilog(self.scenario.system(), name=self.TOP)

    def test_params(self):
        return {"scenario": self.scenario.params()}

    def run_system(self, seed: int = 1, watchdog: int = 5000, trace: bool = False) -> dict:
        """Run the scenario; the cocotb module's report (``tb.coarse.cocotb_system``) with
        ``failure`` (empty when it passed) and ``seconds``."""
        import json
        params = {**self.test_params(), "seed": seed, "watchdog": watchdog, "trace": trace}
        run_dir = self.run_dir(f"run-{seed}")
        params["report"] = str(run_dir / "system.json")
        (run_dir / "system.json").unlink(missing_ok=True)
        outcome = self.test(self.TEST_MODULE, run_dir, params, PARAMS_ENV)
        try:
            report = json.loads((run_dir / "system.json").read_text())
        except (OSError, ValueError):
            report = {}
        return {**report, "failure": outcome.failure, "seconds": outcome.wall_s,
                "log": str(outcome.log_file)}
