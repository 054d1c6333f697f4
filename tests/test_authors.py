"""The authors' simulator preset (``golden_model.authors``) and the timing-model features it is
made of: packets with a head flit each, a serial reduction unit per node, per-node lockstep and
the final drain.

The reference figures are the authors' simulator's own totals on torus:4x4, measured outside
this project (docs/authors-simulator.md, "Measured on torus:4x4"); the preset must give their
ring cycle for cycle.
"""

import math

import pytest

from golden_model.algorithms import build_schedule
from golden_model.authors import AGGREGATION, MEASURED_TORUS4X4, authors_params
from golden_model.errors import ConfigError
from golden_model.schedule import Op
from golden_model.timing import ReductionUnit, TimingParams, simulate
from golden_model.topology import parse_topology

from test_timing import LAT, make, topo

@pytest.mark.parametrize("size", sorted(MEASURED_TORUS4X4))
@pytest.mark.parametrize("message_size", [256, 0])
def test_ring_equals_the_authors_simulator(size, message_size):
    params = authors_params(message_size)
    sched = build_schedule("ring", parse_topology("torus:4x4"), size // 4, params)
    assert simulate(sched, params).cycles == MEASURED_TORUS4X4[size]["ring", message_size]


@pytest.mark.parametrize("spec", ["ring:4", "torus:2x4", "torus:4x4"])
@pytest.mark.parametrize("size", [8192, 65536, 3 << 20])
@pytest.mark.parametrize("message_size", [256, 0])
def test_ring_closed_form(spec, size, message_size):
    """Their ring's total (docs/authors-simulator.md): 2(N-1)(F + 161) + (N-1) A + 3N - 4 + 150
    for F flits per chunk (a head flit per 256 bytes or per chunk) and A = 16 ceil(C / 2048)
    cycles of aggregation per C-byte chunk."""
    t = parse_topology(spec)
    n = t.num_nodes
    chunk = size // n
    heads = math.ceil(chunk / 256) if message_size else 1
    f = chunk // 16 + heads
    a = 16 * math.ceil(chunk / 2048)
    want = 2 * (n - 1) * (f + 161) + (n - 1) * a + 3 * n - 4 + 150
    params = authors_params(message_size)
    assert simulate(build_schedule("ring", t, size // 4, params), params).cycles == want


def test_bad_message_size():
    with pytest.raises(ConfigError, match="message size 128 .* 256 or 0"):
        authors_params(128)


# --- the features, one at a time, on hand-made schedules ---------------------------------------

@pytest.mark.parametrize("num_bytes, packet_bytes, header_flits, hold",
                         [(1024, 256, 1, 64 + 4), (1000, 256, 1, 63 + 4), (1024, 0, 1, 64 + 1),
                          (1024, 256, 2, 64 + 8), (100, 256, 1, 7 + 1), (1024, 256, 0, 64)])
def test_a_head_flit_per_packet(num_bytes, packet_bytes, header_flits, hold):
    p = TimingParams(packet_bytes=packet_bytes, header_flits=header_flits)
    assert simulate(make(topo("ring:4"), num_bytes // 4, [[(0, 1, 0)]]), p).cycles == hold + LAT


def test_reduction_unit_adds_one_at_a_time_in_arrival_order():
    """Node 1 gets chunk 0 from 0 (64 flits) and chunk 1 from 2 (128 flits) in step 0, both
    reducing; its unit (4 cycles per 64 bytes, start 2, finish 3) adds chunk 0 first (it arrives
    first), then chunk 1 once the unit is free; node 1's step-1 sends wait for each add."""
    unit = ReductionUnit(block_bytes=64, block_cycles=4, start_delay=2, finish_delay=3)
    p = TimingParams(reduction=unit, link_order="fcfs")
    sched = make(topo("ring:4"), [256, 512], [[(0, 1, 0), (2, 1, 1)], [(1, 2, 0), (1, 0, 1)]],
                 op=Op.REDUCE)
    r = simulate(sched, p)
    arrive0, arrive1 = 64 + LAT, 128 + LAT
    add0_end = arrive0 + 2 + 4 * 1024 // 64
    add1_end = max(arrive1 + 2, add0_end) + 4 * 2048 // 64
    assert list(r.finish[:2]) == [add0_end + 3, add1_end + 3]
    assert list(r.start[2:]) == [add0_end + 3, add1_end + 3]


def test_copies_are_not_reduced():
    p = TimingParams(reduction=ReductionUnit(16, 100))
    assert simulate(make(topo("ring:4"), 256, [[(0, 1, 0)]]), p).cycles == 64 + LAT


def test_drain():
    p = TimingParams(drain_cycles=149)
    assert simulate(make(topo("ring:4"), 256, [[(0, 1, 0)]]), p).cycles == 64 + LAT + 149
    assert simulate(make(topo("ring:4"), 256, []), p).cycles == 0


@pytest.mark.parametrize("buffered", [0, 512, 4096])
def test_node_lockstep(buffered):
    """Node 0 sends chunk 0 (2 KiB, 128 cycles) to 1 in step 0 and chunk 1 to 3 in step 1: with
    lockstep the second waits until the first is handed over, i.e. all but its last
    ``buffered`` bytes have entered the link; without, both start at 0."""
    sched = make(topo("ring:4"), 512, [[(0, 1, 0)], [(0, 3, 1)]])
    r = simulate(sched, TimingParams(node_lockstep=True, send_buffer_bytes=buffered))
    handed = math.ceil(128 * max(0, 2048 - buffered) / 2048)
    assert list(r.start) == [0, handed]
    assert list(simulate(sched, TimingParams()).start) == [0, 0]


def test_aggregation_is_their_npu():
    """16 cycles per 512 float32 values (their npu.py: 16 vaults of 32-wide adders)."""
    assert AGGREGATION.add_cycles(4 * 512) == 16
    assert AGGREGATION.add_cycles(4 * 513) == 32
    assert AGGREGATION.add_cycles(64 << 10) == 16 * 32


@pytest.mark.parametrize("field, value", [("packet_bytes", -1), ("drain_cycles", 1.5),
                                          ("send_buffer_bytes", True), ("reduction", 3)])
def test_bad_values(field, value):
    with pytest.raises(ConfigError, match=field):
        TimingParams(**{field: value})


@pytest.mark.parametrize("kw", [{"block_bytes": 0, "block_cycles": 1},
                                {"block_bytes": 1, "block_cycles": 1, "start_delay": -1}])
def test_bad_reduction_unit(kw):
    with pytest.raises(ConfigError):
        ReductionUnit(**kw)
