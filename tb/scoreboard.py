"""Scoreboard: the RTL's results against the golden model (pure Python, in the pytest process).

* **Data**: every node's buffer read back from the hardware (unpacked with
  ``LoweredSchedule.unpack``) must equal ``golden_model.executor.execute`` bit for bit (int32,
  wrap-around adds).
* **Time**: the RTL's cycle count is compared with ``golden_model.timing.simulate`` configured
  like the hardware (:func:`hardware_timing`): link latency = ``config.link_latency`` register
  stages, one flit per cycle per link (bandwidth = flit bytes per cycle at 1 GHz), flits of
  ``elem_width * elems_per_flit / 8`` bytes, one head flit per message, the NI's send and
  retire delays (docs/hardware.md, "Pipeline timing"), links serving their transfers in
  schedule order (the NI's send engines walk their tables in order). The ratio RTL / model is
  reported (and the ratio to the lower bound); it is 1 when no send waits for a credit.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from golden_model.executor import execute
from golden_model.timing import TimingParams, lower_bound, simulate
from golden_model.topology import parse_topology

__all__ = ["Mismatch", "Verdict", "hardware_timing", "hardware_topology", "model_cycles",
           "check_run", "compare_data"]


def hardware_topology(topology, config):
    """``topology`` with every link as the hardware builds it: ``config.link_latency`` cycles
    and one flit per cycle (``flit bytes`` GB/s at 1 GHz)."""
    flit_bytes = config.elem_width * config.elems_per_flit // 8
    return parse_topology(topology.spec, link_bandwidth=float(flit_bytes),
                          link_latency=int(config.link_latency))


#: The NI's pipeline (docs/hardware.md, "Pipeline timing"): a send's head reaches the link 2
#: cycles after its inputs are ready, and a received tail counts 1 cycle after it arrives.
NI_SEND_DELAY = 2
NI_RETIRE_DELAY = 1
#: The routed network (hdl.routed_network, docs/hardware.md "Routed network"): the router
#: network's own numbers (``hdl.router.network.model_timing``: a router per transit node, the
#: injection and ejection registers, the end routers of a mesh or torus), plus the NI's send
#: delay, the ``RouterPort`` FIFO (1 cycle) and 1 cycle because with the NI the model's tail
#: arrival is the cycle after the tail reaches ``rx`` (the convention of NI_RETIRE_DELAY),
#: while ``model_timing`` ends with the tail on the router's ``eject``.
ROUTED_PORT_DELAY = 1


def routed_timing(topology) -> dict:
    """``TimingParams`` fields of the routed network on ``topology`` (``router_delay`` and
    ``send_delay``; links first come, first served)."""
    from hdl.router.network import model_timing  # noqa: PLC0415
    fields = model_timing(topology)
    return {"router_delay": fields["router_delay"], "in_order_links": False,
            "send_delay": NI_SEND_DELAY + ROUTED_PORT_DELAY + 1 + fields["send_delay"]}


def hardware_timing(config, topology=None, **overrides) -> TimingParams:
    """``TimingParams`` like the hardware: 1 GHz, the NI's flit size, one head flit per message,
    the NI's send and retire delays, in-order links (options the timing model does not have are
    left out). With these the model equals the RTL exactly when no send waits for a credit.
    On the routed network (``config.routed``; ``topology`` required) links are first come,
    first served, a head spends 4 cycles in every transit router and the send delay adds the
    ports and end routers (``routed_timing``).

    Raises
    ------
    ValueError
        If ``config.routed`` and no ``topology`` is given.
    """
    fields = {f.name for f in dataclasses.fields(TimingParams)}
    want = {"frequency_ghz": 1.0, "flit_bytes": config.elem_width * config.elems_per_flit // 8,
            "element_bytes": config.elem_width // 8, "header_flits": 1,
            "send_delay": NI_SEND_DELAY, "retire_delay": NI_RETIRE_DELAY,
            "in_order_links": True}
    if getattr(config, "routed", False):
        if topology is None:
            raise ValueError("the routed network's timing depends on the topology: pass it")
        want.update(routed_timing(topology))
    want.update(overrides)
    return TimingParams(**{k: v for k, v in want.items() if k in fields})


def _on(schedule, topology):
    """The same schedule on another instance of its topology (other latencies/bandwidths)."""
    return dataclasses.replace(schedule, topology=topology)


def model_cycles(schedule, config, **overrides) -> int:
    """Cycles ``golden_model.timing.simulate`` predicts for ``schedule`` on the hardware (on
    the routed network when ``config.routed``: router delays, first-come links)."""
    topo = hardware_topology(schedule.topology, config)
    return simulate(_on(schedule, topo), hardware_timing(config, topo, **overrides)).cycles


@dataclasses.dataclass(frozen=True)
class Mismatch:
    node: int
    element: int
    chunk: int
    expected: int
    got: int


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
    lower_bound_cycles : float
    message : str
        One paragraph: what failed, or the summary.
    """
    passed: bool
    mismatches: int
    first: list
    rtl_cycles: int | None
    model_cycles: int | None
    ratio: float | None
    lower_bound_cycles: float | None
    message: str

    def as_dict(self) -> dict:
        return {"passed": self.passed, "mismatches": self.mismatches,
                "rtl_cycles": self.rtl_cycles, "model_cycles": self.model_cycles,
                "rtl_over_model": self.ratio, "lower_bound_cycles": self.lower_bound_cycles,
                "message": self.message}


