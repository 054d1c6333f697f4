"""The router network (mesh, torus, fat-tree, BiGraph) under random traffic, in cocotb on Icarus
and Verilator.

Every scenario checks that no flit is lost, duplicated, reordered or corrupted within its packet,
that every packet reaches its destination terminal, and that nothing stalls (deadlock) while
packets are outstanding, with random ejection back-pressure (``tb.router``). Builds are cached
under ``build/<toolchain>/router/``; the first Verilator build of a network takes about a minute.
"""

import time

import pytest

from golden_model.topology import parse_topology
from hdl.router.network import path_cost
from tb.router.build import RouterBuild
from tb.router.traffic import TrafficSpec

#: Network configurations (topology, RouterNetwork arguments) by id.
CONFIGS = {
    "mesh-wormhole": ("mesh:4x4", dict(num_vcs=2, vc_buf_depth=8, flit_width=56,
                                       link_latency=1, credit_delay=1, flow_control="wormhole")),
    "mesh-vct": ("mesh:4x4", dict(num_vcs=2, vc_buf_depth=8, flit_width=56,
                                  link_latency=1, credit_delay=1, flow_control="cut_through")),
    "torus-wormhole": ("torus:4x4", dict(num_vcs=2, vc_buf_depth=8, flit_width=56,
                                         link_latency=1, credit_delay=1,
                                         flow_control="wormhole")),
    # odd sizes: 4 VCs (two per dateline class), a 6-deep buffer, slower links and credits
    "torus-vct": ("torus:4x4", dict(num_vcs=4, vc_buf_depth=6, flit_width=56,
                                    link_latency=2, credit_delay=2, flow_control="cut_through")),
    # concentration: 2 terminals per router, wire links (latency 0), 3 VCs of 4 flits
    "mesh2x2-conc2": ("mesh:2x2", dict(num_vcs=3, vc_buf_depth=4, flit_width=56,
                                       link_latency=0, credit_delay=1, concentration=2)),
    # indirect networks: one router per switch, endpoint links to and from the switches
    "fattree-wormhole": ("fattree:4x2", dict(num_vcs=2, vc_buf_depth=8, flit_width=56,
                                             link_latency=1, credit_delay=1,
                                             flow_control="wormhole")),
    # BiGraph's routes need two VC classes: 2 VCs = one VC per class on switch-to-switch links
    "bigraph-wormhole": ("bigraph:4x4", dict(num_vcs=2, vc_buf_depth=8, flit_width=56,
                                             link_latency=1, credit_delay=1,
                                             flow_control="wormhole")),
    "bigraph-vct": ("bigraph:4x4", dict(num_vcs=4, vc_buf_depth=6, flit_width=56,
                                        link_latency=2, credit_delay=2,
                                        flow_control="cut_through")),
}
INDIRECT = ("fattree-wormhole", "bigraph-wormhole", "bigraph-vct")


def scenarios(cycles, seed=1, heavy=False, grid=True):
    """Uniform random at a low, a medium and (heavy) a saturating rate, transpose (``grid``;
    else a second hot spot), hot spot; ejection ports accept with probability 0.75 (random
    back-pressure)."""
    s = [
        TrafficSpec("uniform", 0.08, cycles, ready=0.75, seed=seed),
        TrafficSpec("uniform", 0.3, cycles, ready=0.75, seed=seed + 1),
        TrafficSpec("transpose", 0.25, cycles, ready=0.75, seed=seed + 2) if grid else
        TrafficSpec("hotspot", 0.25, cycles, ready=0.75, hot=12, hot_fraction=0.4,
                    seed=seed + 2),
        TrafficSpec("hotspot", 0.15, cycles, ready=0.75, hot=5, seed=seed + 3),
    ]
    if heavy:
        s.append(TrafficSpec("uniform", 0.7, cycles, ready=0.9, seed=seed + 4))
        s.append(TrafficSpec("transpose", 0.6, cycles, ready=1.0, seed=seed + 5) if grid else
                 TrafficSpec("uniform", 0.9, cycles, lengths=(4, 5), ready=1.0, seed=seed + 5))
    return s


_builds = {}


def build_for(sim, config, cxx_opt="-O0"):
    key = (sim, config, cxx_opt)
    if key not in _builds:
        spec, args = CONFIGS[config]
        _builds[key] = RouterBuild(parse_topology(spec), sim, args, cxx_opt=cxx_opt)
    return _builds[key]


