"""The COARSE system end to end in amaranth.sim (hdl/coarse/system.py): workers push their
copies of every shard of the golden routing tables over CXL.mem (MemWr) to the shard's device,
the devices reduce them in client order and around their ring, and the workers pull the result
(MemRd, held until reduced): every worker's every shard bit for bit the golden model's
(golden_model.coarse.functional.synchronise), for shard orders that differ between workers."""

import pytest
from amaranth.hdl import ClockDomain, Module, Value

from allreduce_rtl.plan import model_cycles
from golden_model.coarse.config import parse_system
from golden_model.elements import FLOAT32, INT32
from tb.coarse.system import SystemHost, SystemScenario
from hdl_host import run_testbench

SMALL = "coarse:W=4,M=2,lat_local=0.01,lat_remote=0.02,threshold=2KB"
#: (layer, name, elements): a 1,500-element tensor cut into two shards and two small ones;
#: with 2 tensor slots, two batches
TENSORS = [(0, "big", 1500), (1, "bn", 40), (2, "tiny", 7)]
SLOTS = 2
#: four tensors below the threshold: each goes whole to its worker's latency proxy
SMALL_TENSORS = [(0, "a", 40), (1, "b", 64), (2, "c", 7), (3, "d", 20)]


def run_system(scenario, seed=1, max_cycles=100_000, **host_args):
    top = scenario.system()
    host = SystemHost(scenario, top, seed=seed, **host_args)

    ports = {"__".join(map(str, path)): Value.cast(value)
             for path, _, value in top.signature.flatten(top)}

    # The cocotb modules' reset: three cycles of rst (the NIs, which register their reset,
    # leave it a cycle after the rest, as in the Verilog).
    bench_top = Module()
    bench_top.domains.sync = sync = ClockDomain()
    bench_top.submodules.system = top

    async def bench(ctx):
        ctx.set(sync.rst, 1)
        for _ in range(3):      # (a tick() in reset raises DomainReset: wait for the edges)
            await ctx.posedge(sync.clk)
        ctx.set(sync.rst, 0)
        await ctx.tick()        # cocotb samples first at the falling edge after the next
        while not host.done and host.cycle < max_cycles:
            host.drive_ports(lambda name, value: ctx.set(ports[name], value))
            host.sample_ports(lambda name: ctx.get(ports[name]))
            await ctx.tick()

    run_testbench(bench_top, bench)
    return host


@pytest.mark.parametrize("etype,orders", [(FLOAT32, "mixed"), (INT32, "table")],
                         ids=["float32-mixed", "int32-table"])
def test_every_worker_pulls_the_golden_result(etype, orders):
    scenario = SystemScenario(parse_system(SMALL), TENSORS, etype, slots=SLOTS, orders=orders)
    assert len(scenario.shards) > len(TENSORS)          # the big tensor is partitioned
    assert len(scenario.batches) > 1
    host = run_system(scenario)
    assert host.stall is None, host.stall
    assert host.finished and host.error == 0
    assert len(host.results) == len(scenario.shards) * 4
    assert host.mismatches() == []
    # the hardware cycle model (golden_model.coarse.hardware) within its 10% target
    assert abs(host.cycle / scenario.model_cycles(model_cycles) - 1) < 0.10


def test_the_naive_shared_queue_stalls_where_the_golden_model_deadlocks():
    """The ablation: each device admits copies through one shared FIFO of 2 entries and
    starts only its head's tensor. Four small tensors go to the latency proxies (workers 0 and
    1 on device 0, 2 and 3 on device 1); worker 1 sends them in the reverse of worker 0's
    order, so on device 0 the golden model's naive scheme
    (``simulate_queues``) deadlocks at depth 2, and COARSE's does not; the hardware stalls,
    and the watchdog's report names a device queue holding a shard that waits for a worker."""
    from golden_model.coarse.deadlock import simulate_queues
    naive = SystemScenario(parse_system(SMALL), SMALL_TENSORS, INT32, slots=4, orders="mixed",
                           shared_queue=2)
    assert [s[4] for s in naive.shards] == [(0, 0, 1, 1)] * 4      # each device one group
    orders = [naive.device_orders(0, v) for v in range(2)]
    assert any(not simulate_queues(o, "naive", 2).completed for o in orders)
    assert all(simulate_queues(o, "coarse").completed for o in orders)
    host = run_system(naive, watchdog=500)
    assert not host.finished and host.stall is not None
    stuck = host.stall["stuck"]
    assert stuck and all(q["entries"] == 2 and q["waiting_for"] for q in stuck)
    assert "shared queue (2 of 2 entries)" in host.stall["message"]
    coarse = SystemScenario(parse_system(SMALL), SMALL_TENSORS, INT32, slots=4,
                            orders="mixed")
    host = run_system(coarse, watchdog=500)
    assert host.finished and host.mismatches() == []

