"""The COARSE system end to end in amaranth.sim (hdl/coarse/system.py): workers push their
copies of every shard of the golden routing tables over CXL.mem (MemWr) to the shard's device,
the devices reduce them in client order and around their ring, and the workers pull the result
(MemRd, held until reduced): every worker's every shard bit for bit the golden model's
(golden_model.coarse.functional.synchronise), for shard orders that differ between workers."""

import numpy as np
import pytest
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
    w_count, m = top.workers, top.num_devices

    async def bench(ctx):
        while not host.done and host.cycle < max_cycles:
            inp = host.drive()
            ctx.set(top.start, inp["start"])
            for v in range(m):
                ctx.set(top.program[v].valid, inp["program_valid"][v])
                ctx.set(top.program[v].payload.as_value(), inp["program"][v])
                ctx.set(top.host_cmd[v].valid, inp["host_cmd_valid"][v])
                ctx.set(top.host_cmd[v].payload.as_value(), inp["host_cmd"][v])
                ctx.set(top.host_rsp[v].ready, 1)
            for w in range(w_count):
                for ch in ("rwd", "req"):
                    ctx.set(getattr(top, ch)[w].valid, inp[f"{ch}_valid"][w])
                    ctx.set(getattr(top, ch)[w].payload.as_value(), inp[ch][w])
                for ch in ("ndr", "drs"):
                    ctx.set(getattr(top, ch)[w].ready, inp[f"{ch}_ready"][w])
            out = {f"{ch}_ready": [ctx.get(getattr(top, ch)[w].ready) for w in range(w_count)]
                   for ch in ("rwd", "req")}
            for ch in ("ndr", "drs"):
                out[f"{ch}_valid"] = [ctx.get(getattr(top, ch)[w].valid) for w in range(w_count)]
                out[ch] = [ctx.get(getattr(top, ch)[w].payload.as_value())
                           for w in range(w_count)]
            out["host_cmd_ready"] = [ctx.get(top.host_cmd[v].ready) for v in range(m)]
            for name in ("staged", "staged_tensor", "done", "error", "cycles"):
                out[name] = ctx.get(getattr(top, name))
            host.sample(out)
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
