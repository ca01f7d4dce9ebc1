"""Numba kernels: gradient moments and exact histograms over segments of a flat CPU array.

A *segment* is one parameter's gradient inside a flat array (``offsets[i]:offsets[i+1]``).
Moments take two passes (min/max, then scaled sums shifted by the midrange; a finite float32
segment one, ``moments32``); a histogram takes another (its range comes from the moments).
Histograms are exact: element ``v`` lands in bin ``k`` iff ``edges[k] <= v < edges[k+1]``
(the last bin also holds ``v == edges[-1]``), as ``np.histogram`` with those edges.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from gradexplorer.core.stats.backends.numba.kernels32 import (
    NEAR,
    counted_in_pairs,
    exact_bin,
    guess_bins32,
    scan32,
)
from gradexplorer.core.stats.backends.numba.moments32 import one_pass32
from gradexplorer.core.stats.backends.raw import (
    DSQ,
    DSUM,
    FINITE,
    INFS,
    MAX,
    MIN,
    MOMENT_COLUMNS,
    NANS,
    NSQ,
    SCALE,
    SCALE_EXPONENTS,
    SHIFT,
    ZEROS,
)

# Reassociation lets LLVM vectorise the sums; NaN/Inf semantics are kept (no nnan/ninf).
_FAST = {"reassoc", "contract"}
CHUNK = 1024  # small chunks: few of them hold a value near a bin edge
TINY = 2.0**-960  # sums of squares below this may have lost digits to underflow
__all__ = ["MOMENT_COLUMNS", "histogram_of", "moments_of", "segment_histograms", "segment_moments",
           "segment_update_norms", "update_norm_of"]


@njit(nogil=True, cache=True, fastmath=_FAST)
def _sum_and_zeros(x):
    """Float64 sum (NaN/Inf, or overflow, on any non-finite) and zero count: the fast check."""
    s = 0.0
    zeros = 0
    for i in range(x.size):
        v = np.float64(x[i])
        s += v
        zeros += v == 0.0
    return s, zeros


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
def _careful_scan(x, row):
    """Min, max and zeros of the finite elements; NaN and ±Inf counted apart."""
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
            lo = min(lo, v)
            hi = max(hi, v)
            zeros += v == 0.0
    row[MIN], row[MAX], row[ZEROS], row[NANS], row[INFS] = lo, hi, zeros, nans, infs
    row[FINITE] = x.size - nans - infs


@njit(nogil=True, cache=True, fastmath=True)  # every element finite: fast math holds
def _fast_sums(x, inv, k):
    n2 = 0.0
    d1 = 0.0
    d2 = 0.0
    for i in range(x.size):
        a = np.float64(x[i]) * inv
        d = a - k
        n2 += a * a
        d1 += d
        d2 += d * d
    return n2, d1, d2


@njit(nogil=True, cache=True)
def _careful_sums(x, inv, k):
    n2 = 0.0
    d1 = 0.0
    d2 = 0.0
    for i in range(x.size):
        v = np.float64(x[i])
        if v - v == 0.0:
            a = v * inv
            d = a - k
            n2 += a * a
            d1 += d
            d2 += d * d
    return n2, d1, d2


@njit(nogil=True, cache=True)
def _scale_and_shift(lo, hi):
    """Power-of-two scale above max(|lo|, |hi|) and the midrange shift (see ``raw``); the
    fused torch path computes the same in ``fused.moments``."""
    if not lo <= hi:
        return 1.0, 0.0
    exponent = math.frexp(max(abs(lo), abs(hi)))[1]
    exponent = min(max(exponent, SCALE_EXPONENTS[0]), SCALE_EXPONENTS[1])
    return math.ldexp(1.0, exponent), lo / 2 + hi / 2


@njit(nogil=True, cache=True)
def segment_moments(x, offsets, out):
    """Fill ``out[i]`` (MOMENT_COLUMNS wide, see ``raw``) with the moments of segment ``i``.

    Two reads: min/max/counts, then the scaled, shifted sums.
    """
    for seg in range(offsets.size - 1):
        moments_of(x[offsets[seg] : offsets[seg + 1]], out[seg])


@njit(nogil=True, cache=True)
def moments_of(part, row):
    """Fill ``row`` (MOMENT_COLUMNS wide) with the moments of ``part`` (two reads; float32
    without NaN/Inf: one, ``moments32``)."""
    if part.itemsize == 4 and part.size:  # float32: one vectorised integer pass (kernels32)
        if one_pass32(part, row):
            return
        finite, zeros, lo, hi = scan32(part)
    else:
        total, zeros = _sum_and_zeros(part)
        finite = total - total == 0.0
        lo, hi = np.inf, -np.inf
        if finite and part.size:
            small, large = _finite_min_max(part)
            lo, hi = np.float64(small), np.float64(large)
    if finite:
        row[MIN], row[MAX] = lo, hi
        row[ZEROS], row[NANS], row[INFS], row[FINITE] = zeros, 0, 0, part.size
    else:
        _careful_scan(part, row)
    scale, shift = _scale_and_shift(row[MIN], row[MAX])
    inv = 1.0 / scale
    if row[FINITE] == part.size:
        sums = _fast_sums(part, inv, shift * inv)
    else:
        sums = _careful_sums(part, inv, shift * inv)
    row[NSQ], row[DSUM], row[DSQ] = sums
    row[SCALE], row[SHIFT] = scale, shift


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
    done = counted_in_pairs(x, edges, counts, delta)  # float32, 64 bins or fewer: whole chunks
    typed = np.empty(5, x.dtype)  # lo, scale, top; float32: the near test's margins (doubled)
    typed[0], typed[1], typed[2], typed[3], typed[4] = lo64, scale64, bins - 1, 2 * delta, 1 - 2 * delta
    step = CHUNK // 4 if x.itemsize == 4 else CHUNK
    for chunk in range(done, x.size, step):
        part = x[chunk : chunk + step]
        n = part.size
        near = guess_bins32(part, typed[0], typed[1], typed[2], typed[3], typed[4], guess) \
            if x.itemsize == 4 else _guess_bins(part, typed[0], typed[1], typed[2], delta, guess)
        if near and x.itemsize == 4:  # only the values marked near an edge (``NEAR``)
            for j in range(n):
                if guess[j] >= NEAR:
                    guess[j] = exact_bin(np.float64(part[j]), guess[j] - NEAR, edges, bins)
        elif near:
            for j in range(n):
                guess[j] = exact_bin(np.float64(part[j]), guess[j], edges, bins)
        m = n - n % 8
        for j in range(0, m, 8):  # unsigned indices (every guess is a bin): no wraparound
            for lane in range(8):  # test, ~1 read pass of ResNet-18's 11.7M values less
                lanes[np.uint64(lane), np.uint64(guess[j + lane])] += 1
        for j in range(m, n):
            lanes[0, np.uint64(guess[j])] += 1
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
            counts[exact_bin(v, guess, edges, bins)] += 1


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
        histogram_of(x[offsets[seg] : offsets[seg + 1]], edges[k], counts[k], extra[k], careful[k],
                     guess, lanes)


@njit(nogil=True, cache=True)
def histogram_of(part, edges, counts, extra, careful, guess, lanes):
    """One segment's histogram (see ``segment_histograms``); ``guess`` and ``lanes`` scratch."""
    if careful:
        _careful_histogram(part, edges, counts, extra)
    else:
        _fast_histogram(part, edges, counts, guess, lanes)


