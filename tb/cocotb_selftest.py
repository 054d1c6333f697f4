"""cocotb test module of ``tb.selftest``: clocks the self-test system, decodes its UART (8N1,
``divisor`` cycles per bit) into ``uart.txt`` until the final ``selftest PASS|FAIL`` line, and
pulses ``rerun`` between passes. Never collected by pytest."""

import json
import os
import pathlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge, Timer
from cocotb.utils import get_sim_time

PARAMS_ENV = "SELFTEST_TB_PARAMS"
PERIOD_NS = 2


async def _byte(dut, divisor):
    """One frame whose start bit began at the last falling edge of ``uart_tx``."""
    await ClockCycles(dut.clk, divisor // 2)
    assert int(dut.uart_tx.value) == 0, "UART start bit not low in its middle"
    value = 0
    for i in range(8):
        await ClockCycles(dut.clk, divisor)
        value |= int(dut.uart_tx.value) << i
    await ClockCycles(dut.clk, divisor)
    assert int(dut.uart_tx.value) == 1, "UART stop bit not high"
    return value


@cocotb.test()
async def selftest_uart(dut):
    params = json.loads(pathlib.Path(os.environ[PARAMS_ENV]).read_text())
    divisor, passes = int(params["divisor"]), int(params["passes"])
    deadline = int(params["cycles"]) * PERIOD_NS
    out = pathlib.Path(params["uart_file"])
    cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
    dut.rst.value = 1
    dut.rerun.value = 0
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    text = ""
    for done in range(passes):
        if done:
            dut.rerun.value = 1
            await ClockCycles(dut.clk, 2)
            dut.rerun.value = 0
        line = ""
        while True:
            left = deadline - get_sim_time(unit="ns")
            assert left > 0, f"no final line within {params['cycles']} cycles"
            edge = FallingEdge(dut.uart_tx)
            got = await First(edge, Timer(left, unit="ns"))
            assert got is edge, f"no final line within {params['cycles']} cycles"
            char = chr(await _byte(dut, divisor))
            line += char
            text += char
            out.write_text(text)
            if char == "\n":
                if line.startswith("selftest "):
                    break
                line = ""
        await RisingEdge(dut.clk)
    out.write_text(text)
