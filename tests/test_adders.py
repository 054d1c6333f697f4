"""The floating-point adders (``hdl.adders.FloatAdder``) and the golden add
(``golden_model.elements``) against an exact-arithmetic reference (``float_reference``), and
float32 against numpy: every edge class, and random operand pairs from vector files in Verilator
(a million per type with ``-m slow``) and Icarus."""

import numpy as np
import pytest
from float_reference import edge_pairs, exact_add

from golden_model.elements import BFLOAT16, FLOAT32, element_type
from tb.adder import AdderBuild

FLOATS = (FLOAT32, BFLOAT16)


def random_pairs(t, n, seed):
    """``n`` operand pairs: half uniform bit patterns (every exponent, NaNs and infinities
    included), half with close exponents and random signs (cancellation, carries, ties)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << t.bits, size=n, dtype=np.uint64)
    b = rng.integers(0, 1 << t.bits, size=n, dtype=np.uint64)
    half = n // 2
    near = rng.integers(0, 1 << (t.fraction_bits + 3), size=half, dtype=np.uint64)
    flip = rng.integers(0, 2, size=half, dtype=np.uint64) << np.uint64(t.bits - 1)
    b[:half] = a[:half] ^ near ^ flip
    return a.astype(t.unsigned), b.astype(t.unsigned)


def with_edges(t, n, seed):
    edges = edge_pairs(t.exponent_bits, t.fraction_bits)
    ea = np.array([p[0] for p in edges], dtype=t.unsigned)
    eb = np.array([p[1] for p in edges], dtype=t.unsigned)
    a, b = random_pairs(t, n, seed)
    return np.concatenate([ea, eb, a]), np.concatenate([eb, ea, b])


def reference(t, a, b):
    """The exact reference's sums (bfloat16), or numpy's with NaNs made canonical (float32)."""
    if t is FLOAT32:
        with np.errstate(invalid="ignore", over="ignore"):
            s = (a.view(np.float32) + b.view(np.float32)).view(np.uint32).copy()
        s[np.isnan(s.view(np.float32))] = 0x7FC00000
        return s
    return np.array([exact_add(int(x), int(y), t.exponent_bits, t.fraction_bits)
                     for x, y in zip(a.tolist(), b.tolist())], dtype=t.unsigned)


def check(t, a, b, got):
    want = reference(t, a, b)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), (f"{len(bad)} of {len(a)} {t.name} sums differ, e.g. "
                          + ", ".join(f"{int(a[i]):#x} + {int(b[i]):#x} = {int(got[i]):#x}, "
                                      f"not {int(want[i]):#x}" for i in bad[:4]))


@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.name)
def test_golden_add_is_the_exact_sum_rounded_once(t):
    """The golden add (numpy, ml_dtypes for bfloat16, canonical NaN) equals the exact reference
    on every edge class and 20,000 random pairs."""
    a, b = with_edges(t, 20_000, 1)
    got = t.from_bits(a).copy()
    t.add(got, t.from_bits(b))
    want = np.array([exact_add(int(x), int(y), t.exponent_bits, t.fraction_bits)
                     for x, y in zip(a.tolist(), b.tolist())], dtype=t.unsigned)
    assert np.array_equal(t.to_bits(got), want)


def test_exact_reference_agrees_with_numpy_float32():
    """The reference itself, checked on float32 against numpy (the two are independent)."""
    a, b = with_edges(FLOAT32, 20_000, 2)
    want = np.array([exact_add(int(x), int(y), 8, 23) for x, y in zip(a.tolist(), b.tolist())],
                    dtype=np.uint32)
    assert np.array_equal(reference(FLOAT32, a, b), want)


def test_edge_pairs_cover_every_class():
    """The edge list reaches what it claims: subnormal results, exact zeros of both signs,
    infinities from finite operands, NaNs, carries and results rounded up (bfloat16)."""
    t = BFLOAT16
    pairs = edge_pairs(8, 7)
    sums = [exact_add(a, b, 8, 7) for a, b in pairs]
    exp = [(s >> 7) & 0xFF for s in sums]
    assert any(e == 0 and s & 0x7F for e, s in zip(exp, sums))             # subnormal result
    assert 0 in sums and 0x8000 in sums                                     # +0 and -0
    assert t.canonical_nan in sums
    finite_inf = [(a, b) for (a, b), s in zip(pairs, sums)
                  if s & 0x7FFF == 0x7F80 and (a >> 7) & 0xFF != 0xFF and (b >> 7) & 0xFF != 0xFF]
    assert finite_inf                                                        # overflow


@pytest.mark.parametrize("sim, n", [("verilator", 200_000), ("icarus", 5_000)])
@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.name)
def test_float_adder_in_simulation(t, sim, n):
    """The adder's Verilog, fed a pair per cycle from a vector file: every edge class and ``n``
    random pairs, bit for bit."""
    a, b = with_edges(t, n, 3)
    check(t, a, b, AdderBuild(t, sim).run(a, b))


@pytest.mark.slow
@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.name)
def test_float_adder_a_million_pairs_in_verilator(t):
    a, b = with_edges(t, 1_000_000, 4)
    check(t, a, b, AdderBuild(t, "verilator").run(a, b))


def test_int32_has_no_adder_harness_latency():
    """The harness needs a pipelined adder: the combinational int32 one is refused by name."""
    with pytest.raises(ValueError, match="latency of 1 or more, not 0"):
        AdderBuild(element_type("int32"), "verilator")
