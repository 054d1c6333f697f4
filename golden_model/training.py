"""Iteration time of data-parallel training: compute, bucketed all-reduce, and their overlap.

One iteration on every node (all nodes are identical, so one node is modelled):

1. Forward pass, layer by layer (compute only): ``F`` seconds, the sum of the layers' forward
   times (``accelerator.Accelerator.layer_times``).
2. Backward pass from the last layer to the first. Layer ``i``'s gradients are ready when its
   backward step ends: ``F + sum of the backward times of layers i .. L-1``.
3. Gradient buckets, as PyTorch's DistributedDataParallel forms them (Li et al., "PyTorch
   Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020, Sec. 3.2.3; its
   ``bucket_cap_mb`` default is 25 MiB): walking the layers from the last to the first, each
   layer's gradients join the open bucket, which closes as soon as it holds at least
   ``bucket_bytes``; a layer is never split, so a bucket may exceed the cap by its last layer, and
   the first layers form the last, possibly smaller, bucket. A bucket is ready when the last layer
   added to it (the lowest-numbered) has finished its backward step. (DDP's smaller first bucket
   of 1 MiB is not modelled.)
4. Buckets are all-reduced in order, one at a time (one communication stream, as NCCL's single
   stream per communicator): bucket ``j`` starts at ``max(ready_j, end_{j-1})`` and takes the
   golden timing model's time for the chosen algorithm and topology on its element count:
   ``timing.simulate(build_schedule(algorithm, topology, elements, params)).cycles`` at the network
   clock.
5. The iteration ends when both the backward pass and the last all-reduce have finished::

       iteration = F + max(B, last all-reduce end - F)

   where ``B`` is the backward time. Compute = ``F + B``; exposed communication =
   ``iteration - compute`` (the communication the backward pass does not hide); communication
   share = exposed communication / iteration; training-time reduction against ring =
   ``1 - iteration / iteration of ring`` (the papers' "training time reduction").

With ``overlap=False`` every bucket is ready only when the whole backward pass has finished, i.e.
``iteration = F + B + sum of the all-reduce times``: the accounting of the MultiTree authors'
simulator (``farabimahmud/accelerator``, ``src/simulate.py``: training cycles, then all-reduce
cycles), kept for comparison with the paper.

Steps 1-2 (``compute_profile``, ``ComputeProfile.ready``) and step 5 (``iteration_seconds``) are
functions of their own so that other communication models reuse them with their own timelines
(``golden_model.coarse.dual``: two streams, GPU ring and memory-device proxies).

Ignored: the optimiser's weight update after the all-reduce, the next iteration's forward pass
starting on layers whose parameters are already reduced, and everything the accelerator model
ignores (see ``accelerator``).

Caching: an all-reduce's time depends only on (algorithm, topology spec, link bandwidth and
latency, timing parameters, element count), so ``allreduce_cycles`` keeps every result for the
life of the process (``functools.lru_cache``); schedules themselves are not kept. Models share
bucket sizes rarely, but every algorithm, mini-batch and overlap setting of one model on one
topology reuses its buckets' times.
"""

import functools
import numbers
from dataclasses import dataclass, field

import numpy as np

from .accelerator import Accelerator, check_mini_batch
from .algorithms import ALGORITHMS, build_schedule, timed_cycles
from .errors import ConfigError
from .timing import TimingParams
from .topology import parse_topology

__all__ = ["DEFAULT_BUCKET_BYTES", "Bucket", "TrainingOptions", "ComputeProfile", "make_buckets",
           "allreduce_cycles", "allreduce_timeline", "cached_topology", "compute_profile",
           "iteration_seconds", "train"]

DEFAULT_BUCKET_BYTES = 25 << 20     # PyTorch DDP's bucket_cap_mb = 25


