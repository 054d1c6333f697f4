"""What a stopped run says: the stall and error messages of both drivers of ``tb_top``
(``tb/cocotb_allreduce.py`` and ``tb/verilator_driver.cpp``), from the network's per-node status
outputs (``node_done``, ``node_error``, ``node_step``: docs/hardware.md)."""

from __future__ import annotations

__all__ = ["node_status", "stall_message", "error_message", "phase_stall_message"]


def node_status(done: int, error: int, steps: int, num_nodes: int, step_width: int):
    """``[(node, done, error, step)]`` from the three outputs read as integers."""
    mask = (1 << step_width) - 1
    return [(v, done >> v & 1, error >> v & 1, steps >> (v * step_width) & mask)
            for v in range(num_nodes)]


def stall_message(status, waited: int, run: str) -> str:
    """The all-reduce did not finish in ``waited`` cycles: the lowest unfinished step first."""
    stuck = [(step, v) for v, d, _, step in status if not d]
    if not stuck:
        return (f"deadlock or stall: every node_done is set but done stayed low after "
                f"{waited} cycles (run {run})")
    step, node = min(stuck)
    listing = ", ".join(f"{v}:{s}" for s, v in sorted(stuck, key=lambda x: x[1]))
    return (f"deadlock or stall at step {step} on node {node} after {waited} cycles "
            f"(run {run}; unfinished node:step {listing})")


def error_message(status, cycle: int, run: str) -> str:
    """The network raised ``error``: the nodes that did, with their steps."""
    bad = [f"{v} (step {s})" for v, _, e, s in status if e]
    return (f"network error output set (head-flit mismatch or receive FIFO overflow) on "
            f"node(s) {', '.join(bad) or '?'} at cycle {cycle} (run {run})")


def phase_stall_message(phase: str, max_cycles: int, run: str) -> str | None:
    """A load, read-back or dump that timed out (None for the all-reduce itself)."""
    return {
        "load": f"host players did not finish loading in {max_cycles} cycles (run {run}): "
                f"host_cmd not accepted",
        "readback": f"read-back did not complete in {max_cycles} cycles (run {run}): "
                    f"host_rsp missing",
        "dump": f"host players did not dump their responses in {max_cycles} cycles (run {run})",
    }.get(phase)
