"""The CXL.mem controller's components, each in amaranth.sim against a reference written here
from its contract (hdl/cxl/arrival.py, window.py, holds.py, merge.py), cycle by cycle under
random inputs. The whole controller is checked against tb/cxl/model.py in
tests/test_cxl_units.py and, in Icarus and Verilator, tests/test_cxl_controller.py."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.cxl import CSR, CTRL_CLEAR, CTRL_ZERO, CXLMemConfig, TIMER_BITS
from hdl.cxl.arrival import RequestArrival
from hdl.cxl.holds import HoldSlots
from hdl.cxl.merge import LineMerge
from hdl.cxl.window import AccumulateWindow
from tb.cxl import codec
from tb.cxl.model import Req, RwD

CFG = CXLMemConfig(num_lines=64, num_banks=4, req_credits=3, rwd_credits=4, hold_slots=3,
                   num_tensors=4, max_group_shift=4, ndr_depth=2, drs_depth=2,
                   default_timeout=64)


def simulate(dut, bench, clocked=True):
    sim = Simulator(dut)
    if clocked:
        sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()


def test_components_reject_a_non_config():
    for component in (RequestArrival, AccumulateWindow, HoldSlots):
        with pytest.raises(ValueError, match="config must be a CXLMemConfig, not 7"):
            component(7)


# --- LineMerge --------------------------------------------------------------------------------

def merge_reference(old, new, byte_enable, accumulate):
    """The merged line from numpy: bytes of the int32 sums modulo 2**32 or of the new line where
    enabled, the old bytes elsewhere."""
    o = np.frombuffer(old.to_bytes(64, "little"), np.uint8)
    n = np.frombuffer(new.to_bytes(64, "little"), np.uint8)
    total = (o.view("<u4").astype(np.uint64) + n.view("<u4")) % (1 << 32)
    s = total.astype("<u4").view(np.uint8)
    be = np.array([(byte_enable >> i) & 1 for i in range(64)], bool)
    out = np.where(be, s if accumulate else n, o)
    return int.from_bytes(out.tobytes(), "little")


def test_line_merge_matches_numpy():
    rng = np.random.default_rng(5)
    full = (1 << 64) - 1
    cases = [(full, 1), (full, 0), (1, 1), (1 << 63, 1), (1, 0), (1 << 63, 0), (0, 1)]
    cases += [(int(rng.integers(0, 1 << 63)) * 2 + int(rng.integers(0, 2)), int(rng.integers(0, 2)))
              for _ in range(120)]
    # every element overflows in some case: old and new both near 2**32
    lines = [(int.from_bytes(bytes([0xFF] * 64), "little"),) * 2]
    lines += [(int.from_bytes(rng.bytes(64), "little"), int.from_bytes(rng.bytes(64), "little"))
              for _ in cases[1:]]
    dut = LineMerge()

    async def bench(ctx):
        for (be, acc), (old, new) in zip(cases, lines):
            ctx.set(dut.old, old)
            ctx.set(dut.new, new)
            ctx.set(dut.byte_enable, be)
            ctx.set(dut.accumulate, acc)
            assert ctx.get(dut.merged) == merge_reference(old, new, be, acc), (hex(be), acc)

    simulate(dut, bench, clocked=False)


# --- HoldSlots --------------------------------------------------------------------------------

class HoldsReference:
    """Held reads: put into the lowest free slot; ready = released (tensor complete) or expired
    (timer >= timeout); the lowest released slot first, else the lowest expired one."""

    def __init__(self, n):
        self.slots = [None] * n          # (entry, timer)

    def outputs(self, complete, timeout):
        rel = [k for k, s in enumerate(self.slots) if s and complete >> s[0]["tensor"] & 1]
        exp = [k for k, s in enumerate(self.slots) if s and s[1] >= timeout]
        chosen = rel[0] if rel else exp[0] if exp else None
        return {"full": all(self.slots), "ready": chosen is not None, "chosen": chosen,
                "poison": not rel}

    def step(self, out, put, entry, take):
        free = [k for k, s in enumerate(self.slots) if s is None]
        self.slots = [(s[0], min(s[1] + 1, (1 << TIMER_BITS) - 1)) if s else None
                      for s in self.slots]
        if take:
            self.slots[out["chosen"]] = None
        if put:
            self.slots[free[0]] = (entry, 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hold_slots_against_reference(seed):
    rng = np.random.default_rng(seed)
    dut = HoldSlots(CFG)
    ref = HoldsReference(CFG.hold_slots)
    seen = {"take": 0, "poison": 0, "full": 0}

    async def bench(ctx):
        for cycle in range(1500):
            complete = int(rng.integers(0, 1 << CFG.num_tensors)) if rng.random() < 0.3 else 0
            timeout = int(rng.choice([3, 20, 1 << 31]))
            ctx.set(dut.complete, complete)
            ctx.set(dut.timeout, timeout)
            out = ref.outputs(complete, timeout)
            assert ctx.get(dut.full) == out["full"], cycle
            assert ctx.get(dut.ready) == out["ready"], cycle
            take = 0
            if out["ready"]:
                chosen = ref.slots[out["chosen"]][0]
                assert ctx.get(dut.poison) == out["poison"], cycle
                assert {f: ctx.get(getattr(dut.entry, f)) for f in chosen} == chosen, cycle
                take = int(rng.random() < 0.5)
                seen["take"] += take
                seen["poison"] += take and out["poison"]
            seen["full"] += out["full"]
            put = int(not out["full"] and rng.random() < 0.4)
            entry = {"tag": int(rng.integers(0, 1 << 16)),
                     "slot": int(rng.integers(0, CFG.tracker_slots)),
                     "line": int(rng.integers(0, CFG.num_lines)),
                     "tensor": int(rng.integers(0, CFG.num_tensors))}
            ctx.set(dut.put, put)
            ctx.set(dut.take, take)
            for f, v in entry.items():
                ctx.set(getattr(dut.put_entry, f), v)
            ref.step(out, put, entry, take)
            await ctx.tick()

    simulate(dut, bench)
    assert seen["take"] > 100 and seen["poison"] > 10 and seen["full"] > 10


# --- AccumulateWindow -------------------------------------------------------------------------

class WindowReference:
    """The window's registers, counters and zeroing as docs/hardware.md and hdl.cxl.messages.CSR
    describe them."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.base = self.groups = self.shift = self.contrib = 0
        self.timeout = cfg.default_timeout
        self.counters = [0] * cfg.num_tensors
        self.zero = None                # [next line, end] while zeroing

    def decode(self, addr):
        cfg = self.cfg
        line = addr % (1 << cfg.line_bits)
        in_range = addr < cfg.num_lines
        in_window = (in_range and line >= self.base
                     and (line - self.base) >> self.shift < self.groups)
        return {"in_range": int(in_range), "in_window": int(in_window), "line": line,
                "tensor": (line - self.base) >> self.shift if in_window else None}

    def complete(self):
        return sum(1 << i for i, c in enumerate(self.counters)
                   if c >= self.contrib << self.shift)

    def step(self, csr, count):
        cfg = self.cfg
        clear = False
        if self.zero:
            self.zero[0] += 1
            if self.zero[0] >= self.zero[1]:
                self.zero = None
        if csr:
            addr, d = csr
            if addr == CSR.BASE.value and d < cfg.num_lines:
                self.base = d
            elif addr == CSR.GROUPS.value:
                self.groups = min(d, cfg.num_tensors)
            elif addr == CSR.SHIFT.value:
                self.shift = min(d, cfg.max_group_shift)
            elif addr == CSR.CONTRIB.value:
                self.contrib = min(d, 255)
            elif addr == CSR.TIMEOUT.value:
                self.timeout = d
            elif addr == CSR.CTRL.value:
                clear = bool(d & CTRL_CLEAR)
                end = self.base + (self.groups << self.shift)
                if d & CTRL_ZERO and end > self.base:
                    self.zero = [self.base, min(end, cfg.num_lines)]
        for i in range(cfg.num_tensors):
            if clear:
                self.counters[i] = 0
            elif count == i and self.counters[i] < (1 << cfg.counter_bits) - 1:
                self.counters[i] += 1


