"""The ``check`` subcommand: an MSCCL-IR XML file run on its own terms
(``golden_model.interchange.msccl_check``), and the runtime limits it breaks."""

from golden_model.interchange import msccl_check, msccl_read

from . import options


def register(sub):
    """Add ``check`` to the subcommand set ``sub``."""
    p = sub.add_parser("check", help="run an MSCCL-IR XML all-reduce on its own terms: "
                       "dependencies, deadlocks, sums (symbolic, int32, float32 bit for bit) "
                       "and the limits of a runtime")
    p.add_argument("file", type=options.text, metavar="FILE.xml")
    p.add_argument("--target", "-t", action="append", default=None,
                   choices=tuple(msccl_check.TARGETS),
                   help="also name every limit of this consumer the file breaks (repeatable): "
                   + "; ".join(f"{t.name}: {t.source}" for t in msccl_check.TARGETS.values()))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_check)


def report(program, result):
    """``check``'s JSON object for ``result`` of ``program``."""
    return {**result.summary, "source": program.source, "ok": result.ok,
            "errors": result.errors, "limits": result.limits}


def cmd_check(args):
    from .cli import print_json
    program = msccl_read.read(args.file)
    result = msccl_check.check(program, tuple(dict.fromkeys(args.target or ())))
    if args.json:
        print_json(report(program, result))
    else:
        s = result.summary
        print(f"{program.source}: {s['name']!r}, {s['ranks']} ranks, {s['chunks']} chunks, "
              f"{s['thread_blocks']} thread blocks, {s['steps']:,} steps")
        for line in result.errors:
            print(f"error: {line}")
        for target, lines in result.limits.items():
            for line in lines:
                print(f"limit: {line}")
            if not lines:
                print(f"{target}: within every limit checked")
        if not result.errors:
            print(f"all-reduce correct: {', '.join(s['checks'])}")
    return 0 if result.ok else 1
