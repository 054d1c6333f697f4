"""A design whose synthesis cost is known in closed form, shared by the cost tests."""

from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out


class RegisterAndMemory(wiring.Component):
    """An ``n``-bit register (with reset) beside a ``depth`` x ``width`` memory.

    With ``sync_read`` the memory's read port is synchronous (its output register belongs to
    the memory: a block RAM's); otherwise it is asynchronous, so on an iCE40 (block RAMs only
    read synchronously) the memory becomes ``depth * width`` flip-flops.
    """

    def __init__(self, n, depth, width, sync_read):
        self.n, self.depth, self.width, self.sync_read = n, depth, width, sync_read
        aw = (depth - 1).bit_length()
        super().__init__({"d": In(n), "q": Out(n), "we": In(1), "waddr": In(aw),
                          "wdata": In(width), "raddr": In(aw), "rdata": Out(width)})

    def elaborate(self, platform):
        m = Module()
        reg = Signal(self.n)
        m.d.sync += reg.eq(self.d)
        m.d.comb += self.q.eq(reg)
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=self.depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port(domain="sync" if self.sync_read else "comb")
        m.d.comb += [wr.en.eq(self.we), wr.addr.eq(self.waddr), wr.data.eq(self.wdata),
                     rd.addr.eq(self.raddr), self.rdata.eq(rd.data)]
        return m


class Multipliers(wiring.Component):
    """``k`` independent ``width`` x ``width`` unsigned multipliers, inputs and products
    registered: ``k`` MULT18X18D on an ECP5 while ``width`` <= 18."""

    def __init__(self, k, width):
        self.k, self.width = k, width
        super().__init__({"a": In(k * width), "b": In(k * width), "p": Out(2 * k * width)})

    def elaborate(self, platform):
        m = Module()
        w = self.width
        for i in range(self.k):
            a, b, p = Signal(w), Signal(w), Signal(2 * w)
            m.d.sync += [a.eq(self.a[i * w:(i + 1) * w]), b.eq(self.b[i * w:(i + 1) * w]),
                         p.eq(a * b)]
            m.d.comb += self.p[2 * i * w:2 * (i + 1) * w].eq(p)
        return m


def multipliers_verilog(k, width):
    """Verilog of :class:`Multipliers`, module ``cost_probe``."""
    return verilog.convert(Multipliers(k, width), name="cost_probe", emit_src=False)


def probe_verilog(n, depth, width, sync_read):
    """Verilog of a :class:`RegisterAndMemory`, module ``cost_probe``."""
    return verilog.convert(RegisterAndMemory(n, depth, width, sync_read), name="cost_probe",
                           emit_src=False)
