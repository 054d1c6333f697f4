"""Timing of COARSE's communication: the proxy pipeline and the GPU-GPU ring, in network cycles.

The proxy stream (references.md, COARSE section, line 63-73). Every client issues its tensors
in routing-table order; a tensor may start when its gradients are ready. Each shard passes three
stages, each a resource that serves shards one at a time in issue order (a flow shop):

1. *push*: the client copies the shard to its proxy over the shard's path, worker -> device
   direction: ``copy_cycles(bytes, bw, L)`` (``partition.copy_cycles``);
2. *sync*: once the copies of every client have arrived (all clients push in parallel over their
   own links, so at the same time), the device's sync core has the group's copies (near-memory
   reduction, assumed to keep up with the links) and the sync cores of the M devices all-reduce
   the shard around their ring: the golden timing model's ring all-reduce
   (``training.allreduce_cycles("ring", ...)`` on ``ring:M`` with the device ring's bandwidth
   and latency). Clockwise and counter-clockwise groups use opposite link directions, so they
   are two resources when M >= 3 (with M <= 2 one ring uses both directions: one resource);
3. *pull*: the client reads the reduced shard back over the same path, device -> worker
   direction (the reverse direction from the push, so pushes and pulls of different shards
   overlap: "pipelined over both link directions", line 72-73).

``start = max(ready, resource free)``, ``end = start + duration`` at each stage, a stage starting
no earlier than the shard's previous stage ended. Every client's links carry the same shard
sizes at the same times, so one client's pipeline is every client's. A tensor's time runs from
its first push to its last pull.

The GPU-GPU stream: ring all-reduce over the W workers, timed by the golden timing model on
``ring:W`` with the GPU-GPU path's bandwidth and latency (``gpu_ring_cycles``).
"""

import numpy as np

from ..timing import TimingParams
from ..training import allreduce_cycles, cached_topology
from .partition import copy_cycles

__all__ = ["device_ring_cycles", "gpu_ring_cycles", "gpu_topology", "proxy_timeline"]


def _ring_topology(config, nodes, kind, params):
    return cached_topology(f"ring:{nodes}", float(config.path(kind)[0]),
                           config.latency_cycles(kind, params.frequency_ghz))


def gpu_topology(config, params=TimingParams()):
    """``ring:W`` with the GPU-GPU path's bandwidth and latency: the network MPI ring
    all-reduce runs on."""
    return _ring_topology(config, config.workers, "gpu", params)


def gpu_ring_cycles(config, elements, params=TimingParams()):
    """Cycles of a ring all-reduce of ``elements`` over the W workers' GPU-GPU path."""
    return allreduce_cycles("ring", gpu_topology(config, params), elements, params)


def device_ring_cycles(config, elements, params=TimingParams()):
    """Cycles of the sync cores' ring all-reduce of a shard of ``elements`` over the M
    devices (0 when M = 1)."""
    return allreduce_cycles("ring", _ring_topology(config, config.devices, "ring", params),
                            elements, params)


def proxy_timeline(config, routes, ready, params=TimingParams()):
    """Start and end cycles of each route (tensor) through the proxy pipeline.

    Parameters
    ----------
    config : CoarseConfig
    routes : sequence of routing.Route
        One client's routes, in issue order.
    ready : sequence of float
        Cycle at which each route's gradients are ready.
    params : TimingParams

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Per route: cycle of its first push and of the end of its last pull.
    """
    f, eb = params.frequency_ghz, params.element_bytes
    link = {p: (config.path(p)[0], config.latency_cycles(p, f)) for p in ("local", "remote")}
    push, pull = {"local": 0, "remote": 0}, {"local": 0, "remote": 0}
    ring = {}
    two_rings = config.devices >= 3
    starts, ends = [], []
    for route, r in zip(routes, ready):
        first, last = None, r
        for s in route.shards:
            bw, lat = link[s.path]
            t = copy_cycles(s.elements * eb, bw, lat, params)
            st = max(r, push[s.path])
            push[s.path] = done = st + t
            first = st if first is None else first
            key = s.direction if two_rings else 0
            done = ring[key] = max(done, ring.get(key, 0)) + device_ring_cycles(
                config, s.elements, params)
            pull[s.path] = done = max(done, pull[s.path]) + t
            last = max(last, done)
        starts.append(r if first is None else first)
        ends.append(last)
    return np.array(starts, dtype=float), np.array(ends, dtype=float)
