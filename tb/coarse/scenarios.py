"""Scenarios of the COARSE sync core (``hdl.coarse.SyncCore``) and a simulator-independent
host that drives one: adapters apply :meth:`SyncHost.drive`'s words each cycle and hand back
the settled outputs (amaranth.sim in tests/test_coarse_sync_core.py, cocotb in
``tb.coarse.cocotb_sync_core``)."""

from __future__ import annotations

import numpy as np

from golden_model.coarse.functional import group_sum
from hdl.coarse.sync_core import SyncCore

from .lines import line_value, random_lines

__all__ = ["PARAMS_ENV", "CLIENTS", "QUEUE_LINES", "TENSORS", "client_orders",
           "copies_and_writes", "expected_lines", "SyncHost", "pack", "unpack", "layouts_of",
           "DEVICE_GROUPS", "DEVICE_ROWS", "DEVICE_QUEUE_LINES", "DeviceRingScenario",
           "DevicesHost"]

#: The environment variable naming the JSON parameters of the COARSE cocotb modules.
PARAMS_ENV = "COARSE_TB_PARAMS"

CLIENTS, QUEUE_LINES = 3, 32
#: tensor -> (base, rows, mask): slots packed in the client queues; tensor 3 has no copy here
TENSORS = {0: (0, 5, 0b111), 1: (5, 1, 0b010), 2: (6, 9, 0b101), 3: (15, 3, 0b000)}


def client_orders(rng, tensors=TENSORS):
    """Client 0 sends its tensors in tensor order, client 1 in reverse, client 2 at random;
    each only the tensors whose mask has it."""
    ids = list(tensors)
    base = [ids, ids[::-1], [ids[k] for k in rng.permutation(len(ids))]]
    return [[t for t in o if tensors[t][2] >> c & 1] for c, o in enumerate(base)]


def copies_and_writes(etype, rng, orders, tensors=TENSORS, clients=CLIENTS):
    """``(copies, writes)``: every client's copy of every tensor (``{tensor: (clients, rows,
    lanes)}`` bit patterns) and the writes ``(client, tensor, row, line)``: client ``c`` sends
    its tensors in ``orders[c]``, each tensor's rows shuffled, the clients' streams
    interleaved at random."""
    copies = {t: random_lines(etype, rng, clients * rows).reshape(clients, rows, -1)
              for t, (_, rows, _) in tensors.items()}
    per_client = []
    for c, order in enumerate(orders):
        seq = []
        for t in order:
            seq += [(c, t, int(r), line_value(copies[t][c, r], etype))
                    for r in rng.permutation(tensors[t][1])]
        per_client.append(seq)
    writes = []
    while any(per_client):
        live = [s for s in per_client if s]
        writes.append(live[rng.integers(len(live))].pop(0))
    return copies, writes


def expected_lines(etype, copies, tensor, tensors=TENSORS):
    """The golden partial sums of ``tensor``'s rows (``group_sum`` over its mask's clients in
    client order), as line values."""
    _, rows, mask = tensors[tensor]
    chosen = [c for c in range(copies[tensor].shape[0]) if mask >> c & 1]
    lanes = copies[tensor].shape[2]
    return [line_value(etype.to_bits(group_sum(etype.from_bits(copies[tensor][chosen, r]),
                                               lanes, etype.dtype)), etype)
            for r in range(rows)]


def pack(layout, **fields):
    """The integer of an ``amaranth.lib.data.StructLayout`` value (its fields by name)."""
    word = 0
    for name, field in layout:
        value = int(fields[name])
        assert 0 <= value < 1 << field.width, (name, value)
        word |= value << field.offset
    return word


def unpack(layout, word):
    return {name: (int(word) >> f.offset) & ((1 << f.width) - 1) for name, f in layout}


