"""multitree-opt on unequal links: the shipped machines and seeded random irregular networks,
at 64 MiB per node, against the bounds.

For each network: multitree's and multitree-opt's cycles (the default timing), the kept
candidate, multitree-opt over the reduce-scatter plus all-gather cut bound (``rsag_cycles``,
ForestColl's; tree algorithms can go below it where they reduce on the way), over the
bandwidth-aware packing's own optimum (the busiest link's load, the bound of the schedules it
lowers), and over the bound of any all-reduce (``lower_bound.cycles``), and the seconds
multitree-opt took to build and time its candidates.

The random networks: N endpoints and S switches joined by a random spanning tree plus about
one extra link per vertex, every link a random 4, 8, 16 or 32 GB/s each way with a random
latency of 10 to 200 cycles (seeded, so the table is reproducible). The topology files are
written to a temporary folder and read back with ``--topology`` semantics.

Usage: .venv/bin/python scripts/irregular_table.py [--quick]
"""

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import networkx as nx

from golden_model.algorithms import build_schedule
from golden_model.algorithms.packing import pack_trees
from golden_model.timing import TimingParams, lower_bound, simulate
from golden_model.topology import parse_topology

SIZE = 64 << 20
#: (endpoints, switches, seed)
RANDOM = [(8, 0, 1), (8, 2, 2), (16, 0, 3), (16, 4, 4), (32, 0, 5), (32, 6, 6), (64, 0, 7),
          (64, 8, 8)]


def random_network(n, switches, seed):
    rng = random.Random(seed)
    ids = list(range(n)) + [f"s{i}" for i in range(switches)]
    tree = nx.random_labeled_tree(len(ids), seed=seed)
    pairs = {tuple(sorted((ids[a], ids[b]), key=str)) for a, b in tree.edges}
    while len(pairs) < 2 * len(ids) - 1:
        a, b = rng.sample(ids, 2)
        pairs.add(tuple(sorted((a, b), key=str)))
    links = [{"source": u, "target": v, "bandwidth": rng.choice([4.0, 8.0, 16.0, 32.0]),
              "latency": rng.randint(10, 200)}
             for a, b in sorted(pairs, key=str) for u, v in ((a, b), (b, a))]
    return {"directed": True, "nodes": [{"id": v, "kind": "switch" if isinstance(v, str)
                                         else "node"} for v in ids], "links": links}


def row(name, topo):
    params = TimingParams()
    elements = SIZE // 4
    mt = simulate(build_schedule("multitree", topo, elements, params), params).cycles
    t0 = time.perf_counter()
    opt = build_schedule("multitree-opt", topo, elements, params)
    secs = time.perf_counter() - t0
    cycles = opt.meta["cycles"]
    lb = lower_bound(topo, SIZE, params)
    packing = SIZE / topo.num_nodes * pack_trees(topo).bound * params.frequency_ghz
    pieces = opt.meta.get('pieces', 1)
    kept = f"{opt.meta['method']}/{opt.meta.get('sub_chunks', 1)}" + (f"x{pieces}" if pieces > 1 else "")
    return (f"| {name} | {topo.num_nodes} | {len(topo.switches)} | {mt:,} | {cycles:,} | "
            f"{kept} | {cycles / lb.rsag_cycles:.3f} | {cycles / packing:.3f} | "
            f"{cycles / lb.cycles:.3f} | {secs:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the machines and networks up to 16")
    args = ap.parse_args()
    print("| network | N | switches | multitree | multitree-opt | kept | x cut bound (RS+AG) "
          "| x packing bound | x any-all-reduce bound | build (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for machine in ("dgx2", "cloud-v100"):
        print(row(f"machine:{machine}", parse_topology(f"machine:{machine}")), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for n, s, seed in RANDOM:
            if args.quick and n > 16:
                continue
            path = Path(tmp) / f"random-{n}-{s}-{seed}.json"
            path.write_text(json.dumps(random_network(n, s, seed)))
            print(row(f"random N={n} S={s} seed {seed}", parse_topology(str(path))), flush=True)


if __name__ == "__main__":
    main()
