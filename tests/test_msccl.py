"""MSCCL-IR XML: the exporter, the reader and the independent check (docs/interchange.md).

The round trip runs every built-in algorithm's exported file through the check, which executes
the XML itself, and compares its float32 result with ``golden_model.executor`` on the same
data bit for bit: the XML's dependencies impose the schedule's summation order. The
hand-written files below follow the format's description (references.md), not any tool's
output."""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from golden_model.algorithms import ALGORITHMS, build_schedule
from golden_model.errors import ConfigError
from golden_model.executor import execute
from golden_model.exporters import export, exporter_for, msccl_xml
from golden_model.interchange import msccl_check, msccl_read
from golden_model.interchange.msccl_read import MscclError
from golden_model.schedule import chunk_bounds
from golden_model.topology import parse_topology


def _roundtrip_cases():
    for spec in ("ring:5", "torus:4x4", "mesh:3x3", "fattree:2x2", "bigraph:2x4"):
        for name in ALGORITHMS:
            yield spec, name


@pytest.mark.parametrize("spec, name", list(_roundtrip_cases()))
def test_export_checks_and_sums_like_the_golden_model(spec, name):
    try:
        sched = build_schedule(name, parse_topology(spec), 1000)
    except ConfigError:
        pytest.skip(f"{name} does not run on {spec}")
    program = msccl_read.parse(export(sched, "msccl-xml"))
    result = msccl_check.check(program)
    assert result.errors == []
    assert result.summary["checks"] == ["symbolic", "int32", "float32 deterministic"]
    # The same schedule on the check's data: its chunks of ELEMENTS_PER_CHUNK elements.
    c, e = program.nchunksperloop, msccl_check.ELEMENTS_PER_CHUNK
    assert c == sched.num_chunks and program.ngpus == sched.num_nodes
    same = dataclasses.replace(sched, num_elements=c * e, bounds=chunk_bounds(c * e, c))
    data = np.stack([x.reshape(-1) for x in result.float32_inputs])
    want = execute(same, data)
    got = np.stack([x.reshape(-1) for x in result.float32])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_export_structure_ring():
    """ring:3: per rank one send block (to the next rank) and one receive block; every
    transfer a step on each side; the all-gather's copies are ``r``, the reductions ``rrc``."""
    sched = build_schedule("ring", parse_topology("ring:3"), 6)
    p = msccl_read.parse(msccl_xml.export(sched))
    assert (p.ngpus, p.nchunksperloop, p.coll, p.inplace, p.proto) == (3, 3, "allreduce", True,
                                                                       "Simple")
    assert (p.outofplace, p.min_bytes, p.max_bytes) == (False, 0, msccl_xml.MAX_BYTES)
    for g in p.gpus:
        assert [(tb.send, tb.recv) for tb in g.tbs] == [((g.id + 1) % 3, -1),
                                                         (-1, (g.id - 1) % 3)]
        send, recv = g.tbs
        assert [s.type for s in send.steps] == ["s"] * 4
        assert [s.type for s in recv.steps] == ["rrc", "rrc", "r", "r"]
    assert p.num_steps == 2 * sched.num_transfers       # no nop needed on a ring


def test_extra_dependencies_become_nops_before_the_step():
    """multitree on torus:4x4: a parent's send waits for several children's receives; the
    first dependency stays on the step, the others are nop steps just before it."""
    sched = build_schedule("multitree", parse_topology("torus:4x4"), 1000)
    p = msccl_read.parse(msccl_xml.export(sched))
    nops = 0
    for g in p.gpus:
        for tb in g.tbs:
            for i, st in enumerate(tb.steps):
                if st.type == "nop":
                    nops += 1
                    assert st.depid >= 0 and st.cnt == 0
                    nxt = next(s for s in tb.steps[i:] if s.type != "nop")
                    assert nxt.depid >= 0      # MSCCL's rule for a chain of nops
    assert nops > 0 and p.num_steps == 2 * sched.num_transfers + nops


# --- hand-written files ------------------------------------------------------------------------

