"""Golden model of ``hdl.cxl.CXLMemController``: the scoreboard's reference.

Pure Python (no Amaranth, no cocotb). The model is a function of what the host sees, in cycle
order: the messages it sent (:meth:`ControllerModel.rwd`, :meth:`ControllerModel.req`), the
responses it accepted (:meth:`ControllerModel.received`, which ends a tag's time in flight), the
register writes (:meth:`ControllerModel.csr`, made while nothing is in flight) and
:meth:`ControllerModel.expire_held` (every held read times out: the tests set ``TIMEOUT`` low
only after their traffic). Within a cycle the testbench reports the RwD message, then the Req
message, then the responses accepted in that cycle (docs/hardware.md: a tag is in flight until
the cycle its response is accepted, inclusive; in one cycle the RwD message is the older).

Semantics (docs/hardware.md, "CXLMemController (COARSE)"): operations take effect one at a time
in this order: a held read whose tensor completed, else the oldest queued message, except that a
window read that must be held while every hold slot is busy lets younger RwD messages pass. This
order does not depend on the cycles the controller takes (its decisions change only when an
operation takes effect), so the model processes every message as soon as it may and its
responses, as a multiset, and memory image equal the hardware's whatever the back-pressure.
"""

from __future__ import annotations

import collections
import dataclasses
import enum

__all__ = ["ReqOp", "RwDOp", "NDROp", "DRSOp", "CSRAddr", "Req", "RwD", "Response",
           "ModelParams", "ControllerModel", "LINE_BYTES", "FULL_BE", "line_to_int32",
           "int32_to_line"]

LINE_BYTES = 64
FULL_BE = (1 << LINE_BYTES) - 1
_M32 = 0xFFFF_FFFF


class ReqOp(enum.IntEnum):
    """M2S Req MemOpcode (CXL 2.0)."""
    MemInv = 0b0000
    MemRd = 0b0001
    MemRdData = 0b0010
    MemRdFwd = 0b0011
    MemWrFwd = 0b0100
    MemSpecRd = 0b1000
    MemInvNT = 0b1001
    MemClnEvct = 0b1010


class RwDOp(enum.IntEnum):
    """M2S RwD MemOpcode (CXL 2.0)."""
    MemWr = 0b0001
    MemWrPtl = 0b0010


class NDROp(enum.IntEnum):
    """S2M NDR opcode; ``CmpErr`` is the controller's (reserved encoding)."""
    Cmp = 0b000
    CmpS = 0b001
    CmpE = 0b010
    CmpErr = 0b111


class DRSOp(enum.IntEnum):
    """S2M DRS opcode; ``MemDataNXM`` as in CXL 3.x."""
    MemData = 0b000
    MemDataNXM = 0b001


class CSRAddr(enum.IntEnum):
    BASE = 0
    GROUPS = 1
    SHIFT = 2
    CONTRIB = 3
    TIMEOUT = 4
    CTRL = 5


@dataclasses.dataclass(frozen=True)
class Req:
    """An M2S Req message (``opcode`` may be any 4-bit value)."""
    opcode: int
    tag: int
    addr: int               # line address (byte address bits [51:6])


@dataclasses.dataclass(frozen=True)
class RwD:
    """An M2S RwD message; ``data`` is the 512-bit line (byte i = bits 8i..8i+7)."""
    opcode: int
    tag: int
    addr: int
    data: int = 0
    byte_enable: int = FULL_BE
    poison: int = 0


@dataclasses.dataclass(frozen=True)
class Response:
    """An S2M response: ``channel`` "ndr" or "drs"; ``data`` and ``poison`` 0 on NDR."""
    channel: str
    opcode: int
    tag: int
    poison: int = 0
    data: int = 0

    def __str__(self):
        name = (NDROp if self.channel == "ndr" else DRSOp)(self.opcode).name
        extra = f" poison={self.poison} data={self.data:#x}" if self.channel == "drs" else ""
        return f"{self.channel.upper()} {name} tag={self.tag:#06x}{extra}"


