"""``allreduce-rtl coarse``: COARSE against MPI ring all-reduce, the asymmetry sweep, bad input.

The MPI baseline is recomputed here from ``training.train`` on a ring network built directly
(``ring:W`` at the GPU-GPU path's bandwidth, 1 us = 1000 cycles of latency); routing and
partitioning counts from the model's layer table and the rules in ``partition.py``.
"""

import json
import math
import sys

import pytest

from allreduce_rtl.cli import main
from golden_model.topology import parse_topology
from golden_model.training import TrainingOptions, train
from golden_model.workloads import get_model


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def mpi_ring_ms(model, workers, gbps):
    topo = parse_topology(f"ring:{workers}", link_bandwidth=gbps, link_latency=1000)
    return train(get_model(model), topo, ["ring"])["results"][0]["iteration_ms"]


def test_default_resnet50_coarse_is_faster(capsys):
    """The done-when figure: COARSE beats MPI ring all-reduce on the asymmetric default."""
    r = run_json(capsys, "coarse", "--model", "resnet50", "--json")
    assert r["system"] == "coarse:W=8,M=4,local=9,remote=16"
    mpi, coarse, alone = r["results"]
    assert [x["scheme"] for x in r["results"]] == ["mpi-ring", "coarse", "coarse-proxies-only"]
    assert mpi["iteration_ms"] == mpi_ring_ms("resnet50", 8, 9.0)
    assert coarse["iteration_ms"] < mpi["iteration_ms"] and r["winner"] == "coarse"
    assert r["faster"] == pytest.approx(mpi["iteration_ms"] / coarse["iteration_ms"] - 1)
    assert r["time_reduction"] == pytest.approx(1 - coarse["iteration_ms"] / mpi["iteration_ms"])
    assert r["faster"] > 0.01
    assert r["summary"].startswith(f"COARSE (m = {r['dual_sync']['m']}) is "
                                   f"{100 * r['faster']:.1f}% faster than MPI ring all-reduce")
    assert coarse["iteration_ms"] == min(c["iteration_ms"] for c in r["dual_sync"]["candidates"])
    assert alone["iteration_ms"] == r["dual_sync"]["candidates"][0]["iteration_ms"]
    # routing: every layer with parameters is one tensor; >= 2,000,000 bytes -> bandwidth
    model = get_model("resnet50")
    sizes = [x.params * 4 for x in model.layers if x.params]
    big = [s for s in sizes if s >= 2_000_000]
    routing = r["routing"]
    assert routing["bandwidth_tensors"] == len(big) and routing["bandwidth_bytes"] == sum(big)
    assert routing["latency_tensors"] + len(big) == len(sizes)
    assert routing["latency_bytes"] + sum(big) == model.params * 4 == r["gradient_bytes"]
    # partitioning: 288,000-byte shards, floor(S * 9/25) of each tensor's S over the local path
    part = r["partitioning"]
    counts = [s // 288_000 for s in big]
    assert part["shard_bytes"] == 288_000 and part["shards"] == sum(counts)
    assert part["local_shards"] == sum(math.floor(s * 9 / 25) for s in counts)
    assert part["clockwise"] - part["counter_clockwise"] in (0, 1, -1)
    dual = r["dual_sync"]
    assert dual["gpu_tensors"] + dual["proxy_tensors"] == len(sizes)
    assert dual["gpu_bytes"] == sum(x.params * 4 for x in model.layers[:dual["m"]])


def test_text_output_states_the_percentage(capsys):
    assert main(["coarse"]) == 0
    out = capsys.readouterr().out
    r = run_json(capsys, "coarse", "--json")
    mpi, coarse = r["results"][0]["iteration_ms"], r["results"][1]["iteration_ms"]
    assert (f"{coarse:.3f} ms per iteration against MPI ring all-reduce's {mpi:.3f} ms: "
            f"{100 * (mpi / coarse - 1):.1f}% faster training") in out
    for needle in ("routing (profiling pass)", "partitioning: shards of 288,000 B",
                   f"dual synchronisation: m = {r['dual_sync']['m']} of 107 layers",
                   "GPU-GPU path (9 GB/s"):
        assert needle in out


def test_asymmetry_sweep(capsys):
    r = run_json(capsys, "coarse", "--sweep-asymmetry", "1/16,1/2,16/9,4", "--json")
    rows = r["sweep"]
    assert [x["ratio"] for x in rows] == [1 / 16, 1 / 2, 16 / 9, 4.0]
    assert [x["remote_GBps"] for x in rows] == pytest.approx([9 / 16, 4.5, 16.0, 36.0])
    mpi = mpi_ring_ms("resnet50", 8, 9.0)                  # the ring does not use remote paths
    assert all(x["mpi_ms"] == mpi for x in rows)
    assert all(x["coarse_ms"] <= mpi for x in rows)       # dual sync can fall back to the ring
    slow, cloud = rows[0], rows[2]
    assert slow["proxies_only_ms"] > mpi and slow["proxies_only_winner"] == "mpi-ring"
    assert slow["m"] > cloud["m"]                          # layers move back to the GPU ring
    assert cloud["coarse_ms"] == r["results"][1]["iteration_ms"]
    assert main(["coarse", "--sweep-asymmetry"]) == 0
    out = capsys.readouterr().out
    assert "asymmetry sweep" in out and "COARSE wins at" in out


def test_options_reach_the_model(capsys):
    r = run_json(capsys, "coarse", "--model", "ncf", "--system", "coarse:W=8,M=2,local=5",
                 "--workers", "4", "--remote-bandwidth", "6", "--gpu-bandwidth", "20",
                 "--threshold", "1KiB", "--mini-batch", "32", "--json")
    cfg = r["config"]
    assert (cfg["workers"], cfg["devices"], cfg["local_GBps"], cfg["remote_GBps"],
            cfg["gpu_GBps"], cfg["ring_GBps"]) == (4, 2, 5.0, 6.0, 20.0, 6.0)
    assert r["routing"]["threshold_bytes"] == 1024 and r["mini_batch"] == 32
    topo = parse_topology("ring:4", link_bandwidth=20.0, link_latency=1000)
    want = train(get_model("ncf"), topo, ["ring"], TrainingOptions(mini_batch=32))
    assert r["results"][0]["iteration_ms"] == want["results"][0]["iteration_ms"]


@pytest.mark.parametrize("argv,needle", [
    (["--devices", "3"], "must divide"),
    (["--workers", "0"], "'0'"),
    (["--model", "lenet"], "lenet"),
    (["--system", "torus:4x4"], "torus:4x4"),
    (["--system", "coarse:W=8,Q=1"], "Q=1"),
    (["--sweep-asymmetry", "0"], "'0'"),
    (["--sweep-asymmetry", "1/0"], "1/0"),
    (["--remote-bandwidth", "-1"], "-1"),
    (["--threshold", "0"], "'0'"),
])
def test_bad_input(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        sys.exit(main(["coarse", *argv]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert "Traceback" not in err
