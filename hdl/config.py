"""Parameters of the network interface (docs/hardware.md, "Parameters").

One frozen, validated dataclass is shared by every block of the NI and by the network top, so a
bad value is rejected once, at construction, with a ``ValueError`` naming it.
"""

import numbers
from dataclasses import dataclass

from amaranth.utils import ceil_log2

__all__ = ["NIConfig", "FLOW_CONTROL_MODES", "HEAD_INFO_BITS", "SCHEDULE_ROW_BITS",
           "FIELD_ADDR_BITS", "MAX_PORTS", "MAX_LINK_STAGES"]

#: Flow-control modes: whole sub-messages (the MultiTree paper's) or one credit per flit.
FLOW_CONTROL_MODES = ("message", "credit")

#: Bits of the head flit's ``HeadInfo`` (flow 8, step 16, chunk 8, op 1, flits 20, addr 20).
HEAD_INFO_BITS = 73
#: Bits of one schedule-table row (valid 1, step 16, op 1, flow 8, chunk 8, addr 20, flits 20,
#: deps 8, dest 10, src 10); the host writes a row with one ``host_cmd`` word, so it must fit in
#: a flit.
SCHEDULE_ROW_BITS = 102
#: Bits of the router's head (``hdl.router.flit.RouterHead``) below a routed NI's ``HeadInfo``.
ROUTER_HEAD_BITS = 32
#: Width of buffer addresses and flit counts in rows, head flits and host commands.
FIELD_ADDR_BITS = 20
#: ``host_cmd.engine`` is 4 bits wide and there are ``2 * num_ports`` engines.
MAX_PORTS = 8
#: Register stages per link direction the hardware builds (``hdl.link``, ``hdl.router.network``):
#: a longer link would only make a huge design.
MAX_LINK_STAGES = 1024


def check_int(name, value, lo, hi=None):
    """Raise ``ValueError`` naming ``name`` unless ``value`` is an integer in ``lo..hi``."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or value < lo or (hi is not None and value > hi)):
        bound = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
        raise ValueError(f"{name} must be {bound}, not {value!r}")


@dataclass(frozen=True)
class NIConfig:
    """Parameters of one network interface (every NI of a network shares them).

    Parameters
    ----------
    num_ports : int
        Network ports per NI, 1..8 (the largest node degree of the topology).
    elem_width : int
        Bits per element; additions wrap around modulo ``2**elem_width`` (int32: 32).
    elems_per_flit : int
        Elements per flit; ``flit_width = elem_width * elems_per_flit`` must be at least 102 bits
        (a schedule-table row is written with one host word), 105 when ``routed``.
    buffer_depth : int
        Local buffer, in flits (2..2**20).
    table_depth : int
        Rows per engine table (2..2**16).
    max_chunks : int
        Chunks (dependency counters) per node (1..256: the chunk field is 8 bits).
    rx_buffer_depth : int
        Receive FIFO per port, in flits (BookSim ``vc_buf_depth``), at least 2; in message mode
        at least ``submessage_flits``. See ``full_rate_rx_depth`` for the depth that sustains full rate.
    flow_control : str
        ``"message"`` (whole sub-messages are granted) or ``"credit"`` (one credit per flit).
    submessage_flits : int
        Flits granted by one credit in message mode (the paper's 256 B = 16 flits).
    link_latency : int
        Register stages per link direction, forward and credit return (0..MAX_LINK_STAGES).
    routed : bool
        The NI's ports sit on router local ports (``hdl.routed_network``): heads start with the
        router's 32-bit header (destination and source terminal from the row), and receive
        engines take messages in any order, writing where the head says (their rows only count
        the messages). False: point-to-point links, messages checked in table order.

    Attributes
    ----------
    flit_width : int
        ``elem_width * elems_per_flit``.
    buffer_addr_width, table_addr_width : int
        Address widths of the buffer memory and of an engine table.
    initial_credits : int
        Credits of a send port after reset: ``rx_buffer_depth`` (credit mode) or
        ``rx_buffer_depth // submessage_flits`` (message mode).
    full_rate_rx_depth : int
        ``2 * link_latency + 2 * submessage_flits``: with ``rx_buffer_depth`` at least this, a
        link runs at one flit per cycle in both modes (for messages of whole sub-messages in
        message mode; see ``hdl.credit``).

    Raises
    ------
    ValueError
        If a value is out of range; the message names the parameter and the value.
    """

    num_ports: int = 4
    elem_width: int = 32
    elems_per_flit: int = 4
    buffer_depth: int = 1024
    table_depth: int = 64
    max_chunks: int = 64
    rx_buffer_depth: int = 32
    flow_control: str = "message"
    submessage_flits: int = 16
    link_latency: int = 4
    routed: bool = False

    def __post_init__(self):
        check_int("num_ports", self.num_ports, 1, MAX_PORTS)
        check_int("elem_width", self.elem_width, 1)
        check_int("elems_per_flit", self.elems_per_flit, 1)
        if self.flit_width < SCHEDULE_ROW_BITS:
            raise ValueError(
                f"flit width elem_width * elems_per_flit = {self.elem_width} * "
                f"{self.elems_per_flit} = {self.flit_width} bits is too narrow: a schedule-table "
                f"row ({SCHEDULE_ROW_BITS} bits) must fit in one host word")
        check_int("buffer_depth", self.buffer_depth, 2, 1 << FIELD_ADDR_BITS)
        check_int("table_depth", self.table_depth, 2, 1 << 16)
        check_int("max_chunks", self.max_chunks, 1, 256)
        check_int("rx_buffer_depth", self.rx_buffer_depth, 2)
        if self.flow_control not in FLOW_CONTROL_MODES:
            raise ValueError(f"flow_control must be one of {', '.join(map(repr, FLOW_CONTROL_MODES))}, "
                             f"not {self.flow_control!r}")
        check_int("submessage_flits", self.submessage_flits, 1)
        check_int("link_latency", self.link_latency, 0, MAX_LINK_STAGES)
        if not isinstance(self.routed, bool):
            raise ValueError(f"routed must be True or False, not {self.routed!r}")
        if self.routed and self.flit_width < ROUTER_HEAD_BITS + HEAD_INFO_BITS:
            raise ValueError(
                f"flit width {self.flit_width} bits is too narrow for a routed head: the router "
                f"header and the HeadInfo need {ROUTER_HEAD_BITS + HEAD_INFO_BITS} bits")
        if self.flow_control == "message" and self.rx_buffer_depth < self.submessage_flits:
            raise ValueError(
                f"rx_buffer_depth {self.rx_buffer_depth!r} is smaller than submessage_flits "
                f"{self.submessage_flits!r}: in message mode a receive FIFO must hold at least one "
                f"sub-message (else a send port has no credit)")

    @property
    def flit_width(self):
        return self.elem_width * self.elems_per_flit

    @property
    def buffer_addr_width(self):
        return ceil_log2(self.buffer_depth)

    @property
    def table_addr_width(self):
        return ceil_log2(self.table_depth)

    @property
    def num_engines(self):
        """Engine tables per NI: send 0..P-1, then receive 0..P-1."""
        return 2 * self.num_ports

    @property
    def initial_credits(self):
        if self.flow_control == "credit":
            return self.rx_buffer_depth
        return self.rx_buffer_depth // self.submessage_flits

    @property
    def full_rate_rx_depth(self):
        return 2 * self.link_latency + 2 * self.submessage_flits
