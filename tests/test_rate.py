"""The link rate limiter (``hdl.rate``): its open cycles against the rule computed in Python,
for every rate and a few windows, and lint of its Verilog."""

import pytest
from amaranth.sim import Simulator

from hdl.rate import RATE_STEPS, RateLimiter, open_cycles


def _simulate(rate, window, cycles):
    dut = RateLimiter(rate, window)
    seen = []

    clocked = rate < RATE_STEPS        # full rate is a constant: no clock domain

    async def bench(ctx):
        for _ in range(cycles):
            seen.append(bool(ctx.get(dut.open)))
            await (ctx.tick() if clocked else ctx.delay(1e-6))

    sim = Simulator(dut)
    if clocked:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("window", [1, 3, 8])
@pytest.mark.parametrize("rate", range(1, RATE_STEPS + 1))
def test_open_cycles(rate, window):
    cycles = 3 * RATE_STEPS * window
    got = _simulate(rate, window, cycles)
    assert got == open_cycles(rate, window, cycles)
    # exactly rate * window open cycles in every RATE_STEPS * window, in runs of whole windows
    assert sum(got[:RATE_STEPS * window]) == rate * window
    assert all(len(set(got[w * window:(w + 1) * window])) == 1 for w in range(3 * RATE_STEPS))


@pytest.mark.parametrize("rate, window", [(0, 1), (17, 1), (4, 0), (4, 65)])
def test_out_of_range(rate, window):
    with pytest.raises(ValueError, match=r"(link rate|rate window) must be an integer in"):
        RateLimiter(rate, window)
