"""The buffer backdoor (``tb.harness.Backdoor``): vectors loaded into and read out of the NI
buffer banks directly give the same result, bit for bit, and the same all-reduce cycles as the
host port, in both simulators; its file formats are the ones the simulators' ``$fread`` and
``$fwrite("%u")`` use."""

import re
import types

import numpy as np
import pytest

from golden_model.elements import INT32
from golden_model.lowering import lower
from golden_model.topology import parse_topology
from golden_model.algorithms import build_schedule
from golden_model.executor import execute
from hdl.banked_buffer import BANK_MODULE
from hdl.config import NIConfig, buffer_banks
from hdl.generate import buffer_arrays, build_network, to_verilog
from tb import harness
from tb.runner import HardwareBuild, RunSpec


def _vectors(n, d, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(-2**31, 2**31, size=(n, d), dtype=np.int64).astype(np.int32)


def test_load_files_put_flit_a_in_bank_a_mod_k_most_significant_byte_first(tmp_path):
    cfg = NIConfig(num_ports=2, buffer_depth=64)
    bd = harness.Backdoor.for_config(cfg, 3)
    k = buffer_banks(2)
    flits = INT32.to_bits(_vectors(19, 4, 1))          # 19 flits: banks get 5 or 4 words
    bd.write_load(tmp_path, 2, flits)
    for b in range(k):
        data = (tmp_path / f"buf_2_{b}.bin").read_bytes()
        want = b"".join(int(sum(int(x) << (32 * e) for e, x in enumerate(f)))
                        .to_bytes(16, "big") for f in flits[b::k])
        assert data == want


def test_dump_files_read_back_in_flit_order(tmp_path):
    cfg = NIConfig(num_ports=2, buffer_depth=64)
    bd = harness.Backdoor.for_config(cfg, 1)
    k, depth = bd.num_banks, bd.bank_depth
    vals = _vectors(k * depth, 4, 2)
    for b in range(k):      # what $fwrite("%u") writes: the word little-endian
        (tmp_path / f"out_0_{b}.bin").write_bytes(b"".join(
            int(sum((int(x) & 0xFFFFFFFF) << (32 * e) for e, x in enumerate(f)))
            .to_bytes(16, "little") for f in vals[b::k]))
    assert np.array_equal(bd.read_dump(tmp_path, 0, 37, 4, INT32), vals[:37])
    (tmp_path / "out_0_1.bin").write_bytes(b"\0" * 16)
    with pytest.raises(ValueError, match="out_0_1.bin: 16 bytes, expected"):
        bd.read_dump(tmp_path, 0, 37, 4, INT32)


def test_backdoor_rejects_a_flit_width_the_dump_cannot_hold():
    # 7 16-bit elements (no 16-bit type yet: a stand-in with the fields the backdoor reads)
    cfg = types.SimpleNamespace(num_ports=2, buffer_depth=16, flit_width=112)
    with pytest.raises(ValueError, match="multiple of 32 bits, not 112"):
        harness.Backdoor.for_config(cfg, 2)


@pytest.mark.parametrize("copies", [1, 2])
def test_buffer_arrays_name_the_generated_verilog_instances(copies):
    topo = parse_topology("ring:3", link_latency=2)
    cfg = NIConfig(num_ports=2, buffer_depth=32, table_depth=8, rx_buffer_depth=64,
                   buffer_copies=copies)
    text = to_verilog(build_network(topo, cfg))
    names, depth = buffer_arrays(cfg, 3)
    assert depth == 32 // buffer_banks(2, copies)
    assert {len(c) for row in names for c in row} == {copies}
    for name in {n for row in names for c in row for n in c}:
        ni, buf, bank, ram, array = name.split(".")
        assert f"network_ni {ni} (" in text
        assert f"  \\network_ni.{buf}  {buf} (" in text
        assert f"  \\network_ni.{buf}.{bank}  {bank} (" in text
        assert f") {ram} (" in text and f"reg [WIDTH-1:0] {array} [0:DEPTH-1];" in text


@pytest.mark.parametrize("copies", [1, 2])
def test_dpi_form_goes_into_the_bank_module_and_nowhere_else(tmp_path, copies):
    topo = parse_topology("ring:3", link_latency=2)
    cfg = NIConfig(num_ports=2, buffer_depth=32, table_depth=8, rx_buffer_depth=64,
                   buffer_copies=copies)
    text = to_verilog(build_network(topo, cfg))
    bd = harness.Backdoor.for_config(cfg, 3)
    out = bd.dpi_verilog(text)
    modules = re.findall(r"^module (\w+).*?^endmodule", out, flags=re.M | re.S)
    bodies = dict(zip(modules, re.findall(r"^module \w+.*?^endmodule", out, flags=re.M | re.S)))
    assert [m for m, body in bodies.items() if "allreduce_bd_serial" in body] == [BANK_MODULE]
    body = bodies[BANK_MODULE]
    inserted = body[body.index("\n  // Buffer backdoor"):body.rindex("\nendmodule")]
    assert out.replace(inserted, "", 1) == text     # only inserted, nothing else changed
    assert "allreduce_bd_copy(allreduce_bd_kind(), bd_path, WIDTH, storage);" in inserted
    with pytest.raises(ValueError, match=f"no module {BANK_MODULE}"):
        bd.dpi_verilog(text.replace(f"module {BANK_MODULE}", "module other"))
    bd.write_map(tmp_path / "map.txt")
    names, _ = buffer_arrays(cfg, 3)
    assert (tmp_path / "map.txt").read_text().splitlines() == [
        f"buf_{u}_{b}.bin out_{u}_{b}{f'_copy{g}' if g else ''}.bin "
        f"{names[u][b][g].removesuffix('.storage')}"
        for u in range(3) for b in range(buffer_banks(2, copies)) for g in range(copies)]


def test_hierarchical_blocks_are_refused_where_a_build_cannot_have_them(tmp_path):
    topo = parse_topology("torus:2x2", link_latency=3)
    cfg = NIConfig(num_ports=2, buffer_depth=64, table_depth=8, rx_buffer_depth=64)
    for kwargs in ({"sim": "icarus"}, {"sim": "verilator", "backdoor": True},
                   {"sim": "verilator", "backdoor": True, "long_runs": True, "waves": True}):
        with pytest.raises(ValueError, match="hierarchical blocks need Verilator"):
            HardwareBuild(topo, cfg, hierarchical=True, build_root=tmp_path, **kwargs)
    assert HardwareBuild(topo, cfg, "verilator", backdoor=True, long_runs=True,
                         build_root=tmp_path, hierarchical=True).backdoor_dpi


#: The builds with a backdoor: cocotb with the backdoor in tb_top (Icarus; Verilator, flat), and
#: the C++ driver with its DPI form in the banks and the NI as a hierarchical block, as the
#: 64-node demos build it; one copy of the buffer banks, or two (every copy loaded).
_BACKDOOR_BUILDS = {
    "icarus": ({"sim": "icarus"}, 1),
    "icarus-2-copies": ({"sim": "icarus"}, 2),
    "verilator": ({"sim": "verilator"}, 1),
    "verilator-driver-hierarchical": ({"sim": "verilator", "long_runs": True,
                                       "hierarchical": True}, 1),
    "verilator-driver-hierarchical-2-copies": ({"sim": "verilator", "long_runs": True,
                                                "hierarchical": True}, 2),
}


@pytest.mark.parametrize("kind", [
    *list(_BACKDOOR_BUILDS)[:2],
    *(pytest.param(k, marks=pytest.mark.slow) for k in list(_BACKDOOR_BUILDS)[2:])])
def test_backdoor_runs_equal_host_port_runs(kind, tmp_path):
    """One build, two runs of each algorithm: through the host port (with random valid/ready
    gaps) and through the backdoor; same outputs (the golden model's) and same RTL cycles."""
    topo = parse_topology("torus:2x2", link_latency=3)
    build_args, copies = _BACKDOOR_BUILDS[kind]
    cfg = NIConfig(num_ports=2, buffer_depth=64, table_depth=8, rx_buffer_depth=64,
                   buffer_copies=copies)
    d = 93                      # not a multiple of the flit: a partial last flit
    vec = _vectors(4, d, 5)
    build = HardwareBuild(topo, cfg, backdoor=True, valid_pct=60, ready_pct=60,
                          build_root=tmp_path, image_depth=harness.image_depth_for(cfg),
                          rsp_depth=cfg.buffer_depth,     # room for host-port runs too
                          **build_args)
    assert build.backdoor_dpi == (build.driver is not None)
    specs = []
    for alg in ("multitree", "ring"):
        lw = lower(build_schedule(alg, topo, d))
        specs.append(RunSpec(alg, lw, vec, None))
    host = build.run(specs, backdoor=False)
    back = build.run(specs)
    for spec, h, b in zip(specs, host, back):
        want = execute(spec.lowered.schedule, vec)
        assert h.ok and b.ok, (h.message, b.message)
        assert np.array_equal(h.outputs, want) and np.array_equal(b.outputs, want)
        assert (h.cycles, h.tb_cycles) == (b.cycles, b.tb_cycles)
        assert b.load_cycles < h.load_cycles


@pytest.mark.slow
def test_cpp_driver_runs_equal_cocotb_runs(tmp_path):
    """The C++ driver of long runs (tb/verilator_driver.cpp) and the cocotb test drive one
    design to the same outputs and the same cycles, RTL and testbench-measured."""
    topo = parse_topology("torus:2x2", link_latency=3)
    cfg = NIConfig(num_ports=2, buffer_depth=64, table_depth=8, rx_buffer_depth=64)
    d = 93
    vec = _vectors(4, d, 6)
    specs = [RunSpec(alg, lower(build_schedule(alg, topo, d)), vec, None)
             for alg in ("multitree", "ring")]
    cpp = HardwareBuild(topo, cfg, "verilator", backdoor=True, long_runs=True,
                        build_root=tmp_path)
    vpi = HardwareBuild(topo, cfg, "verilator", backdoor=True, build_root=tmp_path)
    assert cpp.driver is not None and vpi.driver is None
    for spec, a, b in zip(specs, cpp.run(specs), vpi.run(specs)):
        assert a.ok and b.ok, (a.message, b.message)
        assert np.array_equal(a.outputs, execute(spec.lowered.schedule, vec))
        assert np.array_equal(a.outputs, b.outputs)
        assert (a.cycles, a.tb_cycles) == (b.cycles, b.tb_cycles)
        assert a.cycles == a.tb_cycles + 1


@pytest.mark.slow
def test_cpp_driver_reports_stalls_and_errors_with_node_and_step(tmp_path):
    topo = parse_topology("torus:2x2", link_latency=3)
    cfg = NIConfig(num_ports=2, buffer_depth=64, table_depth=8, rx_buffer_depth=64)
    lw = lower(build_schedule("ring", topo, 40))
    build = HardwareBuild(topo, cfg, "verilator", backdoor=True, long_runs=True,
                          build_root=tmp_path)

    off, width = build.layout.engine

    def drop_node_1_sends(images):      # node 1 never sends: its successor waits for it
        images[1].control[:] = [w for w in images[1].control
                                if (w >> off) & ((1 << width) - 1) >= cfg.num_ports]

    def drop_node_1_receives(images):   # flits arrive at node 1 with no receive row
        images[1].control[:] = [w for w in images[1].control
                                if (w >> off) & ((1 << width) - 1) < cfg.num_ports]

    vec = _vectors(4, 40, 7)
    res, after = build.run([RunSpec("stuck", lw, vec, 50, edit_images=drop_node_1_sends),
                            RunSpec("next", lw, vec, 50)], timeout_factor=4)
    assert res.status == "stall"
    assert "deadlock or stall at step 0 on node" in res.message and "(run stuck;" in res.message
    assert after.status == "not run" and "earlier run failed" in after.message
    res, = build.run([RunSpec("bad", lw, vec, 50, edit_images=drop_node_1_receives)])
    assert res.status == "error"
    assert "network error output set" in res.message and "node(s) 1 (step" in res.message

