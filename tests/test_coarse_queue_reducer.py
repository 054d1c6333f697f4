"""A memory device's client queues and client-order sequencer (hdl/coarse/queue_reducer.py) in
amaranth.sim: copies written in random order, shards of every length and client mask, each
partial sum bit for bit against golden_model.coarse.functional.group_sum; the sequencer's one
line per cycle; bad parameters; lint."""

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Signal, Value
from amaranth.sim import Simulator

from golden_model.coarse.functional import group_sum
from golden_model.elements import BFLOAT16, FLOAT32, INT32
from hdl.coarse.queue_reducer import QueueReducer
from tb.coarse.lines import line_value, random_lines
from tb.toolchain import lint_verilog

def run(dut, shards, etype, rng, gaps=True, ready_pct=100, base=0):
    """Write each shard's copies in random order from queue row ``base`` on (modulo the
    queue's length), start it, collect its sums; returns the sums per shard and the cycles
    from each start to its last sum."""
    results, spans = [], []

    async def bench(ctx):
        for copies, mask in shards:
            clients, rows, _ = copies.shape
            order = [(c, r) for c in range(clients) for r in range(rows)]
            rng.shuffle(order)
            for c, r in order:
                while gaps and rng.random() < 0.3:
                    await ctx.tick()
                ctx.set(dut.write.valid, 1)
                ctx.set(dut.write.payload.client, c)
                ctx.set(dut.write.payload.row, (base + r) % dut.queue_lines)
                ctx.set(dut.write.payload.line, line_value(copies[c, r], etype))
                await ctx.tick()
            ctx.set(dut.write.valid, 0)
            ctx.set(dut.start.valid, 1)
            ctx.set(dut.start.payload.base, base)
            ctx.set(dut.start.payload.last_row, rows - 1)
            ctx.set(dut.start.payload.mask, mask)
            assert ctx.get(dut.start.ready)
            await ctx.tick()
            ctx.set(dut.start.valid, 0)
            got, cycles = [], 0
            while ctx.get(dut.busy):
                cycles += 1
                assert cycles < 50 * rows + 100
                ready = int(rng.integers(100) < ready_pct)
                ctx.set(dut.o.ready, ready)
                if ctx.get(dut.o.valid) and ready:
                    got.append(ctx.get(dut.o.payload))
                await ctx.tick()
            results.append(got)
            spans.append(cycles)

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return results, spans


def expected(copies, mask, etype):
    clients, rows, lanes = copies.shape
    chosen = [c for c in range(clients) if mask >> c & 1]
    return [line_value(etype.to_bits(group_sum(etype.from_bits(copies[chosen, r]), lanes,
                                           etype.dtype)), etype) for r in range(rows)]


@pytest.mark.parametrize("etype, base", [(INT32, 0), (FLOAT32, 11), (BFLOAT16, 5)],
                         ids=lambda v: getattr(v, "name", f"base{v}"))
def test_partial_sums_are_the_golden_group_sums(etype, base):
    """From row ``base`` on: shards that wrap around the end of the circular queues too."""
    rng = np.random.default_rng(len(etype.name))
    clients, queue = 4, 16
    dut = QueueReducer(etype, clients, queue)
    masks = [0b1111, 0b0001, 0b1000, 0b0110, 0, 0b1011, 0b0101]
    rows = [16, 1, 2, 5, 3, 7, 4]
    shards = [(random_lines(etype, rng, clients * n).reshape(clients, n, -1), mask)
              for n, mask in zip(rows, masks)]
    results, _ = run(dut, shards, etype, rng, ready_pct=60, base=base)
    for (copies, mask), got in zip(shards, results):
        assert got == expected(copies, mask, etype), f"mask {mask:#06b}, {len(got)} rows"
    assert results[4] == [0] * rows[4]          # no copy: +0 lines


@pytest.mark.parametrize("etype", [INT32, FLOAT32], ids=lambda t: t.name)
def test_one_line_per_cycle_once_started(etype):
    """With the output always ready, a shard of R rows from k clients takes k R cycles plus the
    read and adder latency, and a lone client's shard R cycles plus that."""
    rng = np.random.default_rng(9)
    dut = QueueReducer(etype, 3, 32)
    copies = random_lines(etype, rng, 3 * 32).reshape(3, 32, -1)
    _, spans = run(dut, [(copies, 0b111), (copies, 0b010)], etype, rng, gaps=False)
    latency = dut.reducer.latency
    assert spans[0] <= 3 * 32 + latency + 4
    assert spans[1] <= 32 + latency + 4


@pytest.mark.parametrize("kwargs, needle", [
    (dict(clients=0, queue_lines=16), "clients must be an integer in 1..64, not 0"),
    (dict(clients=65, queue_lines=16), "clients must be an integer in 1..64, not 65"),
    (dict(clients=2, queue_lines=12), "queue_lines must be a power of two in 2..1048576, not 12"),
    (dict(clients=2, queue_lines=1), "queue_lines must be an integer in 2..1048576, not 1"),
    (dict(clients=2, queue_lines=16, slots=0), "slots must be an integer in 1..64, not 0"),
])
def test_bad_parameters(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        QueueReducer(FLOAT32, **kwargs)


@pytest.mark.parametrize("etype", [INT32, FLOAT32], ids=lambda t: t.name)
def test_lint(tmp_path, etype):
    dut = QueueReducer(etype, 3, 16)
    ports = [Value.cast(v) for _, _, v in dut.signature.flatten(dut)]
    path = tmp_path / "queue_reducer.v"
    path.write_text(verilog.convert(dut, name="queue_reducer", emit_src=False,
                                    ports=[p for p in ports if isinstance(p, Signal)]))
    lint_verilog(path, "queue_reducer")


def test_sums_of_negative_zeros_are_the_golden_models():
    """-0 + -0 is -0, -0 + +0 is +0, one client's -0 stays -0, and a device with no copy gives
    +0 (golden_model.coarse.functional.group_sum, IEEE 754-2019 6.3)."""
    neg, pos = np.uint32(0x8000_0000), np.uint32(0)
    copies = np.full((3, 2, 16), neg, np.uint32)
    copies[1, 1] = pos                                    # row 1: -0, +0, -0
    dut = QueueReducer(FLOAT32, 3, 2)
    shards = [(copies, 0b101), (copies, 0b111), (copies, 0b010), (copies, 0)]
    results, _ = run(dut, shards, FLOAT32, np.random.default_rng(1))
    line = {v: line_value(np.full(16, v, np.uint32), FLOAT32) for v in (neg, pos)}
    assert results == [[line[neg], line[neg]], [line[neg], line[pos]], [line[neg], line[pos]],
                       [line[pos], line[pos]]]
    assert results == [expected(c, m, FLOAT32) for c, m in shards]