@dataclass(frozen=True)
class Bucket:
    """Gradients all-reduced together.

    Attributes
    ----------
    elements : int
        Gradient elements (parameters) in the bucket.
    layers : tuple of int
        Indices of the model's layers in it, in the order they joined (descending).
    """
    elements: int
    layers: tuple

    @property
    def ready_layer(self):
        """The layer whose backward step completes the bucket (the lowest index)."""
        return self.layers[-1]


def _check_bucket_bytes(bucket_bytes, element_bytes):
    if (isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, numbers.Integral)
            or bucket_bytes < element_bytes):
        raise ConfigError(f"bucket size must be a whole number of bytes of at least one "
                          f"{element_bytes}-byte element, not {bucket_bytes!r}")


def make_buckets(model, bucket_bytes=DEFAULT_BUCKET_BYTES, element_bytes=4):
    """Group ``model``'s gradients into buckets (step 3 of the module docstring).

    Parameters
    ----------
    model : workloads.Model
    bucket_bytes : int
        Bucket cap in bytes (default 25 MiB).
    element_bytes : int
        Bytes per gradient element (default 4, float32).

    Returns
    -------
    tuple of Bucket
        In all-reduce order (the last layers' bucket first); layers without parameters belong to
        no bucket.

    Raises
    ------
    ConfigError
        If ``bucket_bytes`` is not a whole number of at least ``element_bytes``.
    """
    _check_bucket_bytes(bucket_bytes, element_bytes)
    buckets, open_layers, size = [], [], 0
    for i in range(len(model.layers) - 1, -1, -1):
        p = model.layers[i].params
        if p == 0:
            continue
        open_layers.append(i)
        size += p
        if size * element_bytes >= bucket_bytes:
            buckets.append(Bucket(size, tuple(open_layers)))
            open_layers, size = [], 0
    if open_layers:
        buckets.append(Bucket(size, tuple(open_layers)))
    return tuple(buckets)


@functools.lru_cache(maxsize=None)
def cached_topology(spec, link_bandwidth, link_latency):
    """``parse_topology(spec, link_bandwidth, link_latency)``, parsed once per process.

    Raises
    ------
    ConfigError
        As ``parse_topology``.
    """
    return parse_topology(spec, link_bandwidth=link_bandwidth, link_latency=link_latency)


@functools.lru_cache(maxsize=None)
def _cached_cycles(algorithm, spec, link_bandwidth, link_latency, params, elements):
    topo = cached_topology(spec, link_bandwidth, link_latency)
    return timed_cycles(build_schedule(algorithm, topo, elements, params), params)


def _uniform_links(topology):
    """(bandwidth, latency) shared by every link, or None when they differ."""
    values = {(bw, lat) for _, _, bw, lat in _edges(topology)}
    return values.pop() if len(values) == 1 else None


def _edges(topology):
    g = topology.graph
    return ((u, v, g.edges[u, v]["bandwidth"], g.edges[u, v]["latency"]) for u, v in g.edges)


def allreduce_cycles(algorithm, topology, elements, params=TimingParams()):
    """Network cycles of one all-reduce of ``elements`` elements per node.

    ``timing.simulate(build_schedule(algorithm, topology, elements, params), params).cycles``, cached on
    (algorithm, topology spec, link bandwidth and latency, params, elements) when every link of
    the topology has the same bandwidth and latency (the topologies ``parse_topology`` builds);
    computed afresh otherwise.

    Raises
    ------
    ConfigError
        If the algorithm is unknown or cannot run on the topology, or the element count is bad.
    """
    links = _uniform_links(topology)
    if links is None:
        return timed_cycles(build_schedule(algorithm, topology, elements, params), params)
    return _cached_cycles(algorithm, topology.spec, links[0], links[1], params, elements)


