"""The MultiTree network interface (docs/hardware.md, "Network interface").

Blocks: a ``BankedBuffer`` of ``buffer_depth`` flits in K = ``buffer_banks`` one-read, one-write
banks (``buffer_copies`` copies of each) served in a fixed rotation (read clients: the P send
engines, the first also serving the host's reads while the NI is idle, and the P reduction
lanes; write clients: the host and the P lanes; ``hdl.banked_buffer``), ``2P`` engine tables
(on a routed NI also P release tables, ``hdl.schedule_table``), P ``SendEngine`` and P
``ReceiveEngine``, a
``ReductionUnit``, the ``OrderingRule`` of the lanes, the ``ArrivalCounters`` of ``max_chunks``
chunks (memories, ``hdl.arrivals``) and the host port.

Run control: ``start`` (a pulse in cycle s) clears ``done``, ``error`` and ``cycles`` and starts
every engine (each reads its first row in s); the NI runs from s+1 until every engine is done
(cycle d: the last write is in its write stage), ``done`` is 1 from d until the next start and
``cycles`` = d-s (the cycles from the start pulse to the first cycle ``done`` reads 1). Credits
are not reset by ``start``. The arrival counters are cleared by a sweep of ``max_chunks`` cycles
after reset and after each run (from d+1); a ``start`` during the sweep sets ``error``. Commands
are accepted only while not running, not in the start cycle and not during the sweep (so a host
that loads its tables through ``host_cmd`` and then starts never starts early); reads complete
one per cycle under ``host_rsp`` back-pressure. A buffer command is taken
only in a cycle whose bank slot holds its address (the host's read client is 0, its write
client 0): consecutive addresses go at one per cycle, a jump waits up to K - 1 cycles. Do not
pulse ``start`` while a ``host_rsp`` is still pending.
"""

import dataclasses

from amaranth.hdl import (ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetSignal, Signal,
                          Value)
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import RELEASE_ADDR_BIT, RELEASE_BITS, STEP_BITS, NIConfig
from .flit import FlitStream
from .banked_buffer import BankedBuffer, lane_read_client, lane_write_client
from .host import HostCmd, HostRsp, TARGET_BUFFER, TARGET_TABLE
from .arrivals import ArrivalCounters
from .ops import eq_const
from .ordering import OrderingRule
from .ram import RAM
from .receive_engine import ArrivalTag, ReceiveEngine
from .reduction import ReductionUnit, write_delay
from .schedule_table import ScheduleRow
from .send_engine import SendEngine

__all__ = ["NetworkInterface", "BUFFER"]

#: The submodule name of the NI's ``BankedBuffer``.
BUFFER = "buffer"


