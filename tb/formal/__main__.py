"""``python -m tb.formal [-k TEXT] [--jobs N] [--out DIR] [--list]``: run the formal proofs
(``make formal``), one line per property, then ``N proved, M failed``; exit 1 if any failed."""

import argparse
import sys
import time
from pathlib import Path

from . import all_properties
from .run import FormalToolError, format_result, run_all


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tb.formal", description=__doc__)
    parser.add_argument("-k", dest="select", default="",
                        help="run only the properties whose name contains this text")
    parser.add_argument("--jobs", type=int, default=None,
                        help="properties checked in parallel (default: one per core)")
    parser.add_argument("--out", type=Path, default=Path("build/formal"),
                        help="folder for the runs and counterexample traces (default "
                             "build/formal)")
    parser.add_argument("--list", action="store_true", help="list the properties and stop")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    every = all_properties()
    props = [p for p in every if args.select in p.name]
    if not props:
        parser.error(f"no property name contains {args.select!r}; "
                     f"--list shows the {len(every)} names")
    width = max(len(p.name) for p in props)
    if args.list:
        for prop in props:
            print(f"{prop.name:<{width}}  {prop.claim}")
        return 0
    start = time.monotonic()
    try:
        results = run_all(props, args.out, args.jobs,
                          on_result=lambda r: print(format_result(r, width), flush=True))
    except FormalToolError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
        return 1
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed} proved, {failed} failed "
          f"({time.monotonic() - start:.0f} s, traces and logs in {args.out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
