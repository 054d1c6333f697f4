"""The routed message monitor (``tb.message_trace``) and its script, on 4-node switched networks
in the Amaranth simulator (about 2 s each): message latencies against the router's closed-form
zero-load latency (``hdl.router.network.path_cost``) and the critical path's consistency."""

import functools
import importlib.util
import json
from pathlib import Path

import pytest

from allreduce_rtl.plan import model_timing, plan_hardware
from golden_model.topology import parse_topology
from hdl.router.network import path_cost
from tb.message_trace import critical_chain, trace_routed

LATENCY = 4


@functools.cache
def _trace(spec, algorithm, dtype="int32", elements=13):
    topo = parse_topology(spec, link_latency=LATENCY)
    plan = plan_hardware(topo, [algorithm], [elements], dtype=dtype, link_latency=LATENCY,
                         router=True)
    run = plan.runs[0]
    return plan, trace_routed(plan, run, model_timing(run.schedule, plan.config))


def _zero_load(plan, m):
    return path_cost(plan.hardware_topology, m.src, m.dst,
                     link_latency=LATENCY).latency(m.flits)


def test_ring_messages_take_the_zero_load_latency():
    # ring sends one message per node and step around a Hamiltonian ring: nothing contends, so
    # every message takes exactly the router's closed-form latency
    plan, trace = _trace("fattree:2x2", "ring")
    transfers = sum(len(s) for s in plan.runs[0].schedule.steps)
    assert len(trace.messages) == transfers
    assert [m.eject_tail - m.inject_head for m in trace.messages] == \
        [_zero_load(plan, m) for m in trace.messages]
    assert max(m.eject_tail for m in trace.messages) < trace.rtl_cycles
    assert trace.model_cycles == plan.runs[0].expected_cycles


@pytest.mark.parametrize("spec, algorithm, dtype", [
    ("fattree:2x2", "multitree", "int32"), ("bigraph:2x2", "multitree", "int32"),
    # several NI ports per node, several messages in flight on one node
    ("torus:2x2", "dbtree", "int32"), ("mesh:2x2", "multitree-opt", "int32"),
    # staged reductions: heads name staging slots, two per step to one node
    ("fattree:2x2", "multitree", "float32"), ("fattree:2x2", "halving-doubling", "float32")])
def test_latencies_and_critical_path(spec, algorithm, dtype):
    plan, trace = _trace(spec, algorithm, dtype)
    assert len(trace.messages) == sum(len(s) for s in plan.runs[0].schedule.steps)
    for m in trace.messages:
        assert m.eject_tail - m.inject_head >= _zero_load(plan, m)
        assert m.inject_tail - m.inject_head >= m.flits - 1
    chain = critical_chain(trace)
    assert chain[-1][0].eject_tail == max(m.eject_tail for m in trace.messages)
    assert chain[0][1] == "start"
    for (a, _), (b, why) in zip(chain, chain[1:]):
        if why == "port":
            assert (a.src, a.port) == (b.src, b.port) and a.inject_tail < b.inject_head
        else:
            assert why == "inputs"
            assert (a.dst, a.chunk) == (b.src, b.chunk) and a.eject_tail < b.inject_head


def test_trace_refuses_links_between_nis():
    topo = parse_topology("ring:4", link_latency=LATENCY)
    plan = plan_hardware(topo, ["ring"], [13], dtype="int32", link_latency=LATENCY)
    run = plan.runs[0]
    with pytest.raises(ValueError, match="routed plan"):
        trace_routed(plan, run, model_timing(run.schedule, plan.config))


def _script():
    path = Path(__file__).resolve().parent.parent / "scripts" / "routed_trace.py"
    spec = importlib.util.spec_from_file_location("routed_trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv, message", [
    (["--elements", "-3"], "element count must be a positive integer"),
    (["-t", "ring:4"], "ring:4 has no router network"),
    (["--json", "/nonexistent-folder/x.json"], "its folder does not exist"),
    (["--json", "/"], "is not a file name"),
    (["--max-cycles", "0"], "max_cycles must be a positive integer, not 0"),
    (["--flow-control", "store"], "invalid choice: 'store'"),
])
def test_script_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    try:
        code = _script().main(argv)
    except SystemExit as exc:     # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_script_prints_the_critical_path_and_writes_json(tmp_path, capsys):
    out = tmp_path / "messages.json"
    assert _script().main(["-t", "fattree:2x2", "-e", "13", "--json", str(out)]) == 0
    _, trace = _trace("fattree:2x2", "multitree")
    text = capsys.readouterr().out
    assert f"RTL {trace.rtl_cycles:,} cycles, model {trace.model_cycles:,}" in text
    assert f"RTL critical path: {len(critical_chain(trace))} messages" in text
    rows = json.loads(out.read_text())
    assert [r["eject_tail"] for r in rows] == [m.eject_tail for m in trace.messages]
