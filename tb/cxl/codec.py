"""Bit-level packing of the controller's message payloads (the ``hdl.cxl.messages`` layouts:
first field in the low bits) to and from :mod:`tb.cxl.model` messages."""

from __future__ import annotations

from hdl.cxl.messages import CSRWrite, M2SReq, M2SRwD, S2MDRS, S2MNDR

from .model import Req, Response, RwD

__all__ = ["pack_req", "pack_rwd", "pack_csr", "unpack_ndr", "unpack_drs", "REQ_BITS",
           "RWD_BITS", "NDR_BITS", "DRS_BITS", "CSR_BITS"]


def _fields(layout):
    return {name: (field.offset, field.width) for name, field in layout}


_REQ, _RWD, _NDR, _DRS, _CSR = map(_fields, (M2SReq, M2SRwD, S2MNDR, S2MDRS, CSRWrite))
REQ_BITS, RWD_BITS, NDR_BITS, DRS_BITS, CSR_BITS = (
    layout.size for layout in (M2SReq, M2SRwD, S2MNDR, S2MDRS, CSRWrite))


def _pack(fields, values):
    word = 0
    for name, value in values.items():
        off, width = fields[name]
        value = int(value)
        if not 0 <= value < 1 << width:
            raise ValueError(f"field {name}={value:#x} does not fit {width} bits")
        word |= value << off
    return word


def _get(fields, word, name):
    off, width = fields[name]
    return (word >> off) & ((1 << width) - 1)


def pack_req(msg: Req) -> int:
    return _pack(_REQ, {"opcode": msg.opcode, "tag": msg.tag, "addr": msg.addr,
                        "meta_field": 0b11})


def pack_rwd(msg: RwD) -> int:
    return _pack(_RWD, {"opcode": msg.opcode, "tag": msg.tag, "addr": msg.addr,
                        "meta_field": 0b11, "poison": msg.poison,
                        "byte_enable": msg.byte_enable, "data": msg.data})


def pack_csr(addr: int, data: int) -> int:
    return _pack(_CSR, {"addr": addr, "data": data})


def unpack_ndr(word: int) -> Response:
    return Response("ndr", _get(_NDR, word, "opcode"), _get(_NDR, word, "tag"))


def unpack_drs(word: int) -> Response:
    return Response("drs", _get(_DRS, word, "opcode"), _get(_DRS, word, "tag"),
                    _get(_DRS, word, "poison"), _get(_DRS, word, "data"))


def meta_field_of(word: int, channel: str) -> int:
    return _get(_NDR if channel == "ndr" else _DRS, word, "meta_field")