def allreduce_timeline(ready, durations):
    """Start and end times of buckets all-reduced one at a time in order.

    Parameters
    ----------
    ready, durations : sequence of float
        Each bucket's ready time and all-reduce time (any one unit).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Starts and ends: ``start_j = max(ready_j, end_{j-1})``, ``end_j = start_j + duration_j``.
    """
    starts, ends, free = [], [], -np.inf
    for r, d in zip(ready, durations):
        s = max(r, free)
        free = s + d
        starts.append(s)
        ends.append(free)
    return np.array(starts, dtype=float), np.array(ends, dtype=float)


@dataclass(frozen=True)
class TrainingOptions:
    """Settings of one training-time evaluation.

    Parameters
    ----------
    mini_batch : int or None
        Samples per node per iteration (None: the model's default, 256).
    bucket_bytes : int
        Gradient bucket cap in bytes (default 25 MiB, PyTorch DDP's).
    overlap : bool
        Overlap each bucket's all-reduce with the remaining backward pass (default); False
        all-reduces after the whole backward pass (the MultiTree authors' simulator).
    accelerator : Accelerator
        The node's compute model (default: the papers' 16 vaults of 32x32 at 1 GHz).
    timing : TimingParams
        Network clock, flit and element size for the timing model.
    """
    mini_batch: int | None = None
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    overlap: bool = True
    accelerator: Accelerator = field(default_factory=Accelerator)
    timing: TimingParams = field(default_factory=TimingParams)


@dataclass(frozen=True)
class ComputeProfile:
    """One node's compute in one iteration (steps 1 and 2 of the module docstring), in seconds.

    The hook other communication models (``golden_model.coarse``) share with ``train``: they
    supply their own communication timeline and use ``ready`` and ``iteration_seconds``.

    Attributes
    ----------
    forward, backward : float
        Seconds of the forward and of the backward pass (F and B).
    layer_done : numpy.ndarray of float
        Seconds from the start of the iteration at which each layer's backward step ends.
    mini_batch, samples_per_vault : int
    """
    forward: float
    backward: float
    layer_done: np.ndarray
    mini_batch: int
    samples_per_vault: int

    def ready(self, layer, overlap=True):
        """Seconds at which ``layer``'s gradients can be communicated: the end of its backward
        step, or the end of the backward pass when ``overlap`` is False."""
        return float(self.layer_done[layer]) if overlap else self.forward + self.backward


def compute_profile(model, options=TrainingOptions()):
    """The ``ComputeProfile`` of ``model`` with ``options``' accelerator and mini-batch.

    Raises
    ------
    ConfigError
        If the mini-batch is not a whole number from 1 to ``MAX_MINI_BATCH``.
    """
    mini_batch = check_mini_batch(model.default_mini_batch if options.mini_batch is None
                                  else options.mini_batch)
    times = options.accelerator.layer_times(model, mini_batch)
    fwd = float(times.forward.sum())
    # End of layer i's backward step, from the start of the iteration.
    done = fwd + np.cumsum(times.backward[::-1])[::-1]
    return ComputeProfile(fwd, float(times.backward.sum()), done, mini_batch,
                          times.samples_per_vault)


def iteration_seconds(profile, ends):
    """Step 5 of the module docstring: ``F + max(B, last communication end - F)`` seconds
    (``F + B`` when ``ends`` is empty)."""
    last = max((float(e) for e in ends), default=-np.inf)
    return profile.forward + max(profile.backward, last - profile.forward)


def _ms(seconds):
    return float(seconds) * 1e3


