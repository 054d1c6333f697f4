"""The timing model and the lower bounds, checked against values derived by hand (closed form).

Defaults throughout: 1 GHz, 16-byte flits, 4-byte elements, links of 16 GB/s (one flit per cycle)
and 150 cycles of latency, so a message of B bytes holds a link for ceil(B / 16) cycles.
"""

import functools
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden_model.algorithms import ALGORITHMS, build_schedule
from golden_model.errors import ConfigError
from golden_model.schedule import AllReduceSchedule, Op, Transfer
from golden_model.timing import (LowerBound, ReductionUnit, TimingParams, TimingResult, algbw_GBps,
                                 busbw_GBps, cycles_to_us, hold_cycles, in_arrival_order,
                                 lower_bound, simulate)
from golden_model.topology import parse_topology

LAT = 150


@functools.lru_cache(maxsize=None)
def topo(spec, **kw):
    return parse_topology(spec, **kw)


def make(topology, chunk_elements, steps, op=Op.COPY):
    """A schedule without validation (a few transfers, not an all-reduce). ``chunk_elements`` is
    one size for every chunk or a list of sizes; ``steps`` lists ``(src, dst, chunk)``, every
    transfer doing ``op``."""
    nchunks = 1 + max((c for step in steps for _, _, c in step), default=0)
    sizes = chunk_elements if isinstance(chunk_elements, list) else [chunk_elements] * nchunks
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return AllReduceSchedule("test", topology, int(bounds[-1]), bounds,
                             [[Transfer(s, d, c, op, topology.route(s, d)) for s, d, c in step]
                              for step in steps])


