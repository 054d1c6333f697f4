"""Comparisons and selections written so that the generated Verilog passes ``verilator -Wall``.

Amaranth's netlist writes constants at their minimal width and ``x == 0`` as ``!x``, so
``remaining == 1`` (20 bits) becomes ``remaining == 1'h1`` and Verilator reports WIDTHEXPAND; a
variable ``word_select`` becomes a truncated shift (WIDTHTRUNC). These helpers express the same
logic through XOR with a full-width constant (folded into bit inversions), an adder's carry with
a constant whose top bit is set, reductions and multiplexer trees, which print width-exact. Use them instead of ``==``/``<`` with a constant.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.utils import ceil_log2

__all__ = ["eq_const", "lt_const", "ge_const", "is_zero", "select_word", "add_narrow",
           "lt_unsigned", "shl_bounded", "first_set", "last_set"]


def eq_const(value, k):
    """``value == k`` for a non-negative integer ``k`` (1 bit)."""
    value = Value.cast(value)
    width = len(value)
    if k < 0 or k >> width:
        return Const(0, 1)
    if width == 0:
        return Const(1, 1)
    return ~(value ^ Const(k, width)).any()


def ge_const(value, k):
    """``value >= k`` for an unsigned ``value`` and an integer ``k`` (1 bit): for
    ``k <= 2^(w-1)`` the carry out of ``value + (2^w - k)``, one adder whose constant has its
    top bit set (so it prints at full width); above, the top bit and the rest against
    ``k - 2^(w-1)``."""
    value = Value.cast(value)
    width = len(value)
    if k <= 0:
        return Const(1, 1)
    if k >= 1 << width:
        return Const(0, 1)
    half = 1 << (width - 1)
    if k > half:
        return value[-1] & ge_const(value[:-1], k - half)
    return (value + Const((1 << width) - k, width))[width]


def lt_const(value, k):
    """``value < k`` for an unsigned ``value`` and an integer ``k`` (1 bit)."""
    return ~ge_const(value, k)


def add_narrow(value, small):
    """``(value + small)`` modulo ``2 ** len(value)`` for unsigned ``small`` no wider than
    ``value``: the low bits added at ``small``'s width, the carry (one bit, which Verilator
    does not flag) into the high bits, so no operand is printed narrower than its sum."""
    value, small = Value.cast(value), Value.cast(small)
    n = len(small)
    if n >= len(value):
        return (value + small[:len(value)])[:len(value)]
    low = value[:n] + small
    return Cat(low[:n], (value[n:] + low[n])[:len(value) - n])


def is_zero(value):
    """``value == 0`` (1 bit)."""
    return ~Value.cast(value).any()


def select_word(vector, index, width, count):
    """Word ``index`` of the ``count`` ``width``-bit words packed in ``vector`` (word 0 lowest);
    0 when ``index >= count``. A multiplexer tree on the bits of ``index``."""
    vector, index = Value.cast(vector), Value.cast(index)
    words = [vector[i * width:(i + 1) * width] for i in range(count)]
    level = 0
    while len(words) > 1:
        if len(words) % 2:
            words.append(Const(0, width))
        words = [Mux(index[level], hi, lo) for lo, hi in zip(words[0::2], words[1::2])]
        level += 1
    if level < len(index):
        return Mux(index[level:].any(), Const(0, width), words[0])
    return words[0]



def lt_unsigned(a, b):
    """``a < b`` for unsigned values of any widths, written with equal-width operands (Amaranth
    prints zero extension as a plain operand, which Verilator reports as WIDTHEXPAND)."""
    a, b = Value.cast(a), Value.cast(b)
    if len(a) > len(b):
        return ~a[len(b):].any() & (a[:len(b)] < b)
    if len(b) > len(a):
        return b[len(a):].any() | (a < b[:len(a)])
    return a < b


def shl_bounded(value, amount, width, max_amount):
    """``(value << amount)[:width]`` for ``amount <= max_amount``, as a multiplexer over the
    constant shifts (Verilog ``<<`` of a variable amount widens its operand)."""
    value = Value.cast(value)
    expr = Const(0, width)
    for k in reversed(range(max_amount + 1)):
        shifted = Cat(Const(0, k), value)[:width] if k else value
        if len(shifted) < width:
            shifted = Cat(shifted, Const(0, width - len(shifted)))
        expr = Mux(eq_const(amount, k), shifted, expr)
    return expr


def first_set(m, bits, name):
    """``(any, index)`` of the lowest set bit of a list of 1-bit values, as two combinational
    signals named after ``name`` added to module ``m`` (index 0 when none is set)."""
    return _priority(m, bits, reversed(range(len(bits))), name)


def last_set(m, bits, name):
    """``(any, index)`` of the highest set bit, as :func:`first_set` gives the lowest."""
    return _priority(m, bits, range(len(bits)), name)


def _priority(m, bits, order, name):
    # the index multiplexer chain: the bit visited last takes precedence
    width = max(1, ceil_log2(len(bits)))
    index = Signal(width, name=f"{name}_index")
    any_ = Signal(name=f"{name}_any")
    m.d.comb += any_.eq(Cat(*bits).any())
    expr = Const(0, width)
    for i in order:
        expr = Mux(bits[i], Const(i, width), expr)
    m.d.comb += index.eq(expr)
    return any_, index
