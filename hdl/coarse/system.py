"""``CoarseSystem``: W workers' CXL.mem ports on M memory devices with their device ring
(docs/hardware.md, "COARSE system in hardware").

**Address map.** A worker's M2S line address (``addr``, byte address bits [51:6]) is
``row | tensor << R | device << (R + T)`` (R = log2 ``queue_lines``, T = log2 ``tensors``, at
least 1 bit each for tensor and device; ``CoarseSystem.line_address``); every higher bit must
be 0. The same line is a client queue slot for writes and the parameter storage for reads:

* ``MemWr`` pushes row ``row`` of the worker's copy of tensor slot ``tensor`` into the
  worker's own client queue at ``device`` (the port is the client: one queue per client at
  every device, COARSE's deadlock avoidance); the NDR ``Cmp`` comes back once the line is in
  the queue. Anything else on RwD (``MemWrPtl``: a partial line cannot be reduced; poisoned
  data; an address outside the map) is dropped with ``CmpErr``.
* ``MemRd`` pulls row ``row`` of tensor ``tensor``'s reduced lines from ``device``'s parameter
  storage: it is **held** (not accepted, as a device holds a read it cannot serve) until the
  device has drained that tensor's ring result, then answered with ``MemData``. A read of
  another opcode, outside the map or past the tensor slot's rows gets ``MemDataNXM`` with
  ``poison`` and zero data.

**Paths.** Every worker reaches every device through a crossbar: at each device a
round-robin arbiter per channel (RwD, Req) takes one line per cycle from the workers whose
head addresses it; a worker's local device and its remote devices differ only in the address.
Responses wait in a queue per worker and channel (NDR: 2 entries, DRS: 4); a request is taken
only when its response has room, so a worker that does not take its responses stops only
itself. The channels are valid/ready streams (the link layer's credits of one on-chip hop).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..cxl.messages import (M2SReq, M2SReqOpcode, M2SRwD, M2SRwDOpcode, MetaField, S2MDRS,
                            S2MDRSOpcode, S2MNDR, S2MNDROpcode)
from ..fifo import make_fifo
from ..ops import eq_const, first_set, is_zero, lt_const, select_word
from ..router.arbiter import RoundRobinArbiter
from .device import FLITS_PER_LINE
from .devices import CoarseDevices
from .group_reducer import LINE_BITS

__all__ = ["CoarseSystem", "NDR_QUEUE", "DRS_QUEUE", "ring_config"]

NDR_QUEUE, DRS_QUEUE = 2, 4

#: ``CoarseDevices`` members the system exposes as they are.
_DEVICE_MEMBERS = ("program", "host_cmd", "host_rsp", "start", "done", "error", "cycles",
                   "staged", "staged_tensor", "head_valid", "head", "queue_used", "busy")


def ring_config(element_type, devices, lines, link_latency):
    """The devices' ``NIConfig`` for shards of up to ``lines`` 64-byte lines: sized by
    ``hdl.config.network_config_for`` for the device ring's schedules
    (``golden_model.coarse.functional.device_ring_schedule``) of a ``lines``-line shard in
    both directions, 128-bit flits of ``element_type``.

    Raises
    ------
    ValueError
        As ``network_config_for`` does (a shard too large for the NI's limits).
    """
    from golden_model.coarse.functional import device_ring_schedule
    from golden_model.lowering import lower
    from golden_model.topology import parse_topology
    from ..config import network_config_for
    per_line = LINE_BITS // element_type.bits
    per_flit = per_line // FLITS_PER_LINE
    topology = parse_topology(f"ring:{devices}", link_latency=link_latency)
    lowered = [lower(device_ring_schedule(devices, lines * per_line, d, per_line).relabeled(
        range(devices), topology=topology), elements_per_flit=per_flit) for d in (1, -1)]
    return network_config_for(lowered, dtype=element_type.name, elems_per_flit=per_flit,
                              link_latency=link_latency)


class CoarseSystem(wiring.Component):
    """W worker ports, M memory devices and their ring.

    Parameters
    ----------
    topology : golden_model.topology.Topology
        ``ring:M``, the device ring with its links' latency.
    config : NIConfig
        The devices' NIs (as ``CoarseDevices``).
    workers : int
        Worker ports W, 1..16 (each is a client of every device's sync core).
    queue_lines, tensors : int
        Each device's client queues and tensor slots (as ``SyncCore``'s).
    shared_queue : int, optional
        Build the naive ablation (``SyncCore``'s ``shared_queue``): a worker's line waits at
        its port while its device's shared FIFO does not admit it.

    Members
    -------
    rwd : ``In(stream.Signature(M2SRwD)).array(W)``, req : ``In(stream.Signature(M2SReq))...``
        Worker ``w``'s M2S channels.
    ndr : ``Out(stream.Signature(S2MNDR)).array(W)``, drs : ``Out(stream.Signature(S2MDRS))..``
        Worker ``w``'s S2M channels.
    program, host_cmd, host_rsp, start, done, error, cycles, staged, staged_tensor, busy
        ``CoarseDevices``' (the system host's control: slots, ring tables, ring start).
    head_valid, head, queue_used : arrays of M
        Each device's shared FIFO (the naive ablation's status; 0 for COARSE).

    Raises
    ------
    ValueError
        If ``workers`` is out of range, or as ``CoarseDevices`` does.
    """

    def __init__(self, topology, config, workers, queue_lines, tensors, shared_queue=None):
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 16:
            raise ValueError(f"workers must be an integer from 1 to 16, not {workers!r}")
        self.devices = CoarseDevices(topology, config, workers, queue_lines, tensors,
                                     shared_queue)
        self.workers, self.num_devices = workers, topology.num_nodes
        self.queue_lines, self.tensors = queue_lines, tensors
        self.row_bits = ceil_log2(queue_lines)
        self.tensor_bits = max(1, ceil_log2(tensors))
        self.device_bits = max(1, ceil_log2(self.num_devices))
        dev = self.devices.signature.members
        members = {name: dev[name] for name in _DEVICE_MEMBERS}
        members.update(rwd=In(stream.Signature(M2SRwD)).array(workers),
                       req=In(stream.Signature(M2SReq)).array(workers),
                       ndr=Out(stream.Signature(S2MNDR)).array(workers),
                       drs=Out(stream.Signature(S2MDRS)).array(workers))
        super().__init__(members)

    def line_address(self, device, tensor, row):
        """The M2S line address of ``row`` of tensor slot ``tensor`` at ``device`` (module
        docstring).

        Raises
        ------
        ValueError
            If a field is out of range.
        """
        for name, value, limit in (("device", device, self.num_devices),
                                   ("tensor", tensor, self.tensors),
                                   ("row", row, self.queue_lines)):
            if not 0 <= value < limit:
                raise ValueError(f"{name} {value!r} is outside 0..{limit - 1}")
        return row | tensor << self.row_bits | device << (self.row_bits + self.tensor_bits)

    def _decode(self, m, addr, name):
        """``(device, tensor, row, in_map)`` of a line address, as signals."""
        rb, tb, db = self.row_bits, self.tensor_bits, self.device_bits
        fields = data.StructLayout({"row": rb, "tensor": tb, "device": db})
        view = Signal(fields, name=f"{name}_at")
        in_map = Signal(name=f"{name}_in_map")
        m.d.comb += [
            view.eq(addr[:rb + tb + db]),
            in_map.eq(is_zero(addr[rb + tb + db:]) & lt_const(view.device, self.num_devices)
                      & lt_const(view.tensor, self.tensors)),
        ]
        return view.device, view.tensor, view.row, in_map

    def elaborate(self, platform):
        m = Module()
        m.submodules.devices = devs = self.devices
        w_count, n_dev, n_t = self.workers, self.num_devices, self.tensors
        for name in ("program", "host_cmd"):
            for v in range(n_dev):
                wiring.connect(m, wiring.flipped(getattr(self, name)[v]),
                               getattr(devs, name)[v])
        for v in range(n_dev):
            wiring.connect(m, devs.host_rsp[v], wiring.flipped(self.host_rsp[v]))
            for name in ("head_valid", "head", "queue_used", "busy"):
                m.d.comb += getattr(self, name)[v].eq(getattr(devs, name)[v])
        m.d.comb += [devs.start.eq(self.start), self.done.eq(devs.done),
                     self.error.eq(devs.error), self.cycles.eq(devs.cycles),
                     self.staged.eq(devs.staged), self.staged_tensor.eq(devs.staged_tensor)]

        write_arbs = [RoundRobinArbiter(w_count) for _ in range(n_dev)]
        read_arbs = [RoundRobinArbiter(w_count) for _ in range(n_dev)]
        for v in range(n_dev):
            m.submodules[f"write_arbiter{v}"] = write_arbs[v]
            m.submodules[f"read_arbiter{v}"] = read_arbs[v]
            m.d.comb += [write_arbs[v].advance.eq(1), read_arbs[v].advance.eq(1)]
        slot_bits = len(devs.slots[0][0].as_value())
        write_heads, read_heads = [], []

        for w in range(w_count):
            # ---- RwD: a line into the worker's queue at its device, or CmpErr ---------------
            rwd, ndr = self.rwd[w], self.ndr[w]
            ndr_q = make_fifo(width=S2MNDR.size, depth=NDR_QUEUE)
            m.submodules[f"ndr_queue{w}"] = ndr_q
            dev_w, tensor_w, row_w, in_map = self._decode(m, rwd.payload.addr, f"rwd{w}")
            good = Signal(name=f"rwd{w}_good")
            m.d.comb += good.eq(in_map & ~rwd.payload.poison
                                & eq_const(rwd.payload.opcode.as_value(),
                                           M2SRwDOpcode.MemWr.value))
            for v in range(n_dev):
                admitted = select_word(devs.admit[v][w * n_t:(w + 1) * n_t], tensor_w, 1, n_t)
                m.d.comb += write_arbs[v].requests[w].eq(
                    rwd.valid & good & eq_const(dev_w, v) & ndr_q.w_rdy & admitted)
            granted = Cat(*[arb.grant[w] for arb in write_arbs]).any()
            m.d.comb += rwd.ready.eq(granted | (~good & ndr_q.w_rdy))
            ndr_word = Signal(S2MNDR, name=f"ndr{w}_word")
            m.d.comb += [
                ndr_word.opcode.eq(Mux(good, S2MNDROpcode.Cmp, S2MNDROpcode.CmpErr)),
                ndr_word.meta_field.eq(MetaField.NoOp),
                ndr_word.tag.eq(rwd.payload.tag),
                ndr_q.w_en.eq(rwd.valid & rwd.ready),
                ndr_q.w_data.eq(ndr_word),
                ndr.valid.eq(ndr_q.r_rdy),
                ndr.payload.eq(ndr_q.r_data),
                ndr_q.r_en.eq(ndr.ready),
            ]
            write_heads.append((tensor_w, row_w, rwd.payload.data))

            # ---- Req: a line of the parameter storage once reduced, or MemDataNXM ----------
            req, drs = self.req[w], self.drs[w]
            drs_q = make_fifo(width=S2MDRS.size, depth=DRS_QUEUE)
            m.submodules[f"drs_queue{w}"] = drs_q
            dev_r, tensor_r, row_r, in_map_r = self._decode(m, req.payload.addr, f"req{w}")
            slot = Signal(devs.slots[0][0].shape(), name=f"req{w}_slot")
            m.d.comb += slot.eq(select_word(
                Cat(*[select_word(Cat(*devs.slots[v]), tensor_r, slot_bits, n_t)
                      for v in range(n_dev)]), dev_r, slot_bits, n_dev))
            good_r = Signal(name=f"req{w}_good")
            m.d.comb += good_r.eq(in_map_r & (row_r <= slot.last_row)
                                  & eq_const(req.payload.opcode.as_value(),
                                             M2SReqOpcode.MemRd.value))
            # a read's line lands in the queue the cycle after it is taken
            pending = Signal(name=f"drs{w}_pending")
            pending_nxm = Signal(name=f"drs{w}_nxm")
            pending_dev = Signal(self.device_bits, name=f"drs{w}_device")
            pending_tag = Signal.like(req.payload.tag, name=f"drs{w}_tag")
            room = Signal(name=f"drs{w}_room")
            m.d.comb += room.eq(lt_const(drs_q.level + pending, DRS_QUEUE))
            for v in range(n_dev):
                reduced = select_word(devs.reduced[v], tensor_r, 1, n_t)
                m.d.comb += read_arbs[v].requests[w].eq(
                    req.valid & good_r & eq_const(dev_r, v) & reduced & room)
            granted_r = Cat(*[arb.grant[w] for arb in read_arbs]).any()
            m.d.comb += req.ready.eq(granted_r | (~good_r & room))
            m.d.sync += [pending.eq(req.valid & req.ready), pending_nxm.eq(~good_r),
                         pending_dev.eq(dev_r), pending_tag.eq(req.payload.tag)]
            drs_word = Signal(S2MDRS, name=f"drs{w}_word")
            line = select_word(Cat(*devs.rdata), pending_dev, len(devs.rdata[0]), n_dev)
            m.d.comb += [
                drs_word.opcode.eq(Mux(pending_nxm, S2MDRSOpcode.MemDataNXM,
                                       S2MDRSOpcode.MemData)),
                drs_word.meta_field.eq(MetaField.NoOp),
                drs_word.tag.eq(pending_tag),
                drs_word.poison.eq(pending_nxm),
                drs_word.data.eq(Mux(pending_nxm, 0, line)),
                drs_q.w_en.eq(pending),
                drs_q.w_data.eq(drs_word),
                drs.valid.eq(drs_q.r_rdy),
                drs.payload.eq(drs_q.r_data),
                drs_q.r_en.eq(drs.ready),
            ]
            read_heads.append((tensor_r, row_r))

        # ---- each device takes its granted worker's line and read --------------------------
        for v in range(n_dev):
            for arb, port, heads, is_write in ((write_arbs[v], devs.write[v], write_heads, True),
                                              (read_arbs[v], devs.read[v], read_heads, False)):
                _, winner = first_set(m, list(arb.grant), f"{'write' if is_write else 'read'}{v}")
                fields = [Cat(*h) for h in heads]
                chosen = select_word(Cat(*fields), winner, len(fields[0]), w_count)
                p = port.payload
                m.d.comb += port.valid.eq(arb.valid)
                if is_write:
                    m.d.comb += [p.client.eq(winner),
                                 Cat(p.tensor, p.row, p.line).eq(chosen)]
                else:
                    m.d.comb += Cat(p.tensor, p.row).eq(chosen)
        return m
