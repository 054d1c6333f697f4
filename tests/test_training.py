"""Accelerator compute model, gradient buckets, the overlapped iteration, ``allreduce-rtl train``.

Expected values are worked out by hand from the formulas the docstrings state (and cite), or
recomputed here from the timing model directly, without the training module's cache or timeline.
"""

import json
import sys

import pytest

from allreduce_rtl.cli import main
from golden_model.accelerator import Accelerator
from golden_model.algorithms import ALGORITHMS, build_schedule
from golden_model.errors import ConfigError
from golden_model.timing import TimingParams, simulate
from golden_model.topology import parse_topology
from golden_model.training import (TrainingOptions, allreduce_cycles, allreduce_timeline,
                                   make_buckets, train)
from golden_model.workloads import Model, get_model
from golden_model.workloads.layers import FeatureMap, Layer, batchnorm, linear

FILL = 2 * 32 + 32 - 2          # fill and drain of a 32x32 output-stationary array


# --- accelerator ---------------------------------------------------------------------------------

def test_peak_is_the_papers_accelerator():
    acc = Accelerator()
    assert acc.peak_flops_per_cycle == 16 * 32 * 32 * 2 == 32768


@pytest.mark.parametrize("m,k,n,cycles", [
    (32, 10, 32, 1 * 1 * 10 + FILL),
    (33, 10, 32, 2 * 1 * 10 + FILL),        # one extra row costs a whole fold
    (32, 10, 65, 1 * 3 * 10 + FILL),
    (1, 1, 1, 1 + FILL),
])
def test_gemm_cycles(m, k, n, cycles):
    assert Accelerator().gemm_cycles(m, k, n) == cycles


def test_utilisation_is_tile_utilisation_for_long_products():
    acc = Accelerator()
    assert acc.utilisation(64, 10**7, 64) == pytest.approx(1.0, abs=1e-5)
    # 48 rows use 48 of the 64 row slots of two folds: 75%.
    assert acc.utilisation(48, 10**7, 32) == pytest.approx(0.75, abs=1e-5)


def test_layer_cycles_forward_and_backward():
    acc = Accelerator()
    fc = linear("fc", 100, 64)            # 16 samples stack into a 16 x 100 by 100 x 64 product
    fwd = 1 * 2 * 100 + FILL              # ceil(16/32) * ceil(64/32) * 100
    dw = 4 * 2 * 16 + FILL                # X^T dY: 100 x 16 by 16 x 64
    dx = 1 * 4 * 64 + FILL                # dY W^T: 16 x 64 by 64 x 100
    assert acc.layer_cycles(fc, 16) == (fwd, dw + dx)
    assert acc.layer_cycles(fc, 16, first=True) == (fwd, dw)
    bn = batchnorm("bn", FeatureMap(64, 56, 56))
    vec = 16 * 64 * 56 * 56 // 32
    assert acc.layer_cycles(bn, 16) == (vec, 2 * vec)


