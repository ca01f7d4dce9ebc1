"""Histogram arithmetic: bin edges, ranges, distances between histograms, rebinning."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    pass

HistRange = str | tuple[float, float]
RANGE_MODES = ("auto", "symmetric")
MAX = float(np.finfo(np.float64).max)
TINY = float(np.finfo(np.float64).smallest_subnormal)
EPS = 2.0**-52  # |x|·EPS + TINY is at least one float64 spacing at x


Array = Any  # np.ndarray | torch.Tensor


def _torch_of(x: Any):
    """torch when ``x`` is a tensor, else None (without importing torch: readers of a run
    directory, such as ``gradexplorer report``, never need it)."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(x, torch.Tensor) else None



def parse_hist_range(value: str | Sequence[float] | None) -> HistRange:
    """``"auto"``, ``"symmetric"``, ``"LO,HI"`` or ``(lo, hi)`` checked and normalised."""
    from gradexplorer.core.messages.errors import UserError

    if value is None:
        return "auto"
    if isinstance(value, str) and value.strip().lower() in RANGE_MODES:
        return value.strip().lower()
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        lo, hi = (float(p) for p in parts)
    except (TypeError, ValueError):
        raise UserError(
            f"bad histogram range {value!r}: use auto, symmetric or LO,HI such as -0.01,0.01"
        ) from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise UserError(f"bad histogram range {value!r}: need finite LO < HI")
    return (lo, hi)


def range_bounds(mins: Array, maxs: Array, hist_range: HistRange) -> tuple[Array, Array]:
    """Per-parameter (lo, hi) from finite minima/maxima (inf where none) and the range mode.

    ``mins``/``maxs`` are numpy arrays (CPU backend) or torch tensors (fused device path, where
    this stays on the device): the same ops exist in both, so both paths share one rule.
    """
    return mode_bounds(*finite_bounds(mins, maxs), hist_range)


def finite_bounds(mins: Array, maxs: Array) -> tuple[Array, Array]:
    """The ``"auto"`` range: the finite minimum and maximum, 0 … 0 where nothing is finite."""
    empty = ~(mins <= maxs)
    if _torch_of(mins) is not None:  # one op a bound (``where`` with a number is two)
        return mins.masked_fill(empty, 0.0), maxs.masked_fill(empty, 0.0)
    return np.where(empty, 0.0, mins), np.where(empty, 0.0, maxs)


def mode_bounds(lo: Array, hi: Array, hist_range: HistRange) -> tuple[Array, Array]:
    """The range of ``hist_range`` from the ``finite_bounds`` ``lo … hi``."""
    if hist_range == "auto":
        return lo, hi
    if hist_range == "symmetric":
        top = (_torch_of(lo) or np).maximum(abs(lo), abs(hi))
        return -top, top
    like = _torch_of(lo) or np
    return like.full_like(lo, hist_range[0]), like.full_like(hi, hist_range[1])


def histogram_edges(lo: Array, hi: Array, bins: int, bound: float | None = None) -> Array:
    """``(P, bins+1)`` edges, row ``i`` equal to ``np.linspace(lo[i], hi[i], bins+1)``: edge k
    is ``k * step + lo``, the last exactly ``hi``.

    An empty range (lo == hi) widens to ``lo - 0.5 … hi + 0.5``, as ``np.histogram`` does.
    Where those edges are not finite and strictly increasing — ``np.histogram`` refuses them
    ("Too many bins for data range") — a row gets ``fallback_range``'s edges instead. numpy in
    (the CPU backend) or torch tensors in (the fused device path, on the device): the same ops
    in the same order, so both paths report the same edges bit for bit.

    ``bound``: a bound on ``|lo|`` and ``|hi|`` known beforehand (the largest float32 for the
    ranges of float32 values, the bounds themselves for an explicit range). Where it keeps every
    range far from ±max float, the fallback's too-wide case and its clamps cannot apply and are
    decided here, not per row: fewer ops on the device, the same edges.
    """
    torch = _torch_of(lo)
    if torch is not None:
        xp, k = torch, torch.arange(bins + 1, dtype=torch.float64, device=lo.device)
    else:
        lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        xp, k = np, np.arange(bins + 1, dtype=np.float64)
    same = lo == hi
    lo = xp.where(same, lo - 0.5, lo)
    hi = xp.where(same, hi + 0.5, hi)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing range: NaN, then fallen back
        span = hi - lo
        edges = _linspace(k, lo, span / bins, hi)
        numpys = (edges[:, 1:] > edges[:, :-1]).all(1)  # numpy's own test (NaN and Inf fail it)
        if xp is np and numpys.all():
            return edges
        first, step, last, factor = fallback_range(xp, lo, hi, span, bins, _far_from_max(bound, bins))
        fallback = _linspace(k, first, step, last)
        return xp.where(numpys[:, None], edges, fallback if factor is None else fallback * factor[:, None])


def _linspace(k: Array, first: Array, step: Array, last: Array) -> Array:
    """Per row ``k * step + first``, the last edge exactly ``last`` (np.linspace's arithmetic)."""
    edges = k * step[:, None] + first[:, None]
    edges[:, -1] = last
    return edges


def _far_from_max(bound: float | None, bins: int) -> bool:
    """Whether ranges within ±``bound`` (±½ more once widened) stay far enough from ±max float
    that no span overflows and ``fallback_range`` clamps nothing: ``|low|`` is at most the
    midrange plus half the width, and the width ``top·EPS·4·bins + TINY·4·bins`` at most twice
    that (rounding included)."""
    if bound is None:
        return False
    top = abs(bound) + 1.0
    width = 2.0 * (top * EPS * 4 * bins + TINY * 4 * bins)
    return 4.0 * (top + width) < MAX  # False when it overflows (inf)


