"""Tests of the three baseline all-reduce algorithms: hierarchical 2D ring (``ring2d``), NCCL's
pipelined double binary tree (``dbtree``) and Rabenseifner's halving-doubling.

Expected values are computed here, independently of the code under test: sums with numpy, step
counts from the closed forms of each algorithm, tree shapes from the pictures in NCCL's
``src/graph/trees.cc`` comments, link traffic from the partner distances on the torus.
"""

import functools
import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden_model.algorithms import build_schedule, dbtree, halving_doubling
from golden_model.errors import ConfigError
from golden_model.executor import execute
from golden_model.schedule import Op
from golden_model.topology import parse_topology

SPECS = ["ring:5", "ring:1", "ring:2", "mesh:2x3", "mesh:3x3", "torus:4x4", "torus:3x5",
         "fattree:2x3", "bigraph:2x4"]
ALGOS = ["ring2d", "dbtree", "halving-doubling"]
GRID = {"ring", "mesh", "torus"}   # families ring2d runs on (ring as 1 x N)


@functools.lru_cache(maxsize=None)
def topo(spec):
    return parse_topology(spec)


def element_counts(n):
    return sorted({1, max(1, n - 1), n + 3, 1000})


def cases():
    for algo in ALGOS:
        for spec in SPECS:
            if algo == "ring2d" and spec.split(":")[0] not in GRID:
                continue
            yield algo, spec


# --------------------------------------------------------------------------------------------
# Results


@pytest.mark.parametrize("algo,spec", list(cases()))
def test_int32_sum_on_every_node(algo, spec):
    t = topo(spec)
    rng = np.random.default_rng(zlib.crc32(f"{algo} {spec}".encode()))
    for d in element_counts(t.num_nodes):
        data = rng.integers(-2**31, 2**31, size=(t.num_nodes, d), dtype=np.int64).astype(np.int32)
        got = execute(build_schedule(algo, t, d), data)
        want = data.sum(axis=0, dtype=np.int32)   # wraps around like the executor
        assert got.dtype == np.int32
        assert (got == want).all(), f"{algo} on {spec}, {d} elements"


@pytest.mark.parametrize("algo,spec", list(cases()))
def test_float32_identical_on_every_node_and_close_to_sum(algo, spec):
    t = topo(spec)
    rng = np.random.default_rng(7)
    for d in element_counts(t.num_nodes):
        # Positive values: no cancellation, so a relative tolerance is meaningful.
        data = rng.uniform(0.5, 1.5, size=(t.num_nodes, d)).astype(np.float32)
        got = execute(build_schedule(algo, t, d), data)
        assert got.dtype == np.float32
        assert (got.view(np.uint32) == got[0].view(np.uint32)).all(), "nodes differ in bits"
        np.testing.assert_allclose(got[0], np.sum(data.astype(np.float64), axis=0), rtol=1e-5)


@settings(max_examples=60, deadline=None)
@given(algo=st.sampled_from(["dbtree", "halving-doubling"]), n=st.integers(1, 40),
       d=st.integers(1, 90), seed=st.integers(0, 2**32 - 1))
def test_any_node_count(algo, n, d, seed):
    """dbtree and halving-doubling on rings of every size 1..40 (odd, even, powers of two)."""
    t = topo(f"ring:{n}")
    data = np.random.default_rng(seed).integers(-1000, 1000, size=(n, d)).astype(np.int32)
    assert (execute(build_schedule(algo, t, d), data) == data.sum(axis=0, dtype=np.int32)).all()


# --------------------------------------------------------------------------------------------
# ring2d


def grid_of(spec):
    family, dims = spec.split(":")
    return (1, int(dims)) if family == "ring" else tuple(int(x) for x in dims.split("x"))


@pytest.mark.parametrize("spec", [s for s in SPECS if s.split(":")[0] in GRID]
                         + ["torus:8x8", "mesh:1x4", "mesh:4x1", "torus:2x2", "torus:2x5"])