@njit(nogil=True, cache=True, fastmath=_FAST)
def update_state_sums(new, old, state):
    """``(Σ(new − old)², Σ old², Σ state²)`` in float64, one loop: the update norms' first pass
    (``update_norm_of`` passes ``old`` as ``state``: the same compiled loop as the one that reads
    a state beside the weights, ``numba.update_state``, so ‖Δθ‖ and ‖θ‖ are the same bits with
    or without it; the repeated stream is read from L1)."""
    d2 = 0.0
    o2 = 0.0
    s2 = 0.0
    for i in range(new.size):
        o = np.float64(old[i])
        d = np.float64(new[i]) - o
        s = np.float64(state[i])
        d2 += d * d
        o2 += o * o
        s2 += s * s
    return d2, o2, s2


@njit(nogil=True, cache=True, fastmath=_FAST)
def _update_sums(new, old, inv_d, inv_o):
    d2 = 0.0
    o2 = 0.0
    for i in range(new.size):
        o = np.float64(old[i])
        d = np.float64(new[i]) - o
        d2 += (d * inv_d) ** 2
        o2 += (o * inv_o) ** 2
    return d2, o2


@njit(nogil=True, cache=True)
def _update_maxima(new, old):
    md = 0.0
    mo = 0.0
    for i in range(new.size):
        o = np.float64(old[i])
        md = max(md, abs(np.float64(new[i]) - o))
        mo = max(mo, abs(o))
    return md, mo


