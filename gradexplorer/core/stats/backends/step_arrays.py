"""A step's records built from a backend's raw figures: every parameter's figures in one call
(the Numba row kernel ``kernels_rows`` where it loads, numpy otherwise), kept as arrays
(``ArrayStepGradients``: ParamStats and Histograms built when first read)."""

from __future__ import annotations

import math
import threading
from dataclasses import fields
from operator import itemgetter

import numpy as np

from gradexplorer.core.messages.errors import first_line, warn_not_recorded
from gradexplorer.core.stats import STAT_FIELDS
from gradexplorer.core.stats.backends import raw as C
from gradexplorer.core.stats.backends import warmup as stats_warmup
from gradexplorer.core.stats.backends.raw import RawStats
from gradexplorer.core.stats.histogram import HistRange
from gradexplorer.core.stats.records import Histogram, ParamStats, StepGradients, _global_norm

_ROW_KERNEL: tuple | None = None  # (stat_columns, COLUMNS), or () where Numba cannot load


def _row_kernel() -> tuple:
    """``kernels_rows.stat_columns`` imported on first use (not at import: the app and a run's
    readers import this module without Numba); () when it cannot load, or is not loaded yet
    (``backends.warmup``: numpy meanwhile)."""
    global _ROW_KERNEL
    if _ROW_KERNEL is None:
        if not stats_warmup.ready():
            return ()
        try:
            from gradexplorer.core.stats.backends.numba.kernels_rows import COLUMNS, stat_columns
            _ROW_KERNEL = (stat_columns, COLUMNS)
        except Exception:  # noqa: BLE001 - no Numba, or no kernel cache: numpy does it
            _ROW_KERNEL = ()
    return _ROW_KERNEL


class Figures:
    """A step's figures as the backend left them: ``sizes`` (one per parameter with a
    gradient), ``rows`` (each one's norm, mean, std, min, max, max |g|, zero fraction and
    update ratio, Python floats) and ``counts`` (its NaN and Inf counts, ints); no update
    ratios unless ``with_update``. ``column`` reads one figure of every row without a
    ParamStats each."""

    __slots__ = ("counts", "rows", "sizes", "with_update")

    def __init__(self, sizes: list[int], rows: list[list[float]], counts: list[list[int]],
                 with_update: bool) -> None:
        self.sizes, self.rows, self.counts, self.with_update = sizes, rows, counts, with_update

    def column(self, field: str) -> list:
        """``field`` (one of STAT_FIELDS) of every row."""
        k = _FIELD_INDEX[field]  # itemgetter maps: no Python call per row
        if k < 7:
            return list(map(_ITEM[k], self.rows))
        if k < 9:
            return list(map(_ITEM[k - 7], self.counts))
        return list(map(_ITEM[7], self.rows)) if self.with_update else [None] * len(self.rows)

    def stats(self, named_shapes: list[tuple[str, tuple[int, ...]]]) -> list[ParamStats]:
        """A ParamStats for every row (``named_shapes``: the rows' names and shapes)."""
        if self.with_update:
            return [ParamStats(name, shape, size, True, *row[:7], *count, row[7])
                    for (name, shape), size, row, count in zip(named_shapes, self.sizes, self.rows,
                                                               self.counts, strict=True)]
        return [ParamStats(name, shape, size, True, *row[:7], *count)
                for (name, shape), size, row, count in zip(named_shapes, self.sizes, self.rows,
                                                           self.counts, strict=True)]


_FIELD_INDEX = {f: k for k, f in enumerate(STAT_FIELDS)}
_ITEM = [itemgetter(k) for k in range(8)]


def _figures(named_shapes: list[tuple[str, tuple[int, ...]]], raw: RawStats) -> Figures:
    """The Figures of every row of ``raw`` at once: one Numba call (``kernels_rows``) where it
    loads, else numpy column by column; the same figures bit for bit either way."""
    kernel = _row_kernel()
    if not kernel:
        return _figures_numpy(named_shapes, raw)
    stat_columns, width = kernel
    sizes = [math.prod(shape) for _, shape in named_shapes]
    m = raw.moments
    out, counts = np.empty((len(sizes), width)), np.empty((len(sizes), 2), np.int64)
    update = raw.update if raw.update is not None else m
    stat_columns(m, np.array(sizes, np.float64), update, raw.update is not None, out, counts)
    return Figures(sizes, out.tolist(), counts.tolist(), raw.update is not None)


