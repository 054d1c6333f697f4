"""COARSE timing: the GPU and device rings, the proxy pipeline, dual synchronisation.

Closed forms worked out here from the rules in ``golden_model/coarse/pipeline.py`` and
``dual.py`` (1 GHz, 16-byte flits: a copy of s bytes over b GB/s holds a path for
ceil(ceil(s/16)*16/b) cycles; a ring all-reduce of D bytes over k nodes is 2(k-1) steps of
latency + hold(D/k) when k divides the element count).
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from golden_model.accelerator import Accelerator
from golden_model.coarse import CoarseConfig, DualSync, model_tensors, routing_table
from golden_model.coarse.pipeline import device_ring_cycles, gpu_ring_cycles, proxy_timeline
from golden_model.topology import parse_topology
from golden_model.training import TrainingOptions, train
from golden_model.workloads import Model, get_model
from golden_model.workloads.layers import linear


def hold(nbytes, gbps):
    return math.ceil(Fraction(-(-nbytes // 16) * 16) / Fraction(gbps))


def ring(k, elements, gbps, latency):
    assert elements % k == 0
    return 2 * (k - 1) * (latency + hold(elements // k * 4, gbps))


def test_rings_are_closed_forms():
    cfg = CoarseConfig()
    assert gpu_ring_cycles(cfg, 8000) == ring(8, 8000, 9, 1000) == 14 * (1000 + 445)
    assert device_ring_cycles(cfg, 72_000) == ring(4, 72_000, 16, 2000) == 6 * 6500
    assert device_ring_cycles(CoarseConfig(devices=1), 72_000) == 0


def one_tensor(cfg, elements):
    return routing_table(cfg, 0, [(0, "t", elements)])


def test_latency_route_is_push_ring_pull():
    cfg = CoarseConfig()
    route = one_tensor(cfg, 1000)                 # 4000 B < 2 MB: one shard, local path
    starts, ends = proxy_timeline(cfg, route, [500.0])
    c = 1000 + hold(4000, 9)
    assert starts[0] == 500 and ends[0] == 500 + 2 * c + ring(4, 1000, 16, 2000)


def test_pipeline_over_both_directions_one_device():
    # M = 1: no ring; five equal local shards: pulls trail pushes by one copy, end = (S+1) c.
    cfg = CoarseConfig(workers=2, devices=1, threshold_bytes=1024)
    elements = 5 * (1266 * 64 // 4)
    route = one_tensor(cfg, elements)
    assert len(route[0].shards) == 5
    c = 1000 + hold(1266 * 64, 9)
    assert proxy_timeline(cfg, route, [0])[1][0] == 6 * c


def test_pipeline_one_ring_two_devices():
    # l = r: shards alternate remote, local; with M = 2 one ring serves them all, so
    # end = push + S rings + pull when the ring is the bottleneck (R >= c).
    cfg = CoarseConfig(workers=2, devices=2, local_GBps=16, remote_GBps=16,
                       remote_latency_us=1.0, threshold_bytes=1024)
    route = one_tensor(cfg, 4 * 36_000)               # shard size 9 * 1000 * 16 = 144000 B
    assert [s.path for s in route[0].shards] == ["remote", "local"] * 2
    c, r = 1000 + 9000, ring(2, 36_000, 16, 1000)
    assert r >= c
    assert proxy_timeline(cfg, route, [0])[1][0] == 2 * c + 4 * r


def test_opposite_ring_directions_double_ring_throughput():
    # M = 4: clockwise and counter-clockwise groups use different link directions, so two
    # shards are in the ring at once: end = 2c + (S/2) R.
    cfg = CoarseConfig(workers=4, devices=4, local_GBps=16, remote_GBps=16,
                       remote_latency_us=1.0, threshold_bytes=1024)
    route = one_tensor(cfg, 4 * 36_000)
    assert [s.direction for s in route[0].shards] == [1, -1, 1, -1]
    c, r = 10_000, ring(4, 36_000, 16, 1000)
    assert r >= c
    assert proxy_timeline(cfg, route, [0])[1][0] == 2 * c + 2 * r


def test_dual_sync_never_slower_than_mpi_ring_and_m_equal_l_is_mpi_ring():
    cfg = CoarseConfig()
    for name, batch in (("resnet50", 256), ("ncf", 256), ("alexnet", 32)):
        model = get_model(name)
        opts = TrainingOptions(mini_batch=batch)
        dual = DualSync(model, cfg, opts)
        topo = parse_topology("ring:8", link_bandwidth=9.0, link_latency=1000)
        mpi = train(model, topo, ["ring"], opts)["results"][0]["iteration_ms"] / 1e3
        assert dual.at(len(model.layers)).iteration == mpi
        cands = dual.candidates()
        assert [m for m, _ in cands] == [0] + [i + 1 for i, x in enumerate(model.layers)
                                              if x.params]
        best = dual.best()
        assert best.iteration == min(t for _, t in cands) <= mpi
        assert best.m == min(m for m, t in cands if t == best.iteration)


def test_dual_sync_iteration_closed_form():
    """Two layers, W = 4, M = 1 (no device ring): every iteration(m) by hand."""
    model = Model("toy", "toy", (linear("a", 100, 100), linear("b", 100, 48)), "x", 256, "test")
    cfg = CoarseConfig(workers=4, devices=1)
    dual = DualSync(model, cfg, TrainingOptions())
    times = Accelerator().layer_times(model, 256)
    f, b = times.forward.sum(), times.backward.sum()
    ready_a, ready_b = f + b, f + times.backward[1]          # layer a's backward ends last
    ns = 1e-9
    c_a = 1000 + hold(10100 * 4, 9)                          # latency routes, local path
    c_b = 1000 + hold(4848 * 4, 9)
    # m = 0: b then a through the proxies (same local path: a's push waits for b's push)
    b_push = ready_b + c_b * ns
    b_end = ready_b + 2 * c_b * ns
    a_push = max(ready_a, b_push) + c_a * ns
    a_end = max(a_push, b_end) + c_a * ns
    t0 = max(f + b, a_end, b_end)
    # m = 1: a by GPU ring all-reduce (ring:4, 9 GB/s, 1 us), b through the proxies
    t1 = max(f + b, ready_a + ring(4, 10100, 9, 1000) * ns, b_end)
    # m = 2: one DDP bucket of both layers, ready when a is
    t2 = max(f + b, ready_a + ring(4, 10100 + 4848, 9, 1000) * ns)
    got = dual.candidates()
    assert [m for m, _ in got] == [0, 1, 2]
    assert [t for _, t in got] == pytest.approx([t0, t1, t2], rel=1e-12)
    assert dual.best().m == int(np.argmin([t0, t1, t2]))


def test_no_overlap_starts_everything_after_the_backward_pass():
    model = get_model("ncf")
    cfg = CoarseConfig()
    serial = DualSync(model, cfg, TrainingOptions(overlap=False))
    plan = serial.at(0)
    end_of_backward = serial.profile.forward + serial.profile.backward
    assert plan.proxy_starts.min() == pytest.approx(end_of_backward)
    routes = routing_table(cfg, 0, model_tensors(model))
    assert plan.proxy_routes == routes
