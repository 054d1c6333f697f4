"""Run the board's self-test system (``hdl.selftest.SelfTestSystem``, everything the board top
instantiates below its pins) in Icarus or Verilator and decode its UART.

``SelfTestBuild(plan, program, sim).run()`` returns the decoded lines (:func:`parse_report`):
per algorithm its name, cycles, errors and status, and the final verdict.
"""

from __future__ import annotations

import dataclasses
import re

from .build import BuildError, SimBuild, tail

__all__ = ["SelfTestBuild", "SelfTestReport", "parse_report", "TOP"]

TOP = "selftest_system"
TEST_MODULE = "tb.cocotb_selftest"
PARAMS_ENV = "SELFTEST_TB_PARAMS"
_LINE = re.compile(r"(\S+) cycles ([0-9a-f]{8}) errors ([0-9a-f]{4}) (PASS|FAIL|TIME|NERR)")


@dataclasses.dataclass(frozen=True)
class SelfTestReport:
    """What the UART said in one pass.

    Attributes
    ----------
    runs : list of dict
        ``{"algorithm", "cycles", "errors", "status"}`` per algorithm line.
    passed : bool
        The final line said ``selftest PASS``.
    text : str
        The pass's UART text.
    """
    runs: list
    passed: bool
    text: str


def parse_report(text):
    """The passes of a UART transcript (``hdl.selftest``'s line formats).

    Raises
    ------
    ValueError
        On a line that is neither an algorithm line nor a final line, or a transcript that does
        not end with a final line.
    """
    passes, runs, chunk = [], [], ""
    for line in text.splitlines(keepends=True):
        chunk += line
        body = line.rstrip("\r\n")
        match = _LINE.fullmatch(body)
        if match:
            runs.append({"algorithm": match[1], "cycles": int(match[2], 16),
                         "errors": int(match[3], 16), "status": match[4]})
        elif body in ("selftest PASS", "selftest FAIL"):
            passes.append(SelfTestReport(runs, body.endswith("PASS"), chunk))
            runs, chunk = [], ""
        else:
            raise ValueError(f"unexpected UART line {body!r}")
    if chunk or not passes:
        raise ValueError(f"the UART transcript does not end with a final line: {text[-80:]!r}")
    return passes


class SelfTestBuild(SimBuild):
    """One simulator build of a self-test system.

    Parameters
    ----------
    plan : allreduce_rtl.plan.HardwarePlan
    program : hdl.selftest.SelfTestProgram
    sim : {"icarus", "verilator"}
    fault : str, optional
        ``allreduce_rtl.board.FAULTS``' hardware fault, if any (the program carries the table
        faults).
    build_root : path, optional
    """

    def __init__(self, plan, program, sim="verilator", *, fault=None, build_root=None,
                 waves=False):
        super().__init__(sim, kind="selftest", label=plan.topology.spec, top=TOP,
                         waves=waves, build_root=build_root)
        self.plan, self.program, self.fault = plan, program, fault

    @property
    def design_key(self):
        return {"topology": self.plan.topology.spec,
                "config": dataclasses.asdict(self.plan.config),
                "program": dataclasses.asdict(self.program), "fault": self.fault}

    def generate(self):
        from hdl.generate import to_verilog  # noqa: PLC0415
        from hdl.selftest import fault_context, selftest_system  # noqa: PLC0415
        with fault_context(self.fault):     # the NIs are elaborated by to_verilog
            return to_verilog(selftest_system(self.plan.topology, self.plan.config,
                                              self.program, self.fault), name=TOP)

    def max_cycles(self, passes):
        """A bound on the cycles of ``passes`` passes: each run's timeout, its loads and reads
        (a host command per cycle, waiting up to a bank rotation each) and its UART line."""
        cfg, n = self.plan.config, self.plan.topology.num_nodes
        per_cmd = cfg.num_ports + 2
        uart = 11 * self.program.uart_divisor * 64
        total = 0
        for run in self.program.runs:
            cmds = len(run.table_commands) + 2 * n * self.program.flits
            total += run.timeout_cycles + per_cmd * cmds + uart + 1000
        return passes * (total + uart)

    def run(self, *, passes=1, name="selftest"):
        """Reset, then decode the UART for ``passes`` passes (``rerun`` pulsed between them).

        Returns
        -------
        list of SelfTestReport

        Raises
        ------
        BuildError
            If the build or the simulation fails, or the UART text is malformed (the message
            names the log).
        """
        run_dir = self.run_dir(name)
        uart = run_dir / "uart.txt"
        params = {"divisor": self.program.uart_divisor, "passes": passes,
                  "cycles": self.max_cycles(passes), "uart_file": str(uart)}
        outcome = self.test(TEST_MODULE, run_dir, params, PARAMS_ENV)
        text = ""
        if uart.exists():
            with open(uart, newline="") as f:       # keep the CR LF line ends
                text = f.read()
        if outcome.failure:
            raise BuildError(f"self-test simulation failed: {outcome.failure}; UART so far "
                             f"{text[-200:]!r}; log {outcome.log_file}:\n{tail(outcome.log_file)}")
        try:
            return parse_report(text)
        except ValueError as exc:
            raise BuildError(f"self-test simulation: {exc}; log {outcome.log_file}") from None
