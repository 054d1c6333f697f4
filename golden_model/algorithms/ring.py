"""Ring all-reduce (Patarasuk & Yuan 2009; NCCL ring): reduce-scatter then all-gather around the
topology's ring order (``Topology.ring_order``, a snake Hamiltonian cycle on mesh and torus).

The vector is cut into N chunks. In reduce-scatter step s (0 <= s < N-1) ring position i sends
chunk (i - s) mod N to position i+1, which adds it; after N-1 steps position i holds chunk
(i + 1) mod N fully reduced. All-gather step s sends chunk (i + 1 - s) mod N on, overwriting.
2(N-1) steps; each ring position uses one link per step, so a step is contention-free whenever
every ring hop is a single link (true on any Hamiltonian ring). Uses one direction of one link per
node, as the MultiTree paper's ring baseline (one NI).
"""

from ..schedule import AllReduceSchedule, Op, Transfer


def ring_steps(topology, order, first_chunk=0, chunk_of=None):
    """Reduce-scatter and all-gather steps around ``order`` (a list of node ids).

    ``chunk_of(i)`` maps the ring's local chunk index to a schedule chunk id (default
    ``first_chunk + i``), so ``ring2d`` can run rings over sub-ranges of chunks.

    Returns
    -------
    (reduce_scatter, all_gather) : two lists of steps, each a list of Transfer
    """
    k = len(order)
    chunk_of = chunk_of or (lambda i: first_chunk + i)
    hops = [topology.route(order[i], order[(i + 1) % k]) for i in range(k)]

    def phase(offset, op):
        return [[Transfer(order[i], order[(i + 1) % k], chunk_of((i + offset - s) % k), op, hops[i])
                 for i in range(k)] for s in range(k - 1)]

    return phase(0, Op.REDUCE), phase(1, Op.COPY)


def build(topology, num_elements):
    """Ring all-reduce schedule: 2(N-1) steps of N transfers each, N chunks."""
    order = topology.ring_order()
    rs, ag = ring_steps(topology, order)
    return AllReduceSchedule.build(
        "ring", topology, num_elements, topology.num_nodes, rs + ag,
        contention_free=topology.ring_is_hamiltonian and topology.is_direct,
        meta={"ring_order": order, "hamiltonian": topology.ring_is_hamiltonian})
