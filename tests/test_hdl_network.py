"""Whole all-reduces on a simulated ``Network`` (amaranth.sim), checked against the executor,
plus the pipeline latencies that the timing model is matched against."""

import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator

import hdl_host
from allreduce_rtl.plan import hardware_topology
from golden_model import executor
from golden_model.algorithms import build_schedule
from golden_model.lowering import Direction, lower
from golden_model.schedule import AllReduceSchedule, Op, Transfer
from golden_model.timing import TimingParams, simulate
from golden_model.topology import parse_topology
from hdl.config import network_config_for, rotation_slack
from hdl.host import flit_elements, load_commands, read_commands
from hdl.link import built_links
from hdl.network import Network
from hdl.rate import RATE_STEPS

from hdl_host import (StallError, run_testbench, simulate_allreduce, stream_commands,
                      wait_done)

#: The timing model configured like the NI (docs/hardware.md, "Pipeline timing"): with receive
#: buffers at the full-rate depth the RTL takes the model's cycles plus at most the bank
#: rotation's slack (``hdl.config.rotation_slack``).
NI_TIMING = TimingParams(header_flits=1, send_delay=2, retire_delay=1, link_order="schedule")


@pytest.mark.parametrize("flow_control", ["credit", "message"])
@pytest.mark.parametrize("spec, algorithm, elements", [
    ("ring:4", "ring", 64), ("ring:4", "multitree", 40),
    ("mesh:2x3", "ring", 48), ("mesh:2x3", "multitree", 64),
])
def test_allreduce_matches_executor(spec, algorithm, elements, flow_control):
    topo = parse_topology(spec, link_latency=2)
    schedule = build_schedule(algorithm, topo, elements)
    result, expected, cycles, config = simulate_allreduce(
        topo, schedule, link_latency=2, flow_control=flow_control, submessage_flits=2)
    model = simulate(schedule, NI_TIMING).cycles
    print(f"{spec} {algorithm} D={elements} {flow_control}: RTL cycles {cycles}, model {model}")
    assert cycles > 0
    np.testing.assert_array_equal(result, expected)
    assert result.dtype == np.int32
    assert config.rx_buffer_depth == config.full_rate_rx_depth
    assert model <= cycles <= model + rotation_slack(config, lower(schedule))


@pytest.mark.parametrize("flow_control, depth", [("credit", 2), ("message", 2)])
def test_allreduce_with_starved_receive_buffers(flow_control, depth):
    """Receive FIFOs far below the full-rate depth: slower, never wrong, no overflow error."""
    topo = parse_topology("mesh:2x3", link_latency=2)
    schedule = build_schedule("multitree", topo, 48)
    result, expected, cycles, _ = simulate_allreduce(
        topo, schedule, link_latency=2, flow_control=flow_control, submessage_flits=2,
        rx_buffer_depth=depth)
    print(f"starved {flow_control} rx_buffer_depth={depth}: RTL cycles {cycles}")
    np.testing.assert_array_equal(result, expected)
    assert cycles > simulate(schedule, NI_TIMING).cycles


def test_allreduce_with_host_gaps_and_backpressure():
    topo = parse_topology("ring:4")
    schedule = build_schedule("ring", topo, 24)
    result, expected, _, _ = simulate_allreduce(topo, schedule, link_latency=2, seed=3,
                                                gap=0.4, backpressure=0.5)
    np.testing.assert_array_equal(result, expected)


#: The cycles from an NI's ``rx`` port to its logic (its input register, the link's last cycle):
#: the probes below count a flit as in at the NI when the NI sees it.
RX_REGISTER = Network.NI_INPUT_CYCLES


