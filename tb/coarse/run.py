"""Build the COARSE sync core once per simulator and run its cocotb test
(``tb.coarse.cocotb_sync_core``), as ``tb.cxl.run`` does for the CXL controller."""

from __future__ import annotations

from golden_model.elements import element_type
from hdl.coarse import SyncCore
from hdl.generate import to_verilog

from ..build import SimBuild, cocotb_results
from .scenarios import CLIENTS, QUEUE_LINES, TENSORS

__all__ = ["SyncCoreBuild", "TEST_MODULE", "TOP"]

TEST_MODULE = "tb.coarse.cocotb_sync_core"
PARAMS_ENV = "COARSE_TB_PARAMS"
TOP = "sync_core"


class SyncCoreBuild(SimBuild):
    """One simulator build of the scenarios' ``SyncCore`` for element type ``dtype``."""

    def __init__(self, sim: str, dtype: str = "float32", *, cxx_opt: str | None = "-O1",
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
