"""The arrival counters in memories (``hdl.arrivals``) against a plain count of the retirements.

Random lanes retire tails into random chunks (keeping the lane contract: a tail is into the
chunk its lane showed the cycle before), random readers change chunks at random times. Checked
every cycle, for every reader: the count is never above the true arrivals (so an engine never
acts early), and it is exact once the reader has kept its chunk for ``load_cycles(R)`` cycles.
Two runs are separated by a ``clear`` sweep, so a count that survives the sweep is caught."""

import numpy as np
import pytest

from hdl.arrivals import ArrivalCounters, load_cycles
from hdl_host import run_testbench


@pytest.mark.parametrize("lanes, readers, chunks", [(1, 1, 1), (2, 4, 5), (4, 8, 16)])
def test_counts_are_a_lower_bound_and_exact_after_the_load(lanes, readers, chunks):
    dut = ArrivalCounters(num_lanes=lanes, num_readers=readers, max_chunks=chunks)
    rng = np.random.default_rng(lanes * 100 + readers)
    latency = load_cycles(readers)

    async def bench(ctx):
        ctx.set(dut.enable, 1)
        cycle = 0
        sweep = 0
        while ctx.get(dut.clearing):
            await ctx.tick()
            sweep += 1
        assert sweep == max(2, chunks)      # the sweep after reset
        for run in range(2):
            true = np.zeros(chunks, dtype=np.int64)
            lane_chunk = [int(rng.integers(chunks)) for _ in range(lanes)]
            lane_age = [0] * lanes          # cycles the lane has shown its chunk
            reader_chunk = [int(rng.integers(chunks)) for _ in range(readers)]
            reader_age = [0] * readers
            exact = 0
            for _ in range(600):
                retires, tailed = [], []
                for i in range(lanes):
                    tail = lane_age[i] >= 1 and rng.random() < 0.4
                    ctx.set(dut.retire[i].valid, int(tail or rng.random() < 0.3))
                    ctx.set(dut.retire[i].payload.last, int(tail))
                    ctx.set(dut.retire[i].payload.chunk, lane_chunk[i])
                    tailed.append(tail)
                    if tail:
                        retires.append(lane_chunk[i])
                for r in range(readers):
                    if rng.random() < 0.05:
                        reader_chunk[r], reader_age[r] = int(rng.integers(chunks)), 0
                    ctx.set(dut.chunk[r], reader_chunk[r])
                for i in range(lanes):
                    ctx.set(dut.lane_chunk[i], lane_chunk[i])
                for r in range(readers):
                    got = ctx.get(dut.count[r])
                    want = int(true[reader_chunk[r]]) % 256
                    assert got <= want, (run, cycle, r, got, want)
                    if reader_age[r] >= latency:
                        assert got == want, (run, cycle, r, reader_age[r], got, want)
                        exact += 1
                await ctx.tick()
                cycle += 1
                for c in retires:
                    true[c] += 1
                for i in range(lanes):      # a new message after a tail, or now and then
                    lane_age[i] += 1
                    if tailed[i] or rng.random() < 0.1:
                        lane_chunk[i], lane_age[i] = int(rng.integers(chunks)), 0
                reader_age = [a + 1 for a in reader_age]
            assert exact > 600 * readers // 2
            for i in range(lanes):
                ctx.set(dut.retire[i].valid, 0)
            ctx.set(dut.clear, 1)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            while ctx.get(dut.clearing):
                await ctx.tick()

    run_testbench(dut, bench)


def test_parameters_out_of_range_are_refused():
    with pytest.raises(ValueError, match="max_chunks must be an integer in 1..4096, not 4097"):
        ArrivalCounters(num_lanes=1, num_readers=1, max_chunks=4097)
    with pytest.raises(ValueError, match="num_readers must be an integer >= 1, not 0"):
        ArrivalCounters(num_lanes=1, num_readers=0, max_chunks=4)
