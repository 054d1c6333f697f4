#!/usr/bin/env python3
"""Benchmark the golden model against the speed targets of the golden-model issue.

1. ``allreduce-rtl compare --topology torus:8x8 --size 64MiB`` (all six algorithms), target < 10 s,
   timed as a whole process (interpreter start-up and imports included).
2. ``multitree`` on torus:16x16: tree construction + schedule build + timing model, target < 60 s.

And the optimal-schedules issue's construction times, each a whole process:

3. ``allreduce-rtl schedule -a multitree-opt -t torus:16x16`` (its default 1 KiB), target <= 2 s.
4. ``allreduce-rtl schedule -a multitree-opt -t torus:32x32``, target <= 10 s.
5. ``allreduce-rtl schedule -a multitree -t torus:32x32``, target <= 30 s.

``--quick`` leaves out 4 and 5 (about 10 s together).

Prints a Markdown table for the README. Run: ``make bench`` or ``.venv/bin/python
scripts/bench_golden.py``.
"""

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from golden_model.algorithms import build_schedule  # noqa: E402
from golden_model.timing import simulate  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402


def best_of(n, fn):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def cli(*argv):
    exe = Path(sys.executable).parent / "allreduce-rtl"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "allreduce_rtl.cli"]
    subprocess.run(cmd + list(argv), check=True, capture_output=True, cwd=ROOT)


def compare_process():
    cli("compare", "--topology", "torus:8x8", "--size", "64MiB", "--json")


#: (command, target in seconds) of the optimal-schedules issue; the last two are long.
SCHEDULES = [(("schedule", "-a", "multitree-opt", "-t", "torus:16x16"), 2),
             (("schedule", "-a", "multitree-opt", "-t", "torus:32x32"), 10),
             (("schedule", "-a", "multitree", "-t", "torus:32x32"), 30)]


def multitree_16x16():
    topo = parse_topology("torus:16x16")
    t0 = time.perf_counter()
    sched = build_schedule("multitree", topo, (64 << 20) // 4)
    t1 = time.perf_counter()
    cycles = simulate(sched).cycles
    return sched.meta["tree_steps"], t1 - t0, time.perf_counter() - t1, cycles


def main():
    quick = "--quick" in sys.argv[1:]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    t_cmp, _ = best_of(3, compare_process)
    t_mt, (steps, t_build, t_sim, cycles) = best_of(1, multitree_16x16)
    print()
    print("| benchmark | target | measured |")
    print("| --- | --- | --- |")
    print(f"| `compare --topology torus:8x8 --size 64MiB`, 6 algorithms, whole process "
          f"(best of 3) | < 10 s | {t_cmp:.2f} s |")
    print(f"| `multitree` torus:16x16: build ({steps} tree steps) + timing ({cycles:,} cycles "
          f"at 64 MiB) | < 60 s | {t_mt:.2f} s ({t_build:.2f} s build, {t_sim:.2f} s timing) |",
          flush=True)
    met = t_cmp < 10 and t_mt < 60
    for argv, target in SCHEDULES[:1] if quick else SCHEDULES:
        seconds, _ = best_of(1, lambda argv=argv: cli(*argv))
        print(f"| `allreduce-rtl {' '.join(argv)}`, whole process | <= {target} s | "
              f"{seconds:.2f} s |", flush=True)
        met = met and seconds <= target
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