class SyncHost:
    """Programs every tensor, then sends ``writes`` one per cycle with random gaps, under
    random back-pressure on ``o``; collects each tensor's lines.

    Parameters
    ----------
    layouts : dict
        ``{"program", "write", "o"}``: the payload layouts of the sync core's streams.
    tensors : dict
        tensor -> (base, rows, mask).
    writes : list of (client, tensor, row, line)
    seed : int
    send_pct, ready_pct : int
        Chance (%) that a write is offered in a cycle, that ``o`` is ready.
    """

    def __init__(self, layouts, tensors, writes, *, seed=1, send_pct=80, ready_pct=70):
        self.layouts = layouts
        self.rng = np.random.default_rng(seed)
        self.programs = [pack(layouts["program"], tensor=t, base=base, last_row=rows - 1,
                              mask=mask) for t, (base, rows, mask) in tensors.items()]
        self.writes = [pack(layouts["write"], client=c, tensor=t, row=r, line=line)
                       for c, t, r, line in writes]
        self.send_pct, self.ready_pct = send_pct, ready_pct
        self.expected = sum(rows for _, rows, _ in tensors.values())
        self.got, self.order = {}, []
        self.error = 0
        self.cycle = 0
        self._ready = 0

    @property
    def done(self):
        return not self.programs and not self.writes and \
            sum(map(len, self.got.values())) == self.expected

    def drive(self):
        """This cycle's inputs: ``{program_valid, program, write_valid, write, o_ready}``."""
        inp = {"program_valid": 0, "program": 0, "write_valid": 0, "write": 0}
        if self.programs:
            inp.update(program_valid=1, program=self.programs.pop(0))
        elif self.writes and self.rng.integers(100) < self.send_pct:
            inp.update(write_valid=1, write=self.writes.pop(0))
        self._ready = int(self.rng.integers(100) < self.ready_pct)
        inp["o_ready"] = self._ready
        return inp

    def sample(self, o_valid, o_payload, error):
        """The settled outputs of this cycle."""
        if o_valid and self._ready:
            out = unpack(self.layouts["o"], o_payload)
            if out["tensor"] not in self.got:
                self.order.append(out["tensor"])
            lines = self.got.setdefault(out["tensor"], [])
            assert out["row"] == len(lines), (
                f"cycle {self.cycle}: tensor {out['tensor']} row {out['row']} after "
                f"{len(lines)} lines")
            lines.append(out["line"])
        self.error = error
        self.cycle += 1


def layouts_of(core):
    """``{"program", "write", "o"}``: the payload layouts of a ``SyncCore``'s streams (of
    ``CoarseDevices``' sync cores too)."""
    while not isinstance(core, SyncCore):
        core = core.devices[0] if hasattr(core, "devices") else core.core
    return {name: core.signature.members[name].signature.members["payload"].shape
            for name in ("program", "write", "o")}


# --- the devices and their ring (hdl.coarse.CoarseDevices) -----------------------------------

#: device -> the clients whose copies it receives (device 2 none: it contributes +0)
DEVICE_GROUPS = {0: (0, 1), 1: (2,), 2: ()}
DEVICE_ROWS = 3
DEVICE_LINK_LATENCY = 2
#: each device's client queues: one tensor slot of ``DEVICE_ROWS`` rows (a power of two >= it)
DEVICE_QUEUE_LINES = 4


