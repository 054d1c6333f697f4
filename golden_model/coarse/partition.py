"""Tensor partitioning: shard size, shard count, and each shard's path, device and ring direction.

Rules (references.md, COARSE section; line numbers of that file):

* A copy of ``s`` bytes over a path of ``bw`` GB/s and one-way latency ``L`` cycles takes
  ``copy_cycles = L + hold_cycles(s, bw)`` cycles (``golden_model.timing.hold_cycles``: whole
  flits at the network clock). A path carries one copy at a time per direction (a DMA engine
  that waits for each copy's completion), so it delivers ``s / copy time`` of its bandwidth.
* Shard size (line 72-73, "no smaller than the smallest shard that saturates the link"): the
  smallest whole number of 64-byte lines ``s`` with ``hold / (L + hold) >= SATURATION`` (0.9,
  our choice of "saturates") on every path a partitioned tensor uses, i.e.
  ``s >= SATURATION / (1 - SATURATION) * L * bw / f`` bytes for latency ``L`` cycles at ``f``
  GHz, the largest over the local and (when M > 1) the remote path.
* Shards are equal (``schedule.chunk_bounds``: sizes differ by at most one element) and as many
  as fit: ``S = max(1, elements // ceil(shard_bytes / element_bytes))``, so none is smaller than
  the shard size (line 72), but at most ``MAX_SHARDS`` per tensor (larger shards are still "no
  smaller than" the saturating size; only a path of a few MB/s makes shards that small, and
  millions of them would only slow the model down; at the defaults the largest workload tensor,
  VGG-16's fc6, has 1,427 shards).
* Paths in proportion to their bandwidth (line 69-72; the brief's "assigned to devices and links
  in proportion to their bandwidth"): shard ``k`` goes over the local path when
  ``floor((k+1) l / (l+r)) > floor(k l / (l+r))`` (l, r the local and remote bandwidths), else
  over the remote path, so the first ``k`` shards split ``k l / (l+r)`` : ``k r / (l+r)`` to
  within one shard and the two kinds interleave. With M = 1 there is no remote device and every
  shard is local.
* Devices: a local shard goes to the client's local device; the j-th remote shard of a tensor to
  device ``local + 1 + (j mod (M-1))`` (mod M), so remote traffic is spread over every other
  device. Every client applies the same offsets, so each device receives one group's copies of
  a shard.
* Ring direction (line 66-68): shard ``k`` is reduced by a group of sync cores (one per device)
  forming a ring; groups alternate direction, clockwise (+1) for even group numbers and
  counter-clockwise (-1) for odd, so neighbouring groups use opposite link directions.
"""

import math
from dataclasses import dataclass
from fractions import Fraction

from ..schedule import chunk_bounds
from ..timing import TimingParams, hold_cycles
from .lines import LINE_BYTES

__all__ = ["SATURATION", "MAX_SHARDS", "Shard", "copy_cycles", "saturating_bytes", "shard_bytes",
           "shard_count", "path_of", "partition"]

SATURATION = Fraction(9, 10)
#: Most shards one tensor is cut into (module docstring).
MAX_SHARDS = 4096


def _exact(x):
    return Fraction(x) if isinstance(x, int) else Fraction(repr(float(x)))


@dataclass(frozen=True)
class Shard:
    """One piece of a tensor on its way through the proxies.

    Attributes
    ----------
    start, stop : int
        Element range within the tensor.
    path : str
        "local" or "remote": the worker's path it travels.
    device : int
        Memory device whose proxy receives it.
    direction : int
        +1 (clockwise: device i sends to i+1) or -1: the ring direction of its sync-core group.
    """
    start: int
    stop: int
    path: str
    device: int
    direction: int

    @property
    def elements(self):
        return self.stop - self.start


def copy_cycles(num_bytes, bandwidth_GBps, latency_cycles, params=TimingParams()):
    """Cycles of one copy of ``num_bytes`` over a path: ``latency + hold_cycles(num_bytes)``."""
    return int(latency_cycles) + hold_cycles(num_bytes, bandwidth_GBps, params)


def saturating_bytes(bandwidth_GBps, latency_cycles, params=TimingParams()):
    """Smallest whole number of 64-byte lines, in bytes, that a path of ``bandwidth_GBps`` and
    ``latency_cycles`` moves at ``SATURATION`` of its bandwidth (module docstring); one line when
    the latency is 0."""
    need = (SATURATION / (1 - SATURATION) * latency_cycles * _exact(bandwidth_GBps)
            / _exact(params.frequency_ghz))
    return max(1, math.ceil(need / LINE_BYTES)) * LINE_BYTES


def shard_bytes(config, params=TimingParams()):
    """The shard size of ``config``: the largest saturating size of the paths partitioned
    tensors use (the local path, and the remote path when M > 1)."""
    paths = ("local", "remote") if config.devices > 1 else ("local",)
    return max(saturating_bytes(config.path(p)[0], config.latency_cycles(p, params.frequency_ghz),
                                params) for p in paths)


def shard_count(elements, element_bytes, size_bytes):
    """Equal shards of at least ``size_bytes`` each: ``max(1, elements // ceil(size/eb))``, at
    most ``MAX_SHARDS``."""
    return min(MAX_SHARDS, max(1, elements // -(-size_bytes // element_bytes)))


def path_of(k, config):
    """"local" or "remote": the path of shard ``k`` (the proportional interleave of the module
    docstring)."""
    if config.devices == 1:
        return "local"
    share = _exact(config.local_GBps) / (_exact(config.local_GBps) + _exact(config.remote_GBps))
    return "local" if math.floor((k + 1) * share) > math.floor(k * share) else "remote"


def partition(elements, config, worker=0, first_group=0, params=TimingParams()):
    """Cut a tensor of ``elements`` into shards for ``worker`` (module docstring).

    Parameters
    ----------
    elements : int
        Elements of the tensor.
    config : CoarseConfig
    worker : int
        The client; fixes the local device the offsets are taken from.
    first_group : int
        Sync-core group number of the first shard (groups alternate ring direction).
    params : TimingParams
        Clock and element size.

    Returns
    -------
    tuple of Shard
    """
    n = shard_count(elements, params.element_bytes, shard_bytes(config, params))
    bounds = chunk_bounds(elements, n)
    home = config.local_device(worker)
    shards, remote = [], 0
    for k in range(n):
        path = path_of(k, config)
        if path == "local":
            device = home
        else:
            device = (home + 1 + remote % (config.devices - 1)) % config.devices
            remote += 1
        shards.append(Shard(int(bounds[k]), int(bounds[k + 1]), path, device,
                            1 if (first_group + k) % 2 == 0 else -1))
    return tuple(shards)