#: Two ranks, two chunks: each sends the chunk the other owns, reduces the one it owns, and
#: sends it back (reduce-scatter then all-gather).
TWO = """<algo name="two" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2"
 coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="1048576">
 <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
  <tb id="0" send="1" recv="-1" chan="0">
   <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="1" deps="0" hasdep="0"/>
  </tb>
  <tb id="1" send="-1" recv="1" chan="0">
   <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
   <step s="1" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
  </tb>
 </gpu>
 <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
  <tb id="0" send="0" recv="-1" chan="0">
   <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="1" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="1" deps="0" hasdep="0"/>
  </tb>
  <tb id="1" send="-1" recv="0" chan="0">
   <step s="0" type="rrc" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"/>
   <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
  </tb>
 </gpu>
</algo>
"""

#: Three ranks, one chunk: ranks 1 and 2 send to rank 0, which adds both (in two blocks) and
#: sends the sum back; {CHAIN} is the dependency of the second addition on the first.
STAR = """<algo name="star" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="3"
 coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="1048576">
 <gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0">
  <tb id="0" send="-1" recv="1" chan="0">
   <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
  </tb>
  <tb id="1" send="-1" recv="2" chan="0">
   <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" {CHAIN} hasdep="1"/>
  </tb>
  <tb id="2" send="1" recv="-1" chan="0">
   <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0"/>
   <step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="1" deps="0" hasdep="0"/>
  </tb>
  <tb id="3" send="2" recv="-1" chan="0">
   <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0"/>
   <step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="1" deps="0" hasdep="0"/>
  </tb>
 </gpu>
 <gpu id="1" i_chunks="1" o_chunks="1" s_chunks="0">
  <tb id="0" send="0" recv="-1" chan="0">
   <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
  </tb>
  <tb id="1" send="-1" recv="0" chan="0">
   <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0"/>
  </tb>
 </gpu>
 <gpu id="2" i_chunks="1" o_chunks="1" s_chunks="0">
  <tb id="0" send="0" recv="-1" chan="0">
   <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
  </tb>
  <tb id="1" send="-1" recv="0" chan="0">
   <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0"/>
  </tb>
 </gpu>
</algo>
"""
CHAINED = 'depid="0" deps="0"'
UNCHAINED = 'depid="-1" deps="-1"'


def _star(chain):
    text = STAR.replace("{CHAIN}", chain)
    # rank 1's and 2's receive waits for their own send (hasdep on it)
    return text.replace('<tb id="0" send="0" recv="-1" chan="0">\n   <step s="0" type="s" '
                        'srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" '
                        'deps="-1" hasdep="0"/>',
                        '<tb id="0" send="0" recv="-1" chan="0">\n   <step s="0" type="s" '
                        'srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" '
                        'deps="-1" hasdep="1"/>')


def test_hand_written_two_rank_allreduce_is_correct():
    result = msccl_check.check(msccl_read.parse(TWO))
    assert result.ok and result.summary["checks"] == ["symbolic", "int32", "float32 deterministic"]
    x = result.float32_inputs
    assert np.array_equal(result.float32[0], x[0] + x[1])    # one addition: any order agrees


def test_hand_written_star_sums_in_its_dependency_order():
    result = msccl_check.check(msccl_read.parse(_star(CHAINED)))
    assert result.ok, result.errors
    x = result.float32_inputs
    want = (x[0] + x[1]) + x[2]                         # float32 throughout, the chain's order
    for g in range(3):
        assert np.array_equal(result.float32[g].view(np.uint32), want.view(np.uint32))


def test_an_open_summation_order_is_found():
    result = msccl_check.check(msccl_read.parse(_star(UNCHAINED)))
    assert result.errors and "depends on the execution order" in result.errors[0]


