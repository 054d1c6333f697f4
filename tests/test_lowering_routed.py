"""``golden_model.lowering.lower(..., routed=True)``: ports, terminals and the any-order check."""

import numpy as np
import pytest

from golden_model.algorithms import build_schedule
from golden_model.errors import ConfigError
from golden_model.lowering import Direction, lower
from golden_model.schedule import AllReduceSchedule, Op, Transfer
from golden_model.topology import parse_topology

ALGORITHMS = ["ring", "ring2d", "dbtree", "halving-doubling", "multitree", "multitree-opt"]


def _schedule(spec, algorithm, elements=4096):
    topo = parse_topology(spec)
    try:
        return build_schedule(algorithm, topo, elements)
    except ConfigError:
        pytest.skip(f"{algorithm} does not run on {spec}")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("spec", ["torus:4x4", "mesh:3x4", "fattree:4x2", "bigraph:4x4"])
def test_rows_follow_routes(spec, algorithm):
    sched = _schedule(spec, algorithm)
    topo = sched.topology
    lw = lower(sched, routed=True)
    p = max(len(topo.neighbors(v)) for v in topo.nodes) if topo.is_direct else 1
    assert lw.routed and lw.num_ports == p
    # Rebuild every engine's rows from the routes, independently of lower().
    sends, recvs = {}, {}
    for step, t in sched.transfers():
        if topo.is_direct:
            sp = topo.neighbors(t.src).index(t.route[0][1])
            rp = topo.neighbors(t.dst).index(t.route[-1][0])
        else:
            sp = rp = 0
        sends.setdefault((t.src, sp), []).append((step, t.chunk, t.dst * p + rp, t.src * p + sp))
        recvs.setdefault((t.dst, rp), []).append((step, t.chunk))
    for prog in lw.programs:
        for port in range(p):
            rows = prog.engines[(Direction.SEND, port)]
            assert [(r.step, r.chunk, r.dest, r.src) for r in rows] == sends.get((prog.node, port), [])
            rows = prog.engines[(Direction.RECV, port)]
            assert [(r.step, r.chunk) for r in rows] == recvs.get((prog.node, port), [])
            assert all(r.dest == r.src == 0 for r in rows)


def test_single_hop_schedules_keep_their_ports():
    """On a torus, a neighbour transfer uses the same ports routed or not."""
    sched = _schedule("torus:4x4", "multitree")
    direct, routed = lower(sched), lower(sched, routed=True)
    for a, b in zip(direct.programs, routed.programs):
        for key, rows in a.engines.items():
            assert [(r.step, r.chunk, r.deps) for r in rows] == \
                   [(r.step, r.chunk, r.deps) for r in b.engines[key]]


def test_multi_hop_needs_routed():
    sched = _schedule("torus:4x4", "dbtree")
    with pytest.raises(ConfigError, match="routed=True"):
        lower(sched)


def _hand_schedule(steps, elements=8):
    topo = parse_topology("ring:4")
    bounds = np.array([0, elements], dtype=np.int64)
    return AllReduceSchedule("hand", topo, elements, bounds,
                             [[Transfer(s, d, 0, Op.REDUCE, topo.route(s, d)) for s, d in step]
                              for step in steps])


def test_unsafe_order_is_refused():
    """Node 1 sends chunk 0 in step 1 counting its step-0 receive from 0; the receive from 2
    in step 1 does not depend on that send, so behind a router it could arrive first and be
    counted: refused. With 2's send made a consequence of 1's (step 2 after 1 -> 2), accepted."""
    with pytest.raises(ConfigError, match=r"node 1 sends chunk 0 in step 1.*from 2 in step 1"):
        lower(_hand_schedule([[(0, 1)], [(1, 2), (2, 1)]]), routed=True)
    lw = lower(_hand_schedule([[(0, 1)], [(1, 2)], [(2, 1)]]), routed=True)
    assert [r.deps for r in lw.programs[2].engines[(Direction.SEND, 0)]] == [1]


def test_routed_message_length_limit():
    limit = 4095       # the hardware's, hdl.router.flit.MAX_PAYLOAD_FLITS
    sched = _hand_schedule([[(0, 1)]], elements=4 * (limit + 1))
    with pytest.raises(ConfigError, match=f"{limit:,} flits"):
        lower(sched, routed=True, max_message_flits=limit)
    lower(sched, routed=True)          # no limit given: none checked
    lower(_hand_schedule([[(0, 1)]], elements=4 * limit), routed=True, max_message_flits=limit)


# --- staged reductions (float types on routers) ---------------------------------------------

