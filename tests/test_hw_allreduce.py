"""All-reduce on the generated network in Icarus and Verilator, checked against the golden model.

Matrix: simulator (icarus, verilator) x topology (ring:4, mesh:2x3, torus:4x4) x algorithm
(ring, ring2d, multitree, multitree-opt) x flow control (message, credit). Each test runs two
all-reduces in one simulation (a small vector of 3N+1 elements, one flit per chunk, and one of
24N+5 elements, several flits and sub-messages per message) with random back-pressure on the
host ports, and compares every node's buffer with ``golden_model.executor`` bit for bit and the
RTL cycle count with ``golden_model.timing`` configured like the hardware.

One hardware build per (simulator, topology, flow control) serves all four algorithms (the
schedule tables are written by the host before start): builds are cached in this process
(``_build``) and on disk (``build/<toolchain>/<sim>/<config-hash>``, under a file lock shared
by pytest-xdist workers). The NI configuration is deliberately tight (receive FIFOs of 8 flits,
sub-messages of 4 flits, link latency 4) so that flow control throttles the links.

torus:8x8 multitree is marked slow (``pytest -m slow``).
"""

import dataclasses
import re
import zlib

import numpy as np
import pytest

from golden_model.algorithms import build_schedule
from golden_model.lowering import Direction, lower
from golden_model.topology import parse_topology
from hdl.config import NIConfig
from hdl.host import load_commands
from tb import harness
from tb.runner import HardwareBuild, RunSpec
from tb.scoreboard import check_run, model_cycles
from tb.toolchain import lint_verilog

SIMULATORS = ["icarus", "verilator"]
TOPOLOGIES = ["ring:4", "mesh:2x3", "torus:4x4"]
ALGORITHMS = ["ring", "ring2d", "multitree", "multitree-opt"]
FLOW_CONTROL = ["message", "credit"]
LINK_LATENCY = 4
VALID_PCT, READY_PCT = 70, 60

_builds = {}


def test_config(spec, flow_control, **overrides):
    """The NI configuration of the hardware tests on ``spec`` (every algorithm fits)."""
    topo = parse_topology(spec, link_latency=LINK_LATENCY)
    n = topo.num_nodes
    ports = max(len(topo.neighbors(v)) for v in topo.nodes)
    fields = dict(num_ports=ports, buffer_depth=max(128, 8 * n), table_depth=max(32, 2 * n),
                  max_chunks=max(16, n), rx_buffer_depth=8, submessage_flits=4,
                  flow_control=flow_control, link_latency=LINK_LATENCY)
    fields.update(overrides)
    return topo, NIConfig(**fields)


test_config.__test__ = False     # a helper, not a test


def _build(sim, spec, flow_control, **kwargs):
    """The (cached) build of ``spec`` with ``flow_control`` in ``sim``."""
    key = (sim, spec, flow_control, tuple(sorted(kwargs.items())))
    if key not in _builds:
        topo, cfg = test_config(spec, flow_control)
        # -O0: the C++ of a 16-NI model compiles in 26 s instead of 43 s (Verilator's -Os), and
        # these runs are a few thousand cycles.
        _builds[key] = HardwareBuild(topo, cfg, sim, valid_pct=VALID_PCT, ready_pct=READY_PCT,
                                     cxx_opt="-O0", **kwargs).build()
    return _builds[key]


def _vectors(n, d, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(-2**31, 2**31, size=(n, d), dtype=np.int64).astype(np.int32)


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def _runs(build, algorithm, sizes, seed):
    topo, cfg = build.topology, build.config
    specs, inputs = [], []
    for k, d in enumerate(sizes):
        sched = build_schedule(algorithm, topo, d)
        lw = lower(sched, cfg.elems_per_flit)
        vec = _vectors(topo.num_nodes, d, seed + k)
        specs.append(RunSpec(f"{algorithm}-{d}", lw, vec, model_cycles(sched, cfg)))
        inputs.append(vec)
    return specs, inputs


def _check(build, specs, inputs, results, record_property=None):
    for spec, vec, res in zip(specs, inputs, results):
        verdict = check_run(res, spec.lowered.schedule, vec, build.config)
        assert verdict.passed, (f"{build.sim} {build.topology.spec} "
                                f"{build.config.flow_control}: {verdict.message}")
        # The network's counter: from the start cycle to the first cycle done reads 1.
        assert res.cycles == res.tb_cycles + 1
        # The model (configured like the NI) is exact unless a send waits for a credit, which
        # these tight receive FIFOs make happen; far off would be a throughput bug.
        assert verdict.model_cycles <= res.cycles <= 3 * verdict.model_cycles, verdict.message
        if record_property is not None:
            record_property(f"{res.name}_rtl_cycles", res.cycles)
            record_property(f"{res.name}_model_cycles", verdict.model_cycles)
            record_property(f"{res.name}_rtl_over_model", round(verdict.ratio, 3))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("flow_control", FLOW_CONTROL)
@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("sim", SIMULATORS)
def test_allreduce(sim, topology, flow_control, algorithm, record_property):
    build = _build(sim, topology, flow_control)
    n = build.topology.num_nodes
    seed = _seed(sim, topology, flow_control, algorithm)
    specs, inputs = _runs(build, algorithm, [3 * n + 1, 24 * n + 5], seed)
    results = build.run(specs, seed=seed & 0x7FFFFFFF)
    _check(build, specs, inputs, results, record_property)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["multitree", "multitree-opt"])