def test_ring2d_steps_chunks_and_links(spec):
    t = topo(spec)
    rows, cols = grid_of(spec)
    for d in element_counts(t.num_nodes):
        s = build_schedule("ring2d", t, d)
        assert len(s.active_steps) == len(s.steps) == 2 * (cols - 1) + 2 * (rows - 1)
        assert s.num_chunks == rows * cols
        assert s.meta["rows"] == rows and s.meta["cols"] == cols
        for i, step in enumerate(s.steps):
            row_phase = i < cols - 1 or i >= len(s.steps) - (cols - 1)
            owner = {}
            for tr in step:
                (r0, c0), (r1, c1) = t.coords(tr.src), t.coords(tr.dst)
                # Row phases stay in a row, column phases in a column.
                assert (r0 == r1) if row_phase else (c0 == c1)
                assert tr.op is (Op.REDUCE if i < len(s.steps) // 2 else Op.COPY)
                for link in tr.route:
                    # Each directed link carries one message (one src->dst pair) per step.
                    assert owner.setdefault(link, (tr.src, tr.dst)) == (tr.src, tr.dst)
        # One transfer per ring hop (hence per link) when there is only one row or column.
        assert s.contention_free == (rows == 1 or cols == 1)


def test_ring2d_on_a_ring_is_the_ring_algorithm():
    t = topo("ring:5")
    s = build_schedule("ring2d", t, 10)
    assert len(s.steps) == 2 * (5 - 1) and s.num_chunks == 5
    assert all(len(step) == 5 for step in s.steps)


def test_ring2d_torus_rings_use_wrap_links():
    """On torus:4x4 every ring hop is one link (the closing hop takes the wrap-around link)."""
    s = build_schedule("ring2d", topo("torus:4x4"), 64)
    assert all(len(tr.route) == 1 for _, tr in s.transfers())


@pytest.mark.parametrize("algorithm,spec", [("ring2d", "mesh:3x3"), ("ring2d", "mesh:2x3"),
                                            ("ring2d", "mesh:4x5"), ("ring", "mesh:3x3"),
                                            ("ring", "mesh:1x5"), ("ring", "mesh:5x7")])
def test_mesh_lines_use_neighbour_transfers_only(algorithm, spec):
    """A mesh line has no closing link: the line all-reduce keeps every transfer on one link,
    the ring's 2(k-1) steps per line, and at most one transfer per link direction per step."""
    t = topo(spec)
    s = build_schedule(algorithm, t, 3 * t.num_nodes + 1)
    assert all(len(tr.route) == 1 for _, tr in s.transfers())
    rows, cols = t.dims
    expect = 2 * (t.num_nodes - 1) if algorithm == "ring" else 2 * (cols - 1) + 2 * (rows - 1)
    assert len(s.active_steps) == expect
    if algorithm == "ring":
        for step in s.steps:
            links = [tr.route[0] for tr in step]
            assert len(links) == len(set(links))


@pytest.mark.parametrize("spec", ["fattree:2x3", "bigraph:2x4"])
def test_ring2d_rejects_switched_topologies(spec):
    with pytest.raises(ConfigError, match=rf"{spec}.*mesh.*torus"):
        build_schedule("ring2d", topo(spec), 16)


# --------------------------------------------------------------------------------------------
# dbtree: trees


def children_of(parents):
    kids = [[] for _ in parents]
    for r, p in enumerate(parents):
        if p >= 0:
            kids[p].append(r)
    return kids


def height_of(parents):
    """Height of the root, by breadth-first levels from the root (written for the test)."""
    kids = children_of(parents)
    level, height = [parents.index(-1)], -1
    while level:
        level, height = [c for r in level for c in kids[r]], height + 1
    return height


# From the pictures in NCCL src/graph/trees.cc: ncclGetBtree on 14 ranks, the mirrored second
# tree on 12 ranks, the shifted second tree on 13 ranks.
NCCL_PICTURES = {
    (14, 0): {0: [8], 8: [4, 12], 4: [2, 6], 2: [1, 3], 6: [5, 7], 12: [10, 13], 10: [9, 11]},
    (12, 1): {11: [3], 3: [1, 7], 1: [0, 2], 7: [5, 9], 5: [4, 6], 9: [8, 10]},
    (13, 0): {0: [8], 8: [4, 12], 4: [2, 6], 2: [1, 3], 6: [5, 7], 12: [10], 10: [9, 11]},
    (13, 1): {1: [9], 9: [5, 0], 5: [3, 7], 3: [2, 4], 7: [6, 8], 0: [11], 11: [10, 12]},
}


@pytest.mark.parametrize("n,tree", sorted(NCCL_PICTURES))
def test_dbtree_matches_nccl_pictures(n, tree):
    kids = children_of(dbtree.dtree(n)[tree])
    want = NCCL_PICTURES[(n, tree)]
    got = {r: sorted(k) for r, k in enumerate(kids) if k}
    assert got == {r: sorted(k) for r, k in want.items()}


@pytest.mark.parametrize("n", range(1, 70))
def test_dbtree_structure(n):
    trees = dbtree.dtree(n)
    roots = [0, n - 1 if n % 2 == 0 else 1 % n]
    interior = []
    for t, parents in enumerate(trees):
        kids = children_of(parents)
        assert [r for r, p in enumerate(parents) if p < 0] == [roots[t]]
        assert all(len(k) <= 2 for k in kids)
        assert len(kids[roots[t]]) == min(1, n - 1), "NCCL roots have a single child"
        # A spanning tree: every rank reaches the root.
        for r in range(n):
            seen = set()
            while parents[r] >= 0:
                assert r not in seen
                seen.add(r)
                r = parents[r]
            assert r == roots[t]
        if t == 0:
            # The parent rule and the child rule of ncclGetBtree agree.
            for r in range(n):
                assert sorted(dbtree.btree_children(n, r)) == sorted(kids[r])
                assert not kids[r] if r % 2 else True, "odd ranks are leaves"
        interior.append({r for r in range(n) if kids[r]})
    if n >= 2 and n % 2 == 0:
        # Every rank is a leaf in one tree and interior in the other.
        assert interior[0].isdisjoint(interior[1])
        assert interior[0] | interior[1] == set(range(n))
    elif n >= 3:
        # Shifted trees: every rank is interior somewhere; only rank 0 is interior in both.
        assert interior[0] & interior[1] == {0}
        assert interior[0] | interior[1] == set(range(n))
    assert height_of(trees[0]) == height_of(trees[1])


# --------------------------------------------------------------------------------------------
# dbtree: schedule


def expected_dbtree_steps(n, d, k):
    """K' + 2H - 1: K' pipeline chunks carrying data (chunk 2k + t, the first min(d, 2K) chunks
    are non-empty), H the tree height (reduce up, broadcast down, one step overlapping)."""
    if n == 1:
        return 0
    k_live = math.ceil(min(d, 2 * k) / 2)
    return k_live + 2 * height_of(dbtree.dtree(n)[0]) - 1


@pytest.mark.parametrize("spec", SPECS + ["torus:8x8"])
def test_dbtree_steps(spec):
    t = topo(spec)
    n = t.num_nodes
    for d in element_counts(n):
        s = build_schedule("dbtree", t, d)
        assert s.meta["pipeline_chunks"] == 1   # d * 4 bytes < 512 KiB
        assert len(s.active_steps) == expected_dbtree_steps(n, d, 1)
    for d, k in [(1000, 4), (5, 8), (64, 64)]:
        s = dbtree.build(t, d, pipeline_chunks=k)
        assert s.num_chunks == 2 * k and s.meta["pipeline_chunks"] == k
        assert len(s.active_steps) == expected_dbtree_steps(n, d, k)
        data = np.arange(n * d, dtype=np.int32).reshape(n, d)
        assert (execute(s, data) == data.sum(axis=0, dtype=np.int32)).all()


@pytest.mark.parametrize("spec", ["torus:4x4", "ring:5", "bigraph:2x4"])
def test_dbtree_transfers_follow_tree_edges(spec):
    t = topo(spec)
    n = t.num_nodes
    order = t.ring_order()
    rank = {v: i for i, v in enumerate(order)}
    trees = dbtree.dtree(n)
    s = dbtree.build(t, 40, pipeline_chunks=3)
    for _, tr in s.transfers():
        parents = trees[tr.flow]
        assert tr.chunk % 2 == tr.flow, "chunk 2k + t belongs to tree t"
        if tr.op is Op.REDUCE:
            assert parents[rank[tr.src]] == rank[tr.dst]
        else:
            assert parents[rank[tr.dst]] == rank[tr.src]
        assert tr.route == t.route(tr.src, tr.dst)
    assert not s.contention_free


def test_dbtree_default_pipeline_rule():
    per_chunk = 512 * 1024 // 4   # elements in 512 KiB of int32
    assert dbtree.default_pipeline_chunks(1) == 1
    assert dbtree.default_pipeline_chunks(2 * per_chunk - 1) == 1
    assert dbtree.default_pipeline_chunks(5 * per_chunk) == 5
    assert dbtree.default_pipeline_chunks(1 << 30) == 64
    s = build_schedule("dbtree", topo("ring:2"), 3 * per_chunk)
    assert s.meta["pipeline_chunks"] == 3 and s.num_chunks == 6
    assert len(s.active_steps) == 3 + 2 * 1 - 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4"])
def test_dbtree_rejects_bad_pipeline_chunks(bad):
    with pytest.raises(ConfigError, match="pipeline_chunks"):
        dbtree.build(topo("ring:4"), 16, pipeline_chunks=bad)


# --------------------------------------------------------------------------------------------
# halving-doubling


@pytest.mark.parametrize("spec", SPECS + ["ring:3", "ring:6", "ring:7", "torus:8x8"])
def test_halving_doubling_steps(spec):
    t = topo(spec)
    n = t.num_nodes
    p2 = 1 << (n.bit_length() - 1)
    extra = 0 if n == p2 else 2
    for d in element_counts(n):
        s = build_schedule("halving-doubling", t, d)
        assert s.num_chunks == p2
        assert len(s.active_steps) == len(s.steps) == 2 * int(math.log2(p2)) + extra


@pytest.mark.parametrize("spec", ["ring:3", "ring:5", "ring:6", "ring:7", "mesh:3x3", "torus:3x5"])
def test_halving_doubling_mpich_pairing(spec):
    """N - p' pairs: even sends everything (REDUCE) to odd first, odd returns it (COPY) last."""
    t = topo(spec)
    n = t.num_nodes
    p2 = 1 << (n.bit_length() - 1)
    s = build_schedule("halving-doubling", t, 4 * p2)
    sigma = s.meta["node_order"]
    pairs = {(sigma[2 * i], sigma[2 * i + 1]) for i in range(n - p2)}
    first, last = s.steps[0], s.steps[-1]
    assert {(tr.src, tr.dst) for tr in first} == pairs
    assert {(tr.dst, tr.src) for tr in last} == pairs
    assert all(tr.op is Op.REDUCE for tr in first) and all(tr.op is Op.COPY for tr in last)
    assert len(first) == len(last) == (n - p2) * p2   # the whole vector, one chunk a transfer
    dropped = {a for a, _ in pairs}
    middle = [tr for step in s.steps[1:-1] for tr in step]
    assert not {v for tr in middle for v in (tr.src, tr.dst)} & dropped


def test_halving_doubling_data_halves_then_doubles():
    s = build_schedule("halving-doubling", topo("torus:4x4"), 16 * 5)
    per_node = [len(step) // 16 for step in s.steps]   # chunks each node sends
    assert per_node == [8, 4, 2, 1, 1, 2, 4, 8]
    assert [step[0].op for step in s.steps] == [Op.REDUCE] * 4 + [Op.COPY] * 4


def link_traffic(schedule):
    """Elements times links crossed, summed over the schedule, in units of the vector length."""
    return sum(schedule.chunk_elements(tr.chunk) * len(tr.route)
               for _, tr in schedule.transfers()) / schedule.num_elements


def test_halving_doubling_rank_mapping_keeps_partners_close():
    """torus:8x8, 64 chunks. Halving step i sends 1/2^(i+1) of the vector per node to the
    partner; doubling mirrors it. Z-order: partners 1, 1, 2, 2, 4, 4 hops away (row, column
    alternately); row-major node ids: 1, 2, 4 hops in the row, then 1, 2, 4 in the column."""
    t = topo("torus:8x8")
    d = 64 * 3

    def expected(hops):
        return 2 * 64 * sum(h / 2 ** (i + 1) for i, h in enumerate(hops))

    s = build_schedule("halving-doubling", t, d)
    assert link_traffic(s) == pytest.approx(expected([1, 1, 2, 2, 4, 4]))
    row_major = halving_doubling.build(t, d, node_order=range(64))
    assert link_traffic(row_major) == pytest.approx(expected([1, 2, 4, 1, 2, 4]))
    assert link_traffic(s) < link_traffic(halving_doubling.build(t, d, node_order=t.ring_order()))
    # Z-order on a power-of-two torus: the first exchange (half the vector) is between neighbours.
    assert all(len(tr.route) == 1 for tr in s.steps[0])


def test_halving_doubling_rejects_bad_node_order():
    with pytest.raises(ConfigError, match="permutation"):
        halving_doubling.build(topo("ring:4"), 8, node_order=[0, 1, 2, 2])
    with pytest.raises(ConfigError, match="permutation"):
        halving_doubling.build(topo("ring:4"), 8, node_order=["0", 1, 2, 3])
    s = halving_doubling.build(topo("ring:4"), 8, node_order=np.array([3, 2, 1, 0]))
    assert s.meta["node_order"] == [3, 2, 1, 0]


# --------------------------------------------------------------------------------------------
# All three on torus:8x8


def test_step_counts_on_torus_8x8():
    t = topo("torus:8x8")
    assert len(build_schedule("ring2d", t, 4096).active_steps) == 2 * 7 + 2 * 7
    assert len(build_schedule("halving-doubling", t, 4096).active_steps) == 2 * 6
    h = height_of(dbtree.dtree(64)[0])
    assert h == 6   # ranks 0 -> 32 -> 16 -> 8 -> 4 -> 2 -> 1
    assert len(build_schedule("dbtree", t, 4096).active_steps) == 1 + 2 * h - 1
