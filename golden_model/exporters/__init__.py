"""Schedule exporters: an ``AllReduceSchedule`` written in another format.

Each exporter is a module of this package with ``export(schedule) -> str`` (the whole file's
text); :data:`EXPORTERS` names them with the file suffix that selects them. ``allreduce-rtl
schedule --out FILE [--format NAME]`` and :func:`export` are the one way in.

Adding an exporter: a module here and its line in :data:`EXPORTERS`.
"""

import importlib
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["Exporter", "EXPORTERS", "export", "exporter_for"]


@dataclass(frozen=True)
class Exporter:
    """One format: its name, the suffix of its files and the module that writes it."""
    name: str
    suffix: str
    module: str
    description: str


#: name -> Exporter; modules are imported on first use.
EXPORTERS = {e.name: e for e in (
    Exporter("json", ".json", "json_schedule",
             "this project's schedule JSON (AllReduceSchedule.to_json: every transfer)"),
    Exporter("msccl-xml", ".xml", "msccl_xml",
             "MSCCL-IR XML (msccl-tools' format, read by the MSCCL and RCCL runtimes; "
             "docs/interchange.md)"),
)}


def exporter_for(fmt=None, path=None):
    """The ``Exporter`` named ``fmt``, else the one whose suffix ``path`` has, else JSON.

    Raises
    ------
    ConfigError
        If ``fmt`` names no exporter (the message lists them).
    """
    if fmt is not None:
        found = EXPORTERS.get(str(fmt).strip().lower())
        if found is None:
            raise ConfigError(f"unknown schedule format {fmt!r}: expected one of "
                              f"{', '.join(EXPORTERS)}")
        return found
    suffix = "" if path is None else str(path).lower()
    return next((e for e in EXPORTERS.values() if suffix.endswith(e.suffix)), EXPORTERS["json"])


def export(schedule, fmt="json"):
    """The text of ``schedule`` in format ``fmt``.

    Raises
    ------
    ConfigError
        If ``fmt`` names no exporter, or the schedule cannot be written in that format.
    """
    exporter = exporter_for(fmt)
    module = importlib.import_module(f".{exporter.module}", __name__)
    return module.export(schedule)
