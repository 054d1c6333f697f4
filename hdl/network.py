"""The network top: one NI per node, one ``Link`` per directed link (docs/hardware.md).

Inside ``ni_instances(name)`` (used by ``hdl.generate.to_verilog``) the NIs are elaborated as
instances of one Verilog module ``name`` (the NI converted once) instead of N copies of the NI's
logic: Amaranth writes every submodule instance as its own module, so a 64-node network would
otherwise cost 64 conversions and a 64 times larger file. The wiring is the same either way.
"""

import contextlib
import contextvars

from amaranth.hdl import Cat, ClockSignal, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import STEP_BITS, NIConfig
from .host import HostCmd, HostRsp
from .link import Link, built_links
from .ni import NetworkInterface

__all__ = ["Network", "port_map", "ni_instances", "ni_name"]


def ni_name(u):
    """The instance name of node ``u``'s NI in the network top (``ni<u>``)."""
    return f"ni{u}"

_NI_MODULE = contextvars.ContextVar("ni_module", default=None)


@contextlib.contextmanager
def ni_instances(module_name):
    """Elaborate every ``Network``'s NIs as instances of the Verilog module ``module_name``.

    The caller provides that module: ``NetworkInterface(config)`` converted with
    ``name=module_name`` (ports ``clk``, ``rst`` and the flattened signature members).
    """
    token = _NI_MODULE.set(module_name)
    try:
        yield
    finally:
        _NI_MODULE.reset(token)