def _run_routed_programs(lw, vectors, etype, rng):
    """Run ``lw``'s programs as routed NIs do, independently of the hardware: each send engine
    walks its rows in order, a row going once ``deps`` messages have arrived into its chunk;
    the network delivers the messages in flight in a random order; a loopback port delivers
    its own in order. Returns the (N, D) result."""
    e = lw.elements_per_flit
    bufs = lw.pack(vectors).reshape(len(lw.programs), -1, e).copy()
    counts = [dict() for _ in lw.programs]
    loop = lw.num_ports - 1 if lw.loopback else None
    pos = {(u, key): 0 for u, prog in enumerate(lw.programs) for key in prog.engines}
    network, loops = [], [[] for _ in lw.programs]
    while True:
        for u, prog in enumerate(lw.programs):
            for p in range(lw.num_ports):
                rows = prog.engines[(Direction.SEND, p)]
                while pos[(u, (Direction.SEND, p))] < len(rows):
                    r = rows[pos[(u, (Direction.SEND, p))]]
                    off = r.stage * r.flits
                    src = (r.chunk + r.stage, r.addr + off) if r.unstage else (r.chunk, r.addr)
                    dst = (r.chunk, r.addr) if r.unstage else (r.chunk + r.stage, r.addr + off)
                    if counts[u].get(src[0], 0) < r.deps:
                        break
                    data = bufs[u, src[1]:src[1] + r.flits].copy()
                    if p == loop:
                        loops[u].append((u, r.op, *dst, data))
                    else:
                        network.append((r.dest // lw.terminal_ports, r.op, *dst, data))
                    pos[(u, (Direction.SEND, p))] += 1
        ready = [("net", i) for i in range(len(network))] + \
                [("loop", u) for u in range(len(loops)) if loops[u]]
        if not ready:
            break
        kind, i = ready[rng.integers(len(ready))]
        v, op, chunk, addr, data = network.pop(i) if kind == "net" else loops[i].pop(0)
        if op is Op.COPY:
            bufs[v, addr:addr + len(data)] = data
        else:
            etype.add(bufs[v, addr:addr + len(data)], data)
        counts[v][chunk] = counts[v].get(chunk, 0) + 1
    for u, prog in enumerate(lw.programs):
        for (d, p), rows in prog.engines.items():
            if d is Direction.SEND:
                assert pos[(u, (d, p))] == len(rows), f"node {u} port {p} stalled"
    return lw.unpack(bufs.reshape(len(lw.programs), -1, e))


@pytest.mark.parametrize("spec, algorithm", [
    ("fattree:4x2", "multitree"), ("bigraph:4x4", "halving-doubling"), ("torus:4x4", "dbtree"),
    ("torus:4x4", "multitree")])
def test_staged_reductions_follow_the_schedule_order_whatever_the_arrival_order(spec, algorithm):
    """Staged lowering run with messages delivered in random orders gives the executor's
    float32 bits every time; the unstaged routed lowering does not (so order matters here)."""
    from golden_model.elements import element_type
    from golden_model.executor import execute
    from tb.vectors import random_vectors
    t = element_type("float32")
    sched = _schedule(spec, algorithm, elements=8 * parse_topology(spec).num_nodes + 3)
    vec = random_vectors(sched.num_nodes, sched.num_elements, "float32", seed=11)
    want = t.to_bits(execute(sched, vec, t))
    staged = lower(sched, routed=True, stage_reductions=True)
    plain = lower(sched, routed=True)
    assert staged.loopback and staged.num_ports == plain.num_ports + 1
    rng = np.random.default_rng(5)
    plain_differs = False
    for _ in range(6):
        assert np.array_equal(t.to_bits(_run_routed_programs(staged, vec, t, rng)), want)
        got = t.to_bits(_run_routed_programs(plain, vec, t, rng))
        plain_differs |= not np.array_equal(got, want)
    assert plain_differs


def test_staged_layout_gives_each_contribution_a_slot():
    """Chunk c gets 1 + K_c counters and (1 + K_c) * flits buffer flits, K_c its most REDUCE
    receives at one node when that is at least 2; the staged transfers are exactly those."""
    sched = _schedule("torus:4x4", "multitree", elements=16 * 9)
    lw = lower(sched, routed=True, stage_reductions=True, elements_per_flit=4)
    into = {}
    for i, (_, t) in enumerate(sched.transfers()):
        if t.op is Op.REDUCE:
            into.setdefault((t.dst, t.chunk), []).append(i)
    k = np.zeros(sched.num_chunks, dtype=int)
    for (_, c), idx in into.items():
        if len(idx) >= 2:
            k[c] = max(k[c], len(idx))
    flits = -(-np.diff(sched.bounds) // 4)
    assert lw.num_chunk_ids == int((1 + k).sum())
    assert lw.buffer_flits == int(((1 + k) * flits).sum())
    assert sorted(lw.staged) == sorted(i for idx in into.values() if len(idx) >= 2 for i in idx)
    assert list(lw.chunk_base) == [int(x) for x in np.cumsum(np.r_[0, (1 + k) * flits])[:-1]]
    # each message's extent: read from its chunk, written to its chunk or its j-th slot (j in
    # schedule order among the chunk's REDUCE receives at that node)
    slot = {i: j for idx in into.values() if len(idx) >= 2 for j, i in enumerate(idx, 1)}
    for i, (_, t) in enumerate(sched.transfers()):
        base, f = int(lw.chunk_base[t.chunk]), int(flits[t.chunk])
        assert lw.extents[i] == (base, base + slot.get(i, 0) * f, f)


def test_staged_reductions_have_a_limit_per_chunk():
    sched = _schedule("fattree:4x2", "multitree", elements=64)      # stars: 15 per chunk
    with pytest.raises(ConfigError, match="node 0 receives 15 REDUCE messages into chunk 0.*"
                                          "at most 14"):
        lower(sched, routed=True, stage_reductions=True, max_staged=14)
    assert lower(sched, routed=True, stage_reductions=True, max_staged=15).num_chunk_ids == 256


def test_staged_reductions_need_routers():
    with pytest.raises(ConfigError, match="routed"):
        lower(_schedule("torus:4x4", "ring", elements=64), stage_reductions=True)
