"""The schedule as this project's JSON: ``AllReduceSchedule.to_json()`` (every transfer with its
step, source, destination, chunk, op, route and flow), one object on one line."""

import json

__all__ = ["export"]


def export(schedule):
    """The JSON text of ``schedule`` (ends with a newline)."""
    return json.dumps(schedule.to_json()) + "\n"
