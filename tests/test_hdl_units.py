"""Unit tests of the hdl blocks in amaranth.sim: config, table rows, Link, flow control,
ReductionUnit, host table access."""

import random

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import fifo

from golden_model.lowering import Direction, TableRow
from golden_model.schedule import Op as GoldenOp
from hdl.config import NIConfig
from hdl.credit import CreditCounter, CreditReturn
from hdl.flit import Flit, FlitKind, Op
from hdl.host import TARGET_TABLE, host_cmd_word
from hdl.link import Link
from hdl.ni import NetworkInterface
from hdl.ram import RAM
from hdl.reduction import ReductionUnit
from hdl_host import run_testbench as run
from hdl.schedule_table import ScheduleRow, engine_index, pack_row, unpack_row


# --- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("num_ports", 0), ("num_ports", 9), ("num_ports", True), ("dtype", 32), ("dtype", "int7"),
    ("elems_per_flit", 2), ("buffer_depth", 1), ("table_depth", 1), ("buffer_depth", 1 << 21), ("table_depth", 0),
    ("max_chunks", 4097), ("rx_buffer_depth", 1), ("flow_control", "wormhole"),
    ("submessage_flits", 0), ("link_latency", -1), ("link_latency", 1.5), ("link_latency", 1025),
])
def test_config_rejects_bad_values(field, value):
    # every message names the bad value
    with pytest.raises(ValueError, match=repr(value).replace("(", r"\(").replace(")", r"\)")):
        NIConfig(**{field: value})


def test_config_loopback_port_for_float_types_on_routers():
    """A routed NI of a non-associative type has a loopback port (its last port): so it needs
    two ports, and one fewer faces the network."""
    cfg = NIConfig(num_ports=2, dtype="float32", routed=True)
    assert cfg.loopback and cfg.terminal_ports == 1
    for other in (NIConfig(num_ports=2, dtype="int32", routed=True),
                  NIConfig(num_ports=2, dtype="float32")):
        assert not other.loopback and other.terminal_ports == 2
    with pytest.raises(ValueError, match="num_ports >= 2.*not 1"):
        NIConfig(num_ports=1, dtype="bfloat16", elems_per_flit=8, routed=True)


@pytest.mark.parametrize("rx, sub, ports", [(8, 4, 2), (8, 4, 3), (64, 4, 2), (6, 2, 5)])
def test_loopback_fifo_runs_its_link_at_full_rate(rx, sub, ports):
    """The loopback port's receive FIFO: the network ports' depth, or the full-rate depth of
    the 1-cycle loopback link (2 L + 2 S + K, hdl.credit) where that is more."""
    cfg = NIConfig(num_ports=ports, dtype="float32", routed=True, rx_buffer_depth=rx,
                   submessage_flits=sub)
    banks = 1 << (2 * ports - 1).bit_length()
    assert cfg.buffer_banks == banks
    assert cfg.loopback_rx_depth == max(rx, 2 * 1 + 2 * sub + banks)


@pytest.mark.parametrize("latency", [1, 4, 150])
def test_router_buffers_of_staging_nis_hold_a_backlog(latency):
    """Routers under NIs that stage float reductions get VC buffers of the full-rate depth
    (4 + 2 L + credit delay, at least 8) plus 16 flits, rounded up to a power of two; under
    int32 NIs the full-rate depth (hdl.routed_network.router_vc_buf_depth)."""
    from golden_model.topology import parse_topology
    from hdl.routed_network import RoutedNetwork

    full = max(8, 4 + 2 * latency + 1)
    staged = 1
    while staged < full + 16:
        staged *= 2
    topo = parse_topology("bigraph:4x4", link_latency=latency)
    for dtype, want in (("int32", full), ("float32", staged)):
        cfg = NIConfig(num_ports=2, dtype=dtype, routed=True, link_latency=latency,
                       rx_buffer_depth=8, submessage_flits=4)
        assert RoutedNetwork(topo, cfg).router_parameters()["vc_buf_depth"] == want
    cfg = NIConfig(num_ports=2, dtype="float32", routed=True, link_latency=latency,
                   router_vc_buf_depth=11)
    assert RoutedNetwork(topo, cfg).router_parameters()["vc_buf_depth"] == 11


