"""Unit tests of the router blocks in amaranth.sim: parameters, round-robin arbiter, VC and
switch allocators, RouteCompute and the routing tables, one router's pipeline timing."""

import itertools
import random

import numpy as np
import pytest

from golden_model.topology import parse_topology
from hdl.flit import FlitKind
from hdl.router import (Crossbar, RoundRobinArbiter, RouteCompute, Router, RouterNetwork,
                        RouterParams, RoutingTable, SwitchAllocator, VCAllocator, grid_tables,
                        head_payload, switch_table)
from hdl.router.router import full_rate_depth
from hdl_host import run_testbench as run
from hdl.router.network import EJECTION_CYCLES, INJECTION_CYCLES, ROUTER_CYCLES, path_cost
from hdl.router.routing import (NUM_GRID_PORTS, dependency_cycle, grid_neighbor, switch_tables,
                                walk)


def bits(x, n):
    return [x >> i & 1 for i in range(n)]


def packet_kind(k, length):
    """Kind of flit ``k`` of a ``length``-flit packet (``length`` >= 2)."""
    return FlitKind.HEAD if k == 0 else FlitKind.TAIL if k == length - 1 else FlitKind.BODY


# --- parameters ---------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("num_ports", 0), ("num_ports", 33), ("num_ports", True), ("num_vcs", 0), ("num_vcs", 2.0),
    ("vc_buf_depth", 1), ("flit_width", 31), ("credit_delay", 0), ("flow_control", "store"),
])
def test_router_params_reject_bad_values(field, value):
    args = dict(num_ports=5, num_vcs=2, vc_buf_depth=4, flit_width=64, credit_delay=1,
                flow_control="wormhole")
    args[field] = value
    with pytest.raises(ValueError, match=field + ".*" + repr(value).replace(".", r"\.")):
        RouterParams(**args)


def test_router_rejects_mismatched_table_and_odd_torus_vcs():
    torus = grid_tables(parse_topology("torus:4x4"))
    with pytest.raises(ValueError, match="num_ports is 4"):
        Router(RouterParams(4, 2), torus[0])
    with pytest.raises(ValueError, match="num_vcs must be even.*3"):
        Router(RouterParams(5, 3), torus[0])
    with pytest.raises(ValueError, match="num_vcs must be even.*1"):
        RouterNetwork(parse_topology("torus:4x4"), num_vcs=1)
    with pytest.raises(ValueError, match="mesh, torus, fattree, bigraph.*ring:4"):
        RouterNetwork(parse_topology("ring:4"))
    with pytest.raises(ValueError, match="concentration must be 1 on fattree:4x2.*2"):
        RouterNetwork(parse_topology("fattree:4x2"), concentration=2)
    with pytest.raises(ValueError, match="num_vcs must be even on bigraph:4x4.*cyclic.*3"):
        RouterNetwork(parse_topology("bigraph:4x4"), num_vcs=3)
    with pytest.raises(ValueError, match="concentration.*0"):
        RouterNetwork(parse_topology("mesh:2x2"), concentration=0)
    with pytest.raises(ValueError, match="link_latency.*-1"):
        RouterNetwork(parse_topology("mesh:2x2"), link_latency=-1)
    with pytest.raises(ValueError, match="arbiter size.*0"):
        RoundRobinArbiter(0)


# --- round-robin arbiter ------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 3, 5, 8])
def test_round_robin_arbiter(n):
    dut = RoundRobinArbiter(n)
    rng = random.Random(n)

    async def bench(ctx):
        # all requesting, always advancing: grants rotate 0, 1, ..., n-1, 0, ...
        ctx.set(dut.requests, (1 << n) - 1)
        ctx.set(dut.advance, 1)
        for k in range(2 * n):
            assert ctx.get(dut.grant) == 1 << (k % n)
            await ctx.tick()
        # no advance: the grant stays
        ctx.set(dut.advance, 0)
        g = ctx.get(dut.grant)
        for _ in range(3):
            await ctx.tick()
            assert ctx.get(dut.grant) == g
        # random requests: one-hot, a requester, and the first requester at or after the pointer
        ctx.set(dut.advance, 1)
        ptr = g.bit_length() - 1     # the pointer sits on the unadvanced winner
        for _ in range(300):
            req = rng.randrange(1 << n)
            ctx.set(dut.requests, req)
            grant = ctx.get(dut.grant)
            if req == 0:
                assert grant == 0 and not ctx.get(dut.valid)
            else:
                order = [(ptr + k) % n for k in range(n)]
                want = next(i for i in order if req >> i & 1)
                assert grant == 1 << want
                ptr = (want + 1) % n
            await ctx.tick()
    run(dut, bench)


