"""Read MSCCL-IR XML (the ``<algo>`` / ``<gpu>`` / ``<tb>`` / ``<step>`` format that msccl-tools'
``ir_to_xml`` writes and the MSCCL and RCCL runtimes load) into plain records, checking every
attribute the runtimes' loader reads.

The rules and their source: the MSCCL runtime's loader (``microsoft/msccl``,
``src/graph/topo.cc``, the algorithm-file parser) reads every attribute below with a call that
fails when it is missing, takes step types ``s r rcs rrs rrc rrcs cpy re nop`` and buffers
``i o s``, needs thread-block ids without duplicates, ``send`` and ``recv`` each ``-1`` or
another rank below ``ngpus``, channels below ``nchannels``, and a positive ``cnt`` on every
step that moves data. Also checked here because a file breaking them cannot run as meant:
``<gpu>`` ids 0..ngpus-1 once each, step numbers ``s`` counting from 0 in each block, offsets
within their buffers, a dependency naming a step of the same rank, and ``hasdep="1"`` on every
step another one waits for (the runtimes raise a step's flag only when ``hasdep`` is set, so a
dependant would wait for ever). ``outofplace``, ``minBytes`` and ``maxBytes`` may be missing
(msccl-tools does not write them; runtimes then use defaults), which ``msccl_check`` reports
for the runtimes.
"""

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

__all__ = ["MscclError", "Step", "ThreadBlock", "Gpu", "Program", "parse", "read",
           "STEP_TYPES", "SENDS", "RECEIVES", "READS_LOCAL", "WRITES_LOCAL", "BUFFERS"]

#: Step types and what they do: receive (r), send (s), reduce with a local chunk, copy out.
STEP_TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")
SENDS = frozenset({"s", "rcs", "rrs", "rrcs"})
RECEIVES = frozenset({"r", "rcs", "rrs", "rrc", "rrcs"})
#: Steps that read their local source chunks, and that write their local destination.
READS_LOCAL = frozenset({"s", "rrs", "rrc", "rrcs", "cpy", "re"})
WRITES_LOCAL = frozenset({"r", "rcs", "rrc", "rrcs", "cpy", "re"})
#: Buffers: input, output, scratch.
BUFFERS = ("i", "o", "s")
PROTOS = ("Simple", "LL", "LL128")
#: Largest values this reader takes (the runtimes read these attributes as C ints; the check
#: holds every rank's buffers in memory).
MAX_INT = (1 << 31) - 1
MAX_RANKS = 1 << 16
MAX_CHUNKS = 1 << 20


class MscclError(ConfigError):
    """An MSCCL-IR file that cannot be read: the message names the file, the element and the
    attribute or value, and what is allowed."""


@dataclass(frozen=True)
class Step:
    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hasdep: int


@dataclass(frozen=True)
class ThreadBlock:
    id: int
    send: int
    recv: int
    chan: int
    steps: tuple
    #: The texts of the comments inside the ``<tb>`` (consumers skip them; this project's
    #: exporter records its schedule order there).
    comments: tuple = ()


@dataclass(frozen=True)
class Gpu:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple

    def chunks(self, buf):
        """Chunks of buffer ``buf`` (``"i"``, ``"o"`` or ``"s"``)."""
        return {"i": self.i_chunks, "o": self.o_chunks, "s": self.s_chunks}[buf]


@dataclass(frozen=True)
class Program:
    """One ``<algo>``: its attributes (``None`` where an optional one is missing) and ranks."""
    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str
    inplace: bool
    outofplace: bool | None
    min_bytes: int | None
    max_bytes: int | None
    gpus: tuple
    source: str = "<xml>"

    @property
    def num_steps(self):
        return sum(len(tb.steps) for g in self.gpus for tb in g.tbs)


def _int(el, name, where, source, least=None, optional=False, most=MAX_INT):
    text = el.get(name)
    if text is None:
        if optional:
            return None
        raise MscclError(f"{source}: {where} has no {name} attribute (the runtimes' loader "
                         f"needs it)")
    try:
        value = int(text.strip())
    except ValueError:
        raise MscclError(f"{source}: {where}: {name}={text!r} is not an integer") from None
    if least is not None and value < least:
        raise MscclError(f"{source}: {where}: {name}={value} must be >= {least}")
    if value > most:
        raise MscclError(f"{source}: {where}: {name}={value} must be <= {most:,}")
    return value


