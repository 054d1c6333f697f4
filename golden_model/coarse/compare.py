"""System comparison: COARSE against MPI ring all-reduce over the same links, and a sweep over
link asymmetry.

* MPI ring all-reduce: ``training.train`` of the model on ``ring:W`` with the GPU-GPU path's
  bandwidth and latency (``pipeline.gpu_topology``): ring all-reduce over the workers, in PyTorch
  DDP buckets overlapped with the backward pass. It uses neither the memory devices nor the
  worker-device paths.
* COARSE: dual synchronisation with the best m (``dual.DualSync.best``); also reported with
  every tensor through the proxies (m = 0), to show what the proxies alone do.
* Figures: ``speedup = T_mpi / T_coarse``, ``faster = speedup - 1`` ("X% faster training", the
  paper's wording, references.md line 61), ``time_reduction = 1 - T_coarse / T_mpi``.
* Sweep over link asymmetry: the remote path's bandwidth set to ``ratio x`` the local path's
  (the local path, the GPU-GPU path and everything else as configured; the device ring follows
  the remote path unless its bandwidth is set). The paper reports COARSE slightly slower than
  MPI all-reduce on one of its platforms; in this model the proxies alone lose where the remote
  path is slow or the tensors are latency-bound, and dual synchronisation then falls back to the
  GPU ring (m up to L), so it never loses.
"""

import math
import numbers
from dataclasses import replace

from ..errors import ConfigError
from ..training import TrainingOptions, train
from .dual import DualSync
from .partition import SATURATION, saturating_bytes, shard_bytes
from .pipeline import gpu_topology

__all__ = ["DEFAULT_RATIOS", "ASSUMPTIONS", "compare_system", "sweep_asymmetry"]

DEFAULT_RATIOS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 16 / 9, 2.0, 4.0)

ASSUMPTIONS = (
    "MPI ring all-reduce runs over the GPU-GPU peer path (default: the local path's bandwidth "
    "and latency, peers sharing the PCIe switches); it does not use the memory devices",
    "each worker's local and remote paths are independent and full duplex, and the GPU-GPU path "
    "is separate from both (dual synchronisation's two streams do not share bandwidth)",
    "latencies 1 us (local, GPU-GPU) and 2 us (remote, device ring); the device ring runs at the "
    "remote path's bandwidth",
    "near-memory reduction keeps up with the links; device ports are not a bottleneck",
    "a path carries one copy at a time per direction; shard size: 90% of a path's bandwidth",
    "a tensor is one layer's gradients; compute from the accelerator model of "
    "golden_model.accelerator",
)


def _ms(seconds):
    return float(seconds) * 1e3


def _result(scheme, iteration, compute, comm, mpi=None, **extra):
    row = {"scheme": scheme, "iteration_ms": _ms(iteration), "compute_ms": _ms(compute),
           "exposed_comm_ms": _ms(iteration - compute), "comm_ms": _ms(comm), **extra}
    if mpi is not None:
        row.update(speedup=mpi / iteration, faster=mpi / iteration - 1,
                   time_reduction=1 - iteration / mpi)
    return row


def _routing(dual, params):
    routes, client = dual.routes, dual.client
    eb = params.element_bytes

    def total(kind):
        return sum(r.elements * eb for r in routes if r.proxy == kind)

    return {
        "threshold_bytes": dual.config.threshold_bytes,
        "latency_proxy": {"device": client.latency_device, "path": client.latency_path},
        "probes": [{"device": p.device, "path": p.path, "small_cycles": p.small_cycles,
                    "large_cycles": p.large_cycles} for p in client.probes],
        "measured_GBps": client.bandwidth_GBps,
        "latency_tensors": sum(r.proxy == "latency" for r in routes),
        "latency_bytes": total("latency"),
        "bandwidth_tensors": sum(r.proxy == "bandwidth" for r in routes),
        "bandwidth_bytes": total("bandwidth"),
        "table": [{"layer": r.layer, "name": r.name, "bytes": r.elements * eb, "proxy": r.proxy,
                   "shards": len(r.shards), "local_shards": r.count("local"),
                   "remote_shards": r.count("remote")} for r in routes],
    }


def _partitioning(dual, params):
    cfg, f = dual.config, params.frequency_ghz
    shards = [s for r in dual.routes if r.proxy == "bandwidth" for s in r.shards]
    sizes = {s.path: 0 for s in shards}
    for s in shards:
        sizes[s.path] += s.elements * params.element_bytes
    paths = ("local", "remote") if cfg.devices > 1 else ("local",)
    return {
        "saturation": float(SATURATION),
        "saturating_bytes": {p: saturating_bytes(cfg.path(p)[0], cfg.latency_cycles(p, f), params)
                             for p in paths},
        "shard_bytes": shard_bytes(cfg, params),
        "shards": len(shards),
        "local_shards": sum(s.path == "local" for s in shards),
        "remote_shards": sum(s.path == "remote" for s in shards),
        "local_bytes": sizes.get("local", 0), "remote_bytes": sizes.get("remote", 0),
        "clockwise": sum(s.direction > 0 for s in shards),
        "counter_clockwise": sum(s.direction < 0 for s in shards),
    }


