"""The routed network top: one NI per node, every NI port on a local port of a router.

``RoutedNetwork`` has the members of ``hdl.network.Network`` (so the testbench and the host
players drive both alike) but carries flits through ``hdl.router.network.RouterNetwork``
instead of point-to-point links, so any schedule runs, multi-hop transfers included (lower it
with ``golden_model.lowering.lower(..., routed=True)``; the NIs need ``NIConfig.routed``).

Ports and terminals: on a mesh or torus each node's router gets ``num_ports`` local ports
(concentration: the papers' one NI per link), NI port ``p`` of node ``u`` is router terminal
``u * num_ports + p``; on a switched network NI port ``q`` of node ``u`` is its link to its
q-th switch, terminal ``u * c + q`` (``c``: the most switch links of an endpoint; 1 on fat-tree
and BiGraph, NI port 0 on the leaf switch); the other NI ports are tied off.

Between an NI port and its terminal sits a ``RouterPort``: the NI's link-level flow control
(``hdl.credit``, message or credit mode, ``rx_buffer_depth``) on one side, the router's
``InjectionPort``/``EjectionPort`` streams on the other.

Loopback (``NIConfig.loopback``: a type whose add is not associative, such as float32): the NI's
last port is joined to itself by a ``Link`` of :data:`LOOPBACK_LATENCY` cycles, no router; it
adds each node's staged contributions in schedule order (``golden_model.lowering``, staged
reductions).
"""

import dataclasses

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import LOOPBACK_LATENCY, NIConfig
from .credit import CreditCounter, CreditReturn
from .fifo import make_fifo
from .flit import Flit, FlitStream
from .link import Link
from .network import Network
from .router.flit import PacketFlit, is_head_kind
from .router.network import ROUTER_KINDS, RouterNetwork, routed_families
from .router.router import full_rate_depth
from .router.routing import terminals_per_endpoint

__all__ = ["RouterPort", "RoutedNetwork", "router_vc_buf_depth", "check_routable",
           "LOOPBACK_LATENCY"]


def check_routable(topology, why="routers"):
    """Raise ``ConfigError`` (``golden_model.errors``) unless ``topology`` has a router network;
    the message starts with ``why`` (what asked for routers)."""
    from golden_model.errors import ConfigError
    if getattr(topology, "router_kind", None) in ROUTER_KINDS:
        return
    spec = getattr(topology, "spec", topology)
    raise ConfigError(f"{why} {spec} has no router network (routers exist for "
                      f"{routed_families()}); on a ring use an algorithm whose transfers all "
                      f"go to neighbours, or a torus:1xN")


#: Flits of backlog beyond the full-rate depth in each router VC buffer of a network whose NIs
#: stage float reductions (``router_vc_buf_depth``): two 8-flit messages.
STAGED_BACKLOG_FLITS = 16


def router_vc_buf_depth(link_latency, credit_delay=1, staged=False):
    """Flits per router VC buffer: the depth that lets one VC run at a flit per cycle over
    links of ``link_latency`` cycles (``hdl.router.router.full_rate_depth``, at least 8).

    With ``staged`` (NIs that stage float reductions, ``NIConfig.loopback``) room for
    :data:`STAGED_BACKLOG_FLITS` more, rounded up to a power of two (a memory's size anyway).
    Such an NI takes a message more slowly than its link brings it (its loopback adds share the
    buffer's banks), so messages converging on one receiver back up into the routers and hold
    the VCs that other flows need (tree saturation, Dally & Towles 15.3); the deeper buffers
    keep that backlog in the last routers. MultiTree in
    float32 on bigraph:4x8 at 773 elements, 4-cycle links: 1,059 RTL cycles with 13-flit
    buffers, 1,012 with 32, against the model's 944 (README, "Router and routed network").
    """
    depth = max(8, full_rate_depth(link_latency, credit_delay))
    return 1 << (depth + STAGED_BACKLOG_FLITS - 1).bit_length() if staged else depth