def flits(num_bytes):
    return -(-num_bytes // 16)


# --- single messages ---------------------------------------------------------------------------

@pytest.mark.parametrize("num_bytes", [4, 16, 20, 1000, 4096, 1 << 20])
def test_single_hop(num_bytes):
    r = simulate(make(topo("ring:4"), num_bytes // 4, [[(0, 1, 0)]]))
    assert r.cycles == math.ceil(num_bytes / 16) + LAT
    assert list(r.finish) == [r.cycles] and list(r.start) == [0] and r.step_finish == [r.cycles]


def test_three_hops_cut_through():
    t = topo("ring:8")
    assert len(t.route(0, 3)) == 3
    r = simulate(make(t, 256, [[(0, 3, 0)]]))       # 1 KiB: 64 flits
    assert r.cycles == 64 + 3 * LAT


def test_eight_hops_on_a_torus():
    t = topo("torus:8x8")
    assert len(t.route(0, 36)) == 8
    assert simulate(make(t, 1000, [[(0, 36, 0)]])).cycles == 250 + 8 * LAT


def test_same_link_same_step_serialises():
    r = simulate(make(topo("ring:4"), 256, [[(0, 1, 0), (0, 1, 1)]]))
    assert list(r.start) == [0, 64]
    assert list(r.finish) == [64 + LAT, 2 * 64 + LAT]


def test_shared_link_mid_route():
    """0->2 and 1->2 share link (1, 2) on ring:4; 1->2 requests it at 0, 0->2's head at 150."""
    r = simulate(make(topo("ring:4"), 256, [[(0, 2, 0), (1, 2, 1)]]))
    assert list(r.finish) == [64 + 2 * LAT, 64 + LAT]
    # Head of 0->2 reaches node 1 at 150 > 64, so it does not wait.
    r = simulate(make(topo("ring:4"), 1024, [[(0, 2, 0), (1, 2, 1)]]))   # 256 flits
    # 1->2 holds (1, 2) until 256; 0->2's head waits there from 150, starts at 256.
    assert list(r.finish) == [256 + 256 + LAT, 256 + LAT]


def test_first_come_first_served_across_steps():
    """A later-step transfer that is ready first gets the link first."""
    t = topo("ring:4")
    # step 0: 2->1 chunk 0 (64 cycles); step 1: 1->0 chunk 0 waits for it (ready at 214);
    # step 1: 1->0 chunk 1 (512 cycles) is ready at 0 and takes link (1, 0) first.
    r = simulate(make(t, [256, 2048], [[(2, 1, 0)], [(1, 0, 0), (1, 0, 1)]]),
                 TimingParams(link_order="fcfs"))
    assert list(r.start) == [0, 512, 0]
    assert list(r.finish) == [64 + LAT, 512 + 64 + LAT, 512 + LAT]


def test_tie_goes_to_the_earlier_step():
    # Both ready at 0 on link (0, 1): step 0's goes first even though listed in step order.
    r = simulate(make(topo("ring:4"), 256, [[(0, 1, 0)], [(0, 1, 1)]]))
    assert list(r.finish) == [64 + LAT, 128 + LAT]
    assert r.step_finish == [64 + LAT, 128 + LAT]


# --- dependencies ------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 2, 5, 7])
def test_dependency_chain(k):
    """i -> i+1 of chunk 0 in step i: each waits for the previous to arrive."""
    r = simulate(make(topo("ring:8"), 256, [[(i, i + 1, 0)] for i in range(k)]))
    assert r.cycles == k * (64 + LAT)
    assert r.step_finish == [(i + 1) * (64 + LAT) for i in range(k)]


def test_no_barrier_between_steps():
    """A step-1 transfer with no inputs starts at 0 even though step 0 is still running."""
    r = simulate(make(topo("ring:8"), 256, [[(0, 1, 0)], [(4, 5, 1)]]))
    assert list(r.start) == [0, 0]


def test_same_step_inputs_do_not_count():
    r = simulate(make(topo("ring:8"), 256, [[(0, 1, 0), (1, 2, 0)]]))
    assert list(r.finish) == [64 + LAT, 64 + LAT]


def test_waits_for_every_input():
    """Node 2 gets chunk 0 from 1 (1 hop) and from 5 (3 hops) in step 0; its send waits for both."""
    t = topo("ring:8")
    assert len(t.route(5, 2)) == 3
    r = simulate(make(t, 256, [[(1, 2, 0), (5, 2, 0)], [(2, 3, 0)]]))
    assert list(r.start) == [0, 0, 64 + 3 * LAT]
    assert r.cycles == 2 * 64 + 4 * LAT


def test_inputs_accumulate_over_steps():
    """Inputs of steps 0 and 1 both gate a send in step 2 (not just the latest step's)."""
    t = topo("ring:8")
    assert len(t.route(5, 1)) == 4
    steps = [[(5, 1, 0)],               # A: arrives at 64 + 4*150
             [(1, 2, 0), (0, 1, 0)],    # B waits for A; C has no input, arrives at 64 + 150
             [(1, 0, 0)]]               # D waits for A and C
    r = simulate(make(t, 256, steps))
    assert list(r.start) == [0, 64 + 4 * LAT, 0, 64 + 4 * LAT]
    assert r.cycles == 2 * 64 + 5 * LAT


# --- link parameters ---------------------------------------------------------------------------

def test_double_bandwidth_halves_the_hold():
    t = topo("ring:4", link_bandwidth=32)
    assert simulate(make(t, 256, [[(0, 1, 0)]])).cycles == 32 + LAT          # 64 flits
    assert simulate(make(t, 260, [[(0, 1, 0)]])).cycles == 33 + LAT          # 65 flits


def test_latency_and_frequency():
    t = topo("ring:4", link_latency=20)
    assert simulate(make(t, 256, [[(0, 2, 0)]])).cycles == 64 + 2 * 20
    # 2 GHz: a 16 GB/s link moves 8 bytes per cycle, so a flit takes 2 cycles.
    r = simulate(make(topo("ring:4"), 256, [[(0, 1, 0)]]), TimingParams(frequency_ghz=2.0))
    assert r.cycles == 128 + LAT
    assert r.time_us == pytest.approx((128 + LAT) / 2000)


def test_hold_is_exact_for_decimal_bandwidths():
    assert hold_cycles(64, 12.8) == 5            # 4 flits * 1.25 cycles, not 6 from rounding
    assert hold_cycles(64, 16) == 4
    assert hold_cycles(1, 16) == 1 and hold_cycles(17, 16) == 2
    assert hold_cycles(64, 16, TimingParams(flit_bytes=32)) == 4     # 2 flits of 2 cycles
    assert hold_cycles(48, 16, TimingParams(flit_bytes=32)) == 4     # rounded up to 2 flits


def with_bandwidth(spec, link, bw):
    t = parse_topology(spec)
    t.graph.edges[link]["bandwidth"] = bw
    return t


def test_slow_link_after_fast_one():
    t = with_bandwidth("ring:4", (1, 2), 8.0)       # second hop of 0 -> 2 takes 2 cycles a flit
    assert t.route(0, 2) == ((0, 1), (1, 2))
    r = simulate(make(t, 256, [[(0, 2, 0)]]))
    assert r.cycles == 2 * 64 + 2 * LAT


def test_fast_link_after_slow_one_does_not_finish_early():
    t = with_bandwidth("ring:4", (2, 3), 8.0)       # first hop of 2 -> 0 is the slow one
    assert t.route(2, 0) == ((2, 3), (3, 0))
    r = simulate(make(t, 256, [[(2, 0, 0)]]))
    assert r.cycles == 2 * 64 + 2 * LAT            # not 64 + 2 * LAT
    # ... and the fast link stays busy until that tail has left: 3 -> 0 in the next step waits
    # for nothing but the link, which it gets at 0 (it requests first); one requesting after the
    # head arrived waits for the tail.
    r = simulate(make(t, [256, 256], [[(2, 0, 0)], [(2, 3, 1)], [(3, 0, 1)]]))
    # chunk 1: 2->3 requests (2, 3) at 0 but 2->0 took it first: starts 128, arrives 128+64+150;
    # then 3->0 requests (3, 0) at 342; 2->0 holds (3, 0) from 150 until its tail leaves at 278.
    assert list(r.finish) == [2 * 64 + 2 * LAT, 128 + 128 + LAT, 128 + 128 + LAT + 64 + LAT]


def test_bad_link_attributes():
    t = parse_topology("ring:3")
    t.graph.edges[(0, 1)]["latency"] = 1.5
    with pytest.raises(ConfigError, match="1.5"):
        simulate(make(t, 4, [[(0, 1, 0)]]))
    t = parse_topology("ring:3")
    t.graph.edges[(0, 1)]["bandwidth"] = 0
    with pytest.raises(ConfigError, match="bandwidth"):
        simulate(make(t, 4, [[(0, 1, 0)]]))


# --- whole all-reduce schedules ----------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16])
@pytest.mark.parametrize("per_chunk", [1, 4, 5, 1000, 4096])
def test_ring_all_reduce_closed_form(n, per_chunk):
    """Ring all-reduce on ring:N with D = N * per_chunk elements.

    Every step, each node sends one chunk of 4 * per_chunk bytes to its successor over its own
    link, so no two transfers of a step share a link. The chunk a node sends in step s + 1 is the
    one it received in step s (reduce-scatter: chunk (i - s) arrives at i + 1, which sends chunk
    (i + 1 - (s + 1)) = (i - s); all-gather likewise), so every transfer waits for exactly one
    input, and the 2(N-1) steps form dependency chains of single-hop transfers, each taking
    hold + latency. A link is free again after hold < hold + latency, so it never delays a chain:
    time = 2(N-1) * (ceil(4 * per_chunk / 16) + 150).
    """
    sched = build_schedule("ring", topo(f"ring:{n}"), n * per_chunk)
    r = simulate(sched)
    step = flits(4 * per_chunk) + LAT
    assert r.cycles == 2 * (n - 1) * step
    assert r.step_finish == [(s + 1) * step for s in range(2 * (n - 1))]
    assert len(r.finish) == sched.num_transfers


def test_torus_ring_headline():
    """torus:8x8, 64 MiB: snake Hamiltonian ring, 126 steps of 1 MiB chunks (65536 flits)."""
    sched = build_schedule("ring", topo("torus:8x8"), 16777216)
    r = simulate(sched)
    assert r.cycles == 126 * (65536 + LAT) == 8276436
    lb = lower_bound(sched.topology, 64 << 20)
    assert lb.cycles == 2 * 63 / 64 * (64 << 20) / 64 == 2064384
    assert lb.binding == "injection"


def test_empty_schedule():
    sched = build_schedule("ring", topo("ring:1"), 100)
    r = simulate(sched)
    assert r.cycles == 0 and len(r.finish) == 0
    assert r.algbw_GBps(400) == math.inf and r.busbw_GBps(400) == 0.0
    lb = lower_bound(topo("ring:1"), 400)
    assert lb.cycles == 0 and lb.binding == "none"


def test_result_units():
    r = TimingResult(cycles=2000, finish=np.array([2000]), start=np.array([0]), step_finish=[2000],
                     frequency_ghz=1.0, num_nodes=8)
    assert r.time_us == 2.0
    assert r.algbw_GBps(4000) == pytest.approx(2.0)             # 4000 B in 2 us
    assert r.busbw_GBps(4000) == pytest.approx(2.0 * 2 * 7 / 8)
    assert r.busbw_GBps(4000, 2) == pytest.approx(2.0)
    assert cycles_to_us(1500, 1.5) == pytest.approx(1.0)
    assert algbw_GBps(1e9, 1e9, 1.0) == pytest.approx(1.0)
    assert busbw_GBps(1e9, 1e9, 1.0, 4) == pytest.approx(1.5)
    assert busbw_GBps(1e9, 1e9, 1.0, 1) == 0.0


# --- lower bounds ------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [64, 4096, 1 << 20, 64 << 20])
def test_lower_bound_torus4x4(size):
    """16 nodes of 4 links (64 GB/s): injection 2*15/16 * D / 64. Straight cuts cross 4 rows of
    2 links (one plus the wrap) = 128 GB/s, a single node 64 GB/s: cut D / 64. Diameter 2 + 2 hops
    of 150 cycles."""
    lb = lower_bound(topo("torus:4x4"), size)
    assert isinstance(lb, LowerBound)
    assert lb.injection_cycles == pytest.approx(2 * 15 / 16 * size / 64)
    assert lb.cut_cycles == pytest.approx(size / 64)
    assert lb.latency_cycles == 600
    assert lb.cycles == max(lb.injection_cycles, 600)
    assert lb.binding == ("injection" if lb.injection_cycles > 600 else "latency")


@pytest.mark.parametrize("size", [64, 1 << 20])
def test_lower_bound_ring8(size):
    """8 nodes of 2 links (32 GB/s): injection 2*7/8 * D / 32; every arc cut crosses 2 links
    (32 GB/s): cut D / 32; diameter 4 hops."""
    lb = lower_bound(topo("ring:8"), size)
    assert lb.injection_cycles == pytest.approx(1.75 * size / 32)
    assert lb.cut_cycles == pytest.approx(size / 32)
    assert lb.latency_cycles == 4 * LAT
    assert lb.cycles == max(1.75 * size / 32, 600)


def test_lower_bound_other_families():
    d = 1 << 20
    mesh = lower_bound(topo("mesh:4x4"), d)        # 48 links; corner nodes have 2
    assert mesh.injection_cycles == pytest.approx(2 * 15 * d / (48 * 16))
    assert mesh.rsag_cycles == pytest.approx(2 * 15 / 16 * d / 32)
    assert mesh.cut_cycles == pytest.approx(d / 32) and mesh.latency_cycles == 6 * LAT
    ft = lower_bound(topo("fattree:2x2"), d)       # one 16 GB/s link per node; 4 hops
    assert ft.injection_cycles == pytest.approx(1.5 * d / 16)
    assert ft.cut_cycles == pytest.approx(d / 16) and ft.latency_cycles == 4 * LAT
    bg = lower_bound(topo("bigraph:2x4"), d)
    assert bg.injection_cycles == pytest.approx(1.75 * d / 16) and bg.latency_cycles == 4 * LAT
    t23 = lower_bound(topo("torus:2x3"), d)        # 3 links a node; the row cut has 3 links
    assert t23.injection_cycles == pytest.approx(2 * 5 / 6 * d / 48)
    assert t23.cut_cycles == pytest.approx(d / 48)


def test_lower_bound_frequency():
    """At 2 GHz a cycle is half as long: the bandwidth bounds double in cycles, latency does not."""
    lb = lower_bound(topo("ring:8"), 1 << 20, TimingParams(frequency_ghz=2.0))
    assert lb.injection_cycles == pytest.approx(2 * 1.75 * (1 << 20) / 32)
    assert lb.latency_cycles == 600


def test_cut_bound_binds_on_a_bottleneck():
    """ring:8 with the two links joining {0..3} and {4..7} at 1 GB/s each way: D / 2 GB/s."""
    t = parse_topology("ring:8")
    for link in ((3, 4), (4, 3), (7, 0), (0, 7)):
        t.graph.edges[link]["bandwidth"] = 1.0
    lb = lower_bound(t, 1 << 20)
    assert lb.binding == "cut" and lb.cut_cycles == pytest.approx((1 << 20) / 2)
    # The endpoints send 4 * 32 + 4 * 17 GB/s in all (nodes 0, 3, 4, 7 have 17 GB/s).
    assert lb.injection_cycles == pytest.approx(2 * 7 * (1 << 20) / 196)
    # Reduce-scatter plus all-gather: the 4 shards of either half leave it over 2 GB/s, each
    # way (D/N * (4/2 + 4/2)), more than the per-node figure 1.75 * D / 17.
    assert lb.rsag_cycles == pytest.approx((1 << 20) / 8 * (4 / 2 + 4 / 2))
    assert simulate(build_schedule("ring", t, 1 << 18)).cycles >= lb.cycles


def test_cut_bound_through_switches():
    """fattree:2x2: leaf switches each hold two nodes and link to both top switches. With the top
    switches' links at 4 and 2 GB/s, the top groups {0, 1} and {2, 3} are joined by 4 + 2 GB/s
    each way (the maximum flow through the switches): D / 6."""
    t = parse_topology("fattree:2x2")
    top = sorted(s for s in t.switches
                 if not any(isinstance(p, int) for p in t.graph.predecessors(s)))
    assert len(top) == 2
    for sw, bw in zip(top, (4.0, 2.0)):
        for u in list(t.graph.predecessors(sw)):
            t.graph.edges[(u, sw)]["bandwidth"] = bw
            t.graph.edges[(sw, u)]["bandwidth"] = bw
    lb = lower_bound(t, 1 << 20)
    assert lb.binding == "cut" and lb.cut.startswith("top group")
    assert lb.cut_cycles == pytest.approx((1 << 20) / 6)
    assert simulate(build_schedule("ring", t, 1 << 18)).cycles >= lb.cycles


def test_latency_bound_uses_shortest_paths():
    t = parse_topology("mesh:3x3")
    t.graph.edges[(0, 1)]["latency"] = 10_000      # a detour round it costs nothing extra
    assert lower_bound(t, 64).latency_cycles == 4 * LAT


def test_lower_bound_bad_size():
    for bad in (0, -1, 1.5, True, "64"):
        with pytest.raises(ConfigError, match="size"):
            lower_bound(topo("ring:4"), bad)


# --- simulated time never beats the lower bound ------------------------------------------------

SPECS = ["ring:2", "ring:3", "ring:8", "mesh:3x3", "mesh:4x4", "torus:2x3", "torus:4x4",
         "fattree:2x2", "fattree:4x2", "bigraph:2x4"]


@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(SPECS), elements=st.integers(1, 1 << 20))
def test_ring_never_beats_the_lower_bound(spec, elements):
    t = topo(spec)
    r = simulate(build_schedule("ring", t, elements))
    assert r.cycles >= lower_bound(t, 4 * elements).cycles


@pytest.mark.parametrize("name", [a for a in ALGORITHMS if a != "ring"])
@pytest.mark.parametrize("spec", ["ring:5", "mesh:3x3", "torus:4x4", "fattree:2x3", "bigraph:2x4"])
@pytest.mark.parametrize("elements", [7, 4096, 1 << 18])
def test_other_algorithms_never_beat_the_lower_bound(name, spec, elements):
    t = topo(spec)
    try:
        sched = build_schedule(name, t, elements)
    except ConfigError:
        pytest.skip(f"{name} does not run on {spec}")
    assert simulate(sched).cycles >= lower_bound(t, 4 * elements).cycles


# --- against a naive reference ------------------------------------------------------------------

def reference_simulate(schedule, params=TimingParams(), injection=False):
    """The model of the timing module's docstring written as directly as possible: inputs found
    by scanning every earlier transfer, the next hop request chosen by a linear scan for the
    smallest (time, transfer index). First come, first served on every link; with
    ``injection``, a first hop may go only after the earlier first hops (schedule order) on its
    link went, and asks no earlier than the one before it asked."""
    topo = schedule.topology
    items = list(schedule.transfers())
    n = len(items)
    size = [schedule.chunk_elements(t.chunk) * params.element_bytes for _, t in items]
    inputs = [[j for j, (sj, tj) in enumerate(items)
               if sj < si and tj.dst == ti.src and tj.chunk == ti.chunk]
              for si, ti in items]
    injectors = {}          # link -> transfers whose first hop it is, in schedule order
    for i, (_, t) in enumerate(items):
        injectors.setdefault(t.route[0], []).append(i)
    asked = {}              # transfer -> time its first hop was served (asked)
    finish, start, waiting, pending, free = {}, {}, set(range(n)), {}, {}

    def turn(i):
        """(may go, earliest time) of a pending first hop under injection order."""
        before = [j for j in injectors[items[i][1].route[0]] if j < i]
        if not before:
            return True, 0
        return before[-1] in asked, asked.get(before[-1], 0)

    while len(finish) < n:
        for i in sorted(waiting):
            if all(j in finish for j in inputs[i]):
                pending[i] = (max([finish[j] for j in inputs[i]], default=0), 0, 0)
                waiting.discard(i)
        ready = {}
        for k, (at, hop, tail_in) in pending.items():
            if injection and hop == 0:
                go, after = turn(k)
                if not go:
                    continue
                at = max(at, after)
            ready[k] = (at, hop, tail_in)
        i = min(ready, key=lambda k: (ready[k][0], k))
        now, hop, tail_in = ready[i]
        del pending[i]
        if hop == 0:
            asked[i] = now
        link = items[i][1].route[hop]
        begin = max(now, free.get(link, 0))
        start.setdefault(i, begin)
        tail = max(begin + hold_cycles(size[i], topo.link_bandwidth(link), params), tail_in)
        free[link] = tail
        lat = topo.link_latency(link)
        if hop + 1 < len(items[i][1].route):
            pending[i] = (begin + lat + params.router_delay, hop + 1, tail + lat)
        else:
            finish[i] = tail + lat
    return [finish[i] for i in range(n)], [start[i] for i in range(n)]


REF_SPECS = ["ring:5", "torus:3x3", "mesh:2x3", "fattree:2x2", "bigraph:1x4"]


@st.composite
def random_schedules(draw):
    t = parse_topology(draw(st.sampled_from(REF_SPECS)))
    for link in t.links:
        t.graph.edges[link]["bandwidth"] = draw(st.sampled_from([8.0, 12.8, 16.0, 32.0]))
        t.graph.edges[link]["latency"] = draw(st.sampled_from([0, 1, 7, 150]))
    n = t.num_nodes
    chunks = draw(st.lists(st.integers(0, 300), min_size=1, max_size=3))
    pair = st.tuples(st.integers(0, n - 1), st.integers(1, n - 1),
                     st.integers(0, len(chunks) - 1), st.integers(0, 3))
    steps = [[], [], [], []]
    for src, off, chunk, step in draw(st.lists(pair, min_size=1, max_size=14)):
        steps[step].append((src, (src + off) % n, chunk))
    return make(t, chunks, steps)


@settings(max_examples=150, deadline=None)
@given(sched=random_schedules(), flit_bytes=st.sampled_from([4, 16, 64]),
       frequency=st.sampled_from([0.5, 1.0, 1.5]), router_delay=st.sampled_from([0, 0, 4]),
       order=st.sampled_from(["fcfs", "injection"]))
def test_matches_naive_reference(sched, flit_bytes, frequency, router_delay, order):
    params = TimingParams(frequency_ghz=frequency, flit_bytes=flit_bytes,
                          router_delay=router_delay, link_order=order)
    r = simulate(sched, params)
    finish, start = reference_simulate(sched, params, injection=order == "injection")
    assert list(r.finish) == finish and list(r.start) == start
    assert r.cycles == max(finish)
    assert r.step_finish == [max((f for f, (s, _) in zip(finish, sched.transfers()) if s == k),
                                 default=0) for k in range(len(sched.steps))]


# --- parameters --------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, text", [
    ({"frequency_ghz": 0}, "0"), ({"frequency_ghz": -1.0}, "-1.0"),
    ({"frequency_ghz": float("nan")}, "nan"), ({"frequency_ghz": float("inf")}, "inf"),
    ({"frequency_ghz": "1"}, "'1'"), ({"frequency_ghz": True}, "True"),
    ({"flit_bytes": 0}, "0"), ({"flit_bytes": -16}, "-16"), ({"flit_bytes": 1.5}, "1.5"),
    ({"element_bytes": 0}, "0"), ({"element_bytes": None}, "None"),
])
def test_bad_params(kwargs, text):
    (name,) = kwargs
    with pytest.raises(ConfigError, match=name) as info:
        TimingParams(**kwargs)
    assert text in str(info.value)