@njit(nogil=True, cache=True)
def _pow2_above(top):
    exponent = math.frexp(top)[1] if top - top == 0.0 else 0
    return math.ldexp(1.0, min(max(exponent, SCALE_EXPONENTS[0]), SCALE_EXPONENTS[1]))


@njit(nogil=True, cache=True)
def segment_update_norms(new, old, offsets, out):
    """``out[i] = (‖new - old‖, ‖old‖)`` over segment ``i``, in float64, never overflowing:
    plain sums first; a second, scaled pass when a sum overflowed or may have underflowed."""
    for seg in range(offsets.size - 1):
        a, b = offsets[seg], offsets[seg + 1]
        update_norm_of(new[a:b], old[a:b], out[seg])


@njit(nogil=True, cache=True)
def update_norm_of(new, old, row):
    """``row[:] = (‖new - old‖, ‖old‖)`` (see ``segment_update_norms``)."""
    d2, o2, _ = update_state_sums(new, old, old)
    if d2 != d2 or o2 != o2:
        row[0], row[1] = np.nan, np.nan
        return
    # 0 is not clean either: squares below 2^-1074 vanish (weights of 1e-170 summed to 0)
    if d2 - d2 == 0.0 and o2 - o2 == 0.0 and not (d2 < TINY or o2 < TINY):
        row[0], row[1] = math.sqrt(d2), math.sqrt(o2)
        return
    md, mo = _update_maxima(new, old)
    sd, so = _pow2_above(md), _pow2_above(mo)
    d2, o2 = _update_sums(new, old, 1.0 / sd, 1.0 / so)
    row[0], row[1] = sd * math.sqrt(d2), so * math.sqrt(o2)


@njit(nogil=True, cache=True, fastmath=_FAST)
def _squares(x):
    s = 0.0
    for i in range(x.size):
        v = np.float64(x[i])
        s += v * v
    return s


@njit(nogil=True, cache=True)
def norm_of_array(x):
    """‖x‖ in float64 (NaN if any NaN, Inf if any Inf), never overflowing: a plain sum of
    squares first (vectorised), a pass scaled by a power of two when it overflowed or may have
    underflowed."""
    s = _squares(x)
    if s != s:
        return np.nan
    if s - s == 0.0 and not s < TINY:  # 0 too: squares below 2^-1074 vanish
        return math.sqrt(s)
    top = 0.0
    for i in range(x.size):
        top = max(top, abs(np.float64(x[i])))
    if top - top != 0.0:
        return np.inf
    if top == 0.0:
        return 0.0
    inv = 1.0 / _pow2_above(top)
    t = 0.0
    for i in range(x.size):
        v = np.float64(x[i]) * inv
        t += v * v
    return math.sqrt(t) / inv
