"""Halving-doubling all-reduce (Rabenseifner's algorithm as described by Thakur, Rabenseifner &
Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005):
reduce-scatter by recursive halving, then all-gather by recursive doubling.

Power of two
------------
With ``p`` ranks (a power of two, ``L = log2 p``) and the vector cut into ``p`` chunks, halving
step ``i`` (``0 <= i < L``) pairs rank ``q`` with ``q ^ (p >> (i+1))``: the pair splits the chunk
range they both still hold in two, each keeps one half and sends the other (``REDUCE``), so the
data sent halves every step and rank ``q`` ends holding chunk ``q`` fully reduced. The doubling
steps run the same pairs in reverse order and send the whole range held (``COPY``), so the data
doubles. ``2L`` steps. A transfer carries one chunk, so a step sends several transfers between
the same pair.

Other node counts (MPICH)
-------------------------
With ``p'`` the largest power of two ``<= N`` and ``r = N - p'``: in a first step the first ``2r``
ranks pair up and each even rank sends its whole vector to rank + 1, which adds it (``REDUCE``);
the odd ranks among them and the ``N - 2r`` remaining ranks, ``p'`` in all, run the power-of-two
algorithm; in a last step each of those odd ranks sends the whole result back to its even partner
(``COPY``). ``2 L + 2`` steps. The chunk count is ``p'``.

Rank mapping
------------
The largest messages (the whole vector in the MPICH pairing step, half of it in the first halving
and last doubling step) should travel the shortest distance. Nodes are therefore put in an order
``sigma`` in which consecutive nodes are close, and

* the MPICH pairs are ``sigma[2i], sigma[2i+1]`` (neighbours in ``sigma``);
* the ``p'`` survivors keep their ``sigma`` order, ``S[0..p'-1]``; survivor ``S[j]`` gets
  Rabenseifner rank ``q = bitreverse_L(j)``, so the exchange at rank distance ``p'/2`` (largest
  data) is between ``S[j]`` and ``S[j ^ 1]``, and in general halving step ``i`` pairs ``S[j]``
  with ``S[j ^ 2^i]``: partner distance doubles as the data halves.

``sigma`` is the Z-order (Morton) order of the grid coordinates on mesh and torus (interleaving
the bits of row and column, column bit lowest), so that on power-of-two grids ``S[j ^ 2^i]`` is
one hop away along the row for ``i = 0``, one hop along the column for ``i = 1``, two hops along
the row for ``i = 2``, two along the column for ``i = 3``, and so on; ``sigma`` is
``Topology.ring_order()`` on ring, and node id order on fattree and bigraph (node ids under one
switch are consecutive, so ``sigma`` neighbours share a switch). Total link traffic on an 8 x 8
torus (elements times links crossed, in units of the vector length D): 168 D with Z-order, 216 D
with row-major node ids, 242 D with ``ring_order()``, and 378 D with row-major node ids in the
textbook rank order (survivor ``j`` has rank ``j``). On odd grids Z-order has no such structure
and is only a locality-preserving order (on a 3 x 3 mesh ``ring_order()`` moves less);
``build(..., node_order=...)`` takes any other order.

Routes are ``Topology.route`` (multi-hop where partners are not neighbours);
``contention_free`` is False (a step sends several transfers between one pair). Runs on every
topology family.
"""

import numbers

from ..errors import ConfigError
from ..schedule import AllReduceSchedule, Op, Transfer

NAME = "halving-doubling"


def default_node_order(topology):
    """The order ``sigma`` of the nodes whose neighbours pair up (module docstring).

    Returns
    -------
    list of int
        Z-order of (row, col) on a grid (mesh, torus; on a ring, one row, that is node order),
        node ids otherwise.
    """
    if topology.grid is not None:
        return sorted(topology.nodes, key=lambda v: _morton(*topology.coords(v)))
    return list(topology.nodes)


def _morton(row, col):
    key, bit = 0, 0
    while row >> bit or col >> bit:
        key |= ((col >> bit) & 1) << (2 * bit) | ((row >> bit) & 1) << (2 * bit + 1)
        bit += 1
    return key


def bit_reverse(value, bits):
    """``value``'s lowest ``bits`` bits in reverse order."""
    out = 0
    for _ in range(bits):
        out = out << 1 | value & 1
        value >>= 1
    return out


def plan(num_nodes):
    """The rank structure for ``num_nodes`` ranks, independent of the network.

    Returns
    -------
    (int, list of (int, int), list of int)
        ``p'`` (largest power of two <= N), the MPICH pairs ``(even, odd)`` as positions in
        ``sigma`` (even sends to odd first, odd sends the result back last), and the survivors'
        positions in ``sigma`` (``S``).
    """
    p2 = 1
    while p2 * 2 <= num_nodes:
        p2 *= 2
    extra = num_nodes - p2
    pairs = [(2 * i, 2 * i + 1) for i in range(extra)]
    survivors = [2 * i + 1 for i in range(extra)] + list(range(2 * extra, num_nodes))
    return p2, pairs, survivors


def build(topology, num_elements, node_order=None):
    """Halving-doubling (Rabenseifner) all-reduce schedule.

    Parameters
    ----------
    topology : Topology
        Any family.
    num_elements : int
        Elements per node vector (D).
    node_order : sequence of int, optional
        The order ``sigma`` (a permutation of the node ids); default
        ``default_node_order(topology)``.

    Returns
    -------
    AllReduceSchedule
        ``p'`` chunks (``p'`` the largest power of two <= N); ``2 log2 p'`` steps, plus 2 when N
        is not a power of two; ``meta = {"p2": p', "node_order": sigma}``.

    Raises
    ------
    ConfigError
        If ``node_order`` is not a permutation of the topology's node ids.
    """
    n = topology.num_nodes
    if node_order is None:
        sigma = default_node_order(topology)
    else:
        sigma = list(node_order)
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in sigma) \
                or sorted(sigma) != list(range(n)):
            raise ConfigError(f"node_order must be a permutation of the node ids 0..{n - 1} "
                              f"of {topology.spec}, not {node_order!r}")
        sigma = [int(v) for v in sigma]
    p2, pairs, survivors = plan(n)
    levels = p2.bit_length() - 1
    surv = [sigma[j] for j in survivors]

    def send(src, dst, chunks, op):
        route = topology.route(src, dst)
        return [Transfer(src, dst, c, op, route) for c in chunks]

    # held[j] = (lo, hi): chunk range survivor j is responsible for, [lo, hi).
    held = [(0, p2)] * p2
    history = []
    halving = []
    for i in range(levels):
        dist = 1 << i
        step, new = [], list(held)
        for j in range(p2):
            lo, hi = held[j]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not j & dist else ((mid, hi), (lo, mid))
            step += send(surv[j], surv[j ^ dist], range(*give), Op.REDUCE)
            new[j] = keep
        halving.append(step)
        history.append(held)
        held = new
    doubling = []
    for i in reversed(range(levels)):
        dist = 1 << i
        step = []
        for j in range(p2):
            step += send(surv[j], surv[j ^ dist], range(*held[j]), Op.COPY)
        doubling.append(step)
        held = history[i]
    steps = halving + doubling
    if pairs:
        first = [t for a, b in pairs for t in send(sigma[a], sigma[b], range(p2), Op.REDUCE)]
        last = [t for a, b in pairs for t in send(sigma[b], sigma[a], range(p2), Op.COPY)]
        steps = [first] + steps + [last]
    return AllReduceSchedule.build(
        NAME, topology, num_elements, p2, steps, contention_free=False,
        meta={"p2": p2, "node_order": sigma})
