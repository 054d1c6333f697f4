"""The virtual-channel router (``hdl.router.router``) and its round-robin arbiter
(``hdl.router.arbiter``).

Four harnesses:

* **arbiter**: a ``RoundRobinArbiter`` of N requesters with ``requests`` and ``advance`` free in
  every cycle. The grant is one-hot (or zero without requests) and goes only to a requester; and
  a requester that keeps requesting is granted no later than the N-th cycle in which the priority
  moves (a grant with ``advance``): it waits through at most N - 1 grants to others. When every
  grant advances (the allocators' second stages, ``advance = 1``) that is within N cycles. A
  first stage whose choice loses its second stage keeps the choice (``advance`` low), which by
  design does not count. The proof is k-induction; it reads the arbiter's priority mask (its
  ``mask`` attribute) and asserts the invariant that closes it: the mask is a thermometer, and a
  waiting requester's cyclic distance from the priority pointer plus the grants it has already
  waited through is at most N - 1.
* **switch allocator**: a ``SwitchAllocator`` alone with every input free (a requesting VC names
  an existing output port). Each output port's grant is at most one flit, exactly one when it
  is valid, taken from the input port its one-hot ``out_sel`` names; each input port sends at
  most one flit, of the VC ``in_sel`` names; a grant goes only to a requesting VC. The allocator
  is combinational around arbiters whose grants are one-hot subsets of their requests from any
  priority state, so k-induction closes at once.
* **VC exclusivity**: a whole ``Router`` with every input free in every cycle (flits of any kind
  on any VC, any downstream credits: the claim does not depend on the environment). At most
  one input VC holds an output VC (is active with that output port and VC) at a time. The proof
  reads the router's state through its blocks (the input units' ``state``, ``route_port``,
  ``out_vc``, and the router's ``busy`` flag of each output VC) and
  asserts the invariant that makes it inductive: an output VC held by an active input VC is
  marked busy, so the VC allocator never offers it to another.
* **no loss**: a whole ``Router`` with legal but otherwise free inputs: each input port's
  upstream sends a flit on VC w only with a credit for it (``vc_buf_depth`` initial credits,
  each credit pulse on ``inp.credit`` usable in the cycle it arrives), packets on each input VC
  are well formed (a HEAD with ``flits`` = F followed by F - 1 BODY flits and a TAIL, or one
  HEAD_TAIL with F = 0; packets of different VCs interleave freely), destinations are any of
  the table's, and each downstream returns a credit of an output VC only for a flit it has
  received on it and not yet credited. The environment marks one packet of its choosing (any
  port, VC, time and length): its flits carry a tag bit and their sequence number. The harness
  follows them through the router: while the marked flits are in their VC buffer, the flits
  ahead of them are untagged and the next marked flit is at the front in its turn (the harness
  counts the flits ahead from the buffer's level at the head's arrival); a marked flit that
  leaves its buffer is on an output port the next cycle; marked flits leave in sequence order,
  at most one per cycle, never more than entered, all on one output port and one output VC,
  with their kinds (HEAD first, TAIL last); no tagged flit appears in another buffer; no
  buffer overflows and no output VC gets a flit without a downstream credit. So no flit is
  lost, duplicated or created, and a packet's flits stay in order on one VC. Bounded: the
  buffers' contents are memories the harness cannot name, so k-induction cannot close
  (``docs/formal.md``, "Bounded proofs"); the bound is :data:`NO_LOSS_DEPTH`.

Parameters: the arbiter with N = 3 (a first, a middle and a last requester, and a pointer
that wraps). The switch allocator with 3 ports and 2 VCs (each output arbitrates among three
inputs, each input among two VCs). The router with 2 ports, 2 VCs, buffers of 2 flits (the
smallest ``RouterParams`` allows: a register FIFO, ``hdl.fifo.REGISTER_MAX``; the default
depth 8 is a ``BlockFIFO``, which these proofs do not cover: with depth 5 the no-loss check
took 815 s), 32-bit flits
(the smallest: a ``RouterHead``), a credit delay of 1, both flow controls (wormhole, and
cut-through with packets of at most 2 flits, its contract) and the table
``out_port = (0, 1)`` (destination d leaves on port d, so an input may turn back to its own
port). In the no-loss harness only the payload bits the router reads or the harness uses are
free: destination bit 0, the tag and a 2-bit sequence number in the head's ``src`` field, and
``flits`` < 4; the others are zero. The blocks' logic does not depend on the values beyond
these: every arbiter is ``prefix_or``/``first_one`` over its requests, the same logic for every
bit, so 3 requesters already have a winner before, after and at the pointer; the allocators
instantiate the same arbiters per port and VC and compare port numbers for equality, the same
for every port and VC (two ports and two VCs make every output VC contested by four input VCs,
from both ports and both VCs); the VC buffers are FIFOs whose level and order do not depend on
their depth beyond full and empty, which depth 2 reaches; the credit counters count to
``vc_buf_depth`` and back; the crossbar and the buffers carry each payload bit independently
of the others; the routing table is a constant lookup whose entries only name ports.
"""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Elaboratable, Mux, Signal

