"""The simulation harness: the ``tb_top`` wrapper, host command images and read-back dumps.

``tb_top`` (generated here as Verilog text) instantiates the network (module ``network``, from
``hdl.generate.to_verilog``) and one ``host_player`` (``tb/host_player.v``) per node, and exposes
only what the cocotb test needs at the edges of a run::

    inputs   clk, rst, start, tb_run[7:0], tb_load, tb_readback, tb_dump
    outputs  done, error, cycles, node_done[N-1:0], node_error[N-1:0], node_step[N*S-1:0],
             tb_loaded, tb_read_done, tb_dumped     (AND over all players)

The network's ports are read from its Verilog (:func:`parse_ports`), so the wrapper follows the
contract's names (docs/hardware.md) as Amaranth flattens them (``host_cmd__3__payload``,
``node_done__3`` or a vector ``node_done``) without importing the hardware.

Command images (:func:`program_images`) hold, per node, every host command that programs a run:
each engine's schedule-table rows followed by one invalid row (so a table never keeps a longer
program of an earlier run), then the node's vector, one buffer flit per command. The player
reads the responses of ``buffer_flits`` read commands back; :func:`read_dump` turns its
``$writememh`` file into flits.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Mapping, Sequence

import numpy as np

from golden_model.lowering import LoweredSchedule

__all__ = [
    "HOST_PLAYER", "HostCmdLayout", "NetworkPorts", "parse_ports",
    "generate_tb_top", "program_images", "write_image", "read_dump", "pack_flits",
    "image_depth_for", "Backdoor", "START_DELAY",
]

#: The player's Verilog source.
HOST_PLAYER = pathlib.Path(__file__).with_name("host_player.v")
#: Cycles from ``tb_top``'s ``start`` (and ``rst``) to the network's (a register: see
#: :func:`generate_tb_top`).
START_DELAY = 1


# --------------------------------------------------------------------------------------------
# Layouts (docs/hardware.md); taken from hdl when it is importable, else from the contract
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class HostCmdLayout:
    """Bit offsets of ``HostCmd = {write: 1, target: 1, engine: 4, addr: 20, data: flit_width}``
    (first field in the low bits)."""
    write: tuple[int, int] = (0, 1)
    target: tuple[int, int] = (1, 1)
    engine: tuple[int, int] = (2, 4)
    addr: tuple[int, int] = (6, 20)
    data: tuple[int, int] = (26, 128)

    @property
    def width(self) -> int:
        return max(off + w for off, w in dataclasses.astuple(self))

    @classmethod
    def for_flit_width(cls, flit_width: int) -> "HostCmdLayout":
        """The contract's layout, or ``hdl``'s own ``HostCmd`` layout when it can be found."""
        layout = _hdl_layout(("HostCmd",), flit_width)
        if layout is not None:
            return cls(**{name: layout[name] for name in ("write", "target", "engine", "addr",
                                                          "data")})
        return cls(data=(26, flit_width))

    def pack(self, write: int, target: int, engine: int, addr: int, data: int = 0) -> int:
        word = 0
        for (off, width), value in ((self.write, write), (self.target, target),
                                    (self.engine, engine), (self.addr, addr), (self.data, data)):
            if not 0 <= value < (1 << width):
                raise ValueError(f"host command field value {value} does not fit {width} bits")
            word |= value << off
        return word


def _hdl_layout(names, flit_width):
    """``{field: (offset, width)}`` of ``hdl.host.HostCmd``, or None without ``hdl``."""
    try:
        from hdl.host import HostCmd  # noqa: PLC0415
    except ImportError:     # hdl not written yet: use the contract
        return None
    return {name: (field.offset, field.width) for name, field in HostCmd(flit_width)}


# --------------------------------------------------------------------------------------------
# The network's ports
# --------------------------------------------------------------------------------------------

_DECL_RE = re.compile(r"^\s*(input|output|inout)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):(\d+)\]\s*)?"
                      r"([A-Za-z_][A-Za-z0-9_$]*)\s*;", re.M)


def parse_ports(verilog: str, module: str = "network") -> dict[str, tuple[str, int]]:
    """``{port: (direction, width)}`` of ``module`` in Verilog text written by Yosys (one
    declaration per line, as Amaranth's back end writes them)."""
    m = re.search(rf"^\s*module\s+\\?{re.escape(module)}\s*[(#;]", verilog, re.M)
    if m is None:
        raise ValueError(f"module {module!r} not found in the Verilog")
    end = verilog.find("endmodule", m.end())
    body = verilog[m.end():end if end >= 0 else None]
    ports = {}
    for d in _DECL_RE.finditer(body):
        direction, hi, lo, name = d.groups()
        width = abs(int(hi) - int(lo)) + 1 if hi is not None else 1
        ports[name] = (direction, width)
    if not ports:
        raise ValueError(f"module {module!r} declares no ports")
    return ports


@dataclasses.dataclass(frozen=True)
class NetworkPorts:
    """How the contract's ports appear in the network's Verilog, for ``num_nodes`` nodes."""
    num_nodes: int
    ports: Mapping[str, tuple[str, int]]

    def _need(self, name, direction=None):
        if name not in self.ports:
            raise ValueError(f"network has no port {name!r} (docs/hardware.md); it has "
                             f"{', '.join(sorted(self.ports)[:12])} ...")
        if direction is not None and self.ports[name][0] != direction:
            raise ValueError(f"network port {name!r} is an {self.ports[name][0]}, expected an "
                             f"{direction}")
        return name

    def stream(self, base: str, node: int, member: str) -> str:
        return self._need(f"{base}__{node}__{member}")

    def width(self, name: str) -> int:
        return self.ports[self._need(name)][1]

    @property
    def cmd_width(self) -> int:
        return self.width(self.stream("host_cmd", 0, "payload"))

    @property
    def rsp_width(self) -> int:
        return self.width(self.stream("host_rsp", 0, "payload"))

    def per_node(self, base: str, node: int) -> tuple[str, int]:
        """Verilog expression of node ``node``'s ``base`` status and its width: an array port
        ``base__<node>`` or a slice of one vector port ``base``."""
        name = f"{base}__{node}"
        if name in self.ports:
            return name, self.ports[name][1]
        if base in self.ports:
            total = self.ports[base][1]
            if total % self.num_nodes:
                raise ValueError(f"network port {base!r} is {total} bits, not a multiple of "
                                 f"{self.num_nodes} nodes")
            w = total // self.num_nodes
            return (f"{base}[{node * w + w - 1}:{node * w}]" if w > 1 else f"{base}[{node}]"), w
        raise ValueError(f"network has no port {name!r} or {base!r} (docs/hardware.md)")

    def check(self) -> None:
        """Raise ``ValueError`` naming the first contract port that is missing."""
        for name, direction in (("clk", "input"), ("rst", "input"), ("start", "input"),
                                ("done", "output"), ("error", "output"), ("cycles", "output")):
            self._need(name, direction)
        for v in range(self.num_nodes):
            for member, direction in (("valid", "input"), ("ready", "output"),
                                      ("payload", "input")):
                self._need(f"host_cmd__{v}__{member}", direction)
            for member, direction in (("valid", "output"), ("ready", "input"),
                                      ("payload", "output")):
                self._need(f"host_rsp__{v}__{member}", direction)
            self._need(f"node_start__{v}", "input")
            for base in ("node_done", "node_error", "node_step"):
                self.per_node(base, v)


def image_depth_for(config, backdoor: bool = False) -> int:
    """Command-image words a node may need: header, every table row plus terminator, and (unless
    the vectors go through the :class:`Backdoor`) the buffer."""
    return (1 + config.num_tables * (config.table_depth + 1)
            + (0 if backdoor else config.buffer_depth))


def generate_tb_top(network_verilog: str, num_nodes: int, *, image_depth: int, rsp_depth: int,
                    cmd_layout: HostCmdLayout, valid_pct: int = 70, ready_pct: int = 70,
                    seed: int = 1, backdoor: "Backdoor | None" = None) -> str:
    """Verilog text of ``tb_top`` around the module ``network`` of ``network_verilog``.

    Parameters
    ----------
    network_verilog : str
        The network's Verilog (its ports are read from it).
    num_nodes : int
    image_depth, rsp_depth : int
        Words of each player's command image and response memory.
    cmd_layout : HostCmdLayout
        Where the player puts the address of its read commands.
    valid_pct, ready_pct, seed : int
        The players' default back-pressure (plusargs override them at run time).
    backdoor : Backdoor, optional
        Also give ``tb_top`` the buffer backdoor (:class:`Backdoor`; hierarchical references
        into the network, so not for Verilator's hierarchical builds).
    """
    ports = NetworkPorts(num_nodes, parse_ports(network_verilog))
    ports.check()
    cmd_w, rsp_w = ports.cmd_width, ports.rsp_width
    if cmd_w != cmd_layout.width:
        raise ValueError(f"host_cmd payload is {cmd_w} bits but the HostCmd layout is "
                         f"{cmd_layout.width} bits")
    step_w = ports.per_node("node_step", 0)[1]
    cycles_w = ports.width("cycles")
    n = num_nodes
    lines = [
        "// Generated by tb/harness.py: the network and one host_player per node.",
        "module tb_top (",
        "    input  wire clk,",
        "    input  wire rst,",
        "    input  wire start,",
        "    input  wire [7:0] tb_run,",
        "    input  wire tb_load,",
        "    input  wire tb_readback,",
        "    input  wire tb_dump,",
        "    output wire done,",
        "    output wire error,",
        f"    output wire [{cycles_w - 1}:0] cycles,",
        f"    output wire [{n - 1}:0] node_done,",
        f"    output wire [{n - 1}:0] node_error,",
        f"    output wire [{n * step_w - 1}:0] node_step,",
        "    output wire tb_loaded,",
        "    output wire tb_read_done,",
        "    output wire tb_dumped",
        ");",
        f"    wire [{n - 1}:0] loaded_v, read_done_v, dumped_v;",
        "    // rst and start reach the network through a register (START_DELAY cycles): logic",
        "    // fed by a top-level input is evaluated by Verilator at every clock edge, logic fed",
        "    // by registers only at the rising one (the network's whole next-state logic depends",
        "    // on its synchronous reset), which halves the simulation's work per cycle.",
        "    reg net_rst = 1'b1, net_start = 1'b0;",
        "    always @(posedge clk) begin",
        "        net_rst <= rst;",
        "    end",
        "    assign tb_loaded = &loaded_v;",
        "    assign tb_read_done = &read_done_v;",
        "    assign tb_dumped = &dumped_v;",
    ]
    for v in range(n):
        lines += [
            f"    wire cmd_valid_{v}, cmd_ready_{v}, rsp_valid_{v}, rsp_ready_{v};",
            f"    wire [{cmd_w - 1}:0] cmd_payload_{v};",
            f"    wire [{rsp_w - 1}:0] rsp_payload_{v};",
        ]
    # +tb_start_skew=S (S > 0): instead of one start, NI v starts d_v cycles after it, d_v in
    # 0..S drawn from +tb_seed (the same xorshift as the players), to vary the timing.
    lines += [
        "    integer start_skew = 0, skew_seed = 1;",
        "    initial begin",
        '        if ($value$plusargs("tb_start_skew=%d", start_skew)) ;',
        '        if ($value$plusargs("tb_seed=%d", skew_seed)) ;',
        "    end",
        "    function [31:0] skew_hash(input [31:0] x);",
        "        reg [31:0] y;",
        "        begin",
        "            y = x ^ (x << 13); y = y ^ (y >> 17); y = y ^ (y << 5);",
        "            y = y ^ (y << 13); y = y ^ (y >> 17); skew_hash = y ^ (y << 5);",
        "        end",
        "    endfunction",
        f"    reg [{n - 1}:0] node_start = {n}'d0;",
        f"    reg [31:0] skew_left [0:{n - 1}];",
        "    integer sv;",
        f"    initial for (sv = 0; sv < {n}; sv = sv + 1) skew_left[sv] = 32'd0;",
        "    always @(posedge clk) begin",
        "        net_start <= start && start_skew <= 0;",
        f"        for (sv = 0; sv < {n}; sv = sv + 1) begin",
        "            node_start[sv] <= skew_left[sv] == 32'd1;",
        "            if (start && start_skew > 0)",
        "                skew_left[sv] <= 32'd1 + skew_hash(skew_seed ^ (32'h9E3779B9 * (sv + 1)))",
        "                                 % (start_skew + 1);",
        "            else if (skew_left[sv] != 32'd0)",
        "                skew_left[sv] <= skew_left[sv] - 32'd1;",
        "        end",
        "    end",
    ]
    conns = ["        .clk(clk),", "        .rst(net_rst),", "        .start(net_start),",
             "        .done(done),", "        .error(error),", "        .cycles(cycles),"]
    vector_status = {}
    for v in range(n):
        conns += [
            f"        .{ports.stream('host_cmd', v, 'valid')}(cmd_valid_{v}),",
            f"        .{ports.stream('host_cmd', v, 'ready')}(cmd_ready_{v}),",
            f"        .{ports.stream('host_cmd', v, 'payload')}(cmd_payload_{v}),",
            f"        .{ports.stream('host_rsp', v, 'valid')}(rsp_valid_{v}),",
            f"        .{ports.stream('host_rsp', v, 'ready')}(rsp_ready_{v}),",
            f"        .{ports.stream('host_rsp', v, 'payload')}(rsp_payload_{v}),",
        ]
        conns.append(f"        .node_start__{v}(node_start[{v}]),")
        for base, out in (("node_done", "node_done"), ("node_error", "node_error"),
                          ("node_step", "node_step")):
            name = f"{base}__{v}"
            if name in ports.ports:
                w = ports.ports[name][1]
                lo = v * (step_w if base == "node_step" else 1)
                sl = f"[{lo + w - 1}:{lo}]" if w > 1 or base == "node_step" else f"[{lo}]"
                conns.append(f"        .{name}({out}{sl}),")
            else:
                vector_status[base] = out
    for base, out in vector_status.items():
        conns.append(f"        .{base}({out}),")
    conns[-1] = conns[-1].rstrip(",")
    lines += ["    network u_network (", *conns, "    );"]
    for v in range(n):
        lines += [
            "    host_player #(",
            f"        .NODE({v}), .CMD_WIDTH({cmd_w}), .RSP_WIDTH({rsp_w}),",
            f"        .IMAGE_DEPTH({image_depth}), .RSP_DEPTH({rsp_depth}),",
            f"        .ADDR_LSB({cmd_layout.addr[0]}), .ADDR_WIDTH({cmd_layout.addr[1]}),",
            f"        .SEED({seed}), .VALID_PCT({valid_pct}), .READY_PCT({ready_pct})",
            f"    ) u_player_{v} (",
            "        .clk(clk), .rst(rst), .run(tb_run),",
            "        .load(tb_load), .readback(tb_readback), .dump(tb_dump),",
            f"        .loaded(loaded_v[{v}]), .read_done(read_done_v[{v}]), "
            f".dumped(dumped_v[{v}]),",
            f"        .cmd_valid(cmd_valid_{v}), .cmd_ready(cmd_ready_{v}), "
            f".cmd_payload(cmd_payload_{v}),",
            f"        .rsp_valid(rsp_valid_{v}), .rsp_ready(rsp_ready_{v}), "
            f".rsp_payload(rsp_payload_{v})",
            "    );",
        ]
    if backdoor is not None:
        lines += backdoor.verilog("u_network")
    lines += ["endmodule", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command images and dumps
# --------------------------------------------------------------------------------------------

def pack_flits(flits: np.ndarray, element_type) -> np.ndarray:
    """(..., elements_per_flit) values -> their bit patterns (``element_type.to_bits``: unsigned
    integers of the element's width), in element order (element ``e`` goes to bits
    ``[e*bits +: bits]`` of the flit)."""
    return element_type.to_bits(flits)


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _hex_lines(words_be: np.ndarray, digits: int) -> bytes:
    """Big-endian byte rows (n, B) -> b'hex\\n' lines of the last ``digits`` hex digits."""
    n, nbytes = words_be.shape
    chars = np.empty((n, 2 * nbytes + 1), dtype=np.uint8)
    chars[:, 0:2 * nbytes:2] = _HEX[words_be >> 4]
    chars[:, 1:2 * nbytes:2] = _HEX[words_be & 15]
    chars[:, -1] = ord("\n")
    drop = 2 * nbytes - digits
    return chars[:, drop:].tobytes()


def _words_to_be(words: Sequence[int], nbytes: int) -> np.ndarray:
    out = np.zeros((len(words), nbytes), dtype=np.uint8)
    for i, w in enumerate(words):
        out[i] = np.frombuffer(int(w).to_bytes(nbytes, "big"), dtype=np.uint8)
    return out


@dataclasses.dataclass(frozen=True)
class Backdoor:
    """The buffer backdoor of long runs: every NI buffer bank filled from a file and dumped to
    one directly, instead of through the host port (two host commands per flit: for the
    demo's 2,359,296-element vectors 1.2 million cycles per run, twice the all-reduce itself).

    ``tb_top`` gets it when generated with one (``generate_tb_top(backdoor=...)``); a run uses it
    with the plusarg ``+tb_backdoor``, and the schedule tables are still written through
    ``host_cmd``, so the all-reduce's cycles are exactly those of a run loaded through the host
    port (``tests/test_backdoor.py`` compares the two). Files, under ``<tb_dir>/run<k>/``:

    * ``buf_<u>_<b>.bin`` (written by :meth:`write_load`): read into bank ``b`` of node ``u``
      with ``$fread`` at the rising edge where ``tb_load`` is 1; words of ``W/8`` bytes, most
      significant byte first (IEEE 1364-2005, 17.2.8); a missing file loads nothing.
    * ``out_<u>_<b>.bin`` (read by :meth:`read_dump`): every word of the bank, written with
      ``$fwrite("%u")`` at the edge where ``tb_dump`` is 1: ``W/32`` 32-bit units, least
      significant first, each little-endian (what Icarus and Verilator write).

    Bank ``b`` holds flit ``a`` with ``a % K == b`` as word ``a // K`` (``hdl.banked_buffer``);
    the names come from ``hdl.generate.buffer_arrays``.

    Two forms, the same files at the same clock edges:

    * In ``tb_top`` (:meth:`verilog`): hierarchical references into the network, so a Verilator
      build with it is flat, not ``--hierarchical``. For cocotb (Icarus, and Verilator with
      waveforms).
    * In the banks (:meth:`dpi_verilog`, for the C++ driver of long Verilator runs,
      ``tb/verilator_driver.cpp``): the buffer banks' own module (``hdl.banked_buffer.
      BANK_MODULE``) polls the driver through DPI at every rising edge and has the driver load or
      dump its word array from or to its own file (``allreduce_bd_copy``, same formats as the
      ``tb_top`` form's ``$fread`` and ``$fwrite``, five times faster in Verilator), found by its
      ``%m`` in the map file (:meth:`write_map`). Nothing reaches into the NI,
      so the NI can be one hierarchical block, verilated and compiled once for all nodes (the
      64-node networks: ``tb.runner.FLAT_MAX_NODES``).
    """
    names: tuple            # names[u][b]: one per copy, relative to the network instance
    bank_depth: int         # words per bank
    flit_width: int         # bits per word

    @classmethod
    def for_config(cls, config, num_nodes: int) -> "Backdoor":
        """The backdoor of the network of ``num_nodes`` NIs built with ``config``.

        Raises
        ------
        ValueError
            If the flit width is not a multiple of 32 bits (the dump's ``%u`` units).
        """
        if config.flit_width % 32:
            raise ValueError(f"the buffer backdoor needs a flit width that is a multiple of 32 "
                             f"bits, not {config.flit_width}")
        from hdl.generate import buffer_arrays  # noqa: PLC0415
        names, depth = buffer_arrays(config, num_nodes)
        return cls(tuple(map(tuple, names)), depth, config.flit_width)

    @property
    def num_banks(self) -> int:
        return len(self.names[0])

    @staticmethod
    def file(kind: str, node: int, bank: int, copy: int = 0) -> str:
        """The file of copy ``copy`` of bank ``bank`` of node ``node`` in a run's folder:
        ``kind`` ``"buf"`` (the load, the same for every copy) or ``"out"`` (the dump; copies
        above 0, which ``read_dump`` does not read, have one of their own)."""
        tail = f"_copy{copy}" if copy and kind == "out" else ""
        return f"{kind}_{node}_{bank}{tail}.bin"

    def verilog(self, instance: str) -> list[str]:
        """Lines of ``tb_top``'s backdoor around the network instance ``instance``."""
        lines = [
            "    // Buffer backdoor (tb.harness.Backdoor): with +tb_backdoor, $fread every bank at",
            "    // tb_load and $fwrite it at tb_dump.",
            "    reg [8*512-1:0] bd_dir;",
            "    reg [8*600-1:0] bd_name;",
            "    reg bd_on, bd_have_dir;",
            "    integer bd_fd, bd_i, bd_n;",
            "    initial begin",
            "        bd_dir = 0;",
            "        bd_have_dir = $value$plusargs(\"tb_dir=%s\", bd_dir);",
            "        bd_on = $test$plusargs(\"tb_backdoor\");",
            "    end",
            "    always @(posedge clk) begin",
        ]
        for kind, mode, flag in (("buf", "rb", "tb_load"), ("out", "wb", "tb_dump")):
            lines.append(f"        if (bd_on && {flag}) begin")
            refs = [(u, b, name) for u, banks in enumerate(self.names)
                    for b, copies in enumerate(banks)       # every copy loads, copy 0 dumps
                    for name in (copies if kind == "buf" else copies[:1])]
            for u, b, name in refs:
                ref, file = f"{instance}.{name}", self.file(kind, u, b)
                lines += [
                    f"            if (bd_have_dir) $sformat(bd_name, \"%0s/run%0d/{file}\","
                    f" bd_dir, tb_run);",
                    f"            else $sformat(bd_name, \"run%0d/{file}\", tb_run);",
                    f"            bd_fd = $fopen(bd_name, \"{mode}\");",
                ]
                if kind == "buf":
                    lines.append(f"            if (bd_fd != 0) begin bd_n = $fread({ref}, "
                                 f"bd_fd); $fclose(bd_fd); end")
                else:
                    lines += [
                        "            if (bd_fd != 0) begin",
                        f"                for (bd_i = 0; bd_i < {self.bank_depth}; "
                        f"bd_i = bd_i + 1)",
                        f"                    $fwrite(bd_fd, \"%u\", {ref}[bd_i]);",
                        "                $fclose(bd_fd);",
                        "            end",
                    ]
            lines.append("        end")
        lines.append("    end")
        return lines

    def dpi_verilog(self, verilog: str) -> str:
        """``verilog`` (the network) with the DPI form of the backdoor in the banks' module.

        Raises
        ------
        ValueError
            If ``verilog`` has no bank module (``hdl.banked_buffer.BANK_MODULE``).
        """
        from hdl.banked_buffer import BANK_MODULE  # noqa: PLC0415
        from hdl.ram import VERILOG_STORAGE as array  # noqa: PLC0415
        head = re.search(rf"^module {BANK_MODULE}\b", verilog, flags=re.M)
        end = head and verilog.find("\nendmodule", head.end())
        if not head or end < 0:
            raise ValueError(f"no module {BANK_MODULE} (the buffer banks) in the network")
        lines = [
            "  // Buffer backdoor, DPI form (tb.harness.Backdoor; tb/verilator_driver.cpp):",
            "  // at the edge after the driver raised its serial, load or dump this bank's file.",
            '  import "DPI-C" function int allreduce_bd_serial();',
            '  import "DPI-C" function int allreduce_bd_kind();',
            '  import "DPI-C" function string allreduce_bd_file(input string scope);',
            '  import "DPI-C" function void allreduce_bd_copy(input int kind, input string path,',
            "                                                 input int width,",
            "                                                 inout bit [WIDTH-1:0] mem []);",
            "  integer bd_seen = 0, bd_req;",
            "  string bd_path;",
            "  always @(posedge clk) begin",
            "    bd_req = allreduce_bd_serial();",
            "    if (bd_req != bd_seen) begin",
            "      bd_seen = bd_req;",
            '      bd_path = allreduce_bd_file($sformatf("%m"));',
            "      if (bd_path.len() != 0)",
            f"        allreduce_bd_copy(allreduce_bd_kind(), bd_path, WIDTH, {array});",
            "    end",
            "  end",
        ]
        return verilog[:end] + "\n" + "\n".join(lines) + verilog[end:]

    def write_map(self, path: pathlib.Path) -> None:
        """The DPI form's map file: ``<load file> <dump file> <name>`` per copy of every bank
        (:meth:`file`), the name relative to the network without the array
        (``ni3.buffer.bank5.ram``)."""
        from hdl.ram import VERILOG_STORAGE  # noqa: PLC0415
        path.write_text("".join(
            f"{self.file('buf', u, b)} {self.file('out', u, b, g)} "
            f"{name.removesuffix('.' + VERILOG_STORAGE)}\n"
            for u, banks in enumerate(self.names) for b, copies in enumerate(banks)
            for g, name in enumerate(copies)))

    def write_load(self, folder: pathlib.Path, node: int, flits: np.ndarray) -> None:
        """Write node ``node``'s load files: ``flits`` ((F, elems_per_flit) bit patterns of the
        element width, :func:`pack_flits`) as the banks' first words.

        Raises
        ------
        ValueError
            If the flits do not fit the buffer or are not ``flit_width`` bits wide.
        """
        words = _flit_bytes(flits, self.flit_width)     # little-endian words
        k = self.num_banks
        if len(words) > k * self.bank_depth:
            raise ValueError(f"{len(words)} flits do not fit a buffer of "
                             f"{k * self.bank_depth} flits")
        for b in range(k):
            (folder / self.file("buf", node, b)).write_bytes(
                np.ascontiguousarray(words[b::k, ::-1]).tobytes())

    def read_dump(self, folder: pathlib.Path, node: int, num_flits: int, elems_per_flit: int,
                  element_type) -> np.ndarray:
        """Node ``node``'s buffer flits ``0 .. num_flits-1`` from its dump files:
        (num_flits, elems_per_flit) values of ``element_type``.

        Raises
        ------
        ValueError
            If a dump file is missing or has the wrong size.
        """
        k, nbytes = self.num_banks, self.flit_width // 8
        banks = []
        for b in range(k):
            path = folder / self.file("out", node, b)
            try:
                data = np.fromfile(path, dtype=np.uint8)
            except OSError as exc:
                raise ValueError(f"{path}: backdoor dump missing ({exc.strerror})") from None
            if data.size != self.bank_depth * nbytes:
                raise ValueError(f"{path}: {data.size} bytes, expected {self.bank_depth} words "
                                 f"of {nbytes} bytes")
            banks.append(data.reshape(self.bank_depth, nbytes))
        words = np.stack(banks, axis=1).reshape(k * self.bank_depth, nbytes)[:num_flits]
        ebytes = element_type.bits // 8
        bits = np.ascontiguousarray(words).view(f"<u{ebytes}").reshape(num_flits, elems_per_flit)
        return element_type.from_bits(bits)


def _flit_bytes(flits: np.ndarray, flit_width: int) -> np.ndarray:
    """(F, elems_per_flit) element bit patterns -> (F, flit_width/8) little-endian word bytes
    (element ``e`` in bits ``[e*bits +: bits]``)."""
    flits = np.asarray(flits)
    ebytes = flits.dtype.itemsize
    nbytes = flit_width // 8
    if flits.ndim != 2 or flits.shape[1] * ebytes != nbytes:
        raise ValueError(f"flits of shape {flits.shape} and {8 * ebytes}-bit elements are not "
                         f"{flit_width}-bit words")
    return np.ascontiguousarray(flits.astype(f"<u{ebytes}")).view(np.uint8).reshape(-1, nbytes)


@dataclasses.dataclass
class NodeImage:
    """One node's command image: control words (tables) and the buffer flits to write (through
    the host port, or with ``backdoor`` through :class:`Backdoor`, and then none is read back
    through the host port either)."""
    control: list            # HostCmd words (ints)
    flits: np.ndarray        # (buffer_flits, elements_per_flit) bit patterns, to addr 0..
    num_read: int
    backdoor: bool = False

    @property
    def host_flits(self) -> np.ndarray:
        """The flits written through the host port."""
        return self.flits[:0] if self.backdoor else self.flits

    @property
    def num_load(self) -> int:
        return len(self.control) + len(self.host_flits)


def program_images(lowered: LoweredSchedule, config, vectors: np.ndarray,
                   layout: HostCmdLayout | None = None,
                   backdoor: bool = False) -> list[NodeImage]:
    """Per-node command images that program ``lowered`` and load ``vectors`` ((N, D), converted
    to ``config``'s element type); with ``backdoor`` the vectors go through :class:`Backdoor`.

    Raises
    ------
    ValueError
        If the schedule does not fit ``config`` (``hdl.config.check_schedule_fits``).
    """
    if layout is None:
        layout = HostCmdLayout.for_flit_width(config.flit_width)
    from hdl.config import check_schedule_fits  # noqa: PLC0415
    check_schedule_fits(config, lowered)
    from hdl.schedule_table import engine_tables  # noqa: PLC0415
    etype = config.element_type
    flits = pack_flits(lowered.pack(np.asarray(vectors, dtype=etype.dtype)), etype)
    images = []
    for prog in lowered.programs:
        control = [layout.pack(1, 1, table.engine, table.base + i, word)
                   for table in engine_tables(prog, config)
                   for i, word in enumerate(table.words)]
        images.append(NodeImage(control, flits[prog.node],
                                0 if backdoor else lowered.buffer_flits, backdoor))
    return images


def write_image(path: pathlib.Path, image: NodeImage, layout: HostCmdLayout,
                image_depth: int) -> None:
    """Write ``image`` as the player's ``$readmemh`` file (header word, then the commands)."""
    if image.num_load + 1 > image_depth:
        raise ValueError(f"command image of {image.num_load + 1} words exceeds the player's "
                         f"IMAGE_DEPTH={image_depth}")
    width = layout.width
    nbytes = -(-width // 8)
    digits = -(-width // 4)
    header = image.num_load | (image.num_read << 32)
    head = _words_to_be([header, *image.control], nbytes)
    # Buffer writes, vectorised: write=1, target=0, engine=0, addr=f, data=flit.
    host_flits = image.host_flits
    nf = len(host_flits)
    epf = host_flits.shape[1] if nf else 0
    bits = host_flits.dtype.itemsize * 8
    data_bits = layout.data[1]
    if nf:
        base = layout.pack(1, 0, 0, 0, 0)
        # Assemble each word as little-endian uint32 limbs, then convert to big-endian bytes.
        limbs = -(-(layout.data[0] + data_bits) // 32) + 1
        acc = np.zeros((nf, limbs), dtype=np.uint64)
        addr = np.arange(nf, dtype=np.uint64)

        def add_field(values: np.ndarray, offset: int):
            # values: (nf,) uint64 < 2^32; OR them in at bit offset (may straddle two limbs).
            limb, shift = divmod(offset, 32)
            acc[:, limb] |= (values << np.uint64(shift)) & np.uint64(0xFFFFFFFF)
            if shift:
                acc[:, limb + 1] |= values >> np.uint64(32 - shift)

        for limb in range(limbs):   # constant bits (write flag)
            acc[:, limb] |= np.uint64((base >> (32 * limb)) & 0xFFFFFFFF)
        add_field(addr & np.uint64((1 << layout.addr[1]) - 1), layout.addr[0])
        for e in range(epf):
            element = host_flits[:, e].astype(np.uint64)
            for part in range(0, bits, 32):     # add_field takes 32 bits at a time
                add_field((element >> np.uint64(part)) & np.uint64((1 << min(32, bits - part)) - 1),
                          layout.data[0] + bits * e + part)
        le = acc.astype("<u4").view(np.uint8).reshape(nf, limbs * 4)
        body = le[:, :nbytes][:, ::-1]
    else:
        body = np.zeros((0, nbytes), dtype=np.uint8)
    # Pad to the full depth: Icarus warns about a file shorter than the memory.
    pad = image_depth - 1 - image.num_load
    path.write_bytes(_hex_lines(head, digits) + _hex_lines(np.ascontiguousarray(body), digits)
                     + (b"0" * digits + b"\n") * pad)


_NIBBLE = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _NIBBLE[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _NIBBLE[_c] = 10 + _i


def read_dump(path: pathlib.Path, num_flits: int, elems_per_flit: int,
              element_type) -> np.ndarray:
    """Read a player's ``$writememh`` dump: (num_flits, elems_per_flit) values of
    ``element_type`` (a ``golden_model.elements.ElementType``).

    Raises
    ------
    ValueError
        If the file has the wrong number of words or a word holds x/z bits (the NI returned
        undefined data).
    """
    text = pathlib.Path(path).read_bytes()
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(b"//") and not ln.startswith(b"@")]
    if len(lines) != num_flits:
        raise ValueError(f"{path}: {len(lines)} words read back, expected {num_flits}")
    elem_width = element_type.bits
    digits = elems_per_flit * elem_width // 4
    if num_flits == 0:
        return np.zeros((0, elems_per_flit), dtype=element_type.dtype)
    lines = [ln.replace(b"_", b"").rjust(digits, b"0")[-digits:] for ln in lines]
    arr = np.frombuffer(b"".join(lines), dtype=np.uint8).reshape(num_flits, digits)
    nib = _NIBBLE[arr]
    if (nib == 255).any():
        bad = int(np.argwhere((nib == 255).any(axis=1))[0][0])
        raise ValueError(f"{path}: word {bad} read back holds undefined bits: "
                         f"{lines[bad].decode(errors='replace')}")
    per = elem_width // 4
    nib = nib.reshape(num_flits, elems_per_flit, per).astype(np.uint64)
    vals = np.zeros((num_flits, elems_per_flit), dtype=np.uint64)
    for k in range(per):
        vals = (vals << np.uint64(4)) | nib[:, :, k]
    # Hex text is most significant first: the last group is element 0.
    return element_type.from_bits(vals[:, ::-1])
