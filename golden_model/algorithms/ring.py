"""Ring all-reduce (Patarasuk & Yuan 2009; NCCL ring): reduce-scatter then all-gather around the
topology's ring order (``Topology.ring_order``, a snake Hamiltonian cycle on mesh and torus).

The vector is cut into N chunks. In reduce-scatter step s (0 <= s < N-1) ring position i sends
chunk (i - s) mod N to position i+1, which adds it; after N-1 steps position i holds chunk
(i + 1) mod N fully reduced. All-gather step s sends chunk (i + 1 - s) mod N on, overwriting.
2(N-1) steps; each ring position uses one link per step, so a step is contention-free whenever
every ring hop is a single link (true on any Hamiltonian ring). Uses one direction of one link per
node, as the MultiTree paper's ring baseline (one NI).

Where the topology has no Hamiltonian cycle of neighbours (an odd x odd mesh, a 1 x C line), the
ring order is a Hamiltonian *path* and the algorithm becomes the bidirectional line all-reduce of
``line_steps`` over it: the same 2(N-1) steps of one chunk per link, every transfer between
neighbours, both directions of each path link used. On fattree and bigraph the order is by node
id and every hop is routed through switches.
"""

from ..schedule import AllReduceSchedule, Op, Transfer


def ring_steps(topology, order, first_chunk=0, chunk_of=None):
    """Reduce-scatter and all-gather steps around ``order`` (a list of node ids).

    ``chunk_of(i)`` maps the ring's local chunk index to a schedule chunk id (default
    ``first_chunk + i``), so ``ring2d`` can run rings over sub-ranges of chunks. After the
    reduce-scatter, position i owns local chunk (i + 1) mod k.

    Returns
    -------
    (reduce_scatter, all_gather) : two lists of k-1 steps, each a list of Transfer
    """
    k = len(order)
    chunk_of = chunk_of or (lambda i: first_chunk + i)
    hops = [topology.route(order[i], order[(i + 1) % k]) for i in range(k)]

    def phase(offset, op):
        return [[Transfer(order[i], order[(i + 1) % k], chunk_of((i + offset - s) % k), op, hops[i])
                 for i in range(k)] for s in range(k - 1)]

    return phase(0, Op.REDUCE), phase(1, Op.COPY)


def line_steps(topology, order, chunk_of=None):
    """Bidirectional line all-reduce over a path ``order`` whose consecutive nodes are neighbours.

    Position j owns local chunk (j + 1) mod k, as in ``ring_steps``, so the two are
    interchangeable. Reduce-scatter: the partial sums of a chunk flow along the path from both
    ends towards its owner, pipelined so that in step s position i sends rightwards the chunk
    owned by position i + k-1-s (for i <= s) and, mirrored, leftwards; k-1 steps, one chunk per
    link direction per step. All-gather: each owner's chunk flows outwards both ways, position i
    forwarding at step s the chunk owned by position i - s (rightwards; mirrored leftwards);
    k-1 steps.

    Returns
    -------
    (reduce_scatter, all_gather) : two lists of k-1 steps
    """
    k = len(order)
    chunk_of = chunk_of or (lambda i: i)

    def owned(j):
        return chunk_of((j + 1) % k)

    def send(i, to, j, op):
        return Transfer(order[i], order[to], owned(j), op, topology.route(order[i], order[to]))

    def mirror(i):
        return k - 1 - i

    rs = [[send(i, i + 1, i + k - 1 - s, Op.REDUCE) for i in range(s + 1)]
          + [send(mirror(i), mirror(i) - 1, mirror(i + k - 1 - s), Op.REDUCE) for i in range(s + 1)]
          for s in range(k - 1)]
    ag = [[send(i, i + 1, i - s, Op.COPY) for i in range(s, k - 1)]
          + [send(mirror(i), mirror(i) - 1, mirror(i - s), Op.COPY) for i in range(s, k - 1)]
          for s in range(k - 1)]
    return rs, ag


def closed_ring_steps(topology, order, chunk_of=None):
    """``ring_steps`` when the hop from the last node of ``order`` back to the first is a single
    link or the topology has switches, else ``line_steps`` (neighbour transfers only)."""
    if len(order) > 2 and topology.is_direct and len(topology.route(order[-1], order[0])) > 1:
        return line_steps(topology, order, chunk_of)
    return ring_steps(topology, order, chunk_of=chunk_of)


def build(topology, num_elements):
    """Ring all-reduce schedule: 2(N-1) steps, N chunks, every step contention-free on ring,
    mesh and torus (and on any network without switches whose ring order visits neighbours)."""
    order = topology.ring_order()
    rs, ag = closed_ring_steps(topology, order)
    # Contention-free where every transfer crosses one link: consecutive nodes of the order
    # are neighbours (the closing hop is left out by line_steps when it is not one link).
    neighbours = all(len(topology.route(a, b)) == 1 for a, b in zip(order, order[1:]))
    return AllReduceSchedule.build(
        "ring", topology, num_elements, topology.num_nodes, rs + ag,
        contention_free=topology.is_direct and neighbours,
        meta={"ring_order": order, "hamiltonian": topology.ring_is_hamiltonian})
