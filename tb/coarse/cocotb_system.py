"""cocotb test module of the COARSE system (Icarus and Verilator).

Started by :mod:`tb.coarse.run` in the simulator process; never collected by pytest. The
scenario's arguments (``SystemScenario.params``), the host's seed and the path of the JSON
report come from the file named by ``COARSE_TB_PARAMS``. The test plays
:class:`tb.coarse.system.SystemHost` on ``coarse_system`` and writes the report: cycles, the
rings' cycles, the shards that differ from the golden model, and a stall if the watchdog fired.
"""

from __future__ import annotations

import json
import pathlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from ..cocotb_values import params_from_env, reset, to_int
from .scenarios import PARAMS_ENV
from .system import SystemHost, SystemScenario


@cocotb.test()
async def coarse_system(dut):
    params = params_from_env(PARAMS_ENV)
    scenario = SystemScenario.from_params(params["scenario"])
    host = SystemHost(scenario, scenario.system(), seed=int(params.get("seed", 1)),
                      watchdog=int(params.get("watchdog", 5000)),
                      trace=bool(params.get("trace")))
    inputs = [getattr(dut, name) for name in host.port_values()]
    Clock(dut.clk, 2, unit="ns").start()
    await reset(dut, inputs)

    def put(name, value):
        getattr(dut, name).value = value

    def get(name):
        return to_int(getattr(dut, name).value)

    while not host.done:
        await FallingEdge(dut.clk)
        host.drive_ports(put)
        await ReadOnly()
        host.sample_ports(get)
    report = {"cycles": host.cycle, "ring_cycles": host.ring_cycles, "error": host.error,
              "stall": host.stall, "events": host.events, "trace": host.trace,
              "mismatches": host.mismatches(), "shards": len(scenario.shards),
              "workers": scenario.config.workers}
    pathlib.Path(params["report"]).write_text(json.dumps(report, indent=1))
    assert host.stall is None, f"stalled: {host.stall}"
    assert host.error == 0, "the system's error flag is set"
    assert not report["mismatches"], f"shards differ from the golden model: {report['mismatches']}"
    dut._log.info(f"{len(host.results)} worker shards bit for bit in {host.cycle} cycles")
