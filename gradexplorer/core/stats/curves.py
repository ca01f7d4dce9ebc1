"""Curves as people expect them: TensorBoard's smoothing, display downsampling, CSV text."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

import numpy as np

from gradexplorer.core.messages.printable import spreadsheet_cell


def ema_smooth(values: Sequence[float] | np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased exponential moving average, ``weight`` in [0, 1).

    As TensorBoard's scalar dashboard computes it: ``last = last·w + (1 − w)·x`` over the finite
    points, each divided by the debias factor ``1 − w^k`` (k: finite points so far), so the first
    point is itself and not pulled towards 0. Non-finite points are passed through unchanged and
    do not enter the average; a constant curve is returned as it is. ``weight = 0`` is no smoothing.
    """
    x = np.asarray(values, dtype=np.float64)
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    out = x.copy()
    finite = np.isfinite(x)
    if weight == 0.0 or not finite.any() or np.all(x == x[0]):
        return out
    from scipy.signal import lfilter

    kept = x[finite]
    last = lfilter([1.0 - weight], [1.0, -weight], kept)  # last_k = w·last_{k-1} + (1-w)·x_k
    k = np.arange(1, len(kept) + 1, dtype=np.float64)
    out[finite] = last / (1.0 - weight ** k)
    return out


def downsample_peaks(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points of ``(x, y)`` for drawing, keeping every bucket's lowest and
    highest point in their order (so a one-step spike survives); short curves come back whole.

    Non-finite points are kept where they fall (a NaN step is an event to show, not to hide)."""
    x, y = np.asarray(x), np.asarray(y, dtype=np.float64)
    n = len(x)
    if n <= max_points or max_points < 4:
        return x, y
    buckets = max_points // 2
    bounds = np.linspace(0, n, buckets + 1).astype(np.int64)
    starts, sizes = bounds[:-1], np.diff(bounds)
    index = starts[:, None] + np.arange(sizes.max())  # (bucket, place): padded to the longest
    inside = index < bounds[1:, None]
    values = y[np.minimum(index, n - 1)]
    bad = ~np.isfinite(values) & inside
    has_bad = bad.any(axis=1)
    first_bad = starts + bad.argmax(axis=1)  # a bucket's first non-finite point, where it has one
    lo = starts + np.where(inside, values, np.inf).argmin(axis=1)  # first lowest, first highest
    hi = starts + np.where(inside, values, -np.inf).argmax(axis=1)
    first = np.where(has_bad, first_bad, np.minimum(lo, hi))
    second = np.where(has_bad | (lo == hi), -1, np.maximum(lo, hi))
    index = np.stack([first, second], axis=1).ravel()
    index = index[index >= 0]
    return x[index], y[index]


def thin_steps(steps: Sequence[int], max_count: int) -> list[int]:
    """At most ``max_count`` of ``steps``, evenly spread, always with the first and last."""
    steps = list(steps)
    if len(steps) <= max_count:
        return steps
    picks = np.unique(np.linspace(0, len(steps) - 1, max_count).round().astype(np.int64))
    return [steps[i] for i in picks]


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A curve or table as CSV (floats written with ``repr``: exact on reading back; text a
    spreadsheet would evaluate gets a leading ``'``: ``core.messages.printable.spreadsheet_cell``)."""

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else float.__repr__(v) if isinstance(v, float)
                         else spreadsheet_cell(v) for v in row])
    return out.getvalue()


def write_csv(path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Write a curve or table to ``path`` as CSV, atomically."""
    from pathlib import Path

    from gradexplorer.core.files.atomic_file import write_atomic

    write_atomic(Path(path), csv_text(header, rows).encode("utf-8"))
