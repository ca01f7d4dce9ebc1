"""A step's per-parameter rows (stats, histograms, optimizer figures) in its run's layout.

Format 3 (``schema.LEAN``, what a new run is written in): each parameter by its id in
``param_names`` (given on first sight, in name order, so a step's rows read back in the order
version 2's index gave them), histograms as ``histogram_rows`` encodes them. Formats 1 and 2 (a
resumed older run): names in every row, float64 edges and int64 counts, as they were written.

A step's rows are built column by column from its arrays (``StepGradients.columns`` and
``histogram_block``): no object per parameter, the histograms encoded in one go, one
``executemany`` a table; NaN kept apart from "no value" as the text ``'nan'`` (SQLite would keep
it as NULL), found by one sum a column (C speed) before any value is looked at alone.
"""

from __future__ import annotations

import sqlite3
from itertools import chain, repeat
from operator import attrgetter

import numpy as np

from gradexplorer.core.runs import histogram_rows as H
from gradexplorer.core.runs import schema as S
from gradexplorer.core.stats.optimizer_fields import STATE_FIELDS
from gradexplorer.core.stats.records import STAT_FIELDS

_STATE = attrgetter(*STATE_FIELDS)  # a ParamOptimState's figures, PARAM_STEP_FIELDS[1:]'s order
_NO_STATE = (None,) * len(STATE_FIELDS)


def nan_as_text(column: list) -> list:
    """``column`` (numbers, None for no value) with each NaN as ``'nan'``: one sum decides
    whether any value needs looking at (a NaN, or +Inf beside −Inf, makes it NaN)."""
    try:
        total = sum(column)
    except TypeError:  # None among them
        total = sum([v for v in column if v is not None])
    if total == total:
        return column
    return ["nan" if v != v else v for v in column]


def param_step_columns(accumulated: dict[str, float], state: dict) -> tuple[list[str], list[list]]:
    """The ``param_steps`` table's names and columns: each parameter's accumulated norm and
    optimizer state (``ParamOptimState``s), in PARAM_STEP_FIELDS's order."""
    if not state:  # a light step (watch(overhead=)), or no optimizer: the norms alone
        if not accumulated:
            return [], []
        absent = [None] * len(accumulated)  # the state's columns (zip reads them only)
        return list(accumulated), [nan_as_text(list(accumulated.values())),
                                   *(absent,) * len(STATE_FIELDS)]
    names = list(accumulated) if accumulated.keys() == state.keys() \
        else list(dict.fromkeys([*accumulated, *state]))
    figures = [_STATE(state[n]) if n in state else _NO_STATE for n in names]
    acc = [accumulated.get(n) for n in names] if accumulated else [None] * len(names)
    return names, [nan_as_text(c) for c in (acc, *map(list, zip(*figures, strict=True)))]


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

    def insert_steps(self, db: sqlite3.Connection, steps: list[tuple]) -> None:
        """Every per-parameter row of ``steps``, each ``(record, accumulated, state)``: its
        figures (a StepGradients), its histograms, its accumulated norms and optimizer state
        (``ParamOptimState``s) — the steps' rows of a table in one ``executemany``, their
        histograms of one shape encoded at once."""
        stats, blocks, states = [], {}, []
        for record, accumulated, state in steps:
            names, (numel, has_grad, *figures) = record.columns("numel", "has_grad", *STAT_FIELDS)
            stats.append((repeat(record.step), names,
                          [numel, list(map(int, has_grad)), *map(nan_as_text, figures)]))
            for block in record.histogram_block():
                blocks.setdefault((block[1].shape[1:], block[2].shape[1:]), []).append(
                    (record.step, *block))
            states.append((repeat(record.step), *param_step_columns(accumulated, state)))
        hists = []
        for group in blocks.values():  # (step, names, edges, counts, extra) of each step
            edges = np.concatenate([b[2] for b in group])
            counts = np.concatenate([b[3] for b in group])
            blobs = H.encode_columns(edges, counts) if self.lean else (
                [e.tobytes() for e in edges], [c.tobytes() for c in counts])
            hists.append((chain.from_iterable(repeat(b[0], len(b[1])) for b in group),
                          list(chain.from_iterable(b[1] for b in group)),
                          [*blobs, *np.concatenate([b[4] for b in group]).T.tolist()]))
        key = None
        if self.lean:  # every name's id at once (one look at the names table a transaction)
            everyone = list(dict.fromkeys(chain.from_iterable(
                found[1] for found in (*stats, *states, *hists))))
            key = dict(zip(everyone, self.ids(db, everyone), strict=True)).__getitem__
        for table, found in (("stats", stats), ("histograms", hists), ("param_steps", states)):
            rows = chain.from_iterable(  # ``at``: repeat(step) (the names end it) or each row's
                zip(at, names if key is None else map(key, names), *columns, strict=False)
                for at, names, columns in found if names)
            marks = ",".join("?" * (2 + S.PER_PARAMETER[table].count(",") + 1))
            db.executemany(f"INSERT OR REPLACE INTO {table if key is None else S.LEAN_TABLES[table]} "
                           f"VALUES ({marks})", rows)
