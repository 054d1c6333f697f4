"""The board top of ``allreduce-rtl board``: a ``SelfTestSystem`` on an amaranth-boards platform.

It takes the platform's default clock as the ``sync`` domain, holds the domain in reset while the
board's reset button is pressed (``amaranth.lib.cdc.ResetSynchronizer``), synchronises the rerun
button (``FFSynchronizer``) and drives the UART's ``tx`` and as many LEDs as the board has
(``SelfTestSystem.leds``: 0 passed, 1 failed, 2 busy, 7 heartbeat). Which resources those are is
the board's entry in ``allreduce_rtl.board.BOARDS``.
"""

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Module
from amaranth.lib import io
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer

__all__ = ["BoardTop"]


class BoardTop(Elaboratable):
    """Pins of a board around ``system`` (an ``hdl.selftest.SelfTestSystem``).

    Parameters
    ----------
    system : SelfTestSystem
    reset_button, rerun_button : tuple of (str, int) or None
        amaranth-boards resources (name, number) of the buttons; None: none (reset then only at
        configuration).
    leds : int
        LEDs the board has (``led`` resources 0 .. leds - 1, at most 8 used).
    uart_tx_enable : bool
        The board has a ``uart_tx_enable`` resource that must be driven high (ULX3S).
    """

    def __init__(self, system, *, reset_button, rerun_button, leds, uart_tx_enable=False):
        self.system = system
        self.reset_button, self.rerun_button = reset_button, rerun_button
        self.leds, self.uart_tx_enable = leds, uart_tx_enable

    def elaborate(self, platform):
        m = Module()

        def pin(direction, name, number=0, sub=None):
            port = platform.request(name, number, dir="-")
            port = getattr(port, sub) if sub else port
            buf = io.Buffer(direction, port)
            m.submodules[f"{name}_{number}{'_' + sub if sub else ''}"] = buf
            return buf.i if direction == "i" else buf.o

        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(pin("i", platform.default_clk))
        m.submodules.system = system = self.system
        if self.reset_button is not None:
            m.submodules.reset_sync = ResetSynchronizer(pin("i", *self.reset_button),
                                                        domain="sync")
        if self.rerun_button is not None:
            m.submodules.rerun_sync = FFSynchronizer(pin("i", *self.rerun_button), system.rerun)
        m.d.comb += pin("o", "uart", sub="tx").eq(system.uart_tx)
        if self.uart_tx_enable:
            m.d.comb += pin("o", "uart_tx_enable").eq(1)
        for i in range(min(self.leds, 8)):
            m.d.comb += pin("o", "led", i).eq(system.leds[i])
        return m