from hdl.flit import FlitKind
from hdl.router.arbiter import RoundRobinArbiter, prefix_or
from hdl.router.flit import is_head_kind, is_tail_kind
from hdl.router.router import (FLOW_CONTROLS, Router, RouterParams, SwitchAllocator,
                               VCState)
from hdl.router.routing import RoutingTable

from . import FormalProperty, planted
from .harness import ever, observed, reset_once

__all__ = ["PROPERTIES", "ArbiterHarness", "SwitchHarness", "VCExclusiveHarness",
           "NoLossHarness"]

ARBITER_N = 3
SWITCH_PORTS, SWITCH_VCS = 3, 2
PORTS, VCS, VC_BUF_DEPTH, FLIT_WIDTH = 2, 2, 2, 32

#: Payload bits the no-loss harness uses (in the head's ``src`` field, which the router does not
#: read): the tag of the marked packet's flits and their sequence number.
TAG_BIT = 10
SEQ_LO, SEQ_BITS = 11, 2
#: ``RouterHead.flits`` (bits 20..31): below 4, so a marked packet has at most 4 flits.
FLITS_LO, FLITS_BITS = 20, 2
_FREE_BITS = (1 | 1 << TAG_BIT | ((1 << SEQ_BITS) - 1) << SEQ_LO
              | ((1 << FLITS_BITS) - 1) << FLITS_LO)

#: Cycles of the bounded no-loss check. A head that finds the router empty is on the output 4
#: cycles after it is on the input (``hdl.router.router``), a body flit 2; a packet of 4 flits
#: through 2-flit buffers with the other port contending for the output: 14 cycles reach every
#: phase (cover: the marked packet's tail leaves with traffic on the other port and VC).
NO_LOSS_DEPTH = 14


def _table():
    return RoutingTable(num_ports=PORTS, out_port=tuple(range(PORTS)),
                        dateline=(False,) * PORTS, port_dim=(None,) * PORTS)


def _params(flow_control):
    return RouterParams(PORTS, num_vcs=VCS, vc_buf_depth=VC_BUF_DEPTH, flit_width=FLIT_WIDTH,
                        credit_delay=1, flow_control=flow_control)


# --- planted bugs --------------------------------------------------------------------------------

class _StickyArbiter(RoundRobinArbiter):
    """Planted bug: the priority moves to the winner instead of past it (a winner that keeps
    requesting keeps the highest priority)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.advance & self.requests.any()):
            m.d.sync += self.mask.eq(Cat(*prefix_or(self.grant)) | self.grant)
        return m


class _GreedySwitch(SwitchAllocator):
    """Planted bug: when an input port wins its output, every requesting VC of that port
    bound for the output crosses, not only the one the input arbiter chose."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        p, v = self.num_ports, self.num_vcs
        pw = len(self.req_port[0])
        for q in range(p):
            # input port q won its output; the output port its input arbiter chose
            won = Cat(*(self.out_valid[o] & self.out_sel[o][q] for o in range(p))).any()
            target = Signal(pw, name=f"chosen{q}")
            with m.Switch(self.in_sel[q]):
                for w in range(v):
                    with m.Case(1 << w):
                        m.d.comb += target.eq(self.req_port[q * v + w])
            for w in range(v):
                i = q * v + w
                m.d.comb += self.grant[i].eq(won & self.req[i] & (self.req_port[i] == target))
        return m


