"""All-reduce on the routed network (NIs on routers, ``hdl.routed_network``) in Icarus and
Verilator, checked bit for bit against the golden model.

Double binary tree and halving-doubling on torus:4x4 (they send over several hops, so they need
the router) and MultiTree on fattree:4x2 and bigraph:4x4 (every transfer crosses switches); with
``pytest -m slow`` also every other algorithm of the golden model that runs on those
topologies (ring, ring2d and the MultiTrees on the torus; dbtree, halving-doubling and ring on
the switched networks). In float32 (staged reductions through the NI's loopback port, so the
sums follow the schedule's order although messages arrive in any order); bfloat16 and int32
with ``-m slow``. One build per (simulator, topology, element type) serves every algorithm; the host players apply random back-pressure and the NI's
receive FIFOs are tight (8 flits, sub-messages of 4), as in ``test_hw_allreduce``. Cycle counts
are compared with ``golden_model.timing`` configured like the routed hardware
(the hardware plan's expected cycles, ``allreduce_rtl.plan``: 4 cycles per router, the NIs
injecting by the plan's timetable, ``golden_model.timetable``).
"""

import functools

import pytest

from allreduce_rtl.plan import plan_hardware
from golden_model.topology import parse_topology
from tb.runner import HardwareBuild, RunSpec
from tb.scoreboard import check_run

from test_hw_allreduce import LINK_LATENCY, READY_PCT, TIGHT, VALID_PCT, _seed, _vectors, sizes

SIMULATORS = ["icarus", "verilator"]
#: What needs the router (default suite) ...
CASES = {
    "torus:4x4": ["dbtree", "halving-doubling"],
    "fattree:4x2": ["multitree"],
    "bigraph:4x4": ["multitree"],
    # endpoints with two links, each to a switch: an NI port and a router terminal per link
    "machine:cloud-v100": ["multitree", "multitree-opt"],
}
#: ... and every other algorithm that runs there (``pytest -m slow``).
MORE_CASES = {
    "torus:4x4": ["ring", "ring2d", "multitree", "multitree-opt"],
    "fattree:4x2": ["dbtree", "halving-doubling", "ring"],
    "bigraph:4x4": ["dbtree", "halving-doubling", "ring"],
    "machine:cloud-v100": ["dbtree", "halving-doubling", "ring"],
}
_builds = {}


#: Element types: the first in the default suite, the others with -m slow.
DTYPES = ["float32", "bfloat16", "int32"]


@functools.cache
def routed_plan(spec, dtype):
    """The routed hardware plan of these tests on ``spec``: every algorithm of both lists, both
    sizes, NIs on routers adding ``dtype``."""
    topo = parse_topology(spec, link_latency=LINK_LATENCY)
    return plan_hardware(topo, CASES[spec] + MORE_CASES[spec], sizes(topo.num_nodes),
                         dtype=dtype, flow_control="message", link_latency=LINK_LATENCY,
                         router=True, **TIGHT)


routed_plan.__test__ = False


def _build(sim, spec, dtype):
    if (sim, spec, dtype) not in _builds:
        plan = routed_plan(spec, dtype)
        _builds[(sim, spec, dtype)] = HardwareBuild(plan.hardware_topology, plan.config, sim,
                                                    valid_pct=VALID_PCT,
                                                    ready_pct=READY_PCT).build()
    return _builds[(sim, spec, dtype)]


# Icarus simulates a 16-router network at a few hundred cycles per second (float NIs slower still):
# it runs the small vectors here, every size in test_routed_allreduce_all_sizes_icarus. The routed
# torus in Verilator takes about 140 s (16 eight-port routers). The default suite keeps one case,
# MultiTree's stars on the fat-tree in int32 in Verilator (the float32 NIs' staged reductions
# double its build, about 100 s); the rest runs with -m slow.
DEFAULT_CASE = ("verilator", "fattree:4x2", "int32")
@pytest.mark.parametrize("sim, spec, dtype", [
    pytest.param(sim, spec, dtype,
                 marks=[] if (sim, spec, dtype) == DEFAULT_CASE else [pytest.mark.slow])
    for sim in SIMULATORS for spec in CASES for dtype in DTYPES
    if (sim, spec) != ("icarus", "torus:4x4")
    # the other types in Verilator on the switched networks (the torus: float32)
    and (dtype == DTYPES[0] or (sim == "verilator" and spec != "torus:4x4"))])
def test_routed_allreduce(sim, spec, dtype, record_property):
    _run_and_check(sim, spec, dtype, CASES[spec], record_property,
                   small_only=sim == "icarus")


@pytest.mark.slow
@pytest.mark.parametrize("spec", list(CASES))
def test_routed_allreduce_all_sizes_icarus(spec, record_property):
    _run_and_check("icarus", spec, DTYPES[0], CASES[spec], record_property)


@pytest.mark.slow
@pytest.mark.parametrize("spec", list(MORE_CASES))
@pytest.mark.parametrize("sim", SIMULATORS)
def test_routed_allreduce_other_algorithms(sim, spec, record_property):
    # Icarus on the small vectors, and in int32 on the torus: its 16 routers with 5-port float
    # NIs took 635 s at both sizes and 475 s at the small one (Verilator runs them in float32)
    dtype = "int32" if (sim, spec) == ("icarus", "torus:4x4") else DTYPES[0]
    _run_and_check(sim, spec, dtype, MORE_CASES[spec], record_property,
                   small_only=sim == "icarus")


def _run_and_check(sim, spec, dtype, algorithms, record_property, small_only=False):
    plan = routed_plan(spec, dtype)
    build = _build(sim, spec, dtype)
    smallest = min(r.elements for r in plan.runs)
    runs = [r for r in plan.runs if r.algorithm in algorithms
            and (not small_only or r.elements == smallest)]
    specs = [RunSpec(r.name, r.lowered,
                     _vectors(plan.topology.num_nodes, r.elements, _seed(sim, spec, r.name),
                              dtype),
                     r.expected_cycles) for r in runs]
    results = build.run(specs, seed=_seed(sim, spec) & 0x7FFFFFFF)
    failures = []
    for run, rs, res in zip(runs, specs, results):
        verdict = check_run(res, run.schedule, rs.vectors, plan.element_type,
                            expected_cycles=run.expected_cycles)
        record_property(f"{res.name}_rtl_cycles", res.cycles)
        record_property(f"{res.name}_model_cycles", verdict.model_cycles)
        if not verdict.passed:
            failures.append(verdict.message)
            continue
        # The NIs inject by the plan's timetable (golden_model.timetable), so no message waits
        # in a router, and the model counts the buffer's bank rotation as the NIs run the
        # timetable (its second pass): every routed run within 10% of it.
        low, high = 0.9 * verdict.model_cycles, 1.1 * verdict.model_cycles
        if not low <= res.cycles <= high:
            failures.append(f"{res.name}: RTL {res.cycles} cycles, model {verdict.model_cycles}"
                            f" (outside {low:.0f}..{high:.0f})")
    assert not failures, "\n".join(failures)
