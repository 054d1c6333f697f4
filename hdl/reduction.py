"""The reduction unit: P read-modify-write lanes into the banked NI buffer.

Pipeline of a lane, one flit per cycle, never stalls (``L`` = the element type's adder latency,
``hdl.adders``; ``write_delay = 1 + L``):

* cycle t ("read"): the request is on ``lanes[i]``; its address goes to ``mem_read[i]`` (the
  lane's client of ``hdl.banked_buffer.BankedBuffer``: the receive engine only issues a request
  whose bank is the lane's slot this cycle);
* cycles t+1 .. t+L ("add"): the old flit comes back in t+1 and enters the hardware adder
  (element-wise ``old + payload``, int32 wrapping modulo 2^32) while the request travels beside
  it for L cycles; the result is the sum (REDUCE) or the payload (COPY);
* cycle t + write_delay ("write"): the result goes to ``mem_write[i]``, which the buffer's write
  rotation gives exactly that bank in that cycle, and the request's tag is on ``retire[i]``; the
  write is visible to every read from the next cycle on.

Hazards. Two lanes never touch one bank in one cycle (the rotation), so nothing is combined or
arbitrated here; what keeps read-modify-writes of one flit by two lanes exact is the ordering
rule the receive engines follow (``hdl.receive_engine``): the contribution of order k into a
chunk reads flit f only after the contribution of order k-1 has written it, in the schedule's
order. A read of flit f therefore never falls between another lane's read and write of f, and
the additions into each flit happen in the schedule's summation order, whatever the arrival
timing: for every element type, associative or not.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .adders import hardware_adder
from .config import NIConfig
from .flit import Op

__all__ = ["ReductionUnit", "LaneRequest", "write_delay"]


def write_delay(adder):
    """Cycles from a lane's buffer read to its write of the same flit: 1 + ``adder.latency``."""
    return 1 + adder.latency


class LaneRequest(data.StructLayout):
    """A lane's request: ``{"addr", "data": ArrayLayout(elem_width, elems_per_flit), "op", "tag"}``.

    Parameters
    ----------
    config : NIConfig
    tag_shape : shape-like
        Carried unchanged to ``retire``.
    """

    def __init__(self, config, tag_shape):
        super().__init__({
            "addr": config.buffer_addr_width,
            "data": data.ArrayLayout(unsigned(config.elem_width), config.elems_per_flit),
            "op": Op,
            "tag": tag_shape,
        })


class ReductionUnit(wiring.Component):
    """``num_ports`` read-modify-write lanes of ``write_delay(config)`` cycles.

    Parameters
    ----------
    config : NIConfig
    tag_shape : shape-like
        Shape of the tag passed from a request to its retirement (the NI uses it for
        ``last``, ``chunk`` and the message's sequence bit).
    adder : optional
        The adder (``hdl.adders``); default the element type's. The buffer's write rotation
        must use ``write_delay(unit.adder)``.

    Members
    -------
    lanes : ``In(stream.Signature(LaneRequest, always_ready=True)).array(num_ports)``
        Requests; always accepted.
    retire : ``Out(stream.Signature(tag_shape, always_ready=True)).array(num_ports)``
        Valid in the cycle a request's write happens, with its tag.
    mem_read : ``In(ReadPort.Signature(buffer_addr_width, flit_width)).array(num_ports)``
    mem_write : ``In(WritePort.Signature(buffer_addr_width, flit_width)).array(num_ports)``
    """

    def __init__(self, config, tag_shape=unsigned(1), adder=None):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        self.adder = hardware_adder(config.element_type) if adder is None else adder
        self._config = config
        self._request = LaneRequest(config, tag_shape)
        p, aw, fw = config.num_ports, config.buffer_addr_width, config.flit_width
        super().__init__({
            "lanes": In(stream.Signature(self._request, always_ready=True)).array(p),
            "retire": Out(stream.Signature(tag_shape, always_ready=True)).array(p),
            "mem_read": In(memory.ReadPort.Signature(addr_width=aw, shape=unsigned(fw))).array(p),
            "mem_write": In(memory.WritePort.Signature(addr_width=aw, shape=unsigned(fw))).array(p),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        e = cfg.elems_per_flit
        elems = data.ArrayLayout(unsigned(cfg.elem_width), e)
        latency = self.adder.latency
        for i in range(cfg.num_ports):
            lane = self.lanes[i]
            m.d.comb += [self.mem_read[i].en.eq(lane.valid),
                         self.mem_read[i].addr.eq(lane.payload.addr)]
            valid = Signal(name=f"add{i}_valid")
            req = Signal(self._request, name=f"add{i}_req", reset_less=True)   # data: valid says
            m.d.sync += [valid.eq(lane.valid), req.eq(lane.payload)]
            old = elems(self.mem_read[i].data)
            sums = [self.adder.add(m, old[k], req.data[k]) for k in range(e)]
            for _ in range(latency):    # the request travels beside the adder's stages
                nv, nr = Signal(), Signal(self._request, reset_less=True)
                m.d.sync += [nv.eq(valid), nr.eq(req)]
                valid, req = nv, nr
            new = Signal(elems, name=f"add{i}_new")
            for k in range(e):
                m.d.comb += new[k].eq(Mux(req.op == Op.COPY, req.data[k], sums[k]))
            m.d.comb += [
                self.mem_write[i].en.eq(valid),
                self.mem_write[i].addr.eq(req.addr),
                self.mem_write[i].data.eq(new),
                self.retire[i].valid.eq(valid),
                self.retire[i].payload.eq(req.tag),
            ]
        return m