def test_attention_products_do_not_stack_samples():
    acc = Accelerator()
    core = get_model("transformer").layers[2]
    assert core.kind == "attention"
    # per sample and head: 128 x 64 by 64 x 128 scores, then 128 x 128 by 128 x 64
    scores, values = 4 * 4 * 64, 4 * 2 * 128
    vec = -(-2 * 8 * 128 * 128 // 32)
    fwd, _ = acc.layer_cycles(core, 2)
    assert fwd == 2 * 8 * scores + FILL + 2 * 8 * values + FILL + vec


def test_mini_batch_splits_over_vaults():
    acc = Accelerator()
    model = get_model("resnet50")
    assert acc.layer_times(model, 17).samples_per_vault == 2
    one = acc.layer_times(model, 16)
    assert acc.layer_times(model, 1).forward.sum() == one.forward.sum()   # 15 vaults idle
    seconds = sum(acc.layer_cycles(x, 1)[0] for x in model.layers) / 1e9
    assert one.forward.sum() == pytest.approx(seconds)


@pytest.mark.parametrize("bad", [0, -1, 2**21, 3.5, True, "8"])
def test_bad_mini_batch(bad):
    with pytest.raises(ConfigError, match="mini-batch"):
        Accelerator().layer_times(get_model("ncf"), bad)


@pytest.mark.parametrize("kwargs", [{"vaults": 0}, {"rows": 2.5}, {"frequency_ghz": 0},
                                    {"frequency_ghz": float("nan")}])
def test_bad_accelerator(kwargs):
    with pytest.raises(ConfigError):
        Accelerator(**kwargs)


# --- buckets and the timeline ---------------------------------------------------------------------

def toy_model(params):
    layers = tuple(Layer(f"l{i}", "fc", p) for i, p in enumerate(params))
    return Model("toy", "toy", layers, "x", 16, "test")


def test_buckets_close_at_the_cap_walking_backwards():
    # cap 25 elements: from the end, 5 + 30 = 35 closes; then 20 (+ nothing) + 10 = 30 closes.
    buckets = make_buckets(toy_model([10, 0, 20, 30, 5]), bucket_bytes=25 * 4)
    assert [(b.elements, b.layers) for b in buckets] == [(35, (4, 3)), (30, (2, 0))]
    assert [b.ready_layer for b in buckets] == [3, 0]
    rest = make_buckets(toy_model([1, 2, 30]), bucket_bytes=25 * 4)
    assert [(b.elements, b.layers) for b in rest] == [(30, (2,)), (3, (1, 0))]


@pytest.mark.parametrize("name", ["resnet50", "transformer", "vgg16"])
def test_buckets_of_real_models(name):
    model = get_model(name)
    cap = 25 << 20
    buckets = make_buckets(model, cap)
    assert sum(b.elements for b in buckets) == model.params
    for b in buckets[:-1]:
        assert b.elements * 4 >= cap
        # never split a layer: without its last layer the bucket was still under the cap
        assert (b.elements - model.layers[b.ready_layer].params) * 4 < cap
    assert make_buckets(model, 2**40)[0].elements == model.params


@pytest.mark.parametrize("bad", [0, 3, -4, 2.0, None])
def test_bad_bucket_size(bad):
    with pytest.raises(ConfigError, match="bucket size"):
        make_buckets(get_model("ncf"), bad)


def test_timeline_one_allreduce_at_a_time():
    starts, ends = allreduce_timeline([1.0, 2.0, 10.0], [3.0, 1.0, 2.0])
    assert starts.tolist() == [1.0, 4.0, 10.0]
    assert ends.tolist() == [4.0, 5.0, 12.0]


# --- all-reduce time and the iteration ------------------------------------------------------------

def test_allreduce_cycles_are_the_timing_models_and_cached():
    topo = parse_topology("torus:4x4")
    expected = simulate(build_schedule("multitree", topo, 12345)).cycles
    assert allreduce_cycles("multitree", topo, 12345) == expected
    from golden_model import training
    hits = training._cached_cycles.cache_info().hits
    again = parse_topology("torus:4x4")          # a new object with the same spec and links
    assert allreduce_cycles("multitree", again, 12345) == expected
    assert training._cached_cycles.cache_info().hits == hits + 1


def test_links_that_differ_are_not_cached_by_spec():
    topo = parse_topology("torus:4x4")
    topo.graph.edges[0, 1]["bandwidth"] = 1.0
    slow = simulate(build_schedule("ring", topo, 100000)).cycles
    assert allreduce_cycles("ring", topo, 100000) == slow
    assert slow > allreduce_cycles("ring", parse_topology("torus:4x4"), 100000)


def independent_iteration(model, topo, algorithm, mini_batch, bucket_bytes, overlap=True):
    """The iteration of the training module's docstring, recomputed from its parts: layer times,
    buckets, and one all-reduce at a time straight from the timing model."""
    times = Accelerator().layer_times(model, mini_batch)
    fwd, bwd = sum(times.forward), sum(times.backward)
    clock, free = 0.0, 0.0
    done = {}
    for i in reversed(range(len(model.layers))):
        clock += times.backward[i]
        done[i] = fwd + clock
    for b in make_buckets(model, bucket_bytes):
        ready = done[b.ready_layer] if overlap else fwd + bwd
        cycles = simulate(build_schedule(algorithm, topo, b.elements)).cycles
        free = max(free, ready) + cycles / 1e9
    return (max(fwd + bwd, free)) * 1e3, (fwd + bwd) * 1e3


@pytest.mark.parametrize("name,spec,batch", [("resnet50", "torus:4x4", 16),
                                             ("alexnet", "mesh:4x4", 64)])
def test_iteration_matches_independent_computation(name, spec, batch):
    model, topo = get_model(name), parse_topology(spec)
    report = train(model, topo, ["ring", "multitree"],
                   TrainingOptions(mini_batch=batch, bucket_bytes=8 << 20))
    by = {r["algorithm"]: r for r in report["results"]}
    for alg in ("ring", "multitree"):
        iteration, compute = independent_iteration(model, topo, alg, batch, 8 << 20)
        assert by[alg]["iteration_ms"] == pytest.approx(iteration, rel=1e-12)
        assert by[alg]["compute_ms"] == pytest.approx(compute, rel=1e-12)
        assert by[alg]["exposed_comm_ms"] == pytest.approx(iteration - compute, abs=1e-9)
        assert by[alg]["comm_share"] == pytest.approx((iteration - compute) / iteration)
    assert by["multitree"]["reduction_vs_ring"] == pytest.approx(
        1 - by["multitree"]["iteration_ms"] / by["ring"]["iteration_ms"])
    assert by["ring"]["reduction_vs_ring"] == 0


def test_no_overlap_adds_every_allreduce_after_the_backward_pass():
    model, topo = get_model("resnet50"), parse_topology("torus:4x4")
    report = train(model, topo, ["ring"], TrainingOptions(mini_batch=32, overlap=False))
    (ring,) = report["results"]
    total = sum(simulate(build_schedule("ring", topo, b["elements"])).cycles
                for b in report["buckets"]) / 1e9 * 1e3
    assert ring["comm_ms"] == pytest.approx(total)
    assert ring["iteration_ms"] == pytest.approx(report["compute_ms"] + total)
    # one bucket holding every gradient can only start after the backward pass: the same
    one = train(model, topo, ["ring"], TrainingOptions(mini_batch=32, bucket_bytes=1 << 30))
    cycles = simulate(build_schedule("ring", topo, model.params)).cycles
    assert one["results"][0]["iteration_ms"] == pytest.approx(one["compute_ms"] + cycles / 1e6)


def test_overlap_hides_communication():
    model, topo = get_model("transformer"), parse_topology("torus:4x4")
    opts = TrainingOptions(mini_batch=16)
    overlapped = train(model, topo, ["ring"], opts)["results"][0]
    serial = train(model, topo, ["ring"], TrainingOptions(mini_batch=16, overlap=False))
    assert overlapped["compute_ms"] <= overlapped["iteration_ms"] < serial["results"][0][
        "iteration_ms"]


def test_buckets_report_their_layers_and_ready_times():
    model = get_model("resnet50")
    report = train(model, parse_topology("torus:4x4"), ["ring"])
    first = report["buckets"][0]
    assert first["first_layer"] == "fc"
    assert report["buckets"][-1]["last_layer"] == "conv1"
    # the last bucket is complete only when conv1's backward step ends: the end of backward
    assert report["buckets"][-1]["ready_ms"] == pytest.approx(report["compute_ms"])
    ready = [b["ready_ms"] for b in report["buckets"]]
    assert ready == sorted(ready) and ready[0] > report["forward_ms"]


def test_skips_and_explicit_algorithms():
    topo = parse_topology("fattree:2x3")
    seen = []
    report = train(get_model("ncf"), topo, None, on_skip=lambda n, r: seen.append(n))
    assert [s["algorithm"] for s in report["skipped"]] == ["ring2d"] == seen
    with pytest.raises(ConfigError, match="ring2d"):
        train(get_model("ncf"), topo, ["ring2d"])
    with pytest.raises(ConfigError, match="bogus"):
        train(get_model("ncf"), topo, ["bogus"])


# --- the command line ----------------------------------------------------------------------------

def test_train_resnet50_torus_8x8(capsys):
    """The issue's done-when: multitree below ring, with the reduction stated."""
    assert main(["train", "--model", "resnet50", "--topology", "torus:8x8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "resnet50" and report["nodes"] == 64
    assert report["parameters"] == 25_557_032 and report["mini_batch"] == 256
    by = {r["algorithm"]: r for r in report["results"]}
    assert set(by) == set(ALGORITHMS)       # every algorithm runs on a torus
    mt, ring = by["multitree"], by["ring"]
    assert mt["iteration_ms"] < ring["iteration_ms"]
    assert mt["reduction_vs_ring"] == pytest.approx(1 - mt["iteration_ms"] / ring["iteration_ms"])
    assert mt["reduction_vs_ring"] > 0
    assert mt["comm_speedup_vs_ring"] == pytest.approx(ring["comm_ms"] / mt["comm_ms"])
    # the figures are the golden model's
    direct = train(get_model("resnet50"), parse_topology("torus:8x8"))
    assert report["results"] == json.loads(json.dumps(direct["results"]))


def test_train_table_and_options(capsys):
    assert main(["train", "-m", "ncf", "-t", "torus:4x4", "-a", "ring,multitree", "-b", "32",
                 "--bucket-size", "1MiB", "--no-overlap", "--link-latency", "20"]) == 0
    out = capsys.readouterr().out
    assert "mini-batch 32 per node (2 per vault)" in out and "no overlap" in out
    assert "reduction vs ring" in out and "% less training time" in out
    topo = parse_topology("torus:4x4", link_latency=20)
    buckets = make_buckets(get_model("ncf"), 1 << 20)
    assert len(buckets) == 2
    cycles = sum(simulate(build_schedule("multitree", topo, b.elements)).cycles for b in buckets)
    row = next(line for line in out.splitlines() if line.startswith("multitree "))
    assert f"{cycles / 1e6:.3f}" in row.split()


@pytest.mark.parametrize("argv,needle", [
    (["train", "--model", "lenet"], "lenet"),
    (["train", "--model", "resnet50", "--mini-batch", "0"], "'0'"),
    (["train", "--model", "resnet50", "--mini-batch", "4096000"], "4096000"),
    (["train", "--model", "resnet50", "--mini-batch", "many"], "many"),
    (["train", "--model", "resnet50", "-a", "ring,bogus"], "bogus"),
    (["train", "--model", "resnet50", "--bucket-size", "2"], "bucket size"),
    (["train", "--model", "resnet50", "-t", "torus:4"], "torus:4"),
    (["train", "--model", "ncf", "-t", "fattree:2x3", "-a", "ring2d"], "ring2d"),
    (["train"], "--model"),
])
def test_train_bad_input(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        sys.exit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert "Traceback" not in err


def test_timing_params_reach_the_allreduce():
    topo = parse_topology("torus:4x4")
    params = TimingParams(flit_bytes=32)
    report = train(get_model("ncf"), topo, ["ring"], TrainingOptions(timing=params))
    cycles = simulate(build_schedule("ring", topo, 392_601), params).cycles
    assert report["results"][0]["comm_ms"] == pytest.approx(cycles / 1e6)
