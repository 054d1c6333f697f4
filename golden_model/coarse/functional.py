"""Functional model: the gradients every worker holds after a COARSE synchronisation.

The three tiers of references.md (COARSE section, line 63-68), for each tensor and shard of the
clients' routing tables:

1. *Clients push*: client ``w`` writes its copy of the shard into its own queue at the proxy on
   the shard's device (one queue per client at each proxy, line 77-78).
2. *Near-memory reduction*: the device's sync core adds the copies in its queues in client
   order (``((g_a + g_b) + g_c) + ...``, each add the gradients' element type's golden add,
   ``golden_model.elements``, canonical NaN included; a device that received no copy
   contributes +0). Then the sync cores of the M devices all-reduce these
   partial sums around their ring in the shard's direction: the golden model's ring all-reduce
   (``algorithms.ring`` on ``ring:M``, run by ``executor.execute``), clockwise over devices
   ``0, 1, .., M-1`` or counter-clockwise over ``0, M-1, .., 1`` (``device_ring_schedule``:
   the ring schedule with its positions played by the devices in that order and its chunks cut
   at whole 64-byte lines, the schedule the hardware's device NIs run). So the ring of the
   executor fixes the summation order: chunk ``c`` of the shard (lines
   ``schedule.chunk_bounds(L, M)`` of its L lines) is ``P[c+M-1] + (... + (P[c+1] + P[c]))``
   over ring positions mod M. The result is kept in the
   device's *parameter storage*.
3. *Clients pull*: each client's proxy caches the reduced shard (its *parameter cache*) and the
   client reads it from there into its gradient buffer.

Tensors synchronised directly between GPUs (the first m layers of dual synchronisation) are
all-reduced by the ring schedule on ``ring:W`` through ``executor.execute``.

Every worker ends with the same bits: each shard is reduced once, on the devices, and copied.
int32 adds wrap around (as the executor's and the hardware's).
"""

import functools
from dataclasses import dataclass

import numpy as np

from ..algorithms import build_schedule
from ..errors import ConfigError
from ..elements import element_type_of
from ..executor import execute
from ..schedule import chunk_bounds
from ..training import cached_topology
from .lines import LINE_BYTES

__all__ = ["SyncResult", "synchronise", "ring_order", "group_sum", "device_ring_schedule",
           "line_elements"]


@functools.lru_cache(maxsize=256)
def _ring_schedule(nodes, elements):
    return build_schedule("ring", cached_topology(f"ring:{nodes}", 16.0, 0), elements)


def group_sum(copies, elements, dtype):
    """A device's sum of its group's copies of a shard, step 2 before the ring: the first copy
    as it is, then each later one added with the element type's golden add, in order; ``+0``
    everywhere when there is no copy.

    Parameters
    ----------
    copies : (k, elements) array of ``dtype``
        The copies in client order (k may be 0).
    elements : int
    dtype : numpy dtype of an ``ElementType`` (``golden_model.elements``)

    Returns
    -------
    numpy.ndarray of shape ``(elements,)``
    """
    copies = np.asarray(copies, dtype=dtype).reshape(-1, elements)
    if not len(copies):
        return np.zeros(elements, dtype=dtype)
    etype = element_type_of(copies)
    acc = copies[0].copy()
    for row in copies[1:]:
        etype.add(acc, row)
    return acc


def ring_order(devices, direction):
    """Device ids in ring order: ``0, 1, .., M-1`` for +1, ``0, M-1, .., 1`` for -1."""
    return list(range(devices)) if direction > 0 else [0, *range(devices - 1, 0, -1)]


def line_elements(dtype):
    """Elements of ``dtype`` in a 64-byte line (``lines.LINE_BYTES``): 16 int32 or float32, 32
    bfloat16, 8 float64."""
    return LINE_BYTES // np.dtype(dtype).itemsize


