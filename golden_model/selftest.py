"""The board self-test's data and expected results (``hdl.selftest`` builds the same in hardware).

Data. Every node fills its buffer from ``lanes`` pseudo-random generators, one per element of a
flit: lane k of node v is Marsaglia's xorshift32 (shifts 13, 17, 5; G. Marsaglia, "Xorshift
RNGs", Journal of Statistical Software 8(14), 2003) seeded with :func:`seeds`; flit f's lane k
holds the generator's state after f + 1 steps, turned into an element by
:func:`element_bits`. So a node's vector is element ``f * lanes + k`` = lane k of flit f, the
buffer's own layout when the chunks are flit-aligned (``allreduce_rtl.board`` checks that).

Checks. int32 results are compared on chip with the sum over nodes of the same generators'
streams, recomputed by separate generators and adders (wrap-around, so any order gives the same
bits). Float results are compared with a per-node :func:`checksum` of the golden executor's
result (``golden_model.executor.execute``, the schedule's summation order), computed here at
build time and carried in the bitstream.
"""

import numpy as np

from .elements import element_type

__all__ = ["XORSHIFT32_SHIFTS", "SEED_STEP", "FLOAT_EXPONENTS", "seeds", "xorshift32",
           "random_words", "element_bits", "selftest_vectors", "checksum"]

#: xorshift32's shifts (Marsaglia 2003, the triple (13, 17, 5)): x ^= x << 13; x ^= x >> 17;
#: x ^= x << 5, all modulo 2^32.
XORSHIFT32_SHIFTS = (13, 17, 5)
#: Seeds are multiples of this odd constant (2^32 / golden ratio), so no two lanes share one.
SEED_STEP = 0x9E3779B9
#: Float elements: sign and fraction from the random word, the biased exponent 120 + bits
#: 23..25 of it (8 binades, 2^-7 <= |x| < 2^1): mixed magnitudes, whose sum's rounding depends
#: on the order of the additions.
FLOAT_EXPONENTS = (120, 3)
_MASK = 0xFFFFFFFF


def seeds(num_nodes, lanes):
    """``(num_nodes, lanes)`` uint32: lane k of node v starts at ``SEED_STEP * (v * lanes + k +
    1) mod 2^32`` (never 0, which xorshift32 cannot leave: ``SEED_STEP`` is odd and the factor
    is below 2^32)."""
    index = np.arange(1, num_nodes * lanes + 1, dtype=np.uint64).reshape(num_nodes, lanes)
    return ((index * SEED_STEP) & _MASK).astype(np.uint32)


def xorshift32(state):
    """One xorshift32 step of every state (uint32 array, any shape)."""
    a, b, c = XORSHIFT32_SHIFTS
    x = np.asarray(state, dtype=np.uint32).copy()
    x ^= x << np.uint32(a)
    x ^= x >> np.uint32(b)
    x ^= x << np.uint32(c)
    return x


def random_words(num_nodes, lanes, flits):
    """``(num_nodes, flits, lanes)`` uint32: the generators' states after 1 .. ``flits`` steps."""
    out = np.empty((num_nodes, flits, lanes), dtype=np.uint32)
    state = seeds(num_nodes, lanes)
    for f in range(flits):
        state = xorshift32(state)
        out[:, f] = state
    return out


def element_bits(words, dtype):
    """The element bit patterns (``ElementType.unsigned``) the self-test makes of random words.

    * ``int32``: the word itself (two's complement);
    * ``float32``: sign bit 31 and fraction bits 0..22 of the word, biased exponent
      ``FLOAT_EXPONENTS[0]`` + bits 23..25 (normal numbers from 2^-7 to just below 2);
    * ``bfloat16``: the upper 16 bits of that float32 (truncated: every such pattern is a
      bfloat16 of the same range).

    Raises
    ------
    ConfigError
        On an unknown element type (``golden_model.elements.element_type``).
    ValueError
        On a type this mapping does not cover.
    """
    t = element_type(dtype)
    w = np.asarray(words, dtype=np.uint32)
    if t.name == "int32":
        return w.astype(t.unsigned)
    if t.name not in ("float32", "bfloat16"):
        raise ValueError(f"the self-test makes int32, float32 or bfloat16 elements, not {t.name}")
    base, bits = FLOAT_EXPONENTS
    exponent = (np.uint32(base) + ((w >> np.uint32(23)) & np.uint32((1 << bits) - 1)))
    f32 = (w & np.uint32(0x807FFFFF)) | (exponent << np.uint32(23))
    return (f32 if t.name == "float32" else f32 >> np.uint32(16)).astype(t.unsigned)


def selftest_vectors(num_nodes, lanes, flits, dtype):
    """``(num_nodes, flits * lanes)`` vectors of ``dtype``'s numpy type: what the self-test
    loads (element ``f * lanes + k`` of node v = lane k of node v's flit f)."""
    t = element_type(dtype)
    patterns = element_bits(random_words(num_nodes, lanes, flits), t)
    return t.from_bits(patterns.reshape(num_nodes, -1).astype(np.uint64)).astype(t.dtype)


def checksum(patterns):
    """The self-test's checksum of one node's result: ``c = rotl32(c, 1) ^ p`` over the bit
    patterns ``p`` (zero-extended to 32 bits) in buffer order (flit by flit, lane 0 first),
    from ``c = 0``. Order-sensitive, so a swapped pair of flits is caught.

    Parameters
    ----------
    patterns : array of unsigned ints, any shape (flattened in C order)

    Returns
    -------
    int
    """
    c = 0
    for p in np.asarray(patterns).reshape(-1).tolist():
        c = (((c << 1) | (c >> 31)) & _MASK) ^ int(p)
    return c