def compare_data(schedule, vectors, outputs, limit: int = 8):
    """(mismatch count, first ``limit`` Mismatch) of ``outputs`` against the executor."""
    expected = execute(schedule, np.asarray(vectors, dtype=np.int32))
    got = np.asarray(outputs).astype(np.int32, copy=False)
    if got.shape != expected.shape:
        raise ValueError(f"read back shape {got.shape}, expected {expected.shape}")
    diff = expected.view(np.uint32) != got.view(np.uint32)
    count = int(diff.sum())
    first = []
    if count:
        nodes, elems = np.nonzero(diff)
        bounds = schedule.bounds
        for v, e in list(zip(nodes.tolist(), elems.tolist()))[:limit]:
            chunk = int(np.searchsorted(bounds, e, side="right") - 1)
            first.append(Mismatch(v, e, chunk, int(expected[v, e]), int(got[v, e])))
    return count, first


def check_run(result, schedule, vectors, config, *, model: int | None = None) -> Verdict:
    """Check one :class:`tb.runner.RunResult` against the golden model.

    Parameters
    ----------
    result : RunResult
    schedule : AllReduceSchedule
    vectors : numpy.ndarray (N, D) int32
        The inputs.
    config : NIConfig
    model : int, optional
        The model's cycles when already computed.
    """
    topo = hardware_topology(schedule.topology, config)
    if model is None:
        model = model_cycles(schedule, config)
    lb = lower_bound(topo, schedule.num_elements * config.elem_width // 8,
                     hardware_timing(config, topo)).cycles
    if not result.ok:
        where = ""
        if getattr(result, "results_xml", None) is not None:
            where = f" (cocotb results {result.results_xml}, log {result.log_file})"
        return Verdict(False, 0, [], result.cycles, model, None, lb,
                       f"{result.name}: {result.status}: {result.message}{where}")
    count, first = compare_data(schedule, vectors, result.outputs)
    ratio = result.cycles / model if model else None
    timing = (f"RTL {result.cycles} cycles, model {model} cycles"
              + (f" (RTL/model {ratio:.3f})" if ratio is not None else ""))
    if count:
        listing = "; ".join(f"node {m.node} element {m.element} (chunk {m.chunk}): expected "
                            f"{m.expected}, got {m.got}" for m in first)
        msg = (f"{result.name}: {count} of {np.asarray(vectors).size} elements differ from the "
               f"golden model: {listing}; {timing}")
        return Verdict(False, count, first, result.cycles, model, ratio, lb, msg)
    return Verdict(True, 0, [], result.cycles, model, ratio, lb,
                   f"{result.name}: all {schedule.num_nodes} nodes match the golden model; "
                   f"{timing}")
