"""Check an installed allreduce-rtl wheel from outside the repository (``make wheel-check``).

Usage: ``python scripts/check_wheel.py PATH/TO/venv/bin/allreduce-rtl`` from an empty folder,
with ``ALLREDUCE_BUILD_ROOT`` set to a scratch cache. Runs ``--version``, a small hardware demo
in Verilator, ``generate`` of a routed network, ``cost`` of one small design and ``explore``
of the shipped paper sweep, each from the
current folder, and checks that the packages come from the virtual environment (not a checkout),
that every command exits 0 and verifies, and that nothing was written into the installed
packages. Prints one line per check and exits 1 on the first failure.
"""

import json
import os
import pathlib
import subprocess
import sys
import time


def run(cmd, what):
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"wheel check FAILED: {what} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    print(f"ok  {what} ({secs:.0f} s)")
    return proc.stdout


PACKAGES = ("golden_model", "hdl", "tb", "allreduce_rtl")


def tree(site):
    """``{file: mtime}`` of the installed packages (bytecode caches left out)."""
    return {str(p.relative_to(site)): p.stat().st_mtime_ns for pkg in PACKAGES
            for p in (site / pkg).rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def main():
    exe = pathlib.Path(sys.argv[1])
    python = exe.with_name("python")
    here = pathlib.Path.cwd()
    repo = pathlib.Path(__file__).resolve().parent.parent
    if here == repo or repo in here.parents:
        sys.exit(f"wheel check FAILED: run it outside the repository, not in {here}")
    if not os.environ.get("ALLREDUCE_BUILD_ROOT"):
        sys.exit("wheel check FAILED: set ALLREDUCE_BUILD_ROOT to a scratch folder")
    where = json.loads(run([str(python), "-c", "import json, golden_model, hdl, tb, allreduce_rtl;"
                            "print(json.dumps({m.__name__: m.__file__ for m in "
                            "(golden_model, hdl, tb, allreduce_rtl)}))"], "import the packages"))
    for name, path in where.items():
        if repo in pathlib.Path(path).resolve().parents:
            sys.exit(f"wheel check FAILED: {name} was imported from the checkout ({path})")
    site = pathlib.Path(where["tb"]).resolve().parent.parent
    before = tree(site)
    print(run([str(exe), "--version"], "allreduce-rtl --version").strip())
    report = json.loads(run([str(exe), "demo", "-t", "ring:4", "--elements", "200",
                             "--link-latency", "4", "--json", "--out", "demo"],
                            "demo -t ring:4 (Verilator)"))
    if not report["verified"] or not all(r["verified"] for r in report["results"]):
        sys.exit("wheel check FAILED: the demo's results differ from the golden model")
    if not (here / "demo" / "report.json").is_file():
        sys.exit("wheel check FAILED: the demo wrote no report into ./demo")
    brief = json.loads(run([str(exe), "generate", "-t", "mesh:2x2", "-a", "dbtree",
                            "--elements", "40", "--link-latency", "1", "--out", "gen", "--json"],
                           "generate -t mesh:2x2 -a dbtree (routed)"))
    if not brief["routed"] or not (here / "gen" / "network.v").is_file():
        sys.exit("wheel check FAILED: generate wrote no routed network.v")
    cost = json.loads(run([str(exe), "cost", "--design", "router-mesh-32", "--no-ice40",
                           "--json"], "cost --design router-mesh-32 --no-ice40"))
    if not cost["designs"][0]["generic"]["cells"] > 0:
        sys.exit("wheel check FAILED: cost reported no cells")
    explored = json.loads(run([str(exe), "explore", "examples/paper-sweep.toml", "--workers",
                               "2", "--out", "explore", "--json"],
                              "explore examples/paper-sweep.toml (the shipped spec)"))
    if explored["failed"] or explored["ok"] != explored["points"] or \
            not (here / "explore" / "summary.md").is_file():
        sys.exit(f"wheel check FAILED: explore: {explored['failures'][:2]}")
    changed = sorted(k for k, v in tree(site).items() if before.get(k) != v)
    if changed:
        sys.exit(f"wheel check FAILED: files written into the installed packages: {changed[:5]}")
    cache = pathlib.Path(os.environ["ALLREDUCE_BUILD_ROOT"])
    if not any(cache.rglob("build.ok")):
        sys.exit(f"wheel check FAILED: no build under ALLREDUCE_BUILD_ROOT ({cache})")
    print(f"wheel check passed: demo verified ({report['results'][0]['rtl_cycles']} RTL cycles "
          f"for {report['results'][0]['algorithm']}), builds in {cache}, nothing written into "
          f"{site}")


if __name__ == "__main__":
    main()
