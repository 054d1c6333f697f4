"""What every cocotb test module here needs in its simulator process: signal values as ints, its
parameters from the JSON file its runner names (``tb.build.SimBuild.test``), and a reset."""

from __future__ import annotations

import json
import os
import pathlib

from cocotb.triggers import FallingEdge

__all__ = ["to_int", "params_from_env", "reset"]


def to_int(value) -> int:
    """A signal's value as an int, undefined (x/z) bits read as 0."""
    try:
        return int(value)
    except ValueError:
        text = str(value).lower().replace("x", "0").replace("z", "0")
        return int(text, 2) if text else 0


def params_from_env(env: str) -> dict:
    """The parameters in the JSON file named by the environment variable ``env`` ({} if
    unset)."""
    path = os.environ.get(env)
    return json.loads(pathlib.Path(path).read_text()) if path else {}


async def reset(dut, inputs, cycles=3):
    """Drive every handle of ``inputs`` to 0 and hold ``dut.rst`` for ``cycles`` falling edges of
    ``dut.clk`` (whose clock the caller has started)."""
    for handle in inputs:
        handle.value = 0
    dut.rst.value = 1
    for _ in range(cycles):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