class DeviceRingScenario:
    """One shard through ``CoarseDevices``: three workers' copies (``DEVICE_ROWS`` lines each)
    to the devices of ``DEVICE_GROUPS``, the ring in ``direction``; everything a test needs:
    ``topology``, ``config``, ``lowered``, ``copies`` (devices, clients, rows, lanes) bit
    patterns, ``partials`` and ``expected`` (devices, elements) of the element type (the golden
    model: ``group_sum``, then ``device_ring_schedule`` executed), ``writes`` per device."""

    def __init__(self, etype, direction, seed=1):
        from golden_model.coarse.functional import device_ring_schedule
        from golden_model.executor import execute
        from golden_model.lowering import lower
        from golden_model.topology import parse_topology
        from hdl.config import network_config_for
        self.etype, self.direction = etype, direction
        devices, clients = len(DEVICE_GROUPS), CLIENTS
        rng = np.random.default_rng(seed)
        lanes = 512 // etype.bits
        self.elements = elements = DEVICE_ROWS * lanes
        self.copies = random_lines(etype, rng, devices * clients * DEVICE_ROWS).reshape(
            devices, clients, DEVICE_ROWS, lanes)
        self.partials = np.stack([
            group_sum(etype.from_bits(self.copies[v, list(g)].reshape(len(g), elements)),
                      elements, etype.dtype) for v, g in DEVICE_GROUPS.items()])
        self.expected = execute(device_ring_schedule(devices, elements, direction, lanes),
                                self.partials)
        self.topology = parse_topology(f"ring:{devices}", link_latency=DEVICE_LINK_LATENCY)
        schedule = device_ring_schedule(devices, elements, direction, lanes).relabeled(
            range(devices), topology=self.topology)
        self.lowered = lower(schedule, elements_per_flit=128 // etype.bits)
        self.config = network_config_for(self.lowered, dtype=etype.name,
                                         elems_per_flit=128 // etype.bits,
                                         link_latency=DEVICE_LINK_LATENCY)
        self.writes = []
        for v, group in DEVICE_GROUPS.items():
            w = [(c, r, line_value(self.copies[v, c, r], etype)) for c in group
                 for r in range(DEVICE_ROWS)]
            rng.shuffle(w)
            self.writes.append(w)

    def devices(self, config=None):
        """The ``CoarseDevices`` of this scenario (``config``: another ``NIConfig``)."""
        from hdl.coarse import CoarseDevices
        return CoarseDevices(self.topology, config or self.config, CLIENTS, DEVICE_QUEUE_LINES,
                             tensors=1)

    def unpack(self, flits):
        """The devices' buffers read back (devices, buffer flits) words -> (devices, elements)."""
        from hdl.host import flit_elements
        return self.lowered.unpack(np.array([[flit_elements(self.config, w) for w in node]
                                             for node in flits]))


class DevicesHost:
    """Drives ``CoarseDevices`` through a ``DeviceRingScenario``, cycle by cycle, whatever the
    simulator: the ring's tables through each device's host port, the sync cores' programs,
    the workers' writes (random gaps), until the devices have staged the shard; a start pulse;
    the wait for ``done`` and for the devices to drain it into their parameter storage; the
    read-back of every device's buffer (random back-pressure). ``drive()`` gives
    the inputs of a cycle, ``sample()`` takes its settled outputs."""

    def __init__(self, scenario, layouts, seed=1, max_cycles=5000):
        from hdl.host import read_commands, table_commands
        self.s = scenario
        self.layouts = layouts
        self.rng = np.random.default_rng(seed)
        n = len(DEVICE_GROUPS)
        cfg, low = scenario.config, scenario.lowered
        self.cmds = [table_commands(cfg, low, v) for v in range(n)]
        self.reads = [read_commands(cfg, low.buffer_flits) for _ in range(n)]
        self.writes = [[pack(layouts["write"], client=c, tensor=0, row=r, line=line)
                        for c, r, line in w] for w in scenario.writes]
        self.programs = [pack(layouts["program"], tensor=0, base=0, last_row=DEVICE_ROWS - 1,
                              mask=sum(1 << c for c in g)) for g in DEVICE_GROUPS.values()]
        self.phase = "tables"
        self.rsps = [[] for _ in range(n)]
        self.cycle, self.max_cycles = 0, max_cycles
        self.ring_cycles = None
        self.error = 0
        self._inp = None

    @property
    def done(self):
        return self.phase == "finished"

    def drive(self):
        n = len(DEVICE_GROUPS)
        inp = {"start": 0, "host_cmd_valid": [0] * n, "host_cmd": [0] * n,
               "host_rsp_ready": [0] * n, "program_valid": [0] * n, "program": [0] * n,
               "write_valid": [0] * n, "write": [0] * n}
        if self.phase in ("tables", "read"):
            queue = self.cmds if self.phase == "tables" else self.reads
            for v in range(n):
                if queue[v]:
                    inp["host_cmd_valid"][v], inp["host_cmd"][v] = 1, queue[v][0]
                inp["host_rsp_ready"][v] = int(self.rng.random() < 0.7)
        elif self.phase == "program":
            inp["program_valid"], inp["program"] = [1] * n, list(self.programs)
        elif self.phase == "writes":
            for v in range(n):
                if self.writes[v] and self.rng.random() < 0.7:
                    inp["write_valid"][v], inp["write"][v] = 1, self.writes[v][0]
        elif self.phase == "start":
            inp["start"] = 1
        self._inp = inp
        return inp

    def sample(self, out):
        """``out``: ``{host_cmd_ready, host_rsp_valid, host_rsp, busy}`` lists per device and
        ``done``, ``error``, ``cycles``, ``staged``."""
        inp, n = self._inp, len(DEVICE_GROUPS)
        self.cycle += 1
        assert self.cycle < self.max_cycles, f"stalled in phase {self.phase}"
        self.error |= out["error"]
        if self.phase in ("tables", "read"):
            queue = self.cmds if self.phase == "tables" else self.reads
            for v in range(n):
                if inp["host_cmd_valid"][v] and out["host_cmd_ready"][v]:
                    queue[v].pop(0)
                if out["host_rsp_valid"][v] and inp["host_rsp_ready"][v]:
                    self.rsps[v].append(out["host_rsp"][v])
            if self.phase == "tables" and not any(queue):
                self.phase = "program"
            elif self.phase == "read" and not any(queue) and all(
                    len(r) == self.s.lowered.buffer_flits for r in self.rsps):
                self.phase = "finished"
        elif self.phase == "program":
            self.phase = "writes"
        elif self.phase == "writes":
            for v in range(n):
                if inp["write_valid"][v]:
                    self.writes[v].pop(0)
            if not any(self.writes) and out["staged"]:
                self.phase = "start"
        elif self.phase == "start":
            self.phase = "wait"
        elif self.phase == "wait" and out["done"]:
            self.ring_cycles = out["cycles"]
            self.phase = "drain"
        elif self.phase == "drain" and not any(out["busy"]):
            self.phase = "read"

    def result(self):
        return self.s.unpack(self.rsps)
