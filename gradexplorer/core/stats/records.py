"""What the gradient monitor reports each step: ParamStats, Histogram, StepGradients (the data
types; ``step_arrays`` builds them from a backend's raw figures)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gradexplorer.core.stats import STAT_FIELDS
from gradexplorer.core.stats.histogram import HistRange

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

    def whole(self, field: str) -> float | int | None:
        """Figure ``field`` as every view reports it (``whole_figure``)."""
        return whole_figure(field, getattr(self, field), self.nan_count, self.inf_count)


def whole_figure(field: str, value, nan_count: int | None, inf_count: int | None):
    """A gradient's ``norm`` or ``abs_max`` as a view, table or file states it: NaN when the
    gradient holds a NaN, inf when it holds ±Inf, never the finite part's figure (an all-NaN
    gradient's finite norm is 0); other fields and finite gradients: ``value`` as kept."""
    if field in ("norm", "abs_max"):
        if nan_count:
            return math.nan
        if inf_count:
            return math.inf
    return value


def whole_figures(figs: dict) -> dict:
    """A parameter's figures (a STAT_FIELDS dict) as exports write them: ``whole_figure`` of
    each (norm and max |g| NaN/inf where the gradient held NaN/Inf)."""
    nan, inf = figs.get("nan_count"), figs.get("inf_count")
    return {f: whole_figure(f, v, nan, inf) for f, v in figs.items()} if nan or inf else figs


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

    def column(self, field: str) -> dict[str, float | int | None]:
        """``name -> params[name].<field>`` (``field`` one of STAT_FIELDS), read from the
        step's arrays where it has them (no ParamStats built)."""
        return {n: getattr(s, field) for n, s in self.params.items()}

    def columns(self, *names: str) -> tuple[list[str], list[list]]:
        """The parameters' names and, for each field in ``names`` (STAT_FIELDS, ``numel`` or
        ``has_grad``), its values in that order (``column`` without a dict each)."""
        stats = list(self.params.values())
        return list(self.params), [[getattr(s, f) for s in stats] for f in names]

    def histogram_block(self) -> list[tuple[list[str], np.ndarray, np.ndarray, np.ndarray]]:
        """The step's histograms as arrays (the run directory's rows, encoded at once): one
        ``(names, edges float64 rows×(bins+1), counts int64 rows×bins, extra int64 rows×4: NaN,
        Inf, below, above)`` for each shape (one, as a monitor makes them), read from the
        step's arrays where it has them."""
        groups: dict[tuple, list] = {}
        for name, h in self.histograms.items():
            groups.setdefault((np.shape(h.edges), np.shape(h.counts)), []).append((name, h))
        return [([n for n, _ in found],
                 np.array([np.asarray(h.edges, np.float64) for _, h in found], np.float64),
                 np.array([np.asarray(h.counts, np.int64) for _, h in found], np.int64),
                 np.array([(h.nan_count, h.inf_count, h.below, h.above) for _, h in found], np.int64))
                for found in groups.values()]

    def nonfinite_totals(self) -> tuple[int, int]:
        """(NaN count, Inf count) over every parameter's gradient (missing counts as 0)."""
        stats = list(self.params.values())
        return sum([s.nan_count or 0 for s in stats]), sum([s.inf_count or 0 for s in stats])


def global_norm(stats: list[ParamStats]) -> float | None:
    """L2 norm of the concatenated gradient: NaN if any NaN, Inf if any Inf (scaled: no
    overflow while the result itself fits in a float64)."""
    with_grad = [s for s in stats if s.has_grad]
    return _global_norm([s.norm for s in with_grad], [s.nan_count for s in with_grad],
                        [s.inf_count for s in with_grad])


def _global_norm(norms: list, nans: list, infs: list) -> float | None:
    """``global_norm`` of the parameters with a gradient, from their norms and counts."""
    if not norms or None in norms:  # none, or one not recorded
        return None
    if any(nans):
        return math.nan
    if any(infs):
        return math.inf
    top = max(norms)
    if top == 0 or not math.isfinite(top):
        return top
    return top * math.sqrt(sum([(n / top) ** 2 for n in norms]))
