"""COARSE in hardware (docs/hardware.md, "COARSE system in hardware"): the memory device's
sync core and, as it is built, the device ring and the system top."""

from .device import MemoryDevice
from .devices import CoarseDevices
from .group_reducer import GroupReducer, reducer_input
from .queue_reducer import QueueReducer
from .sync_core import SyncCore
from .system import CoarseSystem

__all__ = ["CoarseDevices", "CoarseSystem", "MemoryDevice", "GroupReducer", "QueueReducer", "SyncCore", "reducer_input"]
