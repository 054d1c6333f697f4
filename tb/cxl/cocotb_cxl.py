"""cocotb test module of the CXL.mem controller (Icarus and Verilator).

Started by :mod:`tb.cxl.run` in the simulator process; never collected by pytest. The
controller's configuration, the seed and the traffic sizes come from the JSON file named by the
environment variable ``CXL_TB_PARAMS``. Every test resets the controller, zeroes its memory with
the window's zeroing engine (memory contents survive a reset, and the model starts from zero)
and drives it with :class:`tb.cxl.host.Host`: credits per channel, random gaps between
messages, random back-pressure on NDR and DRS, and everything fed to the model in cycle order;
:meth:`Host.check` compares every response with the model's.

The :class:`TB` class owns the clock, the reset and the per-cycle adapter: at each falling edge
it applies the host's inputs, waits for ``ReadOnly`` and hands the settled outputs back.
"""

from __future__ import annotations


import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from hdl.cxl import CXLMemConfig

from ..cocotb_values import params_from_env, reset, to_int

from . import scenarios
from .host import Host, Outputs
from .model import CSRAddr, DRSOp, ReqOp, Response, RwDOp

PARAMS_ENV = "CXL_TB_PARAMS"


def _params():
    params = params_from_env(PARAMS_ENV)
    params.setdefault("config", {})
    return params


def _int(handle) -> int:
    return to_int(handle.value)


class TB:
    """Clock, reset and the per-cycle host adapter of ``cxl_mem_controller``."""

    def __init__(self, dut, params):
        self.dut = dut
        self.params = params
        self.config = CXLMemConfig(**params["config"])
        self.seed = int(params.get("seed", 1))
        self.trace = bool(params.get("trace", False))
        self.clock_started = False

    async def reset(self):
        dut = self.dut
        if not self.clock_started:
            Clock(dut.clk, 2, unit="ns").start()
            self.clock_started = True
        else:
            await FallingEdge(dut.clk)          # leave the ReadOnly phase of the last step
        await reset(dut, (dut.req__valid, dut.rwd__valid, dut.ndr__ready, dut.drs__ready,
                          dut.csr__valid, dut.req__payload, dut.rwd__payload, dut.csr__payload))

    def host(self, salt, **kwargs):
        return Host(self.config, seed=self.seed * 1000 + salt, **kwargs)

    async def step(self, host):
        dut = self.dut
        await FallingEdge(dut.clk)
        inp = host.drive()
        dut.req__valid.value = inp.req_valid
        dut.req__payload.value = inp.req_payload
        dut.rwd__valid.value = inp.rwd_valid
        dut.rwd__payload.value = inp.rwd_payload
        dut.ndr__ready.value = inp.ndr_ready
        dut.drs__ready.value = inp.drs_ready
        dut.csr__valid.value = inp.csr_valid
        dut.csr__payload.value = inp.csr_payload
        await ReadOnly()
        out = Outputs(
            ndr_valid=_int(dut.ndr__valid), ndr_payload=_int(dut.ndr__payload),
            drs_valid=_int(dut.drs__valid), drs_payload=_int(dut.drs__payload),
            req_credit=_int(dut.req_credit), rwd_credit=_int(dut.rwd_credit),
            csr_ready=_int(dut.csr__ready), idle=_int(dut.idle), error=_int(dut.error))
        if self.trace:
            dut._log.info(f"cycle {host.cycle}: {inp} -> {out}")
        host.sample(out)
        return out.idle

    async def run(self, host, max_cycles=200_000):
        """Step until the host's script is done and the controller is idle."""
        for _ in range(max_cycles):
            idle = await self.step(host)
            if host.done and idle:
                return
        raise AssertionError(f"stalled: not done after {max_cycles} cycles ({len(host.script)} "
                             f"script items left, {sum(host.outstanding.values())} responses "
                             f"missing, {host.model.held} reads held in the model)")

    async def start(self, host):
        await self.reset()
        scenarios.zero_memory(host)
        await self.run(host)


