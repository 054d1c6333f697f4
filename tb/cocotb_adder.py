"""cocotb test module of ``tb.adder``: runs the clock until the harness says ``done`` (the
harness reads and writes the vectors itself). Never collected by pytest."""

import json
import os
import pathlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge

PARAMS_ENV = "ADDER_TB_PARAMS"


@cocotb.test()
async def adder_vectors(dut):
    params = json.loads(pathlib.Path(os.environ[PARAMS_ENV]).read_text())
    cocotb.start_soon(Clock(dut.clk, 2, unit="ns").start())
    limit = ClockCycles(dut.clk, int(params["cycles"]))
    await First(RisingEdge(dut.done), limit)
    assert int(dut.done.value) == 1, f"no done after {params['cycles']} cycles"