def _run_custom(topo, schedule, config, mutate=None, max_cycles=400, probe=None):
    """Load ``schedule`` (optionally with rows changed by ``mutate(u, direction, port, rows)``),
    run; ``probe(ctx, net, cycle)`` is called every cycle from the NIs' start on (cycle 0:
    ``Network.NI_INPUT_CYCLES`` cycles after the start pulse)."""
    lowered = lower(schedule, elements_per_flit=config.elems_per_flit)
    if mutate:
        for program in lowered.programs:
            for (d, p), rows in program.engines.items():
                rows[:] = mutate(program.node, d, p, rows)
    vectors = np.arange(schedule.num_nodes * schedule.num_elements, dtype=np.int32).reshape(
        schedule.num_nodes, schedule.num_elements)
    packed = lowered.pack(vectors)
    net = Network(topo, config)
    loads = [load_commands(config, lowered, u, packed[u]) for u in topo.nodes]
    out = {}

    async def bench(ctx):
        await stream_commands(ctx, net, loads)
        if probe:
            ctx.set(net.start, 1)
            for _ in range(net.NI_INPUT_CYCLES):  # cycle 0 below: the NIs act on the start
                await ctx.tick()
                ctx.set(net.start, 0)
            for cycle in range(max_cycles):
                probe(ctx, net, cycle)
                if ctx.get(net.done) and cycle > 0:
                    out["cycles"] = ctx.get(net.cycles)
                    out["done_at"] = cycle
                    break
                await ctx.tick()
                ctx.set(net.start, 0)
        else:
            out["cycles"] = await wait_done(ctx, net, max_cycles)

    sim = Simulator(net)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_stall_is_reported_with_step_and_node():
    topo = parse_topology("ring:4")
    schedule = build_schedule("ring", topo, 16)
    config = network_config_for(lower(schedule), link_latency=1)

    def impossible_dependency(node, direction, port, rows):
        if node == 2 and direction is Direction.SEND and rows:
            rows = [dataclasses.replace(rows[-1], deps=99) if i == len(rows) - 1 else r
                    for i, r in enumerate(rows)]
        return rows

    program = lower(schedule).programs[2]
    last_send_step = max(rows[-1].step for (d, _), rows in program.engines.items()
                         if d is Direction.SEND and rows)
    with pytest.raises(StallError, match=rf"deadlock or stall at step {last_send_step} on node 2"):
        _run_custom(topo, schedule, config, mutate=impossible_dependency, max_cycles=300)


def test_head_mismatch_sets_error():
    topo = parse_topology("ring:4")
    schedule = build_schedule("ring", topo, 16)
    config = network_config_for(lower(schedule), link_latency=1)

    def wrong_step(node, direction, port, rows):
        if node == 1 and direction is Direction.RECV and rows:
            rows = [dataclasses.replace(rows[0], step=rows[0].step + 100)] + rows[1:]
        return rows

    with pytest.raises(AssertionError, match=r"error raised by nodes \[1\]"):
        _run_custom(topo, schedule, config, mutate=wrong_step)



def test_back_to_back_runs_with_staggered_starts():
    """Two runs without a reset; in the second, node u starts 20 u cycles late (through
    ``node_start``), far longer than a link's latency, so the late nodes' first flits arrive
    before their start: they wait (the network's run begin arms the NIs) instead of counting as
    flits after the table's end, and the second run all-reduces the first one's result."""
    topo = parse_topology("ring:4", link_latency=1)
    schedule = build_schedule("ring", topo, 32)
    lowered = lower(schedule)
    config = network_config_for(lowered, link_latency=1)
    vectors = np.arange(4 * 32, dtype=np.int32).reshape(4, 32) * 7 - 300
    net = Network(topo, config)
    loads = [load_commands(config, lowered, u, lowered.pack(vectors)[u]) for u in topo.nodes]
    reads = [read_commands(config, lowered.buffer_flits) for _ in topo.nodes]
    out = {}

    async def bench(ctx):
        await stream_commands(ctx, net, loads)
        await wait_done(ctx, net, 2000)
        await ctx.tick().repeat(config.max_chunks + 2)     # the arrival counters' sweep
        for cycle in range(2000):
            for u in topo.nodes:
                ctx.set(net.node_start[u], cycle == 20 * u)
            if cycle > 20 * 3 and ctx.get(net.done):
                break
            await ctx.tick()
        else:
            raise StallError("the second run did not finish")
        out["error"] = [ctx.get(net.node_error[u]) for u in topo.nodes]
        rsps = await stream_commands(ctx, net, reads)
        out["flits"] = np.array([[flit_elements(config, w) for w in node] for node in rsps])

    run_testbench(net, bench)
    assert out["error"] == [0, 0, 0, 0]
    once = executor.execute(schedule, vectors)
    np.testing.assert_array_equal(lowered.unpack(out["flits"]), executor.execute(schedule, once))


