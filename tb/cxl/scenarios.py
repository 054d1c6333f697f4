"""Request scripts for the controller's tests, shared by amaranth.sim and cocotb.

Each function appends messages and register writes to a :class:`tb.cxl.host.Host` script; the
adapter then runs the host until it is done, and :meth:`Host.check` compares everything with the
model.
"""

from __future__ import annotations

import numpy as np

from .model import FULL_BE, CSRAddr, DRSOp, ReqOp, RwDOp, int32_to_line

__all__ = ["zero_memory", "program_window", "readback", "random_mix",
           "bad_requests", "SyncRound", "BIG_TIMEOUT"]

#: A ``TIMEOUT`` no test reaches (held reads wait for their tensor).
BIG_TIMEOUT = (1 << 32) - 1


def zero_memory(host) -> None:
    """Zero every line with the window's zeroing engine, then disable the window."""
    cfg = host.config
    shift = cfg.max_group_shift
    host.csr(CSRAddr.BASE, 0)
    host.csr(CSRAddr.SHIFT, shift)
    host.csr(CSRAddr.GROUPS, cfg.num_tensors)
    host.csr(CSRAddr.CTRL, 3)
    host.csr(CSRAddr.GROUPS, 0)
    if cfg.num_tensors << shift < cfg.num_lines:       # the window cannot cover the memory
        for base in range(cfg.num_tensors << shift, cfg.num_lines, cfg.num_tensors << shift):
            host.csr(CSRAddr.BASE, base)
            host.csr(CSRAddr.GROUPS, cfg.num_tensors)
            host.csr(CSRAddr.CTRL, 2)
            host.csr(CSRAddr.GROUPS, 0)
    host.csr(CSRAddr.BASE, 0)
    host.csr(CSRAddr.SHIFT, 0)


def program_window(host, base, shift, groups, contrib, timeout=BIG_TIMEOUT, zero=True):
    """Program the accumulate window and start a round (counters cleared, lines zeroed)."""
    host.csr(CSRAddr.BASE, base)
    host.csr(CSRAddr.SHIFT, shift)
    host.csr(CSRAddr.GROUPS, groups)
    host.csr(CSRAddr.CONTRIB, contrib)
    host.csr(CSRAddr.TIMEOUT, timeout)
    host.csr(CSRAddr.CTRL, 3 if zero else 1)


def readback(host, lines=None) -> None:
    """Disable the window and read every line (the memory image goes through the scoreboard)."""
    host.csr(CSRAddr.GROUPS, 0)
    for line in range(host.config.num_lines) if lines is None else lines:
        host.req(ReqOp.MemRd, line)


def _random_line(rng):
    return int.from_bytes(rng.randbytes(64), "little")


def random_mix(host, count, *, lines, out_of_range_pct=3, bad_pct=3, dup_pct=2,
               partial_pct=40, inv_pct=10, read_pct=45) -> None:
    """``count`` random messages over ``lines`` (a sequence of line addresses): reads, MemInv,
    full and partial writes, a few out-of-range addresses, unsupported opcodes, poisoned writes,
    and a few duplicates of a tag in flight (chosen by the host when it sends them)."""
    rng = host.rng
    for _ in range(count):
        r = rng.randrange(100)
        addr = rng.choice(lines)
        if rng.randrange(100) < out_of_range_pct:
            addr = rng.choice([host.config.num_lines, host.config.num_lines + rng.randrange(64),
                               (1 << 46) - 1, 1 << 45])
        tag = "dup" if rng.randrange(100) < dup_pct else None
        if r < read_pct:
            op = ReqOp.MemRd
            if rng.randrange(100) < bad_pct:
                op = rng.choice([ReqOp.MemSpecRd, ReqOp.MemRdData, ReqOp.MemClnEvct, 0b1111])
            host.req(op, addr, tag=tag)
        elif r < read_pct + inv_pct:
            host.req(ReqOp.MemInv, addr, tag=tag)
        else:
            op = RwDOp.MemWrPtl if rng.randrange(100) < partial_pct else RwDOp.MemWr
            if rng.randrange(100) < bad_pct:
                op = rng.choice([0, 0b0100, 0b1111])
            be = rng.getrandbits(64) if op == RwDOp.MemWrPtl else rng.choice(
                [FULL_BE, rng.getrandbits(64)])        # MemWr ignores byte enables
            poison = int(rng.randrange(100) < bad_pct)
            host.rwd(op, addr, _random_line(rng), be, poison, tag=tag)


