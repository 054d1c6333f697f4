"""cocotb test module: drive ``tb_top`` through one or more all-reduce runs.

Started by :mod:`tb.runner` in the simulator process; never imported by pytest itself (the runner
only names it). The run's parameters come from the JSON file named by the environment variable
``ALLREDUCE_TB_PARAMS`` (written by the runner); results go to the JSON file it names, and
progress (phase, cycles) to another one that the runner may poll.

The :class:`TB` class owns the clock, the reset, the host players' control (load, read back,
dump) and the timeouts. It acts only at the edges of a run, so the simulator runs at full speed
in between: with nothing to do, cocotb sleeps on ``First(RisingEdge(done), RisingEdge(error),
Timer(slice))`` and only wakes every ``slice`` cycles to report progress.
"""

from __future__ import annotations

import json
import os
import pathlib
import time

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge, Timer

from tb.cocotb_values import to_int as _to_int
from tb.status import error_message, node_status, phase_stall_message, stall_message

PARAMS_ENV = "ALLREDUCE_TB_PARAMS"


class StallError(AssertionError):
    """The network did not finish in time (a deadlock, a stall or a far too slow design)."""


class HardwareError(AssertionError):
    """The network raised its ``error`` output (a head flit mismatch, a receive FIFO overflow)."""


class TB:
    """Clock, reset, host-player control and timeouts of ``tb_top``.

    Parameters
    ----------
    dut : cocotb handle of ``tb_top``
    params : dict
        ``num_nodes``, ``step_width``, ``clock_period_ns``, ``progress_file`` (optional),
        ``progress_slice`` (cycles between progress reports), ``start_delay`` (cycles from
        ``tb_top``'s start to the network's).
    """

    def __init__(self, dut, params):
        self.dut = dut
        self.params = params
        self.num_nodes = int(params["num_nodes"])
        self.step_width = int(params.get("step_width", 16))
        self.period = int(params.get("clock_period_ns", 2))
        self.slice = int(params.get("progress_slice", 200_000))
        self.start_delay = int(params.get("start_delay", 0))
        self.progress_file = params.get("progress_file")
        self.run_name = ""
        self.phase = "init"

    # -- basics -------------------------------------------------------------------------------

    def now_cycles(self) -> int:
        return int(get_sim_time("ns") // self.period)

    def report(self, **extra):
        """Write the progress file (phase, cycle, run) atomically, if one was asked for."""
        if not self.progress_file:
            return
        path = pathlib.Path(self.progress_file)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"run": self.run_name, "phase": self.phase,
                                   "cycle": self.now_cycles(), "time": time.time(), **extra}))
        os.replace(tmp, path)

    async def start(self):
        """Start the clock and hold reset for 5 cycles; every control input idle."""
        dut = self.dut
        for sig in (dut.start, dut.tb_load, dut.tb_readback, dut.tb_dump):
            sig.value = 0
        dut.tb_run.value = 0
        dut.rst.value = 1
        Clock(dut.clk, self.period, unit="ns", impl="gpi").start()
        await ClockCycles(dut.clk, 5)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 2)

    async def reset(self):
        await FallingEdge(self.dut.clk)
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        await FallingEdge(self.dut.clk)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def pulse(self, sig):
        """Drive ``sig`` high for exactly one rising edge (changed on falling edges)."""
        await FallingEdge(self.dut.clk)
        sig.value = 1
        await FallingEdge(self.dut.clk)
        sig.value = 0

    async def wait_high(self, sig, max_cycles, on_timeout, watch_error=False):
        """Wait until ``sig`` is 1; returns the cycles waited.

        Raises ``on_timeout()`` after ``max_cycles`` cycles, :class:`HardwareError` if
        ``watch_error`` and the network's ``error`` rises first.
        """
        t0 = self.now_cycles()
        while True:
            if watch_error and _to_int(self.dut.error.value):
                raise HardwareError(self.error_message())
            if _to_int(sig.value):
                return self.now_cycles() - t0
            waited = self.now_cycles() - t0
            if waited >= max_cycles:
                raise on_timeout()
            chunk = max(1, min(self.slice, max_cycles - waited))
            triggers = [RisingEdge(sig), Timer(chunk * self.period, unit="ns")]
            if watch_error:
                triggers.append(RisingEdge(self.dut.error))
            await First(*triggers)
            self.report()

    # -- status -------------------------------------------------------------------------------

    def node_status(self):
        """[(node, done, error, step)] from the network's per-node status outputs."""
        return node_status(_to_int(self.dut.node_done.value), _to_int(self.dut.node_error.value),
                           _to_int(self.dut.node_step.value), self.num_nodes, self.step_width)

    def stall_message(self, waited):
        return stall_message(self.node_status(), waited, self.run_name)

    def error_message(self):
        return error_message(self.node_status(), self.now_cycles(), self.run_name)

    # -- one run ------------------------------------------------------------------------------

    async def load(self, index, max_cycles):
        self.phase = "load"
        self.dut.tb_run.value = index
        self.report()
        await self.pulse(self.dut.tb_load)
        return await self.wait_high(
            self.dut.tb_loaded, max_cycles,
            lambda: StallError(phase_stall_message("load", max_cycles, self.run_name)))

    async def allreduce(self, max_cycles):
        """Pulse start and wait for done; returns (RTL cycles, cycles measured by the TB)."""
        self.phase = "run"
        self.report()
        await self.pulse(self.dut.start)
        # start was sampled at the rising edge half a period before this falling edge and
        # reaches the network start_delay cycles later (tb.harness.START_DELAY).
        t0 = get_sim_time("ns") - self.period / 2 + self.start_delay * self.period
        for _ in range(self.start_delay):   # done is the previous run's until start arrives
            await FallingEdge(self.dut.clk)

        def timeout():
            return StallError(self.stall_message(round((get_sim_time("ns") - t0) / self.period)))

        await self.wait_high(self.dut.done, max_cycles, timeout, watch_error=True)
        tb_cycles = round((get_sim_time("ns") - t0) / self.period)
        await FallingEdge(self.dut.clk)
        if _to_int(self.dut.error.value):
            raise HardwareError(self.error_message())
        return _to_int(self.dut.cycles.value), tb_cycles

    async def read_back(self, max_cycles):
        self.phase = "readback"
        self.report()
        await self.pulse(self.dut.tb_readback)
        cycles = await self.wait_high(
            self.dut.tb_read_done, max_cycles,
            lambda: StallError(phase_stall_message("readback", max_cycles, self.run_name)))
        self.phase = "dump"
        await self.pulse(self.dut.tb_dump)
        limit = int(self.params.get("dump_timeout_cycles", 100))
        await self.wait_high(self.dut.tb_dumped, limit,
                             lambda: StallError(phase_stall_message("dump", limit,
                                                                    self.run_name)))
        return cycles


