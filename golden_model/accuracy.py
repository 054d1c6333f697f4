"""Accuracy of a float all-reduce against the exact sum: the exactly rounded sum of every element
and the error of a result in relative terms and in units in the last place (ulp).

The exact sum of an element's N inputs is computed in float64 with an error-free transformation
(Knuth's TwoSum on every addition); where some addition was not exact (inputs of very different
magnitudes) the element is summed again as Python ``fractions.Fraction``. The exact sum is then
rounded once to the element type, to nearest with ties to even, subnormals kept (float64 to
float32 is numpy's correctly rounded cast; float64 to bfloat16 is ml_dtypes', also correctly
rounded; a Fraction is rounded here by integer arithmetic). The ulp of a value x of a format with
``fraction_bits`` f and minimum normal exponent e_min is 2^(max(floor(log2|x|), e_min) - f)
(IEEE 754-2019 2.1, "unit in the last place", for |x| in the finite range).
"""

from __future__ import annotations

import dataclasses
import fractions
import math

import numpy as np

from .elements import element_type as _element_type

__all__ = ["exact_sums", "exactly_rounded_sum", "ulp", "accuracy", "ExactReference",
           "exact_reference"]


def exact_sums(values):
    """Exact column sums of ``values`` ((N, D), any float type numpy can widen to float64 exactly;
    float64 is used as it is).

    Returns
    -------
    (sums, exact) : (numpy.ndarray (D,) float64, numpy.ndarray (D,) bool)
        ``sums[j]`` is the exact sum where ``exact[j]``; elsewhere (a TwoSum error term was not
        zero) the float64 sum, and ``exact_fractions`` must be used.
    """
    x = np.asarray(values, dtype=np.float64)
    s = x[0].copy()
    exact = np.isfinite(s)
    with np.errstate(invalid="ignore", over="ignore"):
        for row in x[1:]:
            t = s + row
            bp = t - s
            err = (s - (t - bp)) + (row - bp)
            exact &= (err == 0) & np.isfinite(t)
            s = t
    return s, exact


def _round_fraction(q, t):
    """The float64 value of the Fraction ``q`` rounded once to the float type ``t``."""
    if q == 0:
        return 0.0
    fw = t.fraction_bits
    bias = (1 << (t.exponent_bits - 1)) - 1
    tiny = fractions.Fraction(1, 2 ** (bias - 1 + fw))      # smallest subnormal
    mag = abs(q) / tiny
    shift = max(math.floor(math.log2(mag)) + 1 - (fw + 1), 0) if mag >= 1 else 0
    # math.log2 of a Fraction can be off by one near powers of two: fix the width exactly
    while mag >= 2 ** (fw + 1 + shift):
        shift += 1
    while shift and mag < 2 ** (fw + shift):
        shift -= 1
    scaled = mag / 2 ** shift
    n = math.floor(scaled)
    rem = scaled - n
    if rem > fractions.Fraction(1, 2) or (rem == fractions.Fraction(1, 2) and n & 1):
        n += 1
    value = n * 2 ** shift * tiny
    if value >= 2 ** (bias + 1):
        return math.copysign(math.inf, q)
    return math.copysign(float(value), q)


def exactly_rounded_sum(values, element_type):
    """The exact sum of each column of ``values`` ((N, D) of a float element type) rounded once
    to the type: numpy.ndarray (D,) of its dtype. Columns with a non-finite input are summed as
    the golden add would not define them exactly; they are left as the float64 sum, rounded."""
    x = np.asarray(values).astype(np.float64)
    return _rounded(x, _element_type(element_type), *exact_sums(x))


def _rounded(x, t, sums, exact):
    """:func:`exactly_rounded_sum` of the float64 columns ``x`` with their :func:`exact_sums`."""
    redo = np.nonzero(~exact & np.isfinite(x).all(axis=0))[0]
    if len(redo):
        cols = x[:, redo]
        sums = sums.copy()
        for k, j in enumerate(redo.tolist()):
            q = sum((fractions.Fraction(v) for v in cols[:, k].tolist()), fractions.Fraction(0))
            sums[j] = _round_fraction(q, t)
    with np.errstate(over="ignore"):
        return sums.astype(t.dtype)


@dataclasses.dataclass(frozen=True)
class ExactReference:
    """What :func:`accuracy` compares a result with, computed once for the inputs
    (:func:`exact_reference`).

    Attributes
    ----------
    finite : numpy.ndarray (D,) bool
        The elements whose inputs are all finite; the other arrays hold only those.
    sums, exact : numpy.ndarray (F,) float64 and bool
        :func:`exact_sums` of those elements.
    rounded : numpy.ndarray (F,) of the element type's dtype
        :func:`exactly_rounded_sum` of those elements.
    """

    finite: np.ndarray
    sums: np.ndarray
    exact: np.ndarray
    rounded: np.ndarray


def exact_reference(inputs, element_type):
    """The :class:`ExactReference` of ``inputs`` ((N, D), a float element type)."""
    t = _element_type(element_type)
    x = np.asarray(inputs).astype(np.float64)
    finite = np.isfinite(x).all(axis=0)
    if not finite.all():
        x = x[:, finite]
    sums, exact = exact_sums(x)
    return ExactReference(finite, sums, exact, _rounded(x, t, sums, exact))


def ulp(x, element_type):
    """The ulp of each finite value of ``x`` in the float type (float64 array)."""
    t = _element_type(element_type)
    bias = (1 << (t.exponent_bits - 1)) - 1
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    return np.ldexp(1.0, (np.maximum(e, 1 - bias) - t.fraction_bits).astype(np.int64))


def accuracy(result, inputs, element_type, reference=None):
    """Errors of an all-reduced vector against the exact sum of the inputs.

    Parameters
    ----------
    result : numpy.ndarray (D,)
        One node's result, in the element type.
    inputs : numpy.ndarray (N, D)
        Every node's input, in the element type.
    reference : ExactReference, optional
        ``exact_reference(inputs, element_type)``, when the caller has it (it is the costly
        part: several results of one input share it).

    Returns
    -------
    dict
        ``max_relative_error`` (|result - exact| / |exact| over nonzero exact sums; where the
        exact sum does not fit a float64, the exactly rounded sum stands for it),
        ``max_ulp_error`` (|result - exactly rounded sum| in ulps of the exactly rounded sum),
        ``exactly_rounded`` (fraction of elements equal to the exactly rounded sum, bit for
        bit), over the elements whose inputs are all finite (``finite_elements``).
    """
    t = _element_type(element_type)
    ref = exact_reference(inputs, t) if reference is None else reference
    finite, sums, exact, rounded = ref.finite, ref.sums, ref.exact, ref.rounded
    got = np.asarray(result)[finite]
    g = got.astype(np.float64)
    r = rounded.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        exact_vals = np.where(exact, sums, r)
        rel = np.abs(g - exact_vals) / np.abs(exact_vals)
        ulps = np.abs(g - r) / ulp(r, t)
    rel = rel[np.isfinite(rel)]
    ulps = ulps[np.isfinite(ulps)]
    same = t.to_bits(got) == t.to_bits(rounded)
    return {"max_relative_error": float(rel.max()) if rel.size else 0.0,
            "max_ulp_error": float(ulps.max()) if ulps.size else 0.0,
            "exactly_rounded": float(same.mean()) if same.size else 1.0,
            "finite_elements": int(finite.sum())}
