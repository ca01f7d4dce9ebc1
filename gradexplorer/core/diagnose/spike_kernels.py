"""Numba kernels for the spike detector's step: the rolling bands, the scores and the flags.

Each does, figure by figure, the float64 operations ``spike_band`` and ``spikes`` do with numpy
array by array (sorting for the medians, NaN last as numpy's sort; the same arithmetic in the
same order, no fast math), so the same bands, scores and flags bit for bit, in a few calls a
step instead of some forty numpy calls on arrays of a few dozen figures. The logarithm and the
exponential stay numpy's (``log_scale``, the excursion factors), so no figure depends on
another implementation of them.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _maximum(a, b):
    """``np.maximum`` of two float64s (a NaN wins)."""
    if a != a or b != b:
        return a if a != a else b
    return a if a >= b else b


@njit(nogil=True, cache=True)
def _median_sorted(s):
    n = s.size
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


SMALL_SORT = 128  # rows up to this long are sorted by insertion (numpy's sort beyond)


@njit(nogil=True, cache=True)
def _sorted(row, scratch):
    """``np.sort(row)`` (NaN last): by insertion into ``scratch`` for a short row, the window
    of a band, where it is several times faster than a general sort."""
    n = row.size
    if n > scratch.size:
        return np.sort(row)
    kept = 0
    for i in range(n):
        v = row[i]
        if v != v:
            continue
        j = kept
        while j > 0 and scratch[j - 1] > v:
            scratch[j] = scratch[j - 1]
            j -= 1
        scratch[j] = v
        kept += 1
    for i in range(kept, n):
        scratch[i] = np.nan
    return scratch[:n]


@njit(nogil=True, cache=True)
def bands_of(buf, filled, scale, min_width, centre, width):
    """``centre[r]``, ``width[r]``: the median of row ``r`` of ``buf[:, :filled]`` and
    ``max(scale · MAD, min_width)`` (``RollingBands.score``'s band)."""
    scratch = np.empty(SMALL_SORT)
    deviations = np.empty(filled)
    for r in range(buf.shape[0]):
        row = buf[r, :filled]
        c = _median_sorted(_sorted(row, scratch))
        centre[r] = c
        for i in range(filled):
            deviations[i] = abs(row[i] - c)
        width[r] = _maximum(scale * _median_sorted(_sorted(deviations, scratch)), min_width)


@njit(nogil=True, cache=True)
def scores(t, centre, width, count, warmup, z):
    """``z = (t - centre) / width``, NaN where a band has fewer than ``warmup`` values."""
    for i in range(t.size):
        z[i] = np.nan if count[i] < warmup else (t[i] - centre[i]) / width[i]


@njit(nogil=True, cache=True)
def push(t, last, count, buf, pos):
    """Remember ``t`` in column ``pos`` of ``buf`` (a missing value repeats its figure's last)."""
    for i in range(t.size):
        v = t[i]
        if v - v == 0.0:  # finite
            last[i] = v
            count[i] += 1
        buf[i, pos] = last[i]


@njit(nogil=True, cache=True)
def flags(values, nonfinite, z, onset_k, k, since, step, bad, moved, flagged):
    """Which figures are NaN/Inf (``bad``: ``nonfinite > 0`` — a signal's value, a parameter's
    norm whose gradient holds NaN/Inf — or an infinite value), have moved (``z > onset_k``)
    and are flagged (``z > k``); ``since`` (where each stretch above ``onset_k`` began)
    updated for ``step``. True when any figure is flagged."""
    anything = False
    for i in range(values.size):
        b = nonfinite[i] > 0 or abs(values[i]) == np.inf
        bad[i] = b
        moved[i] = b or z[i] > onset_k
        flagged[i] = b or z[i] > k
        anything = anything or flagged[i]
        since[i] = (since[i] if since[i] >= 0 else step) if moved[i] else -1
    return anything


# The two kernels the training thread calls each step keep the GIL (nogil=False): they take
# microseconds, and giving the GIL up hands it to the statistics worker or the run's writer
# thread, which the training thread then waits to get back (spike detection 217-220 us a step
# with them giving it up, 177-198 us without, on the MLP with a run directory).
@njit(nogil=False, cache=True)
def log_inputs(values, clean):
    """``clean``: the values whose logarithm ``log_scale`` takes (positive and finite), 1.0 in
    place of the rest (their log is replaced by NaN in ``observe_step``)."""
    for i in range(values.size):
        v = values[i]
        clean[i] = v if v - v == 0.0 and v > 0 else 1.0


@njit(nogil=False, cache=True)
def observe_step(values, nonfinite, t, buf, last, count, pos, filled, recompute, centre, width,
                 scale, min_width, warmup, since, step, onset_k, k, z, flagged3):
    """The detector's step after numpy's log: ``t`` made ``log_scale``'s (NaN where the value
    is not positive and finite), the bands recomputed when asked, the scores ``z`` (NaN with
    no band yet), ``t`` pushed into column ``pos`` and the flags (``flagged3``: bad, moved,
    flagged); True when any figure is flagged."""
    for i in range(values.size):
        v = values[i]
        if not (v - v == 0.0 and v > 0):
            t[i] = np.nan
    if filled == 0:
        for i in range(t.size):
            z[i] = np.nan
    else:
        if recompute:
            bands_of(buf, filled, scale, min_width, centre, width)
        scores(t, centre, width, count, warmup, z)
    push(t, last, count, buf, pos)
    return flags(values, nonfinite, z, onset_k, k, since, step, flagged3[0], flagged3[1], flagged3[2])
