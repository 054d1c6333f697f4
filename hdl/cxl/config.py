"""Parameters of the CXL.mem controller (docs/hardware.md, "CXLMemController (COARSE)").

One frozen, validated dataclass, like ``hdl.config.NIConfig``: a bad value is rejected once, at
construction, with a ``ValueError`` naming it.
"""

from dataclasses import dataclass

from amaranth.utils import ceil_log2

from ..config import check_int, check_pow2

__all__ = ["CXLMemConfig", "checked_config", "LINE_BYTES", "LINE_BITS", "LINE_ELEMENTS",
           "ADDR_BITS", "TAG_BITS"]

#: CXL.mem moves 64-byte lines (address bits [51:6]).
LINE_BYTES = 64
LINE_BITS = 8 * LINE_BYTES
#: int32 elements of a line (the accumulate window adds them element-wise).
LINE_ELEMENTS = LINE_BYTES // 4
#: Width of the line address field of M2S messages (address bits [51:6]).
ADDR_BITS = 46
#: Width of the Tag field of every CXL.mem message.
TAG_BITS = 16


@dataclass(frozen=True)
class CXLMemConfig:
    """Parameters of one ``CXLMemController``.

    Parameters
    ----------
    num_lines : int
        Memory size in 64-byte lines (a multiple of ``num_banks``, at least ``2 * num_banks``,
        at most 2**24). A request for line ``>= num_lines`` is out of range.
    num_banks : int
        Memory banks, a power of two 1..16; line ``a`` lives in bank ``a % num_banks``, row
        ``a // num_banks``.
    req_credits, rwd_credits : int
        Credits the host holds for the M2S Req and M2S RwD channels after reset (2..64): the
        depths of the two request queues.
    ndr_depth, drs_depth : int
        Depths of the S2M NDR and S2M DRS response queues (2..64).
    hold_slots : int
        Reads of the accumulate window that can wait for their tensor at once (2..32); a held
        read does not block other requests.
    num_tensors : int
        Arrival counters (tensor groups) of the accumulate window, a power of two 2..256.
    max_group_shift : int
        Largest ``SHIFT`` (log2 of the lines of a tensor group) the CSR accepts (0..16).
    default_timeout : int
        Reset value of the ``TIMEOUT`` CSR: cycles a held read waits before it completes with
        the error response (1..2**32-1).

    Attributes
    ----------
    line_bits : int
        Width of an internal line address, ``ceil_log2(num_lines)``.
    bank_bits, row_bits : int
        Widths of the bank index and of a bank's row address.
    tensor_bits : int
        ``log2(num_tensors)``.
    counter_bits : int
        Width of an arrival counter (``8 + max_group_shift``: ``CONTRIB`` is 8 bits).
    tracker_slots : int
        Requests that can be in flight at once (queued, held, in the pipeline or with a response
        waiting): ``req_credits + rwd_credits + hold_slots + ndr_depth + drs_depth``; one tag
        tracker entry each.
    slot_bits : int
        Width of a tracker entry's index.

    Raises
    ------
    ValueError
        If a value is out of range; the message names the parameter and the value.
    """

    num_lines: int = 1024
    num_banks: int = 4
    req_credits: int = 4
    rwd_credits: int = 4
    ndr_depth: int = 2
    drs_depth: int = 2
    hold_slots: int = 4
    num_tensors: int = 8
    max_group_shift: int = 8
    default_timeout: int = 4096

    def __post_init__(self):
        check_pow2("num_banks", self.num_banks, 1, 16)
        check_int("num_lines", self.num_lines, 2 * self.num_banks, 1 << 24)
        if self.num_lines % self.num_banks:
            raise ValueError(f"num_lines must be a multiple of num_banks = {self.num_banks}, "
                             f"not {self.num_lines!r}")
        check_int("req_credits", self.req_credits, 2, 64)
        check_int("rwd_credits", self.rwd_credits, 2, 64)
        check_int("ndr_depth", self.ndr_depth, 2, 64)
        check_int("drs_depth", self.drs_depth, 2, 64)
        check_int("hold_slots", self.hold_slots, 2, 32)
        check_pow2("num_tensors", self.num_tensors, 2, 256)
        check_int("max_group_shift", self.max_group_shift, 0, 16)
        check_int("default_timeout", self.default_timeout, 1, (1 << 32) - 1)

    @property
    def line_bits(self):
        return max(1, ceil_log2(self.num_lines))

    @property
    def bank_bits(self):
        return ceil_log2(self.num_banks)

    @property
    def bank_depth(self):
        return self.num_lines // self.num_banks

    @property
    def row_bits(self):
        return ceil_log2(self.bank_depth)

    @property
    def tensor_bits(self):
        return ceil_log2(self.num_tensors)

    @property
    def counter_bits(self):
        return 8 + self.max_group_shift

    @property
    def tracker_slots(self):
        return (self.req_credits + self.rwd_credits + self.hold_slots + self.ndr_depth
                + self.drs_depth)

    @property
    def slot_bits(self):
        return max(1, ceil_log2(self.tracker_slots))


def checked_config(config):
    """``config`` if it is a ``CXLMemConfig``; else ``ValueError`` naming it (what every
    component of the controller takes)."""
    if not isinstance(config, CXLMemConfig):
        raise ValueError(f"config must be a CXLMemConfig, not {config!r}")
    return config