class _BusyBlindRouter(Router):
    """Planted bug: the VC allocator is offered the output VCs the packet may take whether or
    not another packet holds them (the ``busy`` flags are ignored)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        va = m.submodules["vc_allocator"]
        v = self.params.num_vcs
        for q in range(self.params.num_ports):
            iu = m.submodules[f"input{q}"]
            for w in range(v):
                m.d.comb += va.req_mask[q * v + w].eq(iu.route_mask[w])
        return m


class _LossyRouter(Router):
    """Planted bug: an active input VC pops its front flit whenever it requests the switch,
    also when its input port or output port lost switch allocation (the flit is dropped)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        sa = m.submodules["switch_allocator"]
        v = self.params.num_vcs
        for q in range(self.params.num_ports):
            iu = m.submodules[f"input{q}"]
            for w in range(v):
                m.d.comb += iu.pop[w].eq(sa.req[q * v + w])
        return m


# --- harnesses -----------------------------------------------------------------------------------

class ArbiterHarness(Elaboratable):
    """A ``RoundRobinArbiter`` of ``ARBITER_N`` with free requests and ``advance``.

    Parameters
    ----------
    arbiter : type
        ``RoundRobinArbiter`` or a planted-bug copy.
    """

    def __init__(self, arbiter=RoundRobinArbiter):
        self.arbiter = arbiter

    def elaborate(self, platform):
        m, rst = reset_once()
        n = ARBITER_N
        arb = self.arbiter(n)
        mask = arb.mask
        m.submodules.arbiter = arb
        m.d.comb += [arb.requests.eq(AnySeq(n)), arb.advance.eq(AnySeq(1))]
        grant, req = arb.grant, arb.requests
        moves = Signal()                # the priority moves this cycle
        m.d.comb += moves.eq(arb.advance & arb.valid)
        # the pointer: mask bits at or after it are set; ``ptr`` = N stands for 0
        ptr = Signal(range(n + 1))
        m.d.comb += ptr.eq(n - sum(mask[j] for j in range(n)))
        waited_n = []
        with m.If(~rst):
            m.d.comb += [
                Assert((grant & ~req) == 0),
                Assert((grant & (grant - 1)[:n]) == 0),
                Assert(arb.valid == req.any()),
                Assert(grant.any() == req.any()),
            ]
            for j in range(n - 1):      # invariant: the mask is a thermometer
                m.d.comb += Assert(~mask[j] | mask[j + 1])
        for i in range(n):
            # grants to others with a priority move since requester i began to wait
            waited = Signal(range(n + 1), name=f"waited{i}")
            waited_n.append(waited)
            with m.If(req[i] & ~grant[i]):
                with m.If(moves & (waited != n)):
                    m.d.sync += waited.eq(waited + 1)
            with m.Else():
                m.d.sync += waited.eq(0)
            dist = Signal(range(2 * n + 1), name=f"dist{i}")   # cyclic distance from the pointer
            m.d.comb += dist.eq(i + Mux(mask[i], 0, n) - ptr)
            with m.If(~rst):
                m.d.comb += [
                    Assert(waited <= n - 1),
                    Assert(waited + dist <= n - 1),     # invariant
                ]
                with m.If(req[i] & (waited == n - 1)):
                    m.d.comb += Assert(grant[i])
        # a requester granted after waiting through N - 1 grants to others
        m.d.comb += Cover(~rst & Cat(*(req[i] & grant[i] & (waited_n[i] == n - 1)
                                       for i in range(n))).any())
        return m


