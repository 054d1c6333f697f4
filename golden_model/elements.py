"""Element types: one description per type of the vectors being all-reduced.

An :class:`ElementType` carries everything the toolkit needs to know about a type: its width in
bits, its numpy dtype, its golden-model add (what the executor computes, exactly), whether that
add is associative (if not, the summation order the schedule fixes is part of the result), and how
its values map to the bit patterns the hardware stores. The hardware adder for a type lives with
the hardware (``hdl.adders``); ``NIConfig`` refuses a type that has none.

Arithmetic:

* ``int32``: two's complement, addition modulo 2^32 (wrap-around, no saturation): associative
  and commutative, so any summation order gives the same bits.
* ``float32``, ``bfloat16``, ``float64``: IEEE 754 addition (binary32; bfloat16 = binary32's
  sign and 8-bit exponent with a 7-bit fraction; binary64) of two operands, the exact sum
  rounded once to the type: round to nearest, ties to even; subnormal inputs and results kept
  (no flush to zero); an exact zero sum is +0 unless both operands are -0 (IEEE 754-2019
  6.3); overflow gives an infinity of the sum's sign; inf + -inf and any NaN operand give the
  type's canonical quiet NaN (sign 0, exponent all ones, fraction MSB only: 0x7FC00000,
  0x7FC0, 0x7FF8000000000000), as RISC-V's F extension does, since numpy would propagate
  payloads and signs. Every partial sum is rounded to the type and travels in it (a bfloat16
  all-reduce accumulates in bfloat16). Not associative: the result depends on the order of the
  additions, which the schedule fixes (``golden_model.schedule``). numpy computes float32 and
  float64 sums this way; bfloat16 comes from ml_dtypes, whose add is a float32 add rounded to
  bfloat16 with ties to even, equal to the exact sum rounded once because float32 has more
  than 2 * 8 + 2 significand bits (double rounding is then innocuous: Figueroa, "When is
  double rounding innocuous?", 1995). Hardware adders: ``hdl.adders``.

Adding a type: one ``ElementType`` in :data:`ELEMENT_TYPES` (and, for hardware, its adder in
``hdl.adders``).
"""

import functools
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

__all__ = ["ElementType", "ELEMENT_TYPES", "INT32", "FLOAT32", "BFLOAT16", "FLOAT64",
           "element_type", "element_type_of"]


@dataclass(frozen=True)
class ElementType:
    """One element type.

    Attributes
    ----------
    name : str
        ``"int32"``, ``"float32"``, ...: the name options and reports use.
    bits : int
        Width of one element (bits); a 128-bit flit holds ``128 // bits`` elements.
    numpy_type : str
        The name of the numpy dtype of vectors of this type (``dtype``): a name, so that
        ``ml_dtypes`` (about a second to import), which provides bfloat16, loads only when it
        is used.
    associative : bool
        True when the golden add is associative and commutative (every summation order gives
        the same bits).
    arithmetic : str
        The add, stated exactly (rounding, subnormals, special values, overflow).
    exponent_bits, fraction_bits : int or None
        The IEEE 754 format of a float type (8 and 23 for binary32); None for integers.
    """
    name: str
    bits: int
    numpy_type: str
    associative: bool
    arithmetic: str
    exponent_bits: int | None = None
    fraction_bits: int | None = None

    @functools.cached_property
    def dtype(self):
        """The numpy dtype of vectors of this type."""
        if self.numpy_type == "bfloat16":
            import ml_dtypes  # noqa: PLC0415
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.numpy_type)

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
        # numpy's array add is the stated arithmetic for every type here (int32 arrays wrap
        # around silently, floats follow IEEE 754 with round to nearest even) but for NaNs.
        if self.exponent_bits is None:
            np.add(dst, src, out=dst)
            return
        with np.errstate(invalid="ignore", over="ignore"):
            np.add(dst, src, out=dst)
        nan = np.isnan(dst)
        if nan.any():
            dst.view(self.unsigned)[nan] = self.canonical_nan

    @property
    def is_float(self):
        """True for an IEEE 754 format."""
        return self.exponent_bits is not None

    @property
    def unsigned(self):
        """The unsigned integer dtype of this type's bit patterns."""
        return np.dtype(f"u{self.bytes}")

    @property
    def canonical_nan(self):
        """The bit pattern of the quiet NaN every NaN sum gives (None for integers)."""
        if not self.is_float:
            return None
        return ((1 << self.exponent_bits) - 1) << self.fraction_bits | 1 << (self.fraction_bits - 1)

    def to_bits(self, values):
        """The bit patterns of ``values`` as unsigned integers of ``bits`` bits (same shape)."""
        arr = np.ascontiguousarray(values, dtype=self.dtype)
        return arr.view(self.unsigned)

    def from_bits(self, patterns):
        """Inverse of :meth:`to_bits`: unsigned ``bits``-bit patterns to values of ``dtype``."""
        arr = np.ascontiguousarray(patterns, dtype=self.unsigned)
        return arr.view(self.dtype)


INT32 = ElementType("int32", 32, "int32", True,
                    "two's complement, addition modulo 2^32 (wraps around)")
_FLOAT = "IEEE 754 {}, round to nearest even, subnormals kept, canonical quiet NaN"
FLOAT32 = ElementType("float32", 32, "float32", False, _FLOAT.format("binary32"), 8, 23)
BFLOAT16 = ElementType("bfloat16", 16, "bfloat16", False,
                       _FLOAT.format("bfloat16 (binary32's exponent, 7-bit fraction)"), 8, 7)
FLOAT64 = ElementType("float64", 64, "float64", False, _FLOAT.format("binary64"),
                      11, 52)

#: name -> ElementType.
ELEMENT_TYPES = {t.name: t for t in (INT32, FLOAT32, BFLOAT16, FLOAT64)}


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