# --- pipeline timing -----------------------------------------------------------------------------

def _two_node_schedule(chunks, elements_per_chunk, dependent):
    """ring:2; step 0: both nodes REDUCE every chunk into the other (links busy back to back);
    if ``dependent``, instead 0 -> 1 REDUCE every chunk, then 1 -> 0 COPY each chunk back."""
    topo = parse_topology("ring:2")
    if dependent:
        steps = [[Transfer(0, 1, c, Op.REDUCE, ((0, 1),)) for c in range(chunks)],
                 [Transfer(1, 0, c, Op.COPY, ((1, 0),)) for c in range(chunks)]]
    else:
        steps = [[Transfer(u, 1 - u, c, Op.REDUCE, ((u, 1 - u),))
                  for c in range(chunks) for u in (0, 1)]]
    schedule = AllReduceSchedule.build("custom", topo, chunks * elements_per_chunk, chunks, steps)
    return topo, schedule


@pytest.mark.parametrize("flow_control", ["credit", "message"])
def test_full_rate_and_latencies_back_to_back(flow_control):
    """At rx_buffer_depth = 2L + 2S + K every link carries each message at one flit per cycle;
    between messages (and before the first, whose head reaches the link 2 cycles after start at
    the earliest) a send engine waits at most K - 1 cycles for its bank slot; done follows the
    last tail into the receiver by 2 cycles (its write is then in the RMW write stage) plus at
    most K - 1 the lane waited for its slot."""
    latency, sub, chunks, flits = 3, 4, 5, 7     # messages of 8 flits = 2 whole sub-messages
    topo, schedule = _two_node_schedule(chunks, flits * 4, dependent=False)
    config = network_config_for(lower(schedule), link_latency=latency, submessage_flits=sub,
                                flow_control=flow_control)
    k = config.buffer_banks
    assert config.rx_buffer_depth == 2 * latency + 2 * sub + k
    tx, rx = {0: [], 1: []}, {0: [], 1: []}

    def probe(ctx, net, cycle):
        for u in (0, 1):
            if ctx.get(net.nodes[u].tx[0].valid):
                tx[u].append(cycle)
            if ctx.get(net.nodes[u].rx[0].valid):
                rx[u].append(cycle + RX_REGISTER)

    out = _run_custom(topo, schedule, config, probe=probe)
    total = chunks * (flits + 1)
    for u in (0, 1):
        assert len(tx[u]) == total
        messages = [tx[u][i:i + flits + 1] for i in range(0, total, flits + 1)]
        for msg in messages:
            assert msg == list(range(msg[0], msg[0] + flits + 1)), f"node {u}: a gap in {msg}"
        starts = [2] + [msg[-1] + 1 for msg in messages[:-1]]
        waits = [msg[0] - start for msg, start in zip(messages, starts)]
        assert all(0 <= w <= k - 1 for w in waits), waits
        assert rx[u] == [t + latency for t in tx[u]]
    last = max(rx[0][-1], rx[1][-1])
    assert last + 2 <= out["done_at"] <= last + 2 + k - 1
    assert out["cycles"] == out["done_at"]
    print(f"{flow_control}: {total} flits per link in {out['cycles']} cycles")


