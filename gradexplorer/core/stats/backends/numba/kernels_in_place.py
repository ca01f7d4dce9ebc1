"""The Numba kernels over tensors read where they lie: one call for every tensor of a step.

Each kernel takes the tensors' addresses and sizes (int64 arrays, one dtype: ``like`` is an
empty array of it) and runs the per-segment kernels of ``kernels`` on each tensor's memory in
place, so a step's gradients cost one call per pass, no copy and no Python work per tensor. The
caller holds the tensors (contiguous, CPU, float32 or float64) for the duration of the call.
Numba's on-disk cache of these kernels holds the per-segment kernels compiled in (``kernels``,
``kernels32``, ``moments32``) but is invalidated only by a change to this file: touch it when those change.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from gradexplorer.core.stats.backends.numba.kernels import (
    CHUNK,
    histogram_of,
    moments_of,
    norm_of_array,
    update_norm_of,
)
from gradexplorer.core.stats.backends.numba.moments32 import copy_one_pass32
from gradexplorer.core.stats.backends.raw import INFS, MAX, MIN, NANS

AUTO, SYMMETRIC, FIXED = 0, 1, 2  # ``edges_of``'s range modes (``histogram.range_bounds``)


@intrinsic
def _pointer(typingctx, address, like):
    """``address`` (int64) as a pointer to ``like``'s dtype."""
    pointer = types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))
    return pointer(types.int64, like), codegen


@njit(nogil=True, cache=True)
def _at(addresses, sizes, i, like):
    return carray(_pointer(addresses[i], like), (sizes[i],))


@njit(nogil=True, cache=True)
def moments_at(addresses, sizes, like, out):
    """``out[i]``: the moments of tensor ``i`` (``kernels.moments_of``)."""
    for i in range(addresses.size):
        moments_of(_at(addresses, sizes, i, like), out[i])


@njit(nogil=True, cache=True)
def histograms_at(addresses, sizes, like, edges, counts, extra, careful):
    """``counts[i]``: the exact histogram of tensor ``i`` with ``edges[i]`` (``kernels.histogram_of``;
    float32 with 64 bins or fewer: in pairs of values, ``kernels32.pair_histogram32``)."""
    guess = np.empty(CHUNK, np.int32)
    lanes = np.zeros((8, edges.shape[1] - 1), np.int64)
    for i in range(addresses.size):
        histogram_of(_at(addresses, sizes, i, like), edges[i], counts[i], extra[i], careful[i],
                     guess, lanes)


@njit(nogil=True, cache=True)
def norms_at(addresses, sizes, like, out):
    """``out[i] = ‖tensor i‖`` (``kernels.norm_of_array``)."""
    for i in range(addresses.size):
        out[i] = norm_of_array(_at(addresses, sizes, i, like))


@njit(nogil=True, cache=True)
def copy_at(addresses, sizes, like, starts, into):
    """Tensor ``i`` copied to ``into[starts[i]:starts[i] + sizes[i]]``."""
    for i in range(addresses.size):
        source = _at(addresses, sizes, i, like)
        _copy(source, into[starts[i]:starts[i] + source.size])


@njit(nogil=True, cache=True)
def copy_moments_at(addresses, sizes, like, starts, into, out):
    """``copy_at`` and ``out[i]``: the moments of tensor ``i``'s copy (``moments_at`` of the
    copy, bit for bit), a float32 tensor's in the copy's own pass (``moments32.copy_one_pass32``)."""
    for i in range(addresses.size):
        source = _at(addresses, sizes, i, like)
        target = into[starts[i]:starts[i] + source.size]
        if source.itemsize == 4 and source.size and copy_one_pass32(source, target, out[i]):
            continue
        if source.itemsize != 4 or not source.size:  # float32 with NaN/Inf: copied already
            _copy(source, target)
        moments_of(target, out[i])


@njit(nogil=True, cache=True)
def _copy(source, target):
    """``target[:] = source`` as a plain loop, which LLVM vectorises (a slice assignment is
    about twice as slow, an indexed loop into the whole buffer four times)."""
    for j in range(source.size):
        target[j] = source[j]


@njit(nogil=True, cache=True)
def update_norms_at(addresses, sizes, like, before, starts, out):
    """``out[i] = (‖tensor i − before_i‖, ‖before_i‖)``, ``before_i`` at ``before[starts[i]:]``
    (``kernels.update_norm_of``)."""
    for i in range(addresses.size):
        update_norm_of(_at(addresses, sizes, i, like), before[starts[i]:starts[i] + sizes[i]], out[i])


@njit(nogil=True, cache=True, fastmath={"reassoc"}, error_model="numpy")
def _second_moment_sums(v, w, bc, lr, eps):
    """``(Σ v/bc, Σ lr/(√(w/bc) + eps))`` in float64: each term as torch's float64 ops give it
    (no reciprocal, no fused multiply-add), only the order of the additions free, so LLVM
    vectorises them (the numpy error model: no zero-division check in the loop)."""
    s = 0.0
    t = 0.0
    for j in range(v.size):
        s += np.float64(v[j]) / bc
        t += lr / (math.sqrt(np.float64(w[j]) / bc) + eps)
    return s, t


@njit(nogil=True, cache=True)
def second_moments_at(v_addresses, w_addresses, sizes, like, bc, lr, eps, out):
    """``out[i] = (√mean(v_i / bc_i), mean(lr_i / (√(w_i / bc_i) + eps_i)))``: Adam's RMS √v̂
    and effective step size of tensor ``i`` (``optimizer_state``; ``w`` the second moment the
    update uses: ``v`` itself, or its running maximum with amsgrad)."""
    for i in range(v_addresses.size):
        s, t = _second_moment_sums(_at(v_addresses, sizes, i, like), _at(w_addresses, sizes, i, like),
                                   bc[i], lr[i], eps[i])
        out[i, 0], out[i, 1] = math.sqrt(s / sizes[i]), t / sizes[i]


@njit(nogil=True, cache=True)
def edges_of(moments, mode, fixed_lo, fixed_hi, edges, careful):
    """``edges[i]``: ``histogram.histogram_edges(*range_bounds(...))`` of moments row ``i`` (the
    same float64 operations in the same order, so the same edges bit for bit), and
    ``careful[i]``: NaN/Inf present or values outside the edges. False when a row's edges are
    not finite and strictly increasing: the caller then takes ``histogram_edges``, whose
    fallback ranges handle those rows."""
    bins = edges.shape[1] - 1
    for i in range(moments.shape[0]):
        mn, mx = moments[i, MIN], moments[i, MAX]
        lo, hi = (mn, mx) if mn <= mx else (0.0, 0.0)
        if mode == SYMMETRIC:
            top = max(abs(lo), abs(hi))
            lo, hi = -top, top
        elif mode == FIXED:
            lo, hi = fixed_lo, fixed_hi
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        step = (hi - lo) / bins
        row = edges[i]
        for k in range(bins):
            row[k] = np.float64(k) * step + lo
        row[bins] = hi
        for k in range(bins):
            if not row[k + 1] > row[k]:
                return False
        careful[i] = moments[i, NANS] + moments[i, INFS] > 0 or mn < row[0] or mx > row[bins]
    return True
