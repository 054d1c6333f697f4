"""Benchmark of ``allreduce-rtl explore``: the engine's speed-up and the RTL builds it shares.

1. A model-only exploration of 216 points (multitree-opt, which times its candidates, on the
   8x8 mesh and torus, 12 sizes, 9 link latencies: about 0.3 to 1.5 s each) on a local Dask
   cluster of 1 and of 2 workers; the time counts from the first task submitted to the last
   result written, the cluster's start-up excluded. Target: at least 1.7x on 2 cores.
2. The shipped ``hardware-pareto`` example (8 RTL and cost points on four hardware
   configurations) on 2 workers with an empty build cache: how many builds, and the wall time.

Usage: .venv/bin/python scripts/bench_explore.py [--skip-rtl]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from allreduce_rtl.explore import engine
from allreduce_rtl.explore.evaluate import evaluate
from allreduce_rtl.explore.spec import parse_spec, queued
from allreduce_rtl.explore.store import Store

MODEL_SPEC = """
title = "benchmark"
evaluations = ["model"]
[parameters]
topology = ["mesh:8x8", "torus:8x8"]
algorithm = "multitree-opt"
size = "32KiB:64MiB"
link_latency = [25, 50, 100, 150, 200, 300, 400, 500, 600]
"""


def model_run(points, workers, folder):
    """Seconds from the first submission to the last point written, and every point's own
    evaluation seconds."""
    seconds = []
    with engine.cluster(workers) as client, Store(Path(folder) / f"w{workers}.sqlite") as store:
        client.submit(int, 0).result()        # the workers are up
        t0 = time.perf_counter()
        for o in engine.outcomes(client, evaluate, points,
                                 priorities=[-i for i in range(len(points))]):
            assert o.error is None and o.value["error"] is None, (o.error, o.value)
            p = points[o.index]
            store.put(p.key, p.params, o.value["figures"], None, o.value["provenance"])
            seconds.append(o.value["provenance"]["seconds"])
        return time.perf_counter() - t0, seconds


def rtl_run():
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "allreduce_rtl.cli", "explore",
                               "examples/hardware-pareto.toml", "--out", f"{tmp}/out",
                               "--workers", "2", "--build-dir", f"{tmp}/build", "--json"],
                              capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        result = json.loads(done.stdout)
        with Store(Path(tmp) / "out" / "results.sqlite") as store:
            rows = store.rows()
    builds = {r["provenance"]["build_key"] for r in rows}
    built = sum(1 for r in rows if r["figures"]["rtl_build_s"] > 1.0)
    return result, wall, len(builds), built, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-rtl", action="store_true")
    args = ap.parse_args()
    points = queued(parse_spec(MODEL_SPEC).points)
    with tempfile.TemporaryDirectory() as tmp:
        one, secs = model_run(points, 1, tmp)
        two, _ = model_run(points, 2, tmp)
    print(f"model exploration: {len(points)} points, each {min(secs):.2f} s to "
          f"{max(secs):.2f} s (median {statistics.median(secs):.2f} s, sum {sum(secs):.0f} s)")
    print("| workers | wall time (s) | speed-up |")
    print("|---|---|---|")
    print(f"| 1 | {one:.1f} | 1.00x |")
    print(f"| 2 | {two:.1f} | {one / two:.2f}x |")
    if not args.skip_rtl:
        result, wall, builds, built, rows = rtl_run()
        ok = sum(1 for r in rows if r["figures"].get("rtl_verified"))
        print(f"RTL exploration (examples/hardware-pareto.toml, 2 workers, empty build cache): "
              f"{result['points']} points, {ok} bit for bit, {builds} hardware builds "
              f"({built} points spent over a second on their build), wall {wall:.0f} s "
              f"including the cluster's start-up")


if __name__ == "__main__":
    main()
