"""The demo's speed targets: ``allreduce-rtl demo`` cold and cached, and Verilator's
simulation speed.

Runs the demo as a user does (``allreduce-rtl demo --json``, a subprocess, wall time measured
around it) twice with one new, empty build cache: the first run generates the Verilog and builds
the simulator (cold), the second reuses both (cached); ``--cold-only`` skips the second. The
targets (issue 11) on the project's 2-core machine: for the main job (the default topology,
section 3) cold at most 90 s and cached at most 30 s; for any other topology (the 64-node
networks, section 4) cold at most 10 minutes. Also printed: the all-reduce's simulation speed
per run (cycles of the run / wall seconds of the run, its backdoor load and dump included).
Prints a table; ``--json`` prints the rows.

Usage: ``.venv/bin/python scripts/bench_demo.py [--topology torus:4x4] [--elements N]
[--cold-only] [--json]`` (about 2 minutes for the default).
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
MAIN_JOB = "torus:4x4"
#: Wall-time targets in seconds: the main job's, and every other topology's (cold only).
TARGETS_S = {MAIN_JOB: {"cold": 90.0, "cached": 30.0}, "other": {"cold": 600.0}}


def run_demo(args, cache, out):
    """One ``allreduce-rtl demo --json`` in a subprocess: (wall seconds, report)."""
    cmd = [sys.executable, "-m", "allreduce_rtl.cli", "demo", "--json", "--out", str(out),
           "--topology", args.topology]
    if args.elements:
        cmd += ["--elements", str(args.elements)]
    env = {**os.environ, "ALLREDUCE_BUILD_ROOT": str(cache)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"bench_demo: the demo failed (exit {proc.returncode}): "
                 f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
    return wall, json.loads(proc.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default=MAIN_JOB)
    ap.add_argument("--elements", type=int, default=None,
                    help="elements per node (default: the demo's own)")
    ap.add_argument("--cold-only", action="store_true", help="skip the cached run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    targets = TARGETS_S.get(args.topology, TARGETS_S["other"])
    labels = ["cold"] if args.cold_only else ["cold", "cached"]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-demo-"))
    rows = []
    try:
        for label in labels:
            wall, report = run_demo(args, tmp / "cache", tmp / "out")
            s = report["seconds"]
            rows.append({
                "run": label, "wall_s": round(wall, 1), "target_s": targets.get(label),
                "met": wall <= targets[label] if label in targets else None,
                "verilog_s": s["verilog"],
                "build_s": s["build"], "simulation_s": s["simulation"],
                "elements": report["elements"], "verified": report["verified"],
                "cycles_per_s": {r["algorithm"]: round(r["rtl_cycles"] / r["sim_wall_s"])
                                 for r in report["results"] if r["sim_wall_s"]},
            })
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"allreduce-rtl demo --topology {args.topology}"
          + (f" --elements {args.elements}" if args.elements else "")
          + f" ({rows[0]['elements']:,} elements per node), empty build cache"
          + ("" if args.cold_only else ", then cached"))
    print(f"{'run':<7} {'wall s':>7} {'target':>7} {'met':>4} {'Verilog':>8} {'build':>6} "
          f"{'sim':>6}  cycles/s per run")
    for r in rows:
        speeds = ", ".join(f"{k} {v:,}" for k, v in r["cycles_per_s"].items())
        target = "-" if r["target_s"] is None else f"{r['target_s']:.0f}"
        met = {True: "yes", False: "NO", None: "-"}[r["met"]]
        print(f"{r['run']:<7} {r['wall_s']:>7.1f} {target:>7} "
              f"{met:>4} {r['verilog_s']:>8.1f} {r['build_s']:>6.1f} "
              f"{r['simulation_s']:>6.1f}  {speeds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
