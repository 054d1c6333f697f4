"""Verilog of the CXL.mem controller (banks as ``hdl.ram`` behavioural modules)."""

import pathlib

from amaranth.back import verilog
from amaranth.hdl import Signal, Value

from ..ram import verilog_rams

__all__ = ["to_verilog", "TOP_MODULE"]

#: Name of the controller's module in the generated Verilog.
TOP_MODULE = "cxl_mem_controller"


def to_verilog(controller, path=None):
    """Convert a ``CXLMemController`` to Verilog, top module ``cxl_mem_controller``.

    Every memory bank (``hdl.ram.RAM``) becomes an instance of a small behavioural module
    appended to the output, so a large memory costs no per-word initialisation. No
    ``timescale`` is emitted.

    Parameters
    ----------
    controller : CXLMemController
    path : path-like, optional
        Where to write the Verilog; parent directories are created.

    Returns
    -------
    str
    """
    # ``req`` and ``rwd`` are always ready: their ``ready`` member is a constant, which
    # ``verilog.convert`` does not take as a port, so the ports are listed without constants.
    ports = [Value.cast(value) for _, _, value in controller.signature.flatten(controller)]
    ports = [port for port in ports if isinstance(port, Signal)]
    with verilog_rams() as modules:
        text = verilog.convert(controller, name=TOP_MODULE, ports=ports, emit_src=False)
    text = text + "\n" + "\n".join(modules[name] for name in sorted(modules))
    if path is not None:
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return text
