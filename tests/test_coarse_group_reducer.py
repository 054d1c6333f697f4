"""The sync core's client-order reduction (hdl/coarse/group_reducer.py) in amaranth.sim, bit for
bit against the element type's golden add (golden_model.elements) applied in the input's client
order, under random gaps and back-pressure; its one-line-per-cycle rate; its Verilog lint."""

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from golden_model.coarse.functional import group_sum
from golden_model.elements import BFLOAT16, FLOAT32, FLOAT64, INT32
from hdl.coarse import GroupReducer
from tb.coarse.lines import line_value, random_lines
from tb.toolchain import lint_verilog

TYPES = [INT32, FLOAT32, BFLOAT16]


def reference(etype, copies):
    """The golden model's group sum of ``copies`` (bit patterns, in client order)."""
    copies = np.asarray(copies)
    return etype.to_bits(group_sum(etype.from_bits(copies), copies.shape[-1], etype.dtype))


def schedule(rows, slots):
    """The input stream of a sequencer: rows in blocks of ``slots``, within a block each
    client's copies row by row (so a row's copies come in client order)."""
    stream = []
    for b in range(0, len(rows), slots):
        block = rows[b:b + slots]
        for c in range(max(len(r) for r in block)):
            for s, row in enumerate(block):
                if c < len(row):
                    stream.append((b + s, s, int(c == 0), int(c == len(row) - 1), row[c]))
    return stream


def run(dut, stream, rng, valid_pct=100, ready_pct=100):
    got, stalls = [], [0]

    async def bench(ctx):
        k = 0
        cycles = 0
        while k < len(stream) or ctx.get(dut.busy):
            cycles += 1
            assert cycles < 20 * len(stream) + 100
            offer = int(k < len(stream) and rng.integers(100) < valid_pct)
            if offer:
                _, slot, first, last, line = stream[k]
                ctx.set(dut.i.payload.line, line)
                ctx.set(dut.i.payload.slot, slot)
                ctx.set(dut.i.payload.first, first)
                ctx.set(dut.i.payload.last, last)
            ctx.set(dut.i.valid, offer)
            ready = int(rng.integers(100) < ready_pct)
            ctx.set(dut.o.ready, ready)
            if ctx.get(dut.o.valid) and ready:
                got.append(ctx.get(dut.o.payload))
            if offer:
                if ctx.get(dut.i.ready):
                    k += 1
                else:
                    stalls[0] += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return got, stalls[0]


@pytest.mark.parametrize("etype", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("slots, valid_pct, ready_pct", [(4, 100, 100), (3, 70, 60),
                                                         (1, 90, 40)])
def test_sums_in_client_order_bit_for_bit(etype, slots, valid_pct, ready_pct):
    rng = np.random.default_rng(slots * 100 + valid_pct)
    counts = rng.integers(1, 6, size=23)
    lines = random_lines(etype, rng, int(counts.sum()))
    rows, k = [], 0
    for n in counts:
        rows.append(lines[k:k + n])
        k += n
    stream = schedule(rows, slots)
    dut = GroupReducer(etype, slots)
    got, _ = run(dut, [(r, s, f, l, line_value(p, etype)) for r, s, f, l, p in stream], rng,
                 valid_pct, ready_pct)
    order = [r for r, _, _, last, _ in stream if last]        # rows by their last copy
    want = [line_value(reference(etype, rows[r]), etype) for r in order]
    assert len(got) == len(rows)
    assert got == want
    if etype.is_float:        # the special values reached the sums
        sums = np.concatenate([reference(etype, rows[r]) for r in order])
        assert (sums == etype.canonical_nan).any()
        assert (sums == 1 << (etype.bits - 1)).any() or (sums == 0).any()


@pytest.mark.parametrize("etype", TYPES, ids=lambda t: t.name)
def test_one_line_per_cycle_through_latency_plus_one_slots(etype):
    dut = GroupReducer(etype)                    # latency + 1 slots
    assert dut.slots == dut.latency + 1
    rng = np.random.default_rng(3)
    rows = [random_lines(etype, rng, 4) for _ in range(30)]
    stream = [(r, s, f, l, line_value(p, etype)) for r, s, f, l, p in schedule(rows, dut.slots)]
    got, stalls = run(dut, stream, rng)
    assert stalls == 0 and len(got) == len(rows)


def test_a_single_copy_passes_unchanged():
    """One client: the sum is its copy, bit for bit (-0 stays -0, a NaN keeps its payload),
    as the golden model's copy of it is."""
    dut = GroupReducer(FLOAT32, 2)
    pats = np.array([[0x8000_0000, 0x7FA0_0001] + [0xFFC0_1234] * 14], np.uint32)
    got, _ = run(dut, [(0, 0, True, True, line_value(pats[0], FLOAT32))], np.random.default_rng(0))
    assert got == [line_value(pats[0], FLOAT32)]


@pytest.mark.parametrize("args, needle", [
    ((FLOAT64,), "no adder for float64"),
    (("float32",), "element_type must be an ElementType, not 'float32'"),
    ((FLOAT32, 0), "slots must be an integer in 1..64, not 0"),
    ((FLOAT32, 65), "slots must be an integer in 1..64, not 65"),
    ((FLOAT32, True), "slots must be an integer in 1..64, not True"),
])
def test_bad_arguments(args, needle):
    with pytest.raises(ValueError, match=needle):
        GroupReducer(*args)


@pytest.mark.parametrize("etype", TYPES, ids=lambda t: t.name)
def test_lint(tmp_path, etype):
    path = tmp_path / "group_reducer.v"
    path.write_text(verilog.convert(GroupReducer(etype, 4), name="group_reducer",
                                    emit_src=False))
    lint_verilog(path, "group_reducer")
