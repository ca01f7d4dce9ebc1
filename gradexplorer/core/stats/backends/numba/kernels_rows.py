"""The Numba kernel turning a step's raw moments into every parameter's figures in one call.

``stat_columns`` does, row by row, the float64 operations ``step_arrays._stats_rows`` does with
numpy column by column (the same operations on the same numbers in the same order, no fast
math, so the same figures bit for bit), in one call instead of some thirty numpy calls, which
cost more than the arithmetic on a step's few rows, most of all with the caches cold after a
training step.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from gradexplorer.core.stats.backends.raw import (
    DSQ,
    DSUM,
    FINITE,
    INFS,
    MAX,
    MIN,
    NANS,
    NSQ,
    SCALE,
    SHIFT,
    ZEROS,
)

NORM, MEAN, STD, LOW, HIGH, ABS_MAX, ZERO_FRACTION, RATIO = range(8)  # ``out``'s columns
COLUMNS = 8


@njit(nogil=True, cache=True)
def _maximum(a, b):
    """``np.maximum(a, b)`` of two float64s (NaN in ``a`` or ``b`` wins, as numpy's)."""
    if a != a or b != b:
        return a if a != a else b
    return a if a >= b else b


@njit(nogil=True, cache=True, error_model="numpy")
def stat_columns(m, numel, update, with_update, out, counts):
    """``out[i]``: norm, mean, std, min, max, max |g|, zero fraction and update ratio of row
    ``i`` of the moments ``m`` (``raw``'s columns; ``numel`` as float64; ``update``: ‖Δθ‖ and
    ‖θ_before‖ per row, read when ``with_update``); ``counts[i]``: its NaN and Inf counts."""
    nan = np.nan
    for i in range(m.shape[0]):
        finite, scale = m[i, FINITE], m[i, SCALE]
        shifted = m[i, DSUM] / finite
        out[i, NORM] = scale * math.sqrt(m[i, NSQ])
        if finite > 0:
            out[i, MEAN] = m[i, SHIFT] + scale * shifted
            out[i, STD] = scale * math.sqrt(_maximum(m[i, DSQ] / finite - shifted * shifted, 0.0))
            low, high = m[i, MIN], m[i, MAX]
        else:
            out[i, MEAN] = out[i, STD] = nan
            low = high = nan
        out[i, LOW], out[i, HIGH] = low, high
        out[i, ABS_MAX] = _maximum(abs(low), abs(high))
        n = numel[i]
        out[i, ZERO_FRACTION] = m[i, ZEROS] / _maximum(n, 1.0) if n > 0 else 0.0
        if with_update:
            delta, before = update[i, 0], update[i, 1]
            if delta != delta or before != before:
                out[i, RATIO] = nan
            elif before > 0:
                out[i, RATIO] = delta / before
            else:
                out[i, RATIO] = 0.0 if delta == 0 else np.inf
        counts[i, 0], counts[i, 1] = np.int64(m[i, NANS]), np.int64(m[i, INFS])
