"""The ``--timing authors`` preset against the MultiTree authors' simulator on torus:4x4.

Prints a Markdown table: for each size and algorithm, their measured cycles
(``golden_model.authors.MEASURED_TORUS4X4``, docs/authors-simulator.md), the preset's, and the
ratio, with 256-byte messages and with whole chunks. Run:
``.venv/bin/python scripts/authors_table.py``.
"""

from golden_model.algorithms import build_schedule
from golden_model.authors import MEASURED_TORUS4X4, authors_params
from golden_model.timing import simulate
from golden_model.topology import parse_topology
from golden_model.units import format_size


def main():
    topo = parse_topology("torus:4x4")
    print("| data per node | algorithm | message size | theirs | preset | preset / theirs |")
    print("|---|---|---|---:|---:|---:|")
    for size, measured in MEASURED_TORUS4X4.items():
        for (algorithm, message_size), theirs in measured.items():
            params = authors_params(message_size)
            ours = simulate(build_schedule(algorithm, topo, size // 4, params), params).cycles
            words = f"{message_size} B" if message_size else "whole chunk"
            print(f"| {format_size(size)} | {algorithm} | {words} | {theirs:,} | {ours:,} "
                  f"| {ours / theirs:.3f} |")


if __name__ == "__main__":
    main()
