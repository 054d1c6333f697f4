"""Deadlock avoidance: a proxy's queues as a small discrete simulation.

references.md, COARSE section, line 77-78: "each proxy keeps one queue per client and
synchronises all queues together, so it never blocks on a single tensor arriving in a different
order from different clients". Clients issue their tensors in their own orders (the backward
pass of each worker may finish tensors in a different order); a tensor can be reduced only once
every client's copy has arrived.

Two schemes, each a step-by-step simulation; in each step

1. every client (in id order) that has tensors left sends its next one if there is room for it:
   *naive*: one FIFO queue of ``depth`` entries shared by all clients; *coarse*: one queue of
   ``depth`` entries per client;
2. the sync core reduces at most one tensor and removes its copies: *naive*: only the tensor at
   the head of the FIFO, once all its copies are queued (head-of-line); *coarse*: any tensor of
   which every client's queue holds a copy (all queues synchronised together; the one that
   arrived earliest in client 0's queue).

A step in which nothing is sent and nothing reduced leaves the state unchanged, so no later step
can do anything either: if work remains (tensors unsent or queued), the scheme has *stalled*
(deadlock). The default ``depth`` is the number of tensors: the parameter storage holds a slot
per tensor, so each COARSE client queue never fills and COARSE completes for any orders; the
same number of slots shared in one FIFO stalls as soon as the clients' orders differ enough
(e.g. one client in reverse order).
"""

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["SCHEMES", "SyncRun", "simulate_queues"]

SCHEMES = ("naive", "coarse")


@dataclass(frozen=True)
class SyncRun:
    """The outcome of ``simulate_queues``.

    Attributes
    ----------
    scheme : str
    completed : bool
        Every tensor was reduced.
    steps : int
        Steps simulated (up to and including the last one that did something).
    reduced : tuple
        Tensors in the order they were reduced.
    queued : tuple of tuple
        At a stall, the queue contents as ``(client, tensor)`` entries (naive: the one FIFO from
        its head; coarse: each client's queue in turn); empty when completed.
    pending : tuple of tuple
        At a stall, each client's tensors not yet sent.
    """
    scheme: str
    completed: bool
    steps: int
    reduced: tuple
    queued: tuple = ()
    pending: tuple = ()


def _check(orders, scheme, depth):
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown queue scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
    orders = [list(o) for o in orders]
    if not orders:
        raise ConfigError("need at least one client's tensor order")
    tensors = set(orders[0])
    for c, o in enumerate(orders):
        if len(set(o)) != len(o) or set(o) != tensors:
            raise ConfigError(f"client {c}'s order {o!r} must list each of the tensors "
                              f"{sorted(tensors, key=repr)!r} exactly once")
    depth = len(tensors) if depth is None else depth
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigError(f"queue depth must be a positive integer, not {depth!r}")
    return orders, depth


def simulate_queues(orders, scheme="coarse", depth=None):
    """Run the clients' tensor orders through one proxy's queues (module docstring).

    Parameters
    ----------
    orders : sequence of sequence
        Client ``c``'s tensors (hashable ids) in the order it sends them; every client sends
        the same tensors.
    scheme : str
        "naive" (one shared FIFO, head-of-line) or "coarse" (a queue per client, all
        synchronised together).
    depth : int, optional
        Entries of the FIFO (naive) or of each client's queue (coarse); default the number of
        tensors.

    Returns
    -------
    SyncRun

    Raises
    ------
    ConfigError
        If the scheme is unknown, the orders are empty or do not list the same tensors once
        each, or the depth is not a positive integer.
    """
    orders, depth = _check(orders, scheme, depth)
    clients = len(orders)
    nxt = [0] * clients
    fifo = []                                   # naive: (client, tensor)
    queues = [[] for _ in range(clients)]       # coarse: tensors per client
    reduced, steps = [], 0
    while True:
        moved = False
        for c in range(clients):
            if nxt[c] == len(orders[c]):
                continue
            room = len(fifo) < depth if scheme == "naive" else len(queues[c]) < depth
            if room:
                t = orders[c][nxt[c]]
                nxt[c] += 1
                if scheme == "naive":
                    fifo.append((c, t))
                else:
                    queues[c].append(t)
                moved = True
        done = None
        if scheme == "naive":
            if fifo and sum(t == fifo[0][1] for _, t in fifo) == clients:
                done = fifo[0][1]
                fifo = [e for e in fifo if e[1] != done]
        else:
            done = next((t for t in queues[0] if all(t in q for q in queues[1:])), None)
            if done is not None:
                for q in queues:
                    q.remove(done)
        if done is not None:
            reduced.append(done)
        if not moved and done is None:
            break
        steps += 1
    left = any(n < len(o) for n, o in zip(nxt, orders)) or fifo or any(queues)
    if not left:
        return SyncRun(scheme, True, steps, tuple(reduced))
    queued = tuple(fifo) if scheme == "naive" else tuple((c, t) for c, q in enumerate(queues)
                                                         for t in q)
    return SyncRun(scheme, False, steps, tuple(reduced), queued,
                   tuple(tuple(o[n:]) for n, o in zip(nxt, orders)))
