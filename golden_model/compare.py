"""Compare all-reduce algorithms on one topology and size with the timing model.

The figures follow NCCL's performance notes: algbw = size / time, busbw = algbw * 2(N-1)/N for
all-reduce; GB/s is 10^9 bytes per second.
"""

import math
from dataclasses import dataclass

from .algorithms import ALGORITHMS, MAX_ELEMENTS, build_schedule, timed_cycles
from .errors import ConfigError
from .timing import TimingParams, lower_bound
from .units import format_size


@dataclass(frozen=True)
class AlgorithmResult:
    """Timing of one algorithm. ``cycles`` of the network clock; ``time_us`` microseconds."""
    algorithm: str
    steps: int
    cycles: int
    time_us: float
    algbw_GBps: float | None
    busbw_GBps: float | None
    speedup_vs_ring: float | None
    ratio_to_lower_bound: float | None
    ratio_to_tight_bound: float | None = None
    ratio_to_rsag_bound: float | None = None
    tree_steps: int | None = None
    sub_chunks: int | None = None


def elements_for(size_bytes, params):
    """Element count of a ``size_bytes`` vector; ``ConfigError`` unless it is a positive whole
    number of ``params.element_bytes``-byte elements, at most ``MAX_ELEMENTS``."""
    eb = params.element_bytes
    if size_bytes <= 0 or size_bytes % eb:
        raise ConfigError(f"size {format_size(size_bytes)} is not a whole number of {eb}-byte "
                          f"elements: give a positive multiple of {eb} bytes")
    if size_bytes // eb > MAX_ELEMENTS:
        raise ConfigError(f"size {format_size(size_bytes)} is too large: at most "
                          f"{format_size(MAX_ELEMENTS * eb)} (2^40 elements of {eb} bytes)")
    return size_bytes // eb


def bandwidths(size_bytes, cycles, num_nodes, params):
    """(time_us, algbw_GBps, busbw_GBps) of moving ``size_bytes`` in ``cycles``; the bandwidths
    are None when no time passes (one node: nothing to communicate)."""
    seconds = cycles / (params.frequency_ghz * 1e9)
    if seconds == 0:
        return 0.0, None, None
    algbw = size_bytes / seconds / 1e9
    return seconds * 1e6, algbw, algbw * 2 * (num_nodes - 1) / num_nodes


def compare(topology, size_bytes, algorithms=None, params=TimingParams(), on_skip=None,
            also=()):
    """Build and time each algorithm on ``topology`` for a ``size_bytes`` vector per node.

    Parameters
    ----------
    topology : Topology
    size_bytes : int
        Bytes per node vector (a whole number of ``params.element_bytes`` elements).
    algorithms : list of str, optional
        Names from ``ALGORITHMS``. When omitted, every algorithm is tried and those that cannot
        run on the topology are skipped (``on_skip(name, reason)`` is told); when given, such an
        algorithm raises.
    params : TimingParams
    also : sequence
        Schedules timed besides ``algorithms`` (an MSCCL-IR ``ScheduleFile``; one that cannot
        run raises); their result's ``algorithm`` is the file's path.

    Returns
    -------
    dict
        ``{"topology", "nodes", "size_bytes", "timing", "lower_bound_cycles", "lower_bound",
        "results": [AlgorithmResult as dict, ...], "skipped": [{"algorithm", "reason"}]}``;
        ``timing`` is ``params.preset`` (``"authors"``, with ``message_size``: its bytes per
        message, 0 for whole chunks) or else ``params.link_order``; ``lower_bound`` holds every bound of
        ``timing.lower_bound`` (``injection_cycles``, ``cut_cycles``, ``latency_cycles``,
        ``tight_cycles``, ``rsag_cycles``) and which one binds; each result has its ratio to
        ``cycles``, to ``tight_cycles`` and to ``rsag_cycles`` (the per-node figure the
        MultiTree and TACOS papers state ratios against).
        Ring is always timed as the reference for ``speedup_vs_ring``. With one node nothing is
        communicated: cycles are 0 and the bandwidths and ratios are None (JSON null).
        ``lower_bound_cycles`` is the bound rounded up (a time in whole cycles cannot be less).

    Raises
    ------
    ConfigError
        On a bad size, an unknown algorithm, or a named algorithm that cannot run here.
    """
    num_elements = elements_for(size_bytes, params)
    explicit = algorithms is not None
    names = (list(algorithms) if explicit else list(ALGORITHMS))
    names += [a for a in also if str(a) not in map(str, names)]
    bound = lower_bound(topology, size_bytes, params)
    timed, skipped = {}, []
    for name in dict.fromkeys(["ring", *names]):
        try:
            sched = build_schedule(name, topology, num_elements, params)
        except ConfigError as exc:
            if explicit and name in names or name in also:
                raise
            skipped.append({"algorithm": name, "reason": str(exc)})
            if on_skip:
                on_skip(name, str(exc))
            continue
        timed[name] = (sched, timed_cycles(sched, params))
    ring_cycles = timed["ring"][1]
    results = []
    for name in names:
        if name not in timed:
            continue
        sched, cycles = timed[name]
        time_us, algbw, busbw = bandwidths(size_bytes, cycles, topology.num_nodes, params)
        results.append(AlgorithmResult(
            algorithm=str(name), steps=len(sched.active_steps), cycles=int(cycles), time_us=time_us,
            algbw_GBps=algbw, busbw_GBps=busbw,
            speedup_vs_ring=ring_cycles / cycles if cycles else None,
            ratio_to_lower_bound=cycles / bound.cycles if bound.cycles else None,
            ratio_to_tight_bound=cycles / bound.tight_cycles if bound.tight_cycles else None,
            ratio_to_rsag_bound=cycles / bound.rsag_cycles if bound.rsag_cycles else None,
            tree_steps=sched.meta.get("tree_steps"),
            sub_chunks=sched.meta.get("sub_chunks")).__dict__)
    return {"topology": topology.spec, "nodes": topology.num_nodes, "size_bytes": size_bytes,
            **params.describe(), "lower_bound_cycles": math.ceil(bound.cycles),
            "lower_bound": {"binding": bound.binding, "injection_cycles": bound.injection_cycles,
                            "cut_cycles": bound.cut_cycles, "latency_cycles": bound.latency_cycles,
                            "tight_cycles": bound.tight_cycles, "rsag_cycles": bound.rsag_cycles},
            "results": results, "skipped": skipped}
