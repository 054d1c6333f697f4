"""The COARSE system: W worker GPUs, M CCI memory devices and the links between them.

Structure (our reconstruction; ``/work/shared/references.md``, COARSE section, lines 55-80, is
the paper as far as it is known):

* Workers ``0 .. W-1`` fall into M groups of ``W / M`` consecutive workers; group ``g`` shares a
  PCIe switch with memory device ``g``, its *local* device (the cloud V100 machine of the
  paper's motivation: GPUs in pairs behind PCIe switches; W = 8, M = 4 is that machine with one
  memory device per switch).
* Every worker has two paths to the memory devices (references.md line 71): the *local* path to
  its local device (default 9 GB/s per direction) and the *remote* path, through the host, to
  every other device (default 16 GB/s). The two paths are independent and full duplex (the
  premise of tensor partitioning, line 72: both are used at once); their sum is not capped by
  the GPU's own port (assumption).
* The memory devices' sync cores are joined in a ring of device-to-device links (line 66-68),
  of bandwidth ``ring`` (default: the remote path's, the devices talk over the same host path).
* The GPUs talk to each other (MPI ring all-reduce, and COARSE's direct synchronisation of the
  first m layers, line 74) over the GPU-GPU peer path of bandwidth ``gpu``. Default: the local
  path's bandwidth, since peers go through the same PCIe switches (assumption; the paper's
  figure for this path is not known). This path is separate from the worker-device paths, so
  the two streams of dual synchronisation do not share bandwidth (the paper's formula for m,
  line 76, times them independently).
* One-way latencies (assumptions, not from the paper): 1 us on the local path and the GPU-GPU
  path (one PCIe switch), 2 us on the remote path and the device ring (through the host).

Spec strings: ``coarse:W=8,M=4,local=9,remote=16`` with optional ``gpu=GBPS``, ``ring=GBPS``,
``lat_local=US``, ``lat_remote=US`` and ``threshold=SIZE`` (e.g. ``2MB``); keys are
case-insensitive, bandwidths in GB/s (10^9 bytes per second) per direction.
"""

import math
import numbers
from dataclasses import asdict, dataclass

from ..errors import ConfigError
from ..topology import MAX_LINK_BANDWIDTH, MAX_LINK_LATENCY, MIN_LINK_BANDWIDTH
from ..units import format_size, parse_size, split_list

__all__ = ["CoarseConfig", "parse_system", "MAX_WORKERS", "DEFAULT_THRESHOLD_BYTES"]

#: Most workers: the MPI ring baseline and dual synchronisation time a ring all-reduce over the
#: W workers for every bucket and candidate m, which grows as W^2 (W = 256 takes about 90 s on
#: the project's 2-core machine, W = 512 over 5 minutes); the paper's machines have 8.
MAX_WORKERS = 256
#: Longest one-way latency (us): the topology's longest link at the model's 1 GHz.
MAX_LATENCY_US = MAX_LINK_LATENCY / 1e3
# field -> the spec key that sets it (for messages)
_SPEC_KEY = {"local_GBps": "local", "remote_GBps": "remote", "gpu_GBps": "gpu",
             "ring_GBps": "ring", "local_latency_us": "lat_local",
             "remote_latency_us": "lat_remote"}
DEFAULT_THRESHOLD_BYTES = 2_000_000  # "under about 2 MB" -> latency proxy (references.md l. 69)

# spec key -> (field, kind)
_KEYS = {"w": ("workers", "int"), "m": ("devices", "int"), "local": ("local_GBps", "bw"),
         "remote": ("remote_GBps", "bw"), "gpu": ("gpu_GBps", "bw"), "ring": ("ring_GBps", "bw"),
         "lat_local": ("local_latency_us", "lat"), "lat_remote": ("remote_latency_us", "lat"),
         "threshold": ("threshold_bytes", "size")}


def _is_int(v):
    return not isinstance(v, bool) and isinstance(v, numbers.Integral)


