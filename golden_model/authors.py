"""The MultiTree authors' simulator as a timing preset (``compare --timing authors``).

The MultiTree paper's figures come from the authors' BookSim-based simulator
(``farabimahmud/accelerator``), which this project runs outside the repository to calibrate
against (docs/authors-simulator.md: how, and every measured figure). ``authors_params`` sets
``timing.TimingParams`` so that ``timing.simulate`` counts what that simulator counts on the
paper's network (16 GB/s links at 1 GHz, 128-bit flits, 150-cycle links):

* **Packets.** A chunk travels as 256-byte messages with a head flit each (``--message-size
  256``), or as one packet with one head flit (``--message-size 0``): ``packet_bytes`` and
  ``header_flits``.
* **Fixed delays.** 12 cycles per transfer beside the link: 11 measured from a step's start to
  the receiver holding a one-hop chunk (their send pipeline, injection and ejection channels,
  two router pipelines) and the one cycle their node waits before each send.
* **Reduction.** One aggregation unit per node adds a received reduce-scatter chunk in
  ``16 * ceil(bytes / 2048)`` cycles (their ``npu.py``: 16 vaults of 32-wide adders, 512 float32
  values per 16 cycles), chunks one after another in arrival order, and the next send may use it
  the cycle after: ``timing.ReductionUnit(2048, 16, 0, 1)``.
* **Lockstep.** ``--strict-schedule``: a node starts a step only when its NIs have handed over
  the flows of its previous step, an NI handing over once its 32-message buffer (32 x 256
  bytes) holds the rest of its flow: ``node_lockstep`` with ``send_buffer_bytes = 8192``.
* **End.** The run ends when the network is idle, credits included: 149 cycles after the last
  chunk counts as received (``drain_cycles``).

With these the preset reproduces their ring on torus:4x4 exactly, cycle for cycle, at every size
measured (32 KiB to 16 MiB, both message sizes): their ring takes ``2(N-1)(F + 161) + (N-1) A +
3N - 4 + 150`` cycles for F flits and A reduction cycles per chunk, and the model gives
``2(N-1)(F + 150 + 12) + (N-1)(A + 1) + 149``, the same number.

Their MultiTree is NOT reproduced: each of their nodes has four NIs, each with its own injection
and ejection channel, a flow leaving by the first free NI and arriving at the NI its parent's
schedule names (round robin per step), so flows of neighbouring steps queue at those channels
(a one-hop 2 KiB flow measured 290 cycles alone and 410 to 530 behind others), and with 256-byte
messages flows of different steps share a link packet by packet. This model has one port per
link and no NI channels: it gives 0.57 to 0.96 of their MultiTree cycles (32 KiB to 16 MiB;
``scripts/authors_table.py`` prints the table, docs/authors-simulator.md has it).
"""

from .timing import ReductionUnit, TimingParams

__all__ = ["MESSAGE_SIZES", "MEASURED_TORUS4X4", "authors_params"]

#: ``--message-size`` values of the authors' simulator the preset knows: 256-byte messages, or
#: 0, one packet per chunk.
MESSAGE_SIZES = (256, 0)
#: Cycles per transfer beside the link and the flits (module docstring, "Fixed delays"); how
#: they split between the send and the receive side does not change a one-hop chain.
SEND_DELAY = 1 + 5
RETIRE_DELAY = 6
#: Their aggregation unit (module docstring, "Reduction").
AGGREGATION = ReductionUnit(block_bytes=2048, block_cycles=16, start_delay=0, finish_delay=1)
#: Their NI's message buffer: 32 messages of 256 bytes (``--message-buffer-size 32
#: --sub-message-size 256``).
SEND_BUFFER_BYTES = 32 * 256
#: From the last chunk received to an idle network (the last credit's channel).
DRAIN_CYCLES = 149

#: Their simulator's totals on torus:4x4 (docs/authors-simulator.md, "Measured on torus:4x4"):
#: bytes per node -> {(algorithm, message size): cycles}. Their MultiTree with 256-byte messages
#: varies from run to run (at 1 MiB 61,000 to 70,729 in six runs): one run is listed (at 1 MiB
#: the figure the optimal-schedules issue quotes), and at 1 MiB with whole chunks the middle of
#: three runs (45,897 to 45,905).
MEASURED_TORUS4X4 = {
    32768: {("ring", 256): 9344, ("ring", 0): 9134,
            ("multitree", 256): 3508, ("multitree", 0): 3272},
    131072: {("ring", 256): 22304, ("ring", 0): 21374,
             ("multitree", 256): 11103, ("multitree", 0): 9501},
    1048576: {("ring", 256): 143264, ("ring", 0): 135614,
              ("multitree", 256): 61984, ("multitree", 0): 45900},
    4194304: {("ring", 256): 557984, ("ring", 0): 527294,
              ("multitree", 256): 207572, ("multitree", 0): 187281},
    16777216: {("ring", 256): 2216864, ("ring", 0): 2094014,
               ("multitree", 256): 790094, ("multitree", 0): 758190},
}


def authors_params(message_size=256, frequency_ghz=1.0, flit_bytes=16, element_bytes=4):
    """``TimingParams`` that make ``timing.simulate`` count like the authors' simulator (module
    docstring; calibrated on its defaults: 1 GHz, 16-byte flits, 4-byte elements, the topology's
    links at 16 GB/s and 150 cycles).

    Parameters
    ----------
    message_size : int
        Their ``--message-size``: 256 (bytes per message, a head flit each) or 0 (a chunk is one
        packet).
    frequency_ghz, flit_bytes, element_bytes
        As in ``TimingParams``.

    Returns
    -------
    TimingParams
        Links in schedule order (their ``--prioritize-schedule``: earlier steps' flits win).

    Raises
    ------
    ConfigError
        If ``message_size`` is not one of ``MESSAGE_SIZES`` (or a ``TimingParams`` value is bad).
    """
    from .errors import ConfigError  # noqa: PLC0415
    if message_size not in MESSAGE_SIZES:
        raise ConfigError(f"message size {message_size!r} is not one the authors' simulator "
                          f"preset knows: {' or '.join(map(str, MESSAGE_SIZES))} bytes")
    return TimingParams(frequency_ghz=frequency_ghz, flit_bytes=flit_bytes,
                        element_bytes=element_bytes, header_flits=1, packet_bytes=message_size,
                        send_delay=SEND_DELAY, retire_delay=RETIRE_DELAY, link_order="schedule",
                        reduction=AGGREGATION, node_lockstep=True,
                        send_buffer_bytes=SEND_BUFFER_BYTES, drain_cycles=DRAIN_CYCLES,
                        preset="authors")
