"""The on-chip self-test of an all-reduce network (``allreduce-rtl board``; docs/board.md).

``SelfTest`` drives the network's host ports and ``start`` as a host would, from what the
bitstream carries: for each algorithm of the program in turn it

1. loads every node's schedule tables from a ROM of host commands (``TABLES``);
2. fills every node's buffer with ``flits`` flits from ``lanes`` xorshift32 generators per node
   (``golden_model.selftest``: the same seeds, steps and element mapping) (``FILL``);
3. pulses ``start`` and waits for ``done`` (``RUN``); a ``network error`` or no ``done`` within
   the run's ``timeout_cycles`` ends the test (the NIs may be stuck, so nothing more is sent);
4. reads every node's buffer back (``CHECK``): int32 flits are compared with the sum over all
   nodes of the generators' streams, recomputed by a second set of generators and adders; for
   float types each node's ``golden_model.selftest.checksum`` is compared with the one the
   golden executor gave at build time;
5. prints ``<name> cycles <8 hex digits> errors <4 hex digits> <status>`` and CR LF on the UART
   (``REPORT``), ``cycles`` being the network's count from ``start`` to ``done``, ``errors`` the
   mismatched flits (int32) or nodes (floats), ``status`` ``PASS``, ``FAIL`` (errors),
   ``TIME`` (timeout) or ``NERR`` (the network's ``error``).

After the last algorithm it prints ``selftest PASS`` or ``selftest FAIL`` and holds ``passed``
or ``failed`` until ``rerun`` rises, which starts the test again.
"""

import contextlib
import dataclasses

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .adders import stuck_sum_bit
from .config import FIELD_ADDR_BITS
from .host import TARGET_BUFFER, HostCmd, HostRsp
from .network import Network
from .ops import add_narrow, eq_const, is_zero, lt_const, select_word
from .uart import UARTTransmitter

__all__ = ["SelfTestRun", "SelfTestProgram", "SelfTest", "SelfTestSystem", "STATUS",
           "report_line", "final_line", "fault_context", "selftest_system"]

#: The status words of a report line, by status code.
STATUS = ("PASS", "FAIL", "TIME", "NERR")
_PASS, _FAIL, _TIME, _NERR = range(4)
CYCLE_DIGITS, ERROR_DIGITS = 8, 4
_HEX = "0123456789abcdef"


def report_line(name, cycles, errors, status):
    """The UART line of one algorithm (what :class:`SelfTest` prints), for decoders and tests."""
    return f"{name} cycles {cycles:0{CYCLE_DIGITS}x} errors {errors:0{ERROR_DIGITS}x} " \
           f"{STATUS[status]}\r\n"


def final_line(passed):
    """The UART line after the last algorithm."""
    return f"selftest {STATUS[0] if passed else STATUS[1]}\r\n"


@dataclasses.dataclass(frozen=True)
class SelfTestRun:
    """One algorithm of the self-test.

    Attributes
    ----------
    name : str
        Printed on the UART (printable ASCII, no spaces).
    table_commands : tuple of (int, int)
        ``(node, HostCmd word)`` that load the node's engine tables, in order.
    timeout_cycles : int
        Cycles after ``start`` without ``done`` that count as a timeout.
    checksums : tuple of int or None
        Per node, the expected ``golden_model.selftest.checksum`` (float types); None for
        int32, checked against the on-chip sums.
    """
    name: str
    table_commands: tuple
    timeout_cycles: int
    checksums: tuple | None = None


