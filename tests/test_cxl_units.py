"""Quick checks of the CXL.mem controller in amaranth.sim: configuration, message layouts,
directed requests, the accumulate window, held reads and their timeout, and a short random mix
scoreboarded against tb/cxl/model.py. The long checks run in Icarus and Verilator
(tests/test_cxl_controller.py)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden_model.coarse.lines import accumulate_lines
from hdl.cxl import (CSR, CXLMemConfig, CXLMemController, M2SReqOpcode, M2SRwDOpcode,
                     S2MDRSOpcode, S2MNDROpcode, TOP_MODULE, to_verilog)
from hdl.cxl.messages import M2SReq, M2SRwD, S2MDRS, S2MNDR
from tb.cxl import codec, scenarios
from tb.cxl.host import Host, Outputs
from tb.cxl.model import (ControllerModel, CSRAddr, DRSOp, ModelParams, NDROp, Req,
                          ReqOp, Response, RwD, RwDOp, int32_to_line, line_to_int32)
from tb.toolchain import lint_verilog

SMALL = CXLMemConfig(num_lines=64, num_banks=4, req_credits=3, rwd_credits=4, hold_slots=2,
                     num_tensors=4, max_group_shift=4, ndr_depth=2, drs_depth=2,
                     default_timeout=64)


def run_host(config, host, *, max_cycles=20000, phases=None, at=None):
    """Run ``host`` on a fresh controller in amaranth.sim until its script is done (then run
    each callable of ``phases``, which may queue more, and continue); ``at`` maps a cycle to a
    callable run before that cycle's inputs are driven."""
    dut = CXLMemController(config)
    phases = list(phases or [])
    at = dict(at or {})

    async def bench(ctx):
        for cycle in range(max_cycles):
            if cycle in at:
                at.pop(cycle)()
            inp = host.drive()
            ctx.set(dut.req.valid, inp.req_valid)
            ctx.set(dut.req.payload.as_value(), inp.req_payload)
            ctx.set(dut.rwd.valid, inp.rwd_valid)
            ctx.set(dut.rwd.payload.as_value(), inp.rwd_payload)
            ctx.set(dut.ndr.ready, inp.ndr_ready)
            ctx.set(dut.drs.ready, inp.drs_ready)
            ctx.set(dut.csr.valid, inp.csr_valid)
            ctx.set(dut.csr.payload.as_value(), inp.csr_payload)
            host.sample(Outputs(
                ndr_valid=ctx.get(dut.ndr.valid), ndr_payload=ctx.get(dut.ndr.payload.as_value()),
                drs_valid=ctx.get(dut.drs.valid), drs_payload=ctx.get(dut.drs.payload.as_value()),
                req_credit=ctx.get(dut.req_credit), rwd_credit=ctx.get(dut.rwd_credit),
                csr_ready=ctx.get(dut.csr.ready), idle=ctx.get(dut.idle),
                error=ctx.get(dut.error)))
            await ctx.tick()
            if host.done and ctx.get(dut.idle):
                if not phases:
                    return
                phases.pop(0)()
        raise AssertionError(f"not done after {max_cycles} cycles: {len(host.script)} script "
                             f"items left, {sum(host.outstanding.values())} in flight")

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return host


# --- configuration and layouts --------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("num_lines", 7), ("num_lines", 6), ("num_lines", 1 << 25), ("num_banks", 3),
    ("num_banks", 32), ("num_banks", 0), ("req_credits", 1), ("rwd_credits", 65),
    ("ndr_depth", 0), ("drs_depth", True), ("hold_slots", 33), ("num_tensors", 6),
    ("num_tensors", 512), ("max_group_shift", 17), ("default_timeout", 0),
    ("default_timeout", 1.5),
])
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=f"{field} must be .*{value!r}".replace("(", r"\(")):
        CXLMemConfig(**{field: value})


def test_controller_rejects_a_non_config():
    with pytest.raises(ValueError, match="config must be a CXLMemConfig, not 3"):
        CXLMemController(3)


def test_config_derived_widths():
    cfg = CXLMemConfig()
    assert (cfg.line_bits, cfg.bank_bits, cfg.row_bits, cfg.tensor_bits) == (10, 2, 8, 3)
    assert cfg.tracker_slots == 4 + 4 + 4 + 2 + 2


