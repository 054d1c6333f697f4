"""The COARSE system in Icarus and Verilator (cocotb, tb/coarse/cocotb_system.py): the workers'
shards in mixed orders under random gaps and back-pressure, every worker's result bit for bit
against golden_model.coarse.functional.synchronise, and the same outputs on every cycle as in
amaranth.sim (tests/test_coarse_system.py); the naive shared-queue ablation stalls and its
report names the stuck queue (and its Verilog passes the lint). The ablation runs in Icarus in
the default suite; the rest is marked slow (a Verilator build takes about 35 s, and the default
suite is near its 10 minutes); tests/test_coarse_rtl_cli.py verifies a run in Icarus by
default."""

import pytest

from golden_model.coarse.config import parse_system
from golden_model.elements import FLOAT32, INT32
from tb.coarse.run import SystemBuild
from tb.coarse.system import SystemScenario
from tb.toolchain import lint_verilog
from test_coarse_system import SLOTS, SMALL, SMALL_TENSORS, TENSORS, run_system

SIMS = [pytest.param("icarus"), pytest.param("verilator", marks=pytest.mark.slow)]


@pytest.mark.slow
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_mixed_orders_verify_cycle_for_cycle(sim):
    scenario = SystemScenario(parse_system(SMALL), TENSORS, FLOAT32, slots=SLOTS,
                              orders="mixed")
    report = SystemBuild(sim, scenario).run_system(seed=2, trace=True)
    assert report["failure"] == "", report["log"]
    assert report["stall"] is None and report["error"] == 0
    assert report["mismatches"] == []
    model = run_system(scenario, seed=2, trace=True)
    assert model.mismatches() == []
    assert report["cycles"] == model.cycle
    assert report["trace"] == model.trace          # every output but the payloads, every cycle


@pytest.mark.parametrize("sim", SIMS)
def test_the_naive_ablation_stalls(sim):
    scenario = SystemScenario(parse_system(SMALL), SMALL_TENSORS, INT32, slots=4,
                              orders="mixed", shared_queue=2)
    build = SystemBuild(sim, scenario)
    report = build.run_system(watchdog=500)
    assert report["stall"] is not None
    assert report["stall"]["stuck"][0]["device"] == 0
    assert report["stall"]["stuck"][0]["waiting_for"] == [1]
    assert "device 0's shared queue (2 of 2 entries)" in report["stall"]["message"]
    if sim == "icarus":             # the system's Verilog, the ablation's queues included
        lint_verilog(build.network_file(), "coarse_system")
