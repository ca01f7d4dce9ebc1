"""Numba kernels: gradient moments and exact histograms over segments of a flat CPU array.

A *segment* is one parameter's gradient inside a flat array (``offsets[i]:offsets[i+1]``).
Moments take one pass; a histogram takes a second pass (its range comes from the first).
Histograms are exact: element ``v`` lands in bin ``k`` iff ``edges[k] <= v < edges[k+1]``
(the last bin also holds ``v == edges[-1]``), as ``np.histogram`` with those edges.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gradexplorer.core.stats.raw import (
    FINITE,
    INFS,
    MAX,
    MIN,
    MOMENT_COLUMNS,
    NANS,
    SUM,
    SUMSQ,
    ZEROS,
)

# Reassociation lets LLVM vectorise the sums; NaN/Inf semantics are kept (no nnan/ninf).
_FAST = {"reassoc", "contract"}
CHUNK = 1024  # small chunks: few of them hold a value near a bin edge
__all__ = [
    "MOMENT_COLUMNS", "segment_histograms", "segment_moments", "segment_step_norms",
    "segment_update_norms", "step_norms",
]


@njit(nogil=True, cache=True, fastmath=_FAST)
def _sums(x):
    """Sum, sum of squares (float64) and zero count; the squares turn NaN/Inf on any non-finite."""
    s = 0.0
    q = 0.0
    zeros = 0
    for i in range(x.size):
        v = np.float64(x[i])
        s += v
        q += v * v
        zeros += v == 0.0
    return s, q, zeros


@njit(nogil=True, cache=True, fastmath=True)
def _finite_min_max(x):
    """Min and max of a non-empty array known to be all finite (so NaN-free fast math holds)."""
    lo = x[0]
    hi = x[0]
    for i in range(x.size):
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    return lo, hi


@njit(nogil=True, cache=True)
def _fast_moments(x, row):
    """Moments when every element is finite; returns False (nothing written) otherwise."""
    s, q, zeros = _sums(x)
    if not q - q == 0.0:  # NaN or Inf somewhere (or float64 squares overflowed)
        return False
    lo, hi = _finite_min_max(x) if x.size else (x.dtype.type(np.inf), x.dtype.type(-np.inf))
    row[SUM], row[SUMSQ], row[MIN], row[MAX] = s, q, lo, hi
    row[ZEROS], row[NANS], row[INFS], row[FINITE] = zeros, 0, 0, x.size
    return True


@njit(nogil=True, cache=True)
def _careful_moments(x, row):
    """Moments of the finite elements, NaN and ±Inf counted apart."""
    s = 0.0
    q = 0.0
    lo = np.inf
    hi = -np.inf
    zeros = nans = infs = 0
    for i in range(x.size):
        v = np.float64(x[i])
        if v != v:
            nans += 1
        elif v - v != 0.0:
            infs += 1
        else:
            s += v
            q += v * v
            lo = min(lo, v)
            hi = max(hi, v)
            zeros += v == 0.0
    row[SUM], row[SUMSQ], row[MIN], row[MAX] = s, q, lo, hi
    row[ZEROS], row[NANS], row[INFS] = zeros, nans, infs
    row[FINITE] = x.size - nans - infs


@njit(nogil=True, cache=True)
def segment_moments(x, offsets, out):
    """Fill ``out[i]`` (MOMENT_COLUMNS wide) with the moments of segment ``i`` of ``x``."""
    for seg in range(offsets.size - 1):
        part = x[offsets[seg] : offsets[seg + 1]]
        if not _fast_moments(part, out[seg]):
            _careful_moments(part, out[seg])


@njit(nogil=True, cache=True)
def _exact_bin(v, guess, edges, bins):
    """Move ``guess`` until ``edges[b] <= v < edges[b+1]`` (last bin closed)."""
    b = min(max(guess, 0), bins - 1)
    while b > 0 and v < edges[b]:
        b -= 1
    while b < bins - 1 and v >= edges[b + 1]:
        b += 1
    return b


@njit(nogil=True, cache=True, fastmath=True)  # fast path only: values finite, in range
def _guess_bins(part, lo, scale, top, delta, guess):
    """Vectorised bin guesses in the input's precision; True if one may be off by a bin.

    A guess is exact unless its fractional position lies within ``delta`` of a bin edge,
    ``delta`` bounding the rounding error of ``(v - lo) * scale``.
    """
    zero = lo - lo
    near = 0
    for j in range(part.size):
        t = (part[j] - lo) * scale
        tc = t if t > zero else zero
        tc = tc if tc < top else top
        b = np.int32(tc)
        frac = t - b
        near += (frac < delta) | (frac > 1 - delta)
        guess[j] = b
    return near > 0


@njit(nogil=True, cache=True)
def _fast_histogram(x, edges, counts, guess, lanes):
    """Histogram of a segment whose elements are all finite and inside the edges.

    ``guess`` (CHUNK int32) and ``lanes`` (8 × bins int64, zeroed) are scratch space.
    """
    bins = edges.size - 1
    lo64, hi64 = edges[0], edges[bins]
    scale64 = bins / (hi64 - lo64)
    eps = 2.0**-23 if x.itemsize == 4 else 2.0**-52
    delta = 4 * eps * ((abs(lo64) + abs(hi64)) * scale64 + bins)
    if not delta < 0.25:  # the working precision cannot place values: exact search only
        extra = np.zeros(4, np.int64)
        _careful_histogram(x, edges, counts, extra)
        return
    typed = np.empty(3, x.dtype)  # lo, scale, top in the working precision
    typed[0], typed[1], typed[2] = lo64, scale64, bins - 1
    for chunk in range(0, x.size, CHUNK):
        part = x[chunk : chunk + CHUNK]
        n = part.size
        if _guess_bins(part, typed[0], typed[1], typed[2], delta, guess):
            for j in range(n):
                guess[j] = _exact_bin(np.float64(part[j]), guess[j], edges, bins)
        m = n - n % 8
        for j in range(0, m, 8):
            for lane in range(8):
                lanes[lane, guess[j + lane]] += 1
        for j in range(m, n):
            lanes[0, guess[j]] += 1
    for lane in range(8):  # 8 sub-histograms avoided store-to-load stalls; merge, reset
        for b in range(bins):
            counts[b] += lanes[lane, b]
            lanes[lane, b] = 0


@njit(nogil=True, cache=True)
def _careful_histogram(x, edges, counts, extra):
    """Histogram of finite in-range elements; ``extra`` gets below, above, NaN, Inf counts."""
    bins = edges.size - 1
    lo = edges[0]
    hi = edges[bins]
    scale = bins / (hi - lo)
    for i in range(x.size):
        v = np.float64(x[i])
        if v != v:
            extra[2] += 1
        elif v - v != 0.0:
            extra[3] += 1
        elif v < lo:
            extra[0] += 1
        elif v > hi:
            extra[1] += 1
        else:
            t = (v - lo) * scale
            guess = np.int64(t) if t == t and t < bins else bins - 1
            counts[_exact_bin(v, guess, edges, bins)] += 1


@njit(nogil=True, cache=True)
def segment_histograms(x, offsets, segments, edges, counts, extra, careful):
    """Histogram segment ``segments[k]`` into ``counts[k]`` with ``edges[k]``.

    ``careful[k]`` selects the slow kernel (NaN/Inf present or values outside the range);
    ``extra[k]`` then receives below, above, NaN and Inf counts.
    """
    guess = np.empty(CHUNK, np.int32)
    lanes = np.zeros((8, edges.shape[1] - 1), np.int64)
    for k in range(segments.size):
        seg = segments[k]
        part = x[offsets[seg] : offsets[seg + 1]]
        if careful[k]:
            _careful_histogram(part, edges[k], counts[k], extra[k])
        else:
            _fast_histogram(part, edges[k], counts[k], guess, lanes)


@njit(nogil=True, cache=True, fastmath=_FAST)
def _update_norms(new, old):
    d2 = 0.0
    o2 = 0.0
    for i in range(new.size):
        o = np.float64(old[i])
        d = np.float64(new[i]) - o
        d2 += d * d
        o2 += o * o
    return d2, o2


@njit(nogil=True, cache=True)
def segment_update_norms(new, old, offsets, out):
    """``out[i] = (‖new - old‖², ‖old‖²)`` over segment ``i``."""
    for seg in range(offsets.size - 1):
        a, b = offsets[seg], offsets[seg + 1]
        out[seg, 0], out[seg, 1] = _update_norms(new[a:b], old[a:b])


@njit(nogil=True, cache=True, fastmath=_FAST)
def step_norms(theta, direction, scale):
    """``(‖scale·D‖², ‖θ + scale·D‖²)``: the step and the weights before it, when
    ``θ_before = θ_after + scale·D`` for an optimizer whose step direction D is known."""
    d2 = 0.0
    o2 = 0.0
    for i in range(theta.size):
        d = scale * np.float64(direction[i])
        o = np.float64(theta[i]) + d
        d2 += d * d
        o2 += o * o
    return d2, o2


@njit(nogil=True, cache=True)
def segment_step_norms(theta, direction, scales, offsets, out):
    """``out[i] = step_norms`` of segment ``i`` with its own ``scales[i]``."""
    for seg in range(offsets.size - 1):
        a, b = offsets[seg], offsets[seg + 1]
        out[seg, 0], out[seg, 1] = step_norms(theta[a:b], direction[a:b], scales[seg])
