"""All-reduce algorithms. Each module has ``build(topology, num_elements) -> AllReduceSchedule``.

``build_schedule`` is the one entry point; it checks the inputs and looks the name up here.
"""

import importlib
from dataclasses import dataclass

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


@dataclass(frozen=True)
class ScheduleFile:
    """An external schedule taken where an algorithm is: an MSCCL-IR XML file
    (``golden_model.interchange.msccl_import``) and its ranks' nodes (None: rank r on node r).
    Its name in reports is the file's path."""
    path: str
    rank_map: tuple | None = None

    def __str__(self):
        return self.path


def schedule_file(name, rank_map=None):
    """``name`` as a ``ScheduleFile`` if it names an XML file (``*.xml``), else None."""
    if isinstance(name, ScheduleFile):
        return name
    text = str(name).strip()
    return ScheduleFile(text, rank_map) if text.lower().endswith(".xml") else None


def build_schedule(name, topology, num_elements, params=None):
    """Build the ``AllReduceSchedule`` of algorithm ``name`` on ``topology`` for vectors of
    ``num_elements`` elements. Names are case-insensitive (``"MultiTree"`` is ``multitree``).

    ``params`` (``golden_model.timing.TimingParams``, default ``TimingParams()``) is the timing
    the schedule will run with: an algorithm that chooses among candidates by their time
    (``multitree-opt``: trees and sub-chunks) times them with it; the others ignore it.

    ``name`` may also be an MSCCL-IR XML file (a ``ScheduleFile`` or a path ending in
    ``.xml``), imported onto ``topology`` (``golden_model.interchange.msccl_import``).

    Raises
    ------
    ConfigError
        If the name is unknown, the element count is not a positive integer, or the algorithm
        cannot run on the topology (for a file: it cannot be read, checked or imported).
    """
    if isinstance(num_elements, bool) or not isinstance(num_elements, int) or not (
            0 < num_elements <= MAX_ELEMENTS):
        raise ConfigError(f"element count must be a positive integer up to 2^40, not {num_elements!r}")
    file = schedule_file(name)
    if file is not None:
        from ..interchange.msccl_import import import_file  # noqa: PLC0415
        return import_file(file.path, topology, num_elements, file.rank_map)
    key = str(name).strip().lower()
    if key not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}: expected one of {', '.join(ALGORITHMS)} "
                          f"or an MSCCL-IR file FILE.xml")
    module = importlib.import_module(f".{ALGORITHMS[key]}", __name__)
    if getattr(module, "TIMED", False):
        from ..timing import TimingParams  # noqa: PLC0415
        return module.build(topology, num_elements, params or TimingParams())
    return module.build(topology, num_elements)


def parse_algorithms(text):
    """Split a comma-separated list of algorithm names (lower-cased) and MSCCL-IR files
    (``*.xml``, kept as written); ``ConfigError`` on an unknown or empty one."""
    names = list(dict.fromkeys(a if schedule_file(a) else a.lower()
                               for a in split_list(text, "algorithm")))
    for a in names:
        if a not in ALGORITHMS and not schedule_file(a):
            raise ConfigError(f"unknown algorithm {a!r}: expected one of {', '.join(ALGORITHMS)} "
                              f"or an MSCCL-IR file FILE.xml")
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
