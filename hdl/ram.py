"""A RAM with two back ends: ``amaranth.lib.memory.Memory`` or a compact Verilog module.

Every memory of the hardware (``hdl.banked_buffer``, ``hdl.fifo``, ``hdl.delay_line``, the
engine tables, the CXL banks) is built with one write port and one read port, what block RAM and
SRAM macros have; the class takes more ports only for its own tests of the two back ends.

Why two: Amaranth's Verilog back end writes a memory's initial contents as one ``initial``
assignment per word, and Yosys takes minutes on a 600k-flit buffer (and Verilator would compile
600k statements per NI). ``hdl.generate.to_verilog`` therefore converts inside
``verilog_rams()``; there every ``RAM`` becomes an instance of a small behavioural module (written
here, appended to the output file by ``to_verilog``) that zeroes its array with a loop. Outside
that context (``amaranth.sim``, ``verilog.convert`` called directly) a ``RAM`` is an ordinary
``Memory``. Both have the same behaviour: synchronous read ports with an enable, each transparent
to a chosen set of write ports (a read of an address written in the same cycle returns the new
data), synchronous write ports, contents zero after configuration.
"""

import contextlib
import contextvars

from amaranth.hdl import ClockSignal, Instance, Module, Shape, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import Out
from amaranth.utils import ceil_log2

__all__ = ["RAM", "verilog_rams", "verilog_module_name", "VERILOG_ARRAY", "VERILOG_STORAGE"]

_INSTANCE = "ram"
#: The word array inside the behavioural module of a ``RAM`` (``reg [WIDTH-1:0] storage ...``).
VERILOG_STORAGE = _ARRAY = "storage"
#: The word array's hierarchical name inside a ``RAM`` elaborated under ``verilog_rams()``
#: (the instance of the behavioural module, then its array).
VERILOG_ARRAY = f"{_INSTANCE}.{_ARRAY}"

_VERILOG_RAMS = contextvars.ContextVar("verilog_rams", default=None)


@contextlib.contextmanager
def verilog_rams():
    """Elaborate every ``RAM`` as an instance of a behavioural Verilog module.

    Yields
    ------
    dict
        Module name -> Verilog text of every RAM module instantiated so far; append the texts to
        the converted design.
    """
    modules = {}
    token = _VERILOG_RAMS.set(modules)
    try:
        yield modules
    finally:
        _VERILOG_RAMS.reset(token)


class RAM(wiring.Component):
    """Multi-port synchronous RAM.

    Parameters
    ----------
    shape : shape-like
        Shape of a word (``unsigned(n)``, a ``data.Struct``, ...).
    depth : int
        Words (at least 2).
    num_write : int
        Write ports (at least 1).
    transparency : sequence of sequences of int
        One entry per read port: the write ports that read port is transparent to.
    bare : bool
        Read as a bare block RAM or SRAM macro reads: the data of a read port is undefined
        before its first read and when it reads a word a write port writes in the same cycle.
        The user must rely on neither (the behavioural Verilog module stops the simulation
        with an error on such a read-during-write); in return Yosys builds no logic to define
        them (``no_rw_check``, no initial read data), which on iCE40 is a 2:1 multiplexer and a
        register per data bit and port. Only for RAMs without transparency. Default False.
    kind : str
        Under ``verilog_rams()``, the word in the behavioural module's name
        (:func:`verilog_module_name`): RAMs of one kind share a module, so a memory whose
        contents a testbench must find (the NI buffer's banks) can have a module of its own.
        No effect on the hardware.

    Members
    -------
    read : ``Out(ReadPort.Signature(...)).array(num_read)``
        ``en`` (holds ``data`` when 0), ``addr``, ``data`` one cycle after ``addr``.
    write : ``Out(WritePort.Signature(...)).array(num_write)``
        ``en``, ``addr``, ``data``. Two write ports must not write one address in one cycle.

    Raises
    ------
    ValueError
        If ``depth`` < 2, there is no port, a transparency entry names a missing write port,
        ``bare`` is set with transparency, or ``kind`` is not a Verilog identifier.
    """

    def __init__(self, *, shape, depth, num_write, transparency, kind="ram", bare=False):
        if not (isinstance(kind, str) and kind.isidentifier() and kind.isascii()):
            raise ValueError(f"RAM kind must be a Verilog identifier, not {kind!r}")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2:
            raise ValueError(f"RAM depth must be an integer >= 2, not {depth!r}")
        if isinstance(num_write, bool) or not isinstance(num_write, int) or num_write < 1:
            raise ValueError(f"RAM num_write must be a positive integer, not {num_write!r}")
        transparency = tuple(tuple(sorted(set(t))) for t in transparency)
        if not transparency:
            raise ValueError("RAM needs at least one read port")
        for t in transparency:
            for w in t:
                if not (isinstance(w, int) and 0 <= w < num_write):
                    raise ValueError(f"RAM transparency names write port {w!r}, but there are "
                                     f"{num_write} write ports")
        if bare is not False and (bare is not True or any(transparency)):
            raise ValueError(f"RAM bare must be True or False and True only without "
                             f"transparency, not {bare!r} with transparency {transparency!r}")
        self._bare = bare
        self._shape = shape
        self._depth = depth
        self._transparency = transparency
        self._kind = kind
        addr_width = ceil_log2(depth)
        super().__init__({
            "read": Out(memory.ReadPort.Signature(addr_width=addr_width, shape=shape))
                    .array(len(transparency)),
            "write": Out(memory.WritePort.Signature(addr_width=addr_width, shape=shape))
                     .array(num_write),
        })

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        modules = _VERILOG_RAMS.get()
        if modules is not None:
            return self._elaborate_verilog(modules)
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self._shape, depth=self._depth, init=[])
        wports = [mem.write_port() for _ in self.write]
        for port, w in zip(wports, self.write):
            m.d.comb += [port.en.eq(w.en), port.addr.eq(w.addr), port.data.eq(w.data)]
        for r, t in zip(self.read, self._transparency):
            port = mem.read_port(transparent_for=[wports[i] for i in t])
            m.d.comb += [port.en.eq(r.en), port.addr.eq(r.addr), r.data.eq(port.data)]
        return m

    def _elaborate_verilog(self, modules):
        name = verilog_module_name(self._kind, len(self.write), self._transparency, self._bare)
        modules.setdefault(name, _verilog_module(name, len(self.write), self._transparency,
                                                 self._bare))
        width = Shape.cast(self._shape).width
        ports = {}
        for i, r in enumerate(self.read):
            ports[f"i_rd{i}_en"] = r.en
            ports[f"i_rd{i}_addr"] = r.addr
            ports[f"o_rd{i}_data"] = Value.cast(r.data)
        for i, w in enumerate(self.write):
            ports[f"i_wr{i}_en"] = w.en
            ports[f"i_wr{i}_addr"] = w.addr
            ports[f"i_wr{i}_data"] = Value.cast(w.data)
        m = Module()
        m.submodules[_INSTANCE] = Instance(name, p_WIDTH=width, p_DEPTH=self._depth,
                                           p_AW=ceil_log2(self._depth),
                                           i_clk=ClockSignal("sync"), **ports)
        return m