def test_opcodes_keep_the_spec_spelling_and_encoding():
    assert {o.name: o.value for o in M2SReqOpcode} == {o.name: o.value for o in ReqOp}
    assert {o.name: o.value for o in M2SRwDOpcode} == {o.name: o.value for o in RwDOp}
    assert {o.name: o.value for o in S2MNDROpcode} == {o.name: o.value for o in NDROp}
    assert {o.name: o.value for o in S2MDRSOpcode} == {o.name: o.value for o in DRSOp}
    assert {o.name: o.value for o in CSR} == {o.name: o.value for o in CSRAddr}
    assert (M2SReqOpcode.MemRd.value, M2SRwDOpcode.MemWrPtl.value) == (0b0001, 0b0010)
    assert (S2MNDROpcode.Cmp.value, S2MDRSOpcode.MemData.value) == (0, 0)


def test_message_layouts():
    assert {n: (f.offset, f.width) for n, f in M2SReq} == {
        "opcode": (0, 4), "snp_type": (4, 3), "meta_field": (7, 2), "meta_value": (9, 2),
        "tag": (11, 16), "addr": (27, 46)}
    assert M2SRwD.size == 73 + 1 + 64 + 512
    assert S2MNDR.size == 25 and S2MDRS.size == 25 + 1 + 512
    word = codec.pack_rwd(RwD(2, 0xBEEF, 123, data=5, byte_enable=3, poison=1))
    assert (word & 0xF, (word >> 11) & 0xFFFF, (word >> 27) & ((1 << 46) - 1)) == (2, 0xBEEF, 123)


def test_line_elements_round_trip():
    vals = [-(2**31), 2**31 - 1, -1, 0, 7] + list(range(11))
    assert line_to_int32(int32_to_line(vals)) == vals


# --- the model on its own -------------------------------------------------------------------

def test_model_accumulates_with_byte_enables_and_holds_reads():
    m = ControllerModel(ModelParams.of(SMALL))
    for a, d in ((CSRAddr.BASE, 8), (CSRAddr.SHIFT, 0), (CSRAddr.GROUPS, 2),
                 (CSRAddr.CONTRIB, 2)):
        m.csr(a, d)
    m.req(Req(ReqOp.MemRd, 1, 8))                  # held: tensor 0 has 0 of 2 writes
    assert m.held == 1 and not m.responses
    m.rwd(RwD(RwDOp.MemWr, 2, 8, int32_to_line([2**31 - 1] * 16)))
    m.rwd(RwD(RwDOp.MemWrPtl, 3, 8, int32_to_line([1] * 16), byte_enable=0xF0))
    want = [2**31 - 1, -2**31] + [2**31 - 1] * 14   # element 1: (2^31 - 1) + 1 wraps
    assert m.held == 0
    assert m.responses[-1] == Response("drs", DRSOp.MemData, 1, 0, int32_to_line(want))
    m.rwd(RwD(RwDOp.MemWr, 4, 20, 5, byte_enable=0))    # outside: overwrite, MemWr ignores BE
    assert m.line(20) == 5


# --- directed runs in amaranth.sim ----------------------------------------------------------

def test_write_read_partial_and_read_after_write():
    host = Host(SMALL, seed=3)
    line_a = int.from_bytes(bytes(range(64)), "little")
    host.rwd(RwDOp.MemWr, 5, line_a)
    host.req(ReqOp.MemRd, 5)                       # same cycle: the write is older
    host.rwd(RwDOp.MemWrPtl, 5, (1 << 512) - 1, byte_enable=0x8000_0000_0000_0001)
    host.req(ReqOp.MemRd, 5)
    host.req(ReqOp.MemInv, 5)
    host.req(ReqOp.MemRd, 6)
    run_host(SMALL, host)
    host.check()
    reads = [r for m, r in host.answers if r.channel == "drs"]
    assert reads[0].data == line_a
    assert reads[1].data == line_a | 0xFF | (0xFF << 8 * 63)
    assert reads[2].data == 0
    assert [r.opcode for m, r in host.answers if r.channel == "ndr"] == [NDROp.Cmp] * 3


