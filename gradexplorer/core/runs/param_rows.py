"""A step's per-parameter rows (stats, histograms, optimizer figures) in its run's layout.

Format 3 (``schema.LEAN``, what a new run is written in): each parameter by its id in
``param_names`` (given on first sight, in name order, so a step's rows read back in the order
version 2's index gave them), histograms as ``histogram_rows`` encodes them. Formats 1 and 2 (a
resumed older run): names in every row, float64 edges and int64 counts, as they were written.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict

import numpy as np

from gradexplorer.core.runs import histogram_rows as H
from gradexplorer.core.runs import schema as S


class ParamRows:
    """Inserts the rows on the writer thread (which alone uses it)."""

    def __init__(self, version: int) -> None:
        self.lean = version >= S.LEAN
        self._ids: dict[str, int] | None = None  # the run's parameter ids, read once

    def ids(self, db: sqlite3.Connection, names: list[str]) -> list[int]:
        """Each name's id, new names given one (in the transaction under way). The ids known
        are read again when the table holds another number of them (a transaction that gave
        some was rolled back)."""
        held = db.execute(f"SELECT COUNT(*) FROM {S.NAMES_TABLE}").fetchone()[0]
        if self._ids is None or len(self._ids) != held:
            self._ids = dict(db.execute(f"SELECT name, id FROM {S.NAMES_TABLE}"))
        new = sorted(set(names) - self._ids.keys())
        if new:
            first = db.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {S.NAMES_TABLE}").fetchone()[0]
            db.executemany(f"INSERT INTO {S.NAMES_TABLE} VALUES (?, ?)",
                           list(enumerate(new, start=first)))
            self._ids.update(zip(new, range(first, first + len(new)), strict=True))
        return [self._ids[n] for n in names]

    def insert(self, db: sqlite3.Connection, table: str, rows: list[tuple]) -> None:
        """``rows`` of ``table`` (``stats``, ``histograms``, ``param_steps``) as ``(step, name,
        *columns)``, histograms' edges and counts as float64/int64 bytes (``histogram_rows()``
        of a StepGradients)."""
        if not rows:
            return
        width = len(rows[0])
        if not self.lean:
            db.executemany(f"INSERT OR REPLACE INTO {table} VALUES ({','.join('?' * width)})", rows)
            return
        if table == "histograms":
            rows = lean_histograms(rows)
        ids = self.ids(db, [r[1] for r in rows])
        db.executemany(f"INSERT OR REPLACE INTO {S.LEAN_TABLES[table]} "
                       f"VALUES ({','.join('?' * width)})",
                       [(r[0], i, *r[2:]) for r, i in zip(rows, ids, strict=True)])


def lean_histograms(rows: list[tuple]) -> list[tuple]:
    """Histogram rows with float64/int64 blobs as ``histogram_rows.encode_rows`` stores them
    (the rows of one bin count encoded at once)."""
    out: list[tuple | None] = [None] * len(rows)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        groups[len(row[2]), len(row[3])].append(i)
    for where in groups.values():
        edges = np.frombuffer(b"".join(rows[i][2] for i in where), "<f8").reshape(len(where), -1)
        counts = np.frombuffer(b"".join(rows[i][3] for i in where), "<i8").reshape(len(where), -1)
        for i, (e, c) in zip(where, H.encode_rows(edges, counts), strict=True):
            out[i] = (*rows[i][:2], e, c, *rows[i][4:])
    return out
