"""COARSE's device ring on the NIs (amaranth.sim): the devices' partial sums all-reduced by
``golden_model.coarse.functional.device_ring_schedule`` in both directions on a ``Network`` of
``ring:M``, every device's result bit for bit equal to the golden model's (the executor, and the
documented ring order written out in tests/test_coarse_functional.py) in float32 and int32."""

import numpy as np
import pytest

from golden_model.coarse.functional import device_ring_schedule, group_sum, ring_order
from golden_model.elements import FLOAT32, INT32
from golden_model.topology import parse_topology
from tb.coarse.lines import random_lines

from hdl_host import simulate_allreduce
from test_coarse_functional import reference_ring


@pytest.mark.parametrize("etype", [FLOAT32, INT32], ids=lambda t: t.name)
@pytest.mark.parametrize("devices, direction", [(3, 1), (3, -1), (4, -1)])
def test_device_ring_on_nis_matches_the_golden_model(etype, devices, direction):
    rng = np.random.default_rng(devices * 10 + direction)
    elements = 44                                 # 11 flits of 4: chunks of unequal length
    lines = -(-elements // (512 // etype.bits))
    partials = np.stack([       # each device: the group sum of two clients' copies
        group_sum(etype.from_bits(random_lines(etype, rng, 2 * lines).reshape(2, -1)
                                  [:, :elements]), elements, etype.dtype)
        for _ in range(devices)])
    topo = parse_topology(f"ring:{devices}", link_latency=2)
    schedule = device_ring_schedule(devices, elements, direction, 512 // etype.bits).relabeled(
        range(devices), topology=topo)
    result, expected, cycles, _ = simulate_allreduce(
        topo, schedule, vectors=partials, link_latency=2, dtype=etype.name,
        elems_per_flit=128 // etype.bits)
    bits = etype.to_bits
    assert np.array_equal(bits(result), bits(expected))
    with np.errstate(invalid="ignore", over="ignore"):
        want = reference_ring(partials[ring_order(devices, direction)], 512 // etype.bits)
    if etype.is_float:          # numpy's sums keep NaN payloads; the golden add's NaN is one
        want.view(etype.unsigned)[np.isnan(want)] = etype.canonical_nan
    assert all(np.array_equal(bits(row), bits(want)) for row in result)
    print(f"{etype.name} ring:{devices} direction {direction:+d}: {cycles} cycles")
