"""Flits on a link (docs/hardware.md, "Flit").

A message is one head flit followed by ``flits`` payload flits, the last of which is a TAIL
(``BODY ... BODY TAIL``; a message of one payload flit is ``HEAD TAIL``). The head's payload holds
a ``HeadInfo`` in its low bits, which the receiver checks against its schedule-table row.
"""

from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import Out

from .config import CHUNK_BITS, FLOW_BITS, STEP_BITS

__all__ = ["FlitKind", "Op", "Flit", "FlitStream", "HeadInfo", "head_info_fields"]


class FlitKind(enum.Enum, shape=2):
    """Position of a flit in its message."""
    HEAD = 0       #: first flit; payload is a ``HeadInfo``
    BODY = 1       #: payload flit, not the last
    TAIL = 2       #: last payload flit
    HEAD_TAIL = 3  #: a message without payload (never sent: the IR drops empty chunks)


class Op(enum.Enum, shape=1):
    """What the receiver does with the payload (values as ``golden_model.schedule.Op``)."""
    REDUCE = 0  #: buffer += payload (element-wise, wrap-around)
    COPY = 1    #: buffer = payload


class HeadInfo(data.Struct):
    """The head flit's payload (low ``HEAD_INFO_BITS`` = 81 bits; the rest of the flit is zero). Behind a router
    (``NIConfig.routed``) it sits above the router's 32-bit ``RouterHead`` instead.

    Members
    -------
    flow : unsigned(FLOW_BITS)
        Tree id (0 for non-tree algorithms).
    step : unsigned(STEP_BITS)
        Schedule step of the transfer.
    chunk : unsigned(CHUNK_BITS)
    op : Op
    flits : unsigned(20)
        Payload flits that follow the head.
    addr : unsigned(20)
        Buffer flit address of the chunk (where a routed receiver writes the payload).
    """
    flow: FLOW_BITS
    step: STEP_BITS
    chunk: CHUNK_BITS
    op: Op
    flits: 20
    addr: 20


#: Fields of a ``HeadInfo`` that the receiver compares with its row.
head_info_fields = ("flow", "step", "chunk", "op", "flits", "addr")


class Flit(data.StructLayout):
    """Layout of a flit: ``{"kind": FlitKind, "payload": flit_width}``.

    Parameters
    ----------
    flit_width : int
        Payload bits (``NIConfig.flit_width``).

    Raises
    ------
    ValueError
        If ``flit_width`` cannot hold a ``HeadInfo``.
    """

    def __init__(self, flit_width):
        if (isinstance(flit_width, bool) or not isinstance(flit_width, int)
                or flit_width < HeadInfo.as_shape().size):
            raise ValueError(f"flit_width must be an integer of at least "
                             f"{HeadInfo.as_shape().size} bits (a HeadInfo), not {flit_width!r}")
        super().__init__({"kind": FlitKind, "payload": flit_width})


class FlitStream(wiring.Signature):
    """A link's flit channel: ``valid`` and ``payload`` (a ``Flit``), no ``ready``.

    Like ``stream.Signature(Flit, always_ready=True)`` but without the constant ``ready`` member,
    so it can be a port of a top-level module: there is no back-pressure on a link, credits
    guarantee room at the receiver.

    Parameters
    ----------
    flit_width : int

    Members
    -------
    valid : ``Out(1)``
    payload : ``Out(Flit(flit_width))``
    """

    def __init__(self, flit_width):
        super().__init__({"valid": Out(1), "payload": Out(Flit(flit_width))})