@dataclasses.dataclass(frozen=True)
class SelfTestProgram:
    """What the self-test runs (built by ``allreduce_rtl.board.selftest_program``).

    Attributes
    ----------
    runs : tuple of SelfTestRun
    flits : int
        Buffer flits filled and checked per node (the vector, flit-aligned).
    seeds : tuple of tuple of int
        ``golden_model.selftest.seeds``: ``seeds[v][k]`` of node v's lane k.
    dtype : str
        ``"int32"``, ``"float32"`` or ``"bfloat16"`` (``golden_model.selftest.element_bits``).
    float_exponents : tuple of int
        ``golden_model.selftest.FLOAT_EXPONENTS``.
    xorshift : tuple of int
        ``golden_model.selftest.XORSHIFT32_SHIFTS``.
    uart_divisor : int
        Cycles per UART bit.
    """
    runs: tuple
    flits: int
    seeds: tuple
    dtype: str
    float_exponents: tuple
    xorshift: tuple
    uart_divisor: int


class _Token(data.Struct):
    """A character of a report: ``kind`` 0 a literal ``value``, 1 hex digit ``value`` of the
    cycles, 2 of the errors, 3 character ``value`` of the status word; ``last`` ends the line."""
    value: 8
    kind: 2
    last: 1


def _line_tokens(name):
    lit = [(0, ord(c)) for c in f"{name} cycles "]
    lit += [(1, CYCLE_DIGITS - 1 - i) for i in range(CYCLE_DIGITS)]
    lit += [(0, ord(c)) for c in " errors "]
    lit += [(2, ERROR_DIGITS - 1 - i) for i in range(ERROR_DIGITS)]
    lit += [(0, 32)] + [(3, i) for i in range(4)] + [(0, 13), (0, 10)]
    return lit


def _final_tokens():
    return [(0, ord(c)) for c in "selftest "] + [(3, i) for i in range(4)] + [(0, 13), (0, 10)]


