"""All-reduce on the generated network in Icarus and Verilator, checked against the golden model.

Matrix: simulator (icarus, verilator) x topology (ring:4, mesh:2x3, torus:4x4) x algorithm
(ring, ring2d, multitree, multitree-opt) x flow control (message, credit) x element type
(float32, the default; bfloat16 and int32, a part of the matrix by default and all of it with
``-m slow``), with vectors whose float sums depend on the summation order
(``tb.vectors``). Each test runs two
all-reduces in one simulation (a small vector of 3N+1 elements, one flit per chunk, and one of
24N+5 elements, several flits and sub-messages per message) with random back-pressure on the
host ports, and compares every node's buffer with ``golden_model.executor`` bit for bit and the
RTL cycle count with ``golden_model.timing`` configured like the hardware.

One hardware plan (``allreduce_rtl.plan``) and one build per (simulator, topology, flow
control) serve all four algorithms (the schedule tables are written by the host before start):
builds are cached in this process (``_build``) and on disk (``tb.build``, under a file lock
shared by pytest-xdist workers). The NI configuration is deliberately tight (receive FIFOs of 8 flits,
sub-messages of 4 flits, link latency 4) so that flow control throttles the links.

torus:8x8 (MultiTree and multitree-opt) is marked slow (``pytest -m slow``).
"""

import dataclasses
import functools
import re
import zlib

import numpy as np
import pytest

from allreduce_rtl.plan import plan_hardware
from golden_model.lowering import Direction
from golden_model.topology import parse_topology
from hdl.config import rotation_slack
from hdl.host import load_commands
from tb import harness
from tb.runner import HardwareBuild, RunSpec
from tb.scoreboard import check_run
from tb.toolchain import lint_verilog
from tb.vectors import random_vectors

SIMULATORS = ["icarus", "verilator"]
TOPOLOGIES = ["ring:4", "mesh:2x3", "torus:4x4"]
ALGORITHMS = ["ring", "ring2d", "multitree", "multitree-opt"]
FLOW_CONTROL = ["message", "credit"]
DTYPES = ["float32", "bfloat16", "int32"]
LINK_LATENCY = 4
VALID_PCT, READY_PCT = 70, 60
#: The NI configuration of these tests is deliberately tight, so flow control throttles links.
TIGHT = {"rx_buffer_depth": 8, "submessage_flits": 4}


def sizes(n, large=24):
    """The two vectors of every run: one flit per chunk, and several sub-messages per message."""
    return [3 * n + 1, large * n + 5]


@functools.cache
def test_plan(spec, flow_control, large=24, dtype="float32", **overrides):
    """The hardware plan of these tests on ``spec``: every algorithm, both sizes, one build."""
    topo = parse_topology(spec, link_latency=LINK_LATENCY)
    return plan_hardware(topo, ALGORITHMS, sizes(topo.num_nodes, large), dtype=dtype,
                         flow_control=flow_control, link_latency=LINK_LATENCY,
                         **{**TIGHT, **overrides})


test_plan.__test__ = False     # a helper, not a test
_builds = {}


def _build(sim, plan, **kwargs):
    """The (cached) build of ``plan`` in ``sim``."""
    key = (sim, id(plan), tuple(sorted(kwargs.items())))
    if key not in _builds:
        _builds[key] = (HardwareBuild(plan.hardware_topology, plan.config, sim, valid_pct=VALID_PCT,
                                      ready_pct=READY_PCT, **kwargs).build(), plan)
    return _builds[key][0]


def _vectors(n, d, seed, dtype="float32"):
    return random_vectors(n, d, dtype, seed)


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def _specs(runs, seed, dtype):
    """RunSpecs of planned runs, with random vectors of ``dtype``."""
    return [RunSpec(run.name, run.lowered,
                    _vectors(run.schedule.num_nodes, run.elements, seed + k, dtype),
                    run.expected_cycles)
            for k, run in enumerate(runs)]