def _is_real(v):
    return not isinstance(v, bool) and isinstance(v, numbers.Real) and math.isfinite(v)


@dataclass(frozen=True)
class CoarseConfig:
    """A COARSE system (see the module docstring for its structure and the sources).

    Parameters
    ----------
    workers : int
        Worker GPUs W (default 8).
    devices : int
        CCI memory devices M, dividing W (default 4).
    local_GBps, remote_GBps : float
        Per-direction bandwidth in GB/s of each worker's local and remote path (defaults 9 and
        16, the cloud V100 machine's, references.md line 71).
    gpu_GBps : float or None
        GPU-GPU peer path in GB/s (None: ``local_GBps``).
    ring_GBps : float or None
        Each device-to-device link of the sync-core ring, per direction, in GB/s (None:
        ``remote_GBps``).
    local_latency_us, remote_latency_us : float
        One-way latency in microseconds of the local path (also the GPU-GPU path's) and of the
        remote path (also the device ring's). Defaults 1 and 2 (assumptions).
    threshold_bytes : int
        Tensors of fewer bytes go to the latency proxy (default 2,000,000: "about 2 MB").

    Raises
    ------
    ConfigError
        If a count is not a positive integer, W exceeds ``MAX_WORKERS``, M does not divide W, a
        bandwidth is not a positive finite number, a latency is negative or not finite, or the
        threshold is not a positive whole number of bytes.
    """
    workers: int = 8
    devices: int = 4
    local_GBps: float = 9.0
    remote_GBps: float = 16.0
    gpu_GBps: float | None = None
    ring_GBps: float | None = None
    local_latency_us: float = 1.0
    remote_latency_us: float = 2.0
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES

    def __post_init__(self):
        for name in ("workers", "devices"):
            v = getattr(self, name)
            if not _is_int(v) or v < 1:
                raise ConfigError(f"COARSE {name} must be a positive integer, not {v!r}")
        if self.workers > MAX_WORKERS:
            raise ConfigError(f"COARSE workers {self.workers} exceed the limit of {MAX_WORKERS}")
        if self.workers % self.devices:
            raise ConfigError(f"COARSE devices M={self.devices} must divide workers "
                              f"W={self.workers} (each device serves W/M local workers)")
        for name in ("local_GBps", "remote_GBps", "gpu_GBps", "ring_GBps"):
            v = getattr(self, name)
            if v is None and name in ("gpu_GBps", "ring_GBps"):
                continue
            if not _is_real(v) or not MIN_LINK_BANDWIDTH <= v <= MAX_LINK_BANDWIDTH:
                raise ConfigError(f"COARSE {_SPEC_KEY[name]} bandwidth must be a number of GB/s "
                                  f"from {MIN_LINK_BANDWIDTH:g} to {MAX_LINK_BANDWIDTH:g}, "
                                  f"not {v!r}")
        for name in ("local_latency_us", "remote_latency_us"):
            v = getattr(self, name)
            if not _is_real(v) or not 0 <= v <= MAX_LATENCY_US:
                raise ConfigError(f"COARSE {_SPEC_KEY[name]} latency must be a number of "
                                  f"microseconds from 0 to {MAX_LATENCY_US:g}, not {v!r}")
        if not _is_int(self.threshold_bytes) or self.threshold_bytes < 1:
            raise ConfigError(f"COARSE threshold must be a positive whole number of bytes, not "
                              f"{self.threshold_bytes!r}")

    @property
    def group_size(self):
        """Workers per memory device, W / M."""
        return self.workers // self.devices

    def local_device(self, worker):
        """The memory device behind ``worker``'s PCIe switch: ``worker // (W / M)``."""
        return worker // self.group_size

    @property
    def gpu_bandwidth(self):
        """GB/s of the GPU-GPU peer path (``gpu_GBps``, default the local path's)."""
        return self.local_GBps if self.gpu_GBps is None else self.gpu_GBps

    @property
    def ring_bandwidth(self):
        """GB/s of a device-ring link (``ring_GBps``, default the remote path's)."""
        return self.remote_GBps if self.ring_GBps is None else self.ring_GBps

    def path(self, kind):
        """(GB/s, one-way latency in us) of path ``kind``: "local", "remote", "gpu" or
        "ring"."""
        return {"local": (self.local_GBps, self.local_latency_us),
                "remote": (self.remote_GBps, self.remote_latency_us),
                "gpu": (self.gpu_bandwidth, self.local_latency_us),
                "ring": (self.ring_bandwidth, self.remote_latency_us)}[kind]

    def latency_cycles(self, kind, frequency_ghz):
        """One-way latency of path ``kind`` in whole cycles of a ``frequency_ghz`` clock
        (rounded to the nearest cycle)."""
        return round(self.path(kind)[1] * 1e3 * frequency_ghz)

    @property
    def spec(self):
        """The normalised spec string (optional keys only where they differ from the default)."""
        parts = [f"W={self.workers}", f"M={self.devices}", f"local={self.local_GBps:g}",
                 f"remote={self.remote_GBps:g}"]
        if self.gpu_GBps is not None:
            parts.append(f"gpu={self.gpu_GBps:g}")
        if self.ring_GBps is not None:
            parts.append(f"ring={self.ring_GBps:g}")
        if self.local_latency_us != 1.0:
            parts.append(f"lat_local={self.local_latency_us:g}")
        if self.remote_latency_us != 2.0:
            parts.append(f"lat_remote={self.remote_latency_us:g}")
        if self.threshold_bytes != DEFAULT_THRESHOLD_BYTES:
            parts.append(f"threshold={format_size(self.threshold_bytes)}")
        return "coarse:" + ",".join(parts)

    def as_dict(self):
        """Every field, plus the effective ``gpu`` and ``ring`` bandwidths and the spec."""
        return {**asdict(self), "gpu_GBps": self.gpu_bandwidth, "ring_GBps": self.ring_bandwidth,
                "spec": self.spec}


