"""What every JSON this toolkit writes says about itself: the schema version of its layout and
the tool's version, so a reader can tell which writer made it (one place for both)."""

__all__ = ["SCHEMA_VERSION", "TOOL", "tool_version", "stamp"]

#: Version of the JSON layouts the commands and ``AllReduceSchedule.to_json`` write; a change
#: that renames or removes a key raises it.
SCHEMA_VERSION = 1
TOOL = "allreduce-rtl"


def tool_version():
    """The installed package's version, or ``"unknown"`` when run from a checkout that is not
    installed."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415
    try:
        return version(TOOL)
    except PackageNotFoundError:
        return "unknown"


def stamp(obj):
    """``obj`` (a dict) with ``schema_version``, ``tool`` and ``tool_version`` first; any other
    value unchanged."""
    if not isinstance(obj, dict):
        return obj
    return {"schema_version": SCHEMA_VERSION, "tool": TOOL, "tool_version": tool_version(),
            **obj}