class SelfTest(wiring.Component):
    """The self-test controller of a network of ``num_nodes`` NIs (module docstring).

    Parameters
    ----------
    program : SelfTestProgram
    config : hdl.config.NIConfig
        The network's.
    num_nodes : int

    Members
    -------
    host_cmd : ``Out(stream.Signature(HostCmd)).array(N)``
    host_rsp : ``In(stream.Signature(HostRsp)).array(N)`` (always ready)
    start : ``Out(1)``; done, error : ``In(1)``; cycles : ``In(32)``
        The network's run control.
    rerun : ``In(1)``
        A rising edge after the test has ended starts it again.
    uart_tx : ``Out(1, init=1)``
    passed, failed, busy : ``Out(1)``

    Raises
    ------
    ValueError
        If the program has no run, a name is not printable ASCII without spaces, a table
        command names a node out of range, the seeds do not match the nodes and lanes, or the
        float exponents' base is not a multiple of 2^bits (the hardware puts the random bits
        below it).
    """

    def __init__(self, program, config, num_nodes):
        lanes = config.elems_per_flit
        if not program.runs:
            raise ValueError("a self-test program needs at least one run")
        for run in program.runs:
            if not run.name or not all(33 <= ord(c) < 127 for c in run.name):
                raise ValueError(f"run name {run.name!r} must be printable ASCII without spaces")
            bad = [u for u, _ in run.table_commands if not 0 <= u < num_nodes]
            if bad:
                raise ValueError(f"run {run.name}: table command for node {bad[0]} of "
                                 f"{num_nodes}")
        if len(program.seeds) != num_nodes or any(len(s) != lanes for s in program.seeds):
            raise ValueError(f"seeds must be {num_nodes} x {lanes}")
        base, bits = program.float_exponents
        if base & ((1 << bits) - 1) or not 0 < base + (1 << bits) <= 255:
            raise ValueError(f"float_exponents {program.float_exponents}: the base must be a "
                             f"multiple of 2^{bits} and base + 2^{bits} at most 255")
        self.program, self.config, self.num_nodes = program, config, num_nodes
        fw = config.flit_width
        super().__init__({
            "host_cmd": Out(stream.Signature(HostCmd(fw))).array(num_nodes),
            "host_rsp": In(stream.Signature(HostRsp(fw))).array(num_nodes),
            "start": Out(1), "done": In(1), "error": In(1), "cycles": In(32),
            "rerun": In(1), "uart_tx": Out(1, init=1),
            "passed": Out(1), "failed": Out(1), "busy": Out(1),
        })

    # -- pieces ---------------------------------------------------------------------------------

    def _xorshift(self, x):
        a, b, c = self.program.xorshift
        x = (x ^ (x << a))[:32]
        x = x ^ (x >> b)
        return (x ^ (x << c))[:32]

    def _element(self, word):
        """The element bits of a random word (``golden_model.selftest.element_bits``)."""
        if self.program.dtype == "int32":
            return word
        base, bits = self.program.float_exponents     # base's low `bits` bits are 0 (checked)
        f32 = Cat(word[:23], word[23:23 + bits], Const(base >> bits, 8 - bits), word[31])
        return f32 if self.program.dtype == "float32" else f32[16:]

    def _rom(self, m, name, shape, words):
        mem = memory.Memory(shape=shape, depth=len(words), init=words)
        m.submodules[name] = mem
        return mem.read_port()

    # -- the controller -------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        prog, cfg, n = self.program, self.config, self.num_nodes
        lanes, ew, fw = cfg.elems_per_flit, cfg.elem_width, cfg.flit_width
        runs = prog.runs
        cmd_layout = HostCmd(fw)
        node_bits = max(1, (n - 1).bit_length())
        cmd_bits = cmd_layout.size

        # ROM of table commands: node in the top bits.
        entries, starts = [], []
        for run in runs:
            starts.append(len(entries))
            entries += [(u << cmd_bits) | w for u, w in run.table_commands]
        starts.append(len(entries))
        table_rom = self._rom(m, "table_rom", unsigned(cmd_bits + node_bits), entries or [0])
        t_idx, t_next = self._walker(m, table_rom, len(entries) + 1)
        t_cmd = table_rom.data[:cmd_bits]
        t_node = table_rom.data[cmd_bits:]

        # ROM of report tokens: one line per run, then the final line.
        tokens, line_starts = [], []
        for run in runs:
            line_starts.append(len(tokens))
            tokens += _line_tokens(run.name)
        line_starts.append(len(tokens))
        tokens += _final_tokens()
        ends = {line_starts[i + 1] - 1 for i in range(len(runs))} | {len(tokens) - 1}
        token_words = [_Token.const({"value": v, "kind": k, "last": i in ends}).as_value().value
                       for i, (k, v) in enumerate(tokens)]
        token_rom = self._rom(m, "token_rom", unsigned(_Token.as_shape().size), token_words)
        p_idx, p_next = self._walker(m, token_rom, len(tokens))
        token = _Token(token_rom.data)

        # Per-run constants in a ROM read at run_next, so its data is the current run's (a
        # ROM rather than a multiplexer of constants: in a 4-state simulator a combinational
        # block whose inputs never change is never evaluated and stays X).
        run_layout = data.StructLayout({"t_end": t_idx.shape(), "timeout": 32,
                                        "line": p_idx.shape()})
        run_words = [run_layout.const({"t_end": starts[i + 1], "timeout": r.timeout_cycles,
                                       "line": line_starts[i]}).as_value().value
                     for i, r in enumerate(runs)]
        run_rom = self._rom(m, "run_rom", unsigned(run_layout.size), run_words)
        run, run_next = self._walker(m, run_rom, len(runs))
        this_run = run_layout(run_rom.data)
        last_run = eq_const(run, len(runs) - 1)

        # The fill: every node at once, each from its own generators (reset to their seeds
        # before each fill), each at the pace of its own host port.
        int32 = prog.dtype == "int32"
        gen = [[Signal(32, name=f"gen{v}_{k}") for k in range(lanes)] for v in range(n)]
        filled = [Signal(range(prog.flits + 1), name=f"filled{v}") for v in range(n)]

        def seed(generators):
            return [g.eq(prog.seeds[v][k]) for v, row in enumerate(generators)
                    for k, g in enumerate(row)]

        def step(generators):
            return [g.eq(self._xorshift(g)) for row in generators for g in row]

        node = Signal(range(n))
        if int32:
            chk = [[Signal(32, name=f"chk{v}_{k}") for k in range(lanes)] for v in range(n)]
            expected = []
            for k in range(lanes):
                total = self._xorshift(chk[0][k])
                for v in range(1, n):
                    total = add_narrow(total, self._xorshift(chk[v][k]))
                expected.append(total)
            expected = Cat(*expected)
        else:
            # checksums by (run, node): address Cat(node, run), unused slots 0
            words = [0] * (len(runs) << node_bits)
            for i, r in enumerate(runs):
                for u, c in enumerate(r.checksums):
                    words[(i << node_bits) | u] = c
            csum_rom = self._rom(m, "checksum_rom", unsigned(32), words)
            m.d.comb += csum_rom.addr.eq(Cat(node, run))

        flit = Signal(range(prog.flits + 1))        # reads issued to this node
        got = Signal(range(prog.flits + 1))         # responses received from this node
        csum = Signal(32)
        errors = Signal(16)
        status = Signal(2)
        failed_any = Signal()
        cycles = Signal(32)
        timer = Signal(32)

        uart = m.submodules.uart = UARTTransmitter(prog.uart_divisor)
        m.d.comb += self.uart_tx.eq(uart.tx)

        rerun_prev = Signal()
        m.d.sync += rerun_prev.eq(self.rerun)
        rerun_edge = self.rerun & ~rerun_prev

        rsp_valid = select_word(Cat(*(r.valid for r in self.host_rsp)), node, 1, n)
        rsp_data = select_word(Cat(*(r.payload.data for r in self.host_rsp)), node, fw, n)
        for r in self.host_rsp:
            m.d.comb += r.ready.eq(1)

        def host_cmd(write, addr, payload=None):
            """A buffer command word (``HostCmd`` field order: write, target, engine, addr,
            data)."""
            return Cat(Const(write, 1), Const(TARGET_BUFFER, 1), Const(0, 4), addr,
                       Const(0, FIELD_ADDR_BITS - len(addr)),
                       Const(0, fw) if payload is None else payload)

        def drive(u, payload):
            for v, hc in enumerate(self.host_cmd):
                with m.If(eq_const(u, v)):
                    m.d.comb += [hc.valid.eq(1), hc.payload.eq(payload)]
            return select_word(Cat(*(hc.ready for hc in self.host_cmd)), u, 1, n)

        def fill():
            """Drive every node's buffer writes; returns 'all nodes filled'."""
            done = []
            for v, hc in enumerate(self.host_cmd):
                payload = Cat(*(self._element(self._xorshift(g))[:ew] for g in gen[v]))
                full = eq_const(filled[v], prog.flits)
                done.append(full)
                with m.If(~full):
                    m.d.comb += [hc.valid.eq(1), hc.payload.eq(host_cmd(1, filled[v], payload))]
                    with m.If(hc.ready):
                        m.d.sync += [filled[v].eq(filled[v] + 1), *step([gen[v]])]
            return Cat(*done).all()

        state = Signal(range(len(_STATES)))
        S = {name: i for i, name in enumerate(_STATES)}

        def goto(name):
            m.d.sync += state.eq(S[name])

        with m.If(eq_const(state, S["BEGIN"])):
            m.d.comb += [self.busy.eq(1), t_next.eq(0), run_next.eq(0)]
            m.d.sync += failed_any.eq(0)
            goto("TABLES")
        with m.Elif(eq_const(state, S["TABLES"])):
            m.d.comb += self.busy.eq(1)
            with m.If(t_idx == this_run.t_end):
                m.d.sync += [*seed(gen), *(f.eq(0) for f in filled)]
                goto("FILL")
            with m.Else():
                with m.If(drive(t_node, t_cmd)):
                    m.d.comb += t_next.eq(t_idx + 1)
        with m.Elif(eq_const(state, S["FILL"])):
            m.d.comb += self.busy.eq(1)
            with m.If(fill()):
                goto("START")
        with m.Elif(eq_const(state, S["START"])):
            m.d.comb += [self.busy.eq(1), self.start.eq(1)]
            m.d.sync += [timer.eq(0), errors.eq(0), status.eq(_PASS)]
            goto("RUN")
        with m.Elif(eq_const(state, S["RUN"])):
            m.d.comb += self.busy.eq(1)
            m.d.sync += timer.eq(timer + 1)
            with m.If(self.error):
                m.d.sync += [status.eq(_NERR), cycles.eq(self.cycles)]
                goto("REPORT_BEGIN")
            with m.Elif(self.done):
                m.d.sync += [cycles.eq(self.cycles), node.eq(0), flit.eq(0), got.eq(0),
                             csum.eq(0)]
                if int32:
                    m.d.sync += seed(chk)
                goto("CHECK")
            with m.Elif(timer == this_run.timeout):
                m.d.sync += [status.eq(_TIME), cycles.eq(self.cycles)]
                goto("REPORT_BEGIN")
        with m.Elif(eq_const(state, S["CHECK"])):
            m.d.comb += self.busy.eq(1)
            with m.If(~eq_const(flit, prog.flits)):
                with m.If(drive(node, host_cmd(0, flit))):
                    m.d.sync += flit.eq(flit + 1)
            with m.If(rsp_valid):
                c = csum
                for k in range(lanes):
                    c = Cat(c[31], c[:31]) ^ rsp_data[k * ew:(k + 1) * ew]
                m.d.sync += [csum.eq(c), got.eq(got + 1)]
                last_flit = eq_const(got, prog.flits - 1)
                bad = Signal()
                if int32:
                    m.d.comb += bad.eq(rsp_data != expected)
                    m.d.sync += step(chk)
                else:
                    m.d.comb += bad.eq(last_flit & (c != csum_rom.data))
                with m.If(bad & ~eq_const(errors, 0xFFFF)):
                    m.d.sync += errors.eq(errors + 1)
                with m.If(last_flit):
                    m.d.sync += [got.eq(0), flit.eq(0), csum.eq(0)]
                    if int32:
                        m.d.sync += seed(chk)
                    with m.If(eq_const(node, n - 1)):
                        goto("REPORT_BEGIN")
                    with m.Else():
                        m.d.sync += node.eq(node + 1)
        with m.Elif(eq_const(state, S["REPORT_BEGIN"])):
            m.d.comb += [self.busy.eq(1), p_next.eq(this_run.line)]
            with m.If(eq_const(status, _PASS) & ~is_zero(errors)):
                m.d.sync += status.eq(_FAIL)
            goto("REPORT")
        with m.Elif(eq_const(state, S["REPORT"])):
            m.d.comb += self.busy.eq(1)
            with m.If(~eq_const(status, _PASS)):
                m.d.sync += failed_any.eq(1)
            with m.If(self._print(m, uart, token, cycles, errors, status)):
                m.d.comb += p_next.eq(p_idx + 1)
                with m.If(token.last):
                    # after a mismatch the network still runs; after a timeout or an
                    # error it may be stuck, so nothing more is sent to it
                    with m.If(lt_const(status, _TIME) & ~last_run):
                        m.d.comb += run_next.eq(run + 1)
                        goto("TABLES")
                    with m.Else():
                        m.d.comb += p_next.eq(line_starts[-1])
                        goto("FINAL")
        with m.Elif(eq_const(state, S["FINAL"])):
            m.d.comb += self.busy.eq(1)
            with m.If(self._print(m, uart, token, cycles, errors,
                                  Mux(failed_any, Const(_FAIL, 2), Const(_PASS, 2)))):
                m.d.comb += p_next.eq(p_idx + 1)
                with m.If(token.last):
                    goto("END")
        with m.Else():       # END
            m.d.comb += [self.passed.eq(~failed_any), self.failed.eq(failed_any)]
            with m.If(rerun_edge):
                goto("BEGIN")
        return m

    def _walker(self, m, rom, size):
        """``(idx, idx_next)`` of a ROM walked by index: the ROM reads ``idx_next`` (default
        ``idx``), so its data is always that of ``idx``."""
        idx = Signal(range(max(2, size)))
        nxt = Signal.like(idx)
        m.d.comb += [nxt.eq(idx), rom.addr.eq(nxt)]
        m.d.sync += idx.eq(nxt)
        return idx, nxt

    def _print(self, m, uart, token, cycles, errors, status):
        """Drive the UART with ``token``'s character; returns the 'taken' condition."""
        nibble = Mux(token.kind[0], select_word(cycles, token.value[:3], 4, CYCLE_DIGITS),
                     select_word(errors, token.value[:2], 4, ERROR_DIGITS))
        hex_char = select_word(Cat(*(Const(ord(c), 8) for c in _HEX)), nibble, 8, 16)
        table = Cat(*(Const(ord(c), 8) for word in STATUS for c in word))
        status_char = select_word(table, Cat(token.value[:2], status), 8, 16)
        char = Mux(is_zero(token.kind), token.value,
                   Mux(token.kind[1] & token.kind[0], status_char, hex_char))
        m.d.comb += [uart.data.valid.eq(1), uart.data.payload.eq(char)]
        return uart.data.ready


