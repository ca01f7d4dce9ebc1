"""Float32 fast paths of the moments' and histograms' kernels: the same figures, fewer cycles.

``scan32``: the first read of ``kernels.moments_of`` (every value finite?, zeros, min, max) as
one pass of integer operations on the values' bits, which LLVM vectorises (a float min/max
reduction it does not, even with fast math): 5× faster than the two float passes it replaces.
``guess_bins32``: the histogram's bin guesses with the near-an-edge test in float32 as well
(the float64 test kept LLVM from vectorising it), its margin doubled so that it flags every
value the float64 test flags. Counts, zeros, NaN/Inf counts, min and max are exact, so any
correct kernel gives them bit for bit; the float sums stay in ``kernels``, unchanged.
"""

from __future__ import annotations

import numpy as np
from numba import njit

BLOCK = 1 << 30  # values per block of int32 zero counts (no overflow)
NEAR = 1 << 30  # ``guess_bins32``'s mark of a guess near a bin edge (bins are fewer)


@njit(nogil=True, cache=True)
def _key(bits):
    """An int32 that orders like the float32 whose bits ``bits`` are, −0 and +0 both 0 (equal,
    as ``min`` and ``max`` compare them)."""
    sign = bits >> 31  # 0, or -1 for a negative float
    return np.int32((bits ^ (sign & np.int32(0x7FFFFFFF))) - sign)


@njit(nogil=True, cache=True)
def _value(key, x):
    """The float32 whose key is ``key``, as float64; a zero takes the sign of ``x``'s first
    zero (the float passes keep the first of equal values: the same zero, bit for bit)."""
    bits = np.empty(1, np.int32)
    if key > 0:
        bits[0] = key
    elif key < 0:
        bits[0] = (key - 1) ^ np.int32(0x7FFFFFFF)
    else:
        whole = x.view(np.int32)
        i = 0
        while whole[i] & np.int32(0x7FFFFFFF):
            i += 1
        bits[0] = whole[i]
    return np.float64(bits.view(np.float32)[0])


@njit(nogil=True, cache=True)
def _scan_block(bits):
    kmin = np.int32(0x7FFFFFFF)
    kmax = np.int32(-0x7FFFFFFF)
    amax = np.int32(0)
    zeros = np.int32(0)
    for i in range(bits.size):
        b = bits[i]
        a = np.int32(b & np.int32(0x7FFFFFFF))
        k = _key(b)
        kmin = min(kmin, k)
        kmax = max(kmax, k)
        amax = max(amax, a)
        zeros = np.int32(zeros + np.int32(a == 0))
    return kmin, kmax, amax, zeros


@njit(nogil=True, cache=True)
def scan32(x):
    """``(finite, zeros, min, max)`` of a non-empty float32 array: whether every value is
    finite, how many are ±0, and (when finite) the least and greatest, as float64."""
    bits = x.view(np.int32)
    kmin = np.int32(0x7FFFFFFF)
    kmax = np.int32(-0x7FFFFFFF)
    amax = np.int32(0)
    zeros = 0
    for start in range(0, bits.size, BLOCK):
        lo, hi, top, z = _scan_block(bits[start:start + BLOCK])
        kmin, kmax, amax = min(kmin, lo), max(kmax, hi), max(amax, top)
        zeros += z
    finite = amax < np.int32(0x7F800000)
    if not finite:
        return False, zeros, np.nan, np.nan
    return True, zeros, _value(kmin, x), _value(kmax, x)


@njit(nogil=True, cache=True, fastmath=True)  # fast path only: values finite, in range
def guess_bins32(part, lo, scale, top, below, above, guess):
    """``guess[j]``: bin of ``part[j]`` from ``(v - lo) * scale`` in float32, plus ``NEAR``
    where its fraction of a bin lies under ``below`` or over ``above`` (near an edge: the
    guess may be off by one); True if some value is near."""
    near = np.int32(0)
    for j in range(part.size):
        t = (part[j] - lo) * scale
        tc = t if t > 0 else np.float32(0)
        tc = tc if tc < top else top
        b = np.int32(tc)
        frac = t - np.float32(b)
        flag = np.int32(frac < below) | np.int32(frac > above)
        near |= flag
        guess[j] = b | (flag << np.int32(30))
    return near != 0