def test_config_message_mode_needs_one_submessage():
    with pytest.raises(ValueError, match="rx_buffer_depth 8"):
        NIConfig(rx_buffer_depth=8, submessage_flits=16)
    cfg = NIConfig(rx_buffer_depth=40, submessage_flits=16, link_latency=4)
    assert cfg.initial_credits == 2 and cfg.full_rate_rx_depth == 2 * 4 + 2 * 16 + 8   # 8 banks
    assert NIConfig(flow_control="credit", rx_buffer_depth=7).initial_credits == 7


# --- schedule table -----------------------------------------------------------------------------

def _random_row(rng):
    return TableRow(step=rng.randrange(1 << 16), op=rng.choice(list(GoldenOp)),
                    flow=rng.randrange(4096), chunk=rng.randrange(4096), addr=rng.randrange(1 << 20),
                    flits=rng.randrange(1, 1 << 20), elements=1, deps=rng.randrange(256),
                    dest=rng.randrange(1024), src=rng.randrange(1024), stage=rng.randrange(64),
                    unstage=rng.random() < 0.5)


def test_pack_row_matches_the_struct_and_round_trips():
    rng = random.Random(1)
    for _ in range(200):
        row = _random_row(rng)
        word = pack_row(row)
        const = ScheduleRow.const({"valid": 1, "step": row.step, "op": Op[row.op.name],
                                   "flow": row.flow, "chunk": row.chunk, "addr": row.addr,
                                   "flits": row.flits, "deps": row.deps, "dest": row.dest,
                                   "src": row.src, "stage": row.stage,
                                   "unstage": int(row.unstage)})
        assert word == const.as_value().value
        fields = unpack_row(word)
        assert fields["valid"] == 1 and fields["op"].name == row.op.name
        for name in ("step", "flow", "chunk", "addr", "flits", "deps", "dest", "src", "stage",
                     "unstage"):
            assert fields[name] == getattr(row, name)
    assert ScheduleRow.as_shape().size == 1 + 16 + 1 + 12 + 12 + 20 + 20 + 8 + 10 + 10 + 6 + 1


def test_pack_row_rejects_fields_that_do_not_fit():
    row = TableRow(step=1 << 16, op=GoldenOp.COPY, flow=0, chunk=0, addr=0, flits=1, elements=1,
                   deps=0)
    with pytest.raises(ValueError, match="step = 65536"):
        pack_row(row)


def test_engine_index():
    assert [engine_index(Direction.SEND, p, 4) for p in range(4)] == [0, 1, 2, 3]
    assert [engine_index(Direction.RECV, p, 4) for p in range(4)] == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="4"):
        engine_index(Direction.SEND, 4, 4)


def test_table_rows_round_trip_through_the_host_port():
    """Rows written with host_cmd (target 1) read back bit for bit on host_rsp."""
    cfg = NIConfig(num_ports=2, buffer_depth=8, table_depth=4, max_chunks=2)
    ni = NetworkInterface(cfg)
    rng = random.Random(2)
    rows = {(e, a): pack_row(_random_row(rng)) for e in range(4) for a in range(4)}
    writes = [host_cmd_word(cfg, write=1, target=TARGET_TABLE, engine=e, addr=a, data=w)
              for (e, a), w in rows.items()]
    reads = [host_cmd_word(cfg, write=0, target=TARGET_TABLE, engine=e, addr=a)
             for (e, a) in rows]
    got = []

    async def bench(ctx):
        cmds = writes + reads
        i = 0
        while len(got) < len(reads):
            ctx.set(ni.host_cmd.valid, int(i < len(cmds) and rng.random() < 0.7))
            if i < len(cmds):
                ctx.set(ni.host_cmd.payload.as_value(), cmds[i])
            ctx.set(ni.host_rsp.ready, int(rng.random() < 0.6))
            take = ctx.get(ni.host_cmd.valid) and ctx.get(ni.host_cmd.ready)
            rsp = ctx.get(ni.host_rsp.valid) and ctx.get(ni.host_rsp.ready)
            data = ctx.get(ni.host_rsp.payload.data)
            await ctx.tick()
            i += bool(take)
            if rsp:
                got.append(data)

    run(ni, bench)
    assert got == list(rows.values())