@cocotb.test()
async def random_mix(dut):
    """Random requests, tags, partial writes, bad requests and duplicate tags over a small
    line set and the accumulate window, random gaps and back-pressure; then every held read
    times out and the whole memory is read back; all scoreboarded against the model."""
    tb = TB(dut, _params())
    count = int(tb.params.get("messages", 600))
    for salt, (send, ready) in enumerate([(70, (60, 40)), (100, (100, 100)), (90, (20, 30))]):
        host = tb.host(salt, send_pct=send, ready_pct=ready)
        await tb.start(host)
        cfg = tb.config
        scenarios.program_window(host, base=cfg.num_lines // 2, shift=1, groups=3, contrib=2)
        lines = list(range(0, 12)) + list(range(cfg.num_lines // 2, cfg.num_lines // 2 + 6))
        scenarios.random_mix(host, count, lines=lines)
        host.csr(CSRAddr.TIMEOUT, 1, expire=True, when_idle=False)
        await tb.run(host)
        scenarios.readback(host)
        await tb.run(host)
        host.check()
        stats = host.model.stats
        assert stats["held"] and stats["released"] and stats["accumulated"], stats
        dut._log.info(f"random mix {salt}: {host.sent} messages, {len(host.received)} "
                      f"responses, {host.cycle} cycles, credits never below "
                      f"{host.min_credits}, model coverage {dict(stats)}; all match the model")


@cocotb.test()
async def sync_round(dut):
    """W workers push int32 shards into the window (the last line of each tensor a MemWrPtl)
    and read the reduced tensors back while others still write: every read equals numpy's
    wrap-around sum and the model, bit for bit."""
    tb = TB(dut, _params())
    workers = int(tb.params.get("workers", 4))
    for salt, (shift, groups, elements) in enumerate([(2, 2, 60), (0, 4, 16), (3, 1, 128)]):
        host = tb.host(10 + salt, send_pct=80, ready_pct=(70, 50))
        await tb.start(host)
        rnd = scenarios.SyncRound(host, workers=workers, groups=groups, shift=shift, base=32,
                                  elements=elements, seed=tb.seed + salt)
        rnd.script()
        await tb.run(host)
        rnd.check()
        stats = host.model.stats
        assert stats["held"] and stats["passed_waiting_read"], stats
        scenarios.readback(host)
        await tb.run(host)
        host.check()
        dut._log.info(f"sync round {salt}: {workers} workers x {groups} tensors of {elements} "
                      f"int32, {host.cycle} cycles, reads equal the numpy sum; model coverage "
                      f"{dict(stats)}")


@cocotb.test()
async def bad_requests(dut):
    """Out-of-range addresses, unsupported opcodes, poisoned writes and tags already in
    flight get the defined error responses; the read-back shows only the good writes."""
    tb = TB(dut, _params())
    host = tb.host(20, ready_pct=(30, 30))
    await tb.start(host)
    before = len(host.received)
    scenarios.bad_requests(host, good_lines=[1, 2, 3, 4, 5])
    await tb.run(host)
    errors = host.received[before:]
    n = tb.config.num_lines
    nxm = [r for r in errors if r.channel == "drs" and r.opcode == DRSOp.MemDataNXM]
    assert len(nxm) == 3 and all(r.poison and r.data == 0 for r in nxm), nxm
    scenarios.readback(host)
    await tb.run(host)
    host.check()
    dut._log.info(f"bad requests: {len(errors)} responses, memory of {n} lines as the model")


@cocotb.test()
async def held_read_timeout(dut):
    """A held read whose tensor never completes gets MemData with poison after TIMEOUT
    cycles; a held read whose tensor completes in time gets the data."""
    tb = TB(dut, _params())
    host = tb.host(30, ready_pct=100)
    await tb.start(host)
    timeout = 100
    scenarios.program_window(host, base=8, shift=0, groups=2, contrib=2, timeout=timeout)
    host.rwd(RwDOp.MemWr, 8, 5)
    host.req(ReqOp.MemRd, 8, tag=0x77)
    await tb.run(host)
    sent = next(c for c, kind, m in host.log if kind == "req" and m.tag == 0x77)
    got, rsp = next((c, r) for c, kind, r in host.log if kind == "drs" and r.tag == 0x77)
    assert rsp == Response("drs", DRSOp.MemData, 0x77, poison=1, data=0), rsp
    assert timeout <= got - sent <= timeout + 8, (sent, got)
    host.model.expire_held()                # it timed out: tell the model
    host.csr(CSRAddr.TIMEOUT, scenarios.BIG_TIMEOUT)
    host.req(ReqOp.MemRd, 9, tag=0x78)      # held until two writes to line 9
    host.rwd(RwDOp.MemWr, 9, 3)
    host.rwd(RwDOp.MemWrPtl, 9, 4, byte_enable=0x1)
    await tb.run(host)
    rsp = next(r for c, kind, r in host.log if kind == "drs" and r.tag == 0x78)
    assert rsp == Response("drs", DRSOp.MemData, 0x78, poison=0, data=7), rsp
    host.check()
    dut._log.info(f"held read timed out after {got - sent} cycles (TIMEOUT {timeout})")
