"""Distribution bands from exact histograms: min, p5, p25, median, p75, p95, max per step.

The interpolation rule: inside a bin the values are taken as spread evenly (the same uniform
density ``rebin`` and the earth mover's distance assume), so the quantile ``q`` of a histogram
with ``N`` counted values is the point where its piecewise-linear cumulative count first reaches
``q·N``: in the bin ``i`` where ``cum[i] < q·N ≤ cum[i+1]``, at
``edges[i] + (q·N − cum[i]) / counts[i] · (edges[i+1] − edges[i])``. ``q = 0`` is the left edge
of the first non-empty bin and ``q = 1`` the right edge of the last one; the monitor's ``auto``
range puts those edges on the gradient's exact minimum and maximum. Empty histograms give NaN.
Values counted apart (NaN, ±Inf, outside a fixed range) are not in the bands.
"""

from __future__ import annotations

import numpy as np

BAND_QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
BAND_NAMES = ("min", "p5", "p25", "median", "p75", "p95", "max")


def histogram_quantiles(edges: np.ndarray, counts: np.ndarray,
                        quantiles=BAND_QUANTILES) -> np.ndarray:
    """``quantiles`` of one histogram (``edges`` B+1, ``counts`` B) by the rule above."""
    return histogram_quantile_rows(np.asarray(edges)[None, :], np.asarray(counts)[None, :],
                                   quantiles)[0]


def histogram_quantile_rows(edges: np.ndarray, counts: np.ndarray,
                            quantiles=BAND_QUANTILES) -> np.ndarray:
    """``(T, len(quantiles))`` quantiles of every row of ``counts`` (T×B, edges T×(B+1))."""
    edges = np.asarray(edges, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    rows, bins = counts.shape
    q = np.asarray(quantiles, dtype=np.float64)
    cum = np.concatenate([np.zeros((rows, 1)), np.cumsum(counts, axis=1)], axis=1)
    total = cum[:, -1:]
    target = q[None, :] * total  # (T, Q)
    out = np.full((rows, len(q)), np.nan)
    filled = total[:, 0] > 0
    if not filled.any():
        return out
    cum, target, e, c = cum[filled], target[filled], edges[filled], counts[filled]
    # the first bin whose upper cumulative count reaches the target: the number of bins whose
    # upper cumulative count is still below it
    upper = cum[:, 1:]
    index = np.minimum((upper[:, None, :] < target[:, :, None]).sum(axis=2), bins - 1)
    r = np.arange(len(upper))[:, None]
    # q = 0 (target 0) lands on the first bin; move it to the first bin that holds values
    first = np.argmax(c > 0, axis=1)[:, None]
    index = np.where(target <= 0, first, index)
    below, count = cum[r, index], c[r, index]
    lo, hi = e[r, index], e[r, index + 1]
    fraction = np.where(count > 0, (target - below) / np.where(count > 0, count, 1.0), 0.0)
    out[filled] = lo + np.clip(fraction, 0.0, 1.0) * (hi - lo)
    return out


def distribution_bands(edges: np.ndarray, counts: np.ndarray) -> dict[str, np.ndarray]:
    """``{min, p5, p25, median, p75, p95, max}``, each an array over the rows (steps)."""
    values = histogram_quantile_rows(edges, counts, BAND_QUANTILES)
    return {name: values[:, i] for i, name in enumerate(BAND_NAMES)}