def train(model, topology, algorithms=None, options=TrainingOptions(), on_skip=None):
    """Iteration time of ``model`` on ``topology`` for each all-reduce algorithm.

    Parameters
    ----------
    model : workloads.Model
    topology : Topology
    algorithms : list of str, optional
        Names from ``ALGORITHMS``. When omitted every algorithm is tried and those that cannot
        run on the topology are skipped (``on_skip(name, reason)`` is told); when given, such an
        algorithm raises. Ring is always evaluated as the reference.
    options : TrainingOptions

    Returns
    -------
    dict
        ``{"model", "title", "topology", "nodes", "parameters", "gradient_bytes", "mini_batch",
        "samples_per_vault", "bucket_bytes", "overlap", "forward_ms", "backward_ms",
        "compute_ms", "timing" (and "message_size": ``TimingParams.describe``), "buckets": [{"elements", "bytes", "first_layer", "last_layer",
        "ready_ms"}], "results": [{"algorithm", "iteration_ms", "compute_ms", "exposed_comm_ms",
        "comm_ms", "comm_share", "reduction_vs_ring", "comm_speedup_vs_ring",
        "allreduce": [{"start_ms", "end_ms"}]}], "skipped": [{"algorithm", "reason"}]}``.
        Times in milliseconds from the start of the forward pass; shares and reductions are
        fractions (0.25 = 25%).

    Raises
    ------
    ConfigError
        On a bad mini-batch or bucket size, an unknown algorithm, or a named algorithm that
        cannot run on the topology.
    """
    profile = compute_profile(model, options)
    element_bytes = options.timing.element_bytes
    buckets = make_buckets(model, options.bucket_bytes, element_bytes)
    fwd, bwd = profile.forward, profile.backward
    ready = np.array([profile.ready(b.ready_layer, options.overlap) for b in buckets])
    freq = options.timing.frequency_ghz * 1e9

    explicit = algorithms is not None
    names = list(algorithms) if explicit else list(ALGORITHMS)
    for name in names:
        if name not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {name!r}: expected one of "
                              f"{', '.join(ALGORITHMS)}")
    evaluated, skipped = {}, []
    for name in dict.fromkeys(["ring", *names]):
        try:
            cycles = [allreduce_cycles(name, topology, b.elements, options.timing)
                      for b in buckets]
        except ConfigError as exc:
            if explicit and name in names:
                raise
            skipped.append({"algorithm": name, "reason": str(exc)})
            if on_skip:
                on_skip(name, str(exc))
            continue
        durations = np.array(cycles, dtype=float) / freq
        starts, ends = allreduce_timeline(ready, durations)
        iteration = iteration_seconds(profile, ends)
        evaluated[name] = (iteration, float(durations.sum()), starts, ends)

    ring_iter, ring_comm = evaluated["ring"][:2]
    compute = fwd + bwd
    results = []
    for name in names:
        if name not in evaluated:
            continue
        iteration, comm, starts, ends = evaluated[name]
        exposed = iteration - compute
        results.append({
            "algorithm": name, "iteration_ms": _ms(iteration), "compute_ms": _ms(compute),
            "exposed_comm_ms": _ms(exposed), "comm_ms": _ms(comm),
            "comm_share": exposed / iteration if iteration else 0.0,
            "reduction_vs_ring": 1 - iteration / ring_iter if ring_iter else 0.0,
            "comm_speedup_vs_ring": ring_comm / comm if comm else 1.0,
            "allreduce": [{"start_ms": _ms(s), "end_ms": _ms(e)} for s, e in zip(starts, ends)],
        })
    layers = model.layers
    return {
        "model": model.name, "title": model.title, "topology": topology.spec,
        "nodes": topology.num_nodes, "parameters": model.params,
        "gradient_bytes": model.params * element_bytes, "mini_batch": profile.mini_batch,
        "samples_per_vault": profile.samples_per_vault, "bucket_bytes": options.bucket_bytes,
        "overlap": options.overlap, "forward_ms": _ms(fwd), "backward_ms": _ms(bwd),
        "compute_ms": _ms(compute), **options.timing.describe(),
        "buckets": [{"elements": b.elements, "bytes": b.elements * element_bytes,
                     "first_layer": layers[b.layers[0]].name,
                     "last_layer": layers[b.ready_layer].name, "ready_ms": _ms(r)}
                    for b, r in zip(buckets, ready)],
        "results": results, "skipped": skipped,
    }
