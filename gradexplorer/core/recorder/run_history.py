"""The whole run at once, for reports, exports and the app's run-wide views.

``Run`` answers one step at a time; a 10,000-step run read that way is 10,000 queries of every
parameter. ``RunHistory`` asks the run's database for a run-wide figure in one query each
(curves of chosen parameters, per-parameter summaries, NaN/Inf events) and for histograms only
at the steps a view shows. It reads through the Run's own read-only connection and checks
every value it takes as the Run does (``validate.py``): a damaged run is the same one-line
UserError, never a traceback or a figure read from garbage.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradexplorer.core.recorder import histogram_rows as H
from gradexplorer.core.recorder import schema as S
from gradexplorer.core.recorder import validate as V
from gradexplorer.core.recorder.run import Run
from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.core.stats.records import STAT_FIELDS


def _real(value: float | int | str | None) -> float:
    """A checked figure as a float (no value: NaN; SQLite keeps NaN as the text 'nan')."""
    return math.nan if value is None else float(value)


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

    def _rows(self, sql: str, args: tuple | list = ()) -> list[tuple]:
        return self.run._rows(sql, tuple(args))  # the Run's query: a database error is one line

    # -- steps ---------------------------------------------------------------------
    def step_figures(self) -> tuple[np.ndarray, np.ndarray, dict[str, list[float | None]]]:
        """``(steps, wall_times, {figure: values})`` of every step: loss, global norm, step
        seconds … and whatever else the run's step rows and step information hold (numbers
        only, nested ones named ``a/b``); None where a step has no value (NaN where the
        recorded value was NaN)."""
        table = self._rows(f"SELECT {', '.join(V.STEP_COLUMNS)} FROM steps ORDER BY step")
        if not table:
            return np.zeros(0, np.int64), np.zeros(0), {}
        by_column = dict(zip(V.STEP_COLUMNS, zip(*table, strict=True), strict=True))
        for key, values in by_column.items():  # each column tested at once, the first bad row explained
            test = V.is_count if key in ("total_numel", "ranks") else V.is_figure  # as step_row
            if not all(map(test, values)):
                V.step_row(table[next(i for i, v in enumerate(values) if not test(v))], self.run.where)
        steps = np.array(by_column.pop("step"), dtype=np.int64)
        times = np.array([_real(t) for t in by_column.pop("time")])  # 'nan' is float('nan')
        figures: dict[str, list[float | None]] = {
            key: [None if v is None else _real(v) for v in values]
            for key, values in by_column.items()}
        extra = self._step_info_beyond(steps.tolist(), set(V.STEP_COLUMNS))
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
        held = self.run.steps
        steps = np.asarray(held if steps is None else steps, dtype=np.int64)
        position = {int(s): i for i, s in enumerate(steps)}
        out = {n: np.full(len(steps), math.nan) for n in names}
        if not len(names) or not len(steps):
            return steps, out
        marks = ",".join("?" * len(names))
        query = f"SELECT step, name, has_grad, {field} FROM stats WHERE name IN ({marks})"
        args: list[Any] = list(names)
        if len(steps) < len(held):
            query += " AND step IN (SELECT value FROM json_each(?))"
            args.append("[" + ",".join(str(int(s)) for s in steps) + "]")
        test = V.is_count if field in V.COUNT_FIELDS else V.is_figure
        for step, name, has_grad, value in self._rows(query, args):
            if not (type(has_grad) is int and has_grad in (0, 1) and test(value)):  # noqa: E721
                V.stat_value(step, name, "has_grad", has_grad, self.run.where)
                V.stat_value(step, name, field, value, self.run.where)
            i = position.get(step)
            if i is not None and has_grad:
                out[name][i] = _real(value)
        return steps, out

    def optimizer_series(self, name: str, after: int = -1,
                         until: int | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``(steps, {figure: values})`` of one parameter's optimizer figures after each step
        (PARAM_STEP_FIELDS beyond the accumulated norm: lr, exp_avg_norm, exp_avg_sq_rms,
        effective_lr, momentum_norm) and its ``update_ratio`` (inf where θ was 0), at every step
        in ``(after, until]``; NaN where a step has none. Two queries (one per table)."""
        fields = (*S.PARAM_STEP_FIELDS[1:], "update_ratio")
        high = V.MAX_STEP if until is None else int(until)
        bounds = (name, max(-1, min(int(after), V.MAX_STEP)), max(-1, min(high, V.MAX_STEP)))
        held = [V.step_number(s, self.run.where) for (s,) in self._rows(
            "SELECT step FROM steps WHERE step > ? AND step <= ? ORDER BY step", bounds[1:])]
        steps = np.array(held, dtype=np.int64)
        out = {f: np.full(len(steps), math.nan) for f in fields}
        if not len(steps):
            return steps, out
        position = {s: i for i, s in enumerate(held)}
        if S.PARAM_STEPS_TABLE in self.run._optional:
            for step, *values in self._rows(
                    f"SELECT step, {', '.join(S.PARAM_STEP_FIELDS)} FROM {S.PARAM_STEPS_TABLE} "
                    "WHERE name = ? AND step > ? AND step <= ?", bounds):
                checked = V.param_step_values(step, name, tuple(values), self.run.where)
                i = position.get(step)
                for f in fields[:-1]:
                    if i is not None and checked[f] is not None:
                        out[f][i] = _real(checked[f])
        for step, has_grad, value in self._rows(
                "SELECT step, has_grad, update_ratio FROM stats WHERE name = ? AND step > ? "
                "AND step <= ?", bounds):
            if not (type(has_grad) is int and V.is_figure(value)):  # noqa: E721
                V.stat_value(step, name, "has_grad", has_grad, self.run.where)
                V.stat_value(step, name, "update_ratio", value, self.run.where)
            i = position.get(step)
            if i is not None and has_grad and value is not None:
                out["update_ratio"][i] = _real(value)
        return steps, out

    def parameter_summaries(self) -> dict[str, ParameterSummary]:
        """Every parameter's largest norm and |g| over the run and its NaN/Inf steps, in the
        model's order (one pass over the run's figures, which checks each value it takes)."""
        columns = ("has_grad", "norm", "abs_max", "nan_count", "inf_count")
        sound = " AND ".join(["typeof(name) = 'text' AND typeof(has_grad) = 'integer' AND "
                              "has_grad IN (0, 1)", *(V.sql_test(c) for c in columns[1:])])
        rows = self._rows(
            "SELECT name, SUM(has_grad = 1), "
            "MAX(CASE WHEN has_grad = 1 AND typeof(norm) = 'real' THEN norm END), "
            "MAX(CASE WHEN has_grad = 1 AND typeof(abs_max) = 'real' THEN abs_max END), "
            "SUM(has_grad = 1 AND (nan_count > 0 OR inf_count > 0)), "
            "MIN(CASE WHEN has_grad = 1 AND (nan_count > 0 OR inf_count > 0) THEN step END), "
            f"MIN(CASE WHEN NOT ({sound}) THEN rowid END) FROM stats GROUP BY name")
        for *_, damaged in rows:
            if damaged is not None:  # the first damaged row, read again to say what is wrong
                step, name, *values = self._rows(f"SELECT step, name, {', '.join(columns)} FROM stats "
                                                 "WHERE rowid = ?", (damaged,))[0]
                V.stat_name(step, name, self.run.where)
                for column, value in zip(columns, values, strict=True):
                    V.stat_value(step, name, column, value, self.run.where)
        found = {r[0]: ParameterSummary(r[0], r[1], _real(r[2]), _real(r[3]), int(r[4] or 0), r[5])
                 for r in rows if r[1]}
        order = self.run.parameters
        return {n: found[n] for n in [*order, *sorted(set(found) - set(order))] if n in found}

    def flagged_steps(self) -> dict[int, list[str]]:
        """Steps a thinned export or view keeps whatever its stride, ``{step: [why, …]}`` in step
        order: a spike event's first and last step (``spike``, the events ``gradexplorer spikes``
        lists), a step whose loss, global norm or any gradient held NaN/Inf (``NaN/Inf``), a
        step the optimizer skipped (``skipped``, e.g. by a GradScaler)."""
        out: dict[int, list[str]] = {}

        def flag(step: int, why: str) -> None:
            whys = out.setdefault(int(step), [])
            if why not in whys:
                whys.append(why)

        for event in self.run.spike_events():
            flag(event.step, "spike")
            flag(event.until, "spike")
        steps, _, figures = self.step_figures()
        for key in ("loss", "global_norm"):
            for step, value in zip(steps.tolist(), figures.get(key, ()), strict=False):
                if value is not None and not math.isfinite(value):
                    flag(step, "NaN/Inf")
        for event in self.nonfinite_events():
            flag(event.step, "NaN/Inf")
        for step, ledger in zip(self.run.steps, self.run.ledger(), strict=True):  # one per step
            if ledger.skipped:
                flag(step, "skipped")
        return dict(sorted(out.items()))

    def nonfinite_events(self, limit: int = 20_000) -> list[NonFiniteEvent]:
        """Parameters holding NaN/±Inf, by step then model order: the first ``limit`` found in
        one pass in the order the steps were written (no sort of the run's figures)."""
        rows = self._rows("SELECT step, name, nan_count, inf_count FROM stats "
                          "WHERE nan_count > 0 OR inf_count > 0 LIMIT ?", (limit,))
        for step, name, nan, inf in rows:  # text and blobs sort above 0: they are here
            if not (type(step) is int and type(name) is str and V.is_count(nan)  # noqa: E721
                    and V.is_count(inf)):
                V.step_number(step, f"{self.run.where}, table stats")
                V.stat_name(step, name, self.run.where)
                V.stat_value(step, name, "nan_count", nan, self.run.where)
                V.stat_value(step, name, "inf_count", inf, self.run.where)
        order = {n: i for i, n in enumerate(self.run.parameters)}
        events = [NonFiniteEvent(s, n, a or 0, b or 0) for s, n, a, b in rows]
        return sorted(events, key=lambda e: (e.step, order.get(e.name, len(order))))

    def histogram_steps(self) -> list[int]:
        """Steps that hold histograms (the monitor may keep them on a cadence)."""
        steps = [r[0] for r in self._rows("SELECT DISTINCT step FROM histograms ORDER BY step")]
        for step in steps:
            if type(step) is not int:  # noqa: E721
                V.step_number(step, f"{self.run.where}, table histograms")
        return steps

    def histogram_matrix(self, name: str, steps: Sequence[int]) -> HistogramMatrix:
        """``name``'s histograms at those of ``steps`` that hold one, oldest first (each row
        checked: whole float64/int64 blobs, one more edge than counts)."""
        wanted = "[" + ",".join(str(int(s)) for s in steps) + "]"
        found = self._rows(
            "SELECT step, edges, counts, nan_count, inf_count, below, above FROM histograms "
            "WHERE name = ? AND step IN (SELECT value FROM json_each(?)) ORDER BY step", (name, wanted))
        rows = H.decode_block(found, self.run.version, int) if len(found) > 1 else None
        rows = rows or [(step, *H.decode(e, c, tuple(extras), self.run.version, lambda s=step: V.row_where(
                    self.run.where, "histograms", s, name))) for step, e, c, *extras in found]
        if not rows:
            return HistogramMatrix(np.zeros(0, np.int64), np.zeros((0, 0)), np.zeros((0, 0)))
        bins = rows[-1][2].size  # bins changed mid-run: keep the steps with the last step's count
        rows = [r for r in rows if r[2].size == bins]
        return HistogramMatrix(np.array([r[0] for r in rows], dtype=np.int64),
                               np.stack([r[1] for r in rows]), np.stack([r[2] for r in rows]),
                               np.array([r[3] + r[4] for r in rows], dtype=np.int64))

    def each_step(self, steps: Sequence[int] | None = None) -> Iterator[tuple[int, dict, dict]]:
        """``(step, stats, histograms)`` for each step (default all), oldest first: what an
        export streams, one step in memory at a time."""
        for step in self.run.steps if steps is None else steps:
            yield step, self.run.figures(step), self.run.histograms(step)