def test_params_defaults_and_frozen():
    p = TimingParams()
    assert (p.frequency_ghz, p.flit_bytes, p.element_bytes) == (1.0, 16, 4)
    with pytest.raises(AttributeError):
        p.flit_bytes = 8
    assert TimingParams(frequency_ghz=2, flit_bytes=32, element_bytes=2).flit_bytes == 32


# --- speed -------------------------------------------------------------------------------------

def test_speed_multi_hop():
    """~24k transfers of up to 8 hops on torus:8x8 (direct all-reduce over 192 chunks: every node
    sends each chunk to its owner, the owner sends it back to all) simulate in well under 1 s."""
    t = topo("torus:8x8")
    n, chunks = 64, 192
    rs = [(v, c % n, c) for c in range(chunks) for v in range(n) if v != c % n]
    ag = [(c % n, v, c) for c, v, _ in ((c, v, 0) for c in range(chunks) for v in range(n))
          if v != c % n]
    sched = make(t, 16777216 // chunks, [rs, ag])
    assert sched.num_transfers == 24192
    assert max(len(tr.route) for _, tr in sched.transfers()) == 8
    best = math.inf
    for _ in range(2):
        t0 = time.perf_counter()
        r = simulate(sched)
        best = min(best, time.perf_counter() - t0)
    assert best < 1.0
    assert r.cycles >= lower_bound(t, 64 << 20).cycles


# --- hardware-matching options -----------------------------------------------------------------

def test_header_flits_add_to_every_message():
    p = TimingParams(header_flits=1)
    r = simulate(make(topo("ring:4"), 256, [[(0, 1, 0), (0, 1, 1)]]), p)
    assert list(r.finish) == [65 + LAT, 2 * 65 + LAT]


@pytest.mark.parametrize("k", [1, 3])
def test_send_and_retire_delays_in_a_chain(k):
    p = TimingParams(send_delay=3, retire_delay=2)
    r = simulate(make(topo("ring:8"), 256, [[(i, i + 1, 0)] for i in range(k)]), p)
    assert r.cycles == k * (3 + 64 + LAT + 2)
    assert list(r.start) == [3 + i * (3 + 64 + LAT + 2) for i in range(k)]


@pytest.mark.parametrize("spec, src, dst", [("torus:4x4", 0, 10), ("fattree:4x2", 0, 15),
                                            ("mesh:4x4", 3, 12)])
def test_router_delay_per_transit_node(spec, src, dst):
    """A lone message over k links: hold + k * latency + (k - 1) * router_delay (every node of
    the route but its ends is a router it passes through)."""
    t = topo(spec)
    k = len(t.route(src, dst))
    assert k >= 2
    r = simulate(make(t, 256, [[(src, dst, 0)]]), TimingParams(router_delay=4))
    assert r.cycles == 64 + k * LAT + (k - 1) * 4


def test_in_order_links_serve_schedule_order():
    """The case of test_first_come_first_served_across_steps, with in-order links: the step-1
    transfer of chunk 1 is ready at 0 but waits for the step-1 transfer of chunk 0 (listed
    first), which waits for its input until 214."""
    t = topo("ring:4")
    sched = make(t, [256, 2048], [[(2, 1, 0)], [(1, 0, 0), (1, 0, 1)]])
    r = simulate(sched, TimingParams(link_order="schedule"))
    assert list(r.start) == [0, 64 + LAT, 64 + LAT + 64]
    assert list(r.finish) == [64 + LAT, 2 * (64 + LAT), 64 + LAT + 64 + 512 + LAT]


def test_injection_order_orders_first_hops_only():
    """ring:4, chunks of 64, 512 and 64 flits. Step 0: 2 -> 1 (chunk 0). Step 1: 1 -> 2 of
    chunk 0 (waits for step 0's arrival at 64 + LAT), 1 -> 2 of chunk 1 (ready at 0), and
    0 -> 1 -> 2 of chunk 2 (ready at 0). With injection order, chunk 1's first hop waits for
    chunk 0's and then for its tail (start 128 + LAT); chunk 2's second hop is a router's and
    takes link 1 -> 2 as it comes, at LAT, done before chunk 0 needs it. First come first served
    sends chunk 1 at 0 instead, and schedule order holds chunk 2 behind both: three results."""
    t = topo("ring:4")
    bounds = np.array([0, 256, 256 + 2048, 256 + 2048 + 256], dtype=np.int64)
    steps = [[Transfer(2, 1, 0, Op.COPY, ((2, 1),))],
             [Transfer(1, 2, 0, Op.COPY, ((1, 2),)), Transfer(1, 2, 1, Op.COPY, ((1, 2),)),
              Transfer(0, 2, 2, Op.COPY, ((0, 1), (1, 2)))]]
    sched = AllReduceSchedule("test", t, int(bounds[-1]), bounds, steps)
    r = simulate(sched, TimingParams(link_order="injection"))
    assert list(r.start) == [0, 64 + LAT, 128 + LAT, 0]
    assert list(r.finish) == [64 + LAT, 128 + 2 * LAT, 640 + 2 * LAT, 64 + 2 * LAT]
    others = {rule: simulate(sched, TimingParams(link_order=rule)).finish.tolist()
              for rule in ("fcfs", "schedule")}
    assert r.finish.tolist() not in others.values()
    assert others["fcfs"] != others["schedule"]


def test_in_order_links_never_faster_on_real_schedules():
    for alg in ("ring", "multitree", "multitree-opt", "ring2d"):
        s = build_schedule(alg, topo("torus:4x4"), 4096)
        fcfs = simulate(s).cycles
        ordered = simulate(s, TimingParams(link_order="schedule")).cycles
        assert ordered >= fcfs or alg == "ring"    # ring's links already see schedule order
        if alg == "ring":
            assert ordered == fcfs


@pytest.mark.parametrize("kw", [{"header_flits": -1}, {"send_delay": 1.5},
                                {"retire_delay": True}, {"router_delay": -4},
                                {"link_order": "lifo"}])
def test_bad_hardware_options(kw):
    with pytest.raises(ConfigError, match=next(iter(kw)).replace("link_order", "link order")):
        TimingParams(**kw)


def test_staged_transfers_are_added_in_order_through_the_loopback():
    """Two REDUCEs into (1, 0) staged (a routed float NI): each counts as finished when node 1's
    loopback has added it, one after the other; the send that waits for both starts after the
    second add (closed form below), and later than without staging."""
    topo = parse_topology("ring:4", link_latency=5)
    elements = 40                                   # 10 payload flits + 1 header
    bounds = np.array([0, elements], dtype=np.int64)
    sched = AllReduceSchedule("hand", topo, elements, bounds, [
        [Transfer(0, 1, 0, Op.REDUCE, topo.route(0, 1)),
         Transfer(2, 1, 0, Op.REDUCE, topo.route(2, 1))],
        [Transfer(1, 0, 0, Op.COPY, topo.route(1, 0))]])
    params = TimingParams(header_flits=1, send_delay=2, retire_delay=1, loopback_latency=1)
    f, lat = 11, 5
    arrive = 2 + f + lat + 1                        # both step-0 transfers, on separate links
    add0 = arrive + 2 + f + 1 + 1                   # send delay, flits, loopback, retire
    add1 = add0 + f                                 # starts as soon as add 0's flits are out
    res = simulate(sched, params, staged=(0, 1))
    assert res.finish.tolist() == [add0, add1, add1 + 2 + f + lat + 1]
    plain = simulate(sched, params)
    assert plain.finish.tolist() == [arrive, arrive, arrive + 2 + f + lat + 1]
    with pytest.raises(ConfigError, match="staged transfer 3"):
        simulate(sched, params, staged=(3,))


# --- link order and the bound with latency -------------------------------------------------------

def test_hardware_link_order_follows_the_network_that_runs_the_schedule():
    """Single-hop schedules on a direct topology are served in schedule order (the NIs' send
    engines), anything with a multi-hop route in schedule order at injection and first come
    first served at the routers."""
    from golden_model.algorithms import multitree_opt
    t = topo("torus:4x4")
    direct = multitree_opt.build(t, 1 << 16, sub_chunks=8)   # several transfers per link a step
    routed = build_schedule("dbtree", t, 4096)
    assert any(len(tr.route) > 1 for _, tr in routed.transfers())
    for sched, rule in ((direct, "schedule"), (routed, "injection")):
        assert (simulate(sched).cycles
                == simulate(sched, TimingParams(link_order=rule)).cycles)
    # The two rules differ on the direct schedule (so the check above can fail).
    assert (simulate(direct, TimingParams(link_order="fcfs")).cycles
            != simulate(direct, TimingParams(link_order="schedule")).cycles)


def test_message_gap_idles_the_link_between_messages():
    """Two messages on one link: the second starts ``gap`` cycles after the first's tail."""
    t = topo("ring:4")
    sched = make(t, [256, 256], [[(1, 0, 0), (1, 0, 1)]])
    r = simulate(sched, TimingParams(message_gap=7))
    assert list(r.start) == [0, 64 + 7]
    assert r.cycles == 64 + 7 + 64 + LAT


@pytest.mark.parametrize("size", [64, 1 << 20])
def test_tight_bound_adds_the_link_latency(size):
    """torus:4x4 with equal links: injection + 150 (the mean latency of the nodes' links), the
    cut bound D/64 + 150 and the diameter 600; the largest of them."""
    lb = lower_bound(topo("torus:4x4"), size)
    inj = 2 * 15 * size / (64 * 16)
    assert lb.tight_cycles == pytest.approx(max(inj + LAT, size / 64 + LAT, 4 * LAT))
    assert lb.rsag_cycles == pytest.approx(lb.injection_cycles)


# --- the one-hop closed form against the event simulation ---------------------------------------

@st.composite
def one_hop_schedules(draw):
    """Random neighbour transfers on a direct topology with random link attributes: several on
    one link in one step, chains across steps, empty steps, unequal chunks."""
    t = parse_topology(draw(st.sampled_from(["ring:2", "ring:5", "torus:3x3", "mesh:2x3"])))
    for link in t.links:
        t.graph.edges[link]["bandwidth"] = draw(st.sampled_from([8.0, 12.8, 16.0, 32.0]))
        t.graph.edges[link]["latency"] = draw(st.sampled_from([0, 1, 7, 150]))
    chunks = draw(st.lists(st.integers(0, 300), min_size=1, max_size=4))
    link = st.tuples(st.sampled_from(list(t.links)), st.integers(0, len(chunks) - 1),
                     st.integers(0, 4))
    steps = [[] for _ in range(5)]
    for (u, v), chunk, step in draw(st.lists(link, min_size=1, max_size=25)):
        steps[step].append((u, v, chunk))
    return make(t, chunks, steps)


@settings(max_examples=200, deadline=None)
@given(sched=one_hop_schedules(), order=st.sampled_from(["hardware", "schedule"]),
       header=st.sampled_from([0, 1]), send=st.sampled_from([0, 3]),
       retire=st.sampled_from([0, 5]), gap=st.sampled_from([0, 12]))
def test_one_hop_closed_form_equals_the_event_simulation(sched, order, header, send, retire,
                                                           gap):
    from golden_model import timing  # noqa: PLC0415
    params = TimingParams(link_order=order, header_flits=header, send_delay=send,
                          retire_delay=retire, message_gap=gap)
    fast = simulate(sched, params)
    event = timing._simulate(sched, params, (), one_hop=False)
    assert (fast.cycles, fast.step_finish) == (event.cycles, event.step_finish)
    assert fast.finish.tolist() == event.finish.tolist()
    assert fast.start.tolist() == event.start.tolist()


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("spec", ["ring:6", "mesh:3x4", "torus:4x4"])
def test_one_hop_closed_form_on_every_algorithm(name, spec):
    """Every algorithm's schedule on a direct topology, with the NI's per-message costs."""
    from golden_model import timing  # noqa: PLC0415
    params = TimingParams(header_flits=1, send_delay=3, retire_delay=5, message_gap=12)
    sched = build_schedule(name, topo(spec), 100_003, params)
    if timing.needs_router(sched):
        pytest.skip(f"{name} on {spec} crosses several links: the event simulation times it")
    fast = simulate(sched, params)
    event = timing._simulate(sched, params, (), one_hop=False)
    assert fast.finish.tolist() == event.finish.tolist()
    assert fast.start.tolist() == event.start.tolist()


# --- the receiving NI's order (TimingParams.receive_order) ------------------------------------

def test_receive_order_hand_computed():
    """On ring:4, node 1 receives chunk 2 (256 flits) then chunk 0 (64) from node 2, and chunk 0
    then chunk 1 (64 each) from node 0, all reducing, in one step. Without the receive order:
    finishes 406, 470, 214, 278. With it, 0->1's chunk 0 follows 2->1's into the same chunk
    (470), and 0->1's chunk 1 is written after it on the same port (470 + 64). The default
    link order (the hardware's) brings the receive order on these NIs joined by links."""
    sched = make(topo("ring:4"), [256, 256, 1024],
                 [[(2, 1, 2), (2, 1, 0), (0, 1, 0), (0, 1, 1)]], op=Op.REDUCE)
    assert simulate(sched, TimingParams(link_order="schedule")).finish.tolist() == [
        406, 470, 214, 278]
    r = simulate(sched, TimingParams(link_order="schedule", receive_order=True))
    assert r.finish.tolist() == [406, 470, 470, 534] and r.cycles == 534
    assert simulate(sched).finish.tolist() == r.finish.tolist()


def _receive_order_reference(sched, params):
    """Finishes of a one-hop schedule with links in schedule order and the receive order, in one
    pass in schedule order: everything a transfer waits for comes earlier in that order."""
    sizes = np.diff(sched.bounds) * params.element_bytes
    payload = -(-sizes // params.flit_bytes)
    have, free, last_on, last_into, finish = {}, {}, {}, {}, []
    for step in sched.steps:
        arrived = []
        for t in step:
            (link,) = t.route
            ready = have.get((t.src, t.chunk), 0) + params.send_delay
            hold = payload[t.chunk] + params.header_flits    # 16 GB/s, 16-byte flits, 1 GHz
            start = max(ready, free.get(link, 0))
            free[link] = start + hold + params.message_gap
            fin = start + hold + sched.topology.link_latency(link) + params.retire_delay
            if link in last_on:
                fin = max(fin, last_on[link] + payload[t.chunk])
            if t.op is Op.REDUCE and (t.dst, t.chunk) in last_into:
                fin = max(fin, last_into[t.dst, t.chunk])
            last_on[link] = fin
            if t.op is Op.REDUCE:
                last_into[t.dst, t.chunk] = fin
            finish.append(fin)
            arrived.append(((t.dst, t.chunk), fin))
        for key, fin in arrived:
            have[key] = max(have.get(key, 0), fin)
    return finish


@settings(max_examples=150, deadline=None)
@given(sched=one_hop_schedules(), op=st.sampled_from([Op.REDUCE, Op.COPY]),
       header=st.sampled_from([0, 1]), send=st.sampled_from([0, 3]),
       retire=st.sampled_from([0, 5]), gap=st.sampled_from([0, 12]))
def test_receive_order_equals_a_one_pass_reference(sched, op, header, send, retire, gap):
    for link in sched.topology.links:
        sched.topology.graph.edges[link]["bandwidth"] = 16.0
    sched = make(sched.topology, np.diff(sched.bounds).tolist(),
                 [[(t.src, t.dst, t.chunk) for t in step] for step in sched.steps], op=op)
    params = TimingParams(header_flits=header, send_delay=send, retire_delay=retire,
                          message_gap=gap, receive_order=True)
    assert simulate(sched, params).finish.tolist() == _receive_order_reference(sched, params)


@pytest.mark.parametrize("kw", [{"link_order": "fcfs"},
                                {"reduction": ReductionUnit(64, 1)}])
def test_receive_order_needs_in_order_links_without_a_reduction_unit(kw):
    with pytest.raises(ConfigError, match="receive_order"):
        TimingParams(receive_order=True, **kw)


def test_receive_order_not_with_staged_or_multi_hop():
    sched = make(topo("ring:8"), 256, [[(0, 3, 0)]])
    with pytest.raises(ConfigError, match="receive_order"):
        simulate(sched, TimingParams(receive_order=True))
    with pytest.raises(ConfigError, match="receive_order"):
        simulate(make(topo("ring:4"), 256, [[(0, 1, 0)]]), TimingParams(receive_order=True),
                 staged=[0])


# --- each step in arrival order (in_arrival_order) ---------------------------------------------

def _link_orders(sched):
    order = {}
    for _, t in sched.transfers():
        order.setdefault(t.route[-1], []).append((t.src, t.dst, t.chunk, t.op))
    return order


@settings(max_examples=100, deadline=None)
@given(sched=one_hop_schedules(), header=st.sampled_from([0, 1]), gap=st.sampled_from([0, 12]))
def test_arrival_order_keeps_links_and_time_and_orders_each_step_by_finish(sched, header, gap):
    for link in sched.topology.links:
        sched.topology.graph.edges[link]["bandwidth"] = 16.0
    sched = make(sched.topology, np.diff(sched.bounds).tolist(),
                 [[(t.src, t.dst, t.chunk) for t in step] for step in sched.steps], op=Op.REDUCE)
    params = TimingParams(header_flits=header, message_gap=gap)
    plain = TimingParams(header_flits=header, message_gap=gap, link_order="schedule")
    out = in_arrival_order(sched, params)
    assert sorted(map(len, out.steps)) == sorted(map(len, sched.steps))
    assert [sorted(s, key=repr) for s in out.steps] == [sorted(s, key=repr) for s in sched.steps]
    assert _link_orders(out) == _link_orders(sched)
    fin = simulate(out, plain).finish.tolist()
    assert sorted(fin) == sorted(simulate(sched, plain).finish.tolist())
    at = 0
    for step in out.steps:       # every step by finish: the summation order is the arrival order
        assert fin[at:at + len(step)] == sorted(fin[at:at + len(step)])
        at += len(step)


def test_arrival_order_removes_the_receive_order_cost_of_a_pipelined_schedule():
    """torus:4x4, 8 sub-chunks at 16 MiB per node: summed in schedule order, contributions that
    come first but arrive later stall their links (the receive order costs 6.7%); summed in
    arrival order the schedule runs as fast as with no receive order at all."""
    from golden_model.algorithms import multitree_opt
    t = topo("torus:4x4")
    sched = multitree_opt.build(t, 1 << 22, sub_chunks=8)     # reordered for the default timing
    raw = multitree_opt.build(t, 1 << 22, TimingParams(link_order="schedule"), sub_chunks=8)
    plain = TimingParams(link_order="schedule")
    ro = TimingParams(link_order="schedule", receive_order=True)
    assert simulate(raw, plain).cycles == simulate(sched, plain).cycles
    assert simulate(raw, ro).cycles > 1.05 * simulate(raw, plain).cycles
    assert simulate(sched, ro).cycles == simulate(sched, plain).cycles == simulate(sched).cycles


def test_arrival_order_leaves_schedules_without_the_receive_order_alone():
    sched = make(topo("ring:4"), 64, [[(0, 1, 0), (2, 1, 0)]], op=Op.REDUCE)
    for params in (TimingParams(link_order="schedule"), TimingParams(link_order="fcfs")):
        assert in_arrival_order(sched, params) is sched