class SyncRound:
    """One COARSE synchronisation round: ``workers`` push int32 shards into the window and
    read the reduced tensor back.

    Each of ``groups`` tensors is ``elements`` int32 values (the last line is written with
    ``MemWrPtl`` and byte enables when ``elements`` is not a multiple of 16). Lines go to the
    window in a random interleaving of the workers; each worker reads every line of every
    tensor back right after writing its own shard, so most reads arrive before the tensor is
    complete and are held.
    """

    def __init__(self, host, *, workers, groups, shift, base, elements=None, seed=0):
        self.host = host
        self.workers = workers
        self.groups = groups
        self.shift = shift
        self.base = base
        lines = 1 << shift
        self.elements = lines * 16 if elements is None else elements
        if not (lines - 1) * 16 < self.elements <= lines * 16:
            raise ValueError(f"a tensor of {self.elements} elements does not fill the "
                             f"{lines} lines of a group")
        rng = np.random.default_rng(seed)
        # full int32 range: the sum wraps around
        self.shards = rng.integers(-2**31, 2**31, size=(workers, groups, self.elements),
                                   dtype=np.int64).astype(np.int32)

    @property
    def expected(self) -> np.ndarray:
        """(groups, elements) int32: numpy's wrap-around sum over the workers."""
        return self.shards.sum(axis=0, dtype=np.int32)

    def script(self) -> None:
        host, rng = self.host, self.host.rng
        lines = 1 << self.shift
        program_window(host, self.base, self.shift, self.groups, self.workers)
        per_worker = []
        for w in range(self.workers):
            msgs = []
            for g in range(self.groups):
                for i in range(lines):
                    vals = self.shards[w, g, 16 * i:16 * i + 16]
                    addr = self.base + (g << self.shift) + i
                    if len(vals) < 16:
                        be = (1 << (4 * len(vals))) - 1
                        msgs.append(("rwd", RwDOp.MemWrPtl, addr, int32_to_line(vals), be))
                    else:
                        msgs.append(("rwd", RwDOp.MemWr, addr, int32_to_line(vals), FULL_BE))
            rng.shuffle(msgs)
            reads = [("req", ReqOp.MemRd, self.base + (g << self.shift) + i, g, i)
                     for g in range(self.groups) for i in range(lines)]
            rng.shuffle(reads)
            per_worker.append(msgs + reads)
        # interleave the workers' streams at random, each in its own order
        while any(per_worker):
            w = rng.choice([k for k, s in enumerate(per_worker) if s])
            item = per_worker[w].pop(0)
            if item[0] == "rwd":
                _, op, addr, data, be = item
                host.rwd(op, addr, data, be)
            else:
                host.req(item[1], item[2])

    def check(self) -> None:
        """Every read of the round returned the numpy sum, bit for bit, without poison."""
        host = self.host
        lines = 1 << self.shift
        got = {}
        first, last = self.base, self.base + (self.groups << self.shift)
        for msg, rsp in host.answers:
            if rsp.channel == "drs" and first <= msg.addr < last:
                if rsp.poison or rsp.opcode != DRSOp.MemData:
                    raise AssertionError(f"round read of line {msg.addr} failed: {rsp}")
                got.setdefault(msg.addr, []).append(rsp.data)
        expected = self.expected
        for g in range(self.groups):
            for i in range(lines):
                addr = self.base + (g << self.shift) + i
                want = int32_to_line(expected[g, 16 * i:16 * i + 16])
                datas = got.get(addr, [])
                if len(datas) != self.workers:
                    raise AssertionError(f"line {addr}: {len(datas)} reads answered, "
                                         f"expected {self.workers}")
                for d in datas:
                    if d != want:
                        raise AssertionError(f"line {addr} of tensor {g}: read {d:#x}, numpy "
                                             f"sum {want:#x}")


def bad_requests(host, *, good_lines) -> None:
    """Requests the controller must reject, around a few good ones: out of range reads, writes
    and MemInv; unsupported opcodes; a poisoned write; tags already in flight."""
    n = host.config.num_lines
    for addr in (n, n + 1, (1 << 46) - 1):
        host.req(ReqOp.MemRd, addr)
        host.req(ReqOp.MemInv, addr)
        host.rwd(RwDOp.MemWr, addr, _random_line(host.rng))
        host.rwd(RwDOp.MemWrPtl, addr, _random_line(host.rng), (1 << 64) - 1)
    for op in (ReqOp.MemSpecRd, ReqOp.MemRdData, ReqOp.MemInvNT, 0b1111):
        host.req(op, good_lines[0])
    for op in (0, 0b0100, 0b1111):
        host.rwd(op, good_lines[1], _random_line(host.rng))
    host.rwd(RwDOp.MemWr, good_lines[2], _random_line(host.rng), poison=1)
    # duplicates: the same tag on both channels in one cycle, and back to back
    for tag in (0x1234, 0x4321):
        host.rwd(RwDOp.MemWr, good_lines[3], _random_line(host.rng), tag=tag)
        host.req(ReqOp.MemRd, good_lines[3], tag=tag)
        host.rwd(RwDOp.MemWrPtl, good_lines[4], _random_line(host.rng), 0xFF, tag=tag)
        host.req(ReqOp.MemInv, good_lines[4], tag=tag)
    # one good write per good line, so the read-back shows they (and only they) changed
    for line in good_lines:
        host.rwd(RwDOp.MemWr, line, _random_line(host.rng))
