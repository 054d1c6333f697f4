"""Parameters of the network interface (docs/hardware.md, "Parameters").

One frozen, validated dataclass is shared by every block of the NI and by the network top, so a
bad value is rejected once, at construction, with a ``ValueError`` naming it.
"""

import numbers
from dataclasses import dataclass, fields

from amaranth.utils import ceil_log2

from golden_model.elements import element_type

from .adders import hardware_adder

__all__ = ["NIConfig", "FLOW_CONTROL_MODES", "HEAD_INFO_BITS", "SCHEDULE_ROW_BITS", "CHUNK_BITS",
           "FLOW_BITS", "COUNT_BITS", "STAGE_BITS",
           "FIELD_ADDR_BITS", "STEP_BITS", "MAX_PORTS", "MAX_LINK_STAGES", "full_rate_rx_depth",
           "buffer_banks", "rotation_slack", "check_int", "check_pow2", "SIZED_FIELDS", "RELEASE_BITS", "RELEASE_ADDR_BIT", "LOOPBACK_LATENCY",
           "schedule_needs", "check_schedule_fits",
           "network_config_for"]

#: Flow-control modes: whole sub-messages (the MultiTree paper's) or one credit per flit.
FLOW_CONTROL_MODES = ("message", "credit")

#: Width of chunk numbers in rows, head flits and the arrival counters (``max_chunks`` at most
#: ``2 ** CHUNK_BITS``: many sub-chunks per tree on 64-node and larger networks).
CHUNK_BITS = 12
#: Width of flow (tree) numbers in rows and head flits: one tree per node up to 4096 nodes.
FLOW_BITS = 12
#: Width of a row's ``deps`` and of an arrival counter: receives into one chunk at one node.
COUNT_BITS = 8
#: Bits of the head flit's ``HeadInfo`` (flow 12, step 16, chunk 12, op 1, flits 20, addr 20).
HEAD_INFO_BITS = 81
#: Width of a row's staging slot (``golden_model.lowering``, staged reductions): at most 63
#: staged REDUCE messages into one chunk at one node.
STAGE_BITS = 6
#: Bits of one schedule-table row (valid 1, step 16, op 1, flow 12, chunk 12, addr 20, flits 20,
#: deps 8, dest 10, src 10, stage 6, unstage 1); the host writes a row with one ``host_cmd``
#: word, so it must fit in a flit.
SCHEDULE_ROW_BITS = 117
#: Bits of the router's head (``hdl.router.flit.RouterHead``) below a routed NI's ``HeadInfo``.
ROUTER_HEAD_BITS = 32
#: Width of buffer addresses and flit counts in rows, head flits and host commands.
FIELD_ADDR_BITS = 20
#: Width of schedule steps in rows, head flits and the NI's ``step`` status output.
STEP_BITS = 16
#: Width of a routed send row's release cycle (``hdl.schedule_table``, its release table): a
#: timetabled head issues no earlier than that NI cycle; runs of up to 16.7 million cycles.
RELEASE_BITS = 24
#: The table address bit of a host command that selects a routed send engine's release table
#: instead of its schedule table (``table_depth`` is at most ``2 ** 16``, so the bit is free).
RELEASE_ADDR_BIT = 16
#: Cycles of the link that joins a routed float NI's loopback port to itself
#: (``hdl.routed_network``; a register each way: the NI's send engine and receive FIFO are not
#: joined combinationally).
LOOPBACK_LATENCY = 1
#: Copies of the NI buffer's banks an ``NIConfig`` may ask for (``hdl.banked_buffer``).
BUFFER_COPIES = (1, 2)
#: ``host_cmd.engine`` is 4 bits wide and there are ``2 * num_ports`` engines.
MAX_PORTS = 8
#: Cycles per link direction the hardware builds (``hdl.link``, ``hdl.router.network``, one
#: ``hdl.delay_line`` each); the limit keeps delay-line memories and receive FIFOs a sane size.
MAX_LINK_STAGES = 1024


