"""``CoarseDevices``: M memory devices joined by their NIs in the device ring (docs/hardware.md,
"COARSE system in hardware").

Device ``v`` is a ``MemoryDevice`` (sync core, parameter storage) on node ``v`` of a ``Network``
on ``ring:M``. The devices reduce one tensor at a time, all the same one: when every device is
idle, the lowest tensor complete on every device is **offered** (each device's ``allow``) until
each device's sync core has started it; its partial sums go into the devices' NI buffers; when
all are there (``staged``), the host loads the ring's tables (the ring is
``golden_model.coarse.functional.device_ring_schedule`` in the tensor's direction, sized to the
tensor) through ``host_cmd`` and pulses ``start``; when the network is ``done`` every device
drains the reduced tensor into its parameter storage, where ``read`` serves it. A device with
no client copy of a tensor (empty mask) contributes +0 lines.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..config import NIConfig
from ..network import Network
from ..ops import first_set
from .device import FLIT_BITS, FLITS_PER_LINE, MemoryDevice

__all__ = ["CoarseDevices", "FLITS_PER_LINE"]

#: ``MemoryDevice`` members that ``CoarseDevices`` repeats per device.
_PER_DEVICE = ("program", "write", "read", "rdata", "reduced", "slots", "admit", "head_valid",
               "head", "queue_used", "busy")


class CoarseDevices(wiring.Component):
    """The devices of a COARSE system with their device ring.

    Parameters
    ----------
    topology : golden_model.topology.Topology
        ``ring:M`` (M devices), with the links' latency.
    config : NIConfig
        The devices' NIs; 128-bit flits, and its element type is the sync cores'.
    clients, queue_lines, tensors, shared_queue
        As ``SyncCore``'s.

    Members
    -------
    program, write, read, rdata, reduced, slots, admit, head_valid, head, queue_used, busy
        Arrays of M:
        Device ``v``'s ``MemoryDevice`` members.
    host_cmd, host_rsp, start, node_start, done, error, cycles, node_done, node_error,
    node_step
        As ``Network``'s (``host_*`` through each ``MemoryDevice``; ``error`` also when a sync
        core's is set).
    staged : ``Out(1)``, staged_tensor : ``Out(tensor bits)``
        Every device has the offered tensor's partial sums in its NI buffer: load the ring's
        tables and ``start``.

    Raises
    ------
    ValueError
        If ``config`` is not an ``NIConfig`` with 128-bit flits, or as ``Network`` and
        ``SyncCore`` do.
    """

    def __init__(self, topology, config, clients, queue_lines, tensors, shared_queue=None):
        if not isinstance(config, NIConfig) or config.flit_width != FLIT_BITS:
            raise ValueError(f"config must be an NIConfig with 128-bit flits, not {config!r}")
        self.network = Network(topology, config)
        m = topology.num_nodes
        self.tensors = tensors
        self.devices = [MemoryDevice(config.element_type, clients, queue_lines, tensors,
                                     shared_queue) for _ in range(m)]
        members = dict(self.network.signature.members)
        dev = self.devices[0].signature.members
        for name in _PER_DEVICE:
            members[name] = dev[name].array(m)
        members.update(staged=Out(1), staged_tensor=dev["staged_tensor"])
        super().__init__(members)

    def elaborate(self, platform):
        mod = Module()
        net = self.network
        mod.submodules.network = net
        devs = self.devices
        n, n_t = len(devs), self.tensors
        mod.d.comb += net.start.eq(self.start)
        mod.d.comb += [self.done.eq(net.done), self.cycles.eq(net.cycles),
                       self.error.eq(net.error | Cat(*[d.error for d in devs]).any())]

        # the offer: the lowest tensor complete on every device, until each has started it
        offer = Signal(n_t)
        waiting = Signal(n)
        common = Signal(n_t)
        all_idle = Signal()
        every = devs[0].complete
        for d in devs[1:]:
            every = every & d.complete
        mod.d.comb += [common.eq(every), all_idle.eq(Cat(*[d.idle for d in devs]).all())]
        any_common, lowest = first_set(mod, list(common), "common")
        with mod.If(offer.any()):
            mod.d.sync += waiting.eq(waiting & Cat(*[(d.complete & offer).any() for d in devs]))
            with mod.If(~waiting.any()):
                mod.d.sync += offer.eq(0)
        with mod.Elif(all_idle & any_common):
            mod.d.sync += [offer.eq(1 << lowest), waiting.eq((1 << n) - 1)]

        ringing = Signal()
        with mod.If(self.start):
            mod.d.sync += ringing.eq(1)
        with mod.Elif(net.done):
            mod.d.sync += ringing.eq(0)

        for v, dev in enumerate(devs):
            mod.submodules[f"device{v}"] = dev
            for name in ("program", "write", "read"):
                wiring.connect(mod, wiring.flipped(getattr(self, name)[v]), getattr(dev, name))
            for name in ("rdata", "reduced", "admit", "head_valid", "head", "queue_used",
                         "busy"):
                mod.d.comb += getattr(self, name)[v].eq(getattr(dev, name))
            mod.d.comb += [dev.allow.eq(offer & waiting[v].replicate(n_t)),
                           dev.ring_done.eq(ringing & net.done)]
            for t in range(n_t):
                mod.d.comb += self.slots[v][t].eq(dev.slots[t])
            wiring.connect(mod, dev.ni_cmd, net.host_cmd[v])
            wiring.connect(mod, net.host_rsp[v], dev.ni_rsp)
            wiring.connect(mod, wiring.flipped(self.host_cmd[v]), dev.host_cmd)
            wiring.connect(mod, dev.host_rsp, wiring.flipped(self.host_rsp[v]))
            mod.d.comb += [net.node_start[v].eq(self.node_start[v]),
                           self.node_done[v].eq(net.node_done[v]),
                           self.node_error[v].eq(net.node_error[v]),
                           self.node_step[v].eq(net.node_step[v])]
        mod.d.comb += [self.staged.eq(Cat(*[d.staged for d in devs]).all()),
                       self.staged_tensor.eq(devs[0].staged_tensor)]
        return mod