def compare_system(model, config, options=TrainingOptions()):
    """COARSE against MPI ring all-reduce for ``model`` on ``config`` (module docstring).

    Parameters
    ----------
    model : workloads.Model
    config : CoarseConfig
    options : training.TrainingOptions

    Returns
    -------
    dict
        ``{"system", "config", "model", "title", "parameters", "gradient_bytes", "mini_batch",
        "overlap", "bucket_bytes", "forward_ms", "backward_ms", "compute_ms", "assumptions",
        "routing", "partitioning", "dual_sync": {"m", "layers", "gpu_tensors", "gpu_bytes",
        "gpu_buckets", "proxy_tensors", "proxy_bytes", "candidates": [{"m", "iteration_ms"}]},
        "results": [{"scheme", "iteration_ms", "compute_ms", "exposed_comm_ms", "comm_ms",
        ...}], "speedup", "faster", "time_reduction", "winner", "summary"}``. ``results`` holds
        ``mpi-ring``, ``coarse`` (best m) and ``coarse-proxies-only`` (m = 0); ``comm_ms`` is the
        sum of all-reduce times for the GPU ring and the time with a tensor in the proxy
        pipeline for the proxies; fractions are fractions (0.25 = 25%); ``summary`` states the
        result in one sentence with the percentage.

    Raises
    ------
    ConfigError
        On a bad mini-batch or bucket size.
    """
    params = options.timing
    dual = DualSync(model, config, options)
    mpi = train(model, gpu_topology(config, params), ["ring"], options)
    ring = mpi["results"][0]
    t_mpi = ring["iteration_ms"] / 1e3
    best, alone = dual.best(), dual.at(0)
    eb = params.element_bytes
    gpu_layers = [r for r in dual.routes if r.layer < best.m]
    results = [
        _result("mpi-ring", t_mpi, ring["compute_ms"] / 1e3, ring["comm_ms"] / 1e3),
        _result("coarse", best.iteration, best.compute, best.gpu_comm + best.proxy_busy, t_mpi,
                m=best.m),
        _result("coarse-proxies-only", alone.iteration, alone.compute, alone.proxy_busy, t_mpi,
                m=0),
    ]
    speedup = results[1]["speedup"]
    winner = "coarse" if speedup > 1 else "tie" if speedup == 1 else "mpi-ring"
    verdict = {"coarse": "faster than", "tie": "as fast as", "mpi-ring": "slower than"}[winner]
    summary = (f"COARSE (m = {best.m}) is {abs(100 * (speedup - 1)):.1f}% {verdict} MPI ring "
               f"all-reduce on {config.spec}: {_ms(best.iteration):.3f} ms against "
               f"{ring['iteration_ms']:.3f} ms per iteration of {model.name}")
    return {
        "system": config.spec, "config": config.as_dict(), "model": model.name,
        "title": model.title, "parameters": model.params, "gradient_bytes": model.params * eb,
        "mini_batch": mpi["mini_batch"], "overlap": options.overlap,
        "bucket_bytes": options.bucket_bytes, "forward_ms": mpi["forward_ms"],
        "backward_ms": mpi["backward_ms"], "compute_ms": mpi["compute_ms"],
        "assumptions": list(ASSUMPTIONS),
        "routing": _routing(dual, params), "partitioning": _partitioning(dual, params),
        "dual_sync": {
            "m": best.m, "layers": len(model.layers),
            "gpu_tensors": len(gpu_layers), "gpu_bytes": sum(r.elements * eb for r in gpu_layers),
            "gpu_buckets": len(best.gpu_buckets),
            "proxy_tensors": len(best.proxy_routes),
            "proxy_bytes": sum(r.elements * eb for r in best.proxy_routes),
            "candidates": [{"m": m, "iteration_ms": _ms(t)} for m, t in dual.candidates()],
        },
        "results": results, "speedup": speedup, "faster": speedup - 1,
        "time_reduction": results[1]["time_reduction"],
        "winner": winner, "summary": summary,
    }


def sweep_asymmetry(model, config, ratios=DEFAULT_RATIOS, options=TrainingOptions()):
    """COARSE against MPI ring all-reduce as the remote path's bandwidth varies.

    Parameters
    ----------
    model : workloads.Model
    config : CoarseConfig
        The base system; each row sets ``remote_GBps = ratio * local_GBps``.
    ratios : sequence of float
        Remote-to-local bandwidth ratios (default ``DEFAULT_RATIOS``, 1/16 to 4, with the
        cloud machine's 16/9).
    options : training.TrainingOptions

    Returns
    -------
    list of dict
        ``[{"ratio", "remote_GBps", "mpi_ms", "coarse_ms", "m", "faster", "proxies_only_ms",
        "proxies_only_faster", "winner", "proxies_only_winner"}]``.

    Raises
    ------
    ConfigError
        If a ratio is not a positive number, or as ``compare_system``.
    """
    for ratio in ratios:
        if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not (
                0 < ratio < math.inf):
            raise ConfigError(f"asymmetry ratio must be a positive number, not {ratio!r}")
    def verdict(row):
        return "coarse" if row["speedup"] > 1 else "tie" if row["speedup"] == 1 else "mpi-ring"

    rows = []
    for ratio in ratios:
        try:
            cfg = replace(config, remote_GBps=config.local_GBps * ratio)
        except ConfigError as exc:
            raise ConfigError(f"asymmetry ratio {ratio:g} of the local path's "
                              f"{config.local_GBps:g} GB/s: {exc}") from None
        res = compare_system(model, cfg, options)
        mpi, coarse, alone = res["results"]
        rows.append({"ratio": ratio, "remote_GBps": cfg.remote_GBps,
                     "mpi_ms": mpi["iteration_ms"], "coarse_ms": coarse["iteration_ms"],
                     "m": coarse["m"], "faster": coarse["faster"],
                     "proxies_only_ms": alone["iteration_ms"],
                     "proxies_only_faster": alone["faster"], "winner": verdict(coarse),
                     "proxies_only_winner": verdict(alone)})
    return rows
