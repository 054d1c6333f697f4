"""The board self-test (``allreduce-rtl board``): its data and checks against independent
references, its UART, its planning errors; in simulation (slow) the self-test passes in both
simulators with the NI's own cycle counts and fails with a planted fault; one bitstream build
(slow)."""

import json

import numpy as np
import pytest
from amaranth.sim import Simulator

from allreduce_rtl import cli
from allreduce_rtl.board import (BOARDS, check_flit_aligned, plan_board, selftest_program)
from golden_model import selftest as gst
from golden_model.errors import ConfigError
from golden_model.executor import execute
from golden_model.topology import parse_topology
from hdl.selftest import final_line, report_line
from hdl.uart import UARTTransmitter, uart_divisor
from tb.selftest import parse_report


def _xorshift32_reference(x):
    """Marsaglia's xorshift32 on a Python int (the paper's C code, masked to 32 bits)."""
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


def test_generators_follow_marsaglia_and_seeds_are_distinct():
    seeds = gst.seeds(4, 4)
    assert len({int(s) for s in seeds.ravel()}) == 16 and (seeds != 0).all()
    words = gst.random_words(4, 4, 50)
    for v, k in [(0, 0), (3, 2)]:
        x = int(seeds[v, k])
        for f in range(50):
            x = _xorshift32_reference(x)
            assert int(words[v, f, k]) == x


def test_float_elements_are_normal_and_in_range():
    words = gst.random_words(2, 4, 200)
    f32 = gst.element_bits(words, "float32").view(np.float32)
    mags = np.abs(f32)
    assert (mags >= 2.0 ** -7).all() and (mags < 2.0).all()
    assert (np.signbit(f32) == ((words >> 31) == 1)).all()
    bf = gst.element_bits(words, "bfloat16")
    assert (bf.astype(np.uint32) == (gst.element_bits(words, "float32") >> 16)).all()
    assert (gst.element_bits(words, "int32") == words).all()


def test_checksum_is_the_xor_of_rotated_words():
    rng = np.random.default_rng(1)
    p = rng.integers(0, 2 ** 32, size=37, dtype=np.uint64)
    n = len(p)
    # closed form: word i ends rotated left by n - 1 - i places

    def rotl(x, r):
        r %= 32
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF if r else x
    want = 0
    for i, x in enumerate(p.tolist()):
        want ^= rotl(int(x), n - 1 - i)
    assert gst.checksum(p) == want


def test_program_carries_the_golden_checksums_and_tables():
    plan = plan_board(parse_topology("ring:4"), ["multitree", "ring"], 64, dtype="float32")
    prog = selftest_program(plan, uart_divisor=4)
    assert prog.flits == 16 and [r.name for r in prog.runs] == ["multitree", "ring"]
    vec = gst.selftest_vectors(4, 4, 16, "float32")
    for run, planned in zip(prog.runs, plan.runs):
        result = execute(planned.schedule, vec, "float32")
        # every node holds the same bits, so every checksum is that of node 0's result
        assert run.checksums == (gst.checksum(result[0].view(np.uint32)),) * 4
        assert run.timeout_cycles > planned.expected_cycles
    # the two algorithms add in different orders: the checksums tell them apart
    assert prog.runs[0].checksums != prog.runs[1].checksums
    int_prog = selftest_program(plan_board(parse_topology("ring:4"), ["ring"], 64,
                                           dtype="int32"), uart_divisor=4)
    assert int_prog.runs[0].checksums is None


def test_table_fault_changes_one_row_only():
    plan = plan_board(parse_topology("ring:4"), ["multitree", "ring"], 64, dtype="int32")
    good = selftest_program(plan, uart_divisor=4)
    bad = selftest_program(plan, uart_divisor=4, fault="table-op")
    diff = [(a, b) for a, b in zip(good.runs[0].table_commands, bad.runs[0].table_commands)
            if a != b]
    assert len(diff) == 1 and diff[0][0][0] == 0        # one command, to node 0
    assert good.runs[1] == bad.runs[1]


@pytest.mark.parametrize("elements", [100, 72])
def test_unaligned_vectors_are_refused_with_the_sizes_that_work(elements):
    with pytest.raises(ConfigError, match=rf"--elements {elements}: .*multiple of 16"):
        plan_board(parse_topology("ring:4"), ["multitree"], elements, dtype="int32")


def test_flit_alignment_check_accepts_exact_layouts():
    plan = plan_board(parse_topology("mesh:2x2"), ["multitree", "ring"], 128, dtype="int32")
    for run in plan.runs:
        check_flit_aligned(run.lowered)


def test_uart_divisor():
    assert uart_divisor(25e6, 115200) == 217
    with pytest.raises(ValueError, match="at least 2"):
        uart_divisor(100e3, 115200)
    with pytest.raises(ValueError, match="off"):
        uart_divisor(300e3, 115200)