@pytest.mark.parametrize("old, new, message", [
    ('cnt="1" depid="1" deps="0" hasdep="0"/>\n  </tb>\n  <tb id="1" send="-1" recv="1"',
     'depid="1" deps="0" hasdep="0"/>\n  </tb>\n  <tb id="1" send="-1" recv="1"',
     "has no cnt attribute"),
    ('type="rrc" srcbuf="i" srcoff="0"', 'type="rrx" srcbuf="i" srcoff="0"',
     "type='rrx' is not one of s, r, rcs, rrs, rrc, rrcs, cpy, re, nop"),
    ('type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" '
     'hasdep="1"', 'type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" '
     'deps="-1" hasdep="0"', "hasdep=0"),
    ('srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1"',
     'srcoff="2" dstbuf="i" dstoff="1" cnt="1" depid="-1"', "outside its 2 chunks"),
    ('<gpu id="1"', '<gpu id="2"', "id must be below ngpus=2"),
    ('send="1" recv="-1"', 'send="0" recv="-1"', "send=0 must be -1 or another rank"),
    ('depid="1" deps="0"', 'depid="1" deps="5"', "depends on tb 1 step 5"),
    ('<algo name="two"', '<algo name="two" bogus', "malformed XML"),
    ('<step s="1" type="s"', '<step s="3" type="s"', "s=3, expected 1"),
])
def test_malformed_files_are_one_line_errors(old, new, message):
    assert old in TWO
    with pytest.raises(MscclError, match="^<xml>: ") as info:
        msccl_read.parse(TWO.replace(old, new, 1))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_wrong_sums_and_deadlocks_are_found():
    # rank 0 overwrites its chunk instead of adding: rank 0's own contribution is lost
    result = msccl_check.check(msccl_read.parse(TWO.replace('type="rrc" srcbuf="i" srcoff="0"',
                                                            'type="r" srcbuf="i" srcoff="0"', 1)))
    assert result.errors == ["rank 0 chunk 0: the sum misses rank(s) 0"]
    # rank 0's first send waits for its own last receive, which needs that send: a cycle
    cyclic = TWO.replace('srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" '
                         'hasdep="0"/>', 'srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="1" '
                         'deps="1" hasdep="0"/>', 1)
    cyclic = cyclic.replace('type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" '
                            'depid="-1" deps="-1" hasdep="0"', 'type="r" srcbuf="i" srcoff="1" '
                            'dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"', 1)
    result = msccl_check.check(msccl_read.parse(cyclic))
    assert len(result.errors) == 1 and "deadlock" in result.errors[0]
    assert "gpu 0 tb 0 step 0 (s) waits for tb 1 step 1" in result.errors[0]
    # a collective other than all-reduce
    result = msccl_check.check(msccl_read.parse(TWO.replace('coll="allreduce"',
                                                            'coll="allgather"')))
    assert result.errors[0].startswith("coll='allgather'")


def test_target_limits():
    """torus:4x4 multitree-opt in 8 sub-chunks has blocks of 74 steps: over RCCL's 64, within
    MSCCL's 256; a file without outofplace/minBytes/maxBytes is flagged for the runtimes; a
    step type ASTRA-sim drops is named."""
    sched = build_schedule("multitree-opt", parse_topology("torus:4x4"), 1 << 18)
    assert sched.meta["sub_chunks"] == 8
    p = msccl_read.parse(export(sched, "msccl-xml"))
    longest = max(len(tb.steps) for g in p.gpus for tb in g.tbs)
    result = msccl_check.check(p, ("msccl", "rccl", "astra-sim"))
    assert not result.errors and result.limits["msccl"] == [] and result.limits["astra-sim"] == []
    assert longest > 64 and f"steps {longest} exceeds 64" in " ".join(result.limits["rccl"])
    bare = TWO.replace(' outofplace="0" minBytes="0" maxBytes="1048576"', "")
    lines = msccl_check.check(msccl_read.parse(bare), ("msccl",)).limits["msccl"]
    assert [x.split(": ")[1] for x in lines] == ["algo"] * 3 and "128 MB" in lines[1]
    rcs = TWO.replace('type="r" srcbuf="i" srcoff="1"', 'type="rcs" srcbuf="i" srcoff="1"', 1)
    rcs = rcs.replace('<tb id="1" send="-1" recv="1"', '<tb id="1" send="1" recv="1"', 1)
    r = msccl_check.check(msccl_read.parse(rcs), ("astra-sim",))
    assert any("step type rcs is dropped" in x for x in r.limits["astra-sim"])
    with pytest.raises(MscclError, match="unknown target"):
        msccl_check.check(p, ("nccl",))


