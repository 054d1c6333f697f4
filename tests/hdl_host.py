"""amaranth.sim host helpers for the hdl tests: load, start, wait for done, read back.

The command words come from ``hdl.host`` (plain Python, shared with the cocotb host players);
this module only drives them through the ``host_cmd`` / ``host_rsp`` streams of a simulated
``Network`` (every node in parallel, with optional random valid gaps and ready back-pressure).
"""

import random

import numpy as np
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from golden_model import executor
from golden_model.lowering import lower
from hdl.config import network_config_for
from hdl.host import flit_elements, load_commands, read_commands
from hdl.network import Network
from hdl.routed_network import RoutedNetwork
from tb.amaranth_host import stream_commands

__all__ = ["run_testbench", "stream_commands", "wait_done", "simulate_allreduce", "StallError"]


def run_testbench(dut, bench, vcd=None):
    """Simulate ``dut`` with the async testbench ``bench`` on a 1 GHz ``sync`` clock (the domain
    exists even for a purely combinational DUT); ``vcd``: a waveform file to write."""
    top = Module()
    top.submodules.dut = dut
    tick = Signal()
    top.d.sync += tick.eq(~tick)
    sim = Simulator(top)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()


class StallError(AssertionError):
    """The network did not finish within the cycle limit."""


async def wait_done(ctx, net, max_cycles):
    """Pulse ``start`` and wait for ``done``; return the ``cycles`` output.

    Raises
    ------
    StallError
        'deadlock or stall at step S on node N' (the unfinished node with the smallest
        ``node_step``) when ``done`` does not come within ``max_cycles`` cycles.
    AssertionError
        If ``error`` is raised (naming the nodes).
    """
    ctx.set(net.start, 1)
    await ctx.tick()
    ctx.set(net.start, 0)
    for _ in range(max_cycles):
        if ctx.get(net.done):
            break
        await ctx.tick()
    else:
        pending = [(ctx.get(net.node_step[u]), u) for u in range(len(net.node_done))
                   if not ctx.get(net.node_done[u])]
        step, node = min(pending)
        raise StallError(f"deadlock or stall at step {step} on node {node} "
                         f"(after {max_cycles} cycles; unfinished nodes "
                         f"{sorted(u for _, u in pending)})")
    if ctx.get(net.error):
        bad = [u for u in range(len(net.node_error)) if ctx.get(net.node_error[u])]
        raise AssertionError(f"error raised by nodes {bad}")
    return ctx.get(net.cycles)


def simulate_allreduce(topology, schedule, *, seed=0, max_cycles=5000, gap=0.0,
                       backpressure=0.0, vcd=None, routed=False, vectors=None, start_at=None,
                       **config_overrides):
    """Run ``schedule`` on a simulated ``Network`` and check it against the golden executor.

    ``routed`` lowers for and builds a ``RoutedNetwork`` (NIs on routers). ``vectors`` (N, D)
    of the configuration's element type replace the default random int32 vectors.
    ``start_at``: pulse ``start`` in this cycle from reset (not before the load is done), for
    runs whose cycles depend on the phase of logic that runs from reset (link rate limiters).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, int, NIConfig)
        Hardware result (N, D) of the vectors' type, executor result, RTL cycles, the
        configuration.
    """
    lowered = lower(schedule, elements_per_flit=config_overrides.get("elems_per_flit", 4),
                    routed=routed)
    config = network_config_for(lowered, **config_overrides)
    rng = np.random.default_rng(seed)
    if vectors is None:
        info = np.iinfo(np.int32)
        vectors = rng.integers(info.min, info.max,
                               size=(schedule.num_nodes, schedule.num_elements),
                               dtype=np.int64, endpoint=True).astype(np.int32)
        # Make wrap-around certain: large values of one sign.
        vectors[:, ::3] = info.max - rng.integers(0, 8, size=vectors[:, ::3].shape)
    packed = lowered.pack(vectors)
    net = (RoutedNetwork if routed else Network)(topology, config)
    loads = [load_commands(config, lowered, u, packed[u]) for u in range(schedule.num_nodes)]
    reads = [read_commands(config, lowered.buffer_flits) for _ in range(schedule.num_nodes)]
    out = {}

    top = Module()      # the network and a count of the cycles from reset
    top.submodules.net = net
    now = Signal(32)
    top.d.sync += now.eq(now + 1)

    async def bench(ctx):
        prng = random.Random(seed)
        await stream_commands(ctx, net, loads, rng=prng, gap=gap, backpressure=backpressure)
        if start_at is not None:
            assert ctx.get(now) <= start_at, f"the load took until cycle {ctx.get(now)}"
            while ctx.get(now) < start_at:
                await ctx.tick()
        out["cycles"] = await wait_done(ctx, net, max_cycles)
        rsps = await stream_commands(ctx, net, reads, rng=prng, gap=gap,
                                     backpressure=backpressure)
        out["flits"] = np.array([[flit_elements(config, w) for w in node] for node in rsps])

    run_testbench(top, bench, vcd)
    result = lowered.unpack(out["flits"])
    expected = executor.execute(schedule, vectors)
    return result, expected, out["cycles"], config
