"""Dual synchronisation: the first m layers between GPUs, the rest through the proxies.

references.md, COARSE section, line 74-76: "the first m layers' tensors (needed first by the next
forward pass) are synchronised directly between GPUs, the rest through the proxies; m minimises
max(T_fwd + T_bwd + T_sync_gpu, T_fwd + T_sync_proxy)".

The iteration reuses ``golden_model.training`` (compute per layer, backward order, buckets,
overlap; ``compute_profile``, ``make_buckets``, ``allreduce_timeline``, ``iteration_seconds``)
with two communication streams that run at the same time over different links:

* the GPU stream: the gradients of layers ``0 .. m-1`` in PyTorch DDP buckets
  (``training.make_buckets`` of those layers), all-reduced one at a time by ring all-reduce
  over the GPU-GPU path as soon as each bucket is ready (``pipeline.gpu_ring_cycles``);
* the proxy stream: every tensor of layers ``m .. L-1`` through the proxy pipeline in the
  client's issue order (backward order), each from the end of its layer's backward step
  (``pipeline.proxy_timeline``).

``iteration(m) = F + max(B, end of the GPU stream - F, end of the proxy stream - F)``
(``training.iteration_seconds``). The paper's formula is the special case where the GPU stream
starts after the backward pass and the proxy stream is never starved of ready gradients. m ranges
over the layer boundaries ``0`` and ``i + 1`` for every layer ``i`` with parameters (other
values give the same split); the smallest m of least iteration time is chosen. With m = L the
GPU stream is exactly MPI ring all-reduce over the same links (``training.train`` on
``pipeline.gpu_topology``), so dual synchronisation is never slower than that baseline.

The proxy stream for m is a prefix of the stream for m = 0 (tensors are issued from the last
layer), and a flow shop's prefix does not depend on what follows it, so the proxy timeline is
computed once.
"""

from dataclasses import dataclass, replace

import numpy as np

from ..training import (TrainingOptions, allreduce_timeline, compute_profile, iteration_seconds,
                        make_buckets)
from .pipeline import gpu_ring_cycles, proxy_timeline
from .routing import model_tensors, profile_client, routing_table

__all__ = ["SyncPlan", "DualSync"]


@dataclass(frozen=True)
class SyncPlan:
    """The iteration for one choice of m. Times in seconds from the start of the forward pass.

    Attributes
    ----------
    m : int
        Layers ``0 .. m-1`` go GPU to GPU.
    iteration : float
    compute : float
        F + B.
    gpu_buckets : tuple of training.Bucket
    gpu_starts, gpu_ends : numpy.ndarray
    proxy_routes : tuple of routing.Route
        The tensors through the proxies, in issue order.
    proxy_starts, proxy_ends : numpy.ndarray
    """
    m: int
    iteration: float
    compute: float
    gpu_buckets: tuple
    gpu_starts: np.ndarray
    gpu_ends: np.ndarray
    proxy_routes: tuple
    proxy_starts: np.ndarray
    proxy_ends: np.ndarray

    @property
    def exposed(self):
        """Communication the backward pass does not hide: ``iteration - compute``."""
        return self.iteration - self.compute

    @property
    def gpu_comm(self):
        """Seconds of GPU ring all-reduce (sum over the buckets)."""
        return float((self.gpu_ends - self.gpu_starts).sum())

    @property
    def proxy_busy(self):
        """Seconds during which at least one tensor is in the proxy pipeline (the length of the
        union of the tensors' [start, end] intervals)."""
        total, reach = 0.0, -np.inf
        for s, e in sorted(zip(self.proxy_starts, self.proxy_ends)):
            if e > reach:
                total += e - max(s, reach)
                reach = e
        return float(total)


class DualSync:
    """Dual synchronisation of ``model`` on a COARSE system (module docstring).

    Parameters
    ----------
    model : workloads.Model
    config : CoarseConfig
    options : training.TrainingOptions
        Mini-batch, bucket cap (GPU stream), overlap, accelerator and timing parameters.

    Raises
    ------
    ConfigError
        On a bad mini-batch or bucket size.

    Attributes
    ----------
    profile : training.ComputeProfile
    client : routing.ClientProfile
        Client 0's profiling result (every client's is the same up to device numbering).
    routes : tuple of routing.Route
        Client 0's routing table, every tensor of the model, in issue order.
    """

    def __init__(self, model, config, options=TrainingOptions()):
        self.model, self.config, self.options = model, config, options
        params = options.timing
        self.profile = compute_profile(model, options)
        make_buckets(model, options.bucket_bytes, params.element_bytes)   # checks the cap
        self.client = profile_client(config, 0, params)
        self.routes = routing_table(config, 0, model_tensors(model), params, self.client)
        self._hz = params.frequency_ghz * 1e9
        ready = [self.profile.ready(r.layer, options.overlap) * self._hz for r in self.routes]
        starts, ends = proxy_timeline(config, self.routes, ready, params)
        self._proxy_starts, self._proxy_ends = starts / self._hz, ends / self._hz

    @property
    def boundaries(self):
        """The values of m that give distinct splits: 0 and ``i + 1`` for each layer ``i`` with
        parameters, increasing."""
        return [0] + [i + 1 for i, layer in enumerate(self.model.layers) if layer.params]

    def at(self, m):
        """The ``SyncPlan`` with layers ``0 .. m-1`` synchronised GPU to GPU."""
        params, overlap = self.options.timing, self.options.overlap
        buckets = make_buckets(replace(self.model, layers=self.model.layers[:m]),
                               self.options.bucket_bytes, params.element_bytes)
        ready = [self.profile.ready(b.ready_layer, overlap) for b in buckets]
        durations = [gpu_ring_cycles(self.config, b.elements, params) / self._hz
                     for b in buckets]
        gpu_starts, gpu_ends = allreduce_timeline(ready, durations)
        k = sum(r.layer >= m for r in self.routes)       # a prefix of the issue order
        proxy_ends = self._proxy_ends[:k]
        iteration = iteration_seconds(self.profile, [*gpu_ends, *proxy_ends])
        return SyncPlan(m, iteration, self.profile.forward + self.profile.backward,
                        tuple(buckets), gpu_starts, gpu_ends, self.routes[:k],
                        self._proxy_starts[:k], proxy_ends)

    def candidates(self):
        """``[(m, iteration seconds)]`` for every boundary m."""
        return [(m, self.at(m).iteration) for m in self.boundaries]

    def best(self):
        """The ``SyncPlan`` of least iteration time (the smallest such m)."""
        m = min(self.candidates(), key=lambda c: (c[1], c[0]))[0]
        return self.at(m)
