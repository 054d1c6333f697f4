"""A memory device's proxy queues and sync core (hdl/coarse/sync_core.py) in amaranth.sim:
clients send their tensors in different orders, interleaved line by line, and every tensor is
reduced as soon as its group's copies are in, bit for bit equal to
golden_model.coarse.functional.group_sum (the COARSE scheme of golden_model.coarse.deadlock
completes for any orders); writes the program does not expect set the error and change nothing."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden_model.coarse.deadlock import simulate_queues
from golden_model.elements import FLOAT32, INT32
from hdl.coarse import SyncCore
from hdl.generate import to_verilog
from tb.coarse.lines import line_value
from tb.coarse.scenarios import (CLIENTS, QUEUE_LINES, TENSORS, SyncHost, client_orders,
                                 copies_and_writes, expected_lines, layouts_of)
from tb.toolchain import lint_verilog

def run(etype, writes, rng, extra=(), before=()):
    """Drive a fresh ``SyncCore`` with ``tb.coarse.scenarios.SyncHost``: every tensor
    programmed, then ``before``, ``writes`` and ``extra`` ((client, tensor, row, line)) with
    random gaps and back-pressure; returns ``({tensor: [lines]}, error, order of the tensors'
    first lines)``."""
    dut = SyncCore(etype, CLIENTS, QUEUE_LINES, len(TENSORS))
    host = SyncHost(layouts_of(dut), TENSORS, [*before, *writes, *extra],
                    seed=int(rng.integers(1 << 30)))

    async def bench(ctx):
        while not host.done:
            assert host.cycle < 20 * len(writes) + 500, "the sync core stalled"
            inp = host.drive()
            ctx.set(dut.program.valid, inp["program_valid"])
            ctx.set(dut.program.payload.as_value(), inp["program"])
            ctx.set(dut.write.valid, inp["write_valid"])
            ctx.set(dut.write.payload.as_value(), inp["write"])
            ctx.set(dut.o.ready, inp["o_ready"])
            host.sample(ctx.get(dut.o.valid), ctx.get(dut.o.payload.as_value()),
                        ctx.get(dut.error))
            await ctx.tick()
        ctx.set(dut.write.valid, 0)
        await ctx.tick().repeat(3)
        host.error = ctx.get(dut.error)

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return host.got, host.error, host.order


@pytest.mark.parametrize("etype", [INT32, FLOAT32], ids=lambda t: t.name)
@pytest.mark.parametrize("seed", [1, 2])
def test_tensors_in_different_orders_are_all_reduced_bit_for_bit(etype, seed):
    rng = np.random.default_rng(seed)
    orders = client_orders(rng)
    copies, writes = copies_and_writes(etype, rng, orders)
    got, error, _ = run(etype, writes, rng)
    assert error == 0
    assert set(got) == set(TENSORS)
    for t in TENSORS:
        assert got[t] == expected_lines(etype, copies, t), f"tensor {t}"
    assert got[3] == [0] * TENSORS[3][1]           # no copy: +0 lines
    # the golden deadlock model agrees that these orders complete with a queue per client
    # (the hardware's slot per tensor), and that one shared FIFO of as many entries stalls
    full = [[t for t in o] for o in ([0, 1, 2, 3], [3, 2, 1, 0])]
    assert simulate_queues(full, "coarse").completed
    assert not simulate_queues(full, "naive").completed


def test_a_tensor_is_reduced_as_soon_as_its_copies_are_in():
    """Tensor 1 (one client, one row) is complete after its single write, long before tensor 0:
    its sums come out first although it was programmed second."""
    rng = np.random.default_rng(4)
    orders = [[0, 2], [1, 0], [2, 0]]
    copies, writes = copies_and_writes(FLOAT32, rng, orders)
    writes.sort(key=lambda w: w[1] != 1)           # tensor 1's write first
    _, _, order = run(FLOAT32, writes, rng)
    assert order[0] in (1, 3) and order.index(1) < order.index(0)


@pytest.mark.parametrize("bad", ["client outside the mask", "row past the slot",
                                 "a row counted twice", "tensor no longer armed"])
def test_unexpected_writes_set_the_error_and_change_nothing(bad):
    rng = np.random.default_rng(7)
    copies, writes = copies_and_writes(FLOAT32, rng, client_orders(rng))
    junk = line_value(np.full(16, 0x3F80_0000, np.uint32), FLOAT32)     # 1.0 everywhere
    # while the tensors are armed, before any copy; or after the last one
    before = {"client outside the mask": [(0, 1, 0, junk)],
              "row past the slot": [(0, 0, 5, junk)]}.get(bad, [])
    extra = {"tensor no longer armed": [(1, 1, 0, junk)]}.get(bad, [])
    if bad == "a row counted twice":
        # client 0 sends all of tensor 0 and then one of its rows again, before client 2 has
        # sent any: the extra line finds client 0's count full
        mine = [w for w in writes if w[:2] == (0, 0)]
        writes = [w for w in writes if w[:2] != (0, 0)]
        before = mine + [mine[0]]
    got, error, _ = run(FLOAT32, writes, rng, extra=extra, before=before)
    assert error == 1
    for t in TENSORS:
        assert got[t] == expected_lines(FLOAT32, copies, t), f"tensor {t}"


@pytest.mark.parametrize("kwargs, needle", [
    (dict(clients=0, queue_lines=16, tensors=2), "clients must be an integer in 1..16, not 0"),
    (dict(clients=2, queue_lines=16, tensors=17), "tensors must be an integer in 1..16, not 17"),
    (dict(clients=2, queue_lines=10, tensors=2),
     "queue_lines must be a power of two in 2..1048576, not 10"),
])
def test_bad_parameters(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        SyncCore(FLOAT32, **kwargs)


def test_lint(tmp_path):
    path = tmp_path / "sync_core.v"
    to_verilog(SyncCore(FLOAT32, CLIENTS, QUEUE_LINES, len(TENSORS)), path, name="sync_core")
    lint_verilog(path, "sync_core")
