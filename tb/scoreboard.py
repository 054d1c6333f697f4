"""Scoreboard: the RTL's results against the golden model (pure Python, in the pytest process).

* **Data**: every node's buffer read back from the hardware (unpacked with
  ``LoweredSchedule.unpack``) must equal ``golden_model.executor.execute`` bit for bit, in the
  element type the hardware adds (``golden_model.elements``; int32: wrap-around adds).
* **Time**: the RTL's cycle count against the cycles the timing model expects of the hardware,
  which the caller passes (the hardware plan's ``PlannedRun.expected_cycles``,
  ``allreduce_rtl.plan``); the ratio RTL / model is reported. It is 1 when no send waits for a
  credit.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from golden_model.executor import execute

__all__ = ["Mismatch", "Verdict", "check_run", "compare_data"]


@dataclasses.dataclass(frozen=True)
class Mismatch:
    node: int
    element: int
    chunk: int
    expected: object
    got: object


@dataclasses.dataclass
class Verdict:
    """Result of checking one run.

    Attributes
    ----------
    passed : bool
        The run finished and every element of every node matched.
    mismatches : int
        Elements that differ (all nodes).
    first : list of Mismatch
        The first few, for the message.
    rtl_cycles, model_cycles : int or None
    ratio : float or None
        RTL / model cycles.
    message : str
        One paragraph: what failed, or the summary.
    """
    passed: bool
    mismatches: int
    first: list
    rtl_cycles: int | None
    model_cycles: int | None
    ratio: float | None
    message: str

    def as_dict(self) -> dict:
        return {"passed": self.passed, "mismatches": self.mismatches,
                "rtl_cycles": self.rtl_cycles, "model_cycles": self.model_cycles,
                "rtl_over_model": self.ratio, "message": self.message}


def compare_data(schedule, vectors, outputs, element_type, limit: int = 8):
    """(mismatch count, first ``limit`` Mismatch) of ``outputs`` against the executor, bit for
    bit in ``element_type`` (a ``golden_model.elements.ElementType``)."""
    expected = execute(schedule, np.asarray(vectors, dtype=element_type.dtype), element_type)
    got = np.asarray(outputs).astype(element_type.dtype, copy=False)
    if got.shape != expected.shape:
        raise ValueError(f"read back shape {got.shape}, expected {expected.shape}")
    diff = element_type.to_bits(expected) != element_type.to_bits(got)
    count = int(diff.sum())
    first = []
    if count:
        nodes, elems = np.nonzero(diff)
        bounds = schedule.bounds
        for v, e in list(zip(nodes.tolist(), elems.tolist()))[:limit]:
            chunk = int(np.searchsorted(bounds, e, side="right") - 1)
            first.append(Mismatch(v, e, chunk, expected[v, e].item(), got[v, e].item()))
    return count, first


def check_run(result, schedule, vectors, element_type, *, expected_cycles) -> Verdict:
    """Check one :class:`tb.runner.RunResult` against the golden model.

    Parameters
    ----------
    result : RunResult
    schedule : AllReduceSchedule
    vectors : numpy.ndarray (N, D)
        The inputs.
    element_type : golden_model.elements.ElementType
        What the hardware adds.
    expected_cycles : int
        The timing model's cycles on this hardware.
    """
    model = expected_cycles
    if not result.ok:
        where = ""
        if getattr(result, "results_xml", None) is not None:
            where = f" (cocotb results {result.results_xml}, log {result.log_file})"
        return Verdict(False, 0, [], result.cycles, model, None,
                       f"{result.name}: {result.status}: {result.message}{where}")
    count, first = compare_data(schedule, vectors, result.outputs, element_type)
    ratio = result.cycles / model if model else None
    timing = (f"RTL {result.cycles} cycles, model {model} cycles"
              + (f" (RTL/model {ratio:.3f})" if ratio is not None else ""))
    if count:
        listing = "; ".join(f"node {m.node} element {m.element} (chunk {m.chunk}): expected "
                            f"{m.expected}, got {m.got}" for m in first)
        msg = (f"{result.name}: {count} of {np.asarray(vectors).size} elements differ from the "
               f"golden model: {listing}; {timing}")
        return Verdict(False, count, first, result.cycles, model, ratio, msg)
    return Verdict(True, 0, [], result.cycles, model, ratio,
                   f"{result.name}: all {schedule.num_nodes} nodes match the golden model; "
                   f"{timing}")
