"""The heat map's value axis (no Qt): every step's histogram redistributed onto the rows of
one image, on a fixed value axis, on each step's own range, or on log10 |g|.

A gradient whose spread shrinks 100× over a run (ResNet-18 after its first steps) is a thin
line on a fixed axis sized for the early steps; on its own range, or on log |g|, it stays a
band. Counts move between grids as each bin's count spread evenly over the bin (as
``rebin_rows``), so a column's total is kept, but for what the log axis leaves out below its
floor (|g| under a sixteenth of the finest bin width of the run: zeros and rounding dust).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradexplorer.core.stats.histogram import rebin_rows

AXIS_MODES = ("fixed", "per step", "log |g|")
AXIS_TIPS = {
    "fixed": "one value axis for every step (from the run's smallest to its largest gradient)",
    "per step": "each step on its own range: value ÷ that step's largest |g| (−1 … 1), so a "
                "shrinking distribution stays visible",
    "log |g|": "log10 of |g| (negative and positive values together): decades of shrinking in one view",
}


@dataclass(frozen=True)
class HeatmapRows:
    """``counts`` (steps × rows) on row edges ``rows`` (the image's y, ``label`` names it);
    ``values(step_index, y)`` turns a y of the image back into the gradient value it shows."""

    rows: np.ndarray
    counts: np.ndarray
    label: str
    scales: np.ndarray  # per step: what y is multiplied by ("per step"), else ones

    def value_at(self, index: int, y: float, mode: str) -> float:
        """The gradient value (|g| for the log axis) that ``y`` stands for at step ``index``."""
        if mode == "log |g|":
            return float(10.0 ** y)
        return float(y * self.scales[index])


def _cumulative(edges: np.ndarray, counts: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per step, the count below each value of ``at`` (T × len(at), or per-row points when
    ``at`` is T × K), each bin's count spread evenly over the bin."""
    below = np.concatenate([np.zeros((len(counts), 1)), np.cumsum(counts, axis=1)], axis=1)
    points = np.broadcast_to(at, (len(counts), at.shape[-1]))
    return np.stack([np.interp(p, e, c) for p, e, c in zip(points, edges, below, strict=True)])


def heatmap_rows(edges: np.ndarray, counts: np.ndarray, mode: str = "fixed",
                 bins: int | None = None) -> HeatmapRows:
    """Every step's histogram (row ``t``: ``edges[t]``, ``counts[t]``) on the rows of ``mode``."""
    if mode not in AXIS_MODES:
        raise ValueError(f"unknown heat map axis {mode!r}; one of {', '.join(AXIS_MODES)}")
    edges = np.asarray(edges, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    bins = bins or counts.shape[1]
    ones = np.ones(len(counts))
    if mode == "fixed":
        grid = np.linspace(edges[:, 0].min(), edges[:, -1].max(), bins + 1)
        return HeatmapRows(grid, rebin_rows(edges, counts, grid), "gradient value", ones)
    reach = np.maximum(np.abs(edges[:, 0]), np.abs(edges[:, -1]))
    reach = np.where(reach > 0, reach, 1.0)  # an all-zero step: any scale shows it at 0
    if mode == "per step":
        grid = np.linspace(-1.0, 1.0, bins + 1)
        below = _cumulative(edges, counts, grid[None, :] * reach[:, None])
        return HeatmapRows(grid, np.diff(below, axis=1), "value ÷ max |g| of its step", reach)
    widths = np.diff(edges, axis=1)
    finest = widths[widths > 0].min() / 16 if (widths > 0).any() else 1e-12
    grid = np.linspace(np.log10(finest), np.log10(max(reach.max(), finest * 10)), bins + 1)
    magnitude = 10.0 ** grid
    inside = (_cumulative(edges, counts, magnitude[None, :])
              - _cumulative(edges, counts, -magnitude[None, :]))  # count with |g| below each
    return HeatmapRows(grid, np.diff(inside, axis=1), "log10 |g|", ones)
