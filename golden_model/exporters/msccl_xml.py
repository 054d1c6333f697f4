"""An all-reduce schedule as MSCCL-IR XML, the format msccl-tools writes (``ir_to_xml``, its
``old_format``: ``<step>`` elements) and the MSCCL and RCCL runtimes, TACCL, ForestColl and
ASTRA-sim's converter read.

The mapping (docs/interchange.md):

* ``<algo>``: ``proto="Simple"``, one channel, ``nchunksperloop`` = the schedule's chunk count,
  ``ngpus`` = its nodes, ``coll="allreduce"``, in place (``inplace="1" outofplace="0"``: every
  node reduces in its own vector), ``minBytes="0"`` and ``maxBytes`` = the project's largest
  size plus one (``golden_model.units.MAX_SIZE``: the runtimes take a size ``n`` when
  ``minBytes <= n < maxBytes``; MSCCL reads a missing ``maxBytes`` as 128 MB and RCCL reads 0 as
  no limit, so both are written).
* ``<gpu id i_chunks o_chunks s_chunks>``: ``i_chunks = o_chunks = nchunksperloop``, no
  scratch.
* ``<tb id send recv chan>``: one send-only thread block per peer a node sends to and one
  receive-only thread block per peer it receives from (TACOS's writer does the same per link),
  all on channel 0; ids from 0, the send blocks first, each group by peer.
* ``<step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep>``: a transfer of chunk
  ``c`` is a send ``s`` in the sender's block and a receive in the receiver's: ``rrc``
  (receive-reduce-copy into ``i[c]``) for a REDUCE, ``r`` for a COPY; offsets are chunk
  indices, ``cnt="1"``. Each block lists its steps in schedule order, which is how the
  runtimes match a pair's sends and receives.
* Dependencies, as the executor reads a schedule (``golden_model.executor``: a transfer reads
  its source as it was at the start of its step): a send waits for the last write into its
  chunk at its node in an earlier step; a receive waits for the write before it into the same
  chunk (so the additions happen in the schedule's summation order, bit for bit) and for every
  send that reads the chunk's old value (from that write on, up to its own step). Per thread
  block only the last such step is kept (a block runs in order). A step has one dependency;
  the others become ``nop`` steps just before it, the first one stays on the step itself
  (msccl-tools does the same; MSCCL refuses a chain of ``nop`` dependencies whose step has
  none). ``hasdep="1"`` marks the steps others wait for.

Order: every ``<tb>`` starts with a comment, ``<!-- allreduce-rtl schedule order: k.i ... -->``,
giving each of its steps the step ``k`` and position ``i`` of its transfer in the schedule
(``-`` for a nop; ``k.i~`` when the transfer's route is the reverse of the topology's route back,
as tree algorithms route reductions through switches). The format has no place for the order of a node's transfers to different
peers, which the routed NIs' timing depends on; consumers skip comments (MSCCL's parser:
``src/graph/xml.cc``, ``xmlSkipComment``; Python's ElementTree by default), and this
project's import (``golden_model.interchange.msccl_import``) restores the schedule from it.

Chunks: MSCCL cuts a buffer into ``nchunksperloop`` equal chunks and runs only sizes it divides;
the schedule's chunks are near-equal (``schedule.chunk_bounds``: sizes differ by at most one
element). The file is size-agnostic: on counts that ``nchunksperloop`` divides both agree, and
this project's reader cuts any other count as ``chunk_bounds`` does.
"""

from xml.sax.saxutils import quoteattr

from ..schedule import Op
from ..units import MAX_SIZE

__all__ = ["export", "PROTO", "MAX_BYTES", "ORDER_MARK"]

#: The protocol written (MSCCL's three: Simple, LL, LL128; Simple suits any size).
PROTO = "Simple"
#: ``maxBytes``: the runtimes run a size n with minBytes <= n < maxBytes.
MAX_BYTES = MAX_SIZE + 1
#: Starts the comment in every ``<tb>`` that gives each of its steps' place in this project's
#: schedule (``step.position``, ``-`` for a nop).
ORDER_MARK = "allreduce-rtl schedule order:"


class _Step:
    __slots__ = ("kind", "chunk", "deps", "index", "hasdep", "where")

    def __init__(self, kind, chunk, where=None):
        self.kind, self.chunk, self.deps = kind, chunk, []
        self.index, self.hasdep, self.where = -1, False, where


def _route_mark(topology, t):
    """``"~"`` when transfer ``t`` takes the reverse of the topology's route from its
    destination back to its source (``trees.reverse_route``, how tree algorithms route a
    reduction on switched networks), else ``""`` (the topology's own route, which is what an
    import takes)."""
    if len(t.route) == 1 or t.route == tuple(topology.route(t.src, t.dst)):
        return ""
    back = tuple((v, u) for u, v in reversed(topology.route(t.dst, t.src)))
    return "~" if t.route == back else ""


