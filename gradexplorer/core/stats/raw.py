"""The raw per-step numbers a statistics backend hands back, before they become ParamStats."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Columns of ``RawStats.moments``, one row per gradient.
SUM, SUMSQ, MIN, MAX, ZEROS, NANS, INFS, FINITE = range(8)
MOMENT_COLUMNS = 8


@dataclass
class RawStats:
    """Arrays with one row per gradient, in the order the gradients were given.

    ``moments`` columns are those of ``grad_kernels`` (sum, sumsq, min, max, zeros, nan, inf,
    finite); ``extra`` columns are below-range, above-range, NaN and Inf counts;
    ``update`` columns are ‖Δθ‖² and ‖θ_before‖².
    """

    moments: np.ndarray
    edges: np.ndarray | None = None
    counts: np.ndarray | None = None
    extra: np.ndarray | None = None
    update: np.ndarray | None = None
