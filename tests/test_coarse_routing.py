"""COARSE tensor routing and partitioning.

Expected values come from the rules of ``golden_model/coarse/partition.py`` and ``routing.py``
worked out here with integer arithmetic: a copy of s bytes over b GB/s at 1 GHz with 16-byte
flits holds the path for ceil(ceil(s/16)*16/b) cycles after its latency.
"""

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from golden_model.coarse import CoarseConfig, model_tensors, partition, profile_client, \
    routing_table
from golden_model.coarse.partition import shard_bytes
from golden_model.workloads import get_model


def hold(nbytes, gbps):
    return math.ceil(Fraction(-(-nbytes // 16) * 16) / Fraction(gbps))


def test_shard_size_saturates_the_slowest_to_saturate_path():
    # 90% of the bandwidth: s >= 9 * latency * bytes per cycle, in whole 64-byte lines.
    # local: 9 * 1000 cycles * 9 B/cycle = 81000 -> 1266 lines; remote: 9 * 2000 * 16 = 288000.
    assert shard_bytes(CoarseConfig()) == 288_000
    assert shard_bytes(CoarseConfig(devices=1)) == 1266 * 64     # no remote path used
    assert shard_bytes(CoarseConfig(local_latency_us=0, remote_latency_us=0)) == 64
    s, lat, bw = 288_000, 2000, 16
    assert hold(s, bw) / (lat + hold(s, bw)) >= 0.9 > hold(s - 64, bw) / (lat + hold(s - 64, bw))


@settings(max_examples=60, deadline=None)
@given(elements=st.integers(1, 3_000_000), workers=st.sampled_from([4, 8, 12]),
       local=st.sampled_from([1.0, 9.0, 16.0, 25.0]), remote=st.sampled_from([2.0, 9.0, 16.0]))
def test_partition_rules(elements, workers, local, remote):
    cfg = CoarseConfig(workers=workers, devices=4, local_GBps=local, remote_GBps=remote)
    size = shard_bytes(cfg)
    for w in range(workers):
        shards = partition(elements, cfg, w)
        n = len(shards)
        sizes = [s.elements for s in shards]
        # contiguous, equal to within one element, none below the shard size (unless only one)
        assert shards[0].start == 0 and shards[-1].stop == elements
        assert all(a.stop == b.start for a, b in zip(shards, shards[1:]))
        assert max(sizes) - min(sizes) <= 1
        assert n == 1 or min(sizes) * 4 >= size
        assert (n + 1) * (size // 4) > elements        # as many shards as fit
        # every prefix splits local : remote in proportion l : r to within one shard
        share = Fraction(local) / (Fraction(local) + Fraction(remote))
        for k in range(1, n + 1):
            local_k = sum(s.path == "local" for s in shards[:k])
            assert abs(local_k - k * share) < 1
        # local shards to the local device, remote ones spread over the other three
        home = w // (workers // 4)
        assert all((s.device == home) == (s.path == "local") for s in shards)
        counts = [sum(s.device == d for s in shards if s.path == "remote")
                  for d in range(4) if d != home]
        assert max(counts) - min(counts) <= 1
        # neighbouring sync-core groups run their rings in opposite directions
        assert [s.direction for s in shards] == [(-1) ** k for k in range(n)]


def test_shards_per_tensor_are_capped_on_very_slow_paths():
    """At 1 MB/s a shard saturates the path at one line, so VGG-16's fc6 (102,764,544 weights)
    would be 6.4 million shards; the cap keeps them at MAX_SHARDS, each still no smaller than
    the saturating size."""
    from golden_model.coarse.partition import MAX_SHARDS
    cfg = CoarseConfig(local_GBps=0.001, remote_GBps=0.001)
    elements = 102_764_544
    assert elements * 4 // shard_bytes(cfg) > 1000 * MAX_SHARDS
    shards = partition(elements, cfg)
    assert len(shards) == MAX_SHARDS
    assert min(s.elements for s in shards) * 4 >= shard_bytes(cfg)
    assert shards[-1].stop == elements


def test_each_device_gets_one_groups_copies_of_every_shard():
    cfg = CoarseConfig(workers=8, devices=4)
    plans = [partition(3_000_000, cfg, w) for w in range(8)]
    for k in range(len(plans[0])):
        by_device = {}
        for w in range(8):
            by_device.setdefault(plans[w][k].device, []).append(w // 2)
        assert sorted(by_device) == [0, 1, 2, 3]
        assert all(len(set(groups)) == 1 and len(groups) == 2 for groups in by_device.values())


def test_one_device_keeps_everything_local():
    shards = partition(1_000_000, CoarseConfig(workers=4, devices=1))
    assert {s.path for s in shards} == {"local"} and {s.device for s in shards} == {0}


def test_profiling_pass_probes_every_device():
    cfg = CoarseConfig()
    prof = profile_client(cfg, 5)                    # worker 5: local device 2
    assert [p.path for p in prof.probes] == ["remote", "remote", "local", "remote"]
    local, remote = prof.probes[2], prof.probes[0]
    assert local.small_cycles == 1000 + hold(64, 9) == 1008
    assert remote.small_cycles == 2000 + hold(64, 16) == 2004
    assert local.large_cycles == 1000 + hold(2_000_000, 9)
    assert remote.large_cycles == 2000 + 125_000
    assert prof.latency_device == 2 and prof.latency_path == "local"
    assert prof.bandwidth_GBps["remote"] == pytest.approx(16.0)
    assert prof.bandwidth_GBps["local"] == pytest.approx(9.0, rel=1e-5)
    # a faster remote path (lower latency) makes the nearest remote device the latency proxy
    fast_remote = profile_client(CoarseConfig(local_latency_us=3.0, remote_latency_us=0.5), 5)
    assert fast_remote.latency_device == 3 and fast_remote.latency_path == "remote"


def test_routing_table_of_resnet50():
    model = get_model("resnet50")
    cfg = CoarseConfig()
    table = routing_table(cfg, 0, model_tensors(model))
    params = [(i, layer.params) for i, layer in enumerate(model.layers) if layer.params]
    assert [r.layer for r in table] == [i for i, _ in reversed(params)]    # backward order
    for r in table:
        if r.elements * 4 < 2_000_000:
            assert r.proxy == "latency" and len(r.shards) == 1
            assert r.shards[0].device == 0 and r.shards[0].path == "local"
        else:
            assert r.proxy == "bandwidth"
            assert len(r.shards) == max(1, r.elements // (288_000 // 4))
    # sync-core groups are numbered along the table: directions alternate over all shards
    directions = [s.direction for r in table for s in r.shards]
    assert directions == [(-1) ** k for k in range(len(directions))]
    fc = table[0]
    assert fc.name == "fc" and fc.elements == 2048 * 1000 + 1000
    assert (fc.count("local"), fc.count("remote")) == (10, 18)    # floor(28 * 9/25) = 10
    # worker 7's table routes the same shards to devices shifted by its local device (3)
    other = routing_table(cfg, 7, model_tensors(model))
    for a, b in zip(table, other):
        assert [(s.start, s.stop, s.path) for s in a.shards] == \
            [(s.start, s.stop, s.path) for s in b.shards]
        assert [(s.device + 3) % 4 for s in a.shards] == [s.device for s in b.shards]
