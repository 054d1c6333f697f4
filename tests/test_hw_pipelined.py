"""Pipelined multitree-opt schedules on the hardware, bit for bit and cycle for cycle.

``multitree-opt`` cuts each root's chunk into sub-chunks on packed trees where the timing model
says that is faster (``golden_model.algorithms.multitree_opt``): more table rows and chunks,
several transfers on one link in one step. The hardware plan chooses with the NI's
per-message turnaround (``allreduce_rtl.plan.choice_timing``), so it pipelines only where the
messages stay long: at these sizes it does (asserted, so a change of the choice cannot silently
turn the test into a whole-chunk one): mesh:2x3 at 16,384 elements (4 sub-chunks) on links in
Verilator in the default suite, in Icarus and on routers with ``-m slow``; torus:4x4 at 262,144
elements (8 sub-chunks of 512 flits) on links and on routers in Verilator with ``-m slow``. Every
node's buffer must equal ``golden_model.executor``'s bit for bit (on mesh:2x3 under random
back-pressure on the host ports; torus:4x4's vectors load at full rate, as under back-pressure
the load alone takes over ten minutes), and the RTL cycles must lie between the timing model configured like the
hardware and ``MODEL_TOLERANCE`` above it (on routers within ``MODEL_TOLERANCE`` either side:
there the model runs the plan's timetable as the NIs do, ``golden_model.timetable``, and is
no longer a lower bound).

The optimal-schedules issue asks for 5% on torus:4x4, which these schedules reach (measured,
Verilator: torus:4x4 on routers 1.000, on links 1.016; mesh:2x3 on links 1.037, on
routers 1.000; 1.015 and 1.148 on routers before the timetable and its bank slots). On links
the model counts
the order in which a receive engine writes (``TimingParams.receive_order``: the ordering rule,
under which a receive into a chunk waits, holding its port, for the receive before it in the
summation order; multitree-opt sums in arrival order, ``timing.in_arrival_order``, so it
rarely binds) and leaves out the NI's per-message turnaround (``plan.NI_MESSAGE_GAP``), so it
stays a lower bound.
"""

import functools

import pytest

from allreduce_rtl.plan import plan_hardware
from golden_model.topology import parse_topology
from tb.runner import HardwareBuild, RunSpec
from tb.scoreboard import check_run

from test_hw_allreduce import LINK_LATENCY, READY_PCT, VALID_PCT, _seed, _vectors

ELEMENTS = {"mesh:2x3": 16384, "torus:4x4": 262144}
#: How far the RTL may exceed the model (module docstring: measured 1.037 at worst; the
#: issue's target is 0.05), and on routers fall below it.
MODEL_TOLERANCE = 0.05


@functools.cache
def pipelined_plan(spec, router):
    """The hardware plan of multitree-opt on ``spec`` at ``ELEMENTS[spec]`` (float32 on links,
    int32 on routers, the plan's defaults there)."""
    topo = parse_topology(spec, link_latency=LINK_LATENCY)
    return plan_hardware(topo, ["multitree-opt"], [ELEMENTS[spec]], link_latency=LINK_LATENCY,
                         router=router)


pipelined_plan.__test__ = False


def _cases():
    for sim in ("icarus", "verilator"):
        yield pytest.param(sim, "mesh:2x3", False, id=f"{sim}-mesh:2x3-links",
                           marks=[pytest.mark.slow] if sim == "icarus" else [])
        yield pytest.param(sim, "mesh:2x3", True, marks=pytest.mark.slow,
                           id=f"{sim}-mesh:2x3-routers")
    for router in (False, True):
        kind = "routers" if router else "links"
        yield pytest.param("verilator", "torus:4x4", router, marks=pytest.mark.slow,
                           id=f"verilator-torus:4x4-{kind}")


@pytest.mark.parametrize("sim, spec, router", list(_cases()))
def test_pipelined_multitree_opt(sim, spec, router, record_property):
    plan = pipelined_plan(spec, router)
    run, = plan.runs
    meta = run.schedule.meta
    assert meta["sub_chunks"] > 1 and meta["tree_sets"] > 1, meta
    assert not run.schedule.contention_free
    # torus:4x4's 65,536 flits per node load in minutes under back-pressure: full rate there.
    pct = (VALID_PCT, READY_PCT) if spec == "mesh:2x3" else (100, 100)
    build = HardwareBuild(plan.hardware_topology, plan.config, sim, valid_pct=pct[0],
                          ready_pct=pct[1]).build()
    seed = _seed(sim, spec, router, "pipelined")
    vectors = _vectors(run.schedule.num_nodes, run.elements, seed, plan.element_type.name)
    res, = build.run([RunSpec(run.name, run.lowered, vectors, run.expected_cycles)],
                     seed=seed & 0x7FFFFFFF)
    verdict = check_run(res, run.schedule, vectors, plan.element_type,
                        expected_cycles=run.expected_cycles)
    assert verdict.passed, verdict.message
    print(verdict.message)
    record_property("rtl_cycles", res.cycles)
    record_property("model_cycles", verdict.model_cycles)
    low = (1 - MODEL_TOLERANCE if router else 1) * verdict.model_cycles
    assert low <= res.cycles <= (1 + MODEL_TOLERANCE) * verdict.model_cycles, verdict.message