# --- allocators ---------------------------------------------------------------------------------

@pytest.mark.parametrize("p, v", [(5, 2), (3, 4), (2, 1)])
def test_vc_allocator_grants_are_legal_and_fair(p, v):
    dut = VCAllocator(p, v)
    rng = random.Random(p * 10 + v)
    n = p * v

    async def bench(ctx):
        waiting = {}
        for cycle in range(400):
            req = [rng.random() < 0.6 for _ in range(n)]
            ports = [rng.randrange(p) for _ in range(n)]
            masks = [rng.randrange(1, 1 << v) for _ in range(n)]
            # a persistent requester: input VC 0 always asks for output VC 0 of port 0
            req[0], ports[0], masks[0] = True, 0, 1
            for i in range(n):
                ctx.set(dut.req[i], req[i])
                ctx.set(dut.req_port[i], ports[i])
                ctx.set(dut.req_mask[i], masks[i])
            grant = bits(ctx.get(dut.grant), n)
            taken = set()
            for i in range(n):
                if grant[i]:
                    w = ctx.get(dut.grant_vc[i])
                    assert req[i] and masks[i] >> w & 1, (cycle, i)
                    assert (ports[i], w) not in taken, "two input VCs got one output VC"
                    taken.add((ports[i], w))
            # the output VCs the router marks busy: exactly those granted
            assert bits(ctx.get(dut.taken), p * v) == [
                (o, w) in taken for o in range(p) for w in range(v)]
            if any(req):
                assert any(grant)
            waiting[0] = 0 if grant[0] else waiting.get(0, 0) + 1
            assert waiting[0] <= n, "input VC 0 starved"
            await ctx.tick()
    run(dut, bench)


@pytest.mark.parametrize("p, v", [(5, 2), (4, 3), (1, 2)])
def test_switch_allocator_grants_are_legal_and_fair(p, v):
    dut = SwitchAllocator(p, v)
    rng = random.Random(p * 7 + v)
    n = p * v

    async def bench(ctx):
        wait = 0
        for cycle in range(400):
            req = [rng.random() < 0.5 for _ in range(n)]
            ports = [rng.randrange(p) for _ in range(n)]
            req[0], ports[0] = True, 0
            for i in range(n):
                ctx.set(dut.req[i], req[i])
                ctx.set(dut.req_port[i], ports[i])
            grant = bits(ctx.get(dut.grant), n)
            per_in = [sum(grant[q * v:(q + 1) * v]) for q in range(p)]
            assert max(per_in) <= 1
            outs = [ports[i] for i in range(n) if grant[i]]
            assert len(outs) == len(set(outs)), "two inputs on one output"
            for i in range(n):
                if grant[i]:
                    q = i // v
                    assert req[i]
                    assert ctx.get(dut.out_sel[ports[i]]) == 1 << q
                    assert ctx.get(dut.in_sel[q]) == 1 << (i % v)
            for o in range(p):
                assert ctx.get(dut.out_valid[o]) == (o in outs)
            if any(req):
                assert any(grant)
            wait = 0 if grant[0] else wait + 1
            assert wait <= n
            await ctx.tick()
    run(dut, bench)


def test_crossbar():
    from hdl.router.flit import RouterFlit
    layout = RouterFlit(32, 2)
    dut = Crossbar(3, layout)

    async def bench(ctx):
        for i in range(3):
            ctx.set(dut.inp[i].as_value(), 0x1000 + i)
        for sel in itertools.product([0, 1, 2, 4], repeat=3):
            for o in range(3):
                ctx.set(dut.sel[o], sel[o])
            for o in range(3):
                want = 0 if sel[o] == 0 else 0x1000 + sel[o].bit_length() - 1
                assert ctx.get(dut.out[o].as_value()) == want
    run(dut, bench)


# --- routing ------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["mesh:4x4", "torus:4x4", "mesh:2x3", "torus:3x5", "torus:2x4",
                                  "torus:8x8", "mesh:1x4"])
