"""A run in long form, one row per step × parameter × figure: CSV and Parquet files that open
in pandas (``pd.read_csv`` / ``pd.read_parquet``).

Columns: ``step``, ``wall_time`` (seconds since the epoch when the step was written),
``parameter`` (empty for figures of the whole step: loss, global norm, step seconds and the
step's other recorded numbers), ``figure`` (a STAT_FIELDS name such as ``norm``, or a step
figure) and ``value`` (a gradient holding NaN/Inf: ``norm`` and ``abs_max`` nan/inf).
With histograms, each bin is a row of figure ``hist_count`` whose
``bin_lo``/``bin_hi`` give the bin's edges (empty on other rows), and ``hist_below`` /
``hist_above`` count the values outside a fixed range.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

from gradexplorer.core.messages.printable import spreadsheet_cell
from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.share.output import atomic_output, optional_import
from gradexplorer.core.stats.records import STAT_FIELDS, whole_figures

COLUMNS = ("step", "wall_time", "parameter", "figure", "value", "bin_lo", "bin_hi")
Row = tuple[int, float, str, str, float, float, float]


def long_rows(history: RunHistory, steps: Sequence[int] | None = None,
              params: Sequence[str] | None = None, histograms: bool = False,
              figures: Sequence[str] = STAT_FIELDS, progress=None) -> Iterator[Row]:
    """Every figure of the run as rows, step by step (one step in memory at a time);
    ``progress(step)`` is called after each step's rows."""
    all_steps, times, step_figures = history.step_figures()
    wanted = all_steps.tolist() if steps is None else sorted(set(steps))
    index = {s: i for i, s in enumerate(all_steps.tolist())}
    nan = math.nan
    blocks = history.step_blocks([s for s in wanted if s in index], params, histograms)
    for step, stats, hists in blocks:  # a block of steps read per query
        i = index[step]
        t = float(times[i])
        for figure, values in step_figures.items():
            if values[i] is not None:
                yield step, t, "", figure, values[i], nan, nan
        for name, figs in stats.items():
            figs = whole_figures(figs)  # a NaN/Inf gradient's norm: nan/inf, not its finite part's
            for field in figures:
                value = figs.get(field)
                yield step, t, name, field, nan if value is None else float(value), nan, nan
            h = hists.get(name)
            if h is None:
                continue
            edges = h.edges.tolist()
            for k, count in enumerate(h.counts.tolist()):
                yield step, t, name, "hist_count", float(count), edges[k], edges[k + 1]
            yield step, t, name, "hist_below", float(h.below), nan, nan
            yield step, t, name, "hist_above", float(h.above), nan, nan
        if progress is not None:
            progress(step)


def write_csv_long(rows: Iterator[Row], path: str | Path) -> int:
    """Write the rows as CSV (floats exact: ``repr``; a name a spreadsheet would evaluate,
    such as ``=cmd|…``, gets a leading ``'``: ``core.messages.printable.spreadsheet_cell``); returns
    how many."""
    count = 0
    with atomic_output(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(COLUMNS)
        for step, t, name, figure, value, lo, hi in rows:
            writer.writerow((step, repr(t), spreadsheet_cell(name), spreadsheet_cell(figure), repr(value),
                             "" if math.isnan(lo) else repr(lo), "" if math.isnan(hi) else repr(hi)))
            count += 1
    return count


def write_parquet_long(rows: Iterator[Row], path: str | Path, batch: int = 200_000) -> int:
    """Write the rows as one Parquet file (pyarrow, in row groups of ``batch``)."""
    pa = optional_import("pyarrow", "--to parquet")
    pq = optional_import("pyarrow.parquet", "--to parquet")
    schema = pa.schema([("step", pa.int64()), ("wall_time", pa.float64()),
                        ("parameter", pa.string()), ("figure", pa.string()),
                        ("value", pa.float64()), ("bin_lo", pa.float64()), ("bin_hi", pa.float64())])
    count = 0
    with atomic_output(path) as tmp:
        writer = pq.ParquetWriter(str(tmp), schema)
        try:
            chunk: list[Row] = []
            for row in rows:
                chunk.append(row)
                if len(chunk) >= batch:
                    writer.write_table(_table(pa, schema, chunk))
                    count += len(chunk)
                    chunk = []
            if chunk or not count:
                writer.write_table(_table(pa, schema, chunk))
                count += len(chunk)
        finally:
            writer.close()
    return count


def _table(pa, schema, chunk: list[Row]):
    columns = list(zip(*chunk, strict=True)) if chunk else [[] for _ in COLUMNS]
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                                schema=schema)
