"""The ``explore`` subcommand: a design-space exploration from a TOML spec, every point one
task on a Dask cluster (``allreduce_rtl.explore``), results in a SQLite store, a CSV or Parquet
export, ``summary.md`` and plots (docs/explore.md)."""

import contextlib
import functools
import shlex
import signal
import sys
import time
from pathlib import Path

from tqdm import tqdm

from golden_model.errors import ConfigError

from . import options
from .errors import EnvironmentFailure
from .output import (atomic_write_many, check_writable_file, counted, ensure_folder,
                     removed_if_left_empty)

__all__ = ["register", "cmd_explore"]


def register(sub):
    """Add ``explore`` to the subcommand set ``sub``."""
    from .explore.store import EXPORT_FORMATS  # noqa: PLC0415
    p = sub.add_parser("explore", help="design-space exploration from a TOML spec on Dask: "
                       "timing model, RTL and synthesis per point, a resumable SQLite store, "
                       "plots")
    p.add_argument("spec", nargs="?", type=options.text, default=None, metavar="SPEC.toml",
                   help="the exploration spec, or a shipped example by name "
                   "(examples/paper-sweep.toml); see --examples")
    p.add_argument("--examples", action="store_true",
                   help="list the shipped example specs and exit")
    p.add_argument("--out", "-o", type=options.text, default=None, metavar="DIR",
                   help="output folder (default out/explore-<spec name>)")
    options.engine_options(p, "one per core")
    p.add_argument("--resume", action="store_true",
                   help="continue the store in --out: skip the points it holds (failed ones "
                   "run again)")
    p.add_argument("--export", choices=EXPORT_FORMATS, default="csv",
                   help="format of DIR/results.* (default %(default)s; parquet needs pyarrow)")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    options.build_dir_option(p)
    p.set_defaults(func=cmd_explore)


def _list_examples():
    from .explore.spec import examples, parse_spec  # noqa: PLC0415
    for name, path in examples().items():
        spec = parse_spec(path.read_text(encoding="utf-8"), str(path))
        print(f"{name:<16} {len(spec.points):>5} points ({', '.join(spec.evaluations)}): "
              f"{spec.title}")
    print("run one with: allreduce-rtl explore examples/NAME.toml (the shipped copy is used "
          "when there is no such file here)")
    return 0


def _default_out(spec_arg):
    name = Path(spec_arg).stem if spec_arg.endswith(".toml") else Path(spec_arg).name
    return f"out/explore-{name}"


def cmd_explore(args):
    from .explore.spec import load_spec  # noqa: PLC0415
    if args.examples:
        return _list_examples()
    if args.spec is None:
        raise ConfigError("give a SPEC.toml (or --examples to list the shipped ones)")
    spec = load_spec(args.spec)
    if args.export == "parquet":     # before hours of work, not after
        try:
            import pyarrow.parquet  # noqa: F401,PLC0415
        except ImportError:
            raise EnvironmentFailure("--export parquet needs pyarrow: pip install pyarrow (or "
                                     "pip install 'allreduce-rtl[parquet]')") from None
    build_root = None
    if set(spec.evaluations) & {"rtl", "cost"}:
        from tb.toolchain import ToolchainError, build_root as resolve  # noqa: PLC0415
        try:
            build_root = str(resolve(args.build_dir))
        except ToolchainError as exc:
            raise EnvironmentFailure(str(exc)) from None
    folder = args.out or _default_out(args.spec)
    with removed_if_left_empty(folder):
        out = ensure_folder(folder)
        with _exclusive(out):
            return _explore(args, spec, out, build_root)


@contextlib.contextmanager
def _exclusive(out):
    """Hold ``out/.explore.lock``: a second exploration of the same folder is refused (both
    would evaluate every point and write the same files)."""
    from tb.toolchain import locked  # noqa: PLC0415
    lock = out / ".explore.lock"
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(locked(lock, wait=False))
        except BlockingIOError:
            raise ConfigError(f"another allreduce-rtl explore is writing {out}: wait for it, "
                              f"or give another --out") from None
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)


