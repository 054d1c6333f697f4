"""Links of different bandwidths in hardware: the fastest port carries a flit per cycle and a
slower link is rate-limited to its share, rounded to 1/16 (``hdl.rate``,
``allreduce_rtl.plan.hardware_topology``).

Checked: the rounding (against the ratio computed here) and its report; that a network's links
get the limiters the plan says (``hdl.link.built_links``); and whole networks in Icarus and
Verilator, every node bit for bit against the golden model, with RTL cycles against the timing
model of the rounded bandwidths: NIs on links (a ring whose wrap link runs at 6/16, the send
engines stopping for whole bank rotations) and NIs on routers (the COARSE-style cloud machine,
9 GB/s local and 16 GB/s remote paths: 9/16 exactly).
"""

import json

import pytest

from allreduce_rtl.plan import NI_MESSAGE_GAP, link_rate, plan_hardware
from golden_model.topology import parse_topology
from hdl.config import rotation_slack
from hdl.link import built_links
from hdl.rate import RATE_STEPS

from test_hw_link_latencies import _run
from test_hw_allreduce import sizes


@pytest.mark.parametrize("bandwidth, fastest", [(9, 16), (5.3, 16), (16, 25), (0.1, 16),
                                                (25, 25)])
def test_link_rate_rounds_to_sixteenths(bandwidth, fastest):
    want = max(1, round(RATE_STEPS * bandwidth / fastest))
    assert link_rate(bandwidth, fastest) == want


def _file(path, bandwidths):
    """Four endpoints in a ring (no switches), link i -> i+1 and back at ``bandwidths[i]``."""
    nodes = [{"id": f"gpu{i}", "kind": "node"} for i in range(4)]
    links = []
    for i, bw in enumerate(bandwidths):
        a, b = f"gpu{i}", f"gpu{(i + 1) % 4}"
        links += [{"source": a, "target": b, "bandwidth": bw, "latency": 4},
                  {"source": b, "target": a, "bandwidth": bw, "latency": 4}]
    path.write_text(json.dumps({"directed": True, "nodes": nodes, "links": links}))
    return str(path)


def test_plan_reports_the_rounding(tmp_path):
    topo = parse_topology(_file(tmp_path / "r.json", [20, 20, 10.6, 3]))
    plan = plan_hardware(topo, ["ring"], 64, dtype="int32")
    rates = {(r["from"], r["to"]): r for r in plan.link_rates}
    assert set(rates) == {("gpu2", "gpu3"), ("gpu3", "gpu2"), ("gpu3", "gpu0"),
                          ("gpu0", "gpu3")}
    r = rates[("gpu2", "gpu3")]
    assert r["rate"] == 8 and r["error"] == pytest.approx(8 / 16 / (10.6 / 20) - 1)
    assert rates[("gpu3", "gpu0")]["rate"] == 2         # 3/20 of 16 = 2.4
    # the timing model's bandwidths are the rounded ones, the network's limiters the same rates
    hw = plan.hardware_topology
    for u, v in hw.links:
        rate = built_links(hw, plan.config.link_latency)[(u, v)][1]
        assert hw.link_bandwidth((u, v)) == pytest.approx(16 * rate / 16)
    built = {(topo.label(u), topo.label(topo.neighbors(u)[p])): link.rate
             for (u, p), link in plan.network().links.items()}
    assert built[("gpu2", "gpu3")] == 8 and built[("gpu0", "gpu1")] == RATE_STEPS
    # one number builds every link at full rate
    same = plan_hardware(topo, ["ring"], 64, dtype="int32", link_bandwidth=16)
    assert same.link_rates == []


@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_ring_with_a_slow_wrap_link(sim):
    topo = parse_topology("ring:4", link_latency=4, link_bandwidth={"wrap": 6, "default": 16})
    plan = plan_hardware(topo, ["ring", "multitree"], sizes(4, large=96), dtype="int32")
    assert {r["rate"] for r in plan.link_rates} == {6}
    build, out = _run(sim, plan, ["ring", "multitree"])
    fast = plan_hardware(parse_topology("ring:4", link_latency=4), ["ring", "multitree"],
                         sizes(4, large=96), dtype="int32")
    fast_cycles = {r.name: r.expected_cycles for r in fast.runs}
    for run, res, verdict in out:
        # the limiter opens in whole windows of K cycles, the model spreads the rate evenly: a
        # message may go a window early or late, and the NI turns around between messages
        messages = max(len(rows) for p in run.lowered.programs for rows in p.engines.values())
        slack = (NI_MESSAGE_GAP + build.config.buffer_banks) * messages + \
            rotation_slack(build.config, run.lowered)
        assert 0.9 * verdict.model_cycles <= res.cycles <= verdict.model_cycles + slack, \
            verdict.message
        if run.algorithm == "ring" and run.elements > 100:
            # every ring step crosses the slow link: far slower than on full-rate links
            assert res.cycles > 1.8 * fast_cycles[run.name], (res.cycles, fast_cycles[run.name])


# 42 s in Verilator in a default suite of 690 s: -m slow in both simulators (CI runs them);
# test_ring_with_a_slow_wrap_link keeps a rate-limited link in the default suite
@pytest.mark.slow
@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_cloud_machine_in_hardware(sim):
    topo = parse_topology("machine:cloud-v100")
    plan = plan_hardware(topo, ["multitree", "ring"], sizes(8, large=48), dtype="int32",
                         link_latency=4)
    assert {r["rate"] for r in plan.link_rates} == {9}
    assert all(r["error"] == pytest.approx(0) for r in plan.link_rates)
    build, out = _run(sim, plan, ["multitree", "ring"])
    for run, res, verdict in out:
        # routers arbitrate flit by flit and the model message by message (test_hw_routed)
        slack = rotation_slack(build.config, run.lowered)
        assert 0.8 * verdict.model_cycles <= res.cycles <= 3 * verdict.model_cycles + slack, \
            verdict.message
