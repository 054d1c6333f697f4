"""A UART transmitter: 8 data bits, no parity, 1 stop bit (8N1), least significant bit first.

The line idles high; a byte is a low start bit, its 8 bits and a high stop bit, each
``divisor`` cycles long (``divisor`` = clock frequency / baud rate, e.g. 25 MHz / 115,200 baud
-> 217). The serial format is the one of every PC serial port and USB-UART bridge (TIA-232
framing as the 16550 UART sends it).
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .ops import is_zero

__all__ = ["UARTTransmitter", "uart_divisor"]


def uart_divisor(clock_hz, baud):
    """Cycles per bit for ``baud`` at ``clock_hz``, rounded to the nearest whole cycle.

    Raises
    ------
    ValueError
        If the rounding error exceeds 2% (a receiver samples mid-bit and tolerates about
        half a bit over the 10 bits of a frame, less both ends' clock errors) or the result is
        below 2 cycles.
    """
    divisor = round(clock_hz / baud)
    if divisor < 2:
        raise ValueError(f"a {clock_hz:,.0f} Hz clock cannot send {baud:,} baud (at least 2 "
                         f"cycles per bit are needed)")
    error = abs(clock_hz / divisor - baud) / baud
    if error > 0.02:
        raise ValueError(f"{baud:,} baud from a {clock_hz:,.0f} Hz clock is {error:.1%} off "
                         f"(at most 2% is allowed)")
    return divisor


class UARTTransmitter(wiring.Component):
    """Send the bytes of ``data`` on ``tx``, one 8N1 frame each.

    Parameters
    ----------
    divisor : int
        Cycles per bit (at least 2; :func:`uart_divisor`).

    Members
    -------
    data : ``In(stream.Signature(8))``
        A byte is taken when the transmitter is idle; its frame starts the next cycle.
    tx : ``Out(1, init=1)``
        The serial line (idle high).

    Raises
    ------
    ValueError
        If ``divisor`` is not an int of at least 2.
    """

    def __init__(self, divisor):
        if not isinstance(divisor, int) or divisor < 2:
            raise ValueError(f"divisor must be an int of at least 2 cycles per bit, not "
                             f"{divisor!r}")
        self.divisor = divisor
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        frame = Signal(10, init=0x3FF)      # stop, data[7:0], start: shifted out LSB first
        bits_left = Signal(range(11))
        timer = Signal(range(self.divisor))
        m.d.comb += [self.tx.eq(frame[0]), self.data.ready.eq(is_zero(bits_left))]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [frame.eq(Cat(0, self.data.payload, 1)), bits_left.eq(10),
                         timer.eq(self.divisor - 1)]
        with m.Elif(~is_zero(bits_left)):
            with m.If(is_zero(timer)):
                m.d.sync += [frame.eq(Cat(frame[1:], 1)), bits_left.eq(bits_left - 1),
                             timer.eq(self.divisor - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m
