"""The exact-sum reference of the float accuracy figures (``golden_model.accuracy``): computed
once it gives what each call computes alone, and its exactly rounded sums are exact."""

import fractions
import math

import numpy as np
import pytest

from golden_model.accuracy import accuracy, exact_reference, exactly_rounded_sum


def _inputs():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 500)) * 1e-3).astype(np.float32)
    x[:, 0] = [1e30, 1.0, -1e30, 2.0**-20, 0.0, -1.0]   # cancellation: not exact in float64
    x[:, 1] = [np.inf, 1, 2, 3, 4, 5]                     # a non-finite input
    x[:, 2] = [np.float32(2.0**-149)] * 6                # subnormals
    return x


def test_reference_is_what_each_call_computes():
    x = _inputs()
    ref = exact_reference(x, "float32")
    assert list(np.nonzero(~ref.finite)[0]) == [1]
    assert np.array_equal(ref.rounded, exactly_rounded_sum(x[:, ref.finite], "float32"))
    got = x.sum(axis=0, dtype=np.float32)
    assert accuracy(got, x, "float32", ref) == accuracy(got, x, "float32")


def test_rounded_sums_are_the_exact_sums_rounded_once():
    x = _inputs()
    ref = exact_reference(x, "float32")
    cols = np.nonzero(ref.finite)[0]
    for k, j in enumerate(cols.tolist()):
        exact = sum(map(fractions.Fraction, x[:, j].astype(np.float64).tolist()))
        want = np.float32(float(exact))     # exact in float64 here, so rounded once
        assert float(exact) == exact or j == 0
        assert ref.rounded[k] == want, j
    assert ref.rounded[0] == np.float32(2.0**-20)           # 1e30 - 1e30 + 1 - 1 + 2^-20
    assert ref.rounded[1] == np.float32(6 * 2.0**-149)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_accuracy_of_the_exactly_rounded_sum_is_zero_ulp(dtype):
    x = _inputs()
    ref = exact_reference(x, dtype)
    result = np.zeros(x.shape[1], dtype=ref.rounded.dtype)
    result[ref.finite] = ref.rounded
    acc = accuracy(result, x, dtype, ref)
    assert acc["max_ulp_error"] == 0 and acc["exactly_rounded"] == 1.0
    assert acc["finite_elements"] == x.shape[1] - 1
    assert math.isfinite(acc["max_relative_error"])
