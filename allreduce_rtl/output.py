"""Text tables, whole-or-nothing file writes and a progress line for the command line."""

import contextlib
import os
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

from tqdm import tqdm

from golden_model.errors import ConfigError


def counted(n, noun):
    """``"1 node"``, ``"16 nodes"``, ``"1,024 nodes"``: a count with its noun, plural unless 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_writable_file(path):
    """The regular file ``path`` names (through symlinks), checked before anything is written.

    Raises
    ------
    ConfigError
        If the name is empty, names something other than a regular file (a folder, a device
        such as /dev/null), or its folder does not exist.
    """
    if not str(path).strip():
        raise ConfigError("output file name is empty")
    if str(path).endswith(os.sep):
        raise ConfigError(f"cannot write {str(path)!r}: a file name, not a folder, is needed")
    try:
        real = Path(os.path.realpath(path))
        if real.exists() and not real.is_file():
            raise ConfigError(f"cannot write {str(path)!r}: it exists and is not a regular file")
        if not real.parent.is_dir():
            what = "is not a folder" if real.parent.exists() else "does not exist"
            raise ConfigError(f"cannot write {str(path)!r}: {str(real.parent)!r} {what}")
        _probe(real.parent, path)
    except OSError as exc:      # e.g. a name too long for the file system
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    return real


def _probe(folder, what):
    """Create and remove a file in ``folder``: the one test of writability that holds for every
    file system and for root (``os.access`` says yes to root on read-only mounts)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".allreduce-rtl-probe-")
    except OSError as exc:
        raise ConfigError(f"cannot write {str(what)!r}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(tmp)


def atomic_write_many(files):
    """Write several files whole or not at all.

    Each ``{path: data}`` entry (str or bytes) goes to a temporary file beside its target; only
    when every one is written are they renamed over the targets, so an error or an interrupt
    leaves no half-written file and keeps the old ones. Symlinks are written through; new files
    get the usual ``0666 & ~umask`` mode, replaced files keep theirs.

    Raises
    ------
    ConfigError
        If a target is not a regular file, its folder is missing, or a write fails (the message
        names the path and the reason).
    """
    targets = [(check_writable_file(path), path, data) for path, data in files.items()]
    written = []
    try:
        for real, path, data in targets:
            try:
                fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
            except OSError as exc:
                raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror}") from None
            written.append((tmp, real))
            mode = stat.S_IMODE(real.stat().st_mode) if real.exists() else 0o666 & ~_umask()
            try:
                with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
                    f.write(data)
                os.chmod(tmp, mode)
            except OSError as exc:
                raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror}") from None
        for tmp, real in written:
            os.replace(tmp, real)
        written = []
    finally:
        for tmp, _ in written:
            Path(tmp).unlink(missing_ok=True)


def atomic_write(path, data):
    """Write one file whole or not at all; see ``atomic_write_many``."""
    atomic_write_many({path: data})


def ensure_folder(path):
    """Create output folder ``path`` (and parents) if needed and check it can be written.

    Raises
    ------
    ConfigError
        If it exists as something else, cannot be created, or is not writable.
    """
    if not str(path).strip():
        raise ConfigError("output folder name is empty")
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"cannot use {str(path)!r} as output folder: it is a file") from None
    except OSError as exc:
        raise ConfigError(f"cannot create output folder {str(path)!r}: {exc.strerror}") from None
    _probe(path, path)
    return path


@contextlib.contextmanager
def removed_if_left_empty(path):
    """Around a command that creates output folder ``path``: if the folder did not exist
    before and an error leaves it empty, remove it (a failed command leaves nothing behind)."""
    path = Path(path)
    existed = path.exists()
    try:
        yield
    except BaseException:
        if not existed and path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        raise


def format_table(rows, columns):
    """Render ``rows`` (dicts) as an aligned text table.

    ``columns`` is a list of ``(key, header, format)``; a missing or None value prints as "-".
    """
    cells = [[h for _, h, _ in columns]]
    for r in rows:
        cells.append([("-" if r.get(k) is None else fmt.format(r[k])) for k, _, fmt in columns])
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Spinner:
    """A tqdm line that shows elapsed time while a blocking step runs (on stderr)."""

    def __init__(self, desc, enabled=True):
        self.desc, self.enabled = desc, enabled

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.tty = self.enabled and sys.stderr.isatty()
        if self.enabled and not self.tty:
            print(f"{self.desc} ...", file=sys.stderr, flush=True)
        if not self.tty:
            return self
        self.bar = tqdm(total=None, desc=self.desc, bar_format="{desc}: {elapsed}",
                        file=sys.stderr, leave=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()
        return self

    def _tick(self):
        while not self.stop.wait(0.5):
            self.bar.refresh()

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        if self.enabled and not self.tty:
            print(f"{self.desc}: {self.seconds:.0f} s", file=sys.stderr, flush=True)
        if self.tty:
            self.stop.set()
            self.thread.join()
            self.bar.refresh()
            self.bar.close()
        return False