def _figures_numpy(named_shapes: list[tuple[str, tuple[int, ...]]], raw: RawStats) -> Figures:
    """``_figures`` by numpy, column by column (where the Numba kernel cannot load)."""
    m = raw.moments
    numel = np.array([math.prod(shape) for _, shape in named_shapes], dtype=np.float64)
    finite = m[:, C.FINITE]
    some = finite > 0
    scale = m[:, C.SCALE]
    with np.errstate(all="ignore"):
        shifted = m[:, C.DSUM] / finite
        mean = np.where(some, m[:, C.SHIFT] + scale * shifted, np.nan)
        spread = np.maximum(m[:, C.DSQ] / finite - shifted * shifted, 0.0)
        std = np.where(some, scale * np.sqrt(spread), np.nan)
        low = np.where(some, m[:, C.MIN], np.nan)
        high = np.where(some, m[:, C.MAX], np.nan)
        columns = [
            scale * np.sqrt(m[:, C.NSQ]), mean, std, low, high,
            np.maximum(np.abs(low), np.abs(high)),
            np.where(numel > 0, m[:, C.ZEROS] / np.maximum(numel, 1), 0.0),
        ]
        ratio = np.zeros(len(numel))
        if raw.update is not None:
            delta, before = raw.update[:, 0], raw.update[:, 1]
            ratio = np.where(before > 0, delta / before, np.where(delta == 0, 0.0, np.inf))
            ratio = np.where(np.isnan(delta) | np.isnan(before), np.nan, ratio)
    # one row of Python numbers per parameter, transposed at once (no Python work per figure)
    rows = np.stack([*columns, ratio], 1).tolist()
    counts = m[:, C.NANS:C.INFS + 1].astype(np.int64).tolist()
    return Figures(numel.astype(np.int64).tolist(), rows, counts, raw.update is not None)


def _stats_rows(named_shapes: list[tuple[str, tuple[int, ...]]], raw: RawStats) -> list[ParamStats]:
    """ParamStats for every row of ``raw`` (``_figures``: the Numba kernel where it loads)."""
    return _figures(named_shapes, raw).stats(named_shapes)


def _stats_rows_numpy(named_shapes: list[tuple[str, tuple[int, ...]]], raw: RawStats) -> list[ParamStats]:
    """``_stats_rows`` by numpy, column by column (where the Numba kernel cannot load)."""
    return _figures_numpy(named_shapes, raw).stats(named_shapes)


class _BuiltOnRead:
    """A field of ArrayStepGradients (``params``, ``histograms``) built from the step's arrays
    the first time it is read (``_lazy``), kept as ``_<name>``; setting it replaces it."""

    def __set_name__(self, owner, name: str) -> None:
        self.key = "_" + name

    def __get__(self, record, owner=None):
        if record is None:
            return self
        found = record.__dict__.get(self.key)
        return found if found is not None else record._lazy(self.key)

    def __set__(self, record, value) -> None:
        record.__dict__[self.key] = value