def test_xml_suffix_selects_the_exporter():
    assert exporter_for(path="a/b.XML").name == "msccl-xml"


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "allreduce_rtl.cli", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_cli_export_then_check(tmp_path):
    out = tmp_path / "mt.xml"
    r = _cli("schedule", "-a", "multitree", "-t", "mesh:2x3", "-s", "64KiB", "-o", str(out),
             "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["format"] == "msccl-xml"
    assert summary["check"] == "correct: symbolic, int32, float32 deterministic"
    r = _cli("check", str(out), "--target", "rccl", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] and report["ranks"] == 6 and report["limits"] == {"rccl": []}
    bad = tmp_path / "bad.xml"
    bad.write_text(TWO.replace('cnt="1" depid="1" deps="0" hasdep="0"/>\n  </tb>',
                               'depid="1" deps="0" hasdep="0"/>\n  </tb>', 1))
    r = _cli("check", str(bad), cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "has no cnt attribute" in r.stderr
    wrong = tmp_path / "wrong.xml"
    wrong.write_text(_star(UNCHAINED))
    r = _cli("check", str(wrong), cwd=tmp_path)
    assert r.returncode == 1 and "error: rank" in r.stdout


# --- import ------------------------------------------------------------------------------------

def hand_ring(n):
    """A ring all-reduce of ``n`` ranks written from the format's description: rank r sends to
    r + 1, chunk (r - k) mod n in step k; reduce-scatter (rrc) then all-gather (r); each send
    after the first waits for the receive before it."""
    def step(s, kind, chunk, dep=None, hasdep=0):
        d = 'depid="-1" deps="-1"' if dep is None else f'depid="{dep[0]}" deps="{dep[1]}"'
        return (f'<step s="{s}" type="{kind}" srcbuf="i" srcoff="{chunk}" dstbuf="i" '
                f'dstoff="{chunk}" cnt="1" {d} hasdep="{hasdep}"/>')
    out = [f'<algo name="hand ring" proto="Simple" nchannels="1" nchunksperloop="{n}" '
           f'ngpus="{n}" coll="allreduce" inplace="1" outofplace="0" minBytes="0" '
           f'maxBytes="0">']
    for r in range(n):
        out.append(f'<gpu id="{r}" i_chunks="{n}" o_chunks="{n}" s_chunks="0">')
        out.append(f'<tb id="0" send="{(r + 1) % n}" recv="-1" chan="0">')
        out += [step(k, "s", (r - k) % n, None if k == 0 else (1, k - 1))
                for k in range(2 * (n - 1))]
        out.append(f'</tb><tb id="1" send="-1" recv="{(r - 1) % n}" chan="0">')
        out += [step(k, "rrc" if k < n - 1 else "r", (r - 1 - k) % n, None,
                     int(k < 2 * (n - 1) - 1)) for k in range(2 * (n - 1))]
        out.append("</tb></gpu>")
    return "\n".join(out + ["</algo>"]) + "\n"


@pytest.mark.parametrize("spec, name", list(_roundtrip_cases()))
def test_import_round_trip(spec, name):
    """Export then import: the same schedule, step for step and route for route (the exporter's
    order comments), so the same sums bit for bit and the same cycles, on links and on routers;
    chunks of unequal sizes (1000 elements in 16 or 48 chunks) included."""
    from golden_model.interchange.msccl_import import to_schedule
    from golden_model.timing import simulate
    topo = parse_topology(spec)
    for elements in (1000, 1 << 16):
        try:
            sched = build_schedule(name, topo, elements)
        except ConfigError:
            pytest.skip(f"{name} does not run on {spec}")
        back = to_schedule(msccl_read.parse(export(sched, "msccl-xml")), topo, elements)
        assert back.meta["steps_from"] == "the file's recorded order"
        assert [[(t.src, t.dst, t.chunk, t.op, t.route) for t in st] for st in back.steps] == \
            [[(t.src, t.dst, t.chunk, t.op, t.route) for t in st] for st in sched.steps]
        data = np.random.default_rng(elements).standard_normal(
            (topo.num_nodes, elements)).astype(np.float32)
        assert np.array_equal(execute(back, data).view(np.uint32),
                              execute(sched, data).view(np.uint32))
        assert simulate(back).cycles == simulate(sched).cycles


@pytest.mark.parametrize("spec, name", [("torus:4x4", "multitree"), ("mesh:3x3", "ring"),
                                        ("fattree:2x2", "multitree")])
def test_import_without_the_order_comments_rebuilds_steps_by_depth(spec, name):
    """Stripped of its comments (as another tool would write it) a file is rebuilt from its
    dependency depth: the same sums bit for bit, as many transfers, no more steps; where NIs
    are joined by links the same cycles (every link keeps the file's FIFO order), while on
    routers the order of a node's transfers to different peers within a step, which the format
    does not carry, may change them."""
    import re
    from golden_model.interchange.msccl_import import to_schedule
    from golden_model.lowering import needs_router
    from golden_model.timing import simulate
    topo = parse_topology(spec)
    sched = build_schedule(name, topo, 1 << 16)
    text = re.sub(r"\s*<!--.*?-->", "", export(sched, "msccl-xml"))
    assert "<!--" not in text
    back = to_schedule(msccl_read.parse(text), topo, 1 << 16)
    assert back.meta["steps_from"] == "dependency depth"
    assert back.num_transfers == sched.num_transfers and len(back.steps) <= len(sched.steps)
    data = np.random.default_rng(3).standard_normal((topo.num_nodes, 1 << 16)).astype(np.float32)
    assert np.array_equal(execute(back, data).view(np.uint32),
                          execute(sched, data).view(np.uint32))
    if not needs_router(sched):
        assert simulate(back).cycles == simulate(sched).cycles
    # A comment that no longer matches its block's steps (a hand-edited file) is not trusted.
    edited = re.sub(r"(<!-- allreduce-rtl schedule order: \S+) ", r"\1 0.0 ",
                    export(sched, "msccl-xml"), count=1)
    assert to_schedule(msccl_read.parse(edited), topo, 1 << 16).meta["steps_from"] == \
        "dependency depth"


def test_import_a_hand_written_ring_and_map_its_ranks():
    from golden_model.interchange.msccl_import import to_schedule
    p = msccl_read.parse(hand_ring(4))
    topo = parse_topology("ring:4")
    sched = to_schedule(p, topo, 10)
    assert sched.algorithm == "msccl:hand ring" and len(sched.steps) == 6
    assert [(t.src, t.dst, t.chunk, t.op.name) for t in sched.steps[0]] == [
        (r, (r + 1) % 4, r, "REDUCE") for r in range(4)]
    data = np.random.default_rng(4).integers(-100, 100, size=(4, 10)).astype(np.int32)
    assert np.array_equal(execute(sched, data), np.tile(data.sum(axis=0), (4, 1)))
    # Ranks on nodes 0, 3, 2, 1: the ring runs the other way round the topology.
    mapped = to_schedule(p, topo, 10, rank_map=(0, 3, 2, 1))
    assert [(t.src, t.dst) for t in mapped.steps[0]] == [(0, 3), (3, 2), (2, 1), (1, 0)]
    assert np.array_equal(execute(mapped, data), np.tile(data.sum(axis=0), (4, 1)))


@pytest.mark.parametrize("text, args, message", [
    (TWO, ("ring:3",), "2 ranks, but ring:3 has 3 nodes"),
    (TWO, ("ring:2", (0, 0)), "rank map [0, 0] must list each node 0..1 once"),
    (TWO.replace('inplace="1"', 'inplace="0"'), ("ring:2",), "only in-place"),
    (TWO.replace('type="r" srcbuf="i" srcoff="1"', 'type="rcs" srcbuf="i" srcoff="1"', 1)
        .replace('<tb id="1" send="-1" recv="1"', '<tb id="1" send="1" recv="1"', 1),
     ("ring:2",), "step type rcs cannot be imported"),
    (TWO.replace('type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0"',
                 'type="rrc" srcbuf="i" srcoff="1" dstbuf="i" dstoff="0"', 1), ("ring:2",),
     "rrc adds chunk 1 into chunk 0"),
    (_star(UNCHAINED), ("ring:3",), "not a correct all-reduce"),
])
def test_import_refusals(text, args, message):
    from golden_model.interchange.msccl_import import to_schedule
    topo = parse_topology(args[0])
    with pytest.raises(MscclError) as info:
        to_schedule(msccl_read.parse(text), topo, 8, *args[1:])
    assert message in str(info.value)


def test_msccl_max_bytes_zero_is_flagged():
    lines = msccl_check.check(msccl_read.parse(hand_ring(3)), ("msccl", "rccl")).limits
    assert any("maxBytes=0" in x for x in lines["msccl"]) and lines["rccl"] == []


def test_cli_takes_a_schedule_file_where_an_algorithm_goes(tmp_path):
    ring = tmp_path / "ring4.xml"
    ring.write_text(hand_ring(4))
    r = _cli("compare", "-t", "ring:4", "-s", "4KiB", "-a", "ring", "--schedule", str(ring),
             "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {x["algorithm"]: x for x in json.loads(r.stdout)["results"]}
    assert rows[str(ring)]["cycles"] == rows["ring"]["cycles"]   # the same ring, by hand
    r = _cli("schedule", "-t", "ring:4", "--schedule", str(ring), "--rank-map", "0,3,2,1",
             "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rank_map"] == [0, 3, 2, 1]
    r = _cli("generate", "-t", "ring:4", "--schedule", str(ring), "-e", "64",
             "--link-latency", "2", "-o", str(tmp_path / "gen"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["algorithm"] == str(ring)
    for bad, message in ((["--rank-map", "0,1"], "no --schedule"),
                         (["--schedule", str(ring), "--rank-map", "0,x"], "expected node numbers"),
                         (["--schedule", str(tmp_path / "none.xml")], "cannot read")):
        r = _cli("schedule", "-t", "ring:4", *bad, cwd=tmp_path)
        assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1


def test_demo_runs_a_hand_written_ring_bit_for_bit(tmp_path, capsys):
    """The hand-written ring replaces MultiTree in the demo (Icarus, 4 nodes, 2-cycle links):
    every node of both runs equals the golden model, and the file's ring takes as many RTL
    cycles as the built-in ring (the same transfers in the same order)."""
    from allreduce_rtl.cli import main
    ring = tmp_path / "ring4.xml"
    ring.write_text(hand_ring(4))
    assert main(["demo", "--simulator", "icarus", "-t", "ring:4", "--schedule", str(ring),
                 "-e", "64", "--link-latency", "2", "--json", "--out", str(tmp_path / "d")]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["algorithm"]: r for r in report["results"]}
    assert report["verified"] and set(rows) == {str(ring), "ring"}
    assert rows[str(ring)]["rtl_cycles"] == rows["ring"]["rtl_cycles"]
    assert report["targets"]["under_test"] == str(ring)
    assert report["targets"]["speedup_at_least_2.3x"] is None


def hand_halving_doubling():
    """Recursive halving then doubling on 4 ranks, written from the format's description:
    rank r exchanges half its vector with r^2 (cnt 2, rrc), then one chunk with r^1 (rrc: rank r
    owns chunk r), then gathers back the same way (r). Blocks per rank: sends to r^2 (tb 0) and
    r^1 (tb 1), receives from r^2 (tb 2) and r^1 (tb 3)."""
    def st(s, kind, off, cnt=1, dep=(-1, -1), hasdep=0):
        return (f'<step s="{s}" type="{kind}" srcbuf="i" srcoff="{off}" dstbuf="i" '
                f'dstoff="{off}" cnt="{cnt}" depid="{dep[0]}" deps="{dep[1]}" '
                f'hasdep="{hasdep}"/>')
    out = ['<algo name="hand hd" proto="Simple" nchannels="1" nchunksperloop="4" ngpus="4" '
           'coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="1048576">']
    for r in range(4):
        mine, other = (0, 2) if r < 2 else (2, 0)          # the half rank r keeps
        keep, give = r, r ^ 1                                 # within it, the chunk it owns
        out += [f'<gpu id="{r}" i_chunks="4" o_chunks="4" s_chunks="0">',
                f'<tb id="0" send="{r ^ 2}" recv="-1" chan="0">',
                st(0, "s", other, 2), st(1, "s", mine, 2, dep=(3, 1), hasdep=1), "</tb>",
                f'<tb id="1" send="{r ^ 1}" recv="-1" chan="0">',
                st(0, "s", give, dep=(2, 0)), st(1, "s", keep, dep=(3, 0)), '</tb>',
                f'<tb id="2" send="-1" recv="{r ^ 2}" chan="0">',
                st(0, "rrc", mine, 2, hasdep=1), st(1, "r", other, 2, dep=(0, 1)), '</tb>',
                f'<tb id="3" send="-1" recv="{r ^ 1}" chan="0">',
                st(0, "rrc", keep, dep=(2, 0), hasdep=1), st(1, "r", give, hasdep=1), '</tb>',
                '</gpu>']
    return "\n".join(out + ["</algo>"]) + "\n"


def test_hand_written_halving_doubling_checks_and_imports():
    """cnt=2 steps: checked correct (symbolic, int32, float32 in both orders), imported onto
    torus:2x2 (partners r^1 and r^2 are neighbours) as one transfer per chunk and
    executed by the golden model to the sum."""
    from golden_model.interchange.msccl_import import to_schedule
    from golden_model.timing import simulate
    p = msccl_read.parse(hand_halving_doubling())
    result = msccl_check.check(p, ("msccl", "rccl", "astra-sim"))
    assert result.ok, (result.errors, result.limits)
    topo = parse_topology("torus:2x2")
    sched = to_schedule(p, topo, 4 * 5 + 3)               # chunks of 6, 6, 6 and 5 elements
    # By dependency depth, per chunk: the doubling's two-chunk send moves the chunk a rank
    # owns since the halving one step before the chunk it received in the doubling's first step.
    assert [len(s) for s in sched.steps] == [8, 4, 6, 6]
    assert sched.num_transfers == 4 * (2 + 1 + 1 + 2)
    data = np.random.default_rng(5).integers(-99, 99, size=(4, 23)).astype(np.int32)
    assert np.array_equal(execute(sched, data), np.tile(data.sum(axis=0), (4, 1)))
    assert simulate(sched).cycles > 0


def test_unreadable_and_oversized_files(tmp_path):
    binary = tmp_path / "b.xml"
    binary.write_bytes(b"<algo \xd0\xff\xfe")
    with pytest.raises(MscclError, match="malformed XML"):
        msccl_read.read(binary)
    # Files in another encoding are read as their declaration or byte-order mark says.
    latin = tmp_path / "latin.xml"
    latin.write_bytes(('<?xml version="1.0" encoding="latin-1"?>\n'
                       + TWO.replace('name="two"', 'name="zwei \xfc"')).encode("latin-1"))
    assert msccl_read.read(latin).name == "zwei \xfc"
    utf16 = tmp_path / "utf16.xml"
    utf16.write_text(TWO, encoding="utf-16")
    assert msccl_check.check(msccl_read.read(utf16)).ok
    with pytest.raises(MscclError, match="Is a directory"):
        msccl_read.read(tmp_path)
    with pytest.raises(MscclError, match=r"ngpus=99999999999999999999 must be <= 65,536"):
        msccl_read.parse(TWO.replace('ngpus="2"', 'ngpus="99999999999999999999"'))
    with pytest.raises(MscclError, match="gpu 2 is missing"):
        msccl_read.parse(TWO.replace('ngpus="2"', 'ngpus="65536"'))
    with pytest.raises(MscclError, match=r"i_chunks=2000000000 must be <= 1,048,576"):
        msccl_read.parse(TWO.replace('i_chunks="2"', 'i_chunks="2000000000"', 1))
