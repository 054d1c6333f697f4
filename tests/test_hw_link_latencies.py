"""Links of different latencies in hardware: every link its own latency from the topology
(per link class of a family, ``--link-latency wrap=9,default=3``, or per link of a graph file,
each direction its own), the credits of a link coming back in the latency of the link the other
way (``hdl.link.Link``, ``hdl.router.network.RouterLink``).

Checked: the two delays of a link with unequal latencies (Amaranth's simulator, against the
latencies given); the plan (``allreduce_rtl.plan``: the model's topology has each link's
latency, the config the largest); and whole networks in Verilator and Icarus, every node bit
for bit against the golden model and the RTL cycles against the timing model of the same
per-link latencies (NIs joined by links: a ring with a slower wrap link; NIs on routers: a
switched graph whose every direction has its own latency).
"""

import json
import re

import pytest
from amaranth.sim import Simulator

from allreduce_rtl.plan import NI_MESSAGE_GAP, plan_hardware
from golden_model.topology import parse_topology
from hdl.config import NIConfig, rotation_slack
from hdl.generate import TOP_MODULE, to_verilog
from hdl.link import Link, built_links
from hdl.router.network import RouterLink
from hdl.router.router import RouterParams
from tb.runner import HardwareBuild, RunSpec
from tb.scoreboard import check_run
from tb.toolchain import lint_verilog

from test_hw_allreduce import READY_PCT, VALID_PCT, _seed, _vectors, sizes

RING = ("ring:4", {"wrap": 9, "default": 3})


def _delays(link, flit_in, flit_out, credit_in, credit_out, cycles=30):
    """Cycles from a pulse on ``flit_in`` (cycle 3) to ``flit_out``, and on ``credit_in``
    (cycle 5) to ``credit_out``, in Amaranth's simulator."""
    seen = {}

    async def bench(ctx):
        for t in range(cycles):
            ctx.set(flit_in, t == 3)
            ctx.set(credit_in, t == 5)
            await ctx.delay(1e-9)      # let the inputs settle, then sample the outputs
            for name, sig, at in (("flit", flit_out, 3), ("credit", credit_out, 5)):
                if ctx.get(sig) and name not in seen:
                    seen[name] = t - at
            await ctx.tick()

    sim = Simulator(link)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("latency, credit_latency", [(5, 2), (1, 7), (0, 3), (4, 4)])
def test_link_delays(latency, credit_latency):
    link = Link(NIConfig(link_latency=8), latency, credit_latency)
    got = _delays(link, link.flit_in.valid, link.flit_out.valid, link.credit_in,
                  link.credit_out)
    assert got == {"flit": latency, "credit": credit_latency}


@pytest.mark.parametrize("latency, credit_latency", [(6, 3), (3, 6)])
def test_router_link_delays(latency, credit_latency):
    link = RouterLink(RouterParams(num_ports=3, num_vcs=2), latency, credit_latency)
    got = _delays(link, link.sender.valid, link.receiver.valid, link.receiver.credit[1],
                  link.sender.credit[1])
    assert got == {"flit": latency, "credit": credit_latency}


def test_link_latency_out_of_range():
    with pytest.raises(ValueError, match=r"link latency must be an integer in 0\.\.4, not 5"):
        Link(NIConfig(link_latency=4), 5)
    spec, lat = RING
    plan = plan_hardware(parse_topology(spec, link_latency=lat), ["ring"], 64, dtype="int32")
    # a hardware topology's link longer than the FIFOs are sized for
    with pytest.raises(ValueError, match=r"latency of link (0->3|3->0) must be an integer in 0\.\.4, not 9"):
        built_links(plan.hardware_topology, 4)
    # any other topology: every link at the configured latency, full rate
    assert set(built_links(parse_topology(spec, link_latency=lat), 4).values()) == {(4, 16)}


def test_plan_keeps_each_links_latency():
    spec, lat = RING
    topo = parse_topology(spec, link_latency=lat)
    plan = plan_hardware(topo, ["ring"], 64, dtype="int32")
    assert plan.config.link_latency == 9
    hw = plan.hardware_topology
    assert {link: hw.link_latency(link) for link in hw.links} == \
        {link: topo.link_latency(link) for link in topo.links}
    built = {(u, v): (link.latency, link.credit_latency)
             for (u, p), link in plan.network().links.items()
             for v in [topo.neighbors(u)[p]]}
    assert built == {(u, v): (topo.link_latency((u, v)), topo.link_latency((v, u)))
                     for u, v in topo.links}
    # --link-latency N builds every link alike
    uniform = plan_hardware(topo, ["ring"], 64, dtype="int32", link_latency=9)
    assert set(built_links(uniform.hardware_topology, 9).values()) == {(9, 16)}
    assert uniform.runs[0].expected_cycles > plan.runs[0].expected_cycles


def _graph_file(path):
    """Four endpoints on two switches, every direction of every link its own latency."""
    nodes = [{"id": i, "kind": "node"} for i in range(4)] + \
        [{"id": s, "kind": "switch"} for s in ("s0", "s1")]
    links = []
    for i in range(4):
        sw = f"s{i // 2}"
        links += [{"source": i, "target": sw, "bandwidth": 16, "latency": 2 + i},
                  {"source": sw, "target": i, "bandwidth": 16, "latency": 6 - i}]
    links += [{"source": "s0", "target": "s1", "bandwidth": 16, "latency": 7},
              {"source": "s1", "target": "s0", "bandwidth": 16, "latency": 3}]
    path.write_text(json.dumps({"directed": True, "nodes": nodes, "links": links}))
    return str(path)