class SwitchHarness(Elaboratable):
    """A ``SwitchAllocator`` of ``SWITCH_PORTS`` ports and ``SWITCH_VCS`` VCs, inputs free.

    Parameters
    ----------
    allocator : type
        ``SwitchAllocator`` or a planted-bug copy.
    """

    def __init__(self, allocator=SwitchAllocator):
        self.allocator = allocator

    def elaborate(self, platform):
        m, rst = reset_once()
        p, v = SWITCH_PORTS, SWITCH_VCS
        n = p * v
        m.submodules.sa = sa = self.allocator(p, v)
        m.d.comb += sa.req.eq(AnySeq(n))
        for i in range(n):
            m.d.comb += sa.req_port[i].eq(AnySeq(len(sa.req_port[i])))
            with m.If(sa.req[i]):
                m.d.comb += Assume(sa.req_port[i] < p)
        with m.If(~rst):
            for i in range(n):
                with m.If(sa.grant[i]):
                    q, w = divmod(i, v)
                    m.d.comb += [Assert(sa.req[i]), Assert(sa.in_sel[q][w])]
                    for o in range(p):
                        with m.If(sa.req_port[i] == o):
                            m.d.comb += Assert(sa.out_valid[o] & sa.out_sel[o][q])
            for q in range(p):
                sel = sa.in_sel[q]
                m.d.comb += Assert((sel & (sel - 1)[:v]) == 0)
                m.d.comb += Assert(sum(sa.grant[q * v + w] for w in range(v)) <= 1)
            for o in range(p):
                sel = sa.out_sel[o]
                m.d.comb += [Assert((sel & (sel - 1)[:p]) == 0),
                             Assert(sa.out_valid[o] == sel.any())]
                # the flits granted to output o: one when it is valid, none otherwise
                to_o = sum(sa.grant[i] & (sa.req_port[i] == o) for i in range(n))
                m.d.comb += Assert(to_o == sa.out_valid[o])
                for q in range(p):
                    with m.If(sel[q]):
                        m.d.comb += Assert(Cat(*(sa.grant[q * v + w] & (sa.req_port[q * v + w]
                                                                          == o)
                                                 for w in range(v))).any())
        # every output busy, and one input port with both VCs asking for the same output
        m.d.comb += Cover(~rst & sa.out_valid.all()
                          & Cat(*(sa.req[q * v] & sa.req[q * v + 1]
                                  & (sa.req_port[q * v] == sa.req_port[q * v + 1])
                                  for q in range(p))).any())
        return m


def _input_units(router, platform):
    """The router's input units, one per port (``router`` made with ``observed``)."""
    inner = router.elaborate(platform)
    return [inner.submodules[f"input{q}"] for q in range(PORTS)]


