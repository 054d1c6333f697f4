"""Pieces every formal harness uses: its module with the reset in cycle 0, a flag that
remembers a condition, and access to a block's elaborated module (its submodules and signals)
from the harness around it."""

from amaranth.asserts import Initial
from amaranth.hdl import Assume, Module, ResetSignal, Signal

__all__ = ["ever", "observed", "reset_once"]


def ever(m, condition):
    """A signal that is 1 from the cycle after ``condition`` was first true (reset by ``rst``)."""
    seen = Signal()
    with m.If(condition):
        m.d.sync += seen.eq(1)
    return seen


class _Observed:
    """Mixin: ``elaborate`` builds the block's module once and returns it again when Amaranth
    elaborates the block, so that the harness can reach its submodules and signals (the design
    is unchanged)."""

    _module = None

    def elaborate(self, platform):
        if self._module is None:
            self._module = super().elaborate(platform)
        return self._module


def observed(block, *args, **params):
    """``block(*args, **params)`` whose module the harness may read (``elaborate(None)``) before
    Amaranth elaborates it; ``block`` is a class."""
    return type(f"Observed{block.__name__}", (_Observed, block), {})(*args, **params)


def reset_once():
    """A harness's ``Module`` and its reset, assumed high in cycle 0 and only there.

    Every register and memory word starts arbitrary (``tb.formal.run`` drops initial values), so
    the reset in cycle 0 is what defines the block's state from cycle 1.

    Returns
    -------
    (Module, Value)
    """
    m = Module()
    m.d.comb += Assume(ResetSignal() == Initial())
    return m, ResetSignal()