def _str(el, name, where, source, allowed=None):
    text = el.get(name)
    if text is None:
        raise MscclError(f"{source}: {where} has no {name} attribute (the runtimes' loader "
                         f"needs it)")
    if allowed is not None and text not in allowed:
        raise MscclError(f"{source}: {where}: {name}={text!r} is not one of "
                         f"{', '.join(allowed)}")
    return text


def _flag(el, name, where, source, optional=False):
    value = _int(el, name, where, source, optional=optional)
    if value not in (None, 0, 1):
        raise MscclError(f"{source}: {where}: {name}={value} must be 0 or 1")
    return None if value is None else bool(value)


def parse(text, source="<xml>"):
    """Read MSCCL-IR XML text.

    Parameters
    ----------
    text : str or bytes
        The whole file (bytes: decoded as its XML declaration or byte-order mark says, UTF-8
        without one).
    source : str
        The file's name, for messages.

    Returns
    -------
    Program

    Raises
    ------
    MscclError
        On malformed XML, a root other than ``<algo>``, a missing or malformed attribute, an
        unknown step type or buffer, or any rule of the module docstring broken (one line,
        naming the element: ``gpu 3 tb 2 step 7``).
    """
    try:
        root = ET.fromstring(text, parser=ET.XMLParser(
            target=ET.TreeBuilder(insert_comments=True)))
    except (ET.ParseError, LookupError, UnicodeError) as exc:   # LookupError: unknown encoding
        raise MscclError(f"{source}: malformed XML: {exc}") from None
    if root.tag != "algo":
        raise MscclError(f"{source}: the root element is <{root.tag}>, expected <algo>")
    w = "algo"
    ngpus = _int(root, "ngpus", w, source, least=1, most=MAX_RANKS)
    nchannels = _int(root, "nchannels", w, source, least=1)
    head = dict(name=_str(root, "name", w, source), proto=_str(root, "proto", w, source, PROTOS),
                nchannels=nchannels,
                nchunksperloop=_int(root, "nchunksperloop", w, source, least=1,
                                    most=MAX_CHUNKS),
                ngpus=ngpus, coll=_str(root, "coll", w, source),
                inplace=_flag(root, "inplace", w, source),
                outofplace=_flag(root, "outofplace", w, source, optional=True),
                min_bytes=_int(root, "minBytes", w, source, least=0, optional=True,
                               most=(1 << 63) - 1),
                max_bytes=_int(root, "maxBytes", w, source, least=0, optional=True,
                               most=(1 << 63) - 1))
    gpus = {}
    for gel in _elements(root):
        if gel.tag != "gpu":
            raise MscclError(f"{source}: <algo> holds a <{gel.tag}>, expected <gpu> elements")
        gid = _int(gel, "id", "a <gpu>", source, least=0)
        wg = f"gpu {gid}"
        if gid >= ngpus:
            raise MscclError(f"{source}: {wg}: id must be below ngpus={ngpus}")
        if gid in gpus:
            raise MscclError(f"{source}: gpu {gid} appears twice")
        sizes = {b: _int(gel, f"{b}_chunks", wg, source, least=0, most=MAX_CHUNKS)
                 for b in BUFFERS}
        tbs = {}
        for tel in _elements(gel):
            if tel.tag != "tb":
                raise MscclError(f"{source}: {wg} holds a <{tel.tag}>, expected <tb> elements")
            tid = _int(tel, "id", f"{wg}: a <tb>", source, least=0)
            wt = f"{wg} tb {tid}"
            if tid in tbs:
                raise MscclError(f"{source}: {wg}: thread block id {tid} appears twice")
            peers = {}
            for side in ("send", "recv"):
                p = _int(tel, side, wt, source, least=-1)
                if p == gid or p >= ngpus:
                    raise MscclError(f"{source}: {wt}: {side}={p} must be -1 or another rank "
                                     f"below ngpus={ngpus}")
                peers[side] = p
            chan = _int(tel, "chan", wt, source, least=0)
            if chan >= nchannels:
                raise MscclError(f"{source}: {wt}: chan={chan} must be below "
                                 f"nchannels={nchannels}")
            steps = []
            for sel in _elements(tel):
                if sel.tag != "step":
                    raise MscclError(f"{source}: {wt} holds a <{sel.tag}>, expected <step> "
                                     f"elements (msccl-tools' old format, which the runtimes "
                                     f"read)")
                steps.append(_step(sel, wt, len(steps), peers, sizes, source))
            tbs[tid] = ThreadBlock(tid, peers["send"], peers["recv"], chan, tuple(steps),
                                   tuple((c.text or "").strip() for c in tel
                                         if c.tag is ET.Comment))
        if sorted(tbs) != list(range(len(tbs))):
            raise MscclError(f"{source}: {wg}: thread block ids must be 0..{len(tbs) - 1}, not "
                             f"{sorted(tbs)}")
        gpus[gid] = Gpu(gid, sizes["i"], sizes["o"], sizes["s"],
                        tuple(tbs[t] for t in range(len(tbs))))
    if len(gpus) != ngpus:
        missing = next(g for g in range(ngpus) if g not in gpus)
        raise MscclError(f"{source}: ngpus={ngpus} but gpu {missing} is missing")
    program = Program(**head, gpus=tuple(gpus[g] for g in range(ngpus)), source=source)
    _check_dependencies(program)
    return program