# --- width-exact operators (hdl.ops) ------------------------------------------------------------

def test_ops_compare_and_select_exhaustively():
    from amaranth.hdl import Cat
    from hdl.ops import eq_const, ge_const, is_zero, lt_const, select_word
    x = Signal(5)
    consts = [0, 1, 5, 13, 16, 17, 31, 32, 33, 40]
    outs = Signal(3 * len(consts) + 1 + 4)
    words = Signal(4 * 3)
    m = Module()
    m.d.comb += outs.eq(Cat(*[eq_const(x, k) for k in consts], *[lt_const(x, k) for k in consts],
                            *[ge_const(x, k) for k in consts], is_zero(x),
                            select_word(words, x, 4, 3)))

    async def bench(ctx):
        ctx.set(words, 0xA5C)
        for v in range(32):
            ctx.set(x, v)
            got = ctx.get(outs)
            n = len(consts)
            for i, k in enumerate(consts):
                assert (got >> i & 1) == (v == k)
                assert (got >> (n + i) & 1) == (v < k)
                assert (got >> (2 * n + i) & 1) == (v >= k)
            assert (got >> (3 * n) & 1) == (v == 0)
            assert got >> (3 * n + 1) == ((0xA5C >> (4 * v)) & 0xF if v < 3 else 0)
            await ctx.tick()

    run(m, bench)


def test_add_narrow_wraps_like_modular_addition():
    from hdl.ops import add_narrow
    x, y = Signal(7), Signal(3)
    out = Signal(7)
    m = Module()
    m.d.comb += out.eq(add_narrow(x, y))

    async def bench(ctx):
        for a in range(128):
            for b in range(8):
                ctx.set(x, a)
                ctx.set(y, b)
                assert ctx.get(out) == (a + b) % 128
        await ctx.tick()

    run(m, bench)


# --- link ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("latency", [0, 1, 2, 3, 4, 7, 150])
def test_link_latency_is_exact(latency):
    cfg = NIConfig(num_ports=1, link_latency=latency)
    link = Link(cfg)
    rng = random.Random(latency)
    cycles = 40
    stim = [(rng.random() < 0.6, rng.randrange(1 << 20), rng.randrange(4), rng.random() < 0.5)
            for _ in range(cycles)]
    seen = []

    async def bench(ctx):
        for valid, payload, kind, credit in stim + [(0, 0, 0, 0)] * (latency + 1):
            ctx.set(link.flit_in.valid, valid)
            ctx.set(link.flit_in.payload.payload, payload)
            ctx.set(link.flit_in.payload.kind, FlitKind(kind))
            ctx.set(link.credit_in, credit)
            seen.append((ctx.get(link.flit_out.valid), ctx.get(link.flit_out.payload.payload),
                         ctx.get(link.flit_out.payload.kind).value, ctx.get(link.credit_out)))
            await ctx.tick()

    run(link, bench)
    for t, (valid, payload, kind, credit) in enumerate(stim):
        out = seen[t + latency]
        assert out[0] == valid and out[3] == credit, f"cycle {t}"
        if valid:
            assert out[1:3] == (payload, kind), f"cycle {t}"
    assert not any(v or c for v, _, _, c in seen[:latency])


