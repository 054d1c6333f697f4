"""Text tables and whole-or-nothing file writes for the command line."""

import os
import tempfile
from pathlib import Path


def atomic_write(path, data):
    """Write ``data`` (str or bytes) to ``path`` via a temporary file in the same folder and a
    rename, so an interrupted run never leaves a half-written file or clobbers the old one.

    Raises
    ------
    ConfigError
        If the folder does not exist or cannot be written.
    """
    from golden_model.errors import ConfigError
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConfigError(f"cannot write {str(path)!r}: folder {str(folder)!r} does not exist")
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror}") from None
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
