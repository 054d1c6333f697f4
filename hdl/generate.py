"""Verilog generation of the network top and the configuration a lowered schedule needs."""

import contextlib
import dataclasses
import pathlib

from amaranth.back import verilog

from .config import NIConfig
from .network import Network, ni_instances
from .ni import NetworkInterface
from .ram import verilog_rams
from .routed_network import RoutedNetwork
from .router.network import shared_routers

__all__ = ["to_verilog", "network_config_for", "TOP_MODULE", "NI_MODULE"]

#: Name of the top module in the generated Verilog.
TOP_MODULE = "network"
#: Name of the NI module (one definition, instantiated once per node as ``ni<u>``).
NI_MODULE = "network_ni"


def to_verilog(network, path=None):
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
        (Any other ``wiring.Component`` is converted as it is; the top module is always named
        ``network``.)
    path : path-like, optional
        Where to write the Verilog; parent directories are created.

    Returns
    -------
    str
        The Verilog text.
    """
    with verilog_rams() as modules:
        if isinstance(network, Network):
            ni_text = verilog.convert(NetworkInterface(network.config), name=NI_MODULE,
                                      emit_src=False)
            with contextlib.ExitStack() as stack:
                stack.enter_context(ni_instances(NI_MODULE))
                router_texts = (stack.enter_context(shared_routers(network.fabric, TOP_MODULE))
                                if isinstance(network, RoutedNetwork) else [])
                text = verilog.convert(network, name=TOP_MODULE, emit_src=False)
            text = "\n".join([text, ni_text, *router_texts])
        else:
            text = verilog.convert(network, name=TOP_MODULE, emit_src=False)
    text = text + "\n" + "\n".join(modules[name] for name in sorted(modules))
    if path is not None:
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return text


def network_config_for(lowered, **overrides):
    """An ``NIConfig`` that fits ``lowered``.

    Chooses ``routed`` = the lowering's, ``num_ports`` = the schedule's ports, ``elems_per_flit`` = its elements per flit,
    ``buffer_depth`` = ``buffer_flits``, ``table_depth`` = the longest engine program,
    ``max_chunks`` = the number of chunks (each at least the smallest legal value), and
    ``rx_buffer_depth`` = ``2 * link_latency + 2 * submessage_flits`` (full rate, see
    ``hdl.credit``); every other field keeps its default. ``overrides`` replace any field.

    Parameters
    ----------
    lowered : golden_model.lowering.LoweredSchedule
    **overrides
        ``NIConfig`` fields.

    Returns
    -------
    NIConfig

    Raises
    ------
    ValueError
        If an override names no ``NIConfig`` field, is invalid, or is too small for the schedule.
    """
    names = {f.name for f in dataclasses.fields(NIConfig)}
    for key in overrides:
        if key not in names:
            raise ValueError(f"unknown NIConfig field {key!r}: expected one of {', '.join(sorted(names))}")
    defaults = NIConfig()
    schedule = lowered.schedule
    latency = overrides.get("link_latency", defaults.link_latency)
    sub = overrides.get("submessage_flits", defaults.submessage_flits)
    need = {
        "num_ports": max(1, lowered.num_ports),
        "elems_per_flit": lowered.elements_per_flit,
        "buffer_depth": max(2, lowered.buffer_flits),
        "table_depth": max(2, lowered.table_depth),
        "max_chunks": max(1, schedule.num_chunks),
    }
    fields = dict(need, routed=bool(getattr(lowered, "routed", False)))
    if isinstance(latency, int) and isinstance(sub, int):
        fields["rx_buffer_depth"] = 2 * latency + 2 * sub
    fields.update(overrides)
    config = NIConfig(**fields)
    for key in ("num_ports", "buffer_depth", "table_depth", "max_chunks"):
        if getattr(config, key) < need[key]:
            raise ValueError(f"{key} {getattr(config, key)!r} is too small for {schedule.algorithm} "
                             f"on {schedule.topology.spec}: it needs at least {need[key]}")
    if config.routed != fields["routed"]:
        raise ValueError(f"routed={config.routed!r} differs from the schedule's lowering "
                         f"(routed={fields['routed']!r})")
    if config.elems_per_flit != lowered.elements_per_flit:
        raise ValueError(f"elems_per_flit {config.elems_per_flit!r} differs from the schedule's "
                         f"lowering ({lowered.elements_per_flit} elements per flit)")
    return config