@pytest.mark.parametrize("divisor", [2, 5])
def test_uart_transmitter_sends_8n1_frames(divisor):
    data = [0x55, 0x00, 0xFF, 0x0A, 0xA3]
    dut = UARTTransmitter(divisor)
    seen = []

    async def bench(ctx):
        for byte in data:
            ctx.set(dut.data.payload, byte)
            ctx.set(dut.data.valid, 1)
            await ctx.tick().until(dut.data.ready)
            ctx.set(dut.data.valid, 0)
        for _ in range(12 * divisor):
            await ctx.tick()

    async def probe(ctx):
        async for _, _, tx in ctx.tick().sample(dut.tx):
            seen.append(tx)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_process(probe)
    sim.run()
    # decode: find each start bit, sample mid-bit
    got, i = [], 0
    while i < len(seen):
        if seen[i] == 0:
            bits = [seen[i + divisor // 2 + divisor * (b + 1)] for b in range(9)]
            assert bits[8] == 1, "stop bit"
            got.append(sum(bit << b for b, bit in enumerate(bits[:8])))
            i += divisor * 10 - 1
        i += 1
    assert got == data


def test_report_lines_round_trip():
    text = report_line("multitree", 106, 0, 0) + report_line("ring", 0x1234abcd, 3, 1) \
        + final_line(False)
    p, = parse_report(text)
    assert p.runs == [{"algorithm": "multitree", "cycles": 106, "errors": 0, "status": "PASS"},
                      {"algorithm": "ring", "cycles": 0x1234abcd, "errors": 3,
                       "status": "FAIL"}]
    assert not p.passed
    with pytest.raises(ValueError, match="unexpected UART line"):
        parse_report("garbage\r\n")


@pytest.mark.parametrize("argv, message", [
    (["--board", "nope"], "invalid choice: 'nope'"),
    (["--elements", "100"], "multiple of 16"),
    (["--topology", "fattree:4x2"], "joined by links only"),
    (["--algorithm", "ring,ring"], "distinct algorithm names"),
    (["--algorithm", "nosuch"], "nosuch"),
])
def test_board_cli_rejects_bad_input_with_one_line(argv, message, capsys, tmp_path):
    try:
        code = cli.main(["board", "--out", str(tmp_path / "o"), *argv])
    except SystemExit as exc:       # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]


def test_every_board_is_an_ecp5_platform_with_a_uart():
    for name, board in BOARDS.items():
        platform = board.make_platform()
        assert platform.family == "ecp5", name
        assert any(r.name == "uart" for r in platform.resources.values()), name


# -- in simulation ------------------------------------------------------------------------------

def _sim(tmp_path, sim, dtype, fault=None, extra=()):
    code = cli.main(["board", "--simulate", sim, "--dtype", dtype, "--out", str(tmp_path),
                     *(["--fault", fault] if fault else []), *extra])
    return code, json.loads((tmp_path / "report.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("sim, dtype", [("verilator", "int32"), ("icarus", "float32"),
                                        ("verilator", "bfloat16")])
def test_selftest_passes_in_simulation_with_the_nis_cycles(sim, dtype, tmp_path):
    from hdl.config import rotation_slack
    from tb.runner import HardwareBuild, RunSpec
    code, report = _sim(tmp_path, sim, dtype)
    s = report["simulation"]
    assert code == 0 and s["passed"]
    assert [r["status"] for r in s["runs"]] == ["PASS", "PASS"]
    # the cycles the UART reports are the network's, as the ordinary testbench measures them
    plan = plan_board(parse_topology("ring:4"), ["multitree", "ring"], 256, dtype=dtype)
    vec = gst.selftest_vectors(4, plan.config.elems_per_flit, 256 // plan.config.elems_per_flit,
                               dtype)
    build = HardwareBuild(plan.hardware_topology, plan.config, "verilator")
    results = build.run([RunSpec(r.name, r.lowered, vec, r.expected_cycles) for r in plan.runs])
    for line, res, planned in zip(s["runs"], results, plan.runs):
        assert res.ok and line["cycles"] == res.cycles
        # the timing model leaves out the buffer's bank rotation and the arrival counters'
        # loads; the RTL lies between it and that much more (as in every hardware test)
        assert line["model_cycles"] == planned.expected_cycles <= res.cycles
        assert res.cycles <= planned.expected_cycles + rotation_slack(plan.config, planned.lowered)
        assert np.array_equal(res.outputs, execute(planned.schedule, vec, dtype))


@pytest.mark.slow
@pytest.mark.parametrize("sim, dtype, fault, status", [
    ("verilator", "int32", "adder-bit", "FAIL"), ("icarus", "float32", "adder-bit", "FAIL"),
    ("icarus", "int32", "table-op", "NERR")])
def test_selftest_fails_with_a_planted_fault(sim, dtype, fault, status, tmp_path, capsys):
    code, report = _sim(tmp_path, sim, dtype, fault)
    s = report["simulation"]
    assert code == 1 and not s["passed"] and s["runs"][0]["status"] == status
    if status == "FAIL":
        # int32: every flit of every node is wrong; floats: every node's checksum
        nodes, flits = 4, 256 // 4
        assert s["runs"][0]["errors"] == (nodes * flits if dtype == "int32" else nodes)
    assert "self-test failed" in capsys.readouterr().err


@pytest.mark.slow
def test_selftest_reruns_on_the_button(tmp_path):
    from tb.selftest import SelfTestBuild
    plan = plan_board(parse_topology("mesh:2x2"), ["ring", "multitree"], 128, dtype="int32")
    build = SelfTestBuild(plan, selftest_program(plan, uart_divisor=3), "verilator")
    first, second = build.run(passes=2)
    assert first.passed and second.passed and first.runs == second.runs


# -- the bitstream ----------------------------------------------------------------------------

@pytest.mark.slow
def test_ulx3s_bitstream_meets_timing(tmp_path, capsys):
    code = cli.main(["board", "--board", "ulx3s-85f", "--json", "--out", str(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    b = report["build"]
    assert code == 0 and b["timing_met"] and b["fmax_mhz"] >= b["clock_mhz"] == 25
    bit = (tmp_path / b["bitstream"]).read_bytes()
    assert len(bit) > 100_000 and (tmp_path / b["svf"]).exists()
    util = b["utilisation"]
    assert 0 < util["TRELLIS_COMB"]["used"] <= util["TRELLIS_COMB"]["available"]
    # every memory in LUT RAM (SYNTH_OPTS), none in block RAM
    assert util["TRELLIS_RAMW"]["used"] > 0 and util["DP16KD"]["used"] == 0
    assert report == json.loads((tmp_path / "report.json").read_text())



@pytest.mark.slow
def test_a_design_too_big_for_the_part_is_refused_before_place_and_route(tmp_path, capsys):
    code = cli.main(["board", "--board", "ulx3s-25f", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "does not fit ecp5-25f" in err[0] and "before place and route" in err[0]
    assert not list(tmp_path.glob("*.bit"))


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_lint_selftest_system(tmp_path, dtype):
    """The board's design below its pins passes verilator --lint-only -Wall (default waivers)."""
    from hdl.selftest import selftest_system
    from hdl.generate import to_verilog
    from tb.toolchain import lint_verilog
    plan = plan_board(parse_topology("ring:4"), ["multitree", "ring"], 64, dtype=dtype)
    path = tmp_path / "selftest_system.v"
    to_verilog(selftest_system(plan.topology, plan.config,
                               selftest_program(plan, uart_divisor=217)), path,
               name="selftest_system")
    lint_verilog(path, "selftest_system")


def test_the_bitstreams_hardware_carries_the_planted_adder_fault():
    """A stuck adder bit changes the board's build plan (its cache key) and its Verilog: the
    fault is in the hardware elaborated for the bitstream, not only in the simulated one."""
    from allreduce_rtl.board import prepare_build
    plan = plan_board(parse_topology("ring:4"), ["ring"], 64, dtype="int32")
    _, good_plan, good_v = prepare_build("ulx3s-85f", plan)
    _, bad_plan, bad_v = prepare_build("ulx3s-85f", plan, fault="adder-bit")
    _, again_plan, _ = prepare_build("ulx3s-85f", plan)
    assert good_plan.digest() == again_plan.digest()
    assert good_plan.digest() != bad_plan.digest() and good_v != bad_v


@pytest.mark.parametrize("f_in, f_out", [(100e6, 25e6), (12e6, 24e6), (30e6, 20e6),
                                         (48e6, 24e6), (25e6, 40e6)])
def test_ecp5_pll_makes_the_frequency_exactly_within_the_data_sheets_ranges(f_in, f_out):
    from fractions import Fraction
    from hdl.board import PLL_PFD, PLL_VCO, ecp5_pll
    pll = ecp5_pll(f_in, f_out)
    assert Fraction(f_in) * pll.clkfb_div / pll.clki_div == Fraction(f_out)
    assert PLL_VCO[0] <= pll.f_vco_hz <= PLL_VCO[1]
    assert PLL_PFD[0] <= f_in / pll.clki_div <= PLL_PFD[1]


@pytest.mark.parametrize("f_in, f_out", [
    (100e6, 33.333e6),      # 33,333 / 100,000: dividers above 128
    (12e6, 25e6),           # 25 / 12: the phase detector at 1 MHz at most, below 3.125
    (4e6, 25e6), (100e6, 2e6)])     # f_IN, f_OUT below their ranges
def test_ecp5_pll_refuses_what_no_setting_makes(f_in, f_out):
    from hdl.board import ecp5_pll
    with pytest.raises(ValueError, match="no ECP5 PLL setting"):
        ecp5_pll(f_in, f_out)


def test_a_board_faster_than_the_network_gets_a_pll_and_the_uart_the_networks_clock():
    from allreduce_rtl.board import NETWORK_CLOCK_HZ, board_top
    from hdl.uart import uart_divisor
    plan = plan_board(parse_topology("ring:4"), ["ring"], 64, dtype="int32")
    for name in BOARDS:
        platform, top = board_top(name, plan)
        board_hz = platform.lookup(platform.default_clk).clock.frequency
        assert (top.pll is None) == (board_hz <= NETWORK_CLOCK_HZ), name
        network_hz = top.pll.f_out_hz if top.pll else board_hz
        assert network_hz == min(board_hz, NETWORK_CLOCK_HZ)
        assert top.system.selftest.program.uart_divisor == uart_divisor(network_hz, 115_200)
