"""The board top of ``allreduce-rtl board``: a ``SelfTestSystem`` on an amaranth-boards platform.

It clocks the ``sync`` domain from the platform's default clock, directly or through an ECP5
PLL (:class:`ECP5PLL`) where the board's clock is faster than the network's, holds the domain
in reset while the board's reset button is pressed or the PLL is not locked
(``amaranth.lib.cdc.ResetSynchronizer``), synchronises the rerun button (``FFSynchronizer``)
and drives the UART's ``tx`` and the LEDs (``SelfTestSystem.leds``: 0 passed, 1 failed,
2 busy, 7 heartbeat). Which resources those are is the board's entry in
``allreduce_rtl.board.BOARDS``.
"""

import dataclasses

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer

__all__ = ["BoardTop", "ECP5PLL", "ecp5_pll"]

#: The ECP5 sysCLOCK PLL's frequency ranges in Hz (Lattice ECP5 and ECP5-5G family data sheet,
#: FPGA-DS-02012, "sysCLOCK PLL Timing": f_IN, f_PFD, f_VCO, f_OUT) and its dividers' range
#: (FPGA-TN-02200, ECP5 and ECP5-5G sysCLOCK PLL/DLL Design and User Guide: 1 to 128).
PLL_IN = (8e6, 400e6)
PLL_PFD = (3.125e6, 400e6)
PLL_VCO = (400e6, 800e6)
PLL_OUT = (3.125e6, 400e6)
PLL_DIV = range(1, 129)


@dataclasses.dataclass(frozen=True)
class ECP5PLL:
    """An EHXPLLL with CLKOP fed back: ``f_out = f_in * clkfb_div / clki_div``, the VCO at
    ``f_out * clkop_div`` (FPGA-TN-02200, "Clock Dividers" and "Feedback Path").

    Attributes
    ----------
    f_in_hz : float
    clki_div, clkfb_div, clkop_div : int
    """
    f_in_hz: float
    clki_div: int
    clkfb_div: int
    clkop_div: int

    @property
    def f_out_hz(self):
        return self.f_in_hz * self.clkfb_div / self.clki_div

    @property
    def f_vco_hz(self):
        return self.f_out_hz * self.clkop_div


def ecp5_pll(f_in_hz, f_out_hz):
    """The :class:`ECP5PLL` making exactly ``f_out_hz`` from ``f_in_hz`` with every frequency
    in the data sheet's ranges (:data:`PLL_IN` ...): of the exact ones, the highest phase
    detector frequency (the least jitter), then the VCO nearest the middle of its range.

    Raises
    ------
    ValueError
        If no divider setting gives ``f_out_hz`` exactly (naming both frequencies).
    """
    def within(f, lo_hi):
        return lo_hi[0] <= f <= lo_hi[1]
    best = None
    if within(f_in_hz, PLL_IN) and within(f_out_hz, PLL_OUT):
        middle = sum(PLL_VCO) / 2
        for clki in PLL_DIV:
            for clkfb in PLL_DIV:
                if f_in_hz * clkfb != f_out_hz * clki:
                    continue
                pll = [ECP5PLL(f_in_hz, clki, clkfb, op) for op in PLL_DIV
                       if within(f_out_hz * op, PLL_VCO) and within(f_in_hz / clki, PLL_PFD)]
                for p in pll:
                    key = (f_in_hz / clki, -abs(p.f_vco_hz - middle))
                    if best is None or key > best[0]:
                        best = (key, p)
    if best is None:
        raise ValueError(f"no ECP5 PLL setting makes {f_out_hz / 1e6:g} MHz from "
                         f"{f_in_hz / 1e6:g} MHz")
    return best[1]


class BoardTop(Elaboratable):
    """Pins of a board around ``system`` (an ``hdl.selftest.SelfTestSystem``).

    Parameters
    ----------
    system : SelfTestSystem
    reset_button, rerun_button : tuple of (str, int) or None
        amaranth-boards resources (name, number) of the buttons; None: none (reset then only at
        configuration).
    leds : tuple of (int, str, int, str or None)
        ``(bit of system.leds, resource name, number, subsignal)`` per LED driven (an
        ``rgb_led``'s colour is its subsignal).
    pll : ECP5PLL or None
        Clock ``sync`` from this PLL's output instead of the board's clock (nextpnr-ecp5
        derives the output's constraint from the board clock's and the dividers).
    """

    def __init__(self, system, *, reset_button, rerun_button, leds, pll=None):
        self.system = system
        self.reset_button, self.rerun_button = reset_button, rerun_button
        self.leds, self.pll = leds, pll

    def elaborate(self, platform):
        m = Module()

        requested = {}      # a resource is requested once, its subsignals used apart

        def pin(direction, name, number=0, sub=None):
            if (name, number) not in requested:
                requested[name, number] = platform.request(name, number, dir="-")
            port = requested[name, number]
            port = getattr(port, sub) if sub else port
            buf = io.Buffer(direction, port)
            m.submodules[f"{name}_{number}{'_' + sub if sub else ''}"] = buf
            return buf.i if direction == "i" else buf.o

        m.domains.sync = ClockDomain("sync")
        clock, locked = pin("i", platform.default_clk), None
        if self.pll is not None:
            clock, locked = self._pll(m, platform, clock)
        m.d.comb += ClockSignal("sync").eq(clock)
        m.submodules.system = system = self.system
        reset = pin("i", *self.reset_button) if self.reset_button is not None else None
        if locked is not None:
            reset = ~locked if reset is None else reset | ~locked
        if reset is not None:
            m.submodules.reset_sync = ResetSynchronizer(reset, domain="sync")
        if self.rerun_button is not None:
            m.submodules.rerun_sync = FFSynchronizer(pin("i", *self.rerun_button), system.rerun)
        m.d.comb += pin("o", "uart", sub="tx").eq(system.uart_tx)
        for bit, name, number, sub in self.leds:
            m.d.comb += pin("o", name, number, sub).eq(system.leds[bit])
        return m

    def _pll(self, m, platform, clock_in):
        p = self.pll
        clock, locked = Signal(), Signal()
        mhz = f"{p.f_in_hz / 1e6:g}", f"{p.f_out_hz / 1e6:g}"
        # the analogue settings every EHXPLLL of Lattice's and the open flow's PLL tools carries
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=mhz[0], a_FREQUENCY_PIN_CLKOP=mhz[1], a_ICP_CURRENT="12",
            a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=p.clki_div, p_CLKFB_DIV=p.clkfb_div, p_CLKOP_DIV=p.clkop_div,
            p_CLKOP_CPHASE=p.clkop_div - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=clock_in, i_CLKFB=clock, o_CLKOP=clock, o_LOCK=locked,
            i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=0, i_PHASESTEP=0,
            i_PHASELOADREG=0, i_PLLWAKESYNC=0, i_ENCLKOP=0)
        return clock, locked
