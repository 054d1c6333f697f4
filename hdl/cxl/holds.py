"""``HoldSlots``: reads of the accumulate window that wait for their tensor (docs/hardware.md,
"CXLMemController (COARSE)").

A read of a tensor group that is not complete takes a hold slot instead of the memory: no
response yet, and other requests pass it. A slot is **ready** when its tensor completes
(released: answered with the data) or when it has waited ``TIMEOUT`` cycles (expired: answered
with poison); released slots go first, then expired ones, the lowest slot first in each.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..ops import first_set, select_word
from .config import TAG_BITS, checked_config
from .window import TIMER_BITS

__all__ = ["HoldSlots", "hold_layout"]


def hold_layout(config):
    """A held read: ``{tag, slot, line, tensor}`` (its CXL tag, tracker entry, line address
    and tensor group)."""
    return data.StructLayout({"tag": TAG_BITS, "slot": config.slot_bits,
                              "line": config.line_bits, "tensor": max(1, config.tensor_bits)})


class HoldSlots(wiring.Component):
    """``hold_slots`` held reads with their timers.

    Parameters
    ----------
    config : CXLMemConfig

    Members
    -------
    put : ``In(1)``, put_entry : ``In(hold_layout)``
        Hold this read in the lowest free slot (only when ``full`` is low).
    full : ``Out(1)``
        No slot is free.
    complete : ``In(num_tensors)``
        The tensors whose groups are complete (``AccumulateWindow.complete``).
    timeout : ``In(TIMER_BITS)``
        Cycles a read may be held; its timer saturates at all ones.
    ready : ``Out(1)``, entry : ``Out(hold_layout)``, poison : ``Out(1)``
        A slot is ready; the one to answer next, and whether it expired (poison) rather than
        being released.
    take : ``In(1)``
        Free the slot of ``entry`` (it is answered this cycle).
    """

    def __init__(self, config):
        self._config = config = checked_config(config)
        layout = hold_layout(config)
        super().__init__({
            "put": In(1),
            "put_entry": In(layout),
            "full": Out(1),
            "complete": In(config.num_tensors),
            "timeout": In(TIMER_BITS),
            "ready": Out(1),
            "entry": Out(layout),
            "poison": Out(1),
            "take": In(1),
        })

    def elaborate(self, platform):
        cfg = self._config
        m = Module()
        nh = cfg.hold_slots
        layout = hold_layout(cfg)
        valid = Signal(nh)
        slots = [Signal(layout, name=f"hold{k}") for k in range(nh)]
        timers = [Signal(TIMER_BITS, name=f"hold{k}_timer") for k in range(nh)]

        released = [valid[k] & select_word(self.complete, slots[k].tensor, 1, cfg.num_tensors)
                    for k in range(nh)]
        expired = [valid[k] & (timers[k] >= self.timeout) for k in range(nh)]
        rel_any, rel_k = first_set(m, released, "released")
        exp_any, exp_k = first_set(m, expired, "expired")
        free_any, free_k = first_set(m, [~valid[k] for k in range(nh)], "hold_free")
        chosen = Signal.like(rel_k)
        m.d.comb += [
            self.full.eq(~free_any),
            self.ready.eq(rel_any | exp_any),
            self.poison.eq(~rel_any),
            chosen.eq(Mux(rel_any, rel_k, exp_k)),
            self.entry.eq(select_word(Cat(*slots), chosen, layout.size, nh)),
        ]

        for k in range(nh):
            with m.If(valid[k] & ~timers[k].all()):
                m.d.sync += timers[k].eq(timers[k] + 1)
        take = Signal(nh)
        put = Signal(nh)
        m.d.comb += [take.eq(Mux(self.take, (Const(1, nh) << chosen)[:nh], Const(0, nh))),
                     put.eq(Mux(self.put, (Const(1, nh) << free_k)[:nh], Const(0, nh)))]
        m.d.sync += valid.eq((valid & ~take) | put)
        for k in range(nh):
            with m.If(put[k]):
                m.d.sync += [slots[k].eq(self.put_entry), timers[k].eq(0)]
        return m
