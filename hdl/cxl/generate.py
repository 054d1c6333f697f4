"""Verilog of the CXL.mem controller (banks as ``hdl.ram`` behavioural modules)."""

from ..generate import to_verilog as _to_verilog

__all__ = ["to_verilog", "TOP_MODULE"]

#: Name of the controller's module in the generated Verilog.
TOP_MODULE = "cxl_mem_controller"


def to_verilog(controller, path=None):
    """Convert a ``CXLMemController`` to Verilog, top module ``cxl_mem_controller``
    (``hdl.generate.to_verilog``: every memory bank an instance of a small behavioural module
    appended to the output, so a large memory costs no per-word initialisation; no
    ``timescale``).

    Parameters
    ----------
    controller : CXLMemController
    path : path-like, optional
        Where to write the Verilog; parent directories are created.

    Returns
    -------
    str
    """
    return _to_verilog(controller, path, name=TOP_MODULE)