@pytest.mark.parametrize("latency", [3, 4, 5, 6])
def test_delay_line_memory_equals_a_register_chain_on_every_window(latency):
    """Exhaustive over the memory delay line's state: its output depends on the last
    ``latency`` inputs and on the pointer's phase (``latency`` values). The de Bruijn sequence of
    order ``latency + 1`` is repeated ``latency + 1`` times (its length, a power of two, and the
    repeat count make every window meet every pointer phase, since 2^(L+1) * j mod L covers
    all phases when shifted by the extra input per repeat), and the output must equal the input
    ``latency`` cycles before, from reset on; before that ``defined`` is 0."""
    from hdl.delay_line import DelayLine
    line = DelayLine(1, latency)
    assert line.uses_memory
    stim = []
    for word in range(2 ** latency):
        for phase in range(latency):
            stim += [0] * ((phase - len(stim) - latency) % latency)
            stim += [(word >> k) & 1 for k in range(latency)]  # this window ends at `phase`
    phases = {}
    got = []

    async def bench(ctx):
        for t, bit in enumerate(stim + [0] * latency):
            ctx.set(line.i, bit)
            got.append((ctx.get(line.o), ctx.get(line.defined)))
            await ctx.tick()

    run(line, bench)
    for t in range(latency, len(stim) + latency):
        assert got[t] == (stim[t - latency], 1), f"cycle {t}"
    for t in range(latency, len(stim) + 1):
        phases.setdefault(tuple(stim[t - latency:t]), set()).add(t % latency)
    assert all(not d for _, d in got[:latency])
    assert len(phases) == 2 ** latency
    assert all(len(p) == latency for p in phases.values()), "a window missed a pointer phase"


# --- flow control -------------------------------------------------------------------------------

