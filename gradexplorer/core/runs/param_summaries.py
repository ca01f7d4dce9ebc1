"""Every parameter's figures over the run so far, kept as the run is written, so that a long
run's report does not pass over all of its rows.

Runs of format 3 written by this version hold the table ``param_summaries``: per parameter
id, over the steps up to ``through``, the steps with a gradient, the largest norm and |g|
(NaN left out, as ``RunHistory`` leaves them out), the steps holding NaN/Inf and the first of
them. The writer folds the steps written since the last fold into it every FOLD_EVERY steps,
inside the transaction of a step (a killed process leaves it as of its last fold, which is
consistent with the rows under it); a reader adds what the steps after ``through`` hold
(``RunHistory.parameter_summaries``). A step written at or below ``through`` (gradexplorer's
writers only append) empties the table for good: readers go back to the whole pass. A table
that is not whole (``through`` differing between rows, a value of the wrong kind) is not
used either: the whole pass checks every row it reads.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from gradexplorer.core.runs import schema as S

TABLE = S.SUMMARIES_TABLE  # created with a run's tables (schema.py)
FOLD_EVERY = 1000  # steps between folds: a reader's own pass covers at most this many steps

# Per parameter over the steps (after, through], as RunHistory's checked pass counts them.
_NONFINITE = "has_grad = 1 AND (nan_count > 0 OR inf_count > 0)"
FIGURES = (f"SUM(has_grad = 1), MAX(CASE WHEN has_grad = 1 AND typeof(norm) = 'real' THEN norm END), "
           "MAX(CASE WHEN has_grad = 1 AND typeof(abs_max) = 'real' THEN abs_max END), "
           f"SUM({_NONFINITE}), MIN(CASE WHEN {_NONFINITE} THEN step END)")


def _larger(column: str) -> str:
    """The larger of the kept and the new value, either of which may be NULL."""
    new = f"excluded.{column}"
    return (f"{column} = CASE WHEN {column} IS NULL THEN {new} WHEN {new} IS NULL THEN {column} "
            f"ELSE MAX({column}, {new}) END")


FOLD = (f"INSERT INTO {TABLE} SELECT param, :step, {FIGURES} FROM {S.LEAN_TABLES['stats']} "
        "WHERE step > :after AND step <= :step GROUP BY param ON CONFLICT(param) DO UPDATE SET "
        "through = excluded.through, grad_steps = grad_steps + excluded.grad_steps, "
        f"{_larger('max_norm')}, {_larger('max_abs')}, "
        "nonfinite_steps = nonfinite_steps + excluded.nonfinite_steps, "
        "first_nonfinite = COALESCE(first_nonfinite, excluded.first_nonfinite)")


class SummaryFolds:
    """The writer's side: after each step written, a fold when FOLD_EVERY steps have passed
    (on the writer thread, in the step's transaction)."""

    def __init__(self, db: sqlite3.Connection, lean: bool) -> None:
        self.on = lean  # older formats (a resumed run) keep no summaries
        self.through = (db.execute(f"SELECT MAX(through) FROM {TABLE}").fetchone()[0] or 0) \
            if lean else 0

    def after_step(self, db: sqlite3.Connection, step: int) -> None:
        if not self.on:
            return
        if step <= self.through:  # a step written again: the sums would count it twice
            db.execute(f"DELETE FROM {TABLE}")
            self.on = False
        elif step - self.through >= FOLD_EVERY:
            db.execute(FOLD, {"after": self.through, "step": step})
            db.execute(f"UPDATE {TABLE} SET through = ?", (step,))  # parameters without rows too
            self.through = step


def kept_summaries(run: Any) -> tuple[int, dict[str, tuple]] | None:
    """``(through, {name: (name, grad steps, max norm, max |g|, NaN/Inf steps, first)})`` from
    the run's table, or None when it has none (or one that is not whole: see above)."""
    if TABLE not in run._optional:
        return None
    rows = run._rows(f"SELECT n.name, s.through, s.grad_steps, s.max_norm, s.max_abs, "
                     f"s.nonfinite_steps, s.first_nonfinite FROM {TABLE} AS s LEFT JOIN "
                     f"{S.NAMES_TABLE} AS n ON n.id = s.param")
    if not rows or len({r[1] for r in rows}) != 1:
        return None
    for name, through, steps, norm, abs_max, bad, first in rows:
        if not (type(name) is str and all(type(v) is int and v >= 0 for v in (through, steps, bad))  # noqa: E721
                and all(v is None or type(v) is float for v in (norm, abs_max))  # noqa: E721
                and (first is None or type(first) is int)):  # noqa: E721
            return None
    return rows[0][1], {r[0]: (r[0], *r[2:]) for r in rows}


def merged(kept: dict[str, tuple], after: list[tuple]) -> list[tuple]:
    """The kept summaries with those of the steps after them (same row shape), per name."""
    out = dict(kept)
    for name, steps, norm, abs_max, bad, first in after:
        had = out.get(name)
        if had is None:
            out[name] = (name, steps, norm, abs_max, bad, first)
            continue
        out[name] = (name, (had[1] or 0) + (steps or 0), _max(had[2], norm), _max(had[3], abs_max),
                     (had[4] or 0) + (bad or 0), had[5] if had[5] is not None else first)
    return list(out.values())


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)