class NetworkInterface(wiring.Component):
    """One node's network interface.

    Parameters
    ----------
    config : NIConfig

    Members
    -------
    tx : ``Out(FlitStream(flit_width)).array(num_ports)``
        Flits to the outgoing link of each port.
    tx_credit : ``In(1).array(num_ports)``
        Credit pulses from the outgoing link of each port.
    tx_open : ``In(1).array(num_ports)``
        The outgoing link's rate limit (``hdl.link.Link.open``): the port's send engine issues
        no flit while it is low (default 1).
    rx : ``In(FlitStream(flit_width)).array(num_ports)``
        Flits from the incoming link of each port.
    rx_credit : ``Out(1).array(num_ports)``
        Credit pulses to the incoming link of each port.
    host_cmd : ``In(stream.Signature(HostCmd))``
    host_rsp : ``Out(stream.Signature(HostRsp))``
    start : ``In(1)``
    arm : ``In(1)``
        Pulse: a run of the network begins; flits that arrive before this NI's ``start`` wait
        (``ReceiveEngine.arm``). Tie to 0 when every NI starts in the same cycle.
    done : ``Out(1)``
    error : ``Out(1)``
        Sticky until the next start.
    step : ``Out(STEP_BITS)``
        Smallest step among the unfinished engines' current rows (registered; 0xFFFF when none).
    cycles : ``Out(32)``

    With ``registered_inputs`` the NI registers ``rx``, ``tx_credit``, ``tx_open``, ``start``,
    ``arm`` and its reset at its boundary and acts on each one cycle after it arrives (a
    network of links counts that register as the last cycle of each link and of its start,
    ``hdl.link.Link``, ``hdl.network.Network``). No logic then depends on an input through
    gates alone but the host port's: a simulator that evaluates the NI as a model of its own
    (Verilator's hierarchical blocks) evaluates its logic once per clock edge instead of again
    at every change of an input.
    """

    def __init__(self, config, registered_inputs=False):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        self.registered_inputs = bool(registered_inputs)
        p, fw = config.num_ports, config.flit_width
        flit = FlitStream(fw)
        super().__init__({
            "tx": Out(flit).array(p),
            "tx_credit": In(1).array(p),
            "tx_open": In(1, init=1).array(p),
            "rx": In(flit).array(p),
            "rx_credit": Out(1).array(p),
            "host_cmd": In(stream.Signature(HostCmd(fw))),
            "host_rsp": Out(stream.Signature(HostRsp(fw))),
            "start": In(1),
            "arm": In(1),
            "done": Out(1),
            "error": Out(1),
            "step": Out(STEP_BITS),
            "cycles": Out(32),
        })

    @property
    def config(self):
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        p = cfg.num_ports
        ne = cfg.num_engines
        rx = [(port.valid, port.payload) for port in self.rx]
        tx_credit, tx_open, start, arm = (list(self.tx_credit), list(self.tx_open), self.start,
                                          self.arm)
        dom, sub = "sync", (lambda block: block)
        if self.registered_inputs:
            # Domain "ni": the NI's registers, reset by a registered copy of the reset.
            dom, sub = "ni", DomainRenamer("ni")
            m.domains.ni = ni = ClockDomain(local=True)
            rst = Signal(init=1, reset_less=True)
            m.d.sync += rst.eq(ResetSignal("sync"))
            m.d.comb += [ni.clk.eq(ClockSignal("sync")), ni.rst.eq(rst)]

            def registered(value, name, init=0, reset_less=False):
                reg = Signal(len(Value.cast(value)), name=name, init=init, reset_less=reset_less)
                m.d.ni += reg.eq(value)
                return reg
            rx = [(registered(v, f"rx{i}_valid"),       # the payload is data: valid says
                   registered(d, f"rx{i}_payload", reset_less=True))
                  for i, (v, d) in enumerate(rx)]
            tx_credit = [registered(c, f"tx_credit{i}") for i, c in enumerate(tx_credit)]
            tx_open = [registered(o, f"tx_open{i}", init=1) for i, o in enumerate(tx_open)]
            start, arm = registered(start, "start_in"), registered(arm, "arm_in")
        taw = cfg.table_addr_width

        # --- blocks -------------------------------------------------------------------------
        red = ReductionUnit(cfg, ArrivalTag)
        m.submodules.reduction = sub(red)
        delay = write_delay(red.adder)
        buf = BankedBuffer(num_ports=p, depth=cfg.buffer_depth, flit_width=cfg.flit_width,
                           write_delay=delay, copies=cfg.buffer_copies)
        m.submodules[BUFFER] = sub(buf)
        lane_rd = lane_read_client(p, cfg.buffer_copies)
        lane_wr = lane_write_client(p, cfg.buffer_copies)
        nbanks, bits = buf.num_banks, buf.bank_bits
        tables = []
        for e in range(ne):
            t = RAM(shape=ScheduleRow, depth=cfg.table_depth, num_write=1, transparency=[()],
                    bare=True)
            m.submodules[f"table{e}"] = sub(t)
            tables.append(t)
        releases = []      # routed: each send engine's release table (hdl.schedule_table)
        if cfg.routed:
            for e in range(p):
                t = RAM(shape=RELEASE_BITS, depth=cfg.table_depth, num_write=1,
                        transparency=[()], bare=True)
                m.submodules[f"release{e}"] = sub(t)
                releases.append(t)
        order = OrderingRule(cfg)
        m.submodules.ordering = sub(order)
        # Readers: the send engines, then (in-order NI) the ordering rule of each lane.
        arr = ArrivalCounters(num_lanes=p, num_readers=cfg.arrival_readers,
                              max_chunks=cfg.max_chunks)
        m.submodules.arrivals = sub(arr)
        senders, receivers = [], []
        # The loopback port's FIFO runs its 1-cycle link at full rate (NIConfig.loopback_rx_depth).
        loop_cfg = (dataclasses.replace(cfg, rx_buffer_depth=cfg.loopback_rx_depth)
                    if cfg.loopback else cfg)
        for i in range(p):
            port_cfg = loop_cfg if i == p - 1 else cfg
            s = SendEngine(port_cfg)
            r = ReceiveEngine(port_cfg)
            m.submodules[f"send{i}"] = sub(s)
            m.submodules[f"recv{i}"] = sub(r)
            senders.append(s)
            receivers.append(r)
            wiring.connect(m, wiring.flipped(self.tx[i]), s.flit_out)
            m.d.comb += [r.flit_in.valid.eq(rx[i][0]), r.flit_in.payload.eq(rx[i][1]),
                         s.credit_in.eq(tx_credit[i]), s.open.eq(tx_open[i]),
                         self.rx_credit[i].eq(r.credit_out),
                         s.slot.eq(buf.read_slot[i]), r.slot.eq(buf.read_slot[lane_rd + i])]
            if i:
                wiring.connect(m, s.buf, buf.read[i])
            wiring.connect(m, r.lane, red.lanes[i])
            wiring.connect(m, red.mem_read[i], buf.read[lane_rd + i])
            if lane_wr + i:     # write client 0 is the host's (shared below with two copies)
                wiring.connect(m, red.mem_write[i], buf.write[lane_wr + i])
            m.d.comb += [r.retire.valid.eq(red.retire[i].valid),
                         r.retire.payload.eq(red.retire[i].payload),
                         order.busy[i].eq(r.busy), order.chunk[i].eq(r.chunk),
                         order.order[i].eq(r.order), order.addr[i].eq(r.addr),
                         order.written[i].eq(r.written), r.order_ok.eq(order.ok[i])]
        reads = {*range(p), *range(lane_rd, lane_rd + p)}
        for c in range(len(buf.read)):      # rotation slots nobody uses
            if c not in reads:
                m.d.comb += buf.read[c].en.eq(0)
        writes = {0, *range(lane_wr, lane_wr + p)}
        for c in range(nbanks):
            if c not in writes:
                m.d.comb += buf.write[c].en.eq(0)
        host_rd, host_wr = buf.read[0], buf.write[0]
        engines = senders + receivers

        # --- run control --------------------------------------------------------------------
        running = Signal()
        done = Signal()
        error = Signal()
        cycles = Signal(32)
        active = Signal()   # running or starting: the engines own their table ports
        m.d.comb += active.eq(running | start)
        all_done = Signal()
        for eng in engines:
            m.d.comb += eng.start.eq(start)
        for eng in receivers:
            m.d.comb += eng.arm.eq(arm)
        done_bits = [eng.done for eng in engines]
        all_done_v = done_bits[0]
        for d in done_bits[1:]:
            all_done_v = all_done_v & d
        m.d.comb += all_done.eq(all_done_v)
        any_error = engines[0].error
        for eng in engines[1:]:
            any_error = any_error | eng.error
        with m.If(start):
            m.d[dom] += [running.eq(1), done.eq(0), error.eq(0), cycles.eq(1)]
            with m.If(arr.clearing):    # the counters are not cleared yet (hdl.arrivals)
                m.d[dom] += error.eq(1)
        with m.Else():
            with m.If(running):
                m.d[dom] += cycles.eq(cycles + 1)
                with m.If(all_done):
                    m.d[dom] += [running.eq(0), done.eq(1)]
            with m.If(any_error):
                m.d[dom] += error.eq(1)

        # Smallest step among unfinished engines.
        steps = []
        for e, eng in enumerate(engines):
            leaf = Signal(STEP_BITS, name=f"step_leaf{e}")
            m.d.comb += leaf.eq(Mux(eng.done, (1 << STEP_BITS) - 1, eng.step))
            steps.append(leaf)
        level = 0
        while len(steps) > 1:
            nxt = []
            for k, (a, b) in enumerate(zip(steps[0::2], steps[1::2])):
                lo = Signal(STEP_BITS, name=f"step_min{level}_{k}")
                m.d.comb += lo.eq(Mux(a < b, a, b))
                nxt.append(lo)
            if len(steps) % 2:
                nxt.append(steps[-1])
            steps = nxt
            level += 1
        step = Signal(STEP_BITS, init=(1 << STEP_BITS) - 1)
        m.d[dom] += step.eq(steps[0])
        m.d.comb += [self.done.eq(done | (running & all_done)), self.error.eq(error),
                     self.cycles.eq(cycles), self.step.eq(step)]

        # --- arrival counters ---------------------------------------------------------------
        # (chunk, where its count goes): the send engines, then (in-order NI) the ordering rule.
        readers = [(s.dep_chunk, s.dep_count) for s in senders]
        if cfg.ordering_reads_arrivals:
            readers += [(r.count_chunk, order.arrivals[i]) for i, r in enumerate(receivers)]
        for i, r in enumerate(receivers):
            m.d.comb += [arr.retire[i].valid.eq(red.retire[i].valid),
                         arr.retire[i].payload.eq(red.retire[i].payload),
                         arr.lane_chunk[i].eq(r.chunk)]
        for k, (chunk, count) in enumerate(readers):
            m.d.comb += [arr.chunk[k].eq(chunk), count.eq(arr.count[k])]
        m.d.comb += [arr.clear.eq(running & all_done), arr.enable.eq(running)]
        m.d.comb += buf.restart.eq(start)

        # --- host port ----------------------------------------------------------------------
        cmd = self.host_cmd.payload
        rsp_valid = Signal()
        rsp_target = Signal()
        rsp_engine = Signal(4)
        rsp_release = Signal()
        stall = Signal()    # a response waits for host_rsp.ready
        accept = Signal()
        to_buffer = cmd.target == TARGET_BUFFER
        in_slot = Signal()      # a buffer command's address is in the host client's bank now
        m.d.comb += in_slot.eq(cmd.addr[:bits] == Mux(cmd.write, buf.write_slot[0],
                                                      buf.read_slot[0]))
        sender0 = senders[0].buf
        m.d.comb += [
            stall.eq(rsp_valid & ~self.host_rsp.ready),
            self.host_cmd.ready.eq(~active & ~arr.clearing & ~stall & (~to_buffer | in_slot)),
            accept.eq(self.host_cmd.valid & self.host_cmd.ready),
            sender0.data.eq(host_rd.data),
        ]
        host_write = accept & cmd.write & to_buffer
        if lane_wr:
            m.d.comb += [host_wr.en.eq(host_write), host_wr.addr.eq(cmd.addr),
                         host_wr.data.eq(cmd.data)]
        else:       # lane 0's write client, idle whenever the host may write
            lane0 = red.mem_write[0]
            m.d.comb += [host_wr.en.eq(lane0.en | host_write),
                         host_wr.addr.eq(Mux(active, lane0.addr, cmd.addr)),
                         host_wr.data.eq(Mux(active, lane0.data, cmd.data))]
        with m.If(active):
            m.d.comb += [host_rd.en.eq(sender0.en), host_rd.addr.eq(sender0.addr)]
        with m.Else():
            # Only reads read: a write must not read the word it writes (bare banks, hdl.ram).
            m.d.comb += [host_rd.en.eq(~stall & ~cmd.write), host_rd.addr.eq(cmd.addr)]
        to_release = cmd.addr[RELEASE_ADDR_BIT]
        for e, t in enumerate(releases):
            m.d.comb += [
                t.write[0].en.eq(accept & cmd.write & (cmd.target == TARGET_TABLE)
                                 & eq_const(cmd.engine, e) & to_release),
                t.write[0].addr.eq(cmd.addr[:taw]),
                t.write[0].data.eq(cmd.data[:RELEASE_BITS]),
                senders[e].release.eq(t.read[0].data),
                senders[e].now.eq(cycles),
            ]
            with m.If(active):
                m.d.comb += [t.read[0].en.eq(senders[e].table.en),
                             t.read[0].addr.eq(senders[e].table.addr)]
            with m.Else():
                m.d.comb += [t.read[0].en.eq(~stall & ~cmd.write),
                             t.read[0].addr.eq(cmd.addr[:taw])]
        for e, (t, eng) in enumerate(zip(tables, engines)):
            m.d.comb += [
                t.write[0].en.eq(accept & cmd.write & (cmd.target == TARGET_TABLE)
                                 & eq_const(cmd.engine, e) & ~to_release),
                t.write[0].addr.eq(cmd.addr[:taw]),
                t.write[0].data.eq(cmd.data[:ScheduleRow.as_shape().size]),
                eng.table.data.eq(t.read[0].data),
            ]
            with m.If(active):
                m.d.comb += [t.read[0].en.eq(eng.table.en), t.read[0].addr.eq(eng.table.addr)]
            with m.Else():
                m.d.comb += [t.read[0].en.eq(~stall & ~cmd.write),
                             t.read[0].addr.eq(cmd.addr[:taw])]
        with m.If(~stall):
            m.d[dom] += [rsp_valid.eq(accept & ~cmd.write), rsp_target.eq(cmd.target),
                         rsp_engine.eq(cmd.engine), rsp_release.eq(to_release)]
        # The host client's read data is that of a different bank every cycle: a response that
        # waits for host_rsp.ready keeps its flit in a register.
        fresh = Signal()
        held = Signal(cfg.flit_width)
        m.d[dom] += fresh.eq(accept & ~cmd.write)
        with m.If(fresh):
            m.d[dom] += held.eq(host_rd.data)
        m.d.comb += [self.host_rsp.valid.eq(rsp_valid),
                     self.host_rsp.payload.data.eq(Mux(fresh, host_rd.data, held))]
        with m.If(rsp_target == TARGET_TABLE):
            with m.Switch(rsp_engine):
                for e, t in enumerate(tables):
                    with m.Case(e):
                        m.d.comb += self.host_rsp.payload.data.eq(t.read[0].data.as_value())
                        if e < len(releases):
                            with m.If(rsp_release):
                                m.d.comb += self.host_rsp.payload.data.eq(
                                    releases[e].read[0].data)
                with m.Default():
                    m.d.comb += self.host_rsp.payload.data.eq(0)
        return m