def check(run, label):
    lines = [f"{label}: {run.wall_s:.1f} s of simulation"]
    for r in run.scenarios:
        lines.append(f"  {r['name']:16s} {r['status']:5s} {r['packets_delivered']:6d}/"
                     f"{r['packets']:6d} packets, {r['flits_delivered']:7d} flits, "
                     f"{r['cycles']:6d} cycles, accepted {r['accepted']:.3f}, latency "
                     f"{r['latency_mean'] or 0:.1f} ({r['wall_s']:.1f} s)")
    print("\n".join(lines))
    assert run.ok, run.message


@pytest.mark.parametrize("config", [
    # cut-through with 4 VCs on the torus takes Icarus about 50 s: -m slow (Verilator runs the
    # mesh with cut-through in the default suite)
    # (the 4x4 mesh with wormhole, about 40 s, too; the default suite keeps the 2x2 one)
    pytest.param("mesh-wormhole", marks=pytest.mark.slow),
    pytest.param("torus-vct", marks=pytest.mark.slow), "mesh2x2-conc2",
    pytest.param("mesh-vct", marks=pytest.mark.slow),
    pytest.param("torus-wormhole", marks=pytest.mark.slow),
])
def test_router_traffic_icarus(config):
    b = build_for("icarus", config)
    t0 = time.perf_counter()
    b.build()
    run = b.run(scenarios(250), name=config)
    check(run, f"icarus {config} (build {time.perf_counter() - t0 - run.wall_s:.1f} s)")


# 65 s and 51 s in a fresh default suite of 762 s: -m slow (CI runs them); in the default suite
# Verilator still drives the routers in the zero-load, dateline and VC-class tests below
@pytest.mark.slow
@pytest.mark.parametrize("config", ["mesh-vct", "torus-wormhole"])
def test_router_traffic_verilator(config):
    b = build_for("verilator", config)
    t0 = time.perf_counter()
    b.build()
    run = b.run(scenarios(1500, seed=11, heavy=True), name=config)
    check(run, f"verilator {config} (build {time.perf_counter() - t0 - run.wall_s:.1f} s)")


# BiGraph runs in Icarus in the default suite, the fat-tree (about 30 s in Icarus, 55 s in
# Verilator) and Verilator's BiGraph (60 s) with -m slow; the default suite still runs fat-tree
# routers in test_hw_routed and BiGraph's in Verilator in the zero-load test.
@pytest.mark.parametrize("sim, config", [
    pytest.param("icarus", "fattree-wormhole", marks=pytest.mark.slow),
    pytest.param("verilator", "fattree-wormhole", marks=pytest.mark.slow),
    ("icarus", "bigraph-wormhole"),
    pytest.param("verilator", "bigraph-wormhole", marks=pytest.mark.slow),
    pytest.param("icarus", "bigraph-vct", marks=pytest.mark.slow),
    pytest.param("verilator", "bigraph-vct", marks=pytest.mark.slow)])
def test_router_traffic_indirect(sim, config):
    """Fat-tree and BiGraph: uniform random and hot spot with sink back-pressure (Verilator:
    longer, plus saturating uniform traffic)."""
    b = build_for(sim, config)
    t0 = time.perf_counter()
    b.build()
    cycles, heavy = (250, False) if sim == "icarus" else (1500, True)
    run = b.run(scenarios(cycles, seed=31, heavy=heavy, grid=False), name=config)
    check(run, f"{sim} {config} (build {time.perf_counter() - t0 - run.wall_s:.1f} s)")


@pytest.mark.slow
@pytest.mark.parametrize("config", ["mesh-wormhole", "torus-vct", "fattree-wormhole",
                                    "bigraph-wormhole"])
def test_router_traffic_verilator_more_configs(config):
    b = build_for("verilator", config)
    run = b.run(scenarios(3000, seed=21, heavy=True, grid=config not in INDIRECT), name=config)
    check(run, f"verilator {config}")


@pytest.mark.slow
@pytest.mark.parametrize("config", ["torus-wormhole", "mesh-wormhole"])
def test_router_soak_one_million_flits_verilator(config):
    """At least a million flits through the network in Verilator, mixed patterns and loads
    (saturation included), every flit checked."""
    b = build_for("verilator", config, cxx_opt="-O2")
    specs = []
    seed = 100
    while sum(s.rate * s.cycles * 16 for s in specs) < 1.2e6:
        for pattern, rate in (("uniform", 0.45), ("transpose", 0.3), ("hotspot", 0.12),
                              ("uniform", 0.8)):
            specs.append(TrafficSpec(pattern, rate, 24000, ready=0.9, seed=seed))
            seed += 1
    run = b.run(specs, name="soak", stall_cycles=5000)
    check(run, f"verilator soak {config}")
    assert sum(r["flits_delivered"] for r in run.scenarios) >= 1_000_000


