"""An exact-arithmetic reference for IEEE 754 addition of any binary format, independent of numpy
and ml_dtypes: operands decoded to Python integers (scaled by the format's smallest subnormal),
summed exactly and rounded once, to nearest with ties to even (IEEE 754-2019 4.3.1), with
subnormals kept, +0 for an exact zero sum unless both operands are -0 (6.3), overflow to
infinity, and the canonical quiet NaN for NaN operands and inf + -inf."""


def float_fields(bits, exponent_bits, fraction_bits):
    """(sign, exponent field, fraction field) of a bit pattern."""
    return (bits >> (exponent_bits + fraction_bits),
            (bits >> fraction_bits) & ((1 << exponent_bits) - 1),
            bits & ((1 << fraction_bits) - 1))


def exact_add(a, b, exponent_bits, fraction_bits):
    """The bit pattern of the correctly rounded sum of the bit patterns ``a`` and ``b``."""
    top = (1 << exponent_bits) - 1
    inf = top << fraction_bits
    nan = inf | 1 << (fraction_bits - 1)
    sa, ea, fa = float_fields(a, exponent_bits, fraction_bits)
    sb, eb, fb = float_fields(b, exponent_bits, fraction_bits)
    sign_bit = 1 << (exponent_bits + fraction_bits)
    if (ea == top and fa) or (eb == top and fb):
        return nan
    if ea == top and eb == top:
        return nan if sa != sb else a
    if ea == top:
        return a
    if eb == top:
        return b

    def scaled(s, e, f):        # value / smallest subnormal, exactly
        sig = f | (1 << fraction_bits if e else 0)
        v = sig << (max(e, 1) - 1)
        return -v if s else v

    total = scaled(sa, ea, fa) + scaled(sb, eb, fb)
    if total == 0:
        return sign_bit if (sa and sb) else 0
    sign = sign_bit if total < 0 else 0
    mag = abs(total)
    shift = max(mag.bit_length() - (fraction_bits + 1), 0)
    q, r = divmod(mag, 1 << shift)
    if shift:
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        if q >> (fraction_bits + 1):
            q >>= 1
            shift += 1
    field = shift + 1 if q >> fraction_bits else 0
    if field >= top:
        return sign | inf
    return sign | field << fraction_bits | (q & ((1 << fraction_bits) - 1))


def edge_pairs(exponent_bits, fraction_bits):
    """Operand pairs of every edge class: subnormal inputs and results, cancellation to zero and
    to a subnormal, carries into a new exponent, rounding ties, overflow to infinity,
    inf - inf, NaN inputs, signed zeros. A list of (a, b) bit patterns."""
    top = (1 << exponent_bits) - 1
    fw = fraction_bits
    sign = 1 << (exponent_bits + fw)
    fmask = (1 << fw) - 1

    def f(e, frac, s=0):
        return (sign if s else 0) | e << fw | frac

    inf, qnan, snan = f(top, 0), f(top, 1 << (fw - 1)), f(top, 1)
    max_finite, min_normal, min_sub, max_sub = f(top - 1, fmask), f(1, 0), f(0, 1), f(0, fmask)
    one, bias = f(top // 2, 0), top // 2
    pairs = [
        (0, 0), (sign, sign), (0, sign), (sign, 0),                     # signed zeros
        (one, one | sign), (one | sign, one), (max_finite, max_finite | sign),   # x - x = +0
        (min_sub, min_sub), (max_sub, min_sub), (max_sub, max_sub),      # subnormal sums
        (min_normal, min_sub | sign), (min_normal | sign, min_sub),     # normal -> subnormal
        (f(1, 5), f(1, 3) | sign), (f(2, 0), f(1, fmask) | sign),       # cancellation
        (min_sub, one), (min_sub | sign, one), (min_sub, sign),
        (max_finite, max_finite), (max_finite, f(top - fw - 1, 0)),     # overflow, tie to even
        (max_finite, f(top - fw - 2, 0)), (max_finite | sign, max_finite | sign),
        (inf, inf), (inf, inf | sign), (inf | sign, inf), (inf | sign, inf | sign),
        (inf, one), (one | sign, inf | sign), (inf, max_finite | sign),
        (qnan, one), (one, qnan), (snan, inf), (inf | sign, qnan | sign), (qnan, snan),
        (snan | sign, 0), (f(top, fmask), f(top, fmask, 1)),
        (f(bias, fmask), f(bias - fw, 0)), (f(bias, fmask), f(bias - fw - 1, 0)),  # carries
        (f(bias, 1), f(bias - fw - 1, 0)), (f(bias, 0), f(bias - fw - 1, 0)),    # ties
        (f(bias, 1), f(bias - fw - 1, 1)), (f(bias, fmask), f(bias, fmask)),
        (f(bias, 0), f(bias - 1, fmask) | sign), (f(bias + 1, 0), f(bias - fw - 2, 1) | sign),
        (f(bias, 0), f(bias - fw - 2, 0) | sign), (f(bias, 0), f(bias - fw - 1, 0) | sign),
        (f(bias, 0), f(0, 1)), (f(3, 0), f(0, fmask) | sign), (f(top - 1, 0), f(1, 0)),
    ]
    # every exponent distance around the significand's width, both signs
    for d in range(0, fw + 6):
        for s in (0, 1):
            pairs.append((f(bias, fmask >> 1 | 1), f(max(bias - d, 0), fmask, s)))
            pairs.append((f(d + 1, 3), f(1, fmask, s)))
    return pairs
