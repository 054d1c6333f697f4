"""``AccumulateWindow``: the registers, arrival counters and address decode of the COARSE
accumulate window of the CXL.mem controller (docs/hardware.md, "CXLMemController (COARSE)",
and ``hdl.cxl.messages.CSR`` for the registers).

The window is ``GROUPS`` tensor groups of ``2**SHIFT`` lines from line ``BASE``. Each accumulate
write into a group counts one arrival on its tensor's counter; a group is **complete** when its
counter reaches ``CONTRIB << SHIFT`` (every contributor wrote every line). ``CTRL`` clears the
counters and zeroes the window's lines, one per cycle, while no request issues.
"""

from amaranth.hdl import Array, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ..ops import eq_const, lt_const, lt_unsigned, shl_bounded
from .config import ADDR_BITS, checked_config
from .messages import CSR, CTRL_CLEAR, CTRL_ZERO, CSRWrite

__all__ = ["AccumulateWindow", "TIMER_BITS", "decoded_layout"]

#: Width of the ``TIMEOUT`` register and of a hold slot's timer.
TIMER_BITS = 32


def decoded_layout(config):
    """Layout of a decoded line address: ``{in_range, in_window, tensor, line}`` (``line``
    the address's low ``line_bits``, ``tensor`` its group when ``in_window``)."""
    return data.StructLayout({"in_range": 1, "in_window": 1,
                              "tensor": max(1, config.tensor_bits), "line": config.line_bits})


