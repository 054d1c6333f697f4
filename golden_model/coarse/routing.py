"""Tensor routing: the profiling pass and each client's routing table.

references.md, COARSE section, line 69-71: "a profiling pass builds a routing table per client;
small tensors (under about 2 MB) are latency-bound and go to a latency proxy, large ones to a
bandwidth proxy". Here:

* The profiling pass times, for client ``w``, one copy of ``PROBE_BYTES`` (one 64-byte line) and
  one of ``threshold_bytes`` to the proxy on every device over the path that reaches it (the
  local path for ``w``'s local device, the remote path for the others), with the copy model of
  ``partition.copy_cycles``. The *latency proxy* is the device with the fastest small copy
  (ties: the local device, then the nearest by ring distance); each path's measured bandwidth
  is ``(threshold - probe) / (t_large - t_small)`` bytes per cycle.
* Routing table: for each of the client's tensors, in the order it issues them (the backward
  pass: last layer first), a ``Route``. A tensor of fewer than ``threshold_bytes`` bytes goes
  whole to the latency proxy (one shard, one sync-core group); a larger one goes to the
  bandwidth proxies: it is partitioned (``partition.partition``) over both paths in proportion
  to their bandwidth and over the devices.
* A tensor is one layer's gradients (the workloads' layer tables keep a layer's weight and bias
  together).
"""

from dataclasses import dataclass

from ..timing import TimingParams
from .partition import Shard, copy_cycles, partition

__all__ = ["PROBE_BYTES", "Probe", "ClientProfile", "Route", "profile_client", "model_tensors",
           "routing_table"]

PROBE_BYTES = 64


@dataclass(frozen=True)
class Probe:
    """The profiling pass's measurement of one device from one client.

    Attributes
    ----------
    device : int
    path : str
        "local" or "remote".
    small_cycles, large_cycles : int
        Cycles of a copy of ``PROBE_BYTES`` and of ``threshold_bytes``.
    """
    device: int
    path: str
    small_cycles: int
    large_cycles: int


@dataclass(frozen=True)
class ClientProfile:
    """A client's profiling result.

    Attributes
    ----------
    worker : int
    probes : tuple of Probe
        One per device, in device order.
    latency_device : int
        The latency proxy's device.
    bandwidth_GBps : dict
        ``{path: measured GB/s}`` for each path probed.
    """
    worker: int
    probes: tuple
    latency_device: int
    bandwidth_GBps: dict

    @property
    def latency_path(self):
        return self.probes[self.latency_device].path


@dataclass(frozen=True)
class Route:
    """One entry of a client's routing table.

    Attributes
    ----------
    layer : int
        Index of the tensor's layer in the model.
    name : str
    elements : int
    proxy : str
        "latency" or "bandwidth".
    shards : tuple of Shard
    """
    layer: int
    name: str
    elements: int
    proxy: str
    shards: tuple

    def count(self, path):
        """Shards travelling over ``path``."""
        return sum(s.path == path for s in self.shards)


def profile_client(config, worker, params=TimingParams()):
    """The profiling pass for client ``worker`` (module docstring).

    Returns
    -------
    ClientProfile
    """
    f = params.frequency_ghz
    home, m = config.local_device(worker), config.devices
    probes = []
    for device in range(m):
        path = "local" if device == home else "remote"
        bw, lat = config.path(path)[0], config.latency_cycles(path, f)
        probes.append(Probe(device, path, copy_cycles(PROBE_BYTES, bw, lat, params),
                            copy_cycles(config.threshold_bytes, bw, lat, params)))
    best = min(probes, key=lambda p: (p.small_cycles, p.path != "local", (p.device - home) % m))
    measured = {}
    for p in probes:
        span = p.large_cycles - p.small_cycles
        if p.path not in measured and span > 0:
            measured[p.path] = (config.threshold_bytes - PROBE_BYTES) * f / span
    return ClientProfile(worker, tuple(probes), best.device, measured)


def model_tensors(model):
    """``(layer index, name, elements)`` of every layer with parameters, in backward order
    (the order a client issues them)."""
    return [(i, model.layers[i].name, model.layers[i].params)
            for i in range(len(model.layers) - 1, -1, -1) if model.layers[i].params]


def routing_table(config, worker, tensors, params=TimingParams(), profile=None):
    """Client ``worker``'s routing table for ``tensors`` (module docstring).

    Parameters
    ----------
    config : CoarseConfig
    worker : int
    tensors : sequence of (int, str, int)
        ``(layer, name, elements)`` in issue order (``model_tensors``).
    params : TimingParams
    profile : ClientProfile, optional
        The client's profiling result (default: run ``profile_client``).

    Returns
    -------
    tuple of Route
        Sync-core groups are numbered along the table, so consecutive shards alternate ring
        direction.
    """
    profile = profile or profile_client(config, worker, params)
    latency = profile.probes[profile.latency_device]
    routes, group = [], 0
    for layer, name, elements in tensors:
        if elements * params.element_bytes < config.threshold_bytes:
            direction = 1 if group % 2 == 0 else -1
            shards = (Shard(0, elements, latency.path, latency.device, direction),)
            proxy = "latency"
        else:
            shards = partition(elements, config, worker, group, params)
            proxy = "bandwidth"
        routes.append(Route(layer, name, elements, proxy, shards))
        group += len(shards)
    return tuple(routes)
