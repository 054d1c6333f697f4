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