def _run(sim, plan, algorithms):
    build = HardwareBuild(plan.hardware_topology, plan.config, sim, valid_pct=VALID_PCT,
                          ready_pct=READY_PCT).build()
    runs = [r for r in plan.runs if r.algorithm in algorithms]
    specs = [RunSpec(r.name, r.lowered,
                     _vectors(plan.topology.num_nodes, r.elements, _seed(sim, r.name), "int32"),
                     r.expected_cycles) for r in runs]
    results = build.run(specs, seed=_seed(sim, plan.topology.spec) & 0x7FFFFFFF)
    out = []
    for run, spec, res in zip(runs, specs, results):
        verdict = check_run(res, run.schedule, spec.vectors, plan.element_type,
                            expected_cycles=run.expected_cycles)
        assert verdict.passed, verdict.message
        out.append((run, res, verdict))
    return build, out


def _uniform_model(topo, algorithms, latency):
    """Model cycles of each run with every link at ``latency`` (the largest)."""
    plan = plan_hardware(topo, algorithms, sizes(topo.num_nodes), dtype="int32",
                         link_latency=latency)
    return {r.name: r.expected_cycles for r in plan.runs}


@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_ring_with_a_slow_wrap_link(sim):
    spec, lat = RING
    topo = parse_topology(spec, link_latency=lat)
    plan = plan_hardware(topo, ["ring", "multitree"], sizes(4), dtype="int32")
    build, out = _run(sim, plan, ["ring", "multitree"])
    slow = _uniform_model(topo, ["ring", "multitree"], 9)
    for run, res, verdict in out:
        # NIs on links: the model is a lower bound (test_hw_allreduce), here within the NI's
        # turnaround per message (NI_MESSAGE_GAP, left out of the model)
        gap = NI_MESSAGE_GAP * max(len(rows) for p in run.lowered.programs
                                  for rows in p.engines.values()) + \
            rotation_slack(build.config, run.lowered)
        assert verdict.model_cycles <= res.cycles <= verdict.model_cycles + gap, verdict.message
        if run.algorithm == "ring":     # it crosses the wrap link: shorter links were built
            assert res.cycles < slow[run.name], (res.cycles, slow[run.name])


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=pytest.mark.slow)])
def test_routed_graph_with_a_latency_per_direction(sim, tmp_path):
    topo = parse_topology(_graph_file(tmp_path / "asym.json"))
    plan = plan_hardware(topo, ["multitree", "ring"], sizes(4), dtype="int32")
    assert plan.routed and plan.config.link_latency == 7
    build, out = _run(sim, plan, ["multitree", "ring"])
    slow = _uniform_model(topo, ["multitree", "ring"], 7)
    for run, res, verdict in out:
        # routers arbitrate flit by flit, the model message by message (test_hw_routed)
        assert 0.95 * verdict.model_cycles <= res.cycles <= 1.1 * verdict.model_cycles, \
            verdict.message
        assert res.cycles < slow[run.name], (res.cycles, slow[run.name])


def _direct_ring_file(path):
    """Four endpoints in a ring, no switches, each direction of a link its own latency."""
    nodes = [{"id": i, "kind": "node"} for i in range(4)]
    links = [{"source": i, "target": (i + 1) % 4, "bandwidth": 16, "latency": 2 + i}
             for i in range(4)]
    links += [{"source": (i + 1) % 4, "target": i, "bandwidth": 16, "latency": 9 - i}
              for i in range(4)]
    path.write_text(json.dumps({"directed": True, "nodes": nodes, "links": links}))
    return str(path)


@pytest.mark.parametrize("maker", [_graph_file, _direct_ring_file])
def test_lint_links_of_unequal_directions(maker, tmp_path):
    topo = parse_topology(maker(tmp_path / "g.json"))
    plan = plan_hardware(topo, ["multitree"], 64, dtype="int32")
    net = plan.network()
    if not plan.routed:
        # each link's credits come back in the latency of the link the other way
        assert {(u, topo.neighbors(u)[p]): (link.latency, link.credit_latency)
                for (u, p), link in net.links.items()} == \
            {(u, v): (topo.link_latency((u, v)), topo.link_latency((v, u)))
             for u, v in topo.links}
    path = tmp_path / "network.v"
    to_verilog(net, path)
    lint_verilog(path, TOP_MODULE)


def test_direct_ring_file_in_icarus(tmp_path):
    topo = parse_topology(_direct_ring_file(tmp_path / "ring.json"))
    plan = plan_hardware(topo, ["multitree", "ring"], sizes(4), dtype="int32")
    assert not plan.routed
    build, out = _run("icarus", plan, ["multitree", "ring"])
    for run, res, verdict in out:
        gap = NI_MESSAGE_GAP * max(len(rows) for p in run.lowered.programs
                                  for rows in p.engines.values()) + \
            rotation_slack(build.config, run.lowered)
        assert verdict.model_cycles <= res.cycles <= verdict.model_cycles + gap, verdict.message


def test_a_link_longer_than_the_hardware_builds_is_named(tmp_path):
    from golden_model.errors import ConfigError
    from hdl.config import MAX_LINK_STAGES
    path = tmp_path / "long.json"
    _direct_ring_file(path)
    data = json.loads(path.read_text())
    data["links"][1]["latency"] = MAX_LINK_STAGES + 1
    path.write_text(json.dumps(data))
    link = data["links"][1]
    with pytest.raises(ConfigError, match=rf"link {link['source']}->{link['target']} of .* has "
                                          rf"1,025 cycles; the hardware builds links of at most "
                                          rf"1,024"):
        plan_hardware(parse_topology(str(path)), ["multitree"], 64, dtype="int32")
    # one number builds every link alike, within the limit
    plan = plan_hardware(parse_topology(str(path)), ["multitree"], 64, dtype="int32",
                         link_latency=8)
    assert plan.link_latency_range == (8, 8)
