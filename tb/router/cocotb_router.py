"""cocotb test of ``hdl.router.RouterNetwork``: random traffic in, every flit checked out.

Run by ``tb.router.build.RouterBuild.run`` (which writes the parameters as JSON named by the
environment variable ``ROUTER_TB_PARAMS``). One simulation runs several scenarios
(``tb.router.traffic.TrafficSpec``) one after another on the same network, each followed by a
drain; the network is empty between them. A Python generator drives every injection stream and
a Python checker follows every ejection stream, with random ``ready`` (sink back-pressure). A
scenario fails on any checker error, on the network's ``error`` output, or when nothing is
delivered for ``stall_cycles`` while packets are outstanding (deadlock or livelock).

One coroutine does the whole cycle (inputs written after the rising edge, handshakes sampled in
the read-only phase), which is several times faster than a coroutine per port.
"""

import json
import os
import random
import statistics
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from tb.router.traffic import Checker, Source, TrafficSpec

PARAMS_ENV = "ROUTER_TB_PARAMS"


class TB:
    """Clock, reset, the injection drivers and the ejection monitors of one network."""

    def __init__(self, dut, params):
        self.dut = dut
        self.p = params
        self.n = params["num_terminals"]
        self.width = params["flit_width"]
        self.mask = (1 << self.width) - 1
        self.inj_valid = [getattr(dut, f"inject__{t}__valid") for t in range(self.n)]
        self.inj_ready = [getattr(dut, f"inject__{t}__ready") for t in range(self.n)]
        self.inj_payload = [getattr(dut, f"inject__{t}__payload") for t in range(self.n)]
        self.ej_valid = [getattr(dut, f"eject__{t}__valid") for t in range(self.n)]
        self.ej_ready = [getattr(dut, f"eject__{t}__ready") for t in range(self.n)]
        self.ej_payload = [getattr(dut, f"eject__{t}__payload") for t in range(self.n)]
        self.cycle = 0

    async def reset(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, self.p.get("clock_period_ns", 2), unit="ns").start())
        for t in range(self.n):
            self.inj_valid[t].value = 0
            self.inj_payload[t].value = 0
            self.ej_ready[t].value = 0
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        await RisingEdge(dut.clk)

    async def run_scenario(self, spec, seq0):
        n, width = self.n, self.width
        sources = [Source(t, spec, self.p["rows"], self.p["cols"], width,
                          self.p.get("concentration", 1), seq0[t]) for t in range(n)]
        checker = Checker(n, width)
        rng = random.Random(spec.seed * 104729 + 17)
        clk = self.dut.clk
        offered = [None] * n      # flit currently driven on inject[t]
        ready_now = [0] * n
        start = self.cycle
        last_progress = self.cycle
        stall = self.p.get("stall_cycles", 3000)
        created = 0
        window_flits = 0          # flits ejected in the measurement window
        status, message = "done", ""
        while True:
            k = self.cycle - start
            generating = k < spec.cycles
            if generating:
                for s in sources:
                    pkt = s.generate(self.cycle)
                    if pkt is not None:
                        checker.sent(pkt)
                        created += 1
            # drive this cycle's inputs
            for t, s in enumerate(sources):
                flit = s.offer()
                if flit != offered[t]:
                    if flit is None:
                        self.inj_valid[t].value = 0
                    else:
                        if offered[t] is None:
                            self.inj_valid[t].value = 1
                        self.inj_payload[t].value = flit[0] | (flit[1] & self.mask) << 2
                    offered[t] = flit
                r = 1 if spec.ready >= 1 or rng.random() < spec.ready else 0
                if r != ready_now[t]:
                    self.ej_ready[t].value = r
                    ready_now[t] = r
            await ReadOnly()
            for t in range(n):
                if offered[t] is not None and self.inj_ready[t].value:
                    sources[t].accepted(self.cycle)
                if ready_now[t] and self.ej_valid[t].value:
                    word = int(self.ej_payload[t].value)
                    checker.eject(t, word & 3, word >> 2, self.cycle)
                    last_progress = self.cycle
                    if spec.cycles // 4 <= self.cycle - start < spec.cycles:
                        window_flits += 1
            await RisingEdge(clk)
            self.cycle += 1
            if checker.errors:
                status, message = "fail", "; ".join(checker.errors[:5])
                break
            if not generating and not checker.outstanding and not any(
                    c is not None for c in checker.current):
                break
            if checker.outstanding and self.cycle - last_progress > stall:
                oldest = min(checker.outstanding.values(), key=lambda p: p.created)
                status = "stall"
                message = (f"no flit delivered for {stall} cycles with "
                           f"{len(checker.outstanding)} packets outstanding (deadlock?); oldest "
                           f"src {oldest.src} -> {oldest.dest} seq {oldest.seq} created "
                           f"{oldest.created - start}, injected "
                           f"{None if oldest.injected is None else oldest.injected - start}")
                break
        for t in range(n):
            self.inj_valid[t].value = 0
        if status == "done":
            errs = checker.finish()
            if errs:
                status, message = "fail", "; ".join(errs[:5])
        if status == "done" and int(self.dut.error.value):
            status, message = "fail", "the network's error output is set (buffer overflow)"
        for t, s in enumerate(sources):
            seq0[t] = s.seq
        # statistics over packets created after a warm-up quarter
        warm = start + spec.cycles // 4
        meas = [p for p in checker.delivered if warm <= p.created < start + spec.cycles]
        lat = [p.delivered - p.created for p in meas]
        net = [p.delivered - p.injected for p in meas]
        flits = sum(p.length for p in meas)
        window = max(1, spec.cycles - spec.cycles // 4)
        return {
            "name": spec.name, "status": status, "message": message,
            "packets": created, "packets_delivered": len(checker.delivered),
            "flits_delivered": checker.flits_delivered, "cycles": self.cycle - start,
            "offered": spec.rate,
            "accepted": flits / window / n,
            "throughput": window_flits / window / n,
            "latency_mean": statistics.fmean(lat) if lat else None,
            "network_latency_mean": statistics.fmean(net) if net else None,
            "latency_max": max(lat) if lat else None,
            "head_latency_by_hops": _min_by_length(checker.delivered),
            "measured_packets": len(meas),
        }


def _min_by_length(packets):
    """Smallest injection-to-tail latency per (src, dest, length), as a list (for zero load)."""
    best = {}
    for p in packets:
        key = (p.src, p.dest, p.length)
        best[key] = min(best.get(key, 1 << 30), p.delivered - p.injected)
    return [[*k, v] for k, v in sorted(best.items())]


@cocotb.test()
async def router_traffic(dut):
    with open(os.environ[PARAMS_ENV]) as f:
        params = json.load(f)
    tb = TB(dut, params)
    await tb.reset()
    results = []
    seq0 = [0] * tb.n
    out = params["result_file"]
    failed = False
    for sc in params["scenarios"]:
        spec = TrafficSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in sc.items()})
        t0 = time.perf_counter()
        res = await tb.run_scenario(spec, seq0)
        res["wall_s"] = time.perf_counter() - t0
        results.append(res)
        with open(out, "w") as f:
            json.dump({"scenarios": results}, f, indent=1)
        if res["status"] != "done":
            failed = True
            break
    assert not failed, f"{results[-1]['name']}: {results[-1]['status']}: {results[-1]['message']}"
