"""The hardware adder of each element type (``golden_model.elements``), as the reduction unit
uses it.

An adder says its latency in cycles and builds ``a + b`` on two elements' bit patterns; it must
compute exactly the type's golden add (``ElementType.add``), which the scoreboard checks bit for
bit. ``NIConfig`` refuses an element type without an adder here.

* ``int32``: two's-complement addition modulo 2^32, combinational (latency 0).

Adding a type's adder: a class with ``latency`` and ``add``, and its entry in :data:`ADDERS`.
"""

from amaranth.hdl import Value

__all__ = ["IntAdder", "ADDERS", "hardware_adder"]


class IntAdder:
    """Two's-complement adder modulo ``2**bits`` (wraps around), combinational.

    Parameters
    ----------
    bits : int
        Element width.
    """
    latency = 0

    def __init__(self, bits):
        self.bits = bits

    def add(self, a, b):
        """``(a + b) mod 2**bits`` as a ``bits``-wide value."""
        return (Value.cast(a) + Value.cast(b))[:self.bits]


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