def fallback_range(xp, lo: Array, hi: Array, span: Array, bins: int, far_from_max: bool = False):
    """Per row ``(first, step, last, factor)`` for ranges numpy cannot split into ``bins``
    finite, strictly increasing float64 edges (``np.histogram``: "Too many bins for data
    range"); edge k is ``(k * step + first) * factor``, the last ``last * factor``:

    - too wide (``span = hi - lo`` overflows, e.g. -1e308 … 1e308): the edges of ``lo/2 …
      hi/2``, doubled (factor 2, exact), so still ``lo … hi``;
    - too narrow (bins narrower than a float64 spacing: a constant of magnitude 2⁵³ or more,
      neighbouring floats, subnormals): centred on the midrange, ``2·bins`` times
      ``s = |top|·2⁻⁵² + 5e-324`` (at least one spacing of the larger bound ``top``) on each
      side, so every edge is distinct and within half a bin of ``k·step + first``; moved
      inward where it would pass ±max float.

    ``far_from_max`` (``_far_from_max``): no range is too wide and none is moved inward, so
    only the narrow case is computed, and ``factor`` is None (1 everywhere).
    """
    top = xp.maximum(abs(lo), abs(hi))
    width = top * (EPS * 4 * bins) + TINY * 4 * bins
    half_lo, half_hi = lo / 2, hi / 2
    low = half_lo + half_hi - width / 2
    if far_from_max:
        return low, width / bins, low + width, None
    wide = span > MAX  # +Inf: the width overflowed
    low = xp.minimum(low, MAX - width)
    low = xp.where(low < -MAX, -MAX, low)
    first = xp.where(wide, half_lo, low)
    step = xp.where(wide, half_hi - half_lo, width) / bins
    return first, step, xp.where(wide, half_hi, low + width), xp.where(wide, 2.0, 1.0)


def _cdf_at(points: np.ndarray, edges: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """CDF of a histogram (uniform density inside each bin) at ``points``."""
    total = counts.sum()
    if total == 0:
        return np.zeros_like(points)
    cumulative = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)]) / total
    return np.interp(points, edges, cumulative, left=0.0, right=1.0)


def _abs_integral(x: np.ndarray, d: np.ndarray) -> float:
    """∫|d| for ``d`` piecewise linear through ``(x, d)``, exact where it changes sign."""
    dx = np.diff(x)
    d0, d1 = d[:-1], d[1:]
    same = d0 * d1 >= 0
    denom = np.where(same, 1.0, np.abs(d0) + np.abs(d1))
    crossing = (d0 * d0 + d1 * d1) / (2 * denom)
    return float(np.sum(np.where(same, np.abs(d0 + d1) / 2, crossing) * dx))


def mixture_w1(hists_a: Sequence[tuple[np.ndarray, np.ndarray]],
               hists_b: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    """Earth mover's (Wasserstein-1) distance between two mixtures of ``(edges, counts)``."""
    grid = np.unique(np.concatenate([e for e, _ in (*hists_a, *hists_b)]))

    def cdf(hists):
        total = sum(float(c.sum()) for _, c in hists)
        if total == 0:
            return np.zeros_like(grid)
        return sum(_cdf_at(grid, e, c) * float(c.sum()) for e, c in hists) / total

    return _abs_integral(grid, cdf(hists_a) - cdf(hists_b))


def histogram_w1(edges_a: np.ndarray, counts_a: np.ndarray,
                 edges_b: np.ndarray, counts_b: np.ndarray) -> float:
    """Earth mover's distance between two histograms, in the units of the values."""
    return mixture_w1([(edges_a, counts_a)], [(edges_b, counts_b)])


def rebin(edges: np.ndarray, counts: np.ndarray, new_edges: np.ndarray) -> np.ndarray:
    """Counts redistributed onto ``new_edges`` assuming uniform density inside each bin."""
    cdf = _cdf_at(new_edges, edges, counts) * counts.sum()
    return np.diff(cdf)


def rebin_rows(edges: np.ndarray, counts: np.ndarray, new_edges: np.ndarray) -> np.ndarray:
    """``rebin`` of every row of ``counts`` (T×B, edges T×(B+1)) onto one grid, vectorised
    when each row's edges are evenly spaced (as the monitor makes them)."""
    edges = np.asarray(edges, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    bins = counts.shape[1]
    lo, hi = edges[:, :1], edges[:, -1:]
    step = (hi - lo) / bins
    if not np.allclose(np.diff(edges, axis=1), step, rtol=1e-9, atol=0):
        return np.asarray([rebin(e, c, new_edges) for e, c in zip(edges, counts, strict=True)])
    cumulative = np.concatenate([np.zeros((len(counts), 1)), np.cumsum(counts, axis=1)], axis=1)
    position = np.clip((new_edges[None, :] - lo) / step, 0.0, bins)
    index = np.minimum(position.astype(np.int64), bins - 1)
    rows = np.arange(len(counts))[:, None]
    below, above = cumulative[rows, index], cumulative[rows, index + 1]
    return np.diff(below + (position - index) * (above - below), axis=1)


def sparkline(counts: np.ndarray, width: int = 16) -> str:
    """A tiny text picture of a histogram: ``▁▂▅█▅▂▁``; empty bins print as spaces."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size == 0 or counts.sum() == 0:
        return " " * width
    groups = np.array_split(counts, min(width, counts.size))
    merged = np.array([g.sum() for g in groups])
    levels = "▁▂▃▄▅▆▇█"
    scaled = np.ceil(merged / merged.max() * len(levels)).astype(int)
    return "".join(" " if s == 0 else levels[s - 1] for s in scaled)
