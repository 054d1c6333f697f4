"""Parsing of what the command line gives: sizes ("64MiB", "32KiB", "4096") and
comma-separated lists."""

import re

from .errors import ConfigError

_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_SIZE_RE = re.compile(r"^\s*([0-9]+)\s*([A-Za-z]*)\s*$")
#: Largest size accepted, 4 TiB: 2^40 elements (``golden_model.algorithms.MAX_ELEMENTS``, the
#: limit of the byte arithmetic downstream) of the widest element type, 4 bytes; the algorithms
#: check the element count itself (2 TiB of 2-byte elements).
MAX_SIZE = 4 << 40


def parse_size(text):
    """Parse a size in bytes such as ``"64MiB"``, ``"32KiB"``, ``"1GB"`` or ``"4096"``.

    Units: B, KiB, MiB, GiB, TiB (powers of 1024) and KB, MB, GB, TB (powers of 1000),
    case-insensitive.

    Raises
    ------
    ConfigError
        If the text is not a whole number with one of those units, or is zero or above
        ``MAX_SIZE``.
    """
    m = _SIZE_RE.match(str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise ConfigError(f"malformed size {text!r}: expected a whole number with an optional "
                          f"unit B, KiB, MiB, GiB, TiB, KB, MB, GB or TB, e.g. '64MiB'")
    value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value <= 0:
        raise ConfigError(f"size {text!r} must be positive")
    if value > MAX_SIZE:
        raise ConfigError(f"size {text!r} is above the largest supported, 4TiB ({MAX_SIZE:,} "
                          f"bytes: 2^40 elements of 4 bytes)")
    return value


def format_size(num_bytes):
    """Format a byte count with the largest unit that divides it, binary units first from MiB
    up, then decimal, then KiB and KB (``67108864 -> '64MiB'``, ``64000000 -> '64MB'`` rather
    than ``'62500KiB'``, ``3000 -> '3KB'``, ``100 -> '100B'``), so a size reads as written."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("TB", 10**12),
                        ("GB", 10**9), ("MB", 10**6), ("KiB", 1 << 10), ("KB", 10**3)):
        if num_bytes and num_bytes % scale == 0:
            return f"{num_bytes // scale}{unit}"
    return f"{num_bytes}B"


def split_list(text, what):
    """The items of the comma-separated list ``text``, stripped, in order, repeats dropped.

    Raises
    ------
    ConfigError
        If the list or one of its items is empty (an empty item is never skipped or taken as
        "all"); the message names ``what`` and the text.
    """
    items = [x.strip() for x in str(text).split(",")]
    if items == [""]:
        raise ConfigError(f"empty {what} list {text!r}")
    if "" in items:
        raise ConfigError(f"{what} list {text!r} has an empty name: expected names separated "
                          f"by commas")
    return list(dict.fromkeys(items))
