"""Verification of the CXL.mem controller (``hdl.cxl``): golden model, host driver,
scoreboard, request scripts and the cocotb test module (docs/hardware.md,
"CXLMemController (COARSE)")."""
