"""The hardware adder of each element type (``golden_model.elements``), as the reduction unit
uses it.

An adder says its latency in cycles and builds ``a + b`` on two elements' bit patterns in a
module (``add(m, a, b)``: the sum of the operands of cycle t is on the returned value in cycle
t + ``latency``); it must compute exactly the type's golden add (``ElementType.add``), which the
scoreboard checks bit for bit. ``NIConfig`` refuses an element type without an adder here. The
reduction unit (``hdl.reduction``) is built for any latency.

* ``int32``: two's-complement addition modulo 2^32, combinational (latency 0).
* ``float32``, ``bfloat16``: :class:`FloatAdder`, IEEE 754 addition with round to nearest even,
  subnormals kept and the canonical quiet NaN (exactly ``golden_model.elements``' arithmetic),
  pipelined in 2 stages (latency 2).

Adding a type's adder: a class with ``latency`` and ``add``, and its entry in :data:`ADDERS`
(a function of the ``ElementType``).
"""

import contextlib
import contextvars

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .ops import ge_const, is_zero

__all__ = ["IntAdder", "FloatAdder", "AdderUnit", "ADDERS", "hardware_adder", "stuck_sum_bit"]


class IntAdder:
    """Two's-complement adder modulo ``2**bits`` (wraps around).

    Parameters
    ----------
    bits : int
        Element width.
    latency : int
        Register stages after the add (0: combinational, the NI's; more only to test a pipelined
        reduction unit with exact integer arithmetic).
    """

    def __init__(self, bits, latency=0):
        self.bits, self.latency = bits, latency

    def add(self, m, a, b):
        """``(a + b) mod 2**bits`` as a ``bits``-wide value, ``latency`` cycles later."""
        value = (Value.cast(a) + Value.cast(b))[:self.bits]
        for _ in range(self.latency):
            reg = Signal(self.bits, reset_less=True)
            m.d.sync += reg.eq(value)
            value = reg
        return value


class FloatAdder:
    """IEEE 754 adder of one binary format, two pipeline stages (``latency`` = 2).

    The arithmetic is ``golden_model.elements``' (round to nearest even, subnormals kept, +0 for
    an exact zero sum unless both operands are -0, overflow to infinity, the canonical quiet NaN
    for inf + -inf and NaN operands). The textbook algorithm (Muller et al., *Handbook of
    Floating-Point Arithmetic*, 2nd ed., section 7.3) with guard, round and sticky bits, which
    suffice for a correctly rounded add or subtract:

    * stage 1 (registered): unpack (a subnormal's exponent counts as 1, its hidden bit 0), order
      the operands by magnitude, shift the smaller significand right by the exponent difference
      into guard, round and sticky, add or subtract;
    * stage 2 (registered): normalise (one right shift on a carry; a left shift by the leading
      zeros, at most down to exponent 1, so a result below the normal range stays subnormal, in
      binary steps that count and shift at once),
      round to nearest even on guard, round and sticky, pack, and substitute the special results.

    Parameters
    ----------
    exponent_bits, fraction_bits : int
        The format (8 and 23 for binary32, 8 and 7 for bfloat16).
    """

    latency = 2

    def __init__(self, exponent_bits, fraction_bits):
        if exponent_bits < 2 or fraction_bits < 2:
            raise ValueError(f"a float format needs at least 2 exponent and 2 fraction bits, not "
                             f"{exponent_bits} and {fraction_bits}")
        self.exponent_bits, self.fraction_bits = exponent_bits, fraction_bits
        self.bits = 1 + exponent_bits + fraction_bits

    def add(self, m, a, b):
        """The rounded sum of the bit patterns ``a`` and ``b``, 2 cycles later."""
        ew, fw = self.exponent_bits, self.fraction_bits
        top = (1 << ew) - 1
        a, b = Value.cast(a)[:self.bits], Value.cast(b)[:self.bits]
        x = fw + 4                   # significand with its hidden bit, guard, round and sticky

        def fields(v):
            exp, frac = v[fw:fw + ew], v[:fw]
            return v[-1], exp, frac, exp == top

        sa, ea, fa, a_top = fields(a)
        sb, eb, fb, b_top = fields(b)
        nan_in = (a_top & fa.any()) | (b_top & fb.any()) | (a_top & b_top & (sa != sb))
        inf_in = a_top | b_top
        swap = b[:-1] > a[:-1]       # magnitudes compare as unsigned integers
        # named signals: Amaranth's Verilog repeats an unnamed expression in each of its slices
        big, small = Signal(self.bits), Signal(self.bits)
        m.d.comb += [big.eq(Mux(swap, b, a)), small.eq(Mux(swap, a, b))]
        s_big, e_big, f_big, _ = fields(big)
        s_small, e_small, f_small, _ = fields(small)
        eff_big, eff_small, diff, dist = Signal(ew), Signal(ew), Signal(ew), Signal(ew)
        m.d.comb += [eff_big.eq(Mux(is_zero(e_big), 1, e_big)),
                     eff_small.eq(Mux(is_zero(e_small), 1, e_small)),
                     diff.eq((eff_big - eff_small)[:ew]),
                     dist.eq(Mux(ge_const(diff, x + 1), x, diff))]
        sig_big = Cat(Const(0, 3), f_big, e_big.any())          # x bits
        sig_small = Cat(Const(0, 3), f_small, e_small.any())
        wide = Signal(2 * x)           # kept, then shifted out
        m.d.comb += wide.eq(Cat(Const(0, x), sig_small) >> dist)
        aligned = wide[x:] | Cat(wide[:x].any(), Const(0, x - 1))
        subtract = s_big ^ s_small
        total = Mux(subtract, sig_big - aligned, sig_big + aligned)[:x + 1]

        # Pipeline registers hold data only (the reduction unit's valid bits are reset), so they
        # have no reset: a reset multiplexer per bit would be logic, and code Verilator runs.
        r_sign, r_exp, r_total = (Signal(reset_less=True), Signal(ew, reset_less=True),
                                  Signal(x + 1, reset_less=True))
        r_nan, r_inf, r_inf_sign, r_zero_sign = (Signal(reset_less=True) for _ in range(4))
        m.d.sync += [r_sign.eq(s_big), r_exp.eq(eff_big), r_total.eq(total),
                     r_nan.eq(nan_in), r_inf.eq(inf_in), r_inf_sign.eq(s_big),
                     r_zero_sign.eq(sa & sb)]

        # Stage 2: normalise, round, pack.
        carry = r_total[x]
        # Left shift by min(leading zeros, exponent - 1) in binary steps (16, 8, 4, 2, 1 for
        # float32): a step is taken when the value's top bits of its width are zero and the
        # exponent has room for it, which picks the binary digits of that minimum greedily.
        room = Signal(ew)              # exponent - 1 - the shift so far (minus k: an add of
        #                                the full-width constant 2^ew - k, which lints clean)
        m.d.comb += room.eq((r_exp - 1)[:ew])
        left = r_total[:x]
        for j in reversed(range((x - 1).bit_length())):
            k = 1 << j
            take, shifted, rest_room = Signal(), Signal(x), Signal(ew)
            m.d.comb += [take.eq(is_zero(left[x - k:]) & ge_const(room, k)),
                         shifted.eq(Mux(take, Cat(Const(0, k), left[:x - k]), left)),
                         rest_room.eq(Mux(take, (room + Const((1 << ew) - k, ew))[:ew], room))]
            left, room = shifted, rest_room
        right = Cat(r_total[1] | r_total[0], r_total[2:x + 1])
        norm, exp = Signal(x), Signal(ew + 1)
        m.d.comb += [norm.eq(Mux(carry, right, left)),
                     exp.eq(Mux(carry, r_exp + 1, room + 1))]   # >= 1
        guard, rest, lsb = norm[2], norm[0] | norm[1], norm[3]
        mant, field = Signal(fw + 2), Signal(ew + 2)
        m.d.comb += [mant.eq(norm[3:] + (guard & (rest | lsb))),
                     field.eq(Mux(mant[fw + 1], exp + 1, Mux(mant[fw], exp, 0)))]
        frac = Mux(mant[fw + 1], mant[1:fw + 1], mant[:fw])
        finite = Signal(self.bits)
        m.d.comb += finite.eq(Mux(ge_const(field, top), Cat(Const(0, fw), Const(top, ew), r_sign),
                                  Cat(frac, field[:ew], r_sign)))
        result = Signal(self.bits, reset_less=True)
        m.d.sync += result.eq(
            Mux(r_nan, Const(top << fw | 1 << (fw - 1), self.bits),
                Mux(r_inf, Cat(Const(0, fw), Const(top, ew), r_inf_sign),
                    Mux(is_zero(r_total), Cat(Const(0, self.bits - 1), r_zero_sign), finite))))
        return result


