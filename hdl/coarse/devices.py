"""``CoarseDevices``: M memory devices' sync cores joined by their NIs in the device ring
(docs/hardware.md, "COARSE system in hardware").

Each device ``v`` has a ``SyncCore`` (client queues with a slot per tensor, client-order
reduction) and node ``v`` of a ``Network`` on ``ring:M``. A partial-sum line that the sync core
gives for row ``r`` of a shard goes into the NI's buffer as four 128-bit flits at addresses
``4r .. 4r + 3`` (element ``e`` of the line is element ``e`` of the shard's row, the layout
``golden_model.lowering`` gives a shard whose ring chunks are whole flits); the NI's host port
carries these writes and the host's own commands (the ring's schedule tables per shard, and the
read-back of the reduced shard), the sync core's first. The ring is
``golden_model.coarse.functional.device_ring_schedule`` in the shard's direction. The host
port takes one flit per cycle, so a device fills its NI buffer at a quarter of a line per cycle:
the ring, not the reduction, sets the pace.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..config import NIConfig
from ..host import TARGET_BUFFER
from ..network import Network
from ..ops import eq_const, select_word
from .sync_core import SyncCore

__all__ = ["CoarseDevices", "FLITS_PER_LINE"]

#: 128-bit flits per 64-byte line.
FLITS_PER_LINE = 4


class CoarseDevices(wiring.Component):
    """The devices of a COARSE system with their device ring.

    Parameters
    ----------
    topology : golden_model.topology.Topology
        ``ring:M`` (M devices), with the links' latency.
    config : NIConfig
        The devices' NIs; 128-bit flits, and its element type is the sync cores'.
    clients, queue_lines, tensors : int
        As ``SyncCore``'s.

    Members
    -------
    program, write : ``In(...).array(M)``
        Device ``v``'s ``SyncCore.program`` and ``SyncCore.write``.
    host_cmd, host_rsp, start, node_start, done, error, cycles, node_done, node_error,
    node_step
        As ``Network``'s (``error`` also when a sync core's is set); ``host_cmd[v]`` is ready
        only when the sync core has no flit to write.
    busy : ``Out(1).array(M)``
        Device ``v``'s sync core is busy or its last line is not all in the NI's buffer.

    Raises
    ------
    ValueError
        If ``config`` is not an ``NIConfig`` with 128-bit flits, or as ``Network`` and
        ``SyncCore`` do.
    """

    def __init__(self, topology, config, clients, queue_lines, tensors):
        if not isinstance(config, NIConfig) or config.flit_width * FLITS_PER_LINE != 512:
            raise ValueError(f"config must be an NIConfig with 128-bit flits, not {config!r}")
        self.network = Network(topology, config)
        m = topology.num_nodes
        self.cores = [SyncCore(config.element_type, clients, queue_lines, tensors)
                      for _ in range(m)]
        members = dict(self.network.signature.members)
        core = self.cores[0].signature.members
        members.update(program=In(core["program"].signature).array(m),
                       write=In(core["write"].signature).array(m),
                       busy=Out(1).array(m))
        super().__init__(members)

    def elaborate(self, platform):
        mod = Module()
        net = self.network
        mod.submodules.network = net
        n = len(self.cores)
        mod.d.comb += net.start.eq(self.start)
        mod.d.comb += [self.done.eq(net.done), self.cycles.eq(net.cycles),
                       self.error.eq(net.error | Cat(*[c.error for c in self.cores]).any())]
        for v, core in enumerate(self.cores):
            mod.submodules[f"sync{v}"] = core
            for name in ("program", "write"):      # always ready: no ready to connect
                outer, inner = getattr(self, name)[v], getattr(core, name)
                mod.d.comb += [inner.valid.eq(outer.valid), inner.payload.eq(outer.payload)]
            wiring.connect(mod, net.host_rsp[v], wiring.flipped(self.host_rsp[v]))
            mod.d.comb += [net.node_start[v].eq(self.node_start[v]),
                           self.node_done[v].eq(net.node_done[v]),
                           self.node_error[v].eq(net.node_error[v]),
                           self.node_step[v].eq(net.node_step[v])]

            # one partial-sum line at a time, four flits into the NI's buffer
            line = Signal(512, name=f"line{v}")
            row = Signal(len(core.o.payload.row), name=f"row{v}")
            flit = Signal(2, name=f"flit{v}")
            holding = Signal(name=f"holding{v}")
            cmd = net.host_cmd[v]
            mod.d.comb += core.o.ready.eq(~holding)
            with mod.If(core.o.valid & ~holding):
                mod.d.sync += [line.eq(core.o.payload.line), row.eq(core.o.payload.row),
                               flit.eq(0), holding.eq(1)]
            with mod.If(holding):
                mod.d.comb += [
                    cmd.valid.eq(1),
                    cmd.payload.write.eq(1),
                    cmd.payload.target.eq(TARGET_BUFFER),
                    cmd.payload.addr.eq(Cat(flit, row)),
                    cmd.payload.data.eq(select_word(line, flit, 128, FLITS_PER_LINE)),
                    self.host_cmd[v].ready.eq(0),
                ]
                with mod.If(cmd.ready):
                    mod.d.sync += flit.eq(flit + 1)
                    with mod.If(eq_const(flit, FLITS_PER_LINE - 1)):
                        mod.d.sync += holding.eq(0)
            with mod.Else():
                wiring.connect(mod, wiring.flipped(self.host_cmd[v]), cmd)
            mod.d.comb += self.busy[v].eq(core.busy | holding)
        return mod