@cocotb.test()
async def allreduce_runs(dut):
    """Every run of the parameter file: load, start, wait for done, read back, dump."""
    params = json.loads(pathlib.Path(os.environ[PARAMS_ENV]).read_text())
    result_path = pathlib.Path(params["result_file"])
    tb = TB(dut, params)
    results = []

    def save():
        tmp = result_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"runs": results}, indent=1))
        os.replace(tmp, result_path)

    save()
    await tb.start()
    for i, run in enumerate(params["runs"]):
        tb.run_name = run["name"]
        entry = {"name": run["name"], "status": "running", "message": ""}
        results.append(entry)
        wall = time.perf_counter()
        try:
            if i:
                await tb.reset()
            entry["load_cycles"] = await tb.load(run["index"], run["load_timeout_cycles"])
            entry["cycles"], entry["tb_cycles"] = await tb.allreduce(run["timeout_cycles"])
            entry["read_cycles"] = await tb.read_back(run["read_timeout_cycles"])
            entry["status"] = "done"
        except AssertionError as exc:
            entry["status"] = "stall" if isinstance(exc, StallError) else "error"
            entry["message"] = str(exc)
            entry["phase"] = tb.phase
            raise
        finally:
            entry["wall_s"] = time.perf_counter() - wall
            entry["end_cycle"] = tb.now_cycles()
            save()
    tb.phase = "finished"
    tb.report()
