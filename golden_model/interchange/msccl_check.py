"""Check an MSCCL-IR all-reduce on its own terms: run the XML itself, independently of this
project's schedule IR, and check what it computes and which runtime limits it breaks.

The run (``run``) follows the format's semantics as the runtimes execute it: every thread
block runs its steps in order; a step starts once the step it depends on (``depid``,
``deps``) has completed; a send appends its chunks to the FIFO of (sender, receiver, channel)
and a receive takes the oldest entry of the FIFO from its block's ``recv`` peer, so sends and
receives between a pair on a channel match in program order (FIFOs unbounded: a runtime's
finite slots can only add waiting, not change results). Step semantics: ``s`` send; ``r``
receive into dst; ``rcs`` receive, copy to dst and send on; ``rrs`` receive, add the local src
and send on; ``rrc`` receive, add the local src and write dst; ``rrcs`` both; ``cpy`` copy src
to dst; ``re`` add src into dst; ``nop`` only waits. With ``inplace="1"`` the output buffer is the
input buffer. When no block can go on and steps remain, that is a deadlock, reported with the
blocks involved and what each waits for.

What ``check`` asserts: every rank's every output chunk is the sum over all ranks of that
chunk, symbolically (each rank's chunk a unit vector, so a missing or doubled contribution
shows by name; skipped above ``SYMBOLIC_LIMIT`` values), on random int32 data exactly
(wrapping), and on float32 data (IEEE 754 binary32, round to nearest even, as numpy adds)
identically on every rank and under two different execution orders, bit for bit: the
dependencies alone fix the summation order, so the result is the sum in the XML's own
dependency order. Also: no FIFO left holding data, at most one thread block per (peer,
channel) and direction on a rank (a runtime has one connection there), ``coll="allreduce"``.

``limits(program, target)`` names every limit of a consumer the file breaks (``TARGETS``; the
sources are given there).
"""

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .msccl_read import READS_LOCAL, RECEIVES, SENDS, WRITES_LOCAL, MscclError

__all__ = ["CheckResult", "check", "run", "limits", "TARGETS", "SYMBOLIC_LIMIT"]

#: Largest ngpus * ngpus * nchunksperloop for the symbolic run (its values are counts per rank).
SYMBOLIC_LIMIT = 1 << 25
#: Elements per chunk in the numeric runs.
ELEMENTS_PER_CHUNK = 16


@dataclass
class CheckResult:
    """``check``'s verdict: ``errors`` (one line each; empty when the all-reduce is right),
    ``limits`` (per target asked for, the limits broken) and a ``summary`` for reports."""
    errors: list = field(default_factory=list)
    limits: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    #: Each rank's float32 output of the first run (None when the check stopped before it).
    float32: list | None = None
    #: The float32 inputs it was computed from.
    float32_inputs: list | None = None

    @property
    def ok(self):
        return not self.errors and not any(self.limits.values())


class _Deadlock(Exception):
    pass