def test_grid_tables_follow_golden_routes_with_datelines(spec):
    topo = parse_topology(spec)
    tables = grid_tables(topo)
    torus = topo.family == "torus"
    for s, d in itertools.product(topo.nodes, repeat=2):
        hops = walk(topo, tables, s, d)
        links = [(r, grid_neighbor(topo, r, port)) for r, port, _ in hops[:-1]]
        assert tuple(links) == topo.route(s, d), (s, d)
        assert hops[-1][1] == NUM_GRID_PORTS and hops[-1][0] == d
        # VC classes: 0 until a dateline is crossed, 1 after it in the same dimension
        crossed = {0: False, 1: False}
        dim_of = {0: 1, 1: 1, 2: 0, 3: 0}
        prev_dim = None
        for r, port, cls in hops[:-1]:
            dim = dim_of[port]
            if dim != prev_dim:
                crossed = {0: False, 1: False}
            if tables[r].dateline[d]:
                assert torus and not crossed[dim], "a dateline crossed twice in one dimension"
                crossed[dim] = True
            assert cls == (None if not torus else int(crossed[dim])), (s, d, r)
            prev_dim = dim


def test_grid_tables_with_concentration():
    topo = parse_topology("mesh:3x3")
    tables = grid_tables(topo, concentration=2)
    assert tables[0].num_ports == 6 and tables[0].num_dests == 18
    for s, d in itertools.product(range(18), repeat=2):
        hops = walk(topo, tables, s, d, concentration=2)
        assert hops[-1] == (d // 2, NUM_GRID_PORTS + d % 2, None)
        assert len(hops) - 1 == len(topo.route(s // 2, d // 2))


@pytest.mark.parametrize("spec", ["fattree:4x2", "fattree:2x3", "bigraph:4x4"])
def test_switch_tables_follow_golden_routes(spec):
    topo = parse_topology(spec)
    tables = {s: switch_table(topo, s) for s in topo.switches}
    g = topo.graph
    for s, d in itertools.product(topo.nodes, repeat=2):
        route = topo.route(s, d)
        for u, v in route[1:]:       # every hop out of a switch
            ports = list(g.successors(u))
            assert ports[tables[u].out_port[d]] == v


def test_switch_table_rejects_a_node():
    with pytest.raises(ValueError, match="not a switch"):
        switch_table(parse_topology("fattree:4x2"), 3)
    with pytest.raises(ValueError, match="num_ports must be an integer >= 8.*5"):
        switch_table(parse_topology("fattree:4x2"), "s0", num_ports=5)
    with pytest.raises(ValueError, match="switched topology.*mesh:2x2"):
        switch_tables(parse_topology("mesh:2x2"))
    with pytest.raises(ValueError, match="vc_classes.*3"):
        switch_tables(parse_topology("fattree:4x2"), vc_classes=3)


@pytest.mark.parametrize("spec, ports, classes", [
    ("fattree:4x2", 8, 1), ("fattree:2x3", 4, 1), ("bigraph:4x4", 6, 2), ("bigraph:2x8", 6, 2)])
def test_switch_tables_reach_every_destination_without_deadlock(spec, ports, classes):
    """``switch_tables``: one port count (the largest degree), every (source, destination) walk
    follows the golden route to the destination's port, an acyclic channel dependency graph,
    and two VC classes only where one class has a cycle (BiGraph's transits)."""
    topo = parse_topology(spec)
    tables = switch_tables(topo)
    g = topo.graph
    assert {t.num_ports for t in tables} == {ports}
    assert {t.vc_classes for t in tables} == {classes}
    for s, d in itertools.product(topo.nodes, repeat=2):
        hops = walk(topo, tables, s, d)
        links = [(sw, list(g.successors(sw))[port]) for sw, port, _ in hops]
        assert links[-1][1] == d and hops[-1][2] is None     # any VC into the endpoint
        if s != d:
            assert tuple(links) == topo.route(s, d)[1:]
        if classes == 2:
            # class 1 exactly on the switch-to-switch hop into the destination's switch
            assert [c for _, _, c in hops[:-1]] == [0] * (len(hops) - 2) + [1] * (len(hops) > 1)
    assert dependency_cycle(topo, tables) is None
    one = dependency_cycle(topo, switch_tables(topo, vc_classes=1))
    assert (one is not None) == (classes == 2)
    if one:
        assert one[0] == one[-1] and len(one) >= 3


def test_path_cost_counts_routers_links_and_cycles():
    assert (ROUTER_CYCLES, INJECTION_CYCLES, EJECTION_CYCLES) == (4, 1, 1)
    ft, bg, mesh = (parse_topology(x) for x in ("fattree:4x2", "bigraph:4x4", "mesh:4x4"))
    # (topology, src, dst, routers, links)
    for topo, s, d, r, k in [(ft, 0, 0, 1, 2), (ft, 0, 3, 1, 2), (ft, 0, 15, 3, 4),
                             (bg, 0, 1, 1, 2), (bg, 0, 9, 2, 3), (bg, 0, 5, 3, 4),
                             (mesh, 0, 0, 1, 0), (mesh, 0, 15, 7, 6)]:
        cost = path_cost(topo, s, d, link_latency=2)
        assert (cost.routers, cost.links) == (r, k), (topo.spec, s, d)
        assert cost.head_latency == 2 + 4 * r + 2 * k
        assert cost.latency(5) == cost.head_latency + 4
    with pytest.raises(ValueError, match="dst must be a terminal 0..15.*16"):
        path_cost(ft, 0, 16)


@pytest.mark.parametrize("spec, v", [("torus:4x4", 2), ("torus:4x4", 4), ("mesh:4x4", 2)])
def test_route_compute_matches_the_table(spec, v):
    topo = parse_topology(spec)
    table = grid_tables(topo)[5]
    for in_port in range(table.num_ports):
        dut = RouteCompute(table, in_port, v)

        async def bench(ctx, dut=dut, in_port=in_port):
            for d in range(table.num_dests):
                for cls in (0, 1):
                    ctx.set(dut.dest, d)
                    ctx.set(dut.in_class, cls)
                    assert ctx.get(dut.port) == table.out_port[d]
                    want = table.next_class(in_port, cls, d)
                    half = (1 << (v // 2)) - 1
                    mask = (1 << v) - 1 if want is None else half << (v // 2) * want
                    assert ctx.get(dut.vc_mask) == mask, (in_port, d, cls)
        run(dut, bench)


def test_routing_table_validation():
    with pytest.raises(ValueError, match="out_port entries.*7"):
        RoutingTable(num_ports=3, out_port=(0, 7), dateline=(False, False),
                     port_dim=(None,) * 3)
    with pytest.raises(ValueError, match="vc_classes.*3"):
        RoutingTable(num_ports=1, out_port=(0,), dateline=(False,), port_dim=(None,),
                     vc_classes=3)


# --- one router: pipeline timing and credits ----------------------------------------------------

@pytest.mark.parametrize("flow_control, num_vcs", [("wormhole", 2), ("cut_through", 2),
                                                    ("cut_through", 3)])
def test_router_zero_load_latency_and_credits(flow_control, num_vcs):
    """A 3-flit packet from port 0 to port 2 of a lone router: the head is on the output 4
    cycles after it is on the input; body flits follow one per cycle; each popped flit returns
    a credit upstream credit_delay cycles later; output credits are spent per flit."""
    table = RoutingTable(num_ports=3, out_port=(0, 1, 2), dateline=(False,) * 3,
                         port_dim=(None,) * 3)
    prm = RouterParams(3, num_vcs=num_vcs, vc_buf_depth=4, flit_width=32, credit_delay=2,
                       flow_control=flow_control)
    dut = Router(prm, table)
    head = head_payload(2, 0, 2)
    flits = [(FlitKind.HEAD, head), (FlitKind.BODY, 0xAAA), (FlitKind.TAIL, 0xBBB)]

    async def bench(ctx):
        await ctx.tick()
        seen, credits = [], []
        for t in range(20):
            if t < 3:
                kind, payload = flits[t]
                ctx.set(dut.inp[0].valid, 1)
                ctx.set(dut.inp[0].flit, {"kind": kind, "vc": 1, "payload": payload})
            else:
                ctx.set(dut.inp[0].valid, 0)
            if ctx.get(dut.out[2].valid):
                f = ctx.get(dut.out[2].flit)
                seen.append((t, f.kind, f.payload))
            for o in (0, 1):
                assert not ctx.get(dut.out[o].valid)
            c = ctx.get(dut.inp[0].credit)
            if c:
                credits.append((t, c))
            await ctx.tick()
        assert [s[0] for s in seen] == [4, 5, 6]
        assert [(k, p) for _, k, p in seen] == flits
        # flits popped in cycles 3, 4, 5 (SA); credits of VC 1 (bit 1) credit_delay = 2 later
        assert credits == [(5, 2), (6, 2), (7, 2)]
        assert not ctx.get(dut.error)
    run(dut, bench)


def test_cut_through_waits_for_room_for_the_whole_packet():
    """The downstream VC has 5 credits and never returns any. A 3-flit packet goes through;
    then a 4-flit packet finds 2 credits: wormhole sends 2 of its flits, cut-through none."""
    table = RoutingTable(num_ports=2, out_port=(0, 1), dateline=(False,) * 2,
                         port_dim=(None,) * 2)
    pkts = [(3, 1), (4, 2)]
    stream = []
    for length, tag in pkts:
        for k in range(length):
            stream.append((packet_kind(k, length), head_payload(1, 0, length - 1) if k == 0 else tag << 8 | k))
    for fc, want in (("wormhole", 5), ("cut_through", 3)):
        prm = RouterParams(2, num_vcs=1, vc_buf_depth=5, flit_width=32, credit_delay=1,
                           flow_control=fc)
        dut = Router(prm, table)

        async def bench(ctx, dut=dut, want=want):
            await ctx.tick()
            out, fed, returned = 0, 0, 0
            for _ in range(40):
                if fed < len(stream) and fed - returned < 5:
                    kind, payload = stream[fed]
                    ctx.set(dut.inp[0].valid, 1)
                    ctx.set(dut.inp[0].flit, {"kind": kind, "payload": payload})
                    fed += 1
                else:
                    ctx.set(dut.inp[0].valid, 0)
                returned += ctx.get(dut.inp[0].credit)
                out += ctx.get(dut.out[1].valid)
                await ctx.tick()
            assert fed == len(stream)
            assert out == want
            assert not ctx.get(dut.error)
        run(dut, bench)


# --- a whole fat-tree / BiGraph network: zero-load timing ----------------------------------------

@pytest.mark.parametrize("spec, link_latency, pairs", [
    # same switch, itself, up and down through a root / through the other half, a transit
    pytest.param("fattree:4x2", 1, [(0, 2), (5, 5), (0, 15), (9, 4)],
                 marks=pytest.mark.slow),    # 25 s, most of it elaborating for amaranth.sim
    ("bigraph:4x4", 2, [(0, 1), (0, 9), (0, 5), (13, 2)]),
])
def test_indirect_network_zero_load_latency(spec, link_latency, pairs):
    """One 3-flit packet at a time through an empty fat-tree / BiGraph network in amaranth.sim:
    the head reaches ``eject`` exactly ``path_cost(...).head_latency`` cycles after it was
    accepted, the body and tail follow one per cycle, at the destination only. (Every pair is
    measured in Verilator by ``test_router_zero_load_latency_verilator``.)"""
    topo = parse_topology(spec)
    net = RouterNetwork(topo, num_vcs=2, vc_buf_depth=8, flit_width=32,
                        link_latency=link_latency)
    n = net.num_terminals
    got = {}

    async def bench(ctx):
        for t in range(n):
            ctx.set(net.eject[t].ready, 1)
        for s, d in pairs:
            flits = [(FlitKind.HEAD, head_payload(d, s, 2)), (FlitKind.BODY, s),
                     (FlitKind.TAIL, d)]
            sent, seen, t0 = 0, [], None
            for cycle in range(100):
                if sent < 3:
                    ctx.set(net.inject[s].valid, 1)
                    ctx.set(net.inject[s].payload, {"kind": flits[sent][0],
                                                    "payload": flits[sent][1]})
                else:
                    ctx.set(net.inject[s].valid, 0)
                accepted = sent < 3 and ctx.get(net.inject[s].ready)
                for t in (d, (d + 1) % n):
                    if ctx.get(net.eject[t].valid):
                        f = ctx.get(net.eject[t].payload)
                        seen.append((t, cycle - t0, f.kind, f.payload))
                await ctx.tick()
                if accepted:
                    t0 = cycle if t0 is None else t0
                    sent += 1
                if len(seen) == 3:
                    break
            got[(s, d)] = seen
        assert not ctx.get(net.error)
    run(net, bench)
    for (s, d), seen in got.items():
        head = net.zero_load_latency(s, d)
        assert seen[0][1] == path_cost(topo, s, d, link_latency=link_latency).head_latency
        assert seen == [(d, head, FlitKind.HEAD, head_payload(d, s, 2)),
                        (d, head + 1, FlitKind.BODY, s), (d, head + 2, FlitKind.TAIL, d)], (s, d)
        assert net.zero_load_latency(s, d, length=3) == head + 2


def _injection_cycles(net, src, dst, flits):
    """Cycles from the first to the last accepted flit of one ``flits``-flit packet injected
    back to back into an empty ``net``, and from its first to its last ejected flit."""
    accepted, ejected = [], []

    async def bench(ctx):
        ctx.set(net.eject[dst].ready, 1)
        for cycle in range(200):
            k = len(accepted)
            if k < flits:
                ctx.set(net.inject[src].valid, 1)
                ctx.set(net.inject[src].payload, {"kind": packet_kind(k, flits), "payload": (
                    head_payload(dst, src, flits - 1) if k == 0 else k)})
            else:
                ctx.set(net.inject[src].valid, 0)
            took = k < flits and ctx.get(net.inject[src].ready)
            if ctx.get(net.eject[dst].valid):
                ejected.append(cycle)
            await ctx.tick()
            if took:
                accepted.append(cycle)
            if len(ejected) == flits:
                break
        assert not ctx.get(net.error)
    run(net, bench)
    assert len(ejected) == flits
    return accepted[-1] - accepted[0], ejected[-1] - ejected[0]


@pytest.mark.parametrize("link_latency", [pytest.param(2, marks=pytest.mark.slow), 4])
def test_full_rate_depth_takes_a_packet_at_a_flit_per_cycle(link_latency):
    """A 25-flit packet from an endpoint over its link into a BiGraph switch and across: with
    ``full_rate_depth`` flits per VC it is taken a flit per cycle, head included (24 cycles
    from first to last flit); with one flit less the injection port stalls waiting for the
    head's credit (its RC and VA cycles), though the packet still leaves contiguous."""
    topo = parse_topology("bigraph:4x4")
    depth = full_rate_depth(link_latency, credit_delay=1)
    assert depth == 4 + 2 * link_latency + 1
    got = {}
    for d in (depth, depth - 1):
        net = RouterNetwork(topo, num_vcs=2, vc_buf_depth=d, flit_width=32,
                            link_latency=link_latency)
        got[d] = _injection_cycles(net, 0, 15, 25)
    assert got[depth] == (24, 24)
    assert got[depth - 1][0] > 24 and got[depth - 1][1] == 24
    assert RouterParams(2, vc_buf_depth=8, credit_delay=3).full_rate_depth(link_latency) == (
        4 + 2 * link_latency + 3)


@pytest.mark.parametrize("spec", ["mesh:4x4", "torus:4x4", "fattree:4x2", "bigraph:4x4"])
def test_timing_model_with_router_numbers_equals_path_cost(spec):
    """golden_model.timing with model_timing's fields predicts the documented RTL latency of a
    lone packet between every two distinct nodes (2 and 5 flits), with 3-cycle links."""
    from golden_model.schedule import AllReduceSchedule, Op, Transfer
    from golden_model.timing import TimingParams, simulate
    from hdl.router.network import model_timing, path_cost
    topo = parse_topology(spec, link_latency=3)
    params = TimingParams(header_flits=1, **model_timing(topo))
    for length in (2, 5):
        elements = 4 * (length - 1)
        for s in topo.nodes:
            for d in topo.nodes:
                if s == d:
                    continue
                sched = AllReduceSchedule("probe", topo, elements, np.array([0, elements]),
                                          [[Transfer(s, d, 0, Op.COPY, topo.route(s, d))]])
                assert simulate(sched, params).cycles == \
                    path_cost(topo, s, d, link_latency=3).latency(length)


def test_ejection_port_alternates_vcs_under_back_pressure():
    """Two VCs each holding two 2-flit packets, and a sink that refuses every head in the cycle
    it is first offered: the packets still leave VC by VC in turn (round-robin), not all of
    the VC that won first (the priority moves when a packet is chosen, not when its head
    goes at once)."""
    from hdl.router.network import EjectionPort
    prm = RouterParams(2, num_vcs=2, vc_buf_depth=8, flit_width=32)
    port = EjectionPort(prm)
    order = []

    async def bench(ctx):
        for vc in (0, 0, 1, 1):        # two packets per VC, VC 0's written first
            for k in range(2):
                ctx.set(port.inp.valid, 1)
                ctx.set(port.inp.flit, {"kind": packet_kind(k, 2), "vc": vc,
                                        "payload": vc if k == 0 else 100 + vc})
                await ctx.tick()
        ctx.set(port.inp.valid, 0)
        offered = False
        for _ in range(40):
            valid = ctx.get(port.eject.valid)
            head = valid and ctx.get(port.eject.payload.kind) == FlitKind.HEAD
            ready = valid and not (head and not offered)   # refuse each head's first cycle
            ctx.set(port.eject.ready, ready)
            offered = head and not ready
            if ready:
                if head:
                    order.append(int(ctx.get(port.eject.payload.payload)))
            await ctx.tick()
        assert not ctx.get(port.overflow)
    run(port, bench)
    assert order == [0, 1, 0, 1]
