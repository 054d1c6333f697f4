#!/usr/bin/env python3
"""bfloat16 all-reduce: what accumulating in bfloat16 (the hardware's ``--dtype bfloat16``) costs
in accuracy against accumulating in float32, and what float32 accumulation would cost in link
traffic and buffer.

Three ways to all-reduce bfloat16 gradients, each run on the golden model (``execute``) with the
same schedule and the demo's gradients (``allreduce_rtl.demo.gradients``) rounded to bfloat16:

* ``bf16``: every partial sum rounded to bfloat16 and sent as bfloat16 (what the NI does);
* ``f32-rs, bf16-ag``: reduce-scatter in float32 (the bfloat16 inputs widened exactly), each
  chunk's sum rounded once to bfloat16 at its root, all-gather in bfloat16; the same bits on
  every node;
* ``f32``: everything in float32 and the result rounded to bfloat16 at the end.

For each: the largest error in bfloat16 ulps and the share of elements equal to the exactly
rounded sum (``golden_model.accuracy``), and the bytes each node sends (reduce-scatter at the
partial sums' width, all-gather at the result's) and the buffer bytes per element, relative to
pure bfloat16. Run: ``.venv/bin/python scripts/bf16_accumulation.py [--topology torus:4x4]
[--algorithm multitree] [--elements 65536]``.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from allreduce_rtl.demo import gradients  # noqa: E402
from golden_model.accuracy import accuracy  # noqa: E402
from golden_model.algorithms import build_schedule  # noqa: E402
from golden_model.elements import BFLOAT16, FLOAT32  # noqa: E402
from golden_model.executor import execute  # noqa: E402
from golden_model.topology import parse_topology  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topology", default="torus:4x4")
    p.add_argument("--algorithm", default="multitree")
    p.add_argument("--elements", type=int, default=65536)
    args = p.parse_args(argv)
    topo = parse_topology(args.topology)
    sched = build_schedule(args.algorithm, topo, args.elements)
    n = topo.num_nodes
    inputs = gradients(n, args.elements, 0).astype(BFLOAT16.dtype)
    wide = inputs.astype(np.float32)                       # exact
    pure = execute(sched, inputs, BFLOAT16)[0]
    f32 = execute(sched, wide, FLOAT32)
    full = f32[0].astype(BFLOAT16.dtype)
    # reduce-scatter in float32 then one rounding: every node ends with the same float32 sums
    # (the all-reduce's result), rounded once; the all-gather moves those rounded values
    mixed = full
    assert (FLOAT32.to_bits(f32) == FLOAT32.to_bits(f32[:1])).all()
    frac = (n - 1) / n
    rows = [("bf16 (the NI's)", pure, 2, 2, 2), ("f32 reduce-scatter, bf16 all-gather", mixed,
                                                 4, 2, 4),
            ("f32 throughout", full, 4, 4, 4)]
    print(f"{args.algorithm} on {args.topology}, {args.elements:,} bfloat16 gradients per node "
          f"(demo gradients, seed 0)")
    print(f"{'accumulation':38s} {'max ulp':>8s} {'exactly rounded':>16s} "
          f"{'bytes sent / element':>21s} {'vs bf16':>8s} {'buffer B / element':>19s}")
    for name, res, rs_bytes, ag_bytes, buf in rows:
        acc = accuracy(res, inputs, BFLOAT16)
        sent = frac * (rs_bytes + ag_bytes)
        print(f"{name:38s} {acc['max_ulp_error']:8g} {100 * acc['exactly_rounded']:15.1f}% "
              f"{sent:21.3f} {sent / (frac * 4):7.2f}x {buf:19d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