def _ni_instance(ni, module_name):
    """An ``Instance`` of ``module_name`` wired to the port signals of ``ni``."""
    ni._MustUse__used = True   # its logic is the instantiated module; do not warn it is unused
    ports = {}
    for path, member, value in ni.signature.flatten(ni):
        prefix = "i_" if member.flow == In else "o_"
        ports[prefix + "__".join(map(str, path))] = Value.cast(value)
    return Instance(module_name, i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync"), **ports)


def port_map(topology):
    """The links of ``topology`` as ``{(u, p): (v, q)}``: port p of node u sends to port q of v.

    Port ``p`` of node ``u`` is the link to ``topology.neighbors(u)[p]``; ``q`` is the port of
    ``v`` that leads back to ``u``.

    Raises
    ------
    ValueError
        If the topology is not a direct network (ring, mesh, torus) or a link is one-way.
    """
    if not getattr(topology, "is_direct", False):
        raise ValueError(f"topology {getattr(topology, 'spec', topology)!r} is not a direct network "
                         f"(ring, mesh, torus): the NI only talks to neighbours")
    out = {}
    for u in topology.nodes:
        for p, v in enumerate(topology.neighbors(u)):
            back = topology.neighbors(v)
            if u not in back:
                raise ValueError(f"topology {topology.spec!r}: link {u}->{v} has no return link")
            out[(u, p)] = (v, back.index(u))
    return out


class Network(wiring.Component):
    """All NIs of a direct network and their links.

    Parameters
    ----------
    topology : golden_model.topology.Topology
        Ring, mesh or torus; every node degree must be at most ``config.num_ports``.
    config : NIConfig
        A hardware topology (``allreduce_rtl.plan.hardware_topology``) gives each link its
        latency and rate (``hdl.link.built_links``): the link u -> v carries v's credits back
        to u in the latency of v -> u, and its rate limit opens and closes u's send engine
        (``tx_open``). Any other topology: ``config.link_latency`` on every link, full rate.

    Members
    -------
    start : ``In(1)``
        Pulse: start every NI.
    node_start : ``In(1).array(N)``
        Pulse: start NI u alone (test benches stagger the nodes' starts with it to vary the
        timing; tie to 0 otherwise).
    done : ``Out(1)``
        Every NI is done.
    error : ``Out(1)``
        Some NI has an error.
    cycles : ``Out(32)``
        Cycles from the start pulse (or the first ``node_start``) to the first cycle ``done``
        reads 1 (counts while running).
    host_cmd : ``In(stream.Signature(HostCmd)).array(N)``
    host_rsp : ``Out(stream.Signature(HostRsp)).array(N)``
    node_done, node_error : ``Out(1).array(N)``
    node_step : ``Out(STEP_BITS).array(N)``

    The NIs register their inputs (``NetworkInterface(registered_inputs=True)``), which the
    links count as their last cycle (``Link(registered_ends=True)``, so every link is at least
    1 cycle) and the start as :attr:`NI_INPUT_CYCLES`: the NIs act on ``start`` one cycle after
    it, ``cycles`` counts from then, and ``done`` reads 0 in between.

    Attributes
    ----------
    NI_INPUT_CYCLES : int
        Cycles of the NIs' input register (0: none): the least latency of a link, and the
        cycles from ``start`` (or ``node_start``) to the cycle the NIs act on it (as an NI's
        start: ``hdl.ni``), which a test bench that times a run waits out.
    nodes : list of NetworkInterface
        ``nodes[u]`` is node u's NI.
    links : dict
        ``links[(u, p)]`` is the ``Link`` leaving port p of node u.

    Raises
    ------
    ValueError
        If the topology is not direct, a node has more neighbours than ``num_ports`` or a link
        is bad (``hdl.link.built_links``; a link of 0 cycles between NIs).
    """

    #: The NIs register their inputs (and so their start).
    NI_INPUT_CYCLES = 1

    def __init__(self, topology, config):
        try:
            if not isinstance(config, NIConfig):
                raise ValueError(f"config must be an NIConfig, not {config!r}")
            self._build_fabric(topology, config)
        except ValueError:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise
        self._topology = topology
        self._config = config
        n, fw = topology.num_nodes, config.flit_width
        #: The NIs, one per node (``nodes[u]``).
        self.nodes = [NetworkInterface(config, registered_inputs=bool(self.NI_INPUT_CYCLES))
                      for _ in topology.nodes]
        super().__init__({
            "start": In(1),
            "node_start": In(1).array(n),
            "done": Out(1),
            "error": Out(1),
            "cycles": Out(32),
            "host_cmd": In(stream.Signature(HostCmd(fw))).array(n),
            "host_rsp": Out(stream.Signature(HostRsp(fw))).array(n),
            "node_done": Out(1).array(n),
            "node_error": Out(1).array(n),
            "node_step": Out(STEP_BITS).array(n),
        })

    def _build_fabric(self, topology, config):
        """Check ``topology`` against ``config`` and create what carries the flits (here the
        links, ``links[(u, p)]``: the link leaving port p of u, as ``hdl.link.built_links``
        says); raise ``ValueError``."""
        if config.routed:
            raise ValueError("config.routed is set: NIs on routers need hdl.routed_network."
                             "RoutedNetwork, not Network")
        self._port_map = port_map(topology)
        for u in topology.nodes:
            if len(topology.neighbors(u)) > config.num_ports:
                raise ValueError(f"node {u} of {topology.spec} has "
                                 f"{len(topology.neighbors(u))} neighbours, more than "
                                 f"num_ports {config.num_ports}")
        built = built_links(topology, config.link_latency)
        self.links = {}
        for (u, p), (v, _) in sorted(self._port_map.items()):
            (latency, rate), (back, _) = built[(u, v)], built[(v, u)]
            self.links[(u, p)] = Link(config, latency, back, rate,
                                      registered_ends=bool(self.NI_INPUT_CYCLES))

    def _connect_fabric(self, m, nis):
        """Wire every NI port to the fabric (unused ports tied off); return extra error bits."""
        used_rx = set()
        for (u, p), (v, q) in sorted(self._port_map.items()):
            link = self.links[(u, p)]
            m.submodules[f"link_{u}p{p}_{v}p{q}"] = link
            wiring.connect(m, nis[u].tx[p], link.flit_in)
            wiring.connect(m, link.flit_out, nis[v].rx[q])
            m.d.comb += [link.credit_in.eq(nis[v].rx_credit[q]),
                         nis[u].tx_credit[p].eq(link.credit_out),
                         nis[u].tx_open[p].eq(link.open)]
            used_rx.add((v, q))
        for u in self._topology.nodes:   # tie off unused ports
            for p in range(self._config.num_ports):
                if (u, p) not in self._port_map:
                    m.d.comb += nis[u].tx_credit[p].eq(0)
                if (u, p) not in used_rx:
                    m.d.comb += nis[u].rx[p].valid.eq(0)
        return []

    @property
    def topology(self):
        return self._topology

    @property
    def config(self):
        return self._config

    def elaborate(self, platform):
        m = Module()
        nis = self.nodes
        ni_module = _NI_MODULE.get()
        running = Signal()
        run_begin = Signal()    # the first start of a run: flits wait for their NI's start
        # run_begin delayed 1..NI_INPUT_CYCLES cycles (the NIs act on it in the last)
        pending = [Signal(name=f"run_begin_{k + 1}") for k in range(self.NI_INPUT_CYCLES)]
        m.d.comb += run_begin.eq(self.start | (Cat(*self.node_start).any() & ~running
                                               & ~Cat(*pending).any()))
        m.d.sync += [later.eq(now) for now, later in zip([run_begin, *pending], pending)]
        for u, ni in enumerate(nis):
            m.submodules[ni_name(u)] = ni if ni_module is None else _ni_instance(ni, ni_module)
            wiring.connect(m, wiring.flipped(self.host_cmd[u]), ni.host_cmd)
            wiring.connect(m, wiring.flipped(self.host_rsp[u]), ni.host_rsp)
            m.d.comb += [
                ni.start.eq(self.start | self.node_start[u]),
                ni.arm.eq(run_begin),
                self.node_done[u].eq(ni.done),
                self.node_error[u].eq(ni.error),
                self.node_step[u].eq(ni.step),
            ]
        fabric_errors = self._connect_fabric(m, nis)

        done = nis[0].done
        error = nis[0].error
        for ni in nis[1:]:
            done = done & ni.done
            error = error | ni.error
        for e in fabric_errors:
            error = error | e
        for later in pending:   # the NIs' done is the last run's until they start
            done = done & ~later
        begin = pending[-1] if pending else run_begin
        with m.If(begin):
            m.d.sync += [running.eq(1), self.cycles.eq(1)]
        with m.Elif(running):
            with m.If(done):
                m.d.sync += running.eq(0)
            with m.Else():
                m.d.sync += self.cycles.eq(self.cycles + 1)
        m.d.comb += [self.done.eq(done), self.error.eq(error)]
        return m
