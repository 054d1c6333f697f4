"""The simulation harness itself (tb/): images, dumps, ports, scoreboard, and the host players on a
stand-in ``network`` (tests/fixtures/standin_network.py) in both simulators.

The stand-in has the contract's ports but no all-reduce: its buffers read back what was loaded,
so these tests check the harness plumbing (loading with random valid gaps, start/done, read-back
with random ready, dumps, timeouts) independently of the hardware.
"""

import dataclasses
import pathlib
import sys

import numpy as np
import pytest

from golden_model.algorithms import build_schedule
from golden_model.executor import execute
from golden_model.lowering import lower
from golden_model.topology import parse_topology
from tb import harness
from tb.runner import HardwareBuild, RunResult, RunSpec
from allreduce_rtl.plan import hardware_timing, model_cycles
from hdl.config import NIConfig
from golden_model.elements import FLOAT64, INT32
from tb.scoreboard import check_run, compare_data

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from standin_network import standin_verilog  # noqa: E402


def random_vectors(n, d, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(-2**31, 2**31, size=(n, d), dtype=np.int64).astype(np.int32)


# --------------------------------------------------------------------------------------------
# Pure Python
# --------------------------------------------------------------------------------------------

def test_image_file_holds_header_tables_and_flits(tmp_path):
    topo = parse_topology("mesh:2x3", link_latency=4)
    sched = build_schedule("multitree", topo, 3 * 6 + 1)
    lw = lower(sched)
    cfg = NIConfig(num_ports=3, table_depth=8, buffer_depth=16)
    vec = random_vectors(6, sched.num_elements)
    layout = harness.HostCmdLayout(data=(26, 128))
    images = harness.program_images(lw, cfg, vec, layout)
    depth = harness.image_depth_for(cfg)
    harness.write_image(tmp_path / "cmd.hex", images[4], layout, depth)
    words = [int(line, 16) for line in (tmp_path / "cmd.hex").read_text().split()]
    assert len(words) == depth      # padded to the player's memory
    img = images[4]
    assert words[0] == img.num_load | (lw.buffer_flits << 32)
    # Tables: every engine's rows then one invalid row; 2 * ports engines.
    rows = sum(len(r) + 1 for r in lw.programs[4].engines.values())
    assert len(img.control) == rows
    field = lambda w, f: w >> getattr(layout, f)[0] & ((1 << getattr(layout, f)[1]) - 1)
    for w in words[1:1 + rows]:
        assert field(w, "write") == 1 and field(w, "target") == 1
    packed = lw.pack(vec)[4]
    for f in range(lw.buffer_flits):
        w = words[1 + rows + f]
        assert field(w, "write") == 1 and field(w, "target") == 0 and field(w, "addr") == f
        data = field(w, "data")
        got = [(data >> (32 * e)) & 0xFFFFFFFF for e in range(4)]
        assert got == [int(x) & 0xFFFFFFFF for x in packed[f]]
    assert all(w == 0 for w in words[1 + img.num_load:])


def test_read_dump_parses_writememh_output(tmp_path):
    flits = random_vectors(5, 4, seed=3)
    lines = ["// 0x00000000"]
    for f in flits:
        lines.append("".join(f"{int(x) & 0xFFFFFFFF:08x}" for x in f[::-1]))
    (tmp_path / "rsp.hex").write_text("\n".join(lines) + "\n")
    got = harness.read_dump(tmp_path / "rsp.hex", 5, 4, INT32)
    assert np.array_equal(got, flits)
    (tmp_path / "bad.hex").write_text("\n".join(lines[:3] + ["x" * 32] + lines[4:]) + "\n")
    with pytest.raises(ValueError, match="undefined bits"):
        harness.read_dump(tmp_path / "bad.hex", 5, 4, INT32)
    with pytest.raises(ValueError, match="4 words read back, expected 5"):
        (tmp_path / "short.hex").write_text("\n".join(lines[:5]) + "\n")
        harness.read_dump(tmp_path / "short.hex", 5, 4, INT32)


def test_ports_follow_amaranth_flattening():
    """The harness finds the contract's ports with Amaranth's names (``host_cmd__0__valid``)."""
    from amaranth.back import verilog
    from amaranth.hdl import Module
    from amaranth.lib import data, stream, wiring
    from amaranth.lib.wiring import In, Out

    class Tiny(wiring.Component):
        def __init__(self):
            cmd = data.StructLayout({"write": 1, "target": 1, "engine": 4, "addr": 20,
                                     "data": 128})
            super().__init__({"start": In(1), "done": Out(1), "error": Out(1),
                              "cycles": Out(32),
                              "host_cmd": In(stream.Signature(cmd)).array(2),
                              "host_rsp": Out(stream.Signature(128)).array(2),
                              "node_start": In(1).array(2), "node_done": Out(1).array(2), "node_error": Out(1).array(2),
                              "node_step": Out(16).array(2)})

        def elaborate(self, platform):
            m = Module()
            for i in range(2):
                m.d.sync += self.node_step[i].eq(self.host_cmd[i].payload.addr
                                                 + self.node_start[i])
                m.d.comb += self.host_rsp[i].payload.eq(self.host_cmd[i].payload.data)
            return m

    text = verilog.convert(Tiny(), name="network")
    ports = harness.NetworkPorts(2, harness.parse_ports(text))
    ports.check()
    assert ports.cmd_width == 154 and ports.rsp_width == 128
    assert ports.per_node("node_step", 1) == ("node_step__1", 16)
    top = harness.generate_tb_top(text, 2, image_depth=10, rsp_depth=4,
                                  cmd_layout=harness.HostCmdLayout())
    assert ".host_cmd__1__payload(cmd_payload_1)" in top and "u_player_1" in top


def test_scoreboard_names_the_first_wrong_element():
    topo = parse_topology("torus:4x4", link_latency=4)
    sched = build_schedule("multitree", topo, 49)
    vec = random_vectors(16, 49)
    good = execute(sched, vec)
    cfg = NIConfig(buffer_depth=64, table_depth=16)
    expected = model_cycles(sched, cfg)
    res = RunResult("mt", "done", cycles=100, outputs=good.copy())
    verdict = check_run(res, sched, vec, INT32, expected_cycles=expected)
    assert verdict.passed and verdict.mismatches == 0
    assert verdict.model_cycles == expected
    assert verdict.ratio == pytest.approx(100 / verdict.model_cycles)
    bad = good.copy()
    bad.view(np.uint32)[7, 20] ^= np.uint32(1 << 31)     # one bit of one element
    res = RunResult("mt", "done", cycles=100, outputs=bad)
    verdict = check_run(res, sched, vec, INT32, expected_cycles=expected)
    assert not verdict.passed and verdict.mismatches == 1
    assert "node 7 element 20" in verdict.message
    assert compare_data(sched, vec, good, INT32)[0] == 0
    stalled = RunResult("mt", "stall", message="deadlock or stall at step 3 on node 5")
    assert "step 3 on node 5" in check_run(stalled, sched, vec, INT32,
                                           expected_cycles=expected).message


def test_timing_is_configured_like_the_hardware():
    cfg = dataclasses.replace(NIConfig(buffer_depth=64, table_depth=16), link_latency=7)
    params = hardware_timing(cfg)
    assert params.flit_bytes == 16 and params.frequency_ghz == 1.0
    fields = {f.name for f in dataclasses.fields(params)}
    if "header_flits" in fields:
        assert params.header_flits == 1
    topo = parse_topology("ring:4", link_latency=150)
    sched = build_schedule("ring", topo, 4 * 64)
    # 6 steps of 16 payload + 1 head flit and 7 cycles of latency each, without contention.
    assert model_cycles(sched, cfg) >= 6 * (16 + 7)


def test_images_and_dumps_carry_any_element_width(tmp_path):
    """The harness packs elements by their type's width: float64 bit patterns (two 32-bit
    limbs each) go into the image's data field and come back from a dump unchanged."""
    rng = np.random.default_rng(4)
    values = rng.standard_normal((3, 2)) * 1e300        # 2 float64 per 128-bit flit
    values[1, 0] = -0.0
    values[2, 1] = np.inf
    patterns = harness.pack_flits(values, FLOAT64)
    image = harness.NodeImage(control=[], flits=patterns, num_read=3)
    layout = harness.HostCmdLayout(data=(26, 128))
    harness.write_image(tmp_path / "cmd.hex", image, layout, 8)
    words = [int(line, 16) for line in (tmp_path / "cmd.hex").read_text().split()]
    for f in range(3):
        data = words[1 + f] >> 26
        assert [(data >> (64 * e)) & (2**64 - 1) for e in range(2)] == patterns[f].tolist()
    (tmp_path / "rsp.hex").write_text("".join(f"{words[1 + f] >> 26:032x}\n" for f in range(3)))
    back = harness.read_dump(tmp_path / "rsp.hex", 3, 2, FLOAT64)
    assert back.dtype == np.float64
    assert np.array_equal(back.view(np.uint64), values.view(np.uint64))


# --------------------------------------------------------------------------------------------
# Stand-in network in the simulators
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["icarus", "verilator"])
def standin(request):
    topo = parse_topology("ring:4", link_latency=4)
    cfg = NIConfig(num_ports=2, buffer_depth=32, table_depth=8)
    build = HardwareBuild(topo, cfg, request.param, valid_pct=60, ready_pct=50,
                          network_source=standin_verilog(4, buffer_depth=32))
    return build.build()