#: groups of up to 64 lines in 64: a line below BASE is then only outside the window by its sign
WINDOW_CFG = CXLMemConfig(num_lines=64, num_banks=4, num_tensors=8, max_group_shift=6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accumulate_window_against_reference(seed):
    rng = np.random.default_rng(seed)
    cfg = WINDOW_CFG
    dut = AccumulateWindow(cfg)
    ref = WindowReference(cfg)
    seen = {"in_window": 0, "complete": 0, "zeroed": 0}

    def value(addr):
        if addr == CSR.CTRL.value:
            return int(rng.integers(0, 4))
        return int(rng.choice([int(rng.integers(0, 8)), int(rng.integers(0, 80)),
                               int(rng.integers(0, 1 << 32))]))

    async def bench(ctx):
        for cycle in range(2500):
            busy = int(rng.random() < 0.2)
            csr = None
            if rng.random() < 0.08:
                addr = int(rng.choice([0, 1, 2, 3, 3, 5, 4, 6, 7] if rng.random() < 0.3
                                      else [0, 1, 2, 3]))
                csr = (addr, value(addr))
            addrs = [int(rng.integers(0, cfg.num_lines + 8)) if rng.random() < 0.95
                     else int(rng.integers(0, 1 << 46)) for _ in range(2)]
            ctx.set(dut.stage_busy, busy)
            ctx.set(dut.csr.valid, csr is not None)
            # the raw word, so that the two addresses CSR does not name can be written too
            ctx.set(dut.csr.payload.as_value(), csr[0] | csr[1] << 3 if csr else 0)
            ctx.set(dut.req_addr, addrs[0])
            ctx.set(dut.rwd_addr, addrs[1])
            count = int(rng.integers(0, cfg.num_tensors)) if rng.random() < 0.5 else None
            ctx.set(dut.count, count is not None)
            ctx.set(dut.count_tensor, count or 0)

            zeroing = ref.zero is not None
            ready = not zeroing and not busy
            assert ctx.get(dut.csr.ready) == ready, cycle
            assert ctx.get(dut.zeroing) == zeroing, cycle
            if zeroing:
                assert ctx.get(dut.zero_line) == ref.zero[0], cycle
                seen["zeroed"] += 1
            assert ctx.get(dut.stall) == (zeroing or (csr is not None and ready)), cycle
            assert ctx.get(dut.timeout) == ref.timeout, cycle
            assert ctx.get(dut.complete) == ref.complete(), cycle
            seen["complete"] += ref.complete() != 0
            for addr, out in zip(addrs, (dut.req, dut.rwd)):
                want = ref.decode(addr)
                got = {f: ctx.get(getattr(out, f)) for f in ("in_range", "in_window", "line")}
                assert got == {f: want[f] for f in got}, (cycle, addr)
                if want["in_window"]:
                    assert ctx.get(out.tensor) == want["tensor"], (cycle, addr)
                    seen["in_window"] += 1
            ref.step(csr if ready else None, count)
            await ctx.tick()

    simulate(dut, bench)
    assert seen["in_window"] > 100 and seen["complete"] > 50 and seen["zeroed"] > 20


# --- RequestArrival ---------------------------------------------------------------------------

class ArrivalReference:
    """Tracker and queues by their contract: a message takes the lowest free tracker entry (an
    RwD message before a Req message of the same cycle), is a duplicate if its tag is in
    flight (or is the RwD tag of the same cycle), and is dropped, setting the error, when its
    queue or the tracker is full. Age is the arrival cycle, the RwD message the older in a
    cycle; the Req head is "older" when no queued RwD message arrived before it."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.tracker = {}               # slot -> tag
        self.req, self.rwd = [], []     # [(stamp, msg, dup, slot)]
        self.error = 0

    def outputs(self):
        older = bool(self.req) and all(r[0] > self.req[0][0] for r in self.rwd)
        return {"req_older": int(older), "rwd_valid": int(bool(self.rwd)),
                "busy": int(bool(self.tracker)), "error": self.error}

    def step(self, cycle, rwd, req, rwd_pop, req_pop, free):
        cfg = self.cfg
        in_flight = set(self.tracker.values())
        free_slots = [s for s in range(cfg.tracker_slots) if s not in self.tracker]
        dropped = False
        if rwd is not None:
            if len(self.rwd) < cfg.rwd_credits and free_slots:
                slot = free_slots.pop(0)
                self.rwd.append(((cycle, 0), rwd, int(rwd.tag in in_flight), slot))
                self.tracker[slot] = rwd.tag
            else:
                dropped = True
        if req is not None:
            room = len(self.req) < cfg.req_credits or req_pop
            if room and free_slots:
                slot = free_slots.pop(0)
                dup = req.tag in in_flight or (rwd is not None and rwd.tag == req.tag)
                self.req.append(((cycle, 1), req, int(dup), slot))
                self.tracker[slot] = req.tag
            else:
                dropped = True
        if req_pop:
            self.req.pop(0)
        if rwd_pop:
            self.rwd.pop(0)
        for slot in free:
            del self.tracker[slot]
        self.error |= dropped


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_request_arrival_against_reference(seed):
    rng = np.random.default_rng(seed)
    dut = RequestArrival(CFG)
    ref = ArrivalReference(CFG)
    popped = []                          # tracker slots whose messages left the queues
    seen = {"dup": 0, "older": 0, "pops": 0}

    def check_head(head, entry, cycle):
        _, msg, dup, slot = entry
        assert ctx_get(head.dup) == dup and ctx_get(head.slot) == slot, cycle
        assert ctx_get(head.msg.tag) == msg.tag and ctx_get(head.msg.addr) == msg.addr, cycle
        seen["dup"] += dup

    async def bench(ctx):
        nonlocal ctx_get
        ctx_get = ctx.get
        for cycle in range(3000):
            out = ref.outputs()
            for name, want in out.items():
                assert ctx.get(getattr(dut, name)) == want, (cycle, name)
            if ref.req:
                check_head(dut.req_head, ref.req[0], cycle)
            if ref.rwd:
                check_head(dut.rwd_head, ref.rwd[0], cycle)
            seen["older"] += out["req_older"]
            # a host mostly within its credits, sometimes not; tags from a small set
            rwd = req = None
            if rng.random() < 0.45:
                rwd = RwD(1, int(rng.integers(0, 24)), int(rng.integers(0, 1 << 46)),
                          data=int(rng.integers(0, 1 << 62)))
            if rng.random() < 0.45:
                req = Req(1, int(rng.integers(0, 24)), int(rng.integers(0, 1 << 46)))
            req_pop = int(out["req_older"] and rng.random() < 0.5)
            rwd_pop = int(out["rwd_valid"] and not req_pop and rng.random() < 0.5)
            popped.extend(q[0][3] for q, p in ((ref.req, req_pop), (ref.rwd, rwd_pop)) if p)
            seen["pops"] += req_pop + rwd_pop
            free = [s for s in popped if rng.random() < 0.3]
            for s in free:
                popped.remove(s)
            ctx.set(dut.rwd.valid, rwd is not None)
            ctx.set(dut.rwd.payload.as_value(), codec.pack_rwd(rwd) if rwd else 0)
            ctx.set(dut.req.valid, req is not None)
            ctx.set(dut.req.payload.as_value(), codec.pack_req(req) if req else 0)
            ctx.set(dut.req_pop, req_pop)
            ctx.set(dut.rwd_pop, rwd_pop)
            ctx.set(dut.free, sum(1 << s for s in free))
            ref.step(cycle, rwd, req, rwd_pop, req_pop, free)
            await ctx.tick()

    ctx_get = None
    simulate(dut, bench)
    assert ref.error
    assert seen["dup"] > 50 and seen["older"] > 200 and seen["pops"] > 500