@dataclasses.dataclass(frozen=True)
class ModelParams:
    """The controller parameters the model depends on (an ``hdl.cxl.CXLMemConfig`` has them)."""
    num_lines: int
    hold_slots: int
    num_tensors: int
    max_group_shift: int
    default_timeout: int = 4096

    @classmethod
    def of(cls, config) -> "ModelParams":
        return cls(num_lines=config.num_lines, hold_slots=config.hold_slots,
                   num_tensors=config.num_tensors, max_group_shift=config.max_group_shift,
                   default_timeout=config.default_timeout)

    @property
    def counter_max(self) -> int:
        return (1 << (8 + self.max_group_shift)) - 1


def line_to_int32(line: int) -> list[int]:
    """The 16 int32 elements of a 512-bit line (element e = bits 32e..32e+31)."""
    out = []
    for e in range(LINE_BYTES // 4):
        v = (line >> (32 * e)) & _M32
        out.append(v - (1 << 32) if v >> 31 else v)
    return out


def int32_to_line(values) -> int:
    """A 512-bit line of up to 16 int32 values (missing elements are zero)."""
    line = 0
    for e, v in enumerate(values):
        line |= (int(v) & _M32) << (32 * e)
    return line


def _merge(old: int, new: int, be: int, accumulate: bool) -> int:
    if accumulate:
        summed = 0
        for e in range(LINE_BYTES // 4):
            s = ((old >> (32 * e)) + (new >> (32 * e))) & _M32
            summed |= s << (32 * e)
        new = summed
    mask = 0
    for i in range(LINE_BYTES):
        if be >> i & 1:
            mask |= 0xFF << (8 * i)
    return (old & ~mask) | (new & mask)


class ControllerModel:
    """The controller as a pure function of the host's event stream.

    Attributes
    ----------
    memory : dict
        Line address -> 512-bit int (lines never written are zero).
    responses : list of Response
        Every response the controller gives, in the model's order.
    counters : list of int
        Arrival counters.
    """

    def __init__(self, params: ModelParams, memory: dict | None = None):
        self.p = params
        self.memory: dict[int, int] = dict(memory or {})
        self.responses: list[Response] = []
        self.counters = [0] * params.num_tensors
        self.base = 0
        self.groups = 0
        self.shift = 0
        self.contrib = 0
        self.timeout = params.default_timeout
        self._in_flight: collections.Counter = collections.Counter()
        self._req_q: collections.deque = collections.deque()    # [Req, dup, ahead]
        self._rwd_q: collections.deque = collections.deque()    # (RwD, dup)
        self._held: list = [None] * params.hold_slots            # (tag, line, tensor)
        self._expiring = False
        #: coverage: reads held, released, expired; RwD messages that passed an older read
        #: waiting for a hold slot; duplicate tags; accumulates
        self.stats: collections.Counter = collections.Counter()

    # -- host events ------------------------------------------------------------------------

    def rwd(self, msg: RwD) -> None:
        dup = self._in_flight[msg.tag] > 0
        self.stats["duplicate"] += dup
        self._in_flight[msg.tag] += 1
        self._rwd_q.append((msg, dup))
        self._run()

    def req(self, msg: Req) -> None:
        dup = self._in_flight[msg.tag] > 0
        self.stats["duplicate"] += dup
        self._in_flight[msg.tag] += 1
        self._req_q.append([msg, dup, len(self._rwd_q)])
        self._run()

    def received(self, tag: int) -> None:
        if self._in_flight[tag] <= 0:
            raise AssertionError(f"response with tag {tag:#06x}, which is not in flight")
        self._in_flight[tag] -= 1

    def csr(self, addr: int, data: int) -> None:
        addr = CSRAddr(addr)
        p = self.p
        if addr is CSRAddr.BASE:
            if data < p.num_lines:
                self.base = data
        elif addr is CSRAddr.GROUPS:
            self.groups = min(data, p.num_tensors)
        elif addr is CSRAddr.SHIFT:
            self.shift = min(data, p.max_group_shift)
        elif addr is CSRAddr.CONTRIB:
            self.contrib = min(data, 255)
        elif addr is CSRAddr.TIMEOUT:
            self.timeout = data
            self._expiring = False
        elif addr is CSRAddr.CTRL:
            if data & 1:
                self.counters = [0] * p.num_tensors
            end = min(self.base + (self.groups << self.shift), p.num_lines)
            if data & 2:
                for line in range(self.base, end):
                    self.memory.pop(line, None)
        self._run()

    def expire_held(self) -> None:
        """Every held read times out, and so does every read held from now on until the next
        ``TIMEOUT`` write (the testbench calls this after writing a small ``TIMEOUT`` once its
        traffic has stopped)."""
        self._expiring = True
        self._run()

    # -- state --------------------------------------------------------------------------------

    @property
    def target(self) -> int:
        return self.contrib << self.shift

    @property
    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    @property
    def held(self) -> int:
        return sum(h is not None for h in self._held)

    def window(self, line: int):
        """Tensor group of ``line``, or None outside the window."""
        if line >= self.p.num_lines or line < self.base:
            return None
        group = (line - self.base) >> self.shift
        return group if group < self.groups else None

    def line(self, line: int) -> int:
        return self.memory.get(line, 0)

    # -- the controller ---------------------------------------------------------------------

    def _respond(self, channel, opcode, tag, poison=0, data=0):
        self.responses.append(Response(channel, int(opcode), tag, poison, data))

    def _needs_hold(self, entry) -> bool:
        msg, dup, _ = entry
        if dup or msg.opcode != ReqOp.MemRd:
            return False
        tensor = self.window(msg.addr)
        return tensor is not None and self.counters[tensor] < self.target

    def _run(self) -> None:
        while True:
            released = [k for k, h in enumerate(self._held)
                        if h is not None and self.counters[h[2]] >= self.target]
            if released:
                tag, line, _ = self._held[released[0]]
                self._held[released[0]] = None
                self.stats["released"] += 1
                self._respond("drs", DRSOp.MemData, tag, 0, self.line(line))
                continue
            if self._expiring:
                k = next((k for k, h in enumerate(self._held) if h is not None), None)
                if k is not None:
                    tag = self._held[k][0]
                    self._held[k] = None
                    self.stats["expired"] += 1
                    self._respond("drs", DRSOp.MemData, tag, 1, 0)
                    continue
            free = [k for k, h in enumerate(self._held) if h is None]
            if self._req_q and self._req_q[0][2] == 0 and not (
                    self._needs_hold(self._req_q[0]) and not free):
                self._issue_req(self._req_q.popleft(), free)
                continue
            if self._rwd_q:
                if self._req_q and self._req_q[0][2] == 0:
                    self.stats["passed_waiting_read"] += 1
                self._issue_rwd(*self._rwd_q.popleft())
                for entry in self._req_q:
                    entry[2] = max(0, entry[2] - 1)
                continue
            return

    def _issue_req(self, entry, free) -> None:
        msg, dup, _ = entry
        is_rd = msg.opcode == ReqOp.MemRd
        if self._needs_hold(entry):
            self._held[free[0]] = (msg.tag, msg.addr, self.window(msg.addr))
            self.stats["held"] += 1
        elif dup:
            if is_rd:
                self._respond("drs", DRSOp.MemData, msg.tag, 1, 0)
            else:
                self._respond("ndr", NDROp.CmpErr, msg.tag)
        elif msg.opcode not in (ReqOp.MemRd, ReqOp.MemInv):
            self._respond("ndr", NDROp.CmpErr, msg.tag)
        elif msg.addr >= self.p.num_lines:
            if is_rd:
                self._respond("drs", DRSOp.MemDataNXM, msg.tag, 1, 0)
            else:
                self._respond("ndr", NDROp.CmpErr, msg.tag)
        elif is_rd:
            self._respond("drs", DRSOp.MemData, msg.tag, 0, self.line(msg.addr))
        else:
            self._respond("ndr", NDROp.Cmp, msg.tag)

    def _issue_rwd(self, msg: RwD, dup: bool) -> None:
        if (dup or msg.poison or msg.addr >= self.p.num_lines
                or msg.opcode not in (RwDOp.MemWr, RwDOp.MemWrPtl)):
            self._respond("ndr", NDROp.CmpErr, msg.tag)
            return
        tensor = self.window(msg.addr)
        be = msg.byte_enable if msg.opcode == RwDOp.MemWrPtl else FULL_BE
        new = _merge(self.line(msg.addr), msg.data, be, tensor is not None)
        if new:
            self.memory[msg.addr] = new
        else:
            self.memory.pop(msg.addr, None)
        if tensor is not None:
            self.stats["accumulated"] += 1
            self.counters[tensor] = min(self.counters[tensor] + 1, self.p.counter_max)
        self._respond("ndr", NDROp.Cmp, msg.tag)
