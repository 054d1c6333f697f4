"""The hardware adder of each element type (``golden_model.elements``), as the reduction unit
uses it.

An adder says its latency in cycles and builds ``a + b`` on two elements' bit patterns in a
module (``add(m, a, b)``: the sum of the operands of cycle t is on the returned value in cycle
t + ``latency``); it must compute exactly the type's golden add (``ElementType.add``), which the
scoreboard checks bit for bit. ``NIConfig`` refuses an element type without an adder here. The
reduction unit (``hdl.reduction``) is built for any latency.

* ``int32``: two's-complement addition modulo 2^32, combinational (latency 0).

Adding a type's adder: a class with ``latency`` and ``add``, and its entry in :data:`ADDERS`.
"""

from amaranth.hdl import Signal, Value

__all__ = ["IntAdder", "ADDERS", "hardware_adder"]


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
            reg = Signal(self.bits)
            m.d.sync += reg.eq(value)
            value = reg
        return value


#: Element type name -> adder class (constructed with the type's width).
ADDERS = {"int32": IntAdder}


def hardware_adder(element_type):
    """The adder of ``element_type`` (a ``golden_model.elements.ElementType``).

    Raises
    ------
    ValueError
        If the hardware has no adder for it (the message names the types it has).
    """
    cls = ADDERS.get(element_type.name)
    if cls is None:
        raise ValueError(f"the NI has no adder for {element_type.name}: its reduction unit adds "
                         f"{', '.join(ADDERS)}")
    return cls(element_type.bits)