def test_dependent_hop_latency():
    """The tail of a message into (node, chunk) on the receiver's link input in cycle t lets a
    send that depends on it put its head on the link in cycle t + 4, plus at most K - 1 cycles
    the lane and K - 1 the send engine wait for their bank slots."""
    latency, chunks, flits = 2, 3, 5
    topo, schedule = _two_node_schedule(chunks, flits * 4, dependent=True)
    config = network_config_for(lower(schedule), link_latency=latency, flow_control="credit")
    rx1, tx1 = [], []

    def probe(ctx, net, cycle):
        if ctx.get(net.nodes[1].rx[0].valid):
            rx1.append(cycle + RX_REGISTER)
        if ctx.get(net.nodes[1].tx[0].valid):
            tx1.append(cycle)

    _run_custom(topo, schedule, config, probe=probe)
    tails_in = [rx1[(c + 1) * (flits + 1) - 1] for c in range(chunks)]
    heads_out = [tx1[c * (flits + 1)] for c in range(chunks)]
    k = config.buffer_banks
    # chunk 0 waits for its arrival; later chunks arrive while earlier ones are still going out.
    assert tails_in[0] + 4 <= heads_out[0] <= tails_in[0] + 4 + 2 * (k - 1)
    assert all(h >= t + 4 for h, t in zip(heads_out, tails_in))
    for c in range(chunks):         # each COPY message at full rate, at most K - 1 between them
        msg = tx1[c * (flits + 1):(c + 1) * (flits + 1)]
        assert msg == list(range(msg[0], msg[0] + flits + 1))
        if c:
            assert msg[0] - tx1[c * (flits + 1) - 1] - 1 <= k - 1


@pytest.mark.slow
@pytest.mark.parametrize("flow_control", ["credit", "message"])
@pytest.mark.parametrize("algorithm", ["ring", "multitree"])
def test_allreduce_torus_4x4(algorithm, flow_control):
    """16 NIs with 4 ports each (about 10 s per run in amaranth.sim)."""
    topo = parse_topology("torus:4x4", link_latency=2)
    schedule = build_schedule(algorithm, topo, 128)
    result, expected, cycles, config = simulate_allreduce(
        topo, schedule, link_latency=2, flow_control=flow_control, submessage_flits=2)
    print(f"torus:4x4 {algorithm} {flow_control}: RTL cycles {cycles}")
    np.testing.assert_array_equal(result, expected)
    model = simulate(schedule, NI_TIMING).cycles
    assert model <= cycles <= model + rotation_slack(config, lower(schedule))


class _UnregisteredNetwork(Network):
    """The same network with NIs that act on their inputs in the cycle they arrive and links
    that are their whole latency (what Network was before its NIs registered their inputs)."""
    NI_INPUT_CYCLES = 0


@pytest.mark.parametrize("latency, rate", [(1, 16), (3, 16), (5, 6)])
def test_registered_inputs_keep_every_cycle(latency, rate, monkeypatch):
    """An NI's input register is the last cycle of its links and of its start: a network whose
    NIs register their inputs has every result and cycle count of one whose NIs do not (links
    of one, three and five cycles; a rate-limited wrap link)."""
    topo = parse_topology("ring:4")
    schedule = build_schedule("multitree", topo, 4 * 4 * 7 + 3)
    if rate < RATE_STEPS:       # every link `latency` cycles, the wrap link rate-limited
        topo = hardware_topology(topo, network_config_for(lower(schedule), link_latency=latency))
        for u, v in ((0, 3), (3, 0)):
            topo.graph.edges[u, v]["rate"] = rate
        assert built_links(topo, latency)[(0, 3)] == (latency, rate)
    runs = {}
    for cls in (Network, _UnregisteredNetwork):
        monkeypatch.setattr(hdl_host, "Network", cls)
        result, expected, cycles, _ = simulate_allreduce(topo, schedule, link_latency=latency,
                                                         start_at=400)
        assert np.array_equal(result, expected)
        runs[cls] = cycles
    assert runs[Network] == runs[_UnregisteredNetwork]


def test_link_of_zero_cycles_is_refused():
    """A link between NIs with registered inputs is at least their register's cycle."""
    topo = parse_topology("ring:4")
    config = network_config_for(lower(build_schedule("ring", topo, 16)), link_latency=0)
    with pytest.raises(ValueError, match=r"link latency must be an integer in 1\.\.0, not 0"):
        Network(topo, config)