class ArrayStepGradients(StepGradients):
    """StepGradients whose ``params`` and ``histograms`` are built from the step's arrays the
    first time they are read (the same ParamStats and Histograms, the same figures): a step
    nobody reads costs no object per parameter. ``column`` and ``nonfinite_totals`` read the
    arrays as they are."""

    _lock = threading.Lock()  # one build, whichever thread (the run directory's writer) reads first

    def _lazy(self, what: str):
        with self._lock:
            built = self.__dict__.get(what)
            if built is None:
                built = self._build_params() if what == "_params" else self._build_histograms()
                self.__dict__[what] = built
        return built

    params = _BuiltOnRead()  # dict[str, ParamStats]
    histograms = _BuiltOnRead()  # dict[str, Histogram]

    def _build_params(self) -> dict[str, ParamStats]:
        present, figures, named_shapes, has_grad = self._arrays[:4]
        rows = figures.stats(present)
        if len(present) == len(named_shapes):
            return {s.name: s for s in rows}
        found = iter(rows)
        return {name: next(found) if h else ParamStats(name, shape, math.prod(shape), False)
                for (name, shape), h in zip(named_shapes, has_grad, strict=True)}

    def _histogram_arrays(self) -> tuple | None:
        """The step's ``(edges, counts, extra)`` (waiting for counts the worker thread is still
        computing), or None: no histograms, or their computing failed (one warning)."""
        try:
            return self._arrays[4].histogram_arrays()
        except Exception as exc:  # noqa: BLE001 - never break the loop: the step has none
            warn_not_recorded("the histograms", first_line(exc), self._warned,
                              f" of step {self.step}")
            return None

    def _build_histograms(self) -> dict[str, Histogram]:
        found = self._histogram_arrays()
        if found is None:
            return {}
        edges, counts, extra = found
        return {name: Histogram(e, c, nans, infs, below, above)
                for (name, _), e, c, (below, above, nans, infs)
                in zip(self._arrays[0], edges, counts, extra.tolist(), strict=True)}

    def column(self, field: str) -> dict[str, float | int | None]:
        if self.__dict__.get("_params") is not None:  # built (and perhaps changed): read it
            return super().column(field)
        present, figures, named_shapes, has_grad = self._arrays[:4]
        if len(present) == len(named_shapes):
            return dict(zip(map(_ITEM[0], present), figures.column(field), strict=True))
        values = iter(figures.column(field))
        return {name: next(values) if h else None
                for (name, _), h in zip(named_shapes, has_grad, strict=True)}

    def columns(self, *names: str) -> tuple[list[str], list[list]]:
        if self.__dict__.get("_params") is not None:  # built (and perhaps changed): read it
            return super().columns(*names)
        present, figures, named_shapes, has_grad = self._arrays[:4]
        whole = len(present) == len(named_shapes)
        found = []
        for f in names:
            if f == "numel":
                found.append(figures.sizes if whole else [math.prod(shape) for _, shape in named_shapes])
            elif f == "has_grad":
                found.append(list(has_grad))
            elif whole:
                found.append(figures.column(f))
            else:  # None for those without a gradient
                values = iter(figures.column(f))
                found.append([next(values) if h else None for h in has_grad])
        return list(map(_ITEM[0], named_shapes)), found

    def histogram_block(self) -> list[tuple[list[str], np.ndarray, np.ndarray, np.ndarray]]:
        found = None if self.__dict__.get("_histograms") is not None else self._histogram_arrays()
        if found is None:
            return super().histogram_block()
        edges, counts, extra = found  # extra: below, above, NaN, Inf
        return [(list(map(_ITEM[0], self._arrays[0])), np.ascontiguousarray(edges, np.float64),
                 np.ascontiguousarray(counts, np.int64), extra[:, [2, 3, 0, 1]].astype(np.int64))]

    def nonfinite_totals(self) -> tuple[int, int]:
        if self.__dict__.get("_params") is not None:
            return super().nonfinite_totals()
        figures = self._arrays[1]
        return sum(map(_ITEM[0], figures.counts)), sum(map(_ITEM[1], figures.counts))

    def __eq__(self, other) -> bool:
        if not isinstance(other, StepGradients):
            return NotImplemented
        names = [f.name for f in fields(StepGradients)]  # as the dataclass compares: tuples
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    __hash__ = None


def build_step_gradients(step: int, named_shapes: list[tuple[str, tuple[int, ...]]],
                         has_grad: list[bool], raw: RawStats, bins: int,
                         hist_range: HistRange, warned: set | None = None) -> StepGradients:
    """Assemble a StepGradients from a backend's RawStats (rows only for params with grads):
    its figures kept as arrays, ParamStats and Histograms built when first read; ``warned``:
    the warnings already given (histograms that fail on the worker warn once per cause)."""
    present = named_shapes if all(has_grad) else \
        [ns for ns, h in zip(named_shapes, has_grad, strict=True) if h]
    figures = _figures(present, raw)
    record = ArrayStepGradients(step, _global_norm(figures.column("norm"), figures.column("nan_count"),
                                                   figures.column("inf_count")),
                                sum(figures.sizes), None, None, bins, hist_range)
    record._arrays = (present, figures, named_shapes, has_grad, raw)
    record._warned = warned
    return record