@pytest.mark.parametrize("byte", [0, 63])
@pytest.mark.parametrize("accumulate", [False, True], ids=["write", "accumulate"])
def test_a_partial_write_of_one_byte_at_either_end_of_a_line(byte, accumulate):
    """MemWrPtl with one enabled byte, alone: only that byte changes (an accumulate adds the
    whole int32 element and keeps its enabled byte; numpy computes the expected line)."""
    rng = np.random.default_rng(byte)
    old = rng.integers(-2**31, 2**31, 16, dtype=np.int64).astype(np.int32)
    new = rng.integers(-2**31, 2**31, 16, dtype=np.int64).astype(np.int32)
    old[0], new[0], old[15], new[15] = 0x0000_00FF, 1, 0x7FFF_FFFF, 0x0100_0000  # carries
    host = Host(SMALL, seed=byte)
    if accumulate:     # line 40 is a one-line group for two contributions: old, then new
        scenarios.program_window(host, base=40, shift=0, groups=1, contrib=2)
    host.rwd(RwDOp.MemWr, 40, int32_to_line(old.tolist()))
    host.rwd(RwDOp.MemWrPtl, 40, int32_to_line(new.tolist()), byte_enable=1 << byte)
    # the channels are independent: read only once both writes are answered
    run_host(SMALL, host, phases=[lambda: host.req(ReqOp.MemRd, 40)])
    host.check()
    result = (old.astype(np.uint32) + new.astype(np.uint32)).astype("<u4") if accumulate \
        else new.astype("<u4")
    want = old.astype("<u4").view(np.uint8).copy()
    want[byte] = result.view(np.uint8)[byte]
    [read] = [r for m, r in host.answers if r.channel == "drs"]
    assert read.data == int.from_bytes(want.tobytes(), "little")
    assert read.data != int32_to_line(old.tolist())


def test_responses_held_not_ready_for_thousands_of_cycles_then_released():
    """Both response channels not ready for 5,000 cycles while the host sends whenever it has
    a credit: every credit is spent, nothing is lost or reordered, no error; then released,
    every request completes."""
    host = Host(SMALL, seed=21, ready_pct=0)
    data = {line: line * 7919 + 1 for line in range(24)}
    for line, value in data.items():
        host.rwd(RwDOp.MemWr, line, value)
    for line in data:
        host.req(ReqOp.MemRd, line)
    stalled = {}

    def release():
        stalled.update(credits=dict(host.credits), answered=len(host.answers),
                       sent=dict(host.sent))
        host.ready_pct = (100, 100)

    run_host(SMALL, host, at={5000: release}, max_cycles=10_000)
    host.check()
    assert stalled["credits"] == {"req": 0, "rwd": 0} and stalled["answered"] == 0
    assert sum(stalled["sent"].values()) < len(data) * 2
    assert {m.addr: r.data for m, r in host.answers if r.channel == "drs"} == data


def test_a_long_stream_of_writes_with_no_reads_runs_at_one_per_cycle():
    """4,000 MemWr and no read with the host always ready: one write completes per cycle
    (nothing waits for a queue to fill), and a read-back returns the last write to each
    line."""
    host = Host(SMALL, seed=8)
    rng = np.random.default_rng(8)
    last = {}
    for k in range(4000):
        line = int(rng.integers(0, SMALL.num_lines))
        last[line] = k + 1
        host.rwd(RwDOp.MemWr, line, k + 1)
    writes_done = {}

    def read_back():
        writes_done["cycle"] = host.cycle
        for line in sorted(last):
            host.req(ReqOp.MemRd, line)

    run_host(SMALL, host, phases=[read_back])
    host.check()
    assert writes_done["cycle"] <= 4000 + 8
    assert {m.addr: r.data for m, r in host.answers if r.channel == "drs"} == last


def test_accumulate_window_sync_round():
    host = Host(SMALL, seed=5, ready_pct=70, send_pct=80)
    rnd = scenarios.SyncRound(host, workers=3, groups=2, shift=2, base=16, elements=60, seed=1)
    rnd.script()
    run_host(SMALL, host)
    host.check()
    rnd.check()
    np.testing.assert_array_equal(
        rnd.expected[0], accumulate_lines(rnd.shards[:, 0]).ravel()[:60])


def test_held_read_times_out_with_poison():
    host = Host(SMALL, seed=7)
    scenarios.program_window(host, base=0, shift=0, groups=1, contrib=2, timeout=40)
    host.rwd(RwDOp.MemWr, 0, 77)
    host.req(ReqOp.MemRd, 0, tag=0x55)
    run_host(SMALL, host)
    (msg, rsp), = [(m, r) for m, r in host.answers if r.channel == "drs"]
    assert rsp == Response("drs", DRSOp.MemData, 0x55, poison=1, data=0)
    sent = next(c for c, kind, x in host.log if kind == "req")
    got = next(c for c, kind, x in host.log if kind == "drs")
    assert 40 <= got - sent <= 48
    host.model.expire_held()        # the model times it out once told so
    host.check()


