"""CXL.mem messages of the controller: opcodes and payload layouts (docs/hardware.md).

Fields and encodings follow the CXL 2.0 specification's M2S Req, M2S RwD, S2M NDR and S2M DRS
messages (opcode values as in the spec's tables; see also the open models listed in
shared/references.md). Link-layer fields that a single logical device does not use (LD-ID, TC,
spare and reserved bits) are left out. A ``data.Struct`` payload becomes one vector in Verilog,
first field in the low bits.

The only encodings that are not CXL 2.0's:

* ``S2MDRSOpcode.MemDataNXM`` (0b001): CXL 3.x's "MemData-NXM" (non-existent memory), the
  response to a read outside the device's memory; CXL 2.0 reserves this encoding.
* ``S2MNDROpcode.CmpErr`` (0b111): implementation-defined, in an encoding CXL 2.0 reserves: the
  completion of a write or MemInv that was rejected (bad address, tag already in flight,
  unsupported opcode, poisoned write data). CXL signals bad read data with the DRS ``Poison``
  bit, but an NDR carries no data and so has no poison bit.
"""

from amaranth.lib import enum

from amaranth.lib import data

from .config import ADDR_BITS, LINE_BITS, LINE_BYTES, TAG_BITS

__all__ = ["M2SReqOpcode", "M2SRwDOpcode", "S2MNDROpcode", "S2MDRSOpcode", "MetaField",
           "M2SReq", "M2SRwD", "S2MNDR", "S2MDRS", "CSRWrite", "CSR", "CTRL_CLEAR",
           "CTRL_ZERO"]


class M2SReqOpcode(enum.Enum, shape=4):
    """M2S Req ``MemOpcode`` (CXL 2.0). The controller executes ``MemRd`` and ``MemInv``; every
    other opcode is rejected with ``CmpErr``."""
    MemInv = 0b0000
    MemRd = 0b0001
    MemRdData = 0b0010
    MemRdFwd = 0b0011
    MemWrFwd = 0b0100
    MemSpecRd = 0b1000
    MemInvNT = 0b1001
    MemClnEvct = 0b1010


class M2SRwDOpcode(enum.Enum, shape=4):
    """M2S RwD ``MemOpcode`` (CXL 2.0)."""
    MemWr = 0b0001
    MemWrPtl = 0b0010


class S2MNDROpcode(enum.Enum, shape=3):
    """S2M NDR opcode (CXL 2.0), plus the implementation-defined ``CmpErr``."""
    Cmp = 0b000
    CmpS = 0b001        # Cmp-S
    CmpE = 0b010        # Cmp-E
    CmpErr = 0b111      # not CXL: a rejected request (reserved encoding)


class S2MDRSOpcode(enum.Enum, shape=3):
    """S2M DRS opcode: ``MemData`` (CXL 2.0), ``MemDataNXM`` (CXL 3.x MemData-NXM)."""
    MemData = 0b000
    MemDataNXM = 0b001


class MetaField(enum.Enum, shape=2):
    """``MetaField`` of M2S and S2M messages; the controller keeps no metadata and answers
    ``NoOp``."""
    Meta0State = 0b00
    NoOp = 0b11


#: M2S Req: ``addr`` is the line address (byte address bits [51:6]).
M2SReq = data.StructLayout({
    "opcode": M2SReqOpcode,
    "snp_type": 3,
    "meta_field": 2,
    "meta_value": 2,
    "tag": TAG_BITS,
    "addr": ADDR_BITS,
})

#: M2S RwD: a 64-byte line with 64 byte enables (used by ``MemWrPtl``; ``MemWr`` writes every
#: byte whatever ``byte_enable`` holds). Byte ``i`` of the line is ``data[8*i:8*i+8]``; int32
#: element ``e`` is bytes ``4e..4e+3``, little-endian.
M2SRwD = data.StructLayout({
    "opcode": M2SRwDOpcode,
    "snp_type": 3,
    "meta_field": 2,
    "meta_value": 2,
    "tag": TAG_BITS,
    "addr": ADDR_BITS,
    "poison": 1,
    "byte_enable": LINE_BYTES,
    "data": LINE_BITS,
})

#: S2M NDR (no data): ``meta_field`` is always ``NoOp``, ``dev_load`` 0 (light load).
S2MNDR = data.StructLayout({
    "opcode": S2MNDROpcode,
    "meta_field": 2,
    "meta_value": 2,
    "tag": TAG_BITS,
    "dev_load": 2,
})

#: S2M DRS (data): ``poison`` marks data that must not be used (then ``data`` is zero).
S2MDRS = data.StructLayout({
    "opcode": S2MDRSOpcode,
    "meta_field": 2,
    "meta_value": 2,
    "tag": TAG_BITS,
    "poison": 1,
    "dev_load": 2,
    "data": LINE_BITS,
})


class CSR(enum.Enum, shape=3):
    """Registers of the accumulate window, written through the ``csr`` stream.

    ``BASE``: first line of the window (line address). ``GROUPS``: number of tensor groups
    (0 disables the window; values above ``num_tensors`` are stored as ``num_tensors``).
    ``SHIFT``: log2 of the lines per group (stored as at most ``max_group_shift``). ``CONTRIB``:
    contributors per line (8 bits). ``TIMEOUT``: cycles a held read may wait. ``CTRL``: a write
    acts on its set bits: ``CTRL_CLEAR`` clears every arrival counter, ``CTRL_ZERO`` zeroes the
    window's lines (one line per cycle; no request is issued meanwhile).
    """
    BASE = 0
    GROUPS = 1
    SHIFT = 2
    CONTRIB = 3
    TIMEOUT = 4
    CTRL = 5


CTRL_CLEAR = 1
CTRL_ZERO = 2

#: One register write: ``{addr: CSR, data: 32}``.
CSRWrite = data.StructLayout({"addr": CSR, "data": 32})
