"""Whole-run reads in a few queries: the step table (step figures and ledger as columns), the
per-parameter figures of many steps at once, and histograms decoded many rows at a time.

``Run`` answers one step at a time (one query per table per step); a report or export of a
100,000-step run read that way is 100,000 rounds of queries. Here the step figures and the
ledger of every step are one query each, and the figures and histograms of the steps an
export streams are read a block of steps at a time (one query per table per block). Every value
is checked as ``Run`` checks it (``validate.py``): fast tests over whole columns, the precise
check (which names table, column and step) only for a value that fails them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradexplorer.core.gc_pause import gc_paused
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs import histogram_rows as H
from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs import validate as V
from gradexplorer.core.runs.figure_block import FigureBlock, figure_block
from gradexplorer.core.snapshot.schema import MAX_BINS, MAX_COUNT
from gradexplorer.core.stats.records import Histogram
from gradexplorer.core.steps.ledger import LEDGER_FIELDS

# The columns ``decode_histograms`` reads, in its order (a histograms row's stored form).
HISTOGRAM_COLUMNS = ("edges", "counts", "nan_count", "inf_count", "below", "above")
# StepLedger.as_dict's numbers beyond the steps table's columns, in its order: the step
# figures a ledger adds (clipped/skipped are flags, skip_reason text, lr a list: not figures).
LEDGER_FIGURES = ("optimizer_step", "iteration", "micro_batches", "grad_norm_accumulated",
                  "grad_norm_applied", "clip_coef", "scale", "nan_count", "inf_count")
STEP_CHUNK = 256  # steps whose figures and histograms an export reads in one query per table


def decode_histograms(rows: Sequence[tuple], where: Callable[[int], str], version: int = 0
                      ) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray], np.ndarray]:
    """``(edges, counts, extras)`` of histograms rows (HISTOGRAM_COLUMNS each): float64 edges
    and int64 counts per row (views into one array per bin count: rows of one size are decoded
    and checked at once; a lean run's rows of one bin count as two (n, bins) arrays) and
    ``extras`` (n, 4) int64 (NaN, Inf, below, above). A row that fails
    the block's checks is read alone by ``validate.histogram_arrays``, whose one-line error names
    it (``where(i)``: where row ``i`` is). ``version``: the run's format (``Run.version``; a
    lean run's rows are read by ``histogram_rows``)."""
    if version >= S.LEAN:
        return _decode_lean(rows, where, version)
    n = len(rows)
    uniform = _uniform(rows)
    if uniform is not None:
        return uniform
    edges: list[Any] = [None] * n
    counts: list[Any] = [None] * n
    extras = np.zeros((n, 4), np.int64)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (e, c, *more) in enumerate(rows):
        if type(e) is bytes and type(c) is bytes and all(map(V.is_count, more)):  # noqa: E721
            groups.setdefault((len(e), len(c)), []).append(i)
        else:
            _one(rows, i, where, edges, counts, extras)
    for (e_len, c_len), index in groups.items():
        bins = c_len // 8
        if c_len % 8 or e_len != 8 * (bins + 1) or not 1 <= bins <= MAX_BINS:
            for i in index:
                _one(rows, i, where, edges, counts, extras)
            continue
        e = np.frombuffer(b"".join([rows[i][0] for i in index]), "<f8").astype(np.float64)
        c = np.frombuffer(b"".join([rows[i][1] for i in index]), "<i8").astype(np.int64)
        e, c = e.reshape(len(index), bins + 1), c.reshape(len(index), bins)
        sound = np.isfinite(e[:, 0]) & np.isfinite(e[:, -1]) & (np.diff(e, axis=1) >= 0).all(1) \
            & (c >= 0).all(1)
        if not sound.all():
            _one(rows, index[int(np.argmin(sound))], where, edges, counts, extras)  # raises
        extras[index] = np.array([[v or 0 for v in rows[i][2:]] for i in index], np.int64)
        for k, i in enumerate(index):
            edges[i], counts[i] = e[k], c[k]
    return edges, counts, extras


def _decode_lean(rows: Sequence[tuple], where: Callable[[int], str], version: int):
    """``decode_histograms`` of a lean run's rows: at once where they allow it
    (``histogram_rows.decode_block``), else row by row, each checked."""
    arrays = H.decode_arrays(rows) if rows else None
    if arrays is not None:  # one bin count, all sound: (n, bins) arrays, indexed as lists are
        return arrays
    block = [H.decode(row[0], row[1], tuple(row[2:]), version, lambda i=i: where(i))
             for i, row in enumerate(rows)]
    extras = np.array([[v or 0 for v in b[2:]] for b in block], np.int64).reshape(len(block), 4)
    return [b[0] for b in block], [b[1] for b in block], extras


def _uniform(rows: Sequence[tuple]):
    """``decode_histograms`` of rows that are all sound and of one bin count (as a run writes
    them), checked column by column; None when any is not (then each group is read apart)."""
    if not rows:
        return [], [], np.zeros((0, 4), np.int64)
    e_col, c_col, *more = zip(*rows, strict=True)
    if set(map(type, e_col)) != {bytes} or set(map(type, c_col)) != {bytes}:
        return None
    e_len, c_len = set(map(len, e_col)), set(map(len, c_col))
    if len(e_len) != 1 or len(c_len) != 1 or not all(set(map(type, m)) == {int} for m in more):
        return None
    bins = c_len.pop() // 8
    if e_len.pop() != 8 * (bins + 1) or not 1 <= bins <= MAX_BINS:
        return None
    extras = np.array(more, np.int64).T
    e = np.frombuffer(b"".join(e_col), "<f8").astype(np.float64).reshape(len(rows), bins + 1)
    c = np.frombuffer(b"".join(c_col), "<i8").astype(np.int64).reshape(len(rows), bins)
    if not (np.isfinite(e[:, [0, -1]]).all() and (e[:, 1:] >= e[:, :-1]).all() and (c >= 0).all()
            and (extras >= 0).all() and (extras <= MAX_COUNT).all()):
        return None
    return list(e), list(c), extras


def _one(rows, i, where, edges, counts, extras) -> None:
    e, c, *more = V.histogram_arrays(rows[i][0], rows[i][1], tuple(rows[i][2:]), lambda: where(i))
    edges[i], counts[i], extras[i] = e, c, more


@dataclass(frozen=True)
class StepTable:
    """Every step of a run as columns: ``steps`` (int64), ``times`` (float64 wall times),
    ``figures`` (``{figure: values}``: the steps table's and the ledger's numbers, None where a
    step has no value, NaN where it recorded NaN), ``skipped`` and ``clipped`` (bool)."""

    steps: np.ndarray
    times: np.ndarray
    figures: dict[str, list[float | None]]
    skipped: np.ndarray
    clipped: np.ndarray


_NUMBERS, _WHOLE = {float, int, type(None)}, {int, type(None)}


def _checked_column(values: tuple, test, explain: Callable[[int], Any], nan: bool = True) -> list:
    """``values`` as floats (None kept, 'nan' as NaN where ``nan``); the first that fails
    ``test`` otherwise is explained (``explain(i)`` raises the one-line error). A column of
    numbers only is tested by its set of types (and its range, for counts) at C speed."""
    types = set(map(type, values))
    if test is V.is_count:
        present = [v for v in values if v is not None] if type(None) in types else values
        sound = types <= _WHOLE and (not present or (min(present) >= 0 and max(present) <= V.MAX_COUNT))
    else:
        sound = types <= _NUMBERS
    out = values
    if not sound:
        out = list(values)
        for i, v in enumerate(values):
            if not test(v):
                if not (nan and v == "nan"):
                    explain(i)
                out[i] = math.nan
        types = set(map(type, out))
    if types <= {float, type(None)}:
        return list(out)
    if type(None) not in types:
        return list(map(float, out))
    return [None if v is None else float(v) for v in out]


_LEDGER_READ = (*LEDGER_FIGURES[1:], "skipped", "clipped")  # the ledger columns a step table reads


def step_table(run) -> StepTable:
    """The run's step table and ledger in one query (what ``Run.step_info`` gives a step at a
    time: a step without a ledger row has the ledger ``Run.step_ledger`` makes for it)."""
    with gc_paused():  # ~20 objects a step, kept till the end: no collector passes over them
        return _step_table(run)


def _step_table(run) -> StepTable:
    ledger = S.LEDGER_TABLE in run._optional
    query = f"SELECT {', '.join(f's.{c}' for c in V.STEP_COLUMNS)}"
    if ledger:
        query += (f", l.step, {', '.join(f'l.{c}' for c in _LEDGER_READ)} FROM steps s "
                  f"LEFT JOIN {S.LEDGER_TABLE} l ON l.step = s.step ORDER BY s.step")
    else:
        query += " FROM steps s ORDER BY s.step"
    table = run._rows(query)
    if not table:
        empty = np.zeros(0, bool)
        return StepTable(np.zeros(0, np.int64), np.zeros(0), {}, empty, empty)
    columns = list(zip(*table, strict=True))
    figures: dict[str, list] = {}
    width = len(V.STEP_COLUMNS)
    for key, values in zip(V.STEP_COLUMNS, columns, strict=False):
        count = key in ("total_numel", "ranks")
        figures[key] = _checked_column(values, V.is_count if count else V.is_figure,
                                       lambda i: V.step_row(table[i][:width], run.where), nan=not count)
    steps = np.array(columns[0], dtype=np.int64)
    del figures["step"]
    times = np.array(figures.pop("time"), np.float64)  # None: NaN
    n = len(steps)
    fallback: dict[str, list] = {  # a step without a ledger row: what step_ledger makes for it
        "optimizer_step": steps.astype(np.float64).tolist(),
        "grad_norm_applied": list(figures["global_norm"]),
        "nan_count": [0.0] * n, "inf_count": [0.0] * n}
    found = dict.fromkeys(LEDGER_FIGURES[1:], [None] * n) | fallback
    skipped = clipped = np.zeros(n, bool)
    if ledger:
        found, skipped, clipped = _ledger_columns(run, table, columns[width:], found)
    firsts = {}
    for key in LEDGER_FIGURES:
        column = found[key]
        if column[0] is not None:
            firsts[key] = 0
        elif column.count(None) < n:  # (a column of None only is left out)
            firsts[key] = next(i for i, v in enumerate(column) if v is not None)
    for key in sorted(firsts, key=lambda k: (firsts[k], LEDGER_FIGURES.index(k))):
        figures[key] = found[key]
    return StepTable(steps, times, figures, skipped, clipped)


def _ledger_columns(run, table: list[tuple], columns: list[tuple], fallback: dict[str, list]):
    """The ledger's figure columns (``fallback``'s values where a step has no ledger row) and
    its skipped and clipped flags, from the step table's joined ledger ``columns``."""
    held, *values = columns
    width = len(V.STEP_COLUMNS)

    def explain(i: int) -> None:
        V.ledger_values(table[i][0], tuple(dict(zip(_LEDGER_READ, table[i][width + 1:], strict=True))
                                           .get(f) for f in LEDGER_FIELDS), run.where)

    whole = None not in held  # every step has its ledger row (as watch writes them)
    out = dict(fallback)
    flags = []
    for key, column in zip(_LEDGER_READ, values, strict=True):
        checked = _checked_column(column, V.is_figure, explain)
        if key in ("skipped", "clipped"):
            flags.append(np.array(checked, bool))  # as ledger_from_row: None False, NaN True
            continue
        if key in ("nan_count", "inf_count") and None in checked:  # as ledger_from_row: no count is 0
            checked = [0.0 if v is None else v for v in checked]
        out[key] = checked if whole else [f if h is None else v for h, v, f in
                                          zip(held, checked, out[key], strict=True)]
    return out, flags[0], flags[1]


def _json_steps(steps: Sequence[int]) -> str:
    return "[" + ",".join(str(int(s)) for s in steps) + "]"


def parameter_figures(run, steps: Sequence[int], names: set[str] | None = None
                      ) -> dict[int, dict[str, dict[str, Any]]]:
    """``{step: {name: figures}}`` of ``steps`` in one query per table: what ``Run.figures``
    gives one step (STAT_FIELDS and PARAM_STEP_FIELDS, parameters with a gradient, model
    order); only ``names``' when given."""
    block = figure_block(run, steps, names)
    return {s: block.rows(k) for k, s in enumerate(block.steps.tolist())}


@dataclass(frozen=True)
class HistogramRows:
    """Histograms rows of a block of steps: row ``i`` is ``names[i]`` at ``steps[i]``, its
    ``edges[i]`` and ``counts[i]`` (views into one array per bin count; two (n, bins) arrays
    when all rows hold one bin count) and ``extras[i]`` (NaN, Inf, below, above)."""

    steps: list[int]
    names: list[str]
    edges: Sequence[np.ndarray]
    counts: Sequence[np.ndarray]
    extras: np.ndarray

    def by_step(self) -> dict[int, dict[str, Histogram]]:
        """``{step: {name: Histogram}}``, as ``Run.histograms`` gives a step."""
        out: dict[int, dict[str, Histogram]] = {}
        for step, name, e, c, more in zip(self.steps, self.names, self.edges, self.counts,
                                          self.extras.tolist(), strict=True):
            out.setdefault(step, {})[name] = Histogram(e, c, *more)
        return out


def histogram_rows(run, steps: Sequence[int], names: set[str] | None = None) -> HistogramRows:
    """The histograms of ``steps`` in one query (only ``names``' when given), by step."""
    rows = run._rows(f"SELECT step, name, {', '.join(HISTOGRAM_COLUMNS)} FROM histograms "
                     "WHERE step IN (SELECT value FROM json_each(?)) ORDER BY step", (_json_steps(steps),))
    if names is not None:
        rows = [r for r in rows if r[1] in names]
    columns = list(zip(*rows, strict=True)) if rows else [()] * (2 + len(HISTOGRAM_COLUMNS))
    if rows and set(map(type, columns[1])) != {str}:
        step, name = next((r[0], r[1]) for r in rows if type(r[1]) is not str)  # noqa: E721
        raise UserError(f"{run.where}, table histograms at step {step} holds a parameter name "
                        f"of type {type(name).__name__}")
    arrays = H.decode_columns(columns[2], columns[3], columns[4:]) \
        if rows and run.version >= S.LEAN else None  # as a run writes them: all at once
    edges, counts, extras = arrays if arrays is not None else decode_histograms(
        [r[2:] for r in rows], lambda i: V.row_where(run.where, "histograms", rows[i][0], rows[i][1]),
        run.version)
    return HistogramRows(list(columns[0]), list(columns[1]), edges, counts, extras)


def figure_blocks(run, steps: Sequence[int], names: Sequence[str] | None = None,
                  histograms: bool = True, chunk: int = STEP_CHUNK, optimizer: bool = True
                  ) -> Iterator[tuple[FigureBlock, HistogramRows | None]]:
    """``(FigureBlock, HistogramRows)`` of ``steps`` (None without ``histograms``), ``chunk`` steps at a time
    (one query per table per chunk; a chunk's rows in memory at a time): what an export reads
    (without ``optimizer``, no optimizer figures: what reads only STAT_FIELDS skips)."""
    keep = None if names is None else set(names)
    steps = [int(s) for s in steps]
    for start in range(0, len(steps), chunk):
        block = steps[start:start + chunk]
        yield (figure_block(run, block, keep, optimizer),
               histogram_rows(run, block, keep) if histograms else None)


def step_blocks(run, steps: Sequence[int], names: Sequence[str] | None = None,
                histograms: bool = True, chunk: int = STEP_CHUNK
                ) -> Iterator[tuple[int, dict[str, dict[str, Any]], dict[str, Histogram]]]:
    """``(step, figures, histograms)`` for each of ``steps`` in order, as ``Run.figures`` and
    ``Run.histograms`` give them, read ``chunk`` steps at a time (``figure_blocks``)."""
    for block, rows in figure_blocks(run, steps, names, histograms, chunk):
        hists = {} if rows is None else rows.by_step()
        for k, step in enumerate(block.steps.tolist()):
            yield step, block.rows(k), hists.get(step, {})