def _check(plan, build, runs, specs, results, record_property=None):
    for run, spec, res in zip(runs, specs, results):
        verdict = check_run(res, run.schedule, spec.vectors, plan.element_type,
                            expected_cycles=run.expected_cycles)
        assert verdict.passed, (f"{build.sim} {build.topology.spec} "
                                f"{build.config.flow_control}: {verdict.message}")
        # The network's counter: from the start cycle to the first cycle done reads 1.
        assert res.cycles == res.tb_cycles + 1
        # The model (configured like the NI) is exact unless a send waits for a credit, which
        # these tight receive FIFOs make happen, or for its bank slot (at most the rotation's
        # slack, which dominates one-flit messages); far off would be a throughput bug.
        slack = rotation_slack(build.config, run.lowered)
        assert (verdict.model_cycles <= res.cycles
                <= 3 * verdict.model_cycles + slack), (verdict.message, slack)
        if record_property is not None:
            record_property(f"{res.name}_rtl_cycles", res.cycles)
            record_property(f"{res.name}_model_cycles", verdict.model_cycles)
            record_property(f"{res.name}_rtl_over_model", round(verdict.ratio, 3))


def _run_planned(sim, plan, algorithm, record_property, **run_kw):
    build = _build(sim, plan)
    runs = [r for r in plan.runs if r.algorithm == algorithm]
    seed = _seed(sim, plan.topology.spec, plan.config.flow_control, algorithm)
    specs = _specs(runs, seed, plan.element_type)
    _check(plan, build, runs, specs, build.run(specs, seed=seed & 0x7FFFFFFF, **run_kw),
           record_property)


#: The float32 builds of the default suite, one flow control per simulator and topology (each
#: build is 15 to 50 s); every other (simulator, topology, flow control) runs with -m slow.
DEFAULT_BUILDS = {("verilator", "ring:4", "message"), ("verilator", "mesh:2x3", "credit"),
                  ("verilator", "torus:4x4", "message"), ("icarus", "ring:4", "credit"),
                  ("icarus", "mesh:2x3", "message")}


def _allreduce_cases():
    """float32 (the default type): every simulator x topology x flow control x algorithm, the
    default suite the builds of ``DEFAULT_BUILDS`` (so each simulator, topology and flow control
    is there) but Verilator's ring2d with credit flow control. bfloat16 and int32: MultiTree and
    ring on every topology with both flow controls in Verilator and with message flow control
    on ring:4 in Icarus; by default only Verilator's on ring:4 with message flow control. The
    rest runs with -m slow."""
    for sim in SIMULATORS:
        for topology in TOPOLOGIES:
            for flow_control in FLOW_CONTROL:
                for algorithm in ALGORITHMS:
                    slow = ((sim, topology, flow_control) not in DEFAULT_BUILDS
                            or (sim == "verilator" and flow_control == "credit"
                                and algorithm == "ring2d"))
                    yield _case(sim, topology, flow_control, algorithm, "float32", slow)
                    for dtype in DTYPES[1:]:
                        if algorithm not in ("multitree", "ring") or (
                                sim == "icarus" and (topology != "ring:4"
                                                     or flow_control != "message")):
                            continue
                        slow = not (sim == "verilator" and flow_control == "message"
                                    and topology == "ring:4")
                        yield _case(sim, topology, flow_control, algorithm, dtype, slow)


def _case(sim, topology, flow_control, algorithm, dtype, slow):
    return pytest.param(sim, topology, flow_control, algorithm, dtype,
                        marks=[pytest.mark.slow] if slow else [],
                        id=f"{sim}-{topology}-{flow_control}-{algorithm}-{dtype}")


@pytest.mark.parametrize("sim, topology, flow_control, algorithm, dtype",
                         list(_allreduce_cases()))
def test_allreduce(sim, topology, flow_control, algorithm, dtype, record_property):
    _run_planned(sim, test_plan(topology, flow_control, dtype=dtype), algorithm,
                 record_property)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["multitree", "multitree-opt"])