def test_bad_requests_change_nothing():
    host = Host(SMALL, seed=11, ready_pct=50)
    scenarios.bad_requests(host, good_lines=[1, 2, 3, 4, 5])
    run_host(SMALL, host, phases=[lambda: scenarios.readback(host)])
    host.check()
    errors = [r for m, r in host.answers if r.opcode == NDROp.CmpErr and r.channel == "ndr"
              or r.channel == "drs" and r.poison]
    assert len(errors) >= 12 + 4 + 3 + 1 + 4
    nxm = [r for r in host.received if r.channel == "drs" and r.opcode == DRSOp.MemDataNXM]
    assert len(nxm) == 3 and all(r.poison and r.data == 0 for r in nxm)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_mix_short(seed):
    host = Host(SMALL, seed=seed, send_pct=70, ready_pct=(60, 40))
    scenarios.program_window(host, base=40, shift=1, groups=3, contrib=2)
    scenarios.random_mix(host, 250, lines=list(range(0, 12)) + list(range(40, 46)))
    host.csr(CSRAddr.TIMEOUT, 1, expire=True, when_idle=False)
    run_host(SMALL, host, phases=[lambda: scenarios.readback(host)])
    host.check()
    assert host.sent["req"] > 50 and host.sent["rwd"] > 50


# --- Verilog --------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [
    CXLMemConfig(),
    SMALL,
    CXLMemConfig(num_lines=6, num_banks=1, req_credits=2, rwd_credits=3, hold_slots=3,
                 num_tensors=2, max_group_shift=0, ndr_depth=2, drs_depth=3, default_timeout=1),
    CXLMemConfig(num_lines=1 << 20, num_banks=16, req_credits=8, rwd_credits=8, hold_slots=8,
                 num_tensors=256, max_group_shift=16),
], ids=["default", "small", "odd", "large"])
def test_lint(tmp_path, config):
    path = tmp_path / "cxl.v"
    text = to_verilog(CXLMemController(config), path)
    assert f"module {TOP_MODULE}(" in text
    assert len(text) < 1_000_000        # banks are behavioural modules, no per-line init
    lint_verilog(path, TOP_MODULE)


def test_verilog_ports():
    """The Verilog ports the cocotb testbench drives (docs/hardware.md)."""
    import re
    text = to_verilog(CXLMemController(SMALL))
    header = re.search(rf"module {TOP_MODULE}\((.*?)\);", text, re.S).group(1)
    ports = {p.strip() for p in header.split(",")}
    widths = {name: int(w) + 1 if w else 1 for d, w, name in
              re.findall(r"^  (input|output) (?:\[(\d+):0\] )?(\w+);", text, re.M)
              if name in ports}
    assert widths == {
        "clk": 1, "rst": 1, "req__valid": 1, "req__payload": 73, "rwd__valid": 1,
        "rwd__payload": 650, "req_credit": 1, "rwd_credit": 1, "ndr__valid": 1,
        "ndr__ready": 1, "ndr__payload": 25, "drs__valid": 1, "drs__ready": 1,
        "drs__payload": 538, "csr__valid": 1, "csr__ready": 1, "csr__payload": 35,
        "idle": 1, "error": 1}


def test_zeroing_clears_only_the_window():
    host = Host(SMALL, seed=13)
    for line in range(8):
        host.rwd(RwDOp.MemWr, line, line + 1)
    scenarios.program_window(host, base=2, shift=1, groups=2, contrib=1)   # lines 2..5
    run_host(SMALL, host, phases=[lambda: scenarios.readback(host, range(8))])
    host.check()
    reads = {m.addr: r.data for m, r in host.answers if r.channel == "drs"}
    assert reads == {0: 1, 1: 2, 2: 0, 3: 0, 4: 0, 5: 0, 6: 7, 7: 8}


def test_sending_without_a_credit_sets_error_and_drops():
    """The credits are the queue depths: a host that ignores them overflows a queue."""
    dut = CXLMemController(SMALL)
    seen = {}

    async def bench(ctx):
        ctx.set(dut.ndr.ready, 0)                   # nothing drains, so nothing frees a slot
        for k in range(3 * SMALL.rwd_credits):
            ctx.set(dut.rwd.valid, 1)
            ctx.set(dut.rwd.payload.as_value(),
                    codec.pack_rwd(RwD(RwDOp.MemWr, k, 1, k)))
            seen.setdefault("credits", 0)
            seen["credits"] += ctx.get(dut.rwd_credit)
            await ctx.tick()
            seen.setdefault("first_error", None)
            if ctx.get(dut.error) and seen["first_error"] is None:
                seen["first_error"] = k
        ctx.set(dut.rwd.valid, 0)
        await ctx.tick().repeat(5)
        seen["error_after"] = ctx.get(dut.error)

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    # the queue holds rwd_credits messages, the response queue and stage B hold a few more
    # (their credits came back); the first message beyond that is dropped
    assert seen["first_error"] == SMALL.rwd_credits + seen["credits"]
    assert seen["error_after"] == 1