def _blocks(schedule):
    """Per node: its thread blocks as ``[(send, recv), steps]`` in id order, every step's
    dependencies as ``(block, step)`` pairs of its node (module docstring), extra ones already
    turned into ``nop`` steps, and every step's index in its block set."""
    n = schedule.num_nodes
    send_peers, recv_peers = [set() for _ in range(n)], [set() for _ in range(n)]
    for _, t in schedule.transfers():
        send_peers[t.src].add(t.dst)
        recv_peers[t.dst].add(t.src)
    blocks = [[[(p, -1), []] for p in sorted(send_peers[u])]
              + [[(-1, p), []] for p in sorted(recv_peers[u])] for u in range(n)]
    block_of = [{("s", send) if send >= 0 else ("r", recv): b
                 for b, ((send, recv), _) in enumerate(blocks[u])} for u in range(n)]
    last_write = {}     # (node, chunk) -> (block, step) of the latest write
    reads = {}          # (node, chunk) -> {block: step} of the sends since that write
    for k, step in enumerate(schedule.steps):
        for i, t in enumerate(step):    # sends read the chunk as it was when the step began
            b = block_of[t.src][("s", t.dst)]
            s = _Step("s", t.chunk, f"{k}.{i}{_route_mark(schedule.topology, t)}")
            w = last_write.get((t.src, t.chunk))
            if w is not None:
                s.deps.append(w)
            blocks[t.src][b][1].append(s)
            reads.setdefault((t.src, t.chunk), {})[b] = s      # a block runs in order
        for i, t in enumerate(step):
            b = block_of[t.dst][("r", t.src)]
            s = _Step("rrc" if t.op is Op.REDUCE else "r", t.chunk,
                      f"{k}.{i}{_route_mark(schedule.topology, t)}")
            key = (t.dst, t.chunk)
            w = last_write.get(key)
            if w is not None and w[0] != b:
                s.deps.append(w)
            s.deps.extend(reads.pop(key, {}).items())
            blocks[t.dst][b][1].append(s)
            last_write[key] = (b, s)
    for node_blocks in blocks:
        for entry in node_blocks:
            expanded = []
            for s in entry[1]:
                for dep in s.deps[1:]:
                    nop = _Step("nop", -1)
                    nop.deps = [dep]
                    expanded.append(nop)
                del s.deps[1:]
                expanded.append(s)
            for i, s in enumerate(expanded):
                s.index = i
            entry[1] = expanded
    return blocks


def _attrs(**kw):
    return " ".join(f"{k}={quoteattr(str(v))}" for k, v in kw.items())


def export(schedule):
    """The MSCCL-IR XML text of ``schedule`` (module docstring), two-space indented, one
    ``<step>`` per line; ends with a newline. Written as text line by line (an element tree of
    a million steps would take gigabytes).

    Parameters
    ----------
    schedule : AllReduceSchedule
        Any all-reduce schedule of this project.

    Returns
    -------
    str
    """
    blocks = _blocks(schedule)
    chunks = schedule.num_chunks
    # An imported schedule keeps its file's name (``msccl_import``: meta ``name``).
    name = schedule.meta.get("name") if schedule.algorithm.startswith("msccl:") else None
    lines = ["<algo " + _attrs(name=name or f"{schedule.algorithm} {schedule.topology.spec}",
                               proto=PROTO, nchannels=1, nchunksperloop=chunks,
                               ngpus=schedule.num_nodes, coll="allreduce", inplace=1,
                               outofplace=0, minBytes=0, maxBytes=MAX_BYTES) + ">"]
    for u, node_blocks in enumerate(blocks):
        for _, steps in node_blocks:
            for st in steps:
                for _, dep in st.deps:
                    dep.hasdep = True
        lines.append(f'  <gpu id="{u}" i_chunks="{chunks}" o_chunks="{chunks}" s_chunks="0">')
        for b, ((send, recv), steps) in enumerate(node_blocks):
            lines.append(f'    <tb id="{b}" send="{send}" recv="{recv}" chan="0">')
            lines.append(f"      <!-- {ORDER_MARK} {' '.join(st.where or '-' for st in steps)} "
                         f"-->")
            for st in steps:
                db, ds = (st.deps[0][0], st.deps[0][1].index) if st.deps else (-1, -1)
                if st.kind == "nop":     # as msccl-tools writes a step without buffers
                    bufs = 'srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0"'
                else:
                    bufs = (f'srcbuf="i" srcoff="{st.chunk}" dstbuf="i" dstoff="{st.chunk}" '
                            f'cnt="1"')
                lines.append(f'      <step s="{st.index}" type="{st.kind}" {bufs} depid="{db}" '
                             f'deps="{ds}" hasdep="{int(st.hasdep)}" />')
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"