@pytest.mark.parametrize("sim", SIMULATORS)
def test_allreduce_torus_8x8(sim, algorithm, record_property):
    """The paper's 64-node torus in RTL (float32, message flow control): every node bit for
    bit and the cycles within the model's bounds."""
    _run_planned(sim, test_plan("torus:8x8", "message", large=16), algorithm, record_property)


# --------------------------------------------------------------------------------------------
# Faults: the testbench must catch them
# --------------------------------------------------------------------------------------------

def _modify(lowered, node, direction, index, **changes):
    """A copy of ``lowered`` with one row of one engine of ``node`` changed."""
    programs = list(lowered.programs)
    prog = programs[node]
    engines = {k: list(v) for k, v in prog.engines.items()}
    key = next(k for k in sorted(engines, key=lambda k: (k[0].value, k[1]))
               if k[0] is direction and engines[k])
    engines[key][index] = dataclasses.replace(engines[key][index], **changes)
    programs[node] = dataclasses.replace(prog, engines=engines)
    return (dataclasses.replace(lowered, programs=programs), engines[key][index],
            prog.neighbors[key[1]])


@pytest.mark.parametrize("sim", SIMULATORS)
def test_missing_dependency_is_reported_as_a_stall(sim):
    """A send that waits for a receive that never comes: the TB times out and names the step
    and the node (node_step / node_done)."""
    plan = test_plan("ring:4", "message")
    build, run = _build(sim, plan), plan.plan_run("ring", 13)
    lw, row, receiver = _modify(run.lowered, 1, Direction.SEND, 0, deps=3)
    res, = build.run(RunSpec("stuck", lw, _vectors(4, 13, 1), run.expected_cycles),
                     timeout_factor=4)
    assert res.status == "stall", res.message
    m = re.search(r"deadlock or stall at step (\d+) on node (\d+)", res.message)
    assert m, res.message
    # The earliest step still pending is the stuck send's, on its node or on the node waiting
    # for it (both report it; the lower id is named).
    assert int(m.group(1)) == row.step and int(m.group(2)) in (1, receiver)
    assert f"1:{row.step}" in res.message


@pytest.mark.parametrize("sim", SIMULATORS)
def test_head_mismatch_sets_error(sim):
    """A receive row that expects another step than the head flit carries: the NI sets error and
    the TB fails the run at once, naming the node."""
    plan = test_plan("ring:4", "message")
    build, run = _build(sim, plan), plan.plan_run("ring", 13)
    lw, _, _ = _modify(run.lowered, 2, Direction.RECV, 0, step=77)
    res, = build.run(RunSpec("mismatch", lw, _vectors(4, 13, 2), run.expected_cycles))
    assert res.status == "error", res.message
    assert "node(s) 2" in res.message


# --------------------------------------------------------------------------------------------
# Generated Verilog, images, waves
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flow_control", FLOW_CONTROL)
def test_generated_verilog_passes_lint(flow_control):
    """The network's Verilog, and the whole harness around it, pass ``verilator -Wall``."""
    build = _build("verilator", test_plan("mesh:2x3", flow_control))
    net = build.network_file()
    lint_verilog(net, "network")
    lint_verilog([net, build.build_dir / "host_player.v", build.build_dir / "tb_top.v"], "tb_top")


def test_images_match_the_hardware_loader():
    """The players' images (vectorised, tb/harness.py) hold exactly the commands of the
    hardware's own loader (hdl.host.load_commands), so tb and hdl agree on the host port."""
    plan = test_plan("mesh:2x3", "message")
    cfg, lw = plan.config, plan.run("multitree-opt", 6 * 24 + 5).lowered
    vec = _vectors(6, lw.schedule.num_elements, 9)
    layout = harness.HostCmdLayout.for_flit_width(cfg.flit_width)
    packed = lw.pack(vec)
    for v, image in enumerate(harness.program_images(lw, cfg, vec, layout)):
        flits = [layout.pack(1, 0, 0, a, sum(int(x) % (1 << 32) << (32 * e)
                                                for e, x in enumerate(f)))
                 for a, f in enumerate(image.flits.view(np.int32))]
        assert sorted(image.control + flits) == sorted(load_commands(cfg, lw, v, packed[v]))