def _elements(el):
    """The child elements of ``el``, comments left out."""
    return [c for c in el if c.tag is not ET.Comment]


def _step(sel, wt, index, peers, sizes, source):
    ws = f"{wt} step {index}"
    s = _int(sel, "s", ws, source)
    if s != index:
        raise MscclError(f"{source}: {ws}: s={s}, expected {index} (steps count from 0 in "
                         f"each thread block)")
    kind = _str(sel, "type", ws, source, STEP_TYPES)
    bufs = {k: _str(sel, k, ws, source, BUFFERS) for k in ("srcbuf", "dstbuf")}
    offs = {k: _int(sel, k, ws, source, least=-1) for k in ("srcoff", "dstoff")}
    cnt = _int(sel, "cnt", ws, source, least=0)
    step = Step(s, kind, bufs["srcbuf"], offs["srcoff"], bufs["dstbuf"], offs["dstoff"], cnt,
                _int(sel, "depid", ws, source, least=-1), _int(sel, "deps", ws, source, least=-1),
                int(_flag(sel, "hasdep", ws, source)))
    if kind in SENDS and peers["send"] < 0:
        raise MscclError(f"{source}: {ws}: a {kind} step in a thread block with send=-1")
    if kind in RECEIVES and peers["recv"] < 0:
        raise MscclError(f"{source}: {ws}: a {kind} step in a thread block with recv=-1")
    if kind != "nop":
        if cnt < 1:
            raise MscclError(f"{source}: {ws}: cnt={cnt} must be at least 1")
        used = ([(step.srcbuf, step.srcoff)] if kind in READS_LOCAL else []) + \
            ([(step.dstbuf, step.dstoff)] if kind in WRITES_LOCAL else [])
        for buf, off in used:
            if not 0 <= off <= sizes[buf] - cnt:
                raise MscclError(f"{source}: {ws}: chunks {off}..{off + cnt - 1} of buffer "
                                 f"{buf} are outside its {sizes[buf]} chunks")
    if (step.depid < 0) != (step.deps < 0):
        raise MscclError(f"{source}: {ws}: depid={step.depid} and deps={step.deps} must both "
                         f"be -1 or both name a step")
    return step


def _check_dependencies(program):
    for g in program.gpus:
        waited = set()
        for tb in g.tbs:
            for st in tb.steps:
                if st.depid < 0:
                    continue
                where = f"gpu {g.id} tb {tb.id} step {st.s}"
                if st.depid >= len(g.tbs) or st.deps >= len(g.tbs[st.depid].steps):
                    raise MscclError(f"{program.source}: {where}: depends on tb {st.depid} step "
                                     f"{st.deps}, which gpu {g.id} does not have")
                waited.add((st.depid, st.deps))
        for tid, s in sorted(waited):
            if not g.tbs[tid].steps[s].hasdep:
                raise MscclError(f"{program.source}: gpu {g.id} tb {tid} step {s}: another step "
                                 f"depends on it but hasdep=0 (the runtimes would never signal "
                                 f"it)")


def read(path):
    """``parse`` the file at ``path``.

    Raises
    ------
    MscclError
        As ``parse``; also when the file cannot be read (its name and the reason).
    """
    try:
        text = Path(path).read_bytes()      # the XML declaration or a byte-order mark says how
    except OSError as exc:
        raise MscclError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse(text, str(path))