def _explore(args, spec, out, build_root):
    from .cli import print_json  # noqa: PLC0415
    from .explore import engine, report  # noqa: PLC0415
    from .explore.evaluate import evaluate  # noqa: PLC0415
    from .explore.spec import queued  # noqa: PLC0415
    from .explore.store import STORE_FILE, Store, export  # noqa: PLC0415
    store_path = out / STORE_FILE
    export_path = out / f"results.{args.export}"
    for path in (store_path, export_path, out / "summary.md",
                 *(out / name for name in report.image_names(spec))):
        check_writable_file(path)
    created = not store_path.exists()
    if not created and not args.resume:
        with Store(store_path) as store:
            held = store.count()
        if held:
            raise ConfigError(f"{store_path} already holds {counted(held, 'point')}: add "
                              f"--resume to continue it, or give another --out")
    t0 = time.perf_counter()
    where = (f"the Dask cluster at {args.scheduler}" if args.scheduler else
             f"a local Dask cluster of "
             f"{counted(args.workers or engine.default_workers(), 'worker')}")
    try:
        with Store(store_path) as store:
            store.set_meta("spec", spec.source)
            done = store.done_keys() if args.resume else set()
            todo = queued([p for p in spec.points if p.key not in done])
            skipped = len(spec.points) - len(todo)
            source = "" if Path(args.spec).is_file() else f" (the shipped {spec.path.name})"
            header = (f"{spec.title}{source}: {counted(len(spec.points), 'point')}"
                      + (f", {skipped:,} already in the store" if skipped else "")
                      + f", on {where}")
            if todo:
                _run(store, todo, args, engine, functools.partial(evaluate,
                                                                  build_root=build_root), header)
            rows = store.rows([p.key for p in spec.points])
    except BaseException:
        if created:         # nothing of this run to keep: no store left behind
            _remove_empty_store(store_path)
        raise
    seconds = time.perf_counter() - t0
    command = "allreduce-rtl explore " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["explore"]
                                                    else [args.spec])
    summary, images = report.render(spec, rows, command=command, seconds=seconds,
                                    workers=where if todo else None,
                                    export_name=export_path.name)
    export(rows, export_path, args.export)
    atomic_write_many({out / "summary.md": summary, **{out / k: v for k, v in images.items()}})
    failures = [r for r in rows if r["status"] == "failed"]
    result = {"spec": args.spec, "out": str(out), "points": len(spec.points),
              "evaluated": len(todo), "ok": len(rows) - len(failures), "failed": len(failures),
              "seconds": round(seconds, 1), "store": str(store_path),
              "export": str(export_path), "summary": str(out / "summary.md"),
              "plots": [str(out / k) for k in images],
              "failures": [{"params": r["params"], "error": r["error"]} for r in failures]}
    if args.json:
        print_json(result)
    else:
        print(f"{len(rows) - len(failures):,} of {len(spec.points):,} points done, "
              f"{len(failures):,} failed ({seconds:,.1f} s); wrote {out / 'summary.md'}, "
              f"{export_path}, {store_path}" + (f" and {counted(len(images), 'plot')}"
                                                 if images else ""))
        for r in failures[:10]:
            p = r["params"]
            print(f"failed: {p['topology']} {p['algorithm']} {p['size']} B: {r['error']}",
                  file=sys.stderr)
        if len(failures) > 10:
            print(f"... and {len(failures) - 10} more (summary.md lists them)", file=sys.stderr)
    return 1 if failures else 0


def _remove_empty_store(path):
    from .explore.store import Store  # noqa: PLC0415
    try:
        with Store(path) as store:
            empty = store.count() == 0
    except EnvironmentFailure:
        return
    if empty:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _run(store, todo, args, engine, task, header):
    """Evaluate ``todo`` with ``task`` on the engine, writing each point to ``store`` as it
    finishes (``header`` is said once the cluster is there). SIGTERM stops it as Ctrl-C does."""
    failed, running = 0, 0

    def terminate(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, terminate)

    def progress(now=None):
        nonlocal running
        running = running if now is None else now
        bar.set_postfix_str(f"failed {failed}, running {running}", refresh=False)

    bar = None
    try:
        with engine.cluster(args.workers, args.scheduler) as client:
            if not args.json:
                print(header, file=sys.stderr)
            bar = tqdm(total=len(todo), desc="explore", unit="point", file=sys.stderr,
                       disable=args.json)
            for o in engine.outcomes(client, task, todo, on_progress=progress,
                                     priorities=[-i for i in range(len(todo))]):
                point = todo[o.index]
                res = o.value or {"figures": {}, "error": o.error,
                                  "provenance": {"seconds": None}}
                store.put(point.key, point.params, res["figures"], res["error"],
                          res["provenance"])
                failed += res["error"] is not None
                progress()
                bar.update()
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print(f"interrupted: {store.count():,} points are in {store.path}; run the same "
              f"command with --resume to continue", file=sys.stderr)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if bar is not None:
        bar.close()
