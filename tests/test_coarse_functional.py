"""COARSE functional model: every worker's reduced gradients, and the line-level reduction.

The float reference evaluates the summation order the model documents, written out here with
numpy: per shard, each device adds its group's copies in worker order; then chunk c of the
shard (M near-equal chunks) is P[c+M-1] + (... + (P[c+1] + P[c])) over ring positions, the ring
being devices 0, 1, .., M-1 (clockwise) or 0, M-1, .., 1 (counter-clockwise).
"""

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from golden_model.coarse import (CoarseConfig, accumulate_lines, accumulate_writes, routing_table,
                                 synchronise, to_lines)
from golden_model.errors import ConfigError

TENSORS = [(3, "big", 50_000), (2, "small", 37), (1, "mid", 1_001), (0, "first", 5)]


def reference_ring(partials, per_line=16):
    """Ring all-reduce summation order over the rows of ``partials`` (ring positions), chunks
    cut at whole lines of ``per_line`` elements (1: the GPU ring's element chunks)."""
    k, n = partials.shape
    out = np.empty(n, dtype=partials.dtype)
    lines = -(-n // per_line)
    bounds = [min(n, per_line * (c * (lines // k) + min(c, lines % k))) for c in range(k + 1)]
    for c in range(k):
        lo, hi = bounds[c], bounds[c + 1]
        acc = partials[c, lo:hi].copy()
        for j in range(1, k):
            acc = partials[(c + j) % k, lo:hi] + acc
        out[lo:hi] = acc
    return out


def reference(cfg, tables, grads):
    m, w_count = cfg.devices, cfg.workers
    out = {}
    for k, route in enumerate(tables[0]):
        g = grads[route.layer]
        want = np.empty(g.shape[1], dtype=g.dtype)
        for j, shard in enumerate(route.shards):
            lo, hi = shard.start, shard.stop
            partials = np.zeros((m, hi - lo), dtype=g.dtype)
            for v in range(m):
                rows = [w for w in range(w_count) if tables[w][k].shards[j].device == v]
                if rows:
                    acc = g[rows[0], lo:hi].copy()
                    for w in rows[1:]:
                        acc = acc + g[w, lo:hi]
                    partials[v] = acc
            order = list(range(m)) if shard.direction > 0 else [0, *range(m - 1, 0, -1)]
            want[lo:hi] = reference_ring(partials[order], 64 // g.dtype.itemsize)
        out[route.layer] = want
    return out


def make(cfg, dtype, seed=0):
    tables = [routing_table(cfg, w, TENSORS) for w in range(cfg.workers)]
    rng = np.random.default_rng(seed)
    if dtype == np.int32:
        grads = {layer: rng.integers(-2**31, 2**31, size=(cfg.workers, n), dtype=np.int32)
                 for layer, _, n in TENSORS}
    else:
        grads = {layer: rng.standard_normal((cfg.workers, n)).astype(dtype)
                 for layer, _, n in TENSORS}
    return tables, grads


# small shards so the big tensor is partitioned: latency 0.05 us -> shards of 7232 bytes
SMALL_SHARDS = dict(local_latency_us=0.05, remote_latency_us=0.05, threshold_bytes=4096)


@pytest.mark.parametrize("cfg", [CoarseConfig(**SMALL_SHARDS),
                                 CoarseConfig(workers=6, devices=3, **SMALL_SHARDS),
                                 CoarseConfig(workers=4, devices=1, **SMALL_SHARDS),
                                 CoarseConfig(workers=3, devices=3, **SMALL_SHARDS)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_results_bit_for_bit(cfg, dtype):
    tables, grads = make(cfg, dtype)
    assert len(tables[0][0].shards) > 1                  # the big tensor was partitioned
    res = synchronise(cfg, tables, grads)
    want = reference(cfg, tables, grads)
    for layer, g in grads.items():
        got = res.gradients[layer]
        assert got.dtype == dtype and got.shape == g.shape
        assert np.array_equal(got, np.broadcast_to(want[layer], g.shape))    # every worker
        np.testing.assert_allclose(got[0], g.sum(axis=0, dtype=np.float64), rtol=1e-4,
                                   atol=1e-4)


def test_a_nan_with_a_payload_becomes_the_canonical_nan_near_memory():
    """The device's group sum uses the element type's add (golden_model.elements): a NaN
    operand gives the canonical quiet NaN 0x7FC00000, not numpy's quieted payload. With one
    device no ring add follows, so the group sum is the result."""
    cfg = CoarseConfig(workers=3, devices=1, **SMALL_SHARDS)
    tables, grads = make(cfg, np.float32, seed=4)
    layer = TENSORS[1][0]
    grads[layer][1].view(np.uint32)[5] = 0xFFA0_0001        # signalling NaN, sign set
    res = synchronise(cfg, tables, grads)
    got = res.gradients[layer].view(np.uint32)
    assert (got[:, 5] == 0x7FC0_0000).all()
    with np.errstate(invalid="ignore"):
        assert (grads[layer].sum(axis=0).view(np.uint32)[5]) != 0x7FC0_0000   # numpy's


def test_int32_is_the_wraparound_sum():
    cfg = CoarseConfig(**SMALL_SHARDS)
    tables, grads = make(cfg, np.int32, seed=1)
    res = synchronise(cfg, tables, grads)
    for layer, g in grads.items():
        exact = (g.astype(np.int64).sum(axis=0) % 2**32).astype(np.uint32).view(np.int32)
        assert np.array_equal(res.gradients[layer], np.broadcast_to(exact, g.shape))


def test_storage_and_caches_hold_the_reduced_shards():
    cfg = CoarseConfig(**SMALL_SHARDS)
    tables, grads = make(cfg, np.float32)
    res = synchronise(cfg, tables, grads)
    for route in tables[0]:
        for shard in route.shards:
            key = (route.layer, shard.start)
            value = res.gradients[route.layer][0, shard.start:shard.stop]
            assert all(np.array_equal(dev[key], value) for dev in res.storage)
            assert all(np.array_equal(cache[key], value) for cache in res.caches)


def test_direct_layers_use_the_gpu_ring():
    cfg = CoarseConfig(**SMALL_SHARDS)
    tables, grads = make(cfg, np.float32)
    res = synchronise(cfg, tables, grads, direct={0, 1})
    for layer in (0, 1):
        assert np.array_equal(res.gradients[layer],
                              np.broadcast_to(reference_ring(grads[layer], 1), grads[layer].shape))
        assert all((layer, 0) not in dev for dev in res.storage)


def test_bad_input():
    cfg = CoarseConfig(**SMALL_SHARDS)
    tables, grads = make(cfg, np.float32)
    with pytest.raises(ConfigError, match="shape"):
        synchronise(cfg, tables, {**grads, 3: grads[3][:, :10]})
    with pytest.raises(ConfigError, match="dtype"):
        synchronise(cfg, tables, {**grads, 3: grads[3].astype(np.float16)})
    with pytest.raises(ConfigError, match="no gradients"):
        synchronise(cfg, tables, {k: v for k, v in grads.items() if k != 2})
    with pytest.raises(ConfigError, match="one routing table per worker"):
        synchronise(cfg, tables[:3], grads)


# --- line-granularity reduction (the memory controller's scoreboard model) -----------------------

def wrap_sum(shards):
    total = np.asarray(shards, dtype=np.int64).sum(axis=0) % 2**32
    return total.astype(np.uint32).view(np.int32)


@settings(max_examples=40, deadline=None)
@given(workers=st.integers(1, 9), n=st.integers(1, 100), seed=st.integers(0, 2**32 - 1))
def test_accumulate_lines_is_the_wraparound_sum(workers, n, seed):
    shards = np.random.default_rng(seed).integers(-2**31, 2**31, size=(workers, n),
                                                  dtype=np.int32)
    lines = accumulate_lines(shards)
    assert lines.shape == (-(-n // 16), 16) and lines.dtype == np.int32
    flat = lines.reshape(-1)
    assert np.array_equal(flat[:n], wrap_sum(shards)) and not flat[n:].any()


def test_accumulate_writes_in_any_order():
    rng = np.random.default_rng(7)
    shards = rng.integers(-2**31, 2**31, size=(4, 40), dtype=np.int32)   # 3 lines, last padded
    base = 0x4000
    writes = [(base + 64 * i, line.astype("<i4").tobytes())
              for row in shards for i, line in enumerate(to_lines(row))]
    random.Random(3).shuffle(writes)
    result = accumulate_writes(writes, 3, base)
    assert all(len(line) == 64 for line in result)
    got = np.frombuffer(b"".join(result), dtype="<i4")
    assert np.array_equal(got[:40], wrap_sum(shards)) and not got[40:].any()
    assert accumulate_writes([], 2) == [bytes(64)] * 2


@pytest.mark.parametrize("writes,num_lines,base,needle", [
    ([(0x20, bytes(64))], 2, 0, "not a line"),
    ([(0x80, bytes(64))], 2, 0, "not a line"),
    ([(0x40, bytes(32))], 2, 0, "carries 32 bytes"),
    ([], 0, 0, "num_lines"),
    ([], 1, 0x10, "aligned"),
])
def test_accumulate_writes_rejects(writes, num_lines, base, needle):
    with pytest.raises(ConfigError, match=needle):
        accumulate_writes(writes, num_lines, base)


def test_lines_reject_non_int32():
    with pytest.raises(ConfigError):
        to_lines(np.zeros(4, dtype=np.float32))
    with pytest.raises(ConfigError):
        accumulate_lines(np.zeros((0, 4), dtype=np.int32))


@pytest.mark.parametrize("devices", [2, 3, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_the_device_ring_schedule_runs_each_direction_in_its_order(devices, dtype):
    """``device_ring_schedule`` gives every device the reference ring sum of the partials in
    ring order (the documented order, written out in ``reference_ring``), over the links of
    its direction only."""
    from golden_model.coarse.functional import device_ring_schedule, ring_order
    from golden_model.executor import execute
    rng = np.random.default_rng(devices)
    partials = (rng.standard_normal((devices, 23)) * 1e3).astype(dtype)
    for direction in (1, -1):
        sched = device_ring_schedule(devices, 23, direction, 4)
        got = execute(sched, partials)
        want = reference_ring(partials[ring_order(devices, direction)], 4)
        assert all(np.array_equal(row, want) for row in got)
        links = {link for _, t in sched.transfers() for link in t.route}
        step = 1 if direction > 0 else -1
        assert links == {(v, (v + step) % devices) for v in range(devices)}


def test_relabeled_rejects_a_mapping_that_is_not_a_permutation():
    from golden_model.coarse.functional import device_ring_schedule
    sched = device_ring_schedule(3, 9, 1, 16)
    with pytest.raises(ValueError, match=r"permutation of 0..2, not \[0, 0, 1\]"):
        sched.relabeled([0, 0, 1])


def test_the_device_ring_cuts_chunks_at_whole_lines():
    """A 5-line shard (70 float32 elements, the last line partial) on 3 devices: chunks of 2, 2
    and 1 lines, that is elements [0, 32), [32, 64), [64, 70); one line on 3 devices leaves two
    chunks empty and their transfers dropped."""
    from golden_model.coarse.functional import device_ring_schedule
    assert device_ring_schedule(3, 70, 1, 16).bounds.tolist() == [0, 32, 64, 70]
    one = device_ring_schedule(3, 10, -1, 16)
    assert one.bounds.tolist() == [0, 10, 10, 10]
    assert {t.chunk for _, t in one.transfers()} == {0}


def test_rechunked_rejects_bounds_that_do_not_cover_the_vector():
    from golden_model.coarse.functional import device_ring_schedule
    sched = device_ring_schedule(3, 9, 1, 16)
    with pytest.raises(ValueError, match=r"4 non-decreasing offsets from 0 to 9, not \[0, 5, 4, 9\]"):
        sched.rechunked([0, 5, 4, 9])