def run(program, values, add, order=1, trace=None):
    """Execute ``program`` on ``values`` (per rank, an array of shape ``(i_chunks, W)``).

    Parameters
    ----------
    program : msccl_read.Program
    values : list of numpy.ndarray
        Each rank's input buffer (copied).
    add : callable
        ``add(a, b)`` -> the elementwise sum, as the reduction computes it.
    order : int
        1: blocks tried from the lowest (rank, block) on; -1: from the highest. Each block runs
        as far as it can when its turn comes, so the two orders interleave differently.
    trace : list, optional
        Gets ``(rank, block, step)`` of every step as it runs (the importer's execution order).

    Returns
    -------
    list of numpy.ndarray
        Each rank's output buffer; rows never written (an output-only buffer) are NaN-free
        zeros and listed by ``undefined``.
    list of numpy.ndarray
        Per rank, a bool array: the output rows that hold a defined value.

    Raises
    ------
    MscclError
        On a deadlock (the blocks involved and what each waits for), a receive whose ``cnt``
        differs from the send it matches, or data left in a FIFO.
    """
    bufs, defined = [], []
    for g, v in zip(program.gpus, values):
        b = {"i": np.array(v, copy=True)}
        d = {"i": np.ones(g.i_chunks, dtype=bool)}
        if program.inplace:
            b["o"], d["o"] = b["i"], d["i"]
        else:
            b["o"] = np.zeros((g.o_chunks,) + v.shape[1:], dtype=v.dtype)
            d["o"] = np.zeros(g.o_chunks, dtype=bool)
        b["s"] = np.zeros((g.s_chunks,) + v.shape[1:], dtype=v.dtype)
        d["s"] = np.zeros(g.s_chunks, dtype=bool)
        bufs.append(b)
        defined.append(d)
    blocks = [(g.id, tb) for g in program.gpus for tb in g.tbs][::order]
    pc = {(g, tb.id): 0 for g, tb in blocks}
    fifos = {}
    remaining = program.num_steps
    while remaining:
        progress = False
        for g, tb in blocks:
            key = (g, tb.id)
            while pc[key] < len(tb.steps):
                st = tb.steps[pc[key]]
                if st.depid >= 0 and pc[(g, st.depid)] <= st.deps:
                    break
                incoming = None
                if st.type in RECEIVES:
                    q = fifos.get((tb.recv, g, tb.chan))
                    if not q:
                        break
                    incoming = q.popleft()
                    if len(incoming[1]) != st.cnt:
                        raise MscclError(f"{program.source}: gpu {g} tb {tb.id} step {st.s} "
                                         f"receives cnt={st.cnt} but rank {tb.recv} sent "
                                         f"{len(incoming[1])} chunks")
                _execute(st, bufs[g], defined[g], incoming, add, fifos, (g, tb.send, tb.chan))
                if trace is not None:
                    trace.append((g, tb.id, st.s))
                pc[key] += 1
                remaining -= 1
                progress = True
        if not progress:
            raise MscclError(_deadlock(program, blocks, pc, fifos))
    left = [(k, len(q)) for k, q in fifos.items() if q]
    if left:
        (src, dst, chan), n = left[0]
        raise MscclError(f"{program.source}: rank {src} sent {n} chunk message(s) to rank "
                         f"{dst} on channel {chan} that no step receives")
    out = "o"
    return [b[out] for b in bufs], [d[out] for d in defined]


def _execute(st, buf, dfn, incoming, add, fifos, send_key):
    kind, cnt = st.type, st.cnt
    if kind == "nop":
        return
    if kind in READS_LOCAL:
        src = buf[st.srcbuf][st.srcoff:st.srcoff + cnt]
        src_d = dfn[st.srcbuf][st.srcoff:st.srcoff + cnt]
    if kind in ("s", "cpy"):
        val, val_d = src.copy(), src_d.copy()
    elif kind in ("r", "rcs"):
        val, val_d = incoming
    elif kind in ("rrs", "rrc", "rrcs"):
        val, val_d = add(src, incoming[0]), src_d & incoming[1]
    else:   # re
        dst = buf[st.dstbuf][st.dstoff:st.dstoff + cnt]
        val = add(dst, src)
        val_d = dfn[st.dstbuf][st.dstoff:st.dstoff + cnt] & src_d
    if kind in WRITES_LOCAL:
        buf[st.dstbuf][st.dstoff:st.dstoff + cnt] = val
        dfn[st.dstbuf][st.dstoff:st.dstoff + cnt] = val_d
    if kind in SENDS:
        fifos.setdefault(send_key, deque()).append((np.array(val, copy=True), val_d.copy()))


def _deadlock(program, blocks, pc, fifos):
    stuck = []
    for g, tb in blocks:
        i = pc[(g, tb.id)]
        if i >= len(tb.steps):
            continue
        st = tb.steps[i]
        if st.depid >= 0 and pc[(g, st.depid)] <= st.deps:
            why = f"waits for tb {st.depid} step {st.deps}"
        else:
            why = f"waits to receive from rank {tb.recv} on channel {tb.chan}"
        stuck.append(f"gpu {g} tb {tb.id} step {st.s} ({st.type}) {why}")
    shown = "; ".join(stuck[:4]) + (f"; and {len(stuck) - 4} more" if len(stuck) > 4 else "")
    return f"{program.source}: deadlock, {len(stuck)} thread blocks wait: {shown}"


def _connections(program):
    errors = []
    for g in program.gpus:
        for side in ("send", "recv"):
            seen = {}
            for tb in g.tbs:
                peer = getattr(tb, side)
                if peer < 0:
                    continue
                other = seen.setdefault((peer, tb.chan), tb.id)
                if other != tb.id:
                    errors.append(f"gpu {g.id}: thread blocks {other} and {tb.id} both {side} "
                                  f"{'to' if side == 'send' else 'from'} rank {peer} on channel "
                                  f"{tb.chan} (a runtime has one connection there)")
    return errors