@pytest.mark.parametrize("sim", SIMULATORS)
def test_allreduce_torus_8x8(sim, algorithm, record_property):
    build = _build(sim, "torus:8x8", "message")
    seed = _seed(sim, "torus:8x8", algorithm)
    specs, inputs = _runs(build, algorithm, [3 * 64 + 1, 16 * 64 + 5], seed)
    _check(build, specs, inputs, build.run(specs, seed=seed & 0x7FFFFFFF), record_property)


@pytest.mark.parametrize("sim", SIMULATORS)
def test_full_rate_matches_the_model_exactly(sim, record_property):
    """With receive FIFOs deep enough for full rate (``network_config_for``) and credit flow
    control, no send waits for a credit: the RTL takes exactly the cycles of the timing model
    configured like the NI (docs/hardware.md, "Pipeline timing")."""
    topo, cfg = test_config("mesh:2x3", "credit")
    cfg = dataclasses.replace(cfg, rx_buffer_depth=cfg.full_rate_rx_depth)
    build = HardwareBuild(topo, cfg, sim, valid_pct=VALID_PCT, ready_pct=READY_PCT,
                          cxx_opt="-O0").build()
    specs, inputs = [], []
    for algorithm in ALGORITHMS:
        s, i = _runs(build, algorithm, [6 * 40 + 3], _seed(sim, algorithm, "full"))
        specs += s
        inputs += i
    results = build.run(specs)
    _check(build, specs, inputs, results, record_property)
    for spec, res in zip(specs, results):
        assert res.cycles == spec.expected_cycles, (spec.name, res.cycles, spec.expected_cycles)


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
    build = _build(sim, "ring:4", "message")
    sched = build_schedule("ring", build.topology, 13)
    lw, row, receiver = _modify(lower(sched), 1, Direction.SEND, 0, deps=3)
    res, = build.run(RunSpec("stuck", lw, _vectors(4, 13, 1), model_cycles(sched, build.config)),
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
    build = _build(sim, "ring:4", "message")
    sched = build_schedule("ring", build.topology, 13)
    lw, _, _ = _modify(lower(sched), 2, Direction.RECV, 0, step=77)
    res, = build.run(RunSpec("mismatch", lw, _vectors(4, 13, 2), model_cycles(sched, build.config)))
    assert res.status == "error", res.message
    assert "node(s) 2" in res.message


# --------------------------------------------------------------------------------------------
# Generated Verilog, images, waves
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flow_control", FLOW_CONTROL)
def test_generated_verilog_passes_lint(flow_control):
    """The network's Verilog, and the whole harness around it, pass ``verilator -Wall``."""
    build = _build("verilator", "mesh:2x3", flow_control)
    net = build.network_file()
    lint_verilog(net, "network")
    lint_verilog([net, build.build_dir / "host_player.v", build.build_dir / "tb_top.v"], "tb_top")


def test_images_match_the_hardware_loader():
    """The players' images (vectorised, tb/harness.py) hold exactly the commands of the
    hardware's own loader (hdl.host.load_commands), so tb and hdl agree on the host port."""
    topo, cfg = test_config("mesh:2x3", "message")
    sched = build_schedule("multitree-opt", topo, 6 * 24 + 5)
    lw = lower(sched)
    vec = _vectors(6, sched.num_elements, 9)
    layout = harness.HostCmdLayout.for_flit_width(cfg.flit_width)
    packed = lw.pack(vec)
    for v, image in enumerate(harness.program_images(lw, cfg, vec, layout)):
        flits = [layout.pack(1, 0, 0, a, sum(int(x) % (1 << 32) << (32 * e)
                                                for e, x in enumerate(f)))
                 for a, f in enumerate(image.flits.view(np.int32))]
        assert sorted(image.control + flits) == sorted(load_commands(cfg, lw, v, packed[v]))


@pytest.mark.parametrize("sim", SIMULATORS)
def test_waves(sim):
    build = _build(sim, "ring:4", "credit", waves=True)
    specs, inputs = _runs(build, "multitree", [13], 3)
    results = build.run(specs)
    _check(build, specs, inputs, results)
    wave = results[0].waves_file
    assert wave.is_file() and wave.stat().st_size > 1000
    assert wave.suffix == (".fst" if sim == "icarus" else ".vcd")
