"""Verilog generation of the network top and the configuration a lowered schedule needs."""

import contextlib
import pathlib

from amaranth.back import verilog
from amaranth.hdl import Signal, Value

from .banked_buffer import bank_depth, bank_name
from .network import Network, ni_instances, ni_name
from .ni import BUFFER, NetworkInterface
from .ram import VERILOG_ARRAY, verilog_rams
from .routed_network import RoutedNetwork
from .router.network import shared_routers

__all__ = ["to_verilog", "build_network", "network_class", "buffer_arrays", "TOP_MODULE",
           "NI_MODULE"]

#: Name of the top module in the generated Verilog.
TOP_MODULE = "network"
#: Name of the NI module (one definition, instantiated once per node as ``ni<u>``).
NI_MODULE = "network_ni"


def to_verilog(network, path=None, name=TOP_MODULE):
    """Convert ``network`` to Verilog with top module ``network``.

    Every ``hdl.ram.RAM`` (buffers, engine tables) becomes an instance of a behavioural module
    that is appended to the output, so a 600k-flit buffer costs no conversion time and no
    per-word initialisation (see ``hdl.ram``). The NI is converted once, as module
    ``network_ni``, and the top instantiates it once per node (instance ``ni<u>``), so the time
    and the file size hardly grow with the node count; so are the routers of a
    ``RoutedNetwork`` (module ``network_router``, ``hdl.router.network.shared_routers``). No
    ``timescale`` is emitted.

    Parameters
    ----------
    network : Network
        (A component with a ``Network`` as its ``network`` attribute, such as
        ``hdl.selftest.SelfTestSystem``, shares the NI module the same way; any other
        ``wiring.Component`` is converted as it is.)
    path : path-like, optional
        Where to write the Verilog; parent directories are created.
    name : str
        The top module's name (default ``network``).

    Returns
    -------
    str
        The Verilog text.
    """
    design = network
    network = design if isinstance(design, Network) else getattr(design, "network", None)
    with verilog_rams() as modules:
        if isinstance(network, Network):
            ni_text = verilog.convert(
                NetworkInterface(network.config, registered_inputs=bool(network.NI_INPUT_CYCLES)),
                name=NI_MODULE, emit_src=False)
            with contextlib.ExitStack() as stack:
                stack.enter_context(ni_instances(NI_MODULE))
                router_texts = (stack.enter_context(shared_routers(network.fabric, TOP_MODULE))
                                if isinstance(network, RoutedNetwork) else [])
                text = verilog.convert(design, name=name, ports=signal_ports(design),
                                       emit_src=False)
            text = "\n".join([text, ni_text, *router_texts])
        else:
            text = verilog.convert(design, name=name, ports=signal_ports(design),
                                   emit_src=False)
    text = text + "\n" + "\n".join(modules[name] for name in sorted(modules))
    if path is not None:
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return text


def signal_ports(component):
    """The Verilog ports of a ``wiring.Component``: its signature's members without the
    constant ones (an ``always_ready`` stream's ``ready``, which ``verilog.convert`` does not
    take as a port)."""
    ports = [Value.cast(value) for _, _, value in component.signature.flatten(component)]
    return [port for port in ports if isinstance(port, Signal)]


def build_network(topology, config):
    """The network top for ``config``: NIs on routers (``RoutedNetwork``) when ``config.routed``,
    else NIs joined by links (``Network``); a hardware topology
    (``allreduce_rtl.plan.hardware_topology``) gives each link its latency and rate
    (``hdl.link.built_links``).

    Raises
    ------
    ValueError
        If the topology does not fit the configuration or a link is bad.
    """
    return network_class(config)(topology, config)


def network_class(config):
    """The network top's class for ``config``: ``RoutedNetwork`` when ``config.routed``, else
    ``Network`` (its ``NI_INPUT_CYCLES`` is what a test bench waits after ``start``)."""
    return RoutedNetwork if config.routed else Network


def buffer_arrays(config, num_nodes):
    """Where :func:`to_verilog`'s output keeps every NI's buffer, for testbench backdoors.

    Returns
    -------
    (names, bank_depth)
        ``names[u][b]``: a tuple of the hierarchical names, relative to the top module
        ``network``, of the word arrays (``bank_depth`` words of ``config.flit_width`` bits) of
        bank ``b`` of node ``u``'s NI, one per copy (``config.buffer_copies``, same contents),
        e.g. ``("ni3.buffer.bank5.ram.storage",)``. Flit ``a`` of the buffer is word ``a // K``
        of bank ``a % K``, K = ``config.buffer_banks`` (``hdl.banked_buffer``).
    """
    k = config.buffer_banks
    names = [[tuple(f"{ni_name(u)}.{BUFFER}.{bank_name(b, g)}.{VERILOG_ARRAY}"
                    for g in range(config.buffer_copies)) for b in range(k)]
             for u in range(num_nodes)]
    return names, bank_depth(config.buffer_depth, k)
