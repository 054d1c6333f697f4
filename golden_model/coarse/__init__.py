"""COARSE (Wang et al., HPCA 2022): parameter synchronisation through cache-coherent memory devices.

Our reconstruction of the paper from ``references.md`` (COARSE section), as a golden model:

========================  =======================================================================
``config``                the system: W workers, M CCI memory devices, local / remote / GPU-GPU /
                          device-ring links; ``coarse:W=8,M=4,local=9,remote=16`` specs
``routing``               the profiling pass and each client's routing table (latency proxy under
                          the threshold, bandwidth proxies above)
``partition``             shard size, shards in proportion to path bandwidth, devices, ring
                          directions
``pipeline``              timing: the proxy pipeline (push, sync-core ring, pull) and the GPU ring
``dual``                  dual synchronisation: iteration time for each m, the best m
``functional``            the gradients every worker ends with (clients, proxies, storage)
``deadlock``              one queue per client against one shared FIFO, as a discrete simulation
``lines``                 near-memory reduction of 64-byte int32 lines (the memory controller's
                          scoreboard model)
``compare``               COARSE against MPI ring all-reduce; the sweep over link asymmetry
========================  =======================================================================
"""

from .compare import ASSUMPTIONS, DEFAULT_RATIOS, compare_system, sweep_asymmetry
from .config import DEFAULT_THRESHOLD_BYTES, CoarseConfig, parse_system
from .deadlock import SyncRun, simulate_queues
from .dual import DualSync, SyncPlan
from .functional import SyncResult, synchronise
from .lines import LINE_BYTES, accumulate_lines, accumulate_writes, to_lines
from .partition import Shard, partition
from .routing import Route, model_tensors, profile_client, routing_table

__all__ = ["ASSUMPTIONS", "DEFAULT_RATIOS", "DEFAULT_THRESHOLD_BYTES", "LINE_BYTES",
           "CoarseConfig", "DualSync", "Route", "Shard", "SyncPlan", "SyncResult", "SyncRun",
           "accumulate_lines", "accumulate_writes", "compare_system", "model_tensors",
           "parse_system", "partition", "profile_client", "routing_table", "simulate_queues",
           "sweep_asymmetry", "synchronise", "to_lines"]
