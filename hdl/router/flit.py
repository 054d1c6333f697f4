"""Router flits and the router head format.

A packet is a head flit followed by zero or more payload flits, the kinds as ``hdl.flit.FlitKind``
(``HEAD BODY ... TAIL``, or one ``HEAD_TAIL`` flit). Inside the network every flit also carries
the virtual channel it occupies on its current link (``RouterFlit``); at the injection and
ejection ports the VC is not visible (``PacketFlit``).

The head flit's payload holds a ``RouterHead`` in its low 32 bits; the bits above are free for
the endpoint (an NI may put its ``hdl.flit.HeadInfo`` there: 32 + 53 bits fit in a 128-bit flit).
"""

from amaranth.lib import data
from amaranth.utils import ceil_log2

from ..flit import FlitKind

__all__ = ["FlitKind", "RouterHead", "RouterFlit", "PacketFlit", "ROUTER_HEAD_BITS",
           "MAX_PACKET_FLITS", "MAX_PAYLOAD_FLITS", "head_payload", "is_head_kind", "is_tail_kind"]


class RouterHead(data.Struct):
    """The head flit's routing header (low bits of the payload).

    Members
    -------
    dest : unsigned(10)
        Destination endpoint (terminal) id, 0..1023 (``golden_model.topology.MAX_NODES``).
    src : unsigned(10)
        Source endpoint id (not used for routing; for the endpoint and for checking).
    flits : unsigned(12)
        Flits that follow the head (0 for a ``HEAD_TAIL`` packet). Virtual cut-through uses it
        to reserve room for the whole packet downstream.
    """
    dest: 10
    src: 10
    flits: 12


#: Bits of ``RouterHead``: the smallest legal ``flit_width``.
ROUTER_HEAD_BITS = 32
#: Most flits that can follow a head: the largest value of ``RouterHead.flits`` (4095). The
#: longest routed NI message; the hardware plan passes it to ``golden_model.lowering.lower``.
MAX_PAYLOAD_FLITS = (1 << RouterHead.as_shape()["flits"].width) - 1
#: Longest packet the header can describe (head + ``MAX_PAYLOAD_FLITS`` flits).
MAX_PACKET_FLITS = MAX_PAYLOAD_FLITS + 1


def vc_bits(num_vcs):
    """Width of the ``vc`` field: ``ceil_log2(num_vcs)``, at least 1 (a zero-width field would
    print as ``[-1:0]`` in Verilog)."""
    return max(1, ceil_log2(num_vcs))


class PacketFlit(data.StructLayout):
    """A flit at an injection or ejection port: ``{"kind": FlitKind, "payload": flit_width}``
    (the layout of ``hdl.flit.Flit`` without its 53-bit minimum)."""

    def __init__(self, flit_width):
        super().__init__({"kind": FlitKind, "payload": flit_width})


class RouterFlit(data.StructLayout):
    """A flit on a router link: ``{"kind": FlitKind, "vc": max(1, ceil_log2(num_vcs)),
    "payload": flit_width}`` (``vc`` is 0 with one VC)."""

    def __init__(self, flit_width, num_vcs):
        super().__init__({"kind": FlitKind, "vc": vc_bits(num_vcs), "payload": flit_width})


def head_payload(dest, src, flits, extra=0):
    """The integer payload of a head flit (``extra`` goes above the 32 header bits)."""
    for name, value, width in (("dest", dest, 10), ("src", src, 10), ("flits", flits, 12)):
        if not isinstance(value, int) or not 0 <= value < (1 << width):
            raise ValueError(f"head {name} must be an integer in 0..{(1 << width) - 1}, "
                             f"not {value!r}")
    return dest | src << 10 | flits << 20 | extra << ROUTER_HEAD_BITS


def is_head_kind(kind):
    """``kind`` (the bits of a FlitKind) is HEAD or HEAD_TAIL."""
    # HEAD = 0b00, HEAD_TAIL = 0b11: head iff the two bits are equal.
    return ~(kind[0] ^ kind[1])


def is_tail_kind(kind):
    """TAIL = 0b10, HEAD_TAIL = 0b11: tail iff bit 1 is set."""
    return kind[1]
