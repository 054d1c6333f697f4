"""COARSE memory devices end to end in amaranth.sim (hdl/coarse/devices.py): workers' copies of a
shard, written in random order into each device's client queues, reduced near memory in client
order, written into the device NIs' buffers, all-reduced around the device ring in the shard's
direction, read back from every device: bit for bit the golden model's result
(golden_model.coarse.functional: group_sum, then device_ring_schedule executed)."""

import numpy as np
import pytest

from golden_model.coarse.functional import device_ring_schedule, group_sum
from golden_model.elements import FLOAT32, INT32
from golden_model.executor import execute
from golden_model.lowering import lower
from golden_model.topology import parse_topology
from hdl.coarse import CoarseDevices
from hdl.config import network_config_for
from hdl.host import flit_elements, read_commands, table_commands
from tb.coarse.lines import line_value, random_lines

from hdl_host import run_testbench, stream_commands, wait_done

DEVICES, CLIENTS, ROWS = 3, 3, 3
#: device -> the clients whose copies it receives (device 2 none: it contributes +0)
GROUPS = {0: (0, 1), 1: (2,), 2: ()}


@pytest.mark.parametrize("etype", [FLOAT32, INT32], ids=lambda t: t.name)
@pytest.mark.parametrize("direction", [1, -1])
def test_workers_copies_to_every_devices_reduced_shard(etype, direction):
    rng = np.random.default_rng(7 + direction)
    lanes = 512 // etype.bits
    elements = ROWS * lanes
    copies = random_lines(etype, rng, DEVICES * CLIENTS * ROWS).reshape(
        DEVICES, CLIENTS, ROWS, lanes)
    partials = np.stack([group_sum(etype.from_bits(copies[v, list(GROUPS[v])].reshape(
        len(GROUPS[v]), elements)), elements, etype.dtype) for v in range(DEVICES)])
    expected = execute(device_ring_schedule(DEVICES, elements, direction), partials)

    topo = parse_topology(f"ring:{DEVICES}", link_latency=2)
    schedule = device_ring_schedule(DEVICES, elements, direction).relabeled(
        range(DEVICES), topology=topo)
    lowered = lower(schedule, elements_per_flit=128 // etype.bits)
    # the shard's ring chunks are whole flits: the buffer holds the shard as it is
    packed = lowered.pack(partials).reshape(DEVICES, -1)[:, :elements]
    assert np.array_equal(etype.to_bits(packed), etype.to_bits(partials))
    config = network_config_for(lowered, dtype=etype.name, elems_per_flit=128 // etype.bits,
                                link_latency=2)
    top = CoarseDevices(topo, config, CLIENTS, queue_lines=4, tensors=1)
    writes = [[(c, r, line_value(copies[v, c, r], etype)) for c in GROUPS[v]
               for r in range(ROWS)] for v in range(DEVICES)]
    for w in writes:
        rng.shuffle(w)
    out = {}

    async def bench(ctx):
        await stream_commands(ctx, top, [table_commands(config, lowered, v)
                                         for v in range(DEVICES)])
        for v in range(DEVICES):
            mask = sum(1 << c for c in GROUPS[v])
            ctx.set(top.program[v].valid, 1)
            ctx.set(top.program[v].payload.as_value(), 0)
            ctx.set(top.program[v].payload.last_row, ROWS - 1)
            ctx.set(top.program[v].payload.mask, mask)
        await ctx.tick()
        for v in range(DEVICES):
            ctx.set(top.program[v].valid, 0)
        pending = [list(w) for w in writes]
        cycles = 0
        while any(pending) or any(ctx.get(top.busy[v]) for v in range(DEVICES)):
            cycles += 1
            assert cycles < 1000, "the sync cores stalled"
            for v in range(DEVICES):
                send = bool(pending[v]) and rng.random() < 0.7
                ctx.set(top.write[v].valid, int(send))
                if send:
                    c, r, line = pending[v].pop(0)
                    ctx.set(top.write[v].payload.client, c)
                    ctx.set(top.write[v].payload.row, r)
                    ctx.set(top.write[v].payload.line, line)
            await ctx.tick()
        for v in range(DEVICES):
            ctx.set(top.write[v].valid, 0)
        assert not ctx.get(top.error)
        out["cycles"] = await wait_done(ctx, top, 5000)
        rsps = await stream_commands(ctx, top, [read_commands(config, lowered.buffer_flits)
                                                for _ in range(DEVICES)])
        out["flits"] = np.array([[flit_elements(config, w) for w in node] for node in rsps])

    run_testbench(top, bench)
    result = lowered.unpack(out["flits"])
    bits = etype.to_bits
    assert np.array_equal(bits(result), bits(expected))
    assert np.array_equal(bits(result[0]), bits(result[2]))       # every device, one result
    print(f"{etype.name} direction {direction:+d}: ring {out['cycles']} cycles")


def _ring_config(etype=FLOAT32, **overrides):
    topo = parse_topology(f"ring:{DEVICES}", link_latency=2)
    schedule = device_ring_schedule(DEVICES, 48, 1).relabeled(range(DEVICES), topology=topo)
    lowered = lower(schedule, elements_per_flit=128 // etype.bits)
    return topo, network_config_for(lowered, dtype=etype.name, link_latency=2,
                                    elems_per_flit=128 // etype.bits, **overrides)


def test_lint(tmp_path):
    from hdl.generate import to_verilog
    from tb.toolchain import lint_verilog
    topo, config = _ring_config()
    path = tmp_path / "coarse_devices.v"
    to_verilog(CoarseDevices(topo, config, CLIENTS, 4, 2), path, name="coarse_devices")
    lint_verilog(path, "coarse_devices")


def test_refuses_flits_that_are_not_a_quarter_line():
    import dataclasses
    topo, config = _ring_config(INT32)
    config = dataclasses.replace(config, elems_per_flit=8)         # 256-bit flits
    with pytest.raises(ValueError, match="config must be an NIConfig with 128-bit flits"):
        CoarseDevices(topo, config, CLIENTS, 4, 1)