def _value(key, kind, text, spec):
    try:
        if kind == "int":
            if not text.strip().isdigit():
                raise ValueError
            return int(text)
        if kind == "size":
            return parse_size(text)
        value = float(text)
    except (ValueError, ConfigError):
        what = {"int": "a whole number", "size": "a size such as 2MB"}.get(kind, "a number")
        raise ConfigError(f"COARSE spec {spec!r}: {key}={text!r} is not {what}") from None
    return value


def parse_system(spec):
    """Parse ``coarse:W=8,M=4,local=9,remote=16[,gpu=..][,ring=..][,lat_local=..]
    [,lat_remote=..][,threshold=..]`` into a ``CoarseConfig`` (omitted keys take the defaults).

    Raises
    ------
    ConfigError
        On a missing ``coarse:`` prefix, an item that is not ``key=value``, an unknown or
        repeated key, a value of the wrong kind, or a configuration ``CoarseConfig`` rejects.
    """
    text = str(spec).strip()
    family, sep, body = text.partition(":")
    if family.strip().lower() != "coarse" or not sep:
        raise ConfigError(f"malformed COARSE system {spec!r}: expected "
                          f"coarse:W=8,M=4,local=9,remote=16")
    fields = {}
    for item in split_list(body, f"COARSE spec {spec!r} key=value") if body.strip() else []:
        key, eq, value = (x.strip() for x in item.partition("="))
        key = key.lower()
        if not eq or key not in _KEYS:
            raise ConfigError(f"COARSE spec {spec!r}: {item!r} is not key=value with a key from "
                              f"{', '.join(k.upper() if len(k) == 1 else k for k in _KEYS)}")
        field, kind = _KEYS[key]
        if field in fields:
            raise ConfigError(f"COARSE spec {spec!r}: {key} given twice")
        fields[field] = _value(key, kind, value, spec)
    return CoarseConfig(**fields)
