"""A CXL.mem host for the controller's tests, independent of the simulator.

:class:`Host` holds per-channel credits, sends a script of messages and register writes,
accepts responses with random back-pressure, and feeds everything it does and sees to the model
(:class:`tb.cxl.model.ControllerModel`) in cycle order. A simulator adapter calls, once per
clock cycle, :meth:`Host.drive` (the inputs for the cycle) and then, with the outputs settled,
:meth:`Host.sample`. The adapters are ``tests/test_cxl_units.py`` (amaranth.sim) and
``tb/cxl/cocotb_cxl.py`` (cocotb, Icarus and Verilator).

Checks made every cycle: a response carries a tag that is in flight (sent, no response yet);
the host never holds more credits than advertised (no credit is returned twice) and never sends
without one; the controller's sticky ``error`` (a message arrived at a full queue) stays 0.
"""

from __future__ import annotations

import collections
import dataclasses
import random

from . import codec
from .model import ControllerModel, CSRAddr, ModelParams, Req, Response, RwD
from .scoreboard import compare_responses

__all__ = ["Host", "HostError", "Inputs", "Outputs"]


class HostError(AssertionError):
    """A protocol check of the host failed."""


@dataclasses.dataclass
class Inputs:
    req_valid: int = 0
    req_payload: int = 0
    rwd_valid: int = 0
    rwd_payload: int = 0
    ndr_ready: int = 0
    drs_ready: int = 0
    csr_valid: int = 0
    csr_payload: int = 0


@dataclasses.dataclass
class Outputs:
    ndr_valid: int
    ndr_payload: int
    drs_valid: int
    drs_payload: int
    req_credit: int
    rwd_credit: int
    csr_ready: int
    idle: int
    error: int


