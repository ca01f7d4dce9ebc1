"""The whole run at once, for reports, exports and the app's run-wide views.

``Run`` answers one step at a time; a 10,000-step run read that way is 10,000 queries of every
parameter. ``RunHistory`` asks the run's database for a run-wide figure in one query each
(curves of chosen parameters, per-parameter summaries, NaN/Inf events) and for histograms only
at the steps a view shows. It reads through the Run's own read-only connection.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradexplorer.core.recorder.run import Run
from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.core.stats.records import STAT_FIELDS


def _real(value: Any) -> float:
    """A stored figure as a float: NaN is stored as the text 'nan', no value as NULL."""
    if value is None:
        return math.nan
    if isinstance(value, str):
        return math.nan if value == "nan" else float(value)
    return float(value)


def flat_numbers(values: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every number in ``values`` (nested dicts joined with ``/``), bools and text left out."""
    out: dict[str, float] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_numbers(value, f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, str) and value == "nan":
            out[name] = math.nan
    return out


@dataclass(frozen=True)
class ParameterSummary:
    """One parameter over the whole run: its largest norm and |g|, and its NaN/Inf steps."""

    name: str
    steps: int
    max_norm: float
    max_abs: float
    nonfinite_steps: int
    first_nonfinite: int | None


@dataclass(frozen=True)
class NonFiniteEvent:
    """A parameter whose gradient held NaN or ±Inf at a step."""

    step: int
    name: str
    nan_count: int
    inf_count: int