class VCExclusiveHarness(Elaboratable):
    """A ``Router`` with every input free; at most one input VC holds an output VC.

    Parameters
    ----------
    router : type
        ``Router`` or a planted-bug copy.
    flow_control : str
        ``RouterParams.flow_control``.
    """

    def __init__(self, router=Router, flow_control="wormhole"):
        self.router, self.flow_control = router, flow_control

    def elaborate(self, platform):
        m, rst = reset_once()
        router = observed(self.router, _params(self.flow_control), _table())
        units = _input_units(router, platform)
        busy = router.busy
        m.submodules.router = router
        for q in range(PORTS):
            m.d.comb += [router.inp[q].valid.eq(AnySeq(1)),
                         router.inp[q].flit.eq(AnySeq(len(router.inp[q].flit.as_value()))),
                         router.out[q].credit.eq(AnySeq(VCS))]
        holders = []      # (active, port, vc) per input VC
        for q, iu in enumerate(units):
            for w in range(VCS):
                active = Signal(name=f"active{q}_{w}")
                m.d.comb += active.eq(iu.state[w] == VCState.ACTIVE)
                holders.append((active, iu.route_port[w], iu.out_vc[w]))
        busy_vec = Cat(*(busy[o][w] for o in range(PORTS) for w in range(VCS)))
        with m.If(~rst):
            for a, (act_a, port_a, vc_a) in enumerate(holders):
                with m.If(act_a):
                    # invariant: a held output VC is busy
                    m.d.comb += Assert(busy_vec.bit_select(port_a * VCS + vc_a, 1))
                for act_b, port_b, vc_b in holders[a + 1:]:
                    with m.If(act_a & act_b):
                        m.d.comb += Assert((port_a != port_b) | (vc_a != vc_b))
        # both VCs of output 1 held, by input VCs of different input ports
        both = Cat(*(act_a & act_b & (port_a == 1) & (port_b == 1) & (vc_a != vc_b)
                     for a, (act_a, port_a, vc_a) in enumerate(holders)
                     for b, (act_b, port_b, vc_b) in enumerate(holders)
                     if a // VCS != b // VCS)).any()
        m.d.comb += Cover(~rst & both)
        return m


class NoLossHarness(Elaboratable):
    """A ``Router`` with legal free inputs and one marked packet followed through it (module
    docstring).

    Parameters
    ----------
    router : type
        ``Router`` or a planted-bug copy.
    flow_control : str
        ``RouterParams.flow_control``.
    """

    def __init__(self, router=Router, flow_control="wormhole"):
        self.router, self.flow_control = router, flow_control

    def elaborate(self, platform):
        m, rst = reset_once()
        router = observed(self.router, _params(self.flow_control), _table())
        units = _input_units(router, platform)
        m.submodules.router = router
        d = VC_BUF_DEPTH
        seq_max = 1 << SEQ_BITS
        # flits of a packet at most: cut-through packets must fit in a VC buffer
        max_len = min(d, seq_max) if self.flow_control == "cut_through" else seq_max

        def tag(payload):
            return payload[TAG_BIT]

        def seq(payload):
            return payload[SEQ_LO:SEQ_LO + SEQ_BITS]

        # The marked packet: where it entered, how many of its flits entered and how long it is.
        started = Signal()                    # its head has entered
        mark_q = Signal(range(PORTS))
        mark_w = Signal(range(VCS))
        open_ = Signal()                      # its tail has not entered yet
        n_in = Signal(range(seq_max + 1))     # its flits that entered
        length = Signal(range(seq_max + 1))   # its flits (1 + the head's ``flits``)

        tagged_in = []
        for q in range(PORTS):
            ch = router.inp[q]
            valid, flit = Signal(name=f"in_valid{q}"), ch.flit
            m.d.comb += [valid.eq(AnySeq(1) & ~rst), ch.valid.eq(valid),
                         flit.eq(AnySeq(len(flit.as_value())))]
            pay, kind = flit.payload, flit.kind.as_value()
            # only destination bit 0, the tag, the sequence number and ``flits`` < 4 are free
            m.d.comb += Assume((pay & ~Const(_FREE_BITS, FLIT_WIDTH)) == 0)
            is_tagged = Signal(name=f"in_tagged{q}")
            m.d.comb += is_tagged.eq(valid & tag(pay))
            tagged_in.append(is_tagged)
            for w in range(VCS):
                on_w = Signal(name=f"in_on{q}_{w}")
                m.d.comb += on_w.eq(valid & (flit.vc == w))
                # upstream credits: vc_buf_depth, one per flit, back on inp.credit
                credits = Signal(range(d + 1), init=d, name=f"up_credits{q}_{w}")
                back = ch.credit[w]
                m.d.sync += credits.eq(credits + back - on_w)
                with m.If(on_w):
                    m.d.comb += Assume((credits != 0) | back)
                # well-formed packets: HEAD, flits - 1 BODY, TAIL (or HEAD_TAIL with flits 0)
                in_pkt = Signal(name=f"in_pkt{q}_{w}")
                left = Signal(FLITS_BITS, name=f"left{q}_{w}")   # flits still to come
                with m.If(on_w):
                    with m.If(in_pkt):
                        m.d.comb += Assume(kind == Mux(left == 1, FlitKind.TAIL, FlitKind.BODY))
                        m.d.sync += left.eq(left - 1)
                    with m.Else():
                        flits = pay[FLITS_LO:FLITS_LO + FLITS_BITS]
                        m.d.comb += Assume(flits < max_len)
                        m.d.comb += Assume(kind == Mux(flits == 0, FlitKind.HEAD_TAIL,
                                                       FlitKind.HEAD))
                        m.d.sync += left.eq(flits)
                    m.d.sync += in_pkt.eq(~is_tail_kind(kind))
                    mine = open_ & (mark_q == q) & (mark_w == w)
                    with m.If(in_pkt):
                        m.d.comb += Assume(tag(pay) == mine)
                    with m.Else():
                        with m.If(tag(pay)):
                            m.d.comb += Assume(~started)
                            m.d.sync += [started.eq(1), mark_q.eq(q), mark_w.eq(w),
                                         length.eq(pay[FLITS_LO:FLITS_LO + FLITS_BITS] + 1)]
                    with m.If(tag(pay)):
                        m.d.comb += Assume(seq(pay) == n_in)
                        m.d.sync += [n_in.eq(n_in + 1), open_.eq(~is_tail_kind(kind))]
                    with m.Else():
                        m.d.comb += Assume(seq(pay) == 0)
            with m.If(~valid):
                m.d.comb += Assume(~tag(pay))
        m.d.comb += Assume(sum(tagged_in) <= 1)

        # Downstream: a credit only for a flit received on that output VC and not yet credited.
        for o in range(PORTS):
            ch = router.out[o]
            m.d.comb += ch.credit.eq(AnySeq(VCS))
            for w in range(VCS):
                owed = Signal(range(d + 2), name=f"owed{o}_{w}")
                got = ch.valid & (ch.flit.vc == w)
                back = ch.credit[w]
                m.d.sync += owed.eq(owed + got - back)
                m.d.comb += Assume(~back | (owed != 0))
                with m.If(~rst):
                    # never a flit without a credit: at most vc_buf_depth outstanding
                    m.d.comb += Assert(owed <= d)

        # Buffer levels (the harness's count: flits written minus flits popped).
        levels, pops = {}, {}
        for q, iu in enumerate(units):
            for w in range(VCS):
                level = Signal(range(d + 2), name=f"level{q}_{w}")
                pop = Signal(name=f"pop{q}_{w}")
                on_w = router.inp[q].valid & (router.inp[q].flit.vc == w)
                m.d.comb += pop.eq(iu.pop[w] & iu.front_valid[w])
                m.d.sync += level.eq(level + on_w - pop)
                levels[q, w], pops[q, w] = level, pop
                with m.If(~rst):
                    m.d.comb += Assert(iu.front_valid[w] == (level != 0))

        # The marked packet's flits in their buffer: ``ahead`` untagged flits before them,
        # ``n_pop`` of them popped.
        ahead = Signal(range(d + 1))
        behind = Signal()          # the marked head entered behind another flit in its buffer
        n_pop = Signal(range(seq_max + 1))
        mark_pop = Signal()        # a marked flit leaves its buffer this cycle
        mark_level = Signal(range(d + 2))
        mark_popping = Signal()
        mark_front = Signal(FLIT_WIDTH)
        mark_front_valid = Signal()
        mark_port = Signal(range(PORTS))
        mark_vc = Signal(range(VCS))
        for q, iu in enumerate(units):
            for w in range(VCS):
                with m.If((mark_q == q) & (mark_w == w)):
                    m.d.comb += [mark_level.eq(levels[q, w]), mark_popping.eq(pops[q, w]),
                                 mark_front.eq(iu.front[w].payload),
                                 mark_front_valid.eq(iu.front_valid[w]),
                                 mark_port.eq(iu.route_port[w]), mark_vc.eq(iu.out_vc[w])]
        for q in range(PORTS):
            with m.If(tagged_in[q] & ~started):
                # the head enters: the flits ahead are those in its buffer after this cycle's pop
                for w in range(VCS):
                    with m.If(router.inp[q].flit.vc == w):
                        m.d.sync += [ahead.eq(levels[q, w] - pops[q, w]),
                                     behind.eq(levels[q, w] != pops[q, w])]
        with m.If(started & mark_popping):
            with m.If(ahead != 0):
                m.d.sync += ahead.eq(ahead - 1)
            with m.Elif(n_pop != n_in):
                m.d.comb += mark_pop.eq(1)
                m.d.sync += n_pop.eq(n_pop + 1)
        popped = Signal()            # a marked flit left its buffer last cycle
        popped_seq = Signal(SEQ_BITS)
        popped_kind = Signal(2)
        m.d.sync += [popped.eq(mark_pop), popped_seq.eq(seq(mark_front))]
        for q, iu in enumerate(units):
            for w in range(VCS):
                with m.If((mark_q == q) & (mark_w == w)):
                    m.d.sync += popped_kind.eq(iu.front[w].kind.as_value())

        # The marked flits on the outputs.
        n_out = Signal(range(seq_max + 1))
        out_port = Signal(range(PORTS))
        out_vc = Signal(range(VCS))
        tagged_out = [router.out[o].valid & tag(router.out[o].flit.payload) for o in range(PORTS)]
        for o in range(PORTS):
            with m.If(tagged_out[o]):
                m.d.sync += [n_out.eq(n_out + 1), out_port.eq(o),
                             out_vc.eq(router.out[o].flit.vc)]

        with m.If(~rst):
            m.d.comb += Assert(~router.error)
            with m.If(started):
                # in its buffer: untagged flits ahead, then the next marked flit at the front
                with m.If(ahead != 0):
                    m.d.comb += Assert(mark_front_valid & ~tag(mark_front))
                with m.Elif(n_pop != n_in):
                    m.d.comb += [Assert(mark_front_valid), Assert(tag(mark_front)),
                                 Assert(seq(mark_front) == n_pop)]
                m.d.comb += [Assert(n_pop <= n_in), Assert(n_in <= length),
                             Assert(mark_level >= ahead + n_in - n_pop)]
            with m.Else():
                m.d.comb += [Assert(n_in == 0), Assert(n_pop == 0), Assert(n_out == 0)]
            # no tagged flit in another buffer
            for q, iu in enumerate(units):
                for w in range(VCS):
                    with m.If(iu.front_valid[w] & tag(iu.front[w].payload)):
                        m.d.comb += Assert(started & (mark_q == q) & (mark_w == w)
                                           & (ahead == 0) & (n_pop != n_in))
            # a marked flit that left its buffer is on an output now, and only then
            m.d.comb += Assert(sum(tagged_out) == popped)
            m.d.comb += Assert(n_out + popped == n_pop)
            for o in range(PORTS):
                f = router.out[o].flit
                with m.If(tagged_out[o]):
                    m.d.comb += [
                        Assert(seq(f.payload) == n_out),           # in order, once each
                        Assert(seq(f.payload) == popped_seq),
                        Assert(f.kind.as_value() == popped_kind),
                        Assert(is_head_kind(f.kind.as_value()) == (n_out == 0)),
                        Assert(is_tail_kind(f.kind.as_value()) == (n_out + 1 == length)),
                        Assert(o == mark_port),
                        Assert(f.vc == mark_vc),
                    ]
                    with m.If(n_out != 0):     # one output port, one VC
                        m.d.comb += [Assert(o == out_port), Assert(f.vc == out_vc)]
        # the marked packet, of the longest length (4 flits; 2 in cut-through), all out, with a
        # flit of another packet on the other VC of its output port while it was being sent
        other = ever(m, Cat(*(router.out[o].valid & ~tag(router.out[o].flit.payload)
                               & (o == mark_port) & (router.out[o].flit.vc != mark_vc)
                               & (n_out != 0) for o in range(PORTS))).any())
        m.d.comb += Cover(~rst & started & (length == max_len) & (n_out == length) & other)
        # a marked packet of the longest length, which entered behind another flit, all out
        m.d.comb += Cover(~rst & started & behind & (length == max_len) & (n_out == length))
        return m


_GENERALISES = __doc__.split("Parameters: ", 1)[1].strip()

_FLOW_NAME = {"wormhole": "", "cut_through": ".cut-through"}

PROPERTIES = [
    FormalProperty(
        name="router.arbiter-fair",
        claim=f"a round-robin arbiter (N = {ARBITER_N}) grants at most one request, only a "
              "request, always one when there is a request, and a requester that keeps "
              "requesting is granted no later than the N-th cycle in which the priority moves "
              "(within N cycles when every grant advances)",
        build=lambda bug: ArbiterHarness(_StickyArbiter if bug else RoundRobinArbiter),
        bug=planted(_StickyArbiter),
        depth=4,
        method="prove",
        generalises=_GENERALISES),
    FormalProperty(
        name="router.switch-one-per-output",
        claim="the switch allocator grants at most one flit per output port and per input "
              "port in each cycle, exactly one to each valid output, from the input port and VC "
              "its out_sel and in_sel name, and only to a requesting VC bound for that output",
        build=lambda bug: SwitchHarness(_GreedySwitch if bug else SwitchAllocator),
        bug=planted(_GreedySwitch),
        depth=2,
        method="prove",
        generalises=_GENERALISES),
    *(FormalProperty(
        name=f"router.vc-exclusive{_FLOW_NAME[fc]}",
        claim=f"{fc}: with any inputs, at most one input VC of the router holds (is active on) "
              "any output VC at a time, and a held output VC is marked busy",
        build=lambda bug, fc=fc: VCExclusiveHarness(_BusyBlindRouter if bug else Router, fc),
        bug=planted(_BusyBlindRouter),
        depth=8,
        method="prove",
        generalises=_GENERALISES) for fc in FLOW_CONTROLS),
    *(FormalProperty(
        name=f"router.no-loss{_FLOW_NAME[fc]}",
        claim=f"{fc}: with credit-respecting, well-formed inputs and credit-returning outputs, "
              "every flit of a packet the environment marks stays in its VC buffer behind the "
              "flits ahead of it until it is popped, is on an output port the next cycle, and "
              "leaves once, in order, with its kind, on one output port and one output VC; no "
              "marked flit is created; no buffer overflows and no output VC is sent a flit "
              "without a credit",
        build=lambda bug, fc=fc: NoLossHarness(_LossyRouter if bug else Router, fc),
        bug=planted(_LossyRouter),
        depth=NO_LOSS_DEPTH,
        method="bmc",
        generalises=_GENERALISES) for fc in FLOW_CONTROLS),
]
