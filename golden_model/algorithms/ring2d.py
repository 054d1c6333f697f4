"""Hierarchical 2D ring all-reduce (the MultiTree paper's "hierarchical 2D ring" baseline).

On an R x C mesh or torus every row runs a ring reduce-scatter at the same time, then every
column runs a ring reduce-scatter on the piece its nodes own, then the same in reverse as
all-gathers: columns, then rows. Each phase is the ring algorithm of ``ring.ring_steps`` (or ``ring.line_steps`` on a mesh line)
(Patarasuk & Yuan 2009) run on a sub-range of chunks.

Chunking
--------
The vector is cut into ``C * R`` near-equal chunks (``schedule.chunk_bounds``), numbered so that
group ``g`` (``0 <= g < C``) is chunks ``g*R .. g*R + R-1``. A row ring of ``C`` nodes
reduce-scatters the ``C`` groups: in each of its ``C - 1`` steps a node sends one group, i.e.
``R`` transfers (one per chunk of the group) to its ring successor. Afterwards the node in column
``c`` holds group ``(c + 1) mod C`` reduced over its row (``ring_steps``' ownership rule), so the
column ring of column ``c`` reduce-scatters the ``R`` chunks of that group, one chunk per
transfer. The all-gathers undo this in reverse order.

Rings
-----
The row ring of row ``r`` visits columns ``0, 1, .., C-1`` and closes from column ``C-1`` back to
column 0; the column ring likewise over rows. On a torus whose dimension is longer than 2 the
closing hop is the wrap-around link (a dimension of exactly 2 needs no closing hop). A mesh line
has no Hamiltonian cycle, so it runs the bidirectional line all-reduce of ``ring.line_steps``
instead: same step count, same chunk ownership, every transfer between neighbours. Rows (or
columns) of length 1 need no ring and are skipped.

Topologies
----------
``mesh:RxC`` and ``torus:RxC``; ``ring:N`` is treated as ``1 x N`` (the algorithm is then the
plain ring all-reduce on the ring's own order). Every other family raises ``ConfigError``.

Steps and links
---------------
``2(C-1) + 2(R-1)`` steps. Row phases use only row links, column phases only column links, and
different rows (columns) use disjoint links, so no directed link ever carries two different
messages in one step. The IR's ``contention_free`` flag, however, is checked per *transfer*, and a
row step sends a group as ``R`` transfers over the same link; the flag is therefore set only when
``R == 1`` or ``C == 1`` (one transfer per ring hop). ``meta["link_disjoint"]`` records the
per-message property (True on every supported topology).
"""

from ..schedule import AllReduceSchedule, require_nodes
from .ring import closed_ring_steps

NAME = "ring2d"


def grid_shape(topology):
    """(rows, cols) ring2d uses on ``topology``.

    Returns
    -------
    (int, int)
        ``topology.grid``: ``(R, C)`` on mesh and torus, ``(1, N)`` on ring.

    Raises
    ------
    ConfigError
        If the topology is not a grid (ring, mesh or torus).
    """
    require_nodes(topology, NAME, lambda t: t.grid is not None,
                  "ring2d needs a mesh:RxC or torus:RxC topology (or ring:N, taken as 1xN); "
                  f"{topology.family} has no rows and columns")
    return topology.grid


def _merged(step_lists):
    """Zip several lists of steps (same length) into one list of steps."""
    return [[t for step in same_step for t in step] for same_step in zip(*step_lists)]


def build(topology, num_elements):
    """Hierarchical 2D ring all-reduce schedule.

    Parameters
    ----------
    topology : Topology
        ``mesh:RxC``, ``torus:RxC`` or ``ring:N`` (taken as ``1 x N``).
    num_elements : int
        Elements per node vector (D).

    Returns
    -------
    AllReduceSchedule
        ``C * R`` chunks, ``2(C-1) + 2(R-1)`` steps, ``meta = {"rows": R, "cols": C,
        "link_disjoint": True}``.

    Raises
    ------
    ConfigError
        On fattree, bigraph or any family without rows and columns.
    """
    rows, cols = grid_shape(topology)

    def node(r, c):
        return r * cols + c

    # Row phase: one ring per row over the C groups; a group is R chunks, so run the ring R
    # times (once per chunk offset j inside the group) and merge those steps.
    row_rs, row_ag = [], []
    for r in range(rows):
        order = [node(r, c) for c in range(cols)]
        per_offset = [closed_ring_steps(topology, order, chunk_of=lambda g, j=j: g * rows + j)
                      for j in range(rows)]
        row_rs.append(_merged([rs for rs, _ in per_offset]))
        row_ag.append(_merged([ag for _, ag in per_offset]))
    # Column phase: column c owns group (c + 1) mod C after the row reduce-scatter.
    col_rs, col_ag = [], []
    for c in range(cols):
        group = (c + 1) % cols
        order = [node(r, c) for r in range(rows)]
        rs, ag = closed_ring_steps(topology, order, chunk_of=lambda j, g=group: g * rows + j)
        col_rs.append(rs)
        col_ag.append(ag)
    steps = _merged(row_rs) + _merged(col_rs) + _merged(col_ag) + _merged(row_ag)
    return AllReduceSchedule.build(
        NAME, topology, num_elements, rows * cols, steps,
        contention_free=rows == 1 or cols == 1,
        meta={"rows": rows, "cols": cols, "link_disjoint": True})