@pytest.mark.parametrize("sim", [
    "icarus", pytest.param("verilator", marks=pytest.mark.slow)])   # Verilator's: a 50 s build
def test_waves(sim):
    plan = test_plan("ring:4", "credit")
    build = _build(sim, plan, waves=True)
    runs = [plan.plan_run("multitree", 13)]
    specs = _specs(runs, 3, plan.element_type)
    results = build.run(specs)
    _check(plan, build, runs, specs, results)
    wave = results[0].waves_file
    assert wave.is_file() and wave.stat().st_size > 1000
    assert wave.suffix == (".fst" if sim == "icarus" else ".vcd")


# --------------------------------------------------------------------------------------------
# Floats: the schedule's summation order, whatever the timing
# --------------------------------------------------------------------------------------------

def _determinism_cases():
    """mesh:2x3's MultiTree (several children reduce into one chunk) in float32 and bfloat16:
    float32 on the matrix's own build by default; with -m slow float32 with the other link
    latency and flow control, and bfloat16 (message flow control) at both link latencies."""
    for dtype in ("float32", "bfloat16"):
        for latency in (LINK_LATENCY, 1):
            for flow_control in FLOW_CONTROL:
                slow = latency != LINK_LATENCY or flow_control != "message" or dtype == "bfloat16"
                if dtype == "bfloat16" and slow and flow_control == "credit":
                    continue        # float32 covers credits; bfloat16 the other latency
                yield pytest.param("verilator", dtype, latency, flow_control,
                                   marks=[pytest.mark.slow] if slow else [],
                                   id=f"{dtype}-latency{latency}-{flow_control}")


@pytest.mark.parametrize("sim, dtype, latency, flow_control", list(_determinism_cases()))
def test_float_results_do_not_depend_on_the_timing(sim, dtype, latency, flow_control):
    """The same order-sensitive float vectors, all-reduced under five seeds of random start skew
    (each NI starts 0..40 cycles late, so messages meet in other orders: the cycle counts
    differ) and host back-pressure, with tight receive FIFOs: every run gives the golden
    model's bits on every node, so the same bits each time; and the vectors do depend on the
    order (summing the nodes in reverse order changes some bits)."""
    topo = parse_topology("mesh:2x3", link_latency=latency)
    plan = (test_plan("mesh:2x3", flow_control, dtype=dtype) if latency == LINK_LATENCY else
            plan_hardware(topo, ALGORITHMS, sizes(6), dtype=dtype, flow_control=flow_control,
                          link_latency=latency, **TIGHT))
    build = _build(sim, plan)
    t = plan.element_type
    run = plan.run("multitree", sizes(6)[1])
    vec = _vectors(6, run.elements, _seed("determinism", dtype), dtype)
    outputs, cycles = [], set()
    for seed in range(5):
        res, = build.run([RunSpec(f"seed{seed}", run.lowered, vec, run.expected_cycles)],
                         seed=seed + 1, start_skew=40)
        cycles.add(res.cycles)
        verdict = check_run(res, run.schedule, vec, t, expected_cycles=run.expected_cycles)
        assert verdict.passed, verdict.message
        outputs.append(t.to_bits(res.outputs.astype(t.dtype)))
    assert all(np.array_equal(o, outputs[0]) for o in outputs)
    assert len(cycles) > 1, cycles
    forward, backward = vec[0].copy(), vec[-1].copy()
    for k in range(1, 6):
        t.add(forward, vec[k])
        t.add(backward, vec[5 - k])
    assert not np.array_equal(t.to_bits(forward), t.to_bits(backward))
