"""Testbench of the router network: traffic generator and checker (``traffic``), the cocotb
test (``cocotb_router``) and the build/run helper (``build``)."""
