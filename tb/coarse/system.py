"""A COARSE system workload for ``hdl.coarse.CoarseSystem`` and a simulator-independent host
that runs it (amaranth.sim in tests/test_coarse_system.py, cocotb in
``tb.coarse.cocotb_system``).

``SystemScenario`` takes the golden model's routing tables (``golden_model.coarse.routing``)
for a system and a workload's tensors, random gradients of the element type (``random_lines``:
for floats with zeros of both signs, subnormals, infinities and NaNs), and the golden
result (``golden_model.coarse.functional.synchronise``). Every shard of the tables becomes a
tensor slot in every device's client queues; shards are taken in routing-table order in
**batches** that fit the slots and the queue lines. ``SystemHost`` plays, cycle by cycle:

* the **system host** (control): programs a batch's slots on every device, and whenever the
  devices have staged a shard, loads that shard's ring tables (``device_ring_schedule`` in the
  shard's direction) and pulses ``start``; the next batch once every worker has its reads;
* the **workers**: each sends its copy of every shard of the batch (``MemWr`` of whole lines
  to its shard's device, the addresses of ``CoarseSystem.line_address``) in its own shard
  order, and reads the reduced lines back (``MemRd``, held by the device until the shard is
  reduced), with random gaps between requests and random back-pressure on its responses.
"""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np

from golden_model.coarse.functional import device_ring_schedule, line_elements, synchronise
from golden_model.coarse.routing import routing_table

from .lines import line_value, random_lines
from .scenarios import pack, unpack

__all__ = ["ORDERS", "SystemScenario", "SystemHost"]

#: Worker shard orders: ``table`` (every worker in routing-table order), ``mixed`` (worker 0 in
#: table order, worker 1 reversed, the others shuffled: the deadlock test's orders).
ORDERS = ("table", "mixed")


