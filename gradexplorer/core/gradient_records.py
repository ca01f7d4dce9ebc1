"""What the gradient monitor reports each step: ParamStats, Histogram, StepGradients."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gradexplorer.core import grad_raw as C
from gradexplorer.core.grad_raw import RawStats
from gradexplorer.core.histogram_math import HistRange

STAT_FIELDS = ("norm", "mean", "std", "min", "max", "abs_max", "zero_fraction",
               "nan_count", "inf_count", "update_ratio")


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

    def nonfinite(self) -> dict[str, ParamStats]:
        """Parameters whose gradient holds NaN or ±Inf this step."""
        return {n: s for n, s in self.params.items() if s.nonfinite}


def _finite_or_nan(value: float) -> float:
    return float(value) if math.isfinite(value) else math.nan


def param_stats(name: str, shape: tuple[int, ...], row: np.ndarray | None,
                update: np.ndarray | None) -> ParamStats:
    """ParamStats from one moments row (None: no gradient this step)."""
    numel = math.prod(shape)
    if row is None:
        return ParamStats(name, shape, numel, False)
    finite = row[C.FINITE]
    mean = row[C.SUM] / finite if finite else math.nan
    var = max(row[C.SUMSQ] / finite - mean * mean, 0.0) if finite else math.nan
    low, high = _finite_or_nan(row[C.MIN]), _finite_or_nan(row[C.MAX])
    return ParamStats(
        name, shape, numel, True,
        norm=math.sqrt(row[C.SUMSQ]), mean=float(mean), std=math.sqrt(var),
        min=low, max=high, abs_max=max(abs(low), abs(high)) if finite else math.nan,
        zero_fraction=float(row[C.ZEROS] / numel) if numel else 0.0,
        nan_count=int(row[C.NANS]), inf_count=int(row[C.INFS]),
        update_ratio=None if update is None else _ratio(*update),
    )


def _ratio(delta_sq: float, before_sq: float) -> float:
    if before_sq > 0:
        return math.sqrt(delta_sq) / math.sqrt(before_sq)
    return 0.0 if delta_sq == 0 else math.inf


def global_norm(stats: list[ParamStats]) -> float | None:
    """L2 norm of the concatenated gradient: NaN if any NaN, Inf if any Inf."""
    with_grad = [s for s in stats if s.has_grad]
    if not with_grad:
        return None
    if any(s.nan_count for s in with_grad):
        return math.nan
    if any(s.inf_count for s in with_grad):
        return math.inf
    return math.sqrt(sum(s.norm**2 for s in with_grad))


def build_step_gradients(step: int, named_shapes: list[tuple[str, tuple[int, ...]]],
                         has_grad: list[bool], raw: RawStats, bins: int,
                         hist_range: HistRange) -> StepGradients:
    """Assemble a StepGradients from a backend's RawStats (rows only for params with grads)."""
    params: dict[str, ParamStats] = {}
    histograms: dict[str, Histogram] = {}
    row = 0
    for (name, shape), present in zip(named_shapes, has_grad, strict=True):
        if not present:
            params[name] = param_stats(name, shape, None, None)
            continue
        update = None if raw.update is None else raw.update[row]
        params[name] = param_stats(name, shape, raw.moments[row], update)
        if raw.counts is not None:
            extra = raw.extra[row]
            histograms[name] = Histogram(
                raw.edges[row].copy(), raw.counts[row].copy(), nan_count=int(extra[2]),
                inf_count=int(extra[3]), below=int(extra[0]), above=int(extra[1]),
            )
        row += 1
    total = sum(s.numel for s in params.values() if s.has_grad)
    return StepGradients(step, global_norm(list(params.values())), total, params, histograms,
                         bins, hist_range)