class Host:
    """Credit-holding host with a script of messages.

    Parameters
    ----------
    config : hdl.cxl.CXLMemConfig
    seed : int
    send_pct : int
        Percent of cycles in which the host offers its next message on a channel that has a
        credit.
    ready_pct : int or (int, int)
        Percent of cycles the host accepts a response on NDR and DRS (random back-pressure).
    memory : dict, optional
        The memory's contents at the start (line -> int), for the model.
    """

    def __init__(self, config, *, seed: int = 1, send_pct: int = 100, ready_pct=100,
                 memory: dict | None = None):
        self.config = config
        self.model = ControllerModel(ModelParams.of(config), memory)
        self.rng = random.Random(seed)
        self.send_pct = send_pct
        self.ready_pct = (ready_pct, ready_pct) if isinstance(ready_pct, int) else ready_pct
        self.credits = {"req": config.req_credits, "rwd": config.rwd_credits}
        self.min_credits = dict(self.credits)
        self.script: collections.deque = collections.deque()
        self.outstanding: collections.Counter = collections.Counter()
        self._pending: dict = collections.defaultdict(collections.deque)   # tag -> messages
        self.received: list[Response] = []
        #: (message, response) pairs: a response answers the oldest message with its tag
        self.answers: list = []
        self.sent = {"req": 0, "rwd": 0}
        self.cycle = 0
        self.log: list = []             # (cycle, event, detail) of every message and response
        self._driven = Inputs()
        self._driven_msgs: dict = {}
        self._driven_csr = None

    # -- scripting --------------------------------------------------------------------------

    def req(self, opcode, addr, tag=None):
        """Queue an M2S Req. ``tag=None``: a random tag not in flight, chosen when sent;
        ``tag="dup"``: a tag in flight when sent (a duplicate), or a random one if none is."""
        self.script.append(("req", Req(int(opcode), tag, addr)))

    def rwd(self, opcode, addr, data=0, byte_enable=(1 << 64) - 1, poison=0, tag=None):
        """Queue an M2S RwD (``tag=None`` as for :meth:`req`)."""
        self.script.append(("rwd", RwD(int(opcode), tag, addr, data, byte_enable, poison)))

    def csr(self, addr, data, *, expire=False, when_idle=True):
        """Queue a register write; it is sent once every earlier message has been answered
        (``when_idle``) and, with ``expire``, tells the model that held reads time out now."""
        self.script.append(("csr", (int(addr), int(data), expire, when_idle)))

    @property
    def done(self) -> bool:
        """Script sent and every response received."""
        return not self.script and not sum(self.outstanding.values()) and self._driven_csr is None

    # -- per cycle --------------------------------------------------------------------------

    def _free_tag(self):
        while True:
            tag = self.rng.randrange(1 << 16)
            if not self.outstanding[tag]:
                return tag

    def drive(self) -> Inputs:
        """The inputs for this cycle."""
        inp = Inputs()
        rng = self.rng
        inp.ndr_ready = int(rng.randrange(100) < self.ready_pct[0])
        inp.drs_ready = int(rng.randrange(100) < self.ready_pct[1])
        self._driven_msgs = {}
        if self._driven_csr is not None:            # hold until accepted
            inp.csr_valid, inp.csr_payload = 1, codec.pack_csr(*self._driven_csr[:2])
        elif self.script and self.script[0][0] == "csr":
            addr, data, expire, when_idle = self.script[0][1]
            if not when_idle or not sum(self.outstanding.values()):
                self.script.popleft()
                self._driven_csr = (addr, data, expire)
                inp.csr_valid, inp.csr_payload = 1, codec.pack_csr(addr, data)
        else:
            # per channel, the first message of the script before the next register write:
            # the two channels are independent (a Req waiting for a credit does not hold back
            # the RwD messages behind it)
            first = {}
            for index, (kind, msg) in enumerate(self.script):
                if kind == "csr" or len(first) == 2:
                    break
                first.setdefault(kind, index)
            for kind in sorted(first, key=first.get):
                if self.credits[kind] == 0 or rng.randrange(100) >= self.send_pct:
                    continue
                msg = self.script[first[kind]][1]
                if msg.tag == "dup":
                    live = sorted(t for t, n in self.outstanding.items() if n)
                    msg = dataclasses.replace(msg, tag=rng.choice(live) if live else None)
                if msg.tag is None:
                    # never a tag in flight, nor the tag of the other message of this cycle
                    other = {m.tag for m in self._driven_msgs.values()}
                    tag = self._free_tag()
                    while tag in other:
                        tag = self._free_tag()
                    msg = dataclasses.replace(msg, tag=tag)
                self._driven_msgs[kind] = msg
                self.credits[kind] -= 1
                self.min_credits[kind] = min(self.min_credits[kind], self.credits[kind])
            for index in sorted((first[k] for k in self._driven_msgs), reverse=True):
                del self.script[index]
            if "req" in self._driven_msgs:
                inp.req_valid, inp.req_payload = 1, codec.pack_req(self._driven_msgs["req"])
            if "rwd" in self._driven_msgs:
                inp.rwd_valid, inp.rwd_payload = 1, codec.pack_rwd(self._driven_msgs["rwd"])
        self._driven = inp
        return inp

    def sample(self, out: Outputs) -> None:
        """The settled outputs of this cycle (after :meth:`drive`'s inputs were applied)."""
        inp = self._driven
        if out.error:
            raise HostError(f"cycle {self.cycle}: the controller's error output is set (a "
                            f"message arrived at a full queue)")
        # arrivals, RwD first (the older of one cycle), then responses accepted this cycle
        for kind in ("rwd", "req"):
            msg = self._driven_msgs.get(kind)
            if msg is not None:
                self.outstanding[msg.tag] += 1
                self._pending[msg.tag].append(msg)
                self.sent[kind] += 1
                self.log.append((self.cycle, kind, msg))
                (self.model.rwd if kind == "rwd" else self.model.req)(msg)
        for channel, valid, ready, payload in (
                ("ndr", out.ndr_valid, inp.ndr_ready, out.ndr_payload),
                ("drs", out.drs_valid, inp.drs_ready, out.drs_payload)):
            if valid and ready:
                rsp = (codec.unpack_ndr if channel == "ndr" else codec.unpack_drs)(payload)
                if codec.meta_field_of(payload, channel) != 0b11:
                    raise HostError(f"cycle {self.cycle}: {rsp} has MetaField "
                                    f"{codec.meta_field_of(payload, channel):#b}, not NoOp")
                if not self.outstanding[rsp.tag]:
                    raise HostError(f"cycle {self.cycle}: {rsp} carries a tag that is not in "
                                    f"flight")
                self.outstanding[rsp.tag] -= 1
                self.answers.append((self._pending[rsp.tag].popleft(), rsp))
                self.model.received(rsp.tag)
                self.received.append(rsp)
                self.log.append((self.cycle, channel, rsp))
        for kind, pulse in (("req", out.req_credit), ("rwd", out.rwd_credit)):
            if pulse:
                self.credits[kind] += 1
                limit = getattr(self.config, f"{kind}_credits")
                if self.credits[kind] > limit:
                    raise HostError(f"cycle {self.cycle}: {kind} credit returned beyond the "
                                    f"{limit} advertised")
        if inp.csr_valid and out.csr_ready:
            addr, data, expire = self._driven_csr
            self._driven_csr = None
            self.model.csr(addr, data)
            if expire:
                self.model.expire_held()
            self.log.append((self.cycle, "csr", (CSRAddr(addr).name, data)))
        self.cycle += 1

    # -- end of test ------------------------------------------------------------------------

    def check(self) -> None:
        """Everything answered, credits all back, responses equal to the model's."""
        if sum(self.outstanding.values()):
            left = [f"{t:#06x}" for t, n in self.outstanding.items() if n]
            raise HostError(f"{len(left)} tags never answered: {', '.join(left[:10])}")
        for kind in ("req", "rwd"):
            limit = getattr(self.config, f"{kind}_credits")
            if self.credits[kind] != limit:
                raise HostError(f"{kind}: {self.credits[kind]} credits back of {limit}")
        compare_responses(self.received, self.model.responses)
