"""COARSE memory devices end to end in amaranth.sim (hdl/coarse/devices.py): workers' copies of a
shard, written in random order into each device's client queues, reduced near memory in client
order, written into the device NIs' buffers, all-reduced around the device ring in the shard's
direction, read back from every device: bit for bit the golden model's result
(golden_model.coarse.functional: group_sum, then device_ring_schedule executed). The same
scenario runs in Icarus and Verilator (tests/test_coarse_devices_sim.py)."""

import dataclasses

import numpy as np
import pytest

from golden_model.elements import FLOAT32, INT32
from tb.coarse.scenarios import DEVICE_GROUPS, DeviceRingScenario, DevicesHost, layouts_of
from hdl_host import run_testbench


def run(scenario, seed=1):
    top = scenario.devices()
    host = DevicesHost(scenario, layouts_of(top), seed=seed)
    n = len(DEVICE_GROUPS)

    async def bench(ctx):
        while not host.done:
            inp = host.drive()
            ctx.set(top.start, inp["start"])
            for v in range(n):
                ctx.set(top.host_cmd[v].valid, inp["host_cmd_valid"][v])
                ctx.set(top.host_cmd[v].payload.as_value(), inp["host_cmd"][v])
                ctx.set(top.host_rsp[v].ready, inp["host_rsp_ready"][v])
                ctx.set(top.program[v].valid, inp["program_valid"][v])
                ctx.set(top.program[v].payload.as_value(), inp["program"][v])
                ctx.set(top.write[v].valid, inp["write_valid"][v])
                ctx.set(top.write[v].payload.as_value(), inp["write"][v])
            host.sample({
                "host_cmd_ready": [ctx.get(top.host_cmd[v].ready) for v in range(n)],
                "host_rsp_valid": [ctx.get(top.host_rsp[v].valid) for v in range(n)],
                "host_rsp": [ctx.get(top.host_rsp[v].payload.data) for v in range(n)],
                "busy": [ctx.get(top.busy[v]) for v in range(n)],
                "done": ctx.get(top.done), "error": ctx.get(top.error),
                "staged": ctx.get(top.staged),
                "cycles": ctx.get(top.cycles)})
            await ctx.tick()

    run_testbench(top, bench)
    return host


@pytest.mark.parametrize("etype", [FLOAT32, INT32], ids=lambda t: t.name)
@pytest.mark.parametrize("direction", [1, -1])
def test_workers_copies_to_every_devices_reduced_shard(etype, direction):
    scenario = DeviceRingScenario(etype, direction, seed=7 + direction)
    elements = scenario.elements
    # the shard's ring chunks are whole flits: the buffer holds the shard as it is
    packed = scenario.lowered.pack(scenario.partials).reshape(len(DEVICE_GROUPS), -1)
    assert np.array_equal(etype.to_bits(packed[:, :elements]),
                          etype.to_bits(scenario.partials))
    host = run(scenario)
    assert host.error == 0
    result = host.result()
    bits = etype.to_bits
    assert np.array_equal(bits(result), bits(scenario.expected))
    assert all(np.array_equal(bits(row), bits(result[0])) for row in result)
    print(f"{etype.name} direction {direction:+d}: ring {host.ring_cycles} cycles")


def test_lint(tmp_path):
    from hdl.generate import to_verilog
    from tb.toolchain import lint_verilog
    s = DeviceRingScenario(FLOAT32, 1)
    path = tmp_path / "coarse_devices.v"
    to_verilog(s.devices(), path, name="coarse_devices")
    lint_verilog(path, "coarse_devices")


def test_refuses_flits_that_are_not_a_quarter_line():
    s = DeviceRingScenario(INT32, 1)
    config = dataclasses.replace(s.config, elems_per_flit=8)         # 256-bit flits
    with pytest.raises(ValueError, match="config must be an NIConfig with 128-bit flits"):
        s.devices(config)