class FlowHarness(Elaboratable):
    """Sender (CreditCounter + the send engine's output register) -> Link -> receive FIFO ->
    sink with ``sink_ready`` (CreditReturn on every pop), with the NI's timing."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.offer = Signal()
        self.head = Signal()
        self.kind = Signal(FlitKind)
        self.seq = Signal(16)
        self.sent = Signal()
        self.sink_ready = Signal()
        self.popped = Signal()
        self.pop_seq = Signal(16)
        self.overflow = Signal()
        self.credits = None

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.counter = counter = CreditCounter(cfg)
        m.submodules.link = link = Link(cfg)
        layout = Flit(cfg.flit_width)
        m.submodules.fifo = rx = fifo.SyncFIFO(width=layout.size, depth=cfg.rx_buffer_depth)
        m.submodules.ret = ret = CreditReturn(cfg)
        self.credits = counter.credits
        m.d.comb += [
            counter.head.eq(self.head),
            counter.send.eq(self.offer & counter.ready),
            self.sent.eq(self.offer & counter.ready),
            counter.credit_in.eq(link.credit_out),
        ]
        m.d.sync += [
            link.flit_in.valid.eq(self.sent),
            link.flit_in.payload.kind.eq(self.kind),
            link.flit_in.payload.payload.eq(self.seq),
        ]
        flit = layout(rx.r_stream.payload)
        m.d.comb += [
            rx.w_stream.valid.eq(link.flit_out.valid),
            rx.w_stream.payload.eq(link.flit_out.payload),
            rx.r_stream.ready.eq(self.sink_ready),
            self.popped.eq(rx.r_stream.valid & self.sink_ready),
            self.pop_seq.eq(flit.payload[:16]),
            ret.pop.eq(self.popped),
            ret.kind.eq(flit.kind),
            link.credit_in.eq(ret.credit),
        ]
        with m.If(link.flit_out.valid & ~rx.w_stream.ready):
            m.d.sync += self.overflow.eq(1)
        return m


def _kinds(length):
    """Kinds of a message of ``length`` flits (head + length - 1 payload flits)."""
    return [FlitKind.HEAD] + [FlitKind.BODY] * (length - 2) + [FlitKind.TAIL]


def run_flow(cfg, lengths, ready_prob, seed=0, max_cycles=20000):
    """Offer the messages back to back; return (send cycles, popped sequence, overflow)."""
    dut = FlowHarness(cfg)
    rng = random.Random(seed)
    flits = [(k, i == 0) for n in lengths for i, k in enumerate(_kinds(n))]
    result = {}

    async def bench(ctx):
        pos, cycle, sent_at, popped = 0, 0, [], []
        while len(popped) < len(flits) and cycle < max_cycles:
            if pos < len(flits):
                kind, head = flits[pos]
                ctx.set(dut.offer, 1)
                ctx.set(dut.kind, kind)
                ctx.set(dut.head, head)
                ctx.set(dut.seq, pos)
            else:
                ctx.set(dut.offer, 0)
            ctx.set(dut.sink_ready, int(rng.random() < ready_prob))
            sent = ctx.get(dut.sent)
            if ctx.get(dut.popped):
                popped.append(ctx.get(dut.pop_seq))
            await ctx.tick()
            if sent:
                sent_at.append(cycle)
                pos += 1
            cycle += 1
        ctx.set(dut.offer, 0)
        for _ in range(cfg.link_latency + 2):   # let the last credits come home
            await ctx.tick()
        result.update(sent_at=sent_at, popped=popped, overflow=ctx.get(dut.overflow),
                      credits=ctx.get(dut.credits))

    run(dut, bench)
    assert len(result["popped"]) == len(flits), "flits lost or stuck"
    return result


@pytest.mark.parametrize("mode, depth, sub", [("credit", 2, 4), ("credit", 5, 4),
                                              ("message", 4, 4), ("message", 9, 4),
                                              ("message", 3, 1)])
def test_flow_control_never_overflows_under_backpressure(mode, depth, sub):
    cfg = NIConfig(num_ports=1, flow_control=mode, rx_buffer_depth=depth, submessage_flits=sub,
                   link_latency=2)
    rng = random.Random(depth)
    lengths = [rng.randrange(2, 14) for _ in range(12)]
    res = run_flow(cfg, lengths, ready_prob=0.3, seed=depth)
    assert not res["overflow"]
    assert res["popped"] == list(range(sum(lengths)))
    assert res["credits"] == cfg.initial_credits


@pytest.mark.parametrize("mode, latency, sub", [("credit", 2, 4), ("credit", 5, 16),
                                                ("message", 2, 4), ("message", 3, 4),
                                                ("message", 1, 8)])
def test_flow_control_full_rate_at_the_documented_depth(mode, latency, sub):
    """rx_buffer_depth = 2 * link_latency + 2 * submessage_flits sustains one flit per cycle
    (message mode: messages of whole sub-messages), and all credits come back."""
    cfg = NIConfig(num_ports=1, flow_control=mode, submessage_flits=sub, link_latency=latency,
                   rx_buffer_depth=2 * latency + 2 * sub)
    lengths = [2 * sub] * 6
    res = run_flow(cfg, lengths, ready_prob=1.0)
    sent = res["sent_at"]
    assert sent == list(range(sent[0], sent[0] + len(sent))), "the sender stalled"
    assert not res["overflow"]
    assert res["credits"] == cfg.initial_credits


@pytest.mark.parametrize("mode, depth, latency, sub", [("credit", 5, 2, 1),
                                                       ("message", 8, 3, 4)])
def test_flow_control_rule_is_tight(mode, depth, latency, sub):
    """One credit short of the rule (credit: 2L + 1; message: (R//S - 1) * S < 2L + 1), the
    sender must stall: the credit loop is exactly as long as documented in hdl.credit."""
    cfg = NIConfig(num_ports=1, flow_control=mode, submessage_flits=sub, link_latency=latency,
                   rx_buffer_depth=depth)
    res = run_flow(cfg, [2 * max(sub, 4)] * 4, ready_prob=1.0)
    sent = res["sent_at"]
    assert sent[-1] - sent[0] + 1 > len(sent)
    # ...and with one more credit's worth it runs at full rate.
    cfg2 = NIConfig(num_ports=1, flow_control=mode, submessage_flits=sub, link_latency=latency,
                    rx_buffer_depth=depth + sub)
    sent2 = run_flow(cfg2, [2 * max(sub, 4)] * 4, ready_prob=1.0)["sent_at"]
    assert sent2[-1] - sent2[0] + 1 == len(sent2)


# --- reduction unit -----------------------------------------------------------------------------

class RMWHarness(Elaboratable):
    """ReductionUnit on the BankedBuffer; write client 0 initialises, read client 0 checks."""

    def __init__(self, cfg, depth, adder):
        from hdl.banked_buffer import BankedBuffer
        from hdl.reduction import write_delay
        self.cfg = cfg
        self.red = ReductionUnit(cfg, tag_shape=8, adder=adder)
        self.buf = BankedBuffer(num_ports=cfg.num_ports, depth=depth,
                                flit_width=cfg.flit_width, write_delay=write_delay(adder))

    def elaborate(self, platform):
        from amaranth.lib import wiring
        m = Module()
        m.submodules.red = self.red
        m.submodules.buf = self.buf
        p = self.cfg.num_ports
        for i in range(p):
            wiring.connect(m, self.red.mem_read[i], self.buf.read[p + i])
            wiring.connect(m, self.red.mem_write[i], self.buf.write[p + i])
        return m


@pytest.mark.parametrize("lanes, latency", [(1, 0), (3, 0), (4, 0), (4, 2), (2, 5)])
def test_reduction_unit_on_the_banked_buffer_matches_numpy(lanes, latency):
    """Random read-modify-writes from every lane, each in its bank slot, with a pipelined adder
    of ``latency`` cycles: every flit ends as numpy's sum in read order, every request retires
    exactly ``1 + latency`` cycles after it was issued, and a client never meets another at a
    bank (the rotation). The generator obeys the ordering rule's guarantee: no lane reads a flit
    another lane has in flight."""
    from hdl.adders import IntAdder
    from hdl.config import buffer_banks
    k = buffer_banks(lanes)
    cfg = NIConfig(num_ports=lanes, elems_per_flit=4, buffer_depth=3 * k)
    depth, e, d = 3 * k, cfg.elems_per_flit, 1 + latency
    dut = RMWHarness(cfg, depth, IntAdder(32, latency))
    rng = np.random.default_rng(lanes * 10 + latency)
    init = rng.integers(0, 1 << 32, size=(depth, e), dtype=np.uint64).astype(np.uint32)
    model = init.astype(np.uint64)
    plan, in_flight = [], {}        # in_flight: addr -> cycle its write completes
    for t in range(200):
        reqs = []
        for lane in range(lanes):
            bank = (lane + lanes + t) % k          # the lane's read slot in cycle t
            if rng.random() < 0.2:
                continue
            addr = bank + k * int(rng.integers(0, depth // k))
            if in_flight.get(addr, -1) >= t:
                continue
            op = Op.COPY if rng.random() < 0.15 else Op.REDUCE
            data = rng.integers(0, 1 << 32, size=e, dtype=np.uint64)
            model[addr] = data if op is Op.COPY else model[addr] + data
            in_flight[addr] = t + d
            reqs.append((lane, addr, data, op))
        plan.append(reqs)
    model %= 1 << 32

    def word(vals):
        return sum(int(v) << (32 * k) for k, v in enumerate(vals))

    retired = []

    async def bench(ctx):
        init_port = dut.buf.write[0]
        for t in range(depth + k):          # write each flit when client 0's slot holds it
            bank = (t - d) % k
            a = bank + k * ((t // k) % (depth // k)) if t < depth + k else 0
            ctx.set(init_port.en, 1)
            ctx.set(init_port.addr, a)
            ctx.set(init_port.data, word(init[a]))
            await ctx.tick()
        ctx.set(init_port.en, 0)
        ctx.set(dut.buf.restart, 1)
        await ctx.tick()
        ctx.set(dut.buf.restart, 0)
        for t, reqs in enumerate(plan + [[]] * (d + 1)):
            active = {lane: r for lane, *r in reqs}
            for lane in range(lanes):
                port = dut.red.lanes[lane]
                if lane in active:
                    addr, data, op = active[lane]
                    ctx.set(port.valid, 1)
                    ctx.set(port.payload.addr, addr)
                    ctx.set(port.payload.data.as_value(), word(data))
                    ctx.set(port.payload.op, op)
                    ctx.set(port.payload.tag, (t * 7 + lane) & 0xFF)
                else:
                    ctx.set(port.valid, 0)
                if ctx.get(dut.red.retire[lane].valid):
                    retired.append((t, lane, ctx.get(dut.red.retire[lane].payload)))
            await ctx.tick()
        check = dut.buf.read[0]
        ctx.set(dut.buf.restart, 1)
        await ctx.tick()
        ctx.set(dut.buf.restart, 0)
        for t in range(depth):              # phase is t now: client 0 reads bank t % k
            a = t % k + k * (t // k)
            ctx.set(check.en, 1)
            ctx.set(check.addr, a)
            await ctx.tick()
            got = ctx.get(check.data)
            assert got == word(model[a]), f"address {a}: {got:#x} != {word(model[a]):#x}"

    run(dut, bench)
    expected = [(t + d, lane, (t * 7 + lane) & 0xFF) for t, reqs in enumerate(plan)
                for lane, *_ in sorted(reqs, key=lambda r: r[0])]
    assert sorted(retired) == sorted(expected)


# --- the Verilog RAM module (hdl.ram in to_verilog) against the Memory path ---------------------

def test_verilog_ram_module_matches_amaranth_memory(tmp_path):
    """The behavioural module that ``to_verilog`` uses for every RAM (Icarus) and the
    ``amaranth.lib.memory`` path (amaranth.sim) give the same read data, transparency included."""
    import shutil
    import subprocess

    from hdl.generate import to_verilog
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog is not installed")
    width, depth, cycles = 12, 5, 300
    transparency = [(), (0, 1), (1,)]
    rng = random.Random(7)
    # Two write ports never write one address in one cycle (the RAM's rule).
    stim = []
    for _ in range(cycles):
        a0, a1 = rng.sample(range(depth), 2)
        stim.append({"w": [(rng.random() < 0.6, a0, rng.randrange(1 << width)),
                           (rng.random() < 0.6, a1, rng.randrange(1 << width))],
                     "r": [(rng.random() < 0.8, rng.randrange(depth)) for _ in transparency]})

    def make():
        return RAM(shape=width, depth=depth, num_write=2, transparency=transparency)

    ram = make()
    expected = []

    async def bench(ctx):
        for s in stim:
            for port, (en, addr, data) in zip(ram.write, s["w"]):
                ctx.set(port.en, en)
                ctx.set(port.addr, addr)
                ctx.set(port.data, data)
            for port, (en, addr) in zip(ram.read, s["r"]):
                ctx.set(port.en, en)
                ctx.set(port.addr, addr)
            await ctx.tick()
            expected.append([ctx.get(port.data) for port in ram.read])

    run(ram, bench)

    to_verilog(make(), tmp_path / "ram.v")
    aw = 3
    fields = []   # per cycle: w0 en/addr/data, w1 ..., r0 en/addr, ...
    for s in stim:
        word = 0
        for en, addr, data in s["w"]:
            word = (word << 1 | en) << aw | addr
            word = word << width | data
        for en, addr in s["r"]:
            word = (word << 1 | en) << aw | addr
        fields.append(word)
    bits = 2 * (1 + aw + width) + len(transparency) * (1 + aw)
    (tmp_path / "stim.hex").write_text("\n".join(f"{w:x}" for w in fields) + "\n")
    assigns, pos = [], bits
    for i in range(2):
        for name, n in (("en", 1), ("addr", aw), ("data", width)):
            assigns.append(f"assign w{i}_{name} = s[{pos - 1}:{pos - n}];")
            pos -= n
    for i in range(len(transparency)):
        for name, n in (("en", 1), ("addr", aw)):
            assigns.append(f"assign r{i}_{name} = s[{pos - 1}:{pos - n}];")
            pos -= n
    nr = len(transparency)
    tb = f"""`timescale 1ns/1ps
module tb;
  reg clk = 0; reg rst = 0; always #1 clk = ~clk;
  reg [{bits - 1}:0] mem [0:{cycles - 1}]; reg [{bits - 1}:0] s; integer t;
  wire w0_en, w1_en; wire [{aw - 1}:0] w0_addr, w1_addr; wire [{width - 1}:0] w0_data, w1_data;
  {" ".join(f"wire r{i}_en; wire [{aw - 1}:0] r{i}_addr; wire [{width - 1}:0] r{i}_data;"
            for i in range(nr))}
  {" ".join(assigns)}
  network dut(.clk(clk), .rst(rst),
    {", ".join(f".write__{i}__en(w{i}_en), .write__{i}__addr(w{i}_addr), "
               f".write__{i}__data(w{i}_data)" for i in range(2))},
    {", ".join(f".read__{i}__en(r{i}_en), .read__{i}__addr(r{i}_addr), "
               f".read__{i}__data(r{i}_data)" for i in range(nr))});
  initial begin
    $readmemh("{tmp_path / 'stim.hex'}", mem);
    for (t = 0; t < {cycles}; t = t + 1) begin
      s = mem[t]; @(posedge clk); @(negedge clk);
      $display("%0d {' '.join('%0d' for _ in range(nr))}", t, {", ".join(f"r{i}_data" for i in range(nr))});
    end
    $finish;
  end
endmodule
"""
    (tmp_path / "tb.v").write_text(tb)
    subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / "sim"), str(tmp_path / "tb.v"),
                    str(tmp_path / "ram.v")], check=True, capture_output=True)
    out = subprocess.run(["vvp", "-n", str(tmp_path / "sim")], check=True, capture_output=True,
                         text=True).stdout
    got = [[int(x) for x in line.split()[1:]] for line in out.splitlines()
           if line and line[0].isdigit()]
    assert got == expected


def test_config_refuses_an_element_type_without_a_hardware_adder():
    """float64 is an element type of the golden model, but the NI has no float64 adder."""
    from hdl.adders import ADDERS
    assert "float64" not in ADDERS
    with pytest.raises(ValueError, match="no adder for float64.*adds int32, float32, bfloat16"):
        NIConfig(dtype="float64")


# --- the memory FIFO (hdl.fifo) against amaranth's SyncFIFO -------------------------------------

@pytest.mark.parametrize("depth", [5, 8, 13])
def test_block_fifo_equals_syncfifo_cycle_for_cycle(depth):
    """Random pushes and pops, full and empty included: ``BlockFIFO`` (a 1R1W memory) shows the
    same ready, valid, data and level as ``amaranth.lib.fifo.SyncFIFO`` in every cycle."""
    from hdl.fifo import BlockFIFO

    class Pair(Elaboratable):
        def __init__(self):
            self.a = fifo.SyncFIFO(width=9, depth=depth)
            self.b = BlockFIFO(width=9, depth=depth)

        def elaborate(self, platform):
            m = Module()
            m.submodules.a, m.submodules.b = self.a, self.b
            return m

    dut = Pair()
    rng = random.Random(depth)

    async def bench(ctx):
        for t in range(1500):
            burst = (t // 100) % 3        # mostly pushing, mostly popping, mixed
            w = rng.random() < (0.9, 0.2, 0.5)[burst]
            r = rng.random() < (0.2, 0.9, 0.5)[burst]
            data = rng.randrange(512)
            for f in (dut.a, dut.b):
                ctx.set(f.w_en, w)
                ctx.set(f.w_data, data)
                ctx.set(f.r_en, r)
            seen = [(ctx.get(f.w_rdy), ctx.get(f.r_rdy), ctx.get(f.level),
                     ctx.get(f.r_data) if ctx.get(f.r_rdy) else None) for f in (dut.a, dut.b)]
            assert seen[0] == seen[1], f"cycle {t}: SyncFIFO {seen[0]}, BlockFIFO {seen[1]}"
            await ctx.tick()

    run(dut, bench)