@functools.lru_cache(maxsize=256)
def device_ring_schedule(devices, elements, direction, per_line):
    """The device ring's all-reduce of a shard of ``elements`` elements: the ring schedule of
    ``ring:devices`` with ring position ``p`` played by device ``ring_order(devices,
    direction)[p]`` (``AllReduceSchedule.relabeled``), so that device ``v`` starts from its own
    partial sums and the counter-clockwise ring runs over the links of the other direction.
    The ring's M chunks are cut at whole lines of ``per_line`` elements
    (``AllReduceSchedule.rechunked``): chunk ``c`` is lines ``chunk_bounds(L, M)[c] ..
    [c+1]`` of the shard's ``L = ceil(elements / per_line)`` lines (the last line may be
    partial), because the sync cores move whole lines; a shard of fewer lines than devices has
    empty chunks. The same schedule drives the devices' NIs in hardware."""
    lines = -(-elements // per_line)
    bounds = np.minimum(chunk_bounds(lines, devices) * per_line, elements)
    return _ring_schedule(devices, elements).rechunked(bounds).relabeled(
        ring_order(devices, direction))


@dataclass
class SyncResult:
    """What a synchronisation leaves behind.

    Attributes
    ----------
    gradients : dict
        ``{layer: (W, n) array}``: every worker's reduced gradients.
    storage : list of dict
        Per device, its parameter storage: ``{(layer, shard start): reduced values}``.
    caches : list of dict
        Per worker, its proxies' parameter cache: ``{(layer, shard start): values}``.
    """
    gradients: dict
    storage: list
    caches: list


def _check(config, tables, gradients, direct):
    if len(tables) != config.workers:
        raise ConfigError(f"need one routing table per worker ({config.workers}), "
                          f"not {len(tables)}")
    layers = [r.layer for r in tables[0]]
    for table in tables:
        if [r.layer for r in table] != layers:
            raise ConfigError("every worker's routing table must list the same tensors")
    missing = (set(layers) | set(direct)) - set(gradients)
    if missing:
        raise ConfigError(f"no gradients for layers {sorted(missing)}")
    sizes = {r.layer: r.elements for r in tables[0]}
    for layer, g in gradients.items():
        g = np.asarray(g)
        try:
            element_type_of(g)
        except ConfigError as exc:
            raise ConfigError(f"layer {layer}: {exc}") from None
        want = (config.workers, sizes[layer] if layer in sizes else g.shape[-1] if g.ndim else 0)
        if g.ndim != 2 or g.shape != want:
            raise ConfigError(f"layer {layer}: gradients of shape {g.shape}, expected {want}")


def synchronise(config, tables, gradients, direct=()):
    """Synchronise ``gradients`` through the proxies (and ``direct`` layers GPU to GPU).

    Parameters
    ----------
    config : CoarseConfig
    tables : sequence of tuple of routing.Route
        Each worker's routing table (``routing.routing_table(config, w, ...)``), same tensors.
    gradients : dict
        ``{layer: (W, n) array}``, row ``w`` worker ``w``'s gradients; int32, float32 or float64.
    direct : iterable of int
        Layers synchronised directly between GPUs; they need not be in the tables.

    Returns
    -------
    SyncResult

    Raises
    ------
    ConfigError
        If the tables do not match the workers or each other, gradients are missing, or have
        the wrong shape or an unsupported dtype.
    """
    direct = set(direct)
    _check(config, tables, gradients, direct)
    w_count, m = config.workers, config.devices
    storage = [{} for _ in range(m)]
    caches = [{} for _ in range(w_count)]
    out = {}
    for layer in direct:
        g = np.asarray(gradients[layer])
        out[layer] = execute(_ring_schedule(w_count, g.shape[1]), g)
    for k, route in enumerate(tables[0]):
        if route.layer in direct:
            continue
        g = np.asarray(gradients[route.layer])
        result = np.empty_like(g)
        for j, shard in enumerate(route.shards):
            lo, hi = shard.start, shard.stop
            devices = [tables[w][k].shards[j].device for w in range(w_count)]
            # 1. each client's copy lands in its own queue at the shard's device
            queues = [[w for w in range(w_count) if devices[w] == v] for v in range(m)]
            # 2. sync cores: sum the queues in client order, then the ring across devices
            partial = np.stack([group_sum(g[clients, lo:hi], hi - lo, g.dtype)
                                for clients in queues])
            reduced = execute(device_ring_schedule(m, hi - lo, shard.direction,
                                                   line_elements(g.dtype)), partial)
            for v in range(m):
                storage[v][(route.layer, lo)] = reduced[v]
            # 3. each client's proxy caches the shard; the client reads it from the cache
            for w in range(w_count):
                caches[w][(route.layer, lo)] = storage[devices[w]][(route.layer, lo)].copy()
                result[w, lo:hi] = caches[w][(route.layer, lo)]
        out[route.layer] = result
    return SyncResult(out, storage, caches)
