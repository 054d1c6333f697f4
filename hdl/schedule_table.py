"""Schedule-table rows of the NI engines (docs/hardware.md, "Schedule table").

Each NI has ``2 * num_ports`` engine tables: send engines ``0 .. P-1`` then receive engines
``P .. 2P-1`` (``engine_index``). A row is a ``ScheduleRow``; an engine stops at the first row
with ``valid = 0`` (tables are zero after reset, so a loader writes a terminating zero row after
the last one when it reloads a shorter program). ``pack_row`` turns a
``golden_model.lowering.TableRow`` into the word the host writes.

A routed NI's send engines each have a release table beside the schedule table, one
``RELEASE_BITS`` word per row (the row's ``release`` cycle, ``golden_model.timetable``), at
host table addresses ``(1 << RELEASE_ADDR_BIT) + row`` of the same engine; the engine reads both
at once. Every row the engine reads has its release word written by the loader (nothing
relies on a memory starting cleared).
"""

from typing import NamedTuple

from amaranth.lib import data

from golden_model.lowering import Direction

from .config import (CHUNK_BITS, COUNT_BITS, FLOW_BITS, RELEASE_ADDR_BIT, RELEASE_BITS,
                     STAGE_BITS, STEP_BITS)
from .flit import Op

__all__ = ["ScheduleRow", "pack_row", "pack_release", "unpack_row", "engine_index",
           "EngineTable", "engine_tables"]


class ScheduleRow(data.Struct):
    """One row of an engine table (``SCHEDULE_ROW_BITS`` = 117 bits, ``valid`` in bit 0).

    Members
    -------
    valid : unsigned(1)
        0 ends the table.
    step : unsigned(STEP_BITS)
    op : Op
    flow : unsigned(FLOW_BITS)
    chunk : unsigned(CHUNK_BITS)
    addr : unsigned(20)
        Buffer flit address of the chunk's first flit.
    flits : unsigned(20)
        Payload flits of the message.
    deps : unsigned(COUNT_BITS)
        SEND: receives into ``chunk`` that must have completed; RECV: the order of this
        contribution into ``chunk`` (the receives before it, ``hdl.ordering``; unused routed).
    dest, src : unsigned(10)
        Routed SEND rows: destination and source router terminals (the router's head); else 0.
    stage : unsigned(STAGE_BITS)
        Routed SEND rows of staged reductions (``golden_model.lowering``): the staging slot j;
        the slot's buffer address is ``addr + j * flits`` and its arrival counter ``chunk + j``.
    unstage : unsigned(1)
        The row reads slot ``stage`` and the head names the chunk (a loopback SEND row); 0: the
        row reads the chunk and the head names slot ``stage``.
    """
    valid: 1
    step: STEP_BITS
    op: Op
    flow: FLOW_BITS
    chunk: CHUNK_BITS
    addr: 20
    flits: 20
    deps: COUNT_BITS
    dest: 10
    src: 10
    stage: STAGE_BITS
    unstage: 1


_LAYOUT = ScheduleRow.as_shape()


def pack_row(row):
    """The table word of ``row`` (``valid = 1``).

    Parameters
    ----------
    row : golden_model.lowering.TableRow

    Returns
    -------
    int
        ``ScheduleRow`` bits, ``valid`` in bit 0.

    Raises
    ------
    ValueError
        If a field does not fit its width (the message names the field and the value).
    """
    values = {"valid": 1, "step": row.step, "op": Op[row.op.name].value, "flow": row.flow,
              "chunk": row.chunk, "addr": row.addr, "flits": row.flits, "deps": row.deps, "dest": row.dest, "src": row.src,
              "stage": row.stage, "unstage": int(row.unstage)}
    word = 0
    for name, field in _LAYOUT:
        width = field.width
        value = int(values[name])
        if not 0 <= value < (1 << width):
            raise ValueError(f"schedule-table field {name} = {value!r} does not fit in "
                             f"{width} bits (row {row!r})")
        word |= value << field.offset
    return word


def unpack_row(word):
    """The fields of a table word as a dict (``op`` as ``hdl.flit.Op``); for tests and dumps."""
    out = {}
    for name, field in _LAYOUT:
        out[name] = (int(word) >> field.offset) & ((1 << field.width) - 1)
    out["op"] = Op(out["op"])
    return out


def engine_index(direction, port, num_ports):
    """Engine (table) number of a port's send or receive engine.

    Parameters
    ----------
    direction : golden_model.lowering.Direction
    port : int
        ``0 <= port < num_ports``.
    num_ports : int

    Returns
    -------
    int
        ``port`` for SEND, ``num_ports + port`` for RECV.

    Raises
    ------
    ValueError
        If ``port`` is out of range or ``direction`` is not a ``Direction``.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < num_ports:
        raise ValueError(f"port must be an integer in 0..{num_ports - 1}, not {port!r}")
    if direction is Direction.SEND:
        return port
    if direction is Direction.RECV:
        return num_ports + port
    raise ValueError(f"direction must be Direction.SEND or Direction.RECV, not {direction!r}")


class EngineTable(NamedTuple):
    """One engine's table of one node: ``rows`` (``golden_model.lowering.TableRow``) and
    ``words``, what the host writes at table addresses ``base, base + 1, ...``: ``pack_row`` of
    each row, then one zero row when the table has room for it (the engine stops there); or,
    with ``base = 1 << RELEASE_ADDR_BIT``, a routed send engine's release table: each row's
    ``release``, then 0 where the zero row ends the schedule table."""
    engine: int
    direction: Direction
    port: int
    rows: list
    words: list
    base: int = 0


def pack_release(row):
    """The release-table word of ``row`` (its ``release`` cycle).

    Raises
    ------
    ValueError
        If the cycle does not fit in ``RELEASE_BITS`` bits (the message names the value).
    """
    if not 0 <= row.release < (1 << RELEASE_BITS):
        raise ValueError(f"release cycle {row.release!r} does not fit in {RELEASE_BITS} bits "
                         f"(at most {(1 << RELEASE_BITS) - 1:,}; row {row!r})")
    return row.release


def engine_tables(program, config):
    """Every engine table of one node's ``program`` (``golden_model.lowering.NodeProgram``) on
    the NI of ``config`` (``hdl.config.NIConfig``), in engine order (``engine_index``: send
    engines, then receive engines), as ``EngineTable``, then on a routed NI each send engine's
    release table; a table shorter than ``config.table_depth`` (an empty one too) ends in one
    zero row. The caller has checked that the schedule fits (``hdl.config.check_schedule_fits``:
    at most ``table_depth`` rows)."""
    num_ports, depth = config.num_ports, config.table_depth
    tables = []
    end = []
    for direction in Direction:
        for port in range(num_ports):
            rows = list(program.engines.get((direction, port), []))
            end = [0] if len(rows) < depth else []
            tables.append(EngineTable(engine_index(direction, port, num_ports), direction, port,
                                      rows, [pack_row(r) for r in rows] + end))
    if config.routed:
        for t in tables[:num_ports]:
            end = [0] if len(t.rows) < depth else []
            tables.append(t._replace(words=[pack_release(r) for r in t.rows] + end,
                                     base=1 << RELEASE_ADDR_BIT))
    return tables
