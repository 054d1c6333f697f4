"""The results store of ``allreduce-rtl explore``: one SQLite database (standard library) per
output folder, one row per point.

Each point is written in its own transaction under a unique key (``Point.key``, the canonical
JSON of its parameters), by the one process that runs the exploration, so an interrupted run
(Ctrl-C, a killed worker or machine) loses at most the points in flight: SQLite's journal keeps
the database whole, and a point written twice (a retry after a failure) replaces its row instead
of adding one. The export (:func:`export`) writes one row per point with every parameter, every
measured figure and the provenance, as CSV (``csv``) or Parquet (``pyarrow``, if installed).
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

from golden_model.errors import ConfigError

from ..errors import EnvironmentFailure
from ..output import atomic_write

__all__ = ["STORE_FILE", "Store", "EXPORT_FORMATS", "export", "flatten"]

STORE_FILE = "results.sqlite"
#: Layout version of the tables; a store of another version is refused, not misread.
STORE_VERSION = 1
EXPORT_FORMATS = ("csv", "parquet")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    figures TEXT NOT NULL,
    error TEXT,
    provenance TEXT NOT NULL,
    finished_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
"""


_COLUMNS = ("key", "params", "status", "figures", "error", "provenance", "finished_at")


def _guarded(method):
    """A ``Store`` method whose SQLite errors (a damaged file, a full disk) are one line."""
    import functools  # noqa: PLC0415

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            raise EnvironmentFailure(f"results store {self.path}: {exc} (nothing more was "
                                     f"written to it)") from None
    return run


class Store:
    """The SQLite store at ``path`` (created if missing).

    Raises
    ------
    EnvironmentFailure
        If the file cannot be opened or created, is not a SQLite database, or holds another
        layout version.
    """

    def __init__(self, path):
        self.path = Path(path)
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(_SCHEMA)
            columns = tuple(r[1] for r in self.db.execute("PRAGMA table_info(points)"))
            if columns != _COLUMNS:
                raise EnvironmentFailure(f"{self.path} is a SQLite database but not a results "
                                         f"store of this tool (its points table has other "
                                         f"columns): use another --out")
            check = self.db.execute("PRAGMA quick_check").fetchall()
            if check != [("ok",)]:
                raise EnvironmentFailure(f"results store {self.path} is damaged ({check[0][0]}): "
                                         f"use another --out (its readable rows can be "
                                         f"copied with the sqlite3 command's .recover)")
            row = self.db.execute("SELECT value FROM meta WHERE name='version'").fetchone()
            if row is None:
                self.db.execute("INSERT INTO meta VALUES ('version', ?)", (str(STORE_VERSION),))
            elif row[0] != str(STORE_VERSION):
                raise EnvironmentFailure(f"{self.path} is a results store of layout version "
                                         f"{row[0]}, this tool writes {STORE_VERSION}: use "
                                         f"another --out")
        except sqlite3.DatabaseError as exc:
            raise EnvironmentFailure(f"cannot use {self.path} as a results store: {exc}") \
                from None

    def close(self):
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @_guarded
    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM points").fetchone()[0]

    @_guarded
    def done_keys(self) -> set:
        """Keys of the points that succeeded (``--resume`` skips them; failed ones run again)."""
        return {k for (k,) in self.db.execute("SELECT key FROM points WHERE status='ok'")}

    @_guarded
    def put(self, key, params, figures, error, provenance):
        """Write one point in one transaction (replacing an earlier row of the same key)."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(
                "INSERT INTO points (key, params, status, figures, error, provenance) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                "params=excluded.params, status=excluded.status, figures=excluded.figures, "
                "error=excluded.error, provenance=excluded.provenance, "
                "finished_at=excluded.finished_at",
                (key, json.dumps(params, sort_keys=True), "failed" if error else "ok",
                 json.dumps(figures, sort_keys=True), error,
                 json.dumps(provenance, sort_keys=True)))

    @_guarded
    def set_meta(self, name, value):
        with self.db:
            self.db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
                            "value=excluded.value", (name, value))

    @_guarded
    def rows(self, keys=None) -> list:
        """Every point (or those of ``keys``, in their order) as a dict: ``key``, ``params``,
        ``status``, ``figures``, ``error``, ``provenance``, ``finished_at``."""
        cur = self.db.execute("SELECT key, params, status, figures, error, provenance, "
                              "finished_at FROM points ORDER BY rowid")
        rows = {}
        for key, params, status, figures, error, prov, finished in cur:
            rows[key] = {"key": key, "params": json.loads(params), "status": status,
                         "figures": json.loads(figures), "error": error,
                         "provenance": json.loads(prov), "finished_at": finished}
        if keys is None:
            return list(rows.values())
        return [rows[k] for k in keys if k in rows]


def flatten(row) -> dict:
    """One export row: the parameters by name, then the figures, then ``status``, ``error``,
    provenance fields as ``provenance_<name>`` and ``finished_at``."""
    from .spec import PARAMETERS  # noqa: PLC0415 - the parameters in the spec's order
    params = row["params"]
    out = {k: params[k] for k in PARAMETERS if k in params}
    out.update({k: v for k, v in params.items() if k not in out})
    out.update(row["figures"])
    out["status"] = row["status"]
    out["error"] = row["error"]
    out.update({f"provenance_{k}": v for k, v in row["provenance"].items()})
    out["finished_at"] = row["finished_at"]
    return out


def _columns(flat):
    cols = []
    for row in flat:
        cols.extend(c for c in row if c not in cols)
    return cols


def export(rows, path, fmt="csv"):
    """Write ``rows`` (``Store.rows``) to ``path`` as ``fmt`` (one of :data:`EXPORT_FORMATS`),
    whole or not at all.

    Raises
    ------
    ConfigError
        On an unknown format or an unwritable path.
    EnvironmentFailure
        If Parquet is asked for and ``pyarrow`` is not installed.
    """
    flat = [flatten(r) for r in rows]
    cols = _columns(flat)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, cols, lineterminator="\n")
        writer.writeheader()
        for row in flat:
            writer.writerow({c: _cell(row.get(c)) for c in cols})
        atomic_write(path, buf.getvalue())
    elif fmt == "parquet":
        try:
            import pyarrow as pa  # noqa: PLC0415
            import pyarrow.parquet as pq  # noqa: PLC0415
        except ImportError:
            raise EnvironmentFailure("--export parquet needs pyarrow: pip install pyarrow "
                                     "(or pip install 'allreduce-rtl[parquet]')") from None
        table = pa.table({c: [_parquet_cell(row.get(c)) for row in flat] for c in cols})
        buf = pa.BufferOutputStream()
        pq.write_table(table, buf)
        atomic_write(path, buf.getvalue().to_pybytes())
    else:
        raise ConfigError(f"export format {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return v


def _parquet_cell(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