def _float_adder(element_type):
    return FloatAdder(element_type.exponent_bits, element_type.fraction_bits)


#: Element type name -> function of the ``ElementType`` that builds its adder.
ADDERS = {"int32": lambda t: IntAdder(t.bits), "float32": _float_adder, "bfloat16": _float_adder}


def hardware_adder(element_type):
    """The adder of ``element_type`` (a ``golden_model.elements.ElementType``).

    Raises
    ------
    ValueError
        If the hardware has no adder for it (the message names the types it has).
    """
    build = ADDERS.get(element_type.name)
    if build is None:
        raise ValueError(f"the NI has no adder for {element_type.name}: its reduction unit adds "
                         f"{', '.join(ADDERS)}")
    adder = build(element_type)
    bit = _STUCK_BIT.get()
    return adder if bit is None else _StuckBit(adder, bit)


_STUCK_BIT = contextvars.ContextVar("stuck_sum_bit", default=None)


@contextlib.contextmanager
def stuck_sum_bit(bit):
    """A planted fault: every adder that :func:`hardware_adder` gives inside the ``with`` has
    bit ``bit`` of its sums stuck at 1 (the board self-test's ``--fault adder-bit``, to show
    that its check catches wrong sums). Hardware built outside is unaffected."""
    token = _STUCK_BIT.set(bit)
    try:
        yield
    finally:
        _STUCK_BIT.reset(token)


class _StuckBit:
    def __init__(self, adder, bit):
        self.adder, self.bit, self.latency = adder, bit, adder.latency

    def add(self, m, a, b):
        return self.adder.add(m, a, b) | (1 << self.bit)


class AdderUnit(wiring.Component):
    """One element's adder as a module (for the adder's own tests and its cost).

    Parameters
    ----------
    element_type : golden_model.elements.ElementType

    Members
    -------
    a, b : ``In(bits)``
        Bit patterns of the operands.
    sum : ``Out(bits)``
        The sum of the operands of cycle t, in cycle t + ``adder.latency``.

    Raises
    ------
    ValueError
        If the hardware has no adder for the type.
    """

    def __init__(self, element_type):
        self.adder = hardware_adder(element_type)
        bits = element_type.bits
        super().__init__({"a": In(bits), "b": In(bits), "sum": Out(bits)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.sum.eq(self.adder.add(m, self.a, self.b))
        return m
