"""The virtual-channel router and the router network (docs/hardware.md, "Router")."""

from .arbiter import RoundRobinArbiter
from .flit import PacketFlit, RouterFlit, RouterHead, head_payload
from .network import EjectionPort, InjectionPort, RouterLink, RouterNetwork, to_verilog
from .router import (Crossbar, InputUnit, RouteCompute, Router, RouterChannel, RouterParams,
                     SwitchAllocator, VCAllocator, VCState)
from .routing import RoutingTable, grid_tables, switch_table

__all__ = ["RoundRobinArbiter", "PacketFlit", "RouterFlit", "RouterHead", "head_payload",
           "EjectionPort", "InjectionPort", "RouterLink", "RouterNetwork", "to_verilog",
           "Crossbar", "InputUnit", "RouteCompute", "Router", "RouterChannel", "RouterParams",
           "SwitchAllocator", "VCAllocator", "VCState", "RoutingTable", "grid_tables",
           "switch_table"]
