"""Element types: one description per type of the vectors being all-reduced.

An :class:`ElementType` carries everything the toolkit needs to know about a type: its width in
bits, its numpy dtype, its golden-model add (what the executor computes, exactly), whether that
add is associative (if not, the summation order the schedule fixes is part of the result), and how
its values map to the bit patterns the hardware stores. The hardware adder for a type lives with
the hardware (``hdl.adders``); ``NIConfig`` refuses a type that has none.

Arithmetic:

* ``int32``: two's complement, addition modulo 2^32 (wrap-around, no saturation): associative
  and commutative, so any summation order gives the same bits.
* ``float32``, ``float64``: IEEE 754 binary32 / binary64 addition as numpy computes it: round to
  nearest, ties to even; subnormals kept; signed zeros, infinities and overflow to infinity as
  IEEE 754 says; NaN payloads as the platform propagates them. Not associative: the result
  depends on the order of the additions, which the schedule fixes (``golden_model.schedule``).
  Golden model only: no hardware adder yet.

Adding a type: one ``ElementType`` in :data:`ELEMENT_TYPES` (and, for hardware, its adder in
``hdl.adders``).
"""

from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

__all__ = ["ElementType", "ELEMENT_TYPES", "INT32", "FLOAT32", "FLOAT64", "element_type",
           "element_type_of"]


@dataclass(frozen=True)
class ElementType:
    """One element type.

    Attributes
    ----------
    name : str
        ``"int32"``, ``"float32"``, ...: the name options and reports use.
    bits : int
        Width of one element (bits); a 128-bit flit holds ``128 // bits`` elements.
    dtype : numpy.dtype
        The numpy dtype of vectors of this type.
    associative : bool
        True when the golden add is associative and commutative (every summation order gives
        the same bits).
    arithmetic : str
        The add, stated exactly (rounding, subnormals, special values, overflow).
    """
    name: str
    bits: int
    dtype: np.dtype
    associative: bool
    arithmetic: str

    @property
    def bytes(self):
        """Bytes per element."""
        return self.bits // 8

    def add(self, dst, src):
        """``dst += src`` in place, element-wise, with this type's arithmetic (the golden add).

        Parameters
        ----------
        dst : numpy.ndarray of ``dtype``
            Updated in place.
        src : numpy.ndarray of ``dtype``, same shape
        """
        # numpy's array add is the stated arithmetic for every type here: int32 arrays wrap
        # around silently, floats follow IEEE 754 with round to nearest even.
        np.add(dst, src, out=dst)

    def to_bits(self, values):
        """The bit patterns of ``values`` as unsigned integers of ``bits`` bits (same shape)."""
        arr = np.ascontiguousarray(values, dtype=self.dtype)
        return arr.view(np.dtype(f"u{self.bytes}"))

    def from_bits(self, patterns):
        """Inverse of :meth:`to_bits`: unsigned ``bits``-bit patterns to values of ``dtype``."""
        arr = np.ascontiguousarray(patterns, dtype=np.dtype(f"u{self.bytes}"))
        return arr.view(self.dtype)


INT32 = ElementType("int32", 32, np.dtype(np.int32), True,
                    "two's complement, addition modulo 2^32 (wraps around)")
FLOAT32 = ElementType("float32", 32, np.dtype(np.float32), False,
                      "IEEE 754 binary32, round to nearest even, subnormals kept")
FLOAT64 = ElementType("float64", 64, np.dtype(np.float64), False,
                      "IEEE 754 binary64, round to nearest even, subnormals kept")

#: name -> ElementType.
ELEMENT_TYPES = {t.name: t for t in (INT32, FLOAT32, FLOAT64)}


def element_type(name):
    """The ``ElementType`` called ``name`` (an ``ElementType`` is returned as it is).

    Raises
    ------
    ConfigError
        If there is none (the message names every type).
    """
    if isinstance(name, ElementType):
        return name
    found = ELEMENT_TYPES.get(str(name).strip().lower())
    if found is None:
        raise ConfigError(f"unknown element type {name!r}: expected one of "
                          f"{', '.join(ELEMENT_TYPES)}")
    return found


def element_type_of(array):
    """The ``ElementType`` of a numpy array's dtype.

    Raises
    ------
    ConfigError
        If no element type has that dtype.
    """
    dtype = np.asarray(array).dtype
    for t in ELEMENT_TYPES.values():
        if t.dtype == dtype:
            return t
    raise ConfigError(f"dtype {dtype} not supported: use {', '.join(ELEMENT_TYPES)}")