class AccumulateWindow(wiring.Component):
    """Window registers, arrival counters, zeroing and the decode of two request addresses.

    Parameters
    ----------
    config : CXLMemConfig

    Members
    -------
    csr : ``In(stream.Signature(CSRWrite))``
        Register writes; ready when no write is being zeroed and ``stage_busy`` is low.
    stage_busy : ``In(1)``
        An operation is in the controller's modify-and-write stage.
    stall : ``Out(1)``
        No request may issue this cycle: a register write is taken or the window is zeroed.
    zeroing : ``Out(1)``, zero_line : ``Out(line_bits)``
        The line being zeroed this cycle.
    req_addr, rwd_addr : ``In(ADDR_BITS)``
        Line addresses to decode; ``req``, ``rwd`` : ``Out(decoded_layout)`` their decode.
    count : ``In(1)``, count_tensor : ``In(tensor_bits)``
        One accumulate write arrived for this tensor (its counter saturates at all ones).
    complete : ``Out(num_tensors)``
        Bit ``t``: tensor ``t``'s counter has reached ``CONTRIB << SHIFT``.
    timeout : ``Out(TIMER_BITS)``
        The ``TIMEOUT`` register.
    """

    def __init__(self, config):
        self._config = config = checked_config(config)
        decoded = decoded_layout(config)
        super().__init__({
            "csr": In(stream.Signature(CSRWrite)),
            "stage_busy": In(1),
            "stall": Out(1),
            "zeroing": Out(1),
            "zero_line": Out(config.line_bits),
            "req_addr": In(ADDR_BITS),
            "rwd_addr": In(ADDR_BITS),
            "req": Out(decoded),
            "rwd": Out(decoded),
            "count": In(1),
            "count_tensor": In(max(1, config.tensor_bits)),
            "complete": Out(config.num_tensors),
            "timeout": Out(TIMER_BITS, init=config.default_timeout),
        })

    def elaborate(self, platform):
        cfg = self._config
        m = Module()
        lw = cfg.line_bits
        cb = cfg.counter_bits

        r_base = Signal(lw)
        r_groups = Signal(bits_for(cfg.num_tensors))
        r_shift = Signal(bits_for(cfg.max_group_shift))
        r_contrib = Signal(8)
        target = Signal(cb)
        m.d.comb += target.eq(shl_bounded(r_contrib, r_shift, cb, cfg.max_group_shift))

        counters = Array(Signal(cb, name=f"arrivals{i}") for i in range(cfg.num_tensors))
        m.d.comb += [self.complete[i].eq(counters[i] >= target)
                     for i in range(cfg.num_tensors)]

        for addr, out in ((self.req_addr, self.req), (self.rwd_addr, self.rwd)):
            offset = Signal(lw + 1)
            group = Signal(lw + 1)
            m.d.comb += [
                out.in_range.eq(lt_const(addr, cfg.num_lines)),
                out.line.eq(addr[:lw]),
                offset.eq(out.line - r_base),
                group.eq(offset >> r_shift),
                out.in_window.eq(out.in_range & ~offset[lw] & lt_unsigned(group, r_groups)),
                out.tensor.eq(group[:len(out.tensor)]),
            ]

        # ---- registers and zeroing ---------------------------------------------------------
        zeroing = self.zeroing
        z_line = Signal(lw + 1)
        z_end = Signal(lw + 1)
        csr_take = Signal()
        m.d.comb += [self.csr.ready.eq(~zeroing & ~self.stage_busy),
                     csr_take.eq(self.csr.valid & self.csr.ready),
                     self.stall.eq(zeroing | csr_take),
                     self.zero_line.eq(z_line[:lw])]
        ew = lw + 1 + cfg.max_group_shift + len(r_groups)
        window_end = Signal(ew)
        base_wide = Signal(ew)      # r_base, kept at the width of window_end
        m.d.comb += window_end.eq(base_wide + shl_bounded(r_groups, r_shift, ew,
                                                          cfg.max_group_shift))
        window_end_clip = Signal(lw + 1)
        m.d.comb += window_end_clip.eq(Mux(lt_const(window_end, cfg.num_lines + 1),
                                           window_end[:lw + 1], cfg.num_lines))
        clear_counters = Signal()
        with m.If(csr_take):
            d = self.csr.payload.data
            addr = Value.cast(self.csr.payload.addr)
            with m.If(eq_const(addr, CSR.BASE.value)):
                with m.If(lt_const(d, cfg.num_lines)):
                    m.d.sync += [r_base.eq(d[:lw]), base_wide.eq(d[:lw])]
            with m.If(eq_const(addr, CSR.GROUPS.value)):
                m.d.sync += r_groups.eq(Mux(lt_const(d, cfg.num_tensors + 1),
                                            d[:len(r_groups)], cfg.num_tensors))
            with m.If(eq_const(addr, CSR.SHIFT.value)):
                m.d.sync += r_shift.eq(Mux(lt_const(d, cfg.max_group_shift + 1),
                                           d[:len(r_shift)], cfg.max_group_shift))
            with m.If(eq_const(addr, CSR.CONTRIB.value)):
                m.d.sync += r_contrib.eq(Mux(lt_const(d, 256), d[:8], 255))
            with m.If(eq_const(addr, CSR.TIMEOUT.value)):
                m.d.sync += self.timeout.eq(d)
            with m.If(eq_const(addr, CSR.CTRL.value)):
                m.d.comb += clear_counters.eq(d[CTRL_CLEAR.bit_length() - 1])
                with m.If(d[CTRL_ZERO.bit_length() - 1] & lt_const(r_base, cfg.num_lines)
                          & (window_end > base_wide)):
                    m.d.sync += [zeroing.eq(1), z_line.eq(r_base), z_end.eq(window_end_clip)]
        with m.If(zeroing):
            m.d.sync += z_line.eq(z_line + 1)
            z_next = Signal(lw + 1)
            m.d.comb += z_next.eq(z_line + 1)
            with m.If(z_next >= z_end):
                m.d.sync += zeroing.eq(0)

        # ---- arrival counters ----------------------------------------------------------------
        for i in range(cfg.num_tensors):
            with m.If(clear_counters):
                m.d.sync += counters[i].eq(0)
            with m.Elif(self.count & eq_const(self.count_tensor, i) & ~counters[i].all()):
                m.d.sync += counters[i].eq(counters[i] + 1)
        return m
