"""The NI host port: command/response layouts and pure-Python command builders.

``host_cmd`` words (``HostCmd``, ``write`` in bit 0) load a node's buffer and engine tables before
``start`` and read the buffer back after ``done``; each read gives one ``host_rsp`` word. The
builders here are plain Python (no simulator), so the amaranth.sim tests and the cocotb host
players (``$readmemh`` images) share them.
"""

import numpy as np
from amaranth.lib import data

from .config import FIELD_ADDR_BITS, NIConfig, check_schedule_fits
from .schedule_table import engine_tables

__all__ = ["HostCmd", "HostRsp", "TARGET_BUFFER", "TARGET_TABLE", "host_cmd_word",
           "flit_word", "flit_elements", "load_commands", "table_commands", "read_commands"]

#: ``HostCmd.target`` values.
TARGET_BUFFER = 0
TARGET_TABLE = 1


class HostCmd(data.StructLayout):
    """``{"write": 1, "target": 1, "engine": 4, "addr": 20, "data": flit_width}``.

    A write stores ``data`` at ``addr`` of the buffer (``target = 0``) or of engine ``engine``'s
    table (``target = 1``, the low 102 bits of ``data`` are the ``ScheduleRow``); a read returns the
    word (a table row zero-extended) on ``host_rsp``.
    """

    def __init__(self, flit_width):
        super().__init__({"write": 1, "target": 1, "engine": 4, "addr": FIELD_ADDR_BITS,
                          "data": flit_width})


class HostRsp(data.StructLayout):
    """``{"data": flit_width}``."""

    def __init__(self, flit_width):
        super().__init__({"data": flit_width})


def host_cmd_word(config, *, write, target, addr, engine=0, data=0):
    """The ``HostCmd`` word as an int (``write`` in bit 0, ``data`` in the top bits).

    Raises
    ------
    ValueError
        If a field does not fit.
    """
    fields = {"write": int(write), "target": int(target), "engine": engine, "addr": addr,
              "data": int(data)}
    word = 0
    for name, field in HostCmd(config.flit_width):
        value = int(fields[name])
        if not 0 <= value < (1 << field.width):
            raise ValueError(f"host command field {name} = {value!r} does not fit in "
                             f"{field.width} bits")
        word |= value << field.offset
    return word


def flit_word(config, elements):
    """Pack ``elems_per_flit`` elements of ``config``'s element type into a flit word (their bit
    patterns, ``ElementType.to_bits``), element 0 lowest."""
    w = config.elem_width
    word = 0
    patterns = config.element_type.to_bits(np.asarray(elements).reshape(-1))
    for k, v in enumerate(patterns.tolist()):
        word |= int(v) << (k * w)
    return word


def flit_elements(config, word):
    """Unpack a flit word into ``elems_per_flit`` elements of ``config``'s element type."""
    w = config.elem_width
    mask = (1 << w) - 1
    patterns = [(int(word) >> (k * w)) & mask for k in range(config.elems_per_flit)]
    return config.element_type.from_bits(np.array(patterns, dtype=np.uint64))


def load_commands(config, lowered, node, flits):
    """Commands that load node ``node``'s buffer and every engine table.

    Parameters
    ----------
    config : NIConfig
    lowered : golden_model.lowering.LoweredSchedule
    node : int
    flits : numpy.ndarray, shape (buffer_flits, elems_per_flit)
        The node's vector as ``lowered.pack(...)[node]``.

    Returns
    -------
    list of int
        ``HostCmd`` words: the buffer flits, then each engine's rows followed by a zero row (the
        end of the table) when there is room; engines of ports the node does not use get just the
        zero row.

    Raises
    ------
    ValueError
        If the schedule does not fit the configuration (ports, buffer, table depth).
    """
    if not isinstance(config, NIConfig):
        raise ValueError(f"config must be an NIConfig, not {config!r}")
    check_schedule_fits(config, lowered)
    cmds = [host_cmd_word(config, write=1, target=TARGET_BUFFER, addr=a,
                          data=flit_word(config, flits[a]))
            for a in range(lowered.buffer_flits)]
    return cmds + table_commands(config, lowered, node)


def table_commands(config, lowered, node):
    """The ``HostCmd`` words that load node ``node``'s engine tables (each engine's rows, then
    a zero row when there is room; see :func:`load_commands`, which checks the fit)."""
    cmds = []
    for table in engine_tables(lowered.programs[node], config):
        cmds += [host_cmd_word(config, write=1, target=TARGET_TABLE, engine=table.engine,
                               addr=table.base + a, data=w) for a, w in enumerate(table.words)]
    return cmds


def read_commands(config, num_flits):
    """Commands that read buffer flits ``0 .. num_flits - 1`` (one response each)."""
    return [host_cmd_word(config, write=0, target=TARGET_BUFFER, addr=a) for a in range(num_flits)]