def verilog_module_name(kind, num_write, transparency, bare=False):
    """The behavioural module of a ``RAM(kind=kind, num_write=num_write,
    transparency=transparency, bare=bare)`` under ``verilog_rams()``:
    ``allreduce_<kind>_w<W>_t<masks>``, one hexadecimal mask of write ports per read port, then
    ``_bare`` for a bare RAM."""
    masks = "_".join(f"{sum(1 << w for w in t):x}" for t in transparency)
    return f"allreduce_{kind}_w{num_write}_t{masks}" + ("_bare" if bare else "")


def _verilog_module(name, num_write, transparency, bare=False):
    """Behavioural Verilog of a RAM with the given ports (same behaviour as the Memory path,
    except that a ``bare`` RAM's read data starts undefined and a read-during-write of one word
    stops the simulation)."""
    reads = (["// enable; words zero at start, read data undefined before the first read and on",
              "// a read of the word written in the same cycle (which stops a simulation)."]
             if bare else
             ["// enable, transparent to the write ports listed per read port; zero at start."])
    lines = ["// Multi-port RAM for hdl.ram.RAM (generated by hdl/ram.py): synchronous reads with",
             *reads,
             f"module {name} #(parameter WIDTH = 8, parameter DEPTH = 2, parameter AW = 1) ("]
    decl = ["  input wire clk"]
    for i in range(len(transparency)):
        decl += [f"  input wire rd{i}_en", f"  input wire [AW-1:0] rd{i}_addr",
                 f"  output reg [WIDTH-1:0] rd{i}_data"]
    for i in range(num_write):
        decl += [f"  input wire wr{i}_en", f"  input wire [AW-1:0] wr{i}_addr",
                 f"  input wire [WIDTH-1:0] wr{i}_data"]
    lines.append(",\n".join(decl))
    lines.append(");")
    lines.append(f"  {'(* no_rw_check *) ' if bare else ''}reg [WIDTH-1:0] {_ARRAY} [0:DEPTH-1];")
    lines.append("  integer i;")
    lines.append("  initial begin")
    lines.append(f"    for (i = 0; i < DEPTH; i = i + 1) {_ARRAY}[i] = {{WIDTH{{1'b0}}}};")
    for i in range(len(transparency) if not bare else 0):
        lines.append(f"    rd{i}_data = {{WIDTH{{1'b0}}}};")
    lines.append("  end")
    if bare:
        lines.append("`ifndef SYNTHESIS  // Yosys defines it: the check is for simulators")
        lines.append("  always @(posedge clk) begin")
        for i in range(len(transparency)):
            for w in range(num_write):
                lines += [f"    if (rd{i}_en && wr{w}_en && rd{i}_addr == wr{w}_addr) begin",
                          f'      $display("ERROR: %m: read port {i} reads word %0d while '
                          f'write port {w} writes it (undefined in a bare RAM)", rd{i}_addr);',
                          "      $fatal(1);",
                          "    end"]
        lines.append("  end")
        lines.append("`endif")
    lines.append("  always @(posedge clk) begin")
    for i in range(num_write):
        lines.append(f"    if (wr{i}_en) {_ARRAY}[wr{i}_addr] <= wr{i}_data;")
    lines.append("  end")
    for i, t in enumerate(transparency):
        lines.append("  always @(posedge clk) begin")
        lines.append(f"    if (rd{i}_en) begin")
        lines.append(f"      rd{i}_data <= {_ARRAY}[rd{i}_addr];")
        for w in t:
            lines.append(f"      if (wr{w}_en && wr{w}_addr == rd{i}_addr) rd{i}_data <= wr{w}_data;")
        lines.append("    end")
        lines.append("  end")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"
