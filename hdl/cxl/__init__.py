"""The CXL.mem memory controller with the COARSE accumulate window (docs/hardware.md,
"CXLMemController (COARSE)")."""

from .config import ADDR_BITS, LINE_BITS, LINE_BYTES, LINE_ELEMENTS, TAG_BITS, CXLMemConfig
from .controller import TIMER_BITS, CXLMemController
from .generate import TOP_MODULE, to_verilog
from .messages import (CSR, CTRL_CLEAR, CTRL_ZERO, CSRWrite, M2SReq, M2SReqOpcode, M2SRwD,
                       M2SRwDOpcode, MetaField, S2MDRS, S2MDRSOpcode, S2MNDR, S2MNDROpcode)

__all__ = ["CXLMemConfig", "CXLMemController", "to_verilog", "TOP_MODULE", "CSR", "CTRL_CLEAR",
           "CTRL_ZERO", "CSRWrite", "M2SReq", "M2SReqOpcode", "M2SRwD", "M2SRwDOpcode",
           "MetaField", "S2MDRS", "S2MDRSOpcode", "S2MNDR", "S2MNDROpcode", "ADDR_BITS",
           "LINE_BITS", "LINE_BYTES", "LINE_ELEMENTS", "TAG_BITS", "TIMER_BITS"]
