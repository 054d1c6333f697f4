"""Wall time of ``allreduce-rtl coarse --rtl`` (the issue's target: at most two minutes on the
project's 2-core machine), cold (an empty build folder: Verilog, simulator build and run) and
warm (the build cached), in each simulator; prints a table (``--json``: the rows) with each
run's RTL and model cycles and its verdict.

Usage: ``.venv/bin/python scripts/bench_coarse_rtl.py [--simulators verilator,icarus]
[--json] [-- extra coarse options]`` (about 4 minutes).
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "allreduce_rtl.cli"]


def run(sim, build_dir, out, extra):
    cmd = [*CLI, "coarse", "--rtl", "--simulator", sim, "--build-dir", str(build_dir),
           "--out", str(out), "--json", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    report = json.loads(proc.stdout)
    row = report["schemes"][-1]
    return {"simulator": sim, "seconds": round(seconds, 1), "rtl_cycles": row["rtl_cycles"],
            "model_cycles": row["model_cycles"], "verified": report["verified"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulators", default="verilator,icarus")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("extra", nargs="*", help="more coarse options (after --)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for sim in args.simulators.split(","):
            build_dir = pathlib.Path(tmp) / f"build-{sim}"
            for kind in ("cold", "warm"):
                rows.append({"run": kind, **run(sim, build_dir, pathlib.Path(tmp) / "out",
                                                args.extra)})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'simulator':10} {'run':5} {'seconds':>8} {'RTL cycles':>11} {'model':>7} verified")
    for r in rows:
        print(f"{r['simulator']:10} {r['run']:5} {r['seconds']:8.1f} {r['rtl_cycles']:11,} "
              f"{r['model_cycles']:7,} {r['verified']}")


if __name__ == "__main__":
    main()
