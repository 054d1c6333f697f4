"""The COARSE system end to end in amaranth.sim (hdl/coarse/system.py): workers push their
copies of every shard of the golden routing tables over CXL.mem (MemWr) to the shard's device,
the devices reduce them in client order and around their ring, and the workers pull the result
(MemRd, held until reduced): every worker's every shard bit for bit the golden model's
(golden_model.coarse.functional.synchronise), for shard orders that differ between workers."""

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from golden_model.coarse.config import parse_system
from golden_model.elements import FLOAT32, INT32
from tb.coarse.system import SystemHost, SystemScenario

SMALL = "coarse:W=4,M=2,lat_local=0.01,lat_remote=0.02,threshold=2KB"
#: (layer, name, elements): a 3,000-element tensor cut into shards and two small ones
TENSORS = [(0, "big", 3000), (1, "bn", 40), (2, "tiny", 7)]


def run_system(scenario, seed=1, max_cycles=100_000, **host_args):
    top = scenario.system()
    host = SystemHost(scenario, top, seed=seed, **host_args)

    ports = {"__".join(map(str, path)): Value.cast(value)
             for path, _, value in top.signature.flatten(top)}

    async def bench(ctx):
        while not host.done and host.cycle < max_cycles:
            host.drive_ports(lambda name, value: ctx.set(ports[name], value))
            host.sample_ports(lambda name: ctx.get(ports[name]))
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return host


@pytest.mark.parametrize("etype,orders", [(FLOAT32, "mixed"), (INT32, "table")],
                         ids=["float32-mixed", "int32-table"])
def test_every_worker_pulls_the_golden_result(etype, orders):
    scenario = SystemScenario(parse_system(SMALL), TENSORS, etype, slots=4, orders=orders)
    assert len(scenario.shards) > len(TENSORS)          # the big tensor is partitioned
    assert len(scenario.batches) > 1
    host = run_system(scenario)
    assert host.stall is None, host.stall
    assert host.finished and host.error == 0
    assert len(host.results) == len(scenario.shards) * 4
    assert host.mismatches() == []
    print(f"{etype.name} {orders}: {host.cycle} cycles, rings {host.ring_cycles}")
