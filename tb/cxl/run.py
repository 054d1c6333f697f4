"""Build the CXL.mem controller once per simulator and run the cocotb tests on it.

``CXLBuild`` is a ``tb.build.SimBuild`` (Verilog cached by the configuration and the ``hdl``/
``golden_model`` sources, the simulator build by everything it compiles, a ``build.ok`` stamp
under a file lock shared by parallel pytest workers); a small design, so cocotb's
``--public-flat-rw`` stays. A run executes the cocotb module ``tb.cxl.cocotb_cxl`` (all its
tests, or the ones named) in one simulator process and reads the per-test results from cocotb's
JUnit XML.
"""

from __future__ import annotations

import dataclasses

from hdl.cxl import TOP_MODULE, CXLMemConfig, CXLMemController, to_verilog

from ..build import SimBuild, TestResult, cocotb_results

__all__ = ["TEST_CONFIG", "CXLBuild", "TestResult", "TEST_MODULE"]

TEST_MODULE = "tb.cxl.cocotb_cxl"
PARAMS_ENV = "CXL_TB_PARAMS"

#: The configuration the simulator tests use: small enough that the memory is read back in a
#: few hundred cycles, with fewer hold slots than a round's reads (so reads wait for a slot
#: while writes pass them).
TEST_CONFIG = CXLMemConfig(num_lines=128, num_banks=4, req_credits=4, rwd_credits=4,
                           ndr_depth=2, drs_depth=2, hold_slots=4, num_tensors=4,
                           max_group_shift=4, default_timeout=4096)


class CXLBuild(SimBuild):
    """One simulator build of ``CXLMemController(config)``.

    Parameters
    ----------
    sim : {"icarus", "verilator"}
    config : CXLMemConfig
    waves : bool
    cxx_opt : str, optional
        Verilator C++ optimisation (default ``-O1``: these runs are short, the build dominates).
    build_root : path, optional
    """

    def __init__(self, sim: str, config: CXLMemConfig = TEST_CONFIG, *, waves: bool = False,
                 cxx_opt: str | None = "-O1", build_root=None):
        super().__init__(sim, kind="cxl", label="controller", top=TOP_MODULE, waves=waves,
                         cxx_opt=cxx_opt, build_root=build_root)
        self.config = config

    @property
    def design_key(self):
        return {"config": dataclasses.asdict(self.config)}

    def generate(self):
        return to_verilog(CXLMemController(self.config))

    def run(self, *, tests=None, seed: int = 1, name: str = "run", **params) -> dict:
        """Run the cocotb tests (all, or those named in ``tests``) in one simulation.

        ``params`` go to the test module (``messages``, ``workers``). Returns
        ``{test name: TestResult}``; a test that did not report is missing.
        """
        run_dir = self.run_dir(f"{name}-{seed}")
        outcome = self.test(TEST_MODULE, run_dir,
                            {"config": dataclasses.asdict(self.config), "seed": seed, **params},
                            PARAMS_ENV, testcase=tests)
        self.last_wall_s = outcome.wall_s
        return cocotb_results(outcome)
