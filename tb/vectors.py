"""Stimulus vectors for the all-reduce tests, in any element type (``golden_model.elements``).

``random_vectors(num_nodes, elements, element_type, seed)`` gives an (N, D) array:

* int32: uniform over all 2^32 values (sums wrap around);
* floats: values whose sum depends on the order of the additions: magnitudes spread over
  2^-30 .. 2^30 with random signs, one node's value cancelling another's, and about 2% special
  values (both zeros, subnormals, the largest finite values, whose sums overflow, infinities of
  both signs and NaNs), so that the summation order, rounding, overflow and NaN rules all
  show in the bits.
"""

from __future__ import annotations

import numpy as np

from golden_model.elements import element_type as _element_type

__all__ = ["random_vectors", "order_sensitive"]


def random_vectors(num_nodes, elements, element_type="int32", seed=0):
    """(``num_nodes``, ``elements``) array of ``element_type``'s numpy dtype (module docstring)."""
    t = _element_type(element_type)
    rng = np.random.default_rng(seed)
    if not t.is_float:
        info = np.iinfo(t.dtype)
        return rng.integers(int(info.min), int(info.max) + 1, size=(num_nodes, elements),
                            dtype=np.int64).astype(t.dtype)
    return order_sensitive(rng, num_nodes, elements, t)


def order_sensitive(rng, num_nodes, elements, t):
    """Float vectors of type ``t`` whose all-reduced bits depend on the summation order."""
    shape = (num_nodes, elements)
    mags = np.ldexp(1.0 + rng.random(shape), rng.integers(-30, 31, size=shape))
    vals = np.where(rng.random(shape) < 0.5, -mags, mags)
    if num_nodes > 1:                       # cancellation: node 1 undoes part of node 0
        cancel = rng.random(elements) < 0.1
        vals[1, cancel] = -vals[0, cancel]
    vals = vals.astype(t.dtype)
    pats = t.to_bits(vals).copy()
    fw, ew = t.fraction_bits, t.exponent_bits
    top, sign = (1 << ew) - 1, 1 << (t.bits - 1)
    specials = np.array([0, sign, 1, sign | (1 << fw) - 1, (top - 1) << fw | (1 << fw) - 1,
                         sign | (top - 1) << fw | (1 << fw) - 1, top << fw, sign | top << fw,
                         top << fw | 1, sign | top << fw | 1 << (fw - 1)], dtype=np.uint64)
    where = rng.random(shape) < 0.02
    pats[where] = specials[rng.integers(0, len(specials), size=int(where.sum()))].astype(pats.dtype)
    return t.from_bits(pats)