class RunHistory:
    """Run-wide reads of one ``Run`` (also while it grows: each call sees whole steps only)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._db = run._db  # the run's read-only connection; Run defines what it holds

    # -- steps ---------------------------------------------------------------------
    def step_figures(self) -> tuple[np.ndarray, np.ndarray, dict[str, list[float | None]]]:
        """``(steps, wall_times, {figure: values})`` of every step: loss, global norm, step
        seconds … and whatever else the run's step rows and step information hold (numbers
        only, nested ones named ``a/b``); None where a step has no value (NaN where the
        recorded value was NaN)."""
        cursor = self._db.execute("SELECT * FROM steps ORDER BY step")
        columns = [c[0] for c in cursor.description]
        table = cursor.fetchall()
        if not table:
            return np.zeros(0, np.int64), np.zeros(0), {}
        by_column = dict(zip(columns, zip(*table, strict=True), strict=True))
        steps = np.array(by_column.pop("step"), dtype=np.int64)
        times = np.array([_real(t) for t in by_column.pop("time")])
        figures: dict[str, list[float | None]] = {}
        for key, values in by_column.items():  # every numeric column of the step table
            if all(v is None or isinstance(v, (int, float)) or v == "nan" for v in values):
                figures[key] = [None if v is None else _real(v) for v in values]
        extra = self._step_info_beyond(steps.tolist(), set(columns))
        for i, more in enumerate(extra):
            for key, value in more.items():
                figures.setdefault(key, [None] * len(steps))[i] = value
        return steps, times, figures

    def _step_info_beyond(self, steps: list[int], known: set[str]) -> list[dict[str, float]]:
        """Per step, the numbers ``Run.step_info`` holds beyond the step table's columns (a step
        ledger); nothing when it adds none (then no step is read twice)."""
        if not steps:
            return []

        def more(step: int) -> dict[str, float]:
            return flat_numbers({k: v for k, v in self.run.step_info(step).items() if k not in known})

        first = more(steps[0])
        return [first, *(more(s) for s in steps[1:])] if first else []

    # -- parameters ----------------------------------------------------------------
    def stat_series(self, field: str, names: Sequence[str],
                    steps: Sequence[int] | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``(steps, {name: values})`` of one STAT_FIELDS figure of ``names`` (NaN where a step
        has none), at ``steps`` (default: every step), in one query."""
        if field not in STAT_FIELDS:
            raise ValueError(f"unknown figure {field!r}; one of {', '.join(STAT_FIELDS)}")
        steps = np.asarray(self.run.steps if steps is None else steps, dtype=np.int64)
        position = {int(s): i for i, s in enumerate(steps)}
        out = {n: np.full(len(steps), math.nan) for n in names}
        if not len(names) or not len(steps):
            return steps, out
        marks = ",".join("?" * len(names))
        query = f"SELECT step, name, {field} FROM stats WHERE name IN ({marks}) AND has_grad = 1"
        args: list[Any] = list(names)
        if len(steps) < len(self.run.steps):
            query += " AND step IN (SELECT value FROM json_each(?))"
            args.append("[" + ",".join(str(int(s)) for s in steps) + "]")
        for step, name, value in self._db.execute(query, args):
            i = position.get(step)
            if i is not None:
                out[name][i] = _real(value)
        return steps, out

    def parameter_summaries(self) -> dict[str, ParameterSummary]:
        """Every parameter's largest norm and |g| over the run and its NaN/Inf steps, in the
        model's order (one pass over the run's figures)."""
        rows = self._db.execute(
            "SELECT name, COUNT(*), MAX(CASE WHEN typeof(norm) = 'real' THEN norm END), "
            "MAX(CASE WHEN typeof(abs_max) = 'real' THEN abs_max END), "
            "SUM(nan_count > 0 OR inf_count > 0), "
            "MIN(CASE WHEN nan_count > 0 OR inf_count > 0 THEN step END) "
            "FROM stats WHERE has_grad = 1 GROUP BY name").fetchall()
        found = {r[0]: ParameterSummary(r[0], r[1], _real(r[2]), _real(r[3]), int(r[4] or 0), r[5])
                 for r in rows}
        order = self.run.parameters
        return {n: found[n] for n in [*order, *sorted(set(found) - set(order))] if n in found}

    def nonfinite_events(self, limit: int = 20_000) -> list[NonFiniteEvent]:
        """Parameters holding NaN/±Inf, by step then model order: the first ``limit`` found in
        one pass in the order the steps were written (no sort of the run's figures)."""
        rows = self._db.execute(
            "SELECT step, name, nan_count, inf_count FROM stats "
            "WHERE nan_count > 0 OR inf_count > 0 LIMIT ?", (limit,))
        order = {n: i for i, n in enumerate(self.run.parameters)}
        events = [NonFiniteEvent(s, n, int(a or 0), int(b or 0)) for s, n, a, b in rows]
        return sorted(events, key=lambda e: (e.step, order.get(e.name, len(order))))

    def histogram_steps(self) -> list[int]:
        """Steps that hold histograms (the monitor may keep them on a cadence)."""
        return [r[0] for r in self._db.execute("SELECT DISTINCT step FROM histograms ORDER BY step")]

    def histogram_matrix(self, name: str, steps: Sequence[int]) -> HistogramMatrix:
        """``name``'s histograms at those of ``steps`` that hold one, oldest first."""
        wanted = "[" + ",".join(str(int(s)) for s in steps) + "]"
        rows = self._db.execute(
            "SELECT step, edges, counts FROM histograms WHERE name = ? "
            "AND step IN (SELECT value FROM json_each(?)) ORDER BY step", (name, wanted)).fetchall()
        if not rows:
            return HistogramMatrix(np.zeros(0, np.int64), np.zeros((0, 0)), np.zeros((0, 0)))
        bins = {len(r[2]) for r in rows}
        if len(bins) > 1:  # bins changed mid-run: keep the steps with the last step's count
            rows = [r for r in rows if len(r[2]) == len(rows[-1][2])]
        return HistogramMatrix(
            np.array([r[0] for r in rows], dtype=np.int64),
            np.frombuffer(b"".join(r[1] for r in rows), np.float64).reshape(len(rows), -1).copy(),
            np.frombuffer(b"".join(r[2] for r in rows), np.int64).reshape(len(rows), -1).copy())

    def each_step(self, steps: Sequence[int] | None = None) -> Iterator[tuple[int, dict, dict]]:
        """``(step, stats, histograms)`` for each step (default all), oldest first: what an
        export streams, one step in memory at a time."""
        for step in self.run.steps if steps is None else steps:
            yield step, self.run.stats(step), self.run.histograms(step)
