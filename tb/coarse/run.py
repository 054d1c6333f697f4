"""Build the COARSE hardware once per simulator and run its cocotb tests, as ``tb.cxl.run``
does for the CXL controller: the sync core (``tb.coarse.cocotb_sync_core``) and the devices with
their ring (``tb.coarse.cocotb_devices``)."""

from __future__ import annotations

from golden_model.elements import element_type
from hdl.coarse import CoarseDevices, SyncCore
from hdl.generate import to_verilog

from ..build import SimBuild, cocotb_results
from .scenarios import CLIENTS, QUEUE_LINES, TENSORS, DeviceRingScenario

__all__ = ["SyncCoreBuild", "DevicesBuild", "TEST_MODULE", "TOP"]

TEST_MODULE = "tb.coarse.cocotb_sync_core"
PARAMS_ENV = "COARSE_TB_PARAMS"
TOP = "sync_core"


class SyncCoreBuild(SimBuild):
    """One simulator build of the scenarios' ``SyncCore`` for element type ``dtype``. Verilator
    compiles at ``-O0`` by default: these runs are a few hundred cycles, and for the devices
    ``-O0`` built in 54 s against 93 s at ``-O1`` (4 s to run either way)."""

    def __init__(self, sim: str, dtype: str = "float32", *, cxx_opt: str | None = "-O0",
                 build_root=None):
        super().__init__(sim, kind="coarse", label=f"sync-{dtype}", top=TOP, waves=False,
                         cxx_opt=cxx_opt, build_root=build_root)
        self.dtype = dtype

    @property
    def design_key(self):
        return {"dtype": self.dtype, "clients": CLIENTS, "queue_lines": QUEUE_LINES,
                "tensors": len(TENSORS)}

    def generate(self):
        core = SyncCore(element_type(self.dtype), CLIENTS, QUEUE_LINES, len(TENSORS))
        return to_verilog(core, name=TOP)

    def run(self, seed: int = 1) -> dict:
        """Run the test with ``seed``; ``{test name: TestResult}``."""
        outcome = self.test(TEST_MODULE, self.run_dir(f"run-{seed}"),
                            {"dtype": self.dtype, "seed": seed}, PARAMS_ENV)
        return cocotb_results(outcome)


class DevicesBuild(SimBuild):
    """One simulator build of the ``DeviceRingScenario``'s ``CoarseDevices`` for element type
    ``dtype`` and ring ``direction`` (the NIs' schedule tables are loaded at run time, but
    their sizes follow the scenario's schedule)."""

    TOP = "coarse_devices"
    TEST_MODULE = "tb.coarse.cocotb_devices"

    def __init__(self, sim: str, dtype: str = "float32", direction: int = 1, *,
                 cxx_opt: str | None = "-O0", build_root=None):
        super().__init__(sim, kind="coarse", label=f"devices-{dtype}", top=self.TOP,
                         waves=False, cxx_opt=cxx_opt, build_root=build_root)
        self.dtype, self.direction = dtype, direction

    def scenario(self, seed=1):
        return DeviceRingScenario(element_type(self.dtype), self.direction, seed=seed)

    @property
    def design_key(self):
        import dataclasses
        return {"config": dataclasses.asdict(self.scenario().config), "clients": CLIENTS}

    def generate(self):
        s = self.scenario()
        return to_verilog(CoarseDevices(s.topology, s.config, CLIENTS, 4, 1), name=self.TOP)

    def run(self, seed: int = 1) -> dict:
        """Run the test with ``seed``; ``{test name: TestResult}``."""
        outcome = self.test(self.TEST_MODULE, self.run_dir(f"run-{self.direction}-{seed}"),
                            {"dtype": self.dtype, "direction": self.direction, "seed": seed},
                            PARAMS_ENV)
        return cocotb_results(outcome)