class SystemScenario:
    """A COARSE system's workload, its hardware sizes and its golden result.

    Parameters
    ----------
    config : golden_model.coarse.config.CoarseConfig
    tensors : sequence of (int, str, int)
        ``(layer, name, elements)`` in issue order (``routing.model_tensors``).
    etype : golden_model.elements.ElementType
        32-bit elements (int32, float32): the routing tables' shard sizes assume 4 bytes.
    link_latency : int
        Cycles of each device-ring link.
    slots : int
        Tensor slots per device (1..16).
    orders : str
        One of ``ORDERS``.
    seed : int
    direct : iterable of int
        Layers synchronised GPU to GPU (dual synchronisation's first m): not in the routing
        tables, so not in the hardware; their golden result is the GPU ring's.
    sizes_from : SystemScenario, optional
        Build the same hardware as this scenario (its queue lines and NI configuration), so
        that one simulator build runs both.
    shared_queue : int, optional
        Build the naive ablation with a shared FIFO of this many entries per device
        (``hdl.coarse.SharedQueue``).

    Raises
    ------
    ValueError
        If the element type is not 32 bits wide, ``orders`` is unknown, no tensor goes through
        the proxies, or the shards do not fit ``sizes_from``'s hardware.
    """

    def __init__(self, config, tensors, etype, *, link_latency=4, slots=8, orders="table",
                 seed=1, direct=(), sizes_from=None, shared_queue=None):
        from golden_model.lowering import lower
        from golden_model.topology import parse_topology
        from hdl.config import network_config_for
        if etype.bits != 32:
            raise ValueError(f"the COARSE system runs 32-bit elements (the routing tables' "
                             f"shard sizes), not {etype.name}")
        if orders not in ORDERS:
            raise ValueError(f"orders must be one of {', '.join(ORDERS)}, not {orders!r}")
        self.config, self.etype, self.orders = config, etype, orders
        self.tensors, self.link_latency, self.seed = list(tensors), link_latency, seed
        self.shared_queue = shared_queue
        self.lanes = lanes = line_elements(etype.dtype)
        w_count, m = config.workers, config.devices
        self.direct = sorted(set(direct))
        proxied = [t for t in tensors if t[0] not in self.direct]
        if not proxied:
            raise ValueError("no tensor goes through the proxies (every layer is direct)")
        self.tables = [routing_table(config, w, proxied) for w in range(w_count)]
        rng = np.random.default_rng(seed)
        self.gradients = {}
        for layer, _, elements in tensors:       # with zeros of both signs, NaNs, infinities
            pats = random_lines(etype, rng, -(-w_count * elements // lanes)).reshape(-1)
            self.gradients[layer] = etype.from_bits(
                pats[:w_count * elements].reshape(w_count, elements))
        self.expected = synchronise(config, self.tables, self.gradients,
                                    direct=self.direct).gradients
        # every shard: (layer, start, stop, direction, device of each worker)
        self.shards = []
        for k, route in enumerate(self.tables[0]):
            for j, s in enumerate(route.shards):
                self.shards.append((route.layer, s.start, s.stop, s.direction,
                                    tuple(t[k].shards[j].device for t in self.tables)))
        rows = [-(-(stop - start) // lanes) for _, start, stop, _, _ in self.shards]
        self.batches = _batches(rows, slots)
        self.slots = slots
        need = max(sum(rows[i] for i in b) for b in self.batches)
        self.queue_lines = max(2, 1 << (need - 1).bit_length())
        if sizes_from is not None:
            if sizes_from.queue_lines < need or sizes_from.slots != slots:
                raise ValueError(f"the shards need {need} queue lines and {slots} slots; the "
                                 f"shared hardware has {sizes_from.queue_lines} and "
                                 f"{sizes_from.slots}")
            self.queue_lines = sizes_from.queue_lines
        self.topology = parse_topology(f"ring:{m}", link_latency=link_latency)
        self.lowered, self.schedules = [], []
        for _, start, stop, direction, _ in self.shards:
            sched = device_ring_schedule(m, stop - start, direction, lanes).relabeled(
                range(m), topology=self.topology)
            self.schedules.append(sched)
            self.lowered.append(lower(sched, elements_per_flit=128 // etype.bits))
        shared = (dataclasses.asdict(sizes_from.ni_config) if sizes_from is not None else
                  {"dtype": etype.name, "elems_per_flit": 128 // etype.bits,
                   "link_latency": link_latency})
        self.ni_config = network_config_for(self.lowered, **shared)
        self.rows = rows
        rng_orders = np.random.default_rng(seed + 1)
        self.worker_orders = []          # per batch, per worker: shard indices
        for batch in self.batches:
            per = []
            for w in range(w_count):
                if orders == "table" or w == 0:
                    per.append(list(batch))
                elif w == 1:
                    per.append(list(batch)[::-1])
                else:
                    per.append([batch[i] for i in rng_orders.permutation(len(batch))])
            self.worker_orders.append(per)

    def params(self):
        """The JSON-able arguments that rebuild this scenario (``from_params``)."""
        return {"system": self.config.spec, "tensors": [list(t) for t in self.tensors],
                "dtype": self.etype.name, "link_latency": self.link_latency,
                "slots": self.slots, "orders": self.orders, "seed": self.seed,
                "direct": self.direct, "queue_lines": self.queue_lines,
                "shared_queue": self.shared_queue,
                "ni_config": dataclasses.asdict(self.ni_config)}

    @classmethod
    def from_params(cls, params):
        from golden_model.coarse.config import parse_system
        from golden_model.elements import element_type
        from hdl.config import NIConfig
        sizes = _Sizes(params["queue_lines"], params["slots"],
                       NIConfig(**params["ni_config"]))
        return cls(parse_system(params["system"]), [tuple(t) for t in params["tensors"]],
                   element_type(params["dtype"]), link_latency=params["link_latency"],
                   slots=params["slots"], orders=params["orders"], seed=params["seed"],
                   direct=params["direct"], sizes_from=sizes,
                   shared_queue=params["shared_queue"])

    @property
    def design_key(self):
        """What the hardware depends on (a simulator build's key)."""
        return {"config": dataclasses.asdict(self.ni_config), "workers": self.config.workers,
                "queue_lines": self.queue_lines, "slots": self.slots,
                "shared_queue": self.shared_queue}

    def shard_work(self, ring_cycles):
        """Per batch, ``(works, orders)`` for ``golden_model.coarse.hardware``: each shard of
        the batch (by tensor slot) as a ``ShardWork``, and each worker's order of the slots.
        ``ring_cycles(schedule, ni_config)`` times a shard's ring on the NIs (the command line's
        ``allreduce_rtl.plan.model_cycles``; the testbench does not decide the NI's timing)."""
        from golden_model.coarse.hardware import ShardWork
        from hdl.host import table_commands
        out = []
        for b, batch in enumerate(self.batches):
            works = []
            for sh in batch:
                devices = self.shards[sh][4]
                group = max(devices.count(v) for v in set(devices))
                works.append(ShardWork(self.rows[sh], group,
                                       ring_cycles(self.schedules[sh], self.ni_config),
                                       len(table_commands(self.ni_config, self.lowered[sh],
                                                          0))))
            orders = [[batch.index(sh) for sh in order] for order in self.worker_orders[b]]
            out.append((works, orders))
        return out

    def timing(self, **overrides):
        """The ``HardwareTiming`` of this hardware and the ``SystemHost`` defaults."""
        from golden_model.coarse.hardware import HardwareTiming
        return HardwareTiming(ring_link_latency=self.link_latency, **overrides)

    def model_cycles(self, ring_cycles, timing=None):
        """The hardware cycle model's cycles for this run
        (``golden_model.coarse.hardware.hardware_timeline``; ``ring_cycles`` as
        ``shard_work``'s)."""
        from golden_model.coarse.hardware import hardware_timeline
        return hardware_timeline(self.shard_work(ring_cycles), timing or self.timing())

    def hardware(self):
        """The hardware's sizes and its cycle model's parameters, for reports."""
        return {"workers": self.config.workers, "devices": self.config.devices,
                "slots": self.slots, "queue_lines": self.queue_lines,
                "ring_link_latency": self.link_latency, "flit_bits": 128,
                "line_bytes": 64, "timing": self.timing().as_dict(),
                "model": "golden_model.coarse.hardware (the proxy pipeline with this "
                         "hardware's stages: 1 line/cycle ports, 4 flits a line into and out "
                         "of the NI buffer, the golden ring timing at 1 flit/cycle)"}

    def system(self):
        """The ``CoarseSystem`` of this scenario."""
        from hdl.coarse import CoarseSystem
        return CoarseSystem(self.topology, self.ni_config, self.config.workers,
                            self.queue_lines, self.slots, self.shared_queue)

    def device_orders(self, batch, device):
        """Per worker of ``device``'s groups in ``batch``, the shards it sends there, in its
        order: the client orders ``golden_model.coarse.deadlock.simulate_queues`` takes."""
        return [[sh for sh in self.worker_orders[batch][w] if self.shards[sh][4][w] == device]
                for w in range(self.config.workers)
                if any(self.shards[sh][4][w] == device for sh in self.batches[batch])]

    def copy_lines(self, shard, worker):
        """Worker ``worker``'s copy of shard ``shard`` as line values (the last line padded
        with zeros)."""
        layer, start, stop, _, _ = self.shards[shard]
        pats = np.zeros(self.rows[shard] * self.lanes, dtype=self.etype.unsigned)
        pats[:stop - start] = self.etype.to_bits(self.gradients[layer][worker, start:stop])
        return [line_value(p, self.etype) for p in pats.reshape(-1, self.lanes)]

    def result_bits(self, lines, shard):
        """The shard's elements of read-back ``lines`` as bit patterns."""
        layer, start, stop, _, _ = self.shards[shard]
        raw = b"".join(int(v).to_bytes(64, "little") for v in lines)
        return np.frombuffer(raw, dtype=self.etype.unsigned.newbyteorder("<"))[:stop - start]

    def expected_bits(self, shard, worker):
        layer, start, stop, _, _ = self.shards[shard]
        return self.etype.to_bits(self.expected[layer][worker, start:stop])


#: The hardware sizes another scenario takes (``sizes_from``).
_Sizes = namedtuple("_Sizes", "queue_lines slots ni_config")


def _batches(rows, slots):
    """Consecutive shards, at most ``slots`` per batch."""
    return [list(range(i, min(i + slots, len(rows)))) for i in range(0, len(rows), slots)]


class SystemHost:
    """Plays the system host and the W workers on a ``CoarseSystem`` (module docstring).

    ``drive()`` gives a cycle's inputs, ``sample(out)`` takes its settled outputs. ``stall``
    is set (and ``done``) when nothing has moved for ``watchdog`` cycles.

    Parameters
    ----------
    scenario : SystemScenario
    system : hdl.coarse.CoarseSystem
        Only for its layouts and address map.
    seed : int
    send_pct, ready_pct : int
        Chance (%) that a worker offers its next request in a cycle, that it takes a response.
    """

    def __init__(self, scenario, system, *, seed=1, send_pct=80, ready_pct=80, watchdog=5000,
                 trace=False):
        from hdl.cxl.messages import M2SReq, M2SRwD, S2MDRS, S2MNDR
        from hdl.host import table_commands
        self.s, self.sys = scenario, system
        self.layouts = {"rwd": M2SRwD, "req": M2SReq, "ndr": S2MNDR, "drs": S2MDRS,
                        "program": system.signature.members["program"].signature
                        .members["payload"].shape}
        self._tables = table_commands
        self.rng = np.random.default_rng(seed)
        self.send_pct, self.ready_pct, self.watchdog = send_pct, ready_pct, watchdog
        self.w_count, self.m = scenario.config.workers, scenario.config.devices
        self.batch = -1
        self.results = {}               # (shard, worker) -> lines
        self.cycle, self.idle_cycles = 0, 0
        self.ring_cycles = []
        self.trace = [] if trace else None       # per cycle: the outputs but the payloads
        #: ``(cycle, event, shard)``: "staged", "start", "done" of each shard's ring, "batch"
        self.events = []
        self.error = 0
        self.stall = None
        self.finished = False
        self._next_batch()

    @property
    def done(self):
        return self.finished or self.stall is not None

    # ---- the control plane -----------------------------------------------------------------
    def _next_batch(self):
        self.batch += 1
        if self.batch == len(self.s.batches):
            self.finished = True
            return
        shards = self.s.batches[self.batch]
        self.slot_of = {sh: t for t, sh in enumerate(shards)}
        base, self.programs = 0, [[] for _ in range(self.m)]
        self.bases = {}
        for sh in shards:
            devices = self.s.shards[sh][4]
            for v in range(self.m):
                mask = sum(1 << w for w in range(self.w_count) if devices[w] == v)
                self.programs[v].append(pack(self.layouts["program"], tensor=self.slot_of[sh],
                                             base=base, last_row=self.s.rows[sh] - 1,
                                             mask=mask))
            self.bases[sh] = base
            base += self.s.rows[sh]
        self.writes, self.reads = [], []
        for w in range(self.w_count):
            wr, rd = [], []
            for sh in self.s.worker_orders[self.batch][w]:
                dev = self.s.shards[sh][4][w]
                for r, line in enumerate(self.s.copy_lines(sh, w)):
                    addr = self.sys.line_address(dev, self.slot_of[sh], r)
                    wr.append(pack(self.layouts["rwd"], opcode=1, snp_type=0, meta_field=3,
                                   meta_value=0, tag=len(wr) % 4096, addr=addr, poison=0,
                                   byte_enable=(1 << 64) - 1, data=line))
                    rd.append(pack(self.layouts["req"], opcode=1, snp_type=0, meta_field=3,
                                   meta_value=0, tag=len(rd) % 4096, addr=addr))
            self.writes.append(wr)
            self.reads.append(rd)
        self.read_order = [[(sh, r) for sh in self.s.worker_orders[self.batch][w]
                            for r in range(self.s.rows[sh])] for w in range(self.w_count)]
        self.got = [[] for _ in range(self.w_count)]
        self.acks = [0] * self.w_count
        self.host_cmds = [[] for _ in range(self.m)]
        self.ring = None                # shard whose ring is loaded or running
        self.events.append((self.cycle, "batch", self.batch))
        self.phase = "program"

    def drive(self):
        w_count, m = self.w_count, self.m
        inp = {"start": 0, "program_valid": [0] * m, "program": [0] * m,
               "host_cmd_valid": [0] * m, "host_cmd": [0] * m,
               "rwd_valid": [0] * w_count, "rwd": [0] * w_count,
               "req_valid": [0] * w_count, "req": [0] * w_count,
               "ndr_ready": [0] * w_count, "drs_ready": [0] * w_count}
        if self.phase == "program":
            for v in range(m):
                if self.programs[v]:
                    inp["program_valid"][v], inp["program"][v] = 1, self.programs[v][0]
        else:
            for v in range(m):
                if self.host_cmds[v]:
                    inp["host_cmd_valid"][v], inp["host_cmd"][v] = 1, self.host_cmds[v][0]
            if self.phase == "start":
                inp["start"] = 1
            for w in range(w_count):
                if self.writes[w] and self.rng.integers(100) < self.send_pct:
                    inp["rwd_valid"][w], inp["rwd"][w] = 1, self.writes[w][0]
                if self.reads[w] and self.rng.integers(100) < self.send_pct:
                    inp["req_valid"][w], inp["req"][w] = 1, self.reads[w][0]
                inp["ndr_ready"][w] = int(self.rng.integers(100) < self.ready_pct)
                inp["drs_ready"][w] = int(self.rng.integers(100) < self.ready_pct)
        self._inp = inp
        return inp

    def port_values(self, inp=None):
        """``{flat port name: value}`` of the system's Verilog inputs (``rwd__0__valid``,
        ``start``, ...) for a cycle's inputs ``inp`` (``drive()``), or all 0."""
        values = {"start": inp["start"] if inp else 0}
        for v in range(self.m):
            for ch in ("program", "host_cmd"):
                values[f"{ch}__{v}__valid"] = inp[f"{ch}_valid"][v] if inp else 0
                values[f"{ch}__{v}__payload"] = inp[ch][v] if inp else 0
            values[f"host_rsp__{v}__ready"] = 1 if inp else 0
        for w in range(self.w_count):
            for ch in ("rwd", "req"):
                values[f"{ch}__{w}__valid"] = inp[f"{ch}_valid"][w] if inp else 0
                values[f"{ch}__{w}__payload"] = inp[ch][w] if inp else 0
            for ch in ("ndr", "drs"):
                values[f"{ch}__{w}__ready"] = inp[f"{ch}_ready"][w] if inp else 0
        return values

    def drive_ports(self, put):
        """``drive()``, applied by ``put(port, value)`` (``port_values``)."""
        for name, value in self.port_values(self.drive()).items():
            put(name, value)

    def sample_ports(self, get):
        """``sample()`` of the settled outputs, read by ``get(port)``."""
        workers = range(self.w_count)
        out = {f"{ch}_ready": [get(f"{ch}__{w}__ready") for w in workers]
               for ch in ("rwd", "req")}
        for ch in ("ndr", "drs"):
            out[f"{ch}_valid"] = [get(f"{ch}__{w}__valid") for w in workers]
            out[ch] = [get(f"{ch}__{w}__payload") for w in workers]
        out["host_cmd_ready"] = [get(f"host_cmd__{v}__ready") for v in range(self.m)]
        for name in ("staged", "staged_tensor", "done", "error", "cycles"):
            out[name] = get(name)
        self.queues = [{name: get(f"{name}__{v}") for name in ("head_valid", "head",
                                                                "queue_used")}
                       for v in range(self.m)]
        self.sample(out)

    def sample(self, out):
        """``out``: per worker lists ``rwd_ready``, ``req_ready``, ``ndr_valid``, ``ndr``,
        ``drs_valid``, ``drs``; per device ``host_cmd_ready``; ``staged``, ``staged_tensor``,
        ``done``, ``error``, ``cycles``."""
        inp = self._inp
        if self.trace is not None:
            self.trace.append([out[k] for k in sorted(out) if k not in ("ndr", "drs")])
        self.cycle += 1
        self.error |= out["error"]
        moved = False
        if self.phase == "program":
            for v in range(self.m):
                if self.programs[v]:
                    self.programs[v].pop(0)
            moved = True
            if not any(self.programs):
                self.phase = "run"
        else:
            for v in range(self.m):
                if inp["host_cmd_valid"][v] and out["host_cmd_ready"][v]:
                    self.host_cmds[v].pop(0)
                    moved = True
            for w in range(self.w_count):
                if inp["rwd_valid"][w] and out["rwd_ready"][w]:
                    self.writes[w].pop(0)
                    moved = True
                if inp["req_valid"][w] and out["req_ready"][w]:
                    self.reads[w].pop(0)
                    moved = True
                if out["ndr_valid"][w] and inp["ndr_ready"][w]:
                    ndr = unpack(self.layouts["ndr"], out["ndr"][w])
                    assert ndr["opcode"] == 0, f"worker {w}: NDR {ndr}"
                    self.acks[w] += 1
                    moved = True
                if out["drs_valid"][w] and inp["drs_ready"][w]:
                    drs = unpack(self.layouts["drs"], out["drs"][w])
                    assert drs["opcode"] == 0 and not drs["poison"], f"worker {w}: DRS {drs}"
                    self.got[w].append(drs["data"])
                    moved = True
            if self.phase == "start":
                self.phase = "ring"
                self.events.append((self.cycle, "start", self.ring))
                moved = True
            elif self.phase == "run" and self.ring is None and out["staged"]:
                shard = self.s.batches[self.batch][out["staged_tensor"]]
                self.ring = shard
                self.events.append((self.cycle, "staged", shard))
                low = self.s.lowered[shard]
                self.host_cmds = [self._tables(self.s.ni_config, low, v) for v in range(self.m)]
                moved = True
            elif self.phase == "run" and self.ring is not None and not any(self.host_cmds):
                self.phase = "start"
            elif self.phase == "ring" and out["done"]:
                self.ring_cycles.append(out["cycles"])
                self.events.append((self.cycle, "done", self.ring))
                self.ring = None
                self.phase = "run"
                moved = True
            if self.phase == "run" and self._batch_done():
                self._collect()
                self._next_batch()
        self.idle_cycles = 0 if moved else self.idle_cycles + 1
        if self.idle_cycles >= self.watchdog and not self.done:
            self.stall = self._stall_report()

    def _batch_done(self):
        return (self.ring is None and all(len(g) == len(o) for g, o in
                                          zip(self.got, self.read_order))
                and not any(self.writes) and all(
                    a == len(o) for a, o in zip(self.acks, self.read_order)))

    def _collect(self):
        for w in range(self.w_count):
            it = iter(self.got[w])
            for sh in self.s.worker_orders[self.batch][w]:
                self.results[(sh, w)] = [next(it) for _ in range(self.s.rows[sh])]

    def _stall_report(self):
        """Where the run stands when the watchdog fires, with every device queue that holds a
        tensor it cannot start (``stuck``) and a sentence naming the first."""
        batch = self.s.batches[self.batch]
        next_shard = [self._next_write_shard(w) for w in range(self.w_count)]
        stuck = []
        for v, q in enumerate(getattr(self, "queues", [])):
            if not q["head_valid"]:
                continue
            shard = batch[q["head"]]
            waiting = [w for w in range(self.w_count) if self.s.shards[shard][4][w] == v
                       and self._lines_left(w, shard)]
            stuck.append({"device": v, "queue": "shared", "entries": q["queue_used"],
                          "depth": self.s.shared_queue, "head_shard": shard,
                          "waiting_for": waiting,
                          "their_next_shards": [next_shard[w] for w in waiting]})
        report = {"cycle": self.cycle, "batch": self.batch, "phase": self.phase,
                  "writes_left": [len(x) for x in self.writes],
                  "reads_left": [len(x) for x in self.reads], "stuck": stuck}
        if stuck:
            q = stuck[0]
            report["message"] = (
                f"device {q['device']}'s shared queue ({q['entries']} of {q['depth']} entries) "
                f"has shard {q['head_shard']} at its head, waiting for worker(s) "
                f"{', '.join(map(str, q['waiting_for']))}, whose next line (shard(s) "
                f"{', '.join(map(str, q['their_next_shards']))}) the full queue refuses")
        return report

    def _sent(self, w):
        """Lines worker ``w`` has written in this batch."""
        order = self.s.worker_orders[self.batch][w]
        return sum(self.s.rows[sh] for sh in order) - len(self.writes[w])

    def _next_write_shard(self, w):
        done = self._sent(w)
        for sh in self.s.worker_orders[self.batch][w]:
            if done < self.s.rows[sh]:
                return sh
            done -= self.s.rows[sh]
        return None

    def _lines_left(self, w, shard):
        order = self.s.worker_orders[self.batch][w]
        return self._sent(w) < sum(self.s.rows[sh] for sh in order[:order.index(shard) + 1])

    def mismatches(self):
        """``(shard, worker)`` of every read-back shard that differs from the golden model."""
        bad = []
        for (sh, w), lines in sorted(self.results.items()):
            if not np.array_equal(self.s.result_bits(lines, sh), self.s.expected_bits(sh, w)):
                bad.append((sh, w))
        return bad
