"""The COARSE devices and their ring in Icarus and Verilator (cocotb, tb/coarse/cocotb_devices.py):
the scenario of tests/test_coarse_devices.py, float32, the ring counter-clockwise, every device's
reduced shard bit for bit against the golden model."""

import pytest

from tb.coarse.run import DevicesBuild
from tb.runner import SIMULATORS


@pytest.mark.slow      # the Verilator build alone is 54 s: the default suite is near its budget
@pytest.mark.parametrize("sim", SIMULATORS)
def test_devices_in_both_simulators(sim):
    results = DevicesBuild(sim, "float32", -1).build().run(seed=5)
    assert "<crash>" not in results, results.get("<crash>")
    assert results["device_ring"].passed, results["device_ring"].message
