"""The whole run at once, for reports, exports and the app's run-wide views.

``Run`` answers one step at a time; a 10,000-step run read that way is 10,000 queries of every
parameter. ``RunHistory`` asks the run's database for a run-wide figure in one query each
(the step figures and ledger, curves of chosen parameters, per-parameter summaries, NaN/Inf
events), for histograms only at the steps a view shows, and streams a block of steps per query to
an export (``columns.py``). It reads through the Run's own read-only connection and checks
every value it takes as the Run does (``validate.py``): a damaged run is the same one-line
UserError, never a traceback or a figure read from garbage.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradexplorer.core.runs import param_summaries as PS
from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs import validate as V
from gradexplorer.core.runs.columns import (
    HISTOGRAM_COLUMNS,
    StepTable,
    decode_histograms,
    step_blocks,
    step_table,
)
from gradexplorer.core.runs.run import Run
from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.core.stats.records import STAT_FIELDS, whole_figure


def _real(value: float | int | str | None) -> float:
    """A checked figure as a float (no value: NaN; SQLite keeps NaN as the text 'nan')."""
    return math.nan if value is None else float(value)


def _fill_sound(rows: list[tuple], field: str, test, position: dict[int, int],
                out: dict[str, np.ndarray]) -> bool:
    """``stat_series``' values of ``rows`` (step, name, has_grad, value, nan_count, inf_count)
    put into ``out`` a column at a time, when every column is of the kinds a run writes
    (tested by sets of types at C speed); False (nothing put) otherwise."""
    if not rows:
        return True
    steps, names, grads, values, nans, infs = zip(*rows, strict=True)
    counts = (*nans, *infs, *values) if test is V.is_count else (*nans, *infs)
    kinds = {int, type(None)}
    if not (set(map(type, steps)) == {int} and set(map(type, grads)) == {int} and set(grads) <= {0, 1}
            and set(map(type, values)) <= ({int, float, type(None)} if test is V.is_figure else kinds)
            and set(map(type, counts)) <= kinds and set(map(type, names)) <= {str}):
        return False
    present = [v for v in counts if v is not None]
    if present and (min(present) < 0 or max(present) > V.MAX_COUNT):
        return False
    at = np.fromiter(map(position.get, steps, itertools.repeat(-1)), np.int64, len(steps))
    with np.errstate(invalid="ignore"):
        value = np.array(values, np.float64)  # None: NaN
        if field in ("norm", "abs_max"):  # whole_figure: NaN where NaN, else inf where ±Inf
            value[np.array(infs, np.float64) > 0] = math.inf
            value[np.array(nans, np.float64) > 0] = math.nan
    order = {name: k for k, name in enumerate(out)}
    row = np.fromiter(map(order.get, names, itertools.repeat(-1)), np.int64, len(names))
    kept = (at >= 0) & (row >= 0) & np.array(grads, bool)
    table = np.full((len(out), len(position)), math.nan)
    table[row[kept], at[kept]] = value[kept]
    for name, k in order.items():
        out[name][:] = table[k]
    return True


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
        table = step_table(self.run)  # one query per table (run_columns.py)
        return table.steps, table.times, table.figures

    def step_count(self) -> int:
        """How many steps the run holds (one count, no list of them)."""
        return self._rows("SELECT COUNT(*) FROM steps")[0][0]

    def step_table(self) -> StepTable:
        """Every step's figures and ledger as columns, with its skipped and clipped flags."""
        return step_table(self.run)

    # -- parameters ----------------------------------------------------------------
    def stat_series(self, field: str, names: Sequence[str],
                    steps: Sequence[int] | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``(steps, {name: values})`` of one STAT_FIELDS figure of ``names`` (NaN where a step
        has none), at ``steps`` (default: every step), in one query. ``norm`` and ``abs_max``
        are the whole gradient's (``whole_figure``): NaN at a step whose gradient held a NaN,
        inf at one that held ±Inf, never the finite part's figure."""
        if field not in STAT_FIELDS:
            raise ValueError(f"unknown figure {field!r}; one of {', '.join(STAT_FIELDS)}")
        if steps is None:
            steps = self.run.steps
            held = len(steps)
        else:
            held = self.step_count()  # (a count: no list of every step)
        steps = np.asarray(steps, dtype=np.int64)
        position = {int(s): i for i, s in enumerate(steps)}
        out = {n: np.full(len(steps), math.nan) for n in names}
        if not len(names) or not len(steps):
            return steps, out
        marks = ",".join("?" * len(names))
        query = (f"SELECT step, name, has_grad, {field}, nan_count, inf_count FROM stats "
                 f"WHERE name IN ({marks})")
        args: list[Any] = list(names)
        if len(steps) < held:
            query += " AND step IN (SELECT value FROM json_each(?))"
            args.append("[" + ",".join(str(int(s)) for s in steps) + "]")
        test = V.is_count if field in V.COUNT_FIELDS else V.is_figure
        rows = self._rows(query, args)
        if _fill_sound(rows, field, test, position, out):  # as a run writes them: at once
            return steps, out
        for step, name, has_grad, value, nan, inf in rows:
            if not (type(has_grad) is int and has_grad in (0, 1) and test(value)  # noqa: E721
                    and V.is_count(nan) and V.is_count(inf)):
                V.stat_value(step, name, "has_grad", has_grad, self.run.where)
                V.stat_value(step, name, field, value, self.run.where)
                V.stat_value(step, name, "nan_count", nan, self.run.where)
                V.stat_value(step, name, "inf_count", inf, self.run.where)
            i = position.get(step)
            if i is not None and has_grad:
                out[name][i] = _real(whole_figure(field, value, nan, inf))
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
        kept = PS.kept_summaries(self.run)  # a long run's steps up to its last fold, summed up
        after = kept[0] if kept else None
        rows = self._plain_summaries(after)
        if rows is None:
            rows = self._checked_summaries(after)
        if kept:
            rows = PS.merged(kept[1], rows)
        found = {r[0]: ParameterSummary(r[0], r[1], _real(r[2]), _real(r[3]), int(r[4] or 0), r[5])
                 for r in rows if r[1]}
        order = self.run.parameters
        return {n: found[n] for n in [*order, *sorted(set(found) - set(order))] if n in found}

    def _plain_summaries(self, after: int | None = None) -> list[tuple] | None:
        """``_checked_summaries``' rows when every parameter had a gradient at every step and
        every figure is a number (as a run's are; SQLite's MIN/MAX tell: text and blobs sort
        above numbers), a third cheaper; None otherwise. Only the steps after ``after``
        when given."""
        where = "" if after is None else f"WHERE step > {int(after)} "
        figures = ("SUM(has_grad), MAX(norm), MAX(abs_max), SUM(nan_count > 0 OR inf_count > 0), "
                   "MIN(CASE WHEN nan_count > 0 OR inf_count > 0 THEN step END), MIN(has_grad), "
                   "MAX(has_grad), MIN(nan_count), MAX(nan_count), MIN(inf_count), MAX(inf_count), "
                   "SUM(typeof(nan_count) = 'real' OR typeof(inf_count) = 'real')")
        if self.run.version >= S.LEAN:  # by parameter id, names joined to the few groups after
            rows = self._rows(f"SELECT n.name, g.* FROM (SELECT param, {figures} FROM "
                              f"{S.LEAN_TABLES['stats']} {where}GROUP BY param) AS g LEFT JOIN "
                              f"{S.NAMES_TABLE} AS n ON n.id = g.param")
            rows = [(r[0], *r[2:]) for r in rows]
        else:
            rows = self._rows(f"SELECT name, {figures} FROM stats {where}GROUP BY name")
        for name, _, norm, abs_max, _, _, low, high, *counts, reals in rows:
            if type(name) is not str or low != 1 or high != 1 or type(low) is not int or reals \
                    or not all(V.is_figure(v) for v in (norm, abs_max)) \
                    or not all(V.is_count(v) for v in counts):  # noqa: E721
                return None
        return [r[:6] for r in rows]

    def _checked_summaries(self, after: int | None = None) -> list[tuple]:
        """Per parameter: name, steps with a gradient, largest norm and |g|, NaN/Inf steps and
        the first of them, each value checked (the first damaged row named); only the steps
        after ``after`` when given."""
        columns = ("has_grad", "norm", "abs_max", "nan_count", "inf_count")
        sound = " AND ".join(["typeof(name) = 'text' AND typeof(has_grad) = 'integer' AND "
                              "has_grad IN (0, 1)", *(V.sql_test(c) for c in columns[1:])])
        rows = self._rows(
            "SELECT name, SUM(has_grad = 1), "
            "MAX(CASE WHEN has_grad = 1 AND typeof(norm) = 'real' THEN norm END), "
            "MAX(CASE WHEN has_grad = 1 AND typeof(abs_max) = 'real' THEN abs_max END), "
            "SUM(has_grad = 1 AND (nan_count > 0 OR inf_count > 0)), "
            "MIN(CASE WHEN has_grad = 1 AND (nan_count > 0 OR inf_count > 0) THEN step END), "
            f"MIN(CASE WHEN NOT ({sound}) THEN rowid END) FROM stats "
            + ("" if after is None else f"WHERE step > {int(after)} ") + "GROUP BY name")
        for *_, damaged in rows:
            if damaged is not None:  # the first damaged row, read again to say what is wrong
                step, name, *values = self._rows(f"SELECT step, name, {', '.join(columns)} FROM stats "
                                                 "WHERE rowid = ?", (damaged,))[0]
                V.stat_name(step, name, self.run.where)
                for column, value in zip(columns, values, strict=True):
                    V.stat_value(step, name, column, value, self.run.where)
        return [r[:6] for r in rows]

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
        table = step_table(self.run)
        steps = table.steps.tolist()
        for key in ("loss", "global_norm"):
            for step, value in zip(steps, table.figures.get(key, ()), strict=False):
                if value is not None and not math.isfinite(value):
                    flag(step, "NaN/Inf")
        for event in self.nonfinite_events():
            flag(event.step, "NaN/Inf")
        for step in table.steps[table.skipped].tolist():
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
        rows = self._rows(f"SELECT step, {', '.join(HISTOGRAM_COLUMNS)} FROM histograms WHERE name = ? "
                          "AND step IN (SELECT value FROM json_each(?)) ORDER BY step", (name, wanted))
        if not rows:
            return HistogramMatrix(np.zeros(0, np.int64), np.zeros((0, 0)), np.zeros((0, 0)))
        edges, counts, extras = decode_histograms(
            [r[1:] for r in rows], lambda i: V.row_where(self.run.where, "histograms", rows[i][0], name),
            self.run.version)
        bins = counts[-1].size  # bins changed mid-run: keep the steps with the last step's count
        kept = [i for i, c in enumerate(counts) if c.size == bins]
        return HistogramMatrix(np.array([rows[i][0] for i in kept], dtype=np.int64),
                               np.stack([edges[i] for i in kept]), np.stack([counts[i] for i in kept]),
                               extras[kept, 0] + extras[kept, 1])

    def each_step(self, steps: Sequence[int] | None = None) -> Iterator[tuple[int, dict, dict]]:
        """``(step, stats, histograms)`` for each step (default all), oldest first: what an
        export streams, one step in memory at a time."""
        yield from self.step_blocks(steps)

    def step_blocks(self, steps: Sequence[int] | None = None, names: Sequence[str] | None = None,
                    histograms: bool = True) -> Iterator[tuple[int, dict, dict]]:
        """``each_step`` of only ``names``' figures (default all), with or without histograms:
        a block of steps read in one query per table (``runs.columns.step_blocks``)."""
        yield from step_blocks(self.run, self.run.steps if steps is None else steps, names, histograms)