#: The controller's states, in order (END last: the Switch's default).
_STATES = ("BEGIN", "TABLES", "FILL", "START", "RUN", "CHECK", "REPORT_BEGIN", "REPORT",
           "FINAL", "END")


class SelfTestSystem(wiring.Component):
    """The network and its self-test: everything a board top instantiates below its pins
    (``hdl.board``), and what the self-test simulations run.

    Parameters
    ----------
    topology : golden_model.topology.Topology
    config : hdl.config.NIConfig
    program : SelfTestProgram

    Members
    -------
    rerun : ``In(1)``
        Start the test again (a button, synchronised by the board top).
    uart_tx : ``Out(1, init=1)``
    leds : ``Out(8)``
        0 passed, 1 failed, 2 busy, 7 a heartbeat (bit 23 of a free-running counter).
    """

    def __init__(self, topology, config, program):
        self.network = Network(topology, config)
        self.selftest = SelfTest(program, config, topology.num_nodes)
        super().__init__({"rerun": In(1), "uart_tx": Out(1, init=1), "leds": Out(8)})

    def elaborate(self, platform):
        m = Module()
        net, st = self.network, self.selftest
        m.submodules.network = net
        m.submodules.selftest = st
        n = len(net.host_cmd)
        for u in range(n):
            wiring.connect(m, st.host_cmd[u], net.host_cmd[u])
            wiring.connect(m, net.host_rsp[u], st.host_rsp[u])
        m.d.comb += [net.start.eq(st.start), st.done.eq(net.done), st.error.eq(net.error),
                     st.cycles.eq(net.cycles), st.rerun.eq(self.rerun),
                     self.uart_tx.eq(st.uart_tx)]
        for u in range(n):
            m.d.comb += net.node_start[u].eq(0)
        heartbeat = Signal(24)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        m.d.comb += self.leds.eq(Cat(st.passed, st.failed, st.busy, Const(0, 4), heartbeat[-1]))
        return m


def fault_context(fault):
    """The context in which hardware is built (and converted) for ``fault``: bit 0 of every
    adder's sums stuck at 1 for "adder-bit" (``hdl.adders.stuck_sum_bit``), nothing otherwise
    (a "table-op" fault is in the program's tables, not the hardware)."""
    return stuck_sum_bit(0) if fault == "adder-bit" else contextlib.nullcontext()


def selftest_system(topology, config, program, fault=None):
    """The ``SelfTestSystem`` of ``topology`` and ``config`` running ``program``, built with
    ``fault``'s hardware (:func:`fault_context`)."""
    with fault_context(fault):
        return SelfTestSystem(topology, config, program)
