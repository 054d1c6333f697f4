"""All-reduce algorithms. Each module has ``build(topology, num_elements) -> AllReduceSchedule``.

``build_schedule`` is the one entry point; it checks the inputs and looks the name up here.
"""

import importlib

from ..errors import ConfigError
from ..units import split_list

# name -> module in this package; imported on first use so a broken algorithm cannot take the
# others down.
ALGORITHMS = {
    "ring": "ring",
    "ring2d": "ring2d",
    "dbtree": "dbtree",
    "halving-doubling": "halving_doubling",
    "multitree": "multitree",
    "multitree-opt": "multitree_opt",
}
# Element counts above this would make chunk offsets overflow int64 byte arithmetic downstream.
MAX_ELEMENTS = 1 << 40


def build_schedule(name, topology, num_elements, params=None):
    """Build the ``AllReduceSchedule`` of algorithm ``name`` on ``topology`` for vectors of
    ``num_elements`` elements. Names are case-insensitive (``"MultiTree"`` is ``multitree``).

    ``params`` (``golden_model.timing.TimingParams``, default ``TimingParams()``) is the timing
    the schedule will run with: an algorithm that chooses among candidates by their time
    (``multitree-opt``: trees and sub-chunks) times them with it; the others ignore it.

    Raises
    ------
    ConfigError
        If the name is unknown, the element count is not a positive integer, or the algorithm
        cannot run on the topology.
    """
    key = str(name).strip().lower()
    if key not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}: expected one of {', '.join(ALGORITHMS)}")
    if isinstance(num_elements, bool) or not isinstance(num_elements, int) or not (
            0 < num_elements <= MAX_ELEMENTS):
        raise ConfigError(f"element count must be a positive integer up to 2^40, not {num_elements!r}")
    module = importlib.import_module(f".{ALGORITHMS[key]}", __name__)
    if getattr(module, "TIMED", False):
        from ..timing import TimingParams  # noqa: PLC0415
        return module.build(topology, num_elements, params or TimingParams())
    return module.build(topology, num_elements)


def parse_algorithms(text):
    """Split a comma-separated list of algorithm names; ``ConfigError`` on an unknown or empty one."""
    names = list(dict.fromkeys(a.lower() for a in split_list(text, "algorithm")))
    for a in names:
        if a not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {a!r}: expected one of {', '.join(ALGORITHMS)}")
    return names


def timed_cycles(schedule, params):
    """``timing.simulate(schedule, params).cycles`` for a schedule ``build_schedule`` just built
    with the same ``params``: an algorithm that timed its candidates recorded the kept one's
    cycles (``meta["cycles"]``), which is read instead of timed again."""
    cycles = schedule.meta.get("cycles")
    if cycles is not None:
        return cycles
    from ..timing import simulate  # noqa: PLC0415
    return simulate(schedule, params).cycles
