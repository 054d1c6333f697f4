#!/usr/bin/env python3
"""The optimal-schedules issue's table: multitree and multitree-opt against the lower bounds and
beside TACOS's best chunking, with the default timing (links served as the hardware does).

For each (topology, size) it runs ``golden_model.compare.compare`` (what ``allreduce-rtl compare
--json`` prints) for multitree and multitree-opt and prints one Markdown row: the ratio of each to
the injection bound (``ratio_to_lower_bound``), multitree-opt's ratio to the per-node figure the
papers and TACOS use (``rsag_cycles``; the same as the injection bound on tori, fat-trees and
BiGraphs) and to the bound with latency (``tight_cycles``), its sub-chunks, TACOS's figure where
the issue gives one (references.md: TACOS run with the same links, all-reduce as two
all-gathers, its best chunking, ratio to the per-node figure), and the wall time of the compare.
Run: ``.venv/bin/python scripts/optimum_table.py`` (about a minute).
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from golden_model.compare import compare  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402
from golden_model.units import format_size  # noqa: E402

MIB = 1 << 20
#: (topology, size, TACOS's best ratio or None, the issue's target for multitree-opt)
ROWS = [("torus:4x4", 64 * MIB, 1.005, "<= 1.01"), ("torus:8x8", 64 * MIB, 1.021, "<= 1.01"),
        ("mesh:4x4", 64 * MIB, 1.001, "<= 1.01"), ("mesh:8x8", 64 * MIB, 1.005, "<= 1.01"),
        ("torus:4x4", MIB, 1.145, "<= 1.10"), ("torus:8x8", MIB, 1.237, "<= 1.10"),
        ("mesh:4x4", MIB, 1.073, "< TACOS"), ("mesh:8x8", MIB, 1.165, "< TACOS"),
        ("torus:16x16", 64 * MIB, None, "<= 1.02"), ("fattree:8x2", 64 * MIB, None, "<= 1.02"),
        ("bigraph:4x16", 64 * MIB, None, "<= 1.02")]


def main():
    print("| topology | size | multitree x bound | multitree-opt x bound | opt x per-node "
          "figure | TACOS x per-node figure | target | opt x bound with latency | sub-chunks "
          "| compare (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec, size, tacos, target in ROWS:
        t0 = time.perf_counter()
        report = compare(parse_topology(spec), size, ["multitree", "multitree-opt"])
        seconds = time.perf_counter() - t0
        by = {r["algorithm"]: r for r in report["results"]}
        mt, opt = by["multitree"], by["multitree-opt"]
        print(f"| {spec} | {format_size(size)} | {mt['ratio_to_lower_bound']:.4f} | "
              f"{opt['ratio_to_lower_bound']:.4f} | {opt['ratio_to_rsag_bound']:.4f} | "
              f"{'-' if tacos is None else f'{tacos:.3f}'} | {target} | "
              f"{opt['ratio_to_tight_bound']:.4f} | {opt['sub_chunks'] or 1} | {seconds:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