def test_players_load_run_and_read_back(standin):
    topo = standin.topology
    sched = build_schedule("ring", topo, 4 * 12 + 3)
    lw = lower(sched)
    a, b = random_vectors(4, sched.num_elements, 1), random_vectors(4, sched.num_elements, 2)
    results = standin.run([RunSpec("first", lw, a, 20), RunSpec("second", lw, b, 20)], seed=5)
    for res, vec in zip(results, (a, b)):
        assert res.ok, res.message
        # The stand-in does no all-reduce: the buffers hold what was loaded.
        assert np.array_equal(res.outputs, vec)
        assert res.cycles == res.tb_cycles == 10 + 3 * 3 + 1
        # Random valid gaps: loading takes longer than one command per cycle.
        assert res.load_cycles > max(len(i.control) for i in harness.program_images(
            lw, standin.config, vec, standin.layout)) + lw.buffer_flits


def test_stall_names_step_and_node(standin):
    topo = standin.topology
    sched = build_schedule("ring", topo, 13)
    lw = lower(sched)

    def stall_node_2(images):       # the stand-in's fault hook: table write to engine 15
        images[2].control.append(standin.layout.pack(1, 1, 15, 0, 0))

    res, = standin.run(RunSpec("stuck", lw, random_vectors(4, 13), 20,
                               edit_images=stall_node_2), timeout_factor=10)
    assert res.status == "stall"
    assert "deadlock or stall at step" in res.message and "on node 2" in res.message


def test_read_back_waits_out_the_arrival_counter_sweep(tmp_path):
    """After a run the NI sweeps its ``max_chunks`` arrival counters before it takes a command
    (hdl.ni): with 4,096 counters and a 13-flit read-back that is longer than the read-back's
    random gaps, and the testbench waits for it instead of reporting a stall."""
    topo = parse_topology("ring:4", link_latency=2)
    cfg = NIConfig(num_ports=2, buffer_depth=64, table_depth=8, max_chunks=1 << 12)
    build = HardwareBuild(topo, cfg, "icarus", valid_pct=60, ready_pct=50, build_root=tmp_path)
    sched = build_schedule("ring", topo, 4 * 12 + 3)
    vec = np.arange(4 * sched.num_elements, dtype=np.int32).reshape(4, -1)
    (res,) = build.run([RunSpec("ring", lower(sched), vec, None)])
    assert res.ok, res.message
    assert np.array_equal(res.outputs, execute(sched, vec))
    assert res.read_cycles > cfg.max_chunks and res.load_cycles > cfg.max_chunks
