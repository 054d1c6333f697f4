"""Near-memory reduction at line granularity: the golden model of a device's accumulate window.

For the CXL memory controller's scoreboard. A synchronisation clears an accumulate window of
``num_lines`` 64-byte lines (CXL.mem moves 64-byte lines, address bits [51:6]; references.md,
CXL.mem section, line 86-87); each of the W workers writes its int32 gradient shard into the
window as whole lines (M2S RwD MemWr, 64 bytes each), in any order and interleaving; the device's
sync core adds every written line into the window's line element-wise, as 16 little-endian
int32 values with two's-complement wrap-around (the executor's int32 semantics). The result is
the element-wise wrap-around sum of the workers' shards, whatever the order of the writes
(integer addition modulo 2^32 is associative and commutative).
"""

import numpy as np

from ..errors import ConfigError

__all__ = ["LINE_BYTES", "LINE_ELEMENTS", "to_lines", "accumulate_lines", "accumulate_writes"]

LINE_BYTES = 64
LINE_ELEMENTS = LINE_BYTES // 4        # int32 values per line
_LE_INT32 = np.dtype("<i4")


def to_lines(shard):
    """An int32 shard as an ``(L, 16)`` int32 array of lines, ``L = ceil(n / 16)``, the last
    line padded with zeros.

    Raises
    ------
    ConfigError
        If ``shard`` is not a one-dimensional int32 array.
    """
    shard = np.asarray(shard)
    if shard.dtype != np.int32 or shard.ndim != 1:
        raise ConfigError(f"a shard must be a 1-D int32 array, not {shard.dtype} with shape "
                          f"{shard.shape}")
    lines = np.zeros(-(-shard.size // LINE_ELEMENTS) * LINE_ELEMENTS, dtype=np.int32)
    lines[:shard.size] = shard
    return lines.reshape(-1, LINE_ELEMENTS)


def accumulate_lines(shards):
    """The window's lines after every worker wrote its shard: element-wise int32 wrap-around sum.

    Parameters
    ----------
    shards : array_like, shape (W, n), int32
        Worker ``w``'s shard in row ``w``.

    Returns
    -------
    numpy.ndarray, shape (ceil(n / 16), 16), int32

    Raises
    ------
    ConfigError
        If ``shards`` is not a two-dimensional int32 array with at least one row.
    """
    shards = np.asarray(shards)
    if shards.dtype != np.int32 or shards.ndim != 2 or shards.shape[0] < 1:
        raise ConfigError(f"shards must be a (W, n) int32 array with W >= 1, not {shards.dtype} "
                          f"with shape {shards.shape}")
    window = np.zeros((-(-shards.shape[1] // LINE_ELEMENTS), LINE_ELEMENTS), dtype=np.int32)
    for row in shards:                    # array addition wraps around silently
        np.add(window, to_lines(row), out=window)
    return window


def accumulate_writes(writes, num_lines, base=0):
    """The window after a sequence of 64-byte line writes, as the controller sees them.

    Parameters
    ----------
    writes : iterable of (int, bytes)
        ``(address, data)`` of each MemWr into the window, in arrival order; ``data`` is 64 bytes
        (16 little-endian int32 values).
    num_lines : int
        Lines in the window (cleared to zero before the first write).
    base : int
        Byte address of the window's first line (64-byte aligned).

    Returns
    -------
    list of bytes
        The window's ``num_lines`` lines, 64 bytes each.

    Raises
    ------
    ConfigError
        If ``base`` or an address is not 64-byte aligned, an address falls outside the window,
        a line is not 64 bytes, or ``num_lines`` is not a positive integer.
    """
    if isinstance(num_lines, bool) or not isinstance(num_lines, int) or num_lines < 1:
        raise ConfigError(f"num_lines must be a positive integer, not {num_lines!r}")
    if base % LINE_BYTES:
        raise ConfigError(f"window base {base:#x} is not {LINE_BYTES}-byte aligned")
    window = np.zeros((num_lines, LINE_ELEMENTS), dtype=np.int32)
    for address, data in writes:
        offset = address - base
        if offset % LINE_BYTES or not 0 <= offset < num_lines * LINE_BYTES:
            raise ConfigError(f"write to {address:#x} is not a line of the window "
                              f"[{base:#x}, {base + num_lines * LINE_BYTES:#x})")
        if len(data) != LINE_BYTES:
            raise ConfigError(f"write to {address:#x} carries {len(data)} bytes, not "
                              f"{LINE_BYTES}")
        line = window[offset // LINE_BYTES]
        np.add(line, np.frombuffer(bytes(data), dtype=_LE_INT32).astype(np.int32), out=line)
    return [row.astype(_LE_INT32).tobytes() for row in window]
