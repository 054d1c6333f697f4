"""COARSE in hardware (docs/hardware.md, "COARSE system in hardware"): the memory device's
sync core, memory devices, the device ring and the system top with the workers' CXL.mem
ports."""

from .device import MemoryDevice
from .devices import CoarseDevices
from .group_reducer import GroupReducer, reducer_input
from .queue_reducer import QueueReducer
from .shared_queue import SharedQueue
from .sync_core import SyncCore
from .system import CoarseSystem

__all__ = ["CoarseDevices", "CoarseSystem", "GroupReducer", "MemoryDevice", "QueueReducer",
           "SharedQueue", "SyncCore", "reducer_input"]