@pytest.mark.parametrize("config", [
    pytest.param("mesh-vct", marks=pytest.mark.slow),   # 55 s
    pytest.param("torus-wormhole", marks=pytest.mark.slow),   # 46 s; the BiGraph's stays by default
    pytest.param("fattree-wormhole", marks=pytest.mark.slow),   # 47 s: the 16-port switch build
    "bigraph-wormhole"])
def test_router_zero_load_latency_verilator(config):
    """At 1% load with sinks always ready, the smallest latency of every (source, destination,
    length) is the documented zero-load latency (``RouterNetwork.zero_load_latency``: head
    ``2 + 4 R + L K`` over R routers and K links, tail F - 1 cycles later), and no packet is
    faster."""
    b = build_for("verilator", config)
    run = b.run([TrafficSpec("uniform", 0.01, 6000, ready=1.0, seed=5)], name="zero-load")
    check(run, f"verilator zero load {config}")
    args = b.network_args
    samples = run.scenarios[0]["head_latency_by_hops"]
    assert len(samples) > 200
    exact = 0
    for src, dest, length, lat in samples:
        want = path_cost(b.topology, src, dest, link_latency=args["link_latency"],
                         concentration=args.get("concentration", 1)).latency(length)
        assert lat >= want, (src, dest, length, lat, want)
        exact += lat == want
    assert exact >= 0.95 * len(samples), f"{exact} of {len(samples)} at the zero-load latency"


def test_zero_load_latency_formula_on_grids():
    """The network's formula is the mesh/torus one documented before: ``6 + H (4 + L)``."""
    for spec in ("mesh:4x4", "torus:4x4"):
        topo = parse_topology(spec)
        for s, d in ((0, 0), (0, 5), (3, 12), (15, 1)):
            hops = len(topo.route(s, d))
            assert path_cost(topo, s, d, link_latency=3).latency(4) == 6 + hops * (4 + 3) + 3


#: Saturating traffic that deadlocks a 4x4 torus without dateline VC classes in about 1500
#: cycles (test_without_vc_classes_deadlocks_verilator).
WRAP_STRESS = TrafficSpec("uniform", 0.9, 5000, lengths=(4, 5), ready=1.0, seed=3)


# 31 s with the torus's build in a default suite of 595 s: -m slow (CI runs it; the dateline
# routing tables stay in the default suite, test_router_units)
@pytest.mark.slow
def test_torus_datelines_survive_wrap_stress_verilator():
    b = build_for("verilator", "torus-wormhole")
    run = b.run([WRAP_STRESS], name="wrap-stress", stall_cycles=2000)
    check(run, "verilator torus wrap stress")


def test_bigraph_vc_classes_survive_saturation_verilator():
    """BiGraph's routes have cyclic channel dependencies (s0 -> s2 -> s1 -> s3 -> s0); with the
    two VC classes of ``switch_tables`` saturating traffic still drains."""
    b = build_for("verilator", "bigraph-wormhole")
    run = b.run([WRAP_STRESS], name="bigraph-stress", stall_cycles=2000)
    check(run, "verilator bigraph saturation")


@pytest.mark.slow
@pytest.mark.parametrize("config", ["torus-wormhole", "bigraph-wormhole"])
def test_without_vc_classes_deadlocks_verilator(config):
    """Ablation: the same network with every VC allowed on every hop (``datelines=False``: no
    torus datelines, or BiGraph's cyclic channel dependencies s0 -> s2 -> s1 -> s3 -> s0
    unbroken) deadlocks under the saturating traffic that the VC classes drain
    (``test_torus_datelines_survive_wrap_stress_verilator``,
    ``test_bigraph_vc_classes_survive_saturation_verilator``), and the testbench reports it as
    a stall: evidence that the traffic tests would catch a deadlock."""
    spec, args = CONFIGS[config]
    b = RouterBuild(parse_topology(spec), "verilator", {**args, "datelines": False},
                    cxx_opt="-O0")
    run = b.run([WRAP_STRESS], name="no-vc-classes", stall_cycles=2000)
    assert not run.ok
    assert run.scenarios[0]["status"] == "stall", run.message
    assert "deadlock" in run.message
