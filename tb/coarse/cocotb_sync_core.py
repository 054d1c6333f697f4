"""cocotb test module of the COARSE sync core (Icarus and Verilator).

Started by :mod:`tb.coarse.run` in the simulator process; never collected by pytest. The element
type and the seed come from the JSON file named by ``COARSE_TB_PARAMS``. The test drives
``sync_core`` with :class:`tb.coarse.scenarios.SyncHost` (clients sending their tensors in their
own orders, lines interleaved, random gaps and back-pressure) and checks every tensor's partial
sums bit for bit against ``golden_model.coarse.functional.group_sum``.
"""

from __future__ import annotations


import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from golden_model.elements import element_type
from hdl.coarse import SyncCore

from ..cocotb_values import params_from_env, reset, to_int
from .scenarios import (CLIENTS, PARAMS_ENV, QUEUE_LINES, TENSORS, SyncHost, client_orders,
                        copies_and_writes, expected_lines, layouts_of)


def _int(handle) -> int:
    return to_int(handle.value)


@cocotb.test()
async def different_orders(dut):
    params = params_from_env(PARAMS_ENV)
    etype = element_type(params.get("dtype", "float32"))
    seed = int(params.get("seed", 1))
    rng = np.random.default_rng(seed)
    copies, writes = copies_and_writes(etype, rng, client_orders(rng))
    core = SyncCore(etype, CLIENTS, QUEUE_LINES, len(TENSORS))
    host = SyncHost(layouts_of(core), TENSORS, writes, seed=seed)

    Clock(dut.clk, 2, unit="ns").start()
    await reset(dut, (dut.program__valid, dut.write__valid, dut.o__ready,
                      dut.program__payload, dut.write__payload))
    dut.allow.value = (1 << len(TENSORS)) - 1          # every complete tensor may start
    while not host.done:
        assert host.cycle < 20 * len(writes) + 500, (
            f"stalled: {len(host.writes)} writes left, tensors out {sorted(host.got)}")
        await FallingEdge(dut.clk)
        inp = host.drive()
        dut.program__valid.value = inp["program_valid"]
        dut.program__payload.value = inp["program"]
        dut.write__valid.value = inp["write_valid"]
        dut.write__payload.value = inp["write"]
        dut.o__ready.value = inp["o_ready"]
        await ReadOnly()
        host.sample(_int(dut.o__valid), _int(dut.o__payload), _int(dut.error))
    assert host.error == 0
    assert sorted(host.got) == sorted(TENSORS)
    for t in TENSORS:
        assert host.got[t] == expected_lines(etype, copies, t), f"tensor {t}"
    dut._log.info(f"{etype.name}: {len(TENSORS)} tensors reduced bit for bit in {host.cycle} "
                  f"cycles, order {host.order}")
