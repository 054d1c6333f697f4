"""cocotb test module of the COARSE devices and their ring (Icarus and Verilator).

Started by :mod:`tb.coarse.run` in the simulator process; never collected by pytest. The element
type, the ring's direction and the seed come from the JSON file named by ``COARSE_TB_PARAMS``.
The test drives ``coarse_devices`` with :class:`tb.coarse.scenarios.DevicesHost` and checks
every device's reduced shard bit for bit against the golden model.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from golden_model.elements import element_type

from ..cocotb_values import params_from_env, reset, to_int
from .scenarios import DEVICE_GROUPS, PARAMS_ENV, DeviceRingScenario, DevicesHost, layouts_of

@cocotb.test()
async def device_ring(dut):
    params = params_from_env(PARAMS_ENV)
    etype = element_type(params.get("dtype", "float32"))
    scenario = DeviceRingScenario(etype, int(params.get("direction", 1)),
                                  seed=int(params.get("seed", 1)))
    top = scenario.devices()
    host = DevicesHost(scenario, layouts_of(top), seed=int(params.get("seed", 1)))
    n = len(DEVICE_GROUPS)

    def port(name, v, member):
        return getattr(dut, f"{name}__{v}__{member}")

    inputs = [dut.start] + [port(name, v, member) for v in range(n)
                            for name in ("host_cmd", "program", "write")
                            for member in ("valid", "payload")]
    inputs += [port("host_rsp", v, "ready") for v in range(n)]
    inputs += [getattr(dut, f"node_start__{v}") for v in range(n)]
    Clock(dut.clk, 2, unit="ns").start()
    await reset(dut, inputs)
    while not host.done:
        await FallingEdge(dut.clk)
        inp = host.drive()
        dut.start.value = inp["start"]
        for v in range(n):
            port("host_cmd", v, "valid").value = inp["host_cmd_valid"][v]
            port("host_cmd", v, "payload").value = inp["host_cmd"][v]
            port("host_rsp", v, "ready").value = inp["host_rsp_ready"][v]
            port("program", v, "valid").value = inp["program_valid"][v]
            port("program", v, "payload").value = inp["program"][v]
            port("write", v, "valid").value = inp["write_valid"][v]
            port("write", v, "payload").value = inp["write"][v]
        await ReadOnly()
        host.sample({
            "host_cmd_ready": [to_int(port("host_cmd", v, "ready").value) for v in range(n)],
            "host_rsp_valid": [to_int(port("host_rsp", v, "valid").value) for v in range(n)],
            # the response's only field is its data (hdl.host.HostRsp)
            "host_rsp": [to_int(port("host_rsp", v, "payload").value) for v in range(n)],
            "busy": [to_int(getattr(dut, f"busy__{v}").value) for v in range(n)],
            "done": to_int(dut.done.value), "error": to_int(dut.error.value),
            "staged": to_int(dut.staged.value),
            "cycles": to_int(dut.cycles.value)})
    assert host.error == 0
    bits = etype.to_bits
    result = host.result()
    assert np.array_equal(bits(result), bits(scenario.expected)), "a device's shard differs"
    dut._log.info(f"{etype.name} direction {scenario.direction:+d}: every device's shard "
                  f"bit for bit, ring {host.ring_cycles} cycles")