def _inputs(program, make):
    return [make(g) for g in range(program.ngpus)]


def check(program, targets=(), seed=0):
    """Check ``program`` (module docstring) and the limits of ``targets``.

    Parameters
    ----------
    program : msccl_read.Program
    targets : sequence of str
        Keys of ``TARGETS``.
    seed : int
        Seed of the random data.

    Returns
    -------
    CheckResult

    Raises
    ------
    MscclError
        If a target is unknown.
    """
    result = CheckResult()
    for t in targets:
        if t not in TARGETS:
            raise MscclError(f"unknown target {t!r}: expected one of {', '.join(TARGETS)}")
    n, c = program.ngpus, program.nchunksperloop
    result.summary = {"name": program.name, "ranks": n, "chunks": c,
                      "thread_blocks": sum(len(g.tbs) for g in program.gpus),
                      "steps": program.num_steps, "checks": []}
    if program.coll != "allreduce":
        result.errors.append(f"coll={program.coll!r}: only allreduce is checked")
    for g in program.gpus:
        if g.i_chunks != c or g.o_chunks not in (0, c) or (program.inplace and g.o_chunks != c):
            result.errors.append(f"gpu {g.id}: i_chunks={g.i_chunks}, o_chunks={g.o_chunks}; an "
                                 f"all-reduce has nchunksperloop={c} of each")
    result.errors += _connections(program)
    if not result.errors:
        try:
            _check_sums(program, result, seed)
        except MscclError as exc:
            result.errors.append(str(exc))
    for t in targets:
        result.limits[t] = TARGETS[t].problems(program)
    return result


def _check_sums(program, result, seed):
    n, c = program.ngpus, program.nchunksperloop
    checks = result.summary["checks"]
    if n * n * c <= SYMBOLIC_LIMIT:
        eye = np.eye(n, dtype=np.int64)
        out, dfn = run(program, _inputs(program, lambda g: np.tile(eye[g], (c, 1))), np.add)
        for g in range(n):
            bad = np.flatnonzero(~dfn[g] | np.any(out[g] != 1, axis=1))
            if len(bad):
                k = int(bad[0])
                result.errors.append(f"rank {g} chunk {k}: " + _describe(out[g][k], dfn[g][k]))
                return
        checks.append("symbolic")
    rng = np.random.default_rng(seed)
    ints = [rng.integers(-2**31, 2**31, size=(c, ELEMENTS_PER_CHUNK)).astype(np.int32)
            for _ in range(n)]
    out, dfn = run(program, ints, np.add)
    want = np.sum(np.stack(ints), axis=0, dtype=np.int32)
    for g in range(n):
        if not dfn[g].all() or not np.array_equal(out[g], want):
            k = int(np.flatnonzero(~dfn[g] | np.any(out[g] != want, axis=1))[0])
            result.errors.append(f"rank {g} chunk {k}: int32 result differs from the sum over "
                                 f"the ranks")
            return
    checks.append("int32")
    floats = [(rng.standard_normal((c, ELEMENTS_PER_CHUNK))
               * 2.0 ** rng.integers(-3, 4, size=(c, ELEMENTS_PER_CHUNK))).astype(np.float32)
              for _ in range(n)]
    runs = [run(program, floats, np.add, order)[0] for order in (1, -1)]
    bits = [[o.view(np.uint32) for o in r] for r in runs]
    for g in range(n):
        if not np.array_equal(bits[0][g], bits[1][g]):
            k = int(np.flatnonzero(np.any(bits[0][g] != bits[1][g], axis=1))[0])
            result.errors.append(f"rank {g} chunk {k}: the float32 sum depends on the execution "
                                 f"order (the dependencies leave the summation order open)")
            return
        if not np.array_equal(bits[0][g], bits[0][0]):
            k = int(np.flatnonzero(np.any(bits[0][g] != bits[0][0], axis=1))[0])
            result.errors.append(f"chunk {k}: rank {g}'s float32 sum differs from rank 0's bit "
                                 f"for bit (summed in another order)")
            return
    checks.append("float32 deterministic")
    result.float32, result.float32_inputs = runs[0], floats


