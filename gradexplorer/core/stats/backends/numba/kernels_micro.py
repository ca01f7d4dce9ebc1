"""The Numba kernel of the noise scale's capture (``core/steps/micro_batches.py``): at the end of
a backward, each gradient's own part since the previous backward, read in place.

``diff_squares_at``: for every tensor ``i`` (addresses and sizes as ``kernels_in_place``), the
float64 sum of squares of ``a − kept`` (``kept`` the flat copy of the gradients at the end of
the previous backward, 0 at a step's first) and of ``a`` itself, then ``kept = a``: one pass
over each gradient, the differences taken in float64 (exact for float32 gradients), the sums
reassociated so that LLVM vectorises them (``kernels._FAST``: NaN and Inf kept).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gradexplorer.core.stats.backends.numba.kernels import _FAST
from gradexplorer.core.stats.backends.numba.kernels_in_place import _at


@njit(nogil=True, cache=True, fastmath=_FAST)
def _first(a, kept):
    """Σa² (the step's first backward: its own gradient is ``a``), and ``kept = a``."""
    a2 = 0.0
    for j in range(a.size):
        x = np.float64(a[j])
        a2 += x * x
        kept[j] = a[j]
    return a2


@njit(nogil=True, cache=True, fastmath=_FAST)
def _later(a, kept):
    """(Σ(a − kept)², Σa²) in float64, and ``kept = a``."""
    d2 = 0.0
    a2 = 0.0
    for j in range(a.size):
        x = np.float64(a[j])
        y = x - np.float64(kept[j])
        d2 += y * y
        a2 += x * x
        kept[j] = a[j]
    return d2, a2


@njit(nogil=True, cache=True)
def diff_squares_at(addresses, sizes, like, kept, starts, first, out_diff, out_sq):
    for i in range(addresses.size):
        a = _at(addresses, sizes, i, like)
        part = kept[starts[i]:starts[i] + a.size]
        if first:
            out_sq[i] = _first(a, part)
            out_diff[i] = out_sq[i]
        else:
            out_diff[i], out_sq[i] = _later(a, part)
