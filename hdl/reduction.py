"""The reduction unit: P read-modify-write lanes into the NI buffer.

Pipeline of a lane, one flit per cycle, never stalls:

* cycle t ("read"): the request is on ``lanes[i]``; its address goes to ``mem_read[i]``;
* cycle t+1 ("modify and write"): the old flit comes back, ``old + payload`` (REDUCE, element-wise
  with the element type's hardware adder, ``hdl.adders``: int32 wraps modulo 2^32) or ``payload``
  (COPY) is written through ``mem_write[i]``, and the
  request's tag is presented on ``retire[i]`` (the write is visible to every read from t+2 on, and
  to the lanes' reads in t+1 through transparency).

Hazards. The buffer's lane read ports must be transparent to every lane write port (``RAM``
``transparency``): a read in the cycle of a write to the same address returns the new data, so a
flit that follows another one to the same address one cycle later (read-after-write) sees its
result. Lanes whose requests are in the write stage with the same address in the same cycle read
the same old value; they are combined: only the lowest such lane writes,
``base + sum of the group's REDUCE payloads`` where ``base`` is the old flit, or the payload of the
group's lowest COPY lane when there is one. So concurrent REDUCEs into one chunk from several
ports never lose an update.

Summation order of a combined group: ``((base + p_i) + p_j) + ...`` over the group's REDUCE lanes
in lane (port) order, whatever order the schedule gives those contributions. For int32, whose
add is associative and commutative modulo 2^32, that is the schedule's result bit for bit. For a
non-associative add (floating point) it is not: lane order is arrival order under back-pressure,
not the schedule's order, so such a type needs a per-flit ordering rule instead of combining
(``ElementType.associative``; docs/hardware.md, "Reduction unit"). ``ReductionUnit`` therefore
refuses an element type whose add is not associative.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .adders import hardware_adder
from .config import NIConfig
from .flit import Op

__all__ = ["ReductionUnit", "LaneRequest"]


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
    """``num_ports`` read-modify-write lanes with same-address combining.

    Parameters
    ----------
    config : NIConfig
    tag_shape : shape-like
        Shape of the tag passed from a request to its retirement (the NI uses it for
        ``last`` and ``chunk``).

    Members
    -------
    lanes : ``In(stream.Signature(LaneRequest, always_ready=True)).array(num_ports)``
        Requests; always accepted.
    retire : ``Out(stream.Signature(tag_shape, always_ready=True)).array(num_ports)``
        Valid in the cycle a request's write happens, with its tag.
    mem_read : ``In(ReadPort.Signature(buffer_addr_width, flit_width)).array(num_ports)``
        To the buffer; must be transparent to every ``mem_write`` port.
    mem_write : ``In(WritePort.Signature(buffer_addr_width, flit_width)).array(num_ports)``
    """

    def __init__(self, config, tag_shape=unsigned(1)):
        if not isinstance(config, NIConfig):
            raise ValueError(f"config must be an NIConfig, not {config!r}")
        if not config.element_type.associative:
            raise ValueError(f"the reduction unit combines same-address lanes in port order, "
                             f"which is exact only for an associative add, not "
                             f"{config.dtype} (see the module docstring)")
        self._adder = hardware_adder(config.element_type)
        if self._adder.latency:
            raise ValueError(f"the reduction unit's write stage needs a combinational adder, "
                             f"not one of {self._adder.latency} cycles ({config.dtype})")
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
        p, e = cfg.num_ports, cfg.elems_per_flit
        elems = data.ArrayLayout(unsigned(cfg.elem_width), e)
        # Write stage registers, one set per lane.
        valid = [Signal(name=f"wr{i}_valid") for i in range(p)]
        req = [Signal(self._request, name=f"wr{i}_req") for i in range(p)]
        for i in range(p):
            lane = self.lanes[i]
            m.d.comb += [self.mem_read[i].en.eq(1), self.mem_read[i].addr.eq(lane.payload.addr)]
            m.d.sync += [valid[i].eq(lane.valid), req[i].eq(lane.payload)]
        # same[i][j], j != i: lanes i and j are both in the write stage with one address.
        same = [[None] * p for _ in range(p)]
        for i in range(p):
            for j in range(i + 1, p):
                hit = Signal(name=f"same{i}_{j}")
                m.d.comb += hit.eq(valid[i] & valid[j] & (req[i].addr == req[j].addr))
                same[i][j] = same[j][i] = hit
        for i in range(p):
            old = elems(self.mem_read[i].data)
            # Lane i writes only if no lower lane has its address; then its group is lanes
            # j >= i, the lowest of which is i.
            writer = Signal(name=f"wr{i}_writer")
            m.d.comb += writer.eq(valid[i] & ~Cat(same[i][j] for j in range(i)).any()
                                  if i else valid[i])
            copy, add = {}, {}
            for j in range(i, p):
                in_group = valid[i] if j == i else same[i][j]
                copy[j] = Signal(name=f"wr{i}_copy{j}")
                add[j] = Signal(name=f"wr{i}_add{j}")
                m.d.comb += [copy[j].eq(in_group & (req[j].op == Op.COPY)),
                             add[j].eq(in_group & (req[j].op == Op.REDUCE))]
            # base: the lowest COPY lane of the group, else the old flit.
            base = [old[k] for k in range(e)]
            for j in reversed(range(i, p)):
                base = [Mux(copy[j], req[j].data[k], base[k]) for k in range(e)]
            new = Signal(elems, name=f"wr{i}_new")
            for k in range(e):
                total = base[k]
                for j in range(i, p):
                    total = self._adder.add(total, Mux(add[j], req[j].data[k], 0))
                m.d.comb += new[k].eq(total)
            m.d.comb += [
                self.mem_write[i].en.eq(writer),
                self.mem_write[i].addr.eq(req[i].addr),
                self.mem_write[i].data.eq(new),
                self.retire[i].valid.eq(valid[i]),
                self.retire[i].payload.eq(req[i].tag),
            ]
        return m
