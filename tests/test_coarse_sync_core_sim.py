"""The COARSE sync core in Icarus and Verilator (cocotb, tb/coarse/cocotb_sync_core.py): clients
sending their tensors in their own orders under random gaps and back-pressure, every tensor's
partial sums bit for bit against golden_model.coarse.functional.group_sum."""

import pytest

from tb.coarse.run import SyncCoreBuild
from tb.runner import SIMULATORS


@pytest.mark.parametrize("sim", SIMULATORS)
def test_sync_core_in_both_simulators(sim):
    """float32, whose sums depend on the order of the adds (int32 runs in amaranth.sim,
    tests/test_coarse_sync_core.py)."""
    results = SyncCoreBuild(sim, "float32").build().run(seed=3)
    assert "<crash>" not in results, results.get("<crash>")
    assert results["different_orders"].passed, results["different_orders"].message