def _describe(counts, is_defined):
    if not is_defined:
        return "never written (reads a chunk no step wrote)"
    missing = [r for r, k in enumerate(counts) if k == 0]
    extra = [f"{r} x{k}" for r, k in enumerate(counts) if k > 1]
    parts = ([f"misses rank(s) {', '.join(map(str, missing[:8]))}"] if missing else []) + \
        ([f"counts {', '.join(extra[:8])}"] if extra else [])
    return "the sum " + " and ".join(parts)


@dataclass(frozen=True)
class Target:
    """A consumer of MSCCL-IR and its limits, each with its source."""
    name: str
    source: str
    max_steps: int | None = None          # steps per thread block
    max_blocks: int | None = None         # thread blocks per rank
    max_peers: int | None = None          # send (and receive) peers per channel
    max_count: int | None = None          # cnt must be below this
    max_channels: int | None = None
    max_dep_block: int | None = None      # a dependency's thread block id (int8 in the runtimes)
    max_offset: int | None = None         # offsets (int16 in RCCL)
    step_types: tuple | None = None       # the step types it keeps
    max_bytes_default: str | None = None  # what a missing maxBytes means

    def problems(self, program):
        """Every limit ``program`` breaks, one line each (empty: none); at most three lines
        per limit, then how many more."""
        found = {}      # limit -> lines

        def add(rule, line):
            found.setdefault(rule, []).append(f"{self.name}: {line} ({self.source})")

        def over(rule, where, value, limit):
            if limit is not None and value > limit:
                add(rule, f"{where}: {rule} {value:,} exceeds {limit:,}")

        over("channels", "algo", program.nchannels, self.max_channels)
        for g in program.gpus:
            over("thread blocks", f"gpu {g.id}", len(g.tbs), self.max_blocks)
            for side in ("send", "recv"):
                for ch in range(program.nchannels):
                    peers = sum(1 for tb in g.tbs if getattr(tb, side) >= 0 and tb.chan == ch)
                    over(f"{side} peers", f"gpu {g.id} channel {ch}", peers, self.max_peers)
            for tb in g.tbs:
                over("steps", f"gpu {g.id} tb {tb.id}", len(tb.steps), self.max_steps)
                for st in tb.steps:
                    where = f"gpu {g.id} tb {tb.id} step {st.s}"
                    if self.max_count is not None and st.cnt >= self.max_count:
                        add("cnt", f"{where}: cnt {st.cnt} must be below {self.max_count}")
                    over("dependency's thread block", where, st.depid, self.max_dep_block)
                    over("offset", where, max(st.srcoff, st.dstoff), self.max_offset)
                    if self.step_types is not None and st.type not in self.step_types:
                        add("step type", f"{where}: step type {st.type} is dropped (only "
                                         f"{', '.join(self.step_types)} are kept)")
        if self.name == "msccl" and program.max_bytes == 0:
            add("maxBytes", "algo: maxBytes=0: MSCCL runs a file only for sizes n with n < "
                            "maxBytes, so for none (RCCL reads 0 as no limit)")
        if self.max_bytes_default is not None:
            for attr, value in (("minBytes", program.min_bytes), ("maxBytes", program.max_bytes),
                                ("outofplace", program.outofplace)):
                if value is None:
                    meaning = self.max_bytes_default if attr == "maxBytes" else "a default"
                    add(attr, f"algo: no {attr} attribute ({meaning} is used, and the file may "
                              f"be skipped for some calls)")
        out = []
        for rule, lines in found.items():
            out += lines[:3]
            if len(lines) > 3:
                out.append(f"{self.name}: ... and {len(lines) - 3:,} more over the {rule} limit")
        return out


#: The consumers ``check --target`` knows.
TARGETS = {t.name: t for t in (
    Target("msccl", "microsoft/msccl src/include/msccl.h and src/graph/topo.cc",
           max_steps=256, max_blocks=216, max_peers=32, max_count=72, max_channels=32,
           max_dep_block=127, max_bytes_default="MSCCL's 128 MB"),
    Target("rccl", "ROCm/rccl src/include/msccl/msccl_struct.h", max_steps=64, max_peers=32,
           max_count=72, max_dep_block=127, max_offset=32767,
           max_bytes_default="0, no limit,"),
    Target("astra-sim", "ASTRA-sim's MSCCL-IR converter keeps only these step types",
           step_types=("s", "r", "rrc", "nop")),
)}
