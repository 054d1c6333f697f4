"""64-byte lines of an element type's bit patterns, for the COARSE hardware's tests."""

import numpy as np

__all__ = ["random_lines", "line_value"]


def random_lines(etype, rng, count):
    """``(count, 512 / bits)`` bit patterns of ``etype`` (a ``golden_model.elements.ElementType``):
    random bits mixed, for a float type, with its special values (zeros of both signs,
    subnormals, infinities, NaNs with payloads) and with finite values of similar size, so that
    sums round and cancel."""
    lanes = 512 // etype.bits
    pats = rng.integers(0, 1 << etype.bits, size=(count, lanes), dtype=np.uint64)
    if etype.is_float:
        e, f = etype.exponent_bits, etype.fraction_bits
        sign = 1 << (e + f)
        inf = ((1 << e) - 1) << f
        special = np.array([0, sign, 1, sign | 1, (1 << f) - 1, inf, sign | inf, inf | 1,
                            inf | 1 << (f - 1), (1 << f) | 5, sign | (1 << f)], np.uint64)
        pick = rng.random((count, lanes)) < 0.3
        pats[pick] = rng.choice(special, size=int(pick.sum()))
        near = rng.random((count, lanes)) < 0.4
        pats[near] = (rng.integers(120, 130, int(near.sum()), dtype=np.uint64) << f
                      | rng.integers(0, 1 << f, int(near.sum()), dtype=np.uint64)
                      | rng.integers(0, 2, int(near.sum()), dtype=np.uint64) << (e + f))
    return pats.astype(etype.unsigned)


def line_value(pats, etype):
    """The 512-bit integer of one line of bit patterns (element 0 in the low bits)."""
    return int.from_bytes(np.ascontiguousarray(pats, etype.unsigned).astype(
        etype.unsigned.newbyteorder("<")).tobytes(), "little")