#: The fields a schedule sizes, with the hardware's range and what they count: the one table of
#: these limits (``NIConfig`` checks its fields against it, ``network_config_for`` and
#: ``check_schedule_fits`` a schedule's needs).
SIZED_FIELDS = {
    "num_ports": (1, MAX_PORTS, "ports per NI"),
    "buffer_depth": (2, 1 << FIELD_ADDR_BITS, "buffer flits"),
    "table_depth": (2, 1 << 16, "rows per engine table"),
    "max_chunks": (1, 1 << CHUNK_BITS, "chunks (arrival counters) per node"),
}


def check_int(name, value, lo, hi=None):
    """Raise ``ValueError`` naming ``name`` unless ``value`` is an integer in ``lo..hi``."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or value < lo or (hi is not None and value > hi)):
        bound = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
        raise ValueError(f"{name} must be {bound}, not {value!r}")


def check_pow2(name, value, lo, hi):
    """:func:`check_int`, and ``ValueError`` naming ``name`` unless ``value`` is a power of
    two."""
    check_int(name, value, lo, hi)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two in {lo}..{hi}, not {value!r}")


@dataclass(frozen=True)
class NIConfig:
    """Parameters of one network interface (every NI of a network shares them).

    Parameters
    ----------
    num_ports : int
        Ports per NI, 1..8: the largest node degree of the topology (one on a fat-tree or
        BiGraph behind routers), plus the loopback port when :attr:`loopback`.
    dtype : str
        Element type (``golden_model.elements``) the reduction unit adds; it must have a
        hardware adder (``hdl.adders``): ``"int32"`` (wrap-around modulo 2^32).
    elems_per_flit : int
        Elements per flit; ``flit_width = elem_width * elems_per_flit`` must be at least
        ``SCHEDULE_ROW_BITS`` = 117 bits (a schedule-table row is written with one host word).
    buffer_depth : int
        Local buffer, in flits (2..2**20).
    table_depth : int
        Rows per engine table (2..2**16).
    max_chunks : int
        Chunks (arrival counters, ``hdl.arrivals``) per node (1..4096: the chunk field is
        ``CHUNK_BITS`` = 12 bits).
    rx_buffer_depth : int
        Receive FIFO per port, in flits (BookSim ``vc_buf_depth``), at least 2; in message mode
        at least ``submessage_flits``. See ``full_rate_rx_depth`` for the depth that sustains full rate.
    flow_control : str
        ``"message"`` (whole sub-messages are granted) or ``"credit"`` (one credit per flit).
    submessage_flits : int
        Flits granted by one credit in message mode (the paper's 256 B = 16 flits).
    link_latency : int
        Cycles per link direction, forward and credit return (0..MAX_LINK_STAGES): a memory
        delay line (``hdl.delay_line``) above 2 cycles, registers up to 2. On a hardware
        topology whose links differ (``hdl.link.built_links``), the largest (what the receive
        FIFOs and the router buffers are sized for).
    routed : bool
        The NI's ports sit on router local ports (``hdl.routed_network``): heads start with the
        router's 32-bit header (destination and source terminal from the row), and receive
        engines take messages in any order, writing where the head says (their rows only count
        the messages). False: point-to-point links, messages checked in table order. A routed
        NI of a type whose add is not associative has a loopback port (:attr:`loopback`).
    buffer_copies : int
        1 or 2: copies of the buffer's banks (``hdl.banked_buffer``). 2 gives the send engines
        and the lanes a copy each: twice the buffer's memory bits, fewer banks and about half
        the multiplexers between the clients and the banks.
    router_vcs : int
        With ``routed``: virtual channels per router port (``hdl.router.router.RouterParams``,
        which checks it when the routed network is built: 1..16, even on a torus for its
        datelines). Unused without ``routed``.
    router_vc_buf_depth : int or None
        With ``routed``: flits per router VC buffer (default None: the depth for full rate,
        deeper with :attr:`loopback`, ``hdl.routed_network.router_vc_buf_depth``). Unused
        without ``routed``.

    Attributes
    ----------
    element_type : golden_model.elements.ElementType
        The description of ``dtype``.
    elem_width : int
        Bits per element (``element_type.bits``).
    flit_width : int
        ``elem_width * elems_per_flit``.
    buffer_addr_width, table_addr_width : int
        Address widths of the buffer memory and of an engine table.
    initial_credits : int
        Credits of a send port after reset: ``rx_buffer_depth`` (credit mode) or
        ``rx_buffer_depth // submessage_flits`` (message mode).
    buffer_banks : int
        Banks of the buffer (``hdl.banked_buffer``): the next power of two >= 2 * num_ports /
        buffer_copies (at least 2).
    full_rate_rx_depth : int
        ``2 * link_latency + 2 * submessage_flits + buffer_banks``: with ``rx_buffer_depth`` at
        least this, a link runs at one flit per cycle in both modes (for messages of whole
        sub-messages in message mode; see ``hdl.credit``).
    loopback_rx_depth : int
        Receive-FIFO flits of the loopback port (``loopback``): ``rx_buffer_depth``, or the
        full-rate depth of the :data:`LOOPBACK_LATENCY`-cycle loopback link if that is more,
        so that a staged add streams at one flit per cycle whatever the network ports'
        FIFOs (with the tight 8-flit FIFOs of the routed tests a 49-flit add took 80 cycles).

    Raises
    ------
    ValueError
        If a value is out of range; the message names the parameter and the value.
    """

    num_ports: int = 4
    dtype: str = "int32"
    elems_per_flit: int = 4
    buffer_depth: int = 1024
    table_depth: int = 64
    max_chunks: int = 64
    rx_buffer_depth: int = 32
    flow_control: str = "message"
    submessage_flits: int = 16
    link_latency: int = 4
    routed: bool = False
    buffer_copies: int = 1
    router_vcs: int = 2
    router_vc_buf_depth: int | None = None

    def __post_init__(self):
        for name, (lo, hi, _) in SIZED_FIELDS.items():
            check_int(name, getattr(self, name), lo, hi)
        if not isinstance(self.dtype, str):
            raise ValueError(f"dtype must be an element type name such as 'int32', not "
                             f"{self.dtype!r}")
        hardware_adder(element_type(self.dtype))     # raises for a type the NI cannot add
        check_int("elems_per_flit", self.elems_per_flit, 1)
        if self.flit_width < SCHEDULE_ROW_BITS:
            raise ValueError(
                f"flit width elem_width * elems_per_flit = {self.elem_width} * "
                f"{self.elems_per_flit} = {self.flit_width} bits is too narrow: a schedule-table "
                f"row ({SCHEDULE_ROW_BITS} bits) must fit in one host word")
        check_int("rx_buffer_depth", self.rx_buffer_depth, 2)
        if self.flow_control not in FLOW_CONTROL_MODES:
            raise ValueError(f"flow_control must be one of {', '.join(map(repr, FLOW_CONTROL_MODES))}, "
                             f"not {self.flow_control!r}")
        check_int("submessage_flits", self.submessage_flits, 1)
        check_int("link_latency", self.link_latency, 0, MAX_LINK_STAGES)
        if not isinstance(self.routed, bool):
            raise ValueError(f"routed must be True or False, not {self.routed!r}")
        if isinstance(self.buffer_copies, bool) or self.buffer_copies not in BUFFER_COPIES:
            raise ValueError(f"buffer_copies must be 1 or 2, not {self.buffer_copies!r}")
        if self.loopback and self.num_ports < 2:
            raise ValueError(f"a routed {self.dtype} NI needs num_ports >= 2 (a network port and "
                             f"the loopback port), not {self.num_ports}")
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
    def element_type(self):
        return element_type(self.dtype)

    @property
    def loopback(self):
        """The NI's last port is joined to itself and adds staged contributions in schedule
        order (``golden_model.lowering``, staged reductions): a routed NI receives messages in
        any order, which only an associative add (int32) may ignore."""
        return self.routed and not self.element_type.associative

    @property
    def terminal_ports(self):
        """Ports that face the network: all but the loopback port."""
        return self.num_ports - self.loopback

    @property
    def elem_width(self):
        return self.element_type.bits

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
    def num_tables(self):
        """Tables the host loads per NI: the engine tables, and on a routed NI each send
        engine's release table (``hdl.schedule_table``)."""
        return self.num_engines + (self.num_ports if self.routed else 0)

    @property
    def initial_credits(self):
        if self.flow_control == "credit":
            return self.rx_buffer_depth
        return self.rx_buffer_depth // self.submessage_flits

    @property
    def buffer_banks(self):
        return buffer_banks(self.num_ports, self.buffer_copies)

    @property
    def ordering_reads_arrivals(self):
        """The lanes' ordering rule (``hdl.ordering``) reads the arrival counters: on a
        point-to-point NI, whose receive rows come in schedule order; a routed NI takes messages
        in any order and orders them otherwise."""
        return not self.routed

    @property
    def arrival_readers(self):
        """Readers of the arrival counters (``hdl.arrivals``): the P send engines, and the P
        lanes when :attr:`ordering_reads_arrivals`."""
        return self.num_ports * (2 if self.ordering_reads_arrivals else 1)

    @property
    def full_rate_rx_depth(self):
        return full_rate_rx_depth(self.link_latency, self.submessage_flits, self.buffer_banks)

    @property
    def loopback_rx_depth(self):
        return max(self.rx_buffer_depth, full_rate_rx_depth(LOOPBACK_LATENCY,
                                                             self.submessage_flits,
                                                             self.buffer_banks))


def buffer_banks(num_ports, copies=1):
    """Banks of the buffer of an NI with ``num_ports`` ports and ``copies`` copies of it
    (``hdl.banked_buffer``): the next power of two >= ``2 * num_ports / copies``, at least 2
    (one rotation slot per send engine and reduction lane of each copy)."""
    return 1 << ceil_log2(max(2, 2 * num_ports // copies))


def full_rate_rx_depth(link_latency, submessage_flits, banks):
    """Receive-FIFO flits that let a link run at one flit per cycle in both flow-control modes:
    ``2 * link_latency + 2 * submessage_flits + banks`` (the credit loop's round trip, two
    sub-messages, and the ``banks - 1`` cycles a reduction lane may wait for its bank slot;
    ``hdl.credit``, ``hdl.banked_buffer``)."""
    return 2 * link_latency + 2 * submessage_flits + banks


def rotation_slack(config, lowered):
    """Most cycles the buffer's bank rotation (``hdl.banked_buffer``) and the arrival counters'
    loads (``hdl.arrivals``) can add to a run of ``lowered`` at full rate, per message on the
    longest chain of waits (``LoweredSchedule.message_chain``): K - 1 for the bank and
    ``load_cycles(arrival_readers)`` for a count, at the sender and again at the receiver. The
    RTL's cycles lie between the timing model's and that much more."""
    from .arrivals import load_cycles       # hdl.arrivals imports this module
    per_message = 2 * (config.buffer_banks - 1) + 2 * load_cycles(config.arrival_readers)
    return per_message * lowered.message_chain


def schedule_needs(lowered):
    """What a ``golden_model.lowering.LoweredSchedule`` needs of the NI: ``{field: value}`` for
    the :data:`SIZED_FIELDS` (ports, buffer flits, longest engine table, chunks)."""
    return {"num_ports": lowered.num_ports, "buffer_depth": lowered.buffer_flits,
            "table_depth": lowered.table_depth, "max_chunks": lowered.num_chunk_ids}


def check_schedule_fits(config, lowered):
    """Raise ``ValueError`` unless ``lowered`` (a ``LoweredSchedule``) runs on hardware built with
    ``config``: the same lowering (routed or not, elements per flit) and every
    :func:`schedule_needs` within the config (the message names what and both values).
    ``config`` needs only those fields (the testbench passes stand-ins)."""
    routed = getattr(config, "routed", False)
    if lowered.routed != routed:
        raise ValueError(f"the schedule is lowered with routed={lowered.routed}, the hardware "
                         f"has routed={routed}")
    loopback = getattr(config, "loopback", False)
    if lowered.loopback != loopback:
        raise ValueError(f"the schedule is lowered with staged reductions={lowered.loopback}, "
                         f"the hardware has a loopback port={loopback}")
    if lowered.elements_per_flit != config.elems_per_flit:
        raise ValueError(f"the schedule is lowered for {lowered.elements_per_flit} elements per "
                         f"flit, the hardware has {config.elems_per_flit}")
    for name, need in schedule_needs(lowered).items():
        if need > getattr(config, name):
            raise ValueError(f"{lowered.schedule.algorithm} on {lowered.schedule.topology.spec} "
                             f"needs {need:,} {SIZED_FIELDS[name][2]}, the hardware has "
                             f"{getattr(config, name):,} ({name})")


def network_config_for(lowered, **overrides):
    """The ``NIConfig`` of hardware that runs every schedule in ``lowered``.

    Sizes the :data:`SIZED_FIELDS` to the largest need (``schedule_needs``, at least each
    field's smallest legal value), ``routed`` and ``elems_per_flit`` as the lowering's, and
    ``rx_buffer_depth`` to :func:`full_rate_rx_depth`; every other field keeps its default.
    ``overrides`` replace any field (a sized one may only grow).

    Parameters
    ----------
    lowered : LoweredSchedule or sequence of LoweredSchedule
        Lowered alike (routed or not, elements per flit).
    **overrides
        ``NIConfig`` fields.

    Returns
    -------
    NIConfig

    Raises
    ------
    ValueError
        If an override names no ``NIConfig`` field or is invalid, the lowerings differ, a need
        exceeds the hardware's range (the message names the schedule, what it needs and the
        limit), or an override is smaller than a need.
    """
    lowered = [lowered] if not isinstance(lowered, (list, tuple)) else list(lowered)
    if not lowered:
        raise ValueError("network_config_for needs at least one lowered schedule")
    names = {f.name for f in fields(NIConfig)}
    for key in overrides:
        if key not in names:
            raise ValueError(f"unknown NIConfig field {key!r}: expected one of "
                             f"{', '.join(sorted(names))}")
    first = lowered[0]
    for lw in lowered[1:]:
        if (lw.routed, lw.elements_per_flit) != (first.routed, first.elements_per_flit):
            raise ValueError("the schedules of one hardware must be lowered alike (routed, "
                             "elements per flit)")
    need = {}
    for lw in lowered:
        for name, value in schedule_needs(lw).items():
            lo, hi, what = SIZED_FIELDS[name]
            if value > hi:
                s = lw.schedule
                raise ValueError(f"{s.algorithm} on {s.topology.spec} with {s.num_elements:,} "
                                 f"elements per node needs {value:,} {what}; the NI has at most "
                                 f"{hi:,}")
            need[name] = max(need.get(name, lo), value)
    defaults = NIConfig()
    latency = overrides.get("link_latency", defaults.link_latency)
    sub = overrides.get("submessage_flits", defaults.submessage_flits)
    ports = overrides.get("num_ports", need["num_ports"])
    copies = overrides.get("buffer_copies", defaults.buffer_copies)
    chosen = dict(need, routed=first.routed, elems_per_flit=first.elements_per_flit)
    if (isinstance(latency, int) and isinstance(sub, int) and isinstance(ports, int)
            and copies in BUFFER_COPIES):
        chosen["rx_buffer_depth"] = full_rate_rx_depth(latency, sub, buffer_banks(ports, copies))
    chosen.update(overrides)
    config = NIConfig(**chosen)
    for lw in lowered:
        check_schedule_fits(config, lw)
    return config
