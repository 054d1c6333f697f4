"""All-reduce on the routed network (NIs on routers, ``hdl.routed_network``) in Icarus and
Verilator, checked bit for bit against the golden model.

Double binary tree and halving-doubling on torus:4x4 (they send over several hops, so they need
the router) and MultiTree on fattree:4x2 and bigraph:4x4 (every transfer crosses switches); with
``pytest -m slow`` also every other algorithm of the golden model that runs on those
topologies (ring, ring2d and the MultiTrees on the torus; dbtree, halving-doubling and ring on
the switched networks). One build per (simulator,
topology) serves every algorithm; the host players apply random back-pressure and the NI's
receive FIFOs are tight (8 flits, sub-messages of 4), as in ``test_hw_allreduce``. Cycle counts
are compared with ``golden_model.timing`` configured like the routed hardware
(``tb.scoreboard.model_cycles``: 4 cycles per router, first-come links).
"""

import pytest

from golden_model.algorithms import build_schedule
from golden_model.lowering import lower
from golden_model.topology import parse_topology
from hdl.config import NIConfig
from tb.runner import HardwareBuild, RunSpec
from tb.scoreboard import check_run, model_cycles

from test_hw_allreduce import LINK_LATENCY, READY_PCT, VALID_PCT, _seed, _vectors

SIMULATORS = ["icarus", "verilator"]
#: What needs the router (default suite) ...
CASES = {
    "torus:4x4": ["dbtree", "halving-doubling"],
    "fattree:4x2": ["multitree"],
    "bigraph:4x4": ["multitree"],
}
#: ... and every other algorithm that runs there (``pytest -m slow``).
MORE_CASES = {
    "torus:4x4": ["ring", "ring2d", "multitree", "multitree-opt"],
    "fattree:4x2": ["dbtree", "halving-doubling", "ring"],
    "bigraph:4x4": ["dbtree", "halving-doubling", "ring"],
}
_builds = {}


def routed_config(spec, **overrides):
    """The routed NI configuration of these tests on ``spec``."""
    topo = parse_topology(spec, link_latency=LINK_LATENCY)
    n = topo.num_nodes
    ports = max(len(topo.neighbors(v)) for v in topo.nodes) if topo.is_direct else 1
    fields = dict(num_ports=ports, buffer_depth=max(128, 8 * n), table_depth=max(32, 2 * n),
                  max_chunks=max(16, n), rx_buffer_depth=8, submessage_flits=4,
                  flow_control="message", link_latency=LINK_LATENCY, routed=True)
    fields.update(overrides)
    return topo, NIConfig(**fields)


routed_config.__test__ = False


def _build(sim, spec):
    if (sim, spec) not in _builds:
        topo, cfg = routed_config(spec)
        _builds[(sim, spec)] = HardwareBuild(topo, cfg, sim, valid_pct=VALID_PCT,
                                             ready_pct=READY_PCT, cxx_opt="-O0").build()
    return _builds[(sim, spec)]


@pytest.mark.parametrize("spec", list(CASES))
@pytest.mark.parametrize("sim", SIMULATORS)
def test_routed_allreduce(sim, spec, record_property):
    _run_and_check(sim, spec, CASES[spec], record_property)


@pytest.mark.slow
@pytest.mark.parametrize("spec", list(MORE_CASES))
@pytest.mark.parametrize("sim", SIMULATORS)
def test_routed_allreduce_other_algorithms(sim, spec, record_property):
    _run_and_check(sim, spec, MORE_CASES[spec], record_property)


def _run_and_check(sim, spec, algorithms, record_property):
    build = _build(sim, spec)
    topo, cfg = build.topology, build.config
    n = topo.num_nodes
    specs, inputs = [], []
    for algorithm in algorithms:
        for k, d in enumerate([3 * n + 1, 24 * n + 5]):
            sched = build_schedule(algorithm, topo, d)
            vec = _vectors(n, d, _seed(sim, spec, algorithm, k))
            specs.append(RunSpec(f"{algorithm}-{d}", lower(sched, cfg.elems_per_flit, routed=True),
                                 vec, model_cycles(sched, cfg)))
            inputs.append(vec)
    results = build.run(specs, seed=_seed(sim, spec) & 0x7FFFFFFF)
    failures = []
    for rs, vec, res in zip(specs, inputs, results):
        verdict = check_run(res, rs.lowered.schedule, vec, cfg)
        record_property(f"{res.name}_rtl_cycles", res.cycles)
        record_property(f"{res.name}_model_cycles", verdict.model_cycles)
        if not verdict.passed:
            failures.append(verdict.message)
            continue
        # Routers arbitrate flit by flit and the model message by message, so the model is not
        # a lower bound here; far off either way would be a timing bug.
        if not 0.8 * verdict.model_cycles <= res.cycles <= 3 * verdict.model_cycles:
            failures.append(f"{res.name}: RTL {res.cycles} cycles, model {verdict.model_cycles}")
    assert not failures, "\n".join(failures)