class RouterPort(wiring.Component):
    """One NI port joined to one router terminal.

    Send side: flits from the NI's ``tx`` go into a FIFO of ``rx_buffer_depth`` flits (the
    room the NI's send engine holds credits for) and on to the router's injection stream; each
    pop frees credit as ``hdl.credit.CreditReturn`` says (per flit or per sub-message).
    Receive side: the router's ejection stream is passed to the NI's ``rx`` only while a
    ``hdl.credit.CreditCounter`` holds credit for the NI's receive FIFO (the ejection port's
    VC buffers hold the rest). One cycle from ``ni_tx`` to ``inject``; none from ``eject`` to
    ``ni_rx``.

    Parameters
    ----------
    config : NIConfig

    Members
    -------
    ni_tx : ``In(FlitStream(flit_width))``, ni_tx_credit : ``Out(1)``
        Connect to the NI's ``tx[p]`` and ``tx_credit[p]``.
    ni_rx : ``Out(FlitStream(flit_width))``, ni_rx_credit : ``In(1)``
        Connect to the NI's ``rx[p]`` and ``rx_credit[p]``.
    inject : ``Out(stream.Signature(PacketFlit(flit_width)))``
    eject : ``In(stream.Signature(PacketFlit(flit_width)))``
    overflow : ``Out(1)``
        Sticky: a flit from the NI found the FIFO full (never, if credits work).
    """

    def __init__(self, config):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self._config = config
        fw = config.flit_width
        sig = stream.Signature(PacketFlit(fw))
        super().__init__({"ni_tx": In(FlitStream(fw)), "ni_tx_credit": Out(1),
                          "ni_rx": Out(FlitStream(fw)), "ni_rx_credit": In(1),
                          "inject": Out(sig), "eject": In(sig), "overflow": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        layout = Flit(cfg.flit_width)
        m.submodules.tx_fifo = txq = make_fifo(width=layout.size, depth=cfg.rx_buffer_depth)
        m.submodules.tx_return = ret = CreditReturn(cfg)
        front = layout(txq.r_data)
        m.d.comb += [
            txq.w_en.eq(self.ni_tx.valid),
            txq.w_data.eq(self.ni_tx.payload),
            self.inject.valid.eq(txq.r_rdy),
            self.inject.payload.eq(txq.r_data),
            txq.r_en.eq(self.inject.ready),
            ret.pop.eq(txq.r_rdy & self.inject.ready),
            ret.kind.eq(front.kind),
            self.ni_tx_credit.eq(ret.credit),
        ]
        with m.If(self.ni_tx.valid & ~txq.w_rdy):
            m.d.sync += self.overflow.eq(1)

        m.submodules.rx_credits = cc = CreditCounter(cfg)
        m.d.comb += [
            cc.credit_in.eq(self.ni_rx_credit),
            cc.head.eq(is_head_kind(self.eject.payload.kind.as_value())),
            self.eject.ready.eq(cc.ready),
            cc.send.eq(self.eject.valid & cc.ready),
            self.ni_rx.valid.eq(self.eject.valid & cc.ready),
            self.ni_rx.payload.eq(self.eject.payload),
        ]
        return m


class RoutedNetwork(Network):
    """All NIs of a network on routers (mesh, torus, fat-tree, BiGraph).

    Parameters
    ----------
    topology : golden_model.topology.Topology
    config : NIConfig
        Must have ``routed=True``; ``link_latency`` is the router links' latency too.
    num_vcs, credit_delay, flow_control
        The routers' (``hdl.router.router.RouterParams``); a torus needs an even ``num_vcs``
        (default ``config.router_vcs``).
    vc_buf_depth : int, optional
        Default ``config.router_vc_buf_depth``, else
        ``router_vc_buf_depth(config.link_latency, credit_delay, staged=config.loopback)``
        (full rate; deeper for NIs that stage float reductions).

    Members
    -------
    As ``hdl.network.Network``; ``error`` also reports a router buffer or ``RouterPort``
    overflow.

    Attributes
    ----------
    nodes : list of NetworkInterface
    fabric : hdl.router.network.RouterNetwork
    ports : dict
        ``ports[(u, p)]``: the ``RouterPort`` of NI port p of node u.
    loopbacks : dict
        ``loopbacks[u]``: the ``Link`` that joins node u's loopback port to itself (empty
        without ``config.loopback``).

    Raises
    ------
    ValueError
        If ``config.routed`` is not set, the topology has no router network (ring), or a
        router parameter is bad (the message names it).
    """

    #: The NIs take the routers' ejection and credits without a register (``RouterPort``).
    NI_INPUT_CYCLES = 0

    def __init__(self, topology, config, *, num_vcs=None, vc_buf_depth=None, credit_delay=1,
                 flow_control="wormhole"):
        self._router_args = dict(num_vcs=config.router_vcs if num_vcs is None else num_vcs,
                                 vc_buf_depth=(config.router_vc_buf_depth if vc_buf_depth is None
                                               else vc_buf_depth),
                                 credit_delay=credit_delay, flow_control=flow_control)
        super().__init__(topology, config)

    def _build_fabric(self, topology, config):
        if not config.routed:
            raise ValueError("RoutedNetwork needs NIs built for routers: NIConfig(routed=True)")
        args = dict(self._router_args)
        if args["vc_buf_depth"] is None:
            args["vc_buf_depth"] = router_vc_buf_depth(config.link_latency, args["credit_delay"],
                                                       staged=config.loopback)
        # a router per node (mesh, torus, a graph with links between endpoints): a local port
        # per NI port; a router per switch: a terminal per link of an endpoint
        local = getattr(topology, "router_kind", None) in ("grid", "node")
        self.terminal_ports = (config.terminal_ports if local
                               else terminals_per_endpoint(topology))
        self.fabric = RouterNetwork(topology, flit_width=config.flit_width,
                                    link_latency=config.link_latency,
                                    concentration=self.terminal_ports, **args)
        self.ports = {(u, p): RouterPort(config)
                      for u in topology.nodes for p in range(self.terminal_ports)}
        loop_config = dataclasses.replace(config, link_latency=LOOPBACK_LATENCY)
        self.loopbacks = ({u: Link(loop_config) for u in topology.nodes} if config.loopback
                          else {})

    def router_parameters(self):
        """The routers' parameters as a dict (for manifests): ``num_vcs``, ``vc_buf_depth``
        (flits), ``credit_delay`` (cycles), ``flow_control``, ``link_latency`` (cycles),
        ``terminals_per_node`` and ``router_cycles`` (4: the zero-load cycles per router)."""
        from .router.network import ROUTER_CYCLES
        prm = self.fabric.params
        return {"num_vcs": prm.num_vcs, "vc_buf_depth": prm.vc_buf_depth,
                "credit_delay": prm.credit_delay, "flow_control": prm.flow_control,
                "link_latency": self._config.link_latency,
                "terminals_per_node": self.terminal_ports, "router_cycles": ROUTER_CYCLES}

    def terminal(self, node, port):
        """Router terminal of NI port ``port`` of ``node`` (as ``lower(..., routed=True)``)."""
        return node * self.terminal_ports + port

    def _connect_fabric(self, m, nis):
        m.submodules.fabric = fabric = self.fabric
        errors = [fabric.error]
        for (u, p), rp in sorted(self.ports.items()):
            t = self.terminal(u, p)
            m.submodules[f"port{u}_{p}"] = rp
            wiring.connect(m, nis[u].tx[p], rp.ni_tx)
            wiring.connect(m, rp.ni_rx, nis[u].rx[p])
            m.d.comb += [nis[u].tx_credit[p].eq(rp.ni_tx_credit),
                         rp.ni_rx_credit.eq(nis[u].rx_credit[p])]
            wiring.connect(m, rp.inject, fabric.inject[t])
            wiring.connect(m, fabric.eject[t], rp.eject)
            errors.append(rp.overflow)
        loop = self._config.num_ports - 1
        for u, link in sorted(self.loopbacks.items()):
            m.submodules[f"loopback{u}"] = link
            wiring.connect(m, nis[u].tx[loop], link.flit_in)
            wiring.connect(m, link.flit_out, nis[u].rx[loop])
            m.d.comb += [link.credit_in.eq(nis[u].rx_credit[loop]),
                         nis[u].tx_credit[loop].eq(link.credit_out)]
        for u in self._topology.nodes:
            for p in range(self.terminal_ports, self._config.terminal_ports):
                m.d.comb += [nis[u].tx_credit[p].eq(0), nis[u].rx[p].valid.eq(0)]
        return errors
