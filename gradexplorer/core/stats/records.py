"""What the gradient monitor reports each step: ParamStats, Histogram, StepGradients."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gradexplorer.core.stats import raw as C
from gradexplorer.core.stats.histogram import HistRange
from gradexplorer.core.stats.raw import RawStats

STAT_FIELDS = ("norm", "mean", "std", "min", "max", "abs_max", "zero_fraction",
               "nan_count", "inf_count", "update_ratio")
STAT_LABELS = {"abs_max": "max |g|", "zero_fraction": "zeros", "update_ratio": "‖Δθ‖/‖θ‖",
               "nan_count": "NaN", "inf_count": "Inf"}  # short names where a field's is long


@dataclass
class ParamStats:
    """One parameter's gradient this step; figures are over finite elements, None if no grad."""

    name: str
    shape: tuple[int, ...]
    numel: int
    has_grad: bool
    norm: float | None = None
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    abs_max: float | None = None
    zero_fraction: float | None = None
    nan_count: int | None = None
    inf_count: int | None = None
    update_ratio: float | None = None
    not_recorded: str | None = None  # why this step's figures are missing (a failed measurement)

    def stats_dict(self) -> dict[str, float | int | None]:
        """The figures named in STAT_FIELDS."""
        return {f: getattr(self, f) for f in STAT_FIELDS}

    @property
    def nonfinite(self) -> bool:
        """True when the gradient holds any NaN or ±Inf."""
        return bool(self.nan_count or self.inf_count)


@dataclass
class Histogram:
    """Counts of finite values in ``bins`` bins; NaN, ±Inf and out-of-range values apart."""

    edges: np.ndarray
    counts: np.ndarray
    nan_count: int = 0
    inf_count: int = 0
    below: int = 0
    above: int = 0

    @property
    def total(self) -> int:
        """Every element the histogram accounts for, in bins or apart."""
        return int(self.counts.sum()) + self.nan_count + self.inf_count + self.below + self.above


@dataclass
class StepGradients:
    """Every parameter's gradient statistics for one step (histograms on cadence steps)."""

    step: int
    global_norm: float | None
    total_numel: int
    params: dict[str, ParamStats]
    histograms: dict[str, Histogram] = field(default_factory=dict)
    bins: int = 64
    hist_range: HistRange = "auto"
    seconds: float = 0.0
    # what could not be measured this step and why: parameter name -> cause ("" for the step's
    # update ratios); the rest of the step is recorded as usual
    not_recorded: dict[str, str] = field(default_factory=dict)

    def nonfinite(self) -> dict[str, ParamStats]:
        """Parameters whose gradient holds NaN or ±Inf this step."""
        return {n: s for n, s in self.params.items() if s.nonfinite}


_ROW_KERNEL: tuple | None = None  # (stat_columns, COLUMNS), or () where Numba cannot load


def _row_kernel() -> tuple:
    """``kernels_rows.stat_columns`` imported on first use (not at import: the app and a run's
    readers import this module without Numba); () when it cannot load."""
    global _ROW_KERNEL
    if _ROW_KERNEL is None:
        try:
            from gradexplorer.core.stats.kernels_rows import COLUMNS, stat_columns
            _ROW_KERNEL = (stat_columns, COLUMNS)
        except Exception:  # noqa: BLE001 - no Numba, or no kernel cache: numpy does it
            _ROW_KERNEL = ()
    return _ROW_KERNEL


def _stats_rows(named_shapes: list[tuple[str, tuple[int, ...]]], raw: RawStats) -> list[ParamStats]:
    """ParamStats for every row of ``raw`` at once: one Numba call (``kernels_rows``) where it
    loads, else numpy column by column; the same figures bit for bit either way."""
    kernel = _row_kernel()
    if not kernel:
        return _stats_rows_numpy(named_shapes, raw)
    stat_columns, width = kernel
    sizes = [math.prod(shape) for _, shape in named_shapes]
    m = raw.moments
    out, counts = np.empty((len(sizes), width)), np.empty((len(sizes), 2), np.int64)
    update = raw.update if raw.update is not None else m
    stat_columns(m, np.array(sizes, np.float64), update, raw.update is not None, out, counts)
    rows = out.tolist()
    if raw.update is None:
        for row in rows:
            row[-1] = None
    return [ParamStats(name, shape, size, True, *row[:-1], *count, row[-1])
            for (name, shape), size, row, count in zip(named_shapes, sizes, rows, counts.tolist(),
                                                       strict=True)]


def _stats_rows_numpy(named_shapes: list[tuple[str, tuple[int, ...]]], raw: RawStats) -> list[ParamStats]:
    """``_stats_rows`` by numpy, column by column (where the Numba kernel cannot load)."""
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
        ratio = [None] * len(numel)
        if raw.update is not None:
            delta, before = raw.update[:, 0], raw.update[:, 1]
            ratio = np.where(before > 0, delta / before, np.where(delta == 0, 0.0, np.inf))
            ratio = np.where(np.isnan(delta) | np.isnan(before), np.nan, ratio).tolist()
    # one row of Python numbers per parameter, transposed at once (no Python work per figure)
    figures = np.stack(columns, 1).tolist()
    counts = m[:, C.NANS:C.INFS + 1].astype(np.int64).tolist()
    sizes = numel.astype(np.int64).tolist()
    return [ParamStats(name, shape, size, True, *row, *count, r)
            for (name, shape), size, row, count, r in zip(named_shapes, sizes, figures, counts, ratio,
                                                          strict=True)]


def global_norm(stats: list[ParamStats]) -> float | None:
    """L2 norm of the concatenated gradient: NaN if any NaN, Inf if any Inf (scaled: no
    overflow while the result itself fits in a float64)."""
    with_grad = [s for s in stats if s.has_grad]
    norms = [s.norm for s in with_grad]
    if not norms or None in norms:  # none, or one not recorded
        return None
    if any([s.nan_count for s in with_grad]):
        return math.nan
    if any([s.inf_count for s in with_grad]):
        return math.inf
    top = max(norms)
    if top == 0 or not math.isfinite(top):
        return top
    return top * math.sqrt(sum([(n / top) ** 2 for n in norms]))


def build_step_gradients(step: int, named_shapes: list[tuple[str, tuple[int, ...]]],
                         has_grad: list[bool], raw: RawStats, bins: int,
                         hist_range: HistRange) -> StepGradients:
    """Assemble a StepGradients from a backend's RawStats (rows only for params with grads)."""
    present = [ns for ns, h in zip(named_shapes, has_grad, strict=True) if h]
    rows = _stats_rows(present, raw)
    if len(present) == len(named_shapes):
        params = {s.name: s for s in rows}
    else:
        found = iter(rows)
        params = {name: next(found) if h else ParamStats(name, shape, math.prod(shape), False)
                  for (name, shape), h in zip(named_shapes, has_grad, strict=True)}
    histograms: dict[str, Histogram] = {}
    if raw.counts is not None:
        histograms = {name: Histogram(edges, counts, nans, infs, below, above)
                      for (name, _), edges, counts, (below, above, nans, infs)
                      in zip(present, raw.edges, raw.counts, raw.extra.tolist(), strict=True)}
    total = sum([s.numel for s in rows])
    return StepGradients(step, global_norm(list(params.values())), total, params, histograms,
                         bins, hist_range)
