"""Float32 fast paths of the moments' and histograms' kernels: the same figures, fewer cycles.

``scan32``: the first read of ``kernels.moments_of`` (every value finite?, zeros, min, max) as
one pass of integer operations on the values' bits, which LLVM vectorises (a float min/max
reduction it does not, even with fast math): 5× faster than the two float passes it replaces.
``guess_bins32``: the histogram's bin guesses with the near-an-edge test in float32 as well
(the float64 test kept LLVM from vectorising it), its margin doubled so that it flags every
value the float64 test flags, in int32 throughout (8 to a vector; int64 flags left 4).
``pair_histogram32``: the histogram (64 bins or fewer) of whole chunks, two values counted by
one increment of a table of pairs of bins, their guesses in fixed point (int32), the chunks
ahead asked for (``_prefetch``: without it the pass waits on memory); ~1.9× faster than the
single-value path was (bench/histogram_kernels.py). Counts, zeros, NaN/Inf counts, min and max
are exact, so any correct kernel gives them bit for bit; the float sums stay in ``kernels``.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

BLOCK = 1 << 30  # values per block of int32 zero counts (no overflow)
NEAR = 1 << 30  # ``guess_bins32``'s mark of a guess near a bin edge (bins are fewer)
PAIR_BINS = 64  # ``pair_histogram32``: at most this many bins (a 64 × 64 int32 table: 16 KB, in L1)
PAIR_CHUNK = 256  # values a chunk: its first half paired with its second
FRACTION = 16  # fixed-point bits of a value's place in its bin (``guess_pairs32``)
AHEAD = 4 * PAIR_CHUNK  # values fetched ahead of the chunk counted


@njit(nogil=True, cache=True)
def exact_bin(v, guess, edges, bins):
    """Move ``guess`` until ``edges[b] <= v < edges[b+1]`` (last bin closed)."""
    b = min(max(guess, 0), bins - 1)
    while b > 0 and v < edges[b]:
        b -= 1
    while b < bins - 1 and v >= edges[b + 1]:
        b += 1
    return b


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
        flag = np.int32(np.int32(frac < below) | np.int32(frac > above))  # int32 throughout:
        near = np.int32(near | flag)  # 8 to a vector (numba's int64 for int32 operands: 4)
        guess[j] = np.int32(b | np.int32(flag << np.int32(30)))
    return near != 0


@intrinsic
def _prefetch(typingctx, array, index):
    """A hint to fetch the cache line of ``array[index]`` into every cache level (no effect on
    the program's results; an index past the end is never asked for)."""

    def codegen(context, builder, signature, args):
        ty = signature.args[0]
        array = context.make_array(ty)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, ty, array, [args[1]], wraparound=False)
        byte, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fetch = builder.module.declare_intrinsic("llvm.prefetch", [byte],
                                                 ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]))
        builder.call(fetch, [builder.bitcast(pointer, byte), i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()
    return types.void(array, index), codegen


@njit(nogil=True, cache=True, fastmath=True)  # fast path only: values finite, in range
def guess_pairs32(first, second, lo, scale, top, margin, pairs):
    """``pairs[k]``: the bins of ``first[k]`` and ``second[k]`` as one index (``a · 64 + b``,
    ``PAIR_BINS``), plus ``NEAR`` where either may be off by one; ``q = (v - lo) · scale`` in
    float32 (``scale``: bins per unit · 2^FRACTION, so ``q`` is ``guess_bins32``'s ``t`` ·
    2^FRACTION, exactly), clamped to ``[0, top]``; its bin ``q >> FRACTION`` (``floor(t)``,
    ``guess_bins32``'s guess), near where its fraction's bits lie within ``margin`` of an edge.
    True if some value is near."""
    near = np.int32(0)
    twice = np.int32(2 * margin)
    low = np.int32((1 << FRACTION) - 1)
    for k in range(first.size):
        ta = (first[k] - lo) * scale
        tb = (second[k] - lo) * scale
        ta = ta if ta > 0 else np.float32(0)
        tb = tb if tb > 0 else np.float32(0)
        qa = np.int32(ta if ta < top else top)
        qb = np.int32(tb if tb < top else top)
        flag = np.int32(np.int32(np.int32((qa + margin) & low) < twice)  # fraction < margin or
                        | np.int32(np.int32((qb + margin) & low) < twice))  # ≥ 1 − margin
        near = np.int32(near | flag)
        pairs[k] = np.int32(np.int32(np.int32(qa >> FRACTION) << 6) | np.int32(qb >> FRACTION)
                            | np.int32(flag << 30))
    return near != 0


@njit(nogil=True, cache=True)
def pair_histogram32(x, edges, counts, delta):
    """Add to ``counts`` the exact histogram of ``x``'s whole chunks (float32, finite, inside
    the edges; at most ``PAIR_BINS`` bins; ``delta``: ``kernels._fast_histogram``'s bound on the
    guesses' error, in bins) and return how many values that was (0 where float32 cannot hold
    the fixed-point scale). The near test flags every value ``guess_bins32``'s flags (margin
    ``2 · delta`` of a bin, rounded up, plus one for the fraction's truncation), whose other
    guesses are the same, ``floor(t)``; flagged values are placed with ``exact_bin``."""
    bins = edges.size - 1
    lo64 = edges[0]
    scale = np.float64(np.float32(bins / (edges[bins] - lo64))) * 2.0**FRACTION
    whole = x.size - x.size % PAIR_CHUNK
    if not scale < 3e38 or not whole:
        return 0
    typed = np.empty(3, np.float32)
    typed[0], typed[1] = lo64, scale
    typed[2] = np.nextafter(np.float32(bins * 2.0**FRACTION), np.float32(0))  # frac bits all ones
    margin = np.int32(math.ceil(2 * delta * 2.0**FRACTION) + 1)
    half = PAIR_CHUNK // 2
    pairs = np.empty(half, np.int32)
    table = np.zeros(PAIR_BINS * PAIR_BINS, np.int32)
    for block in range(0, whole, BLOCK):  # int32 cells: at most 2^29 pairs between flushes
        for chunk in range(block, min(block + BLOCK, whole), PAIR_CHUNK):
            first, second = x[chunk:chunk + half], x[chunk + half:chunk + PAIR_CHUNK]
            near = guess_pairs32(first, second, typed[0], typed[1], typed[2], margin, pairs)
            if chunk + AHEAD + PAIR_CHUNK <= x.size:
                for k in range(0, PAIR_CHUNK, 16):  # a 64-byte line per 16 values
                    _prefetch(x, chunk + AHEAD + k)
            if near:
                for k in range(half):
                    if pairs[k] >= NEAR:
                        a = exact_bin(np.float64(first[k]), (pairs[k] - NEAR) >> 6, edges, bins)
                        b = exact_bin(np.float64(second[k]), pairs[k] & 63, edges, bins)
                        pairs[k] = (a << 6) | b
            for k in range(half):  # unsigned: every pair is a cell of the table
                table[np.uint64(pairs[k])] += 1
        for a in range(bins):  # rows: the first values' bins; columns: the second values'
            row = table[a * PAIR_BINS:a * PAIR_BINS + bins]
            counts[a] += row.sum()
            for b in range(bins):
                counts[b] += row[b]
        table[:] = 0
    return whole


def counted_in_pairs(x, edges, counts, delta):
    """In compiled code: ``pair_histogram32(x, edges, counts, delta)`` where ``x`` is float32 and
    the edges ``PAIR_BINS`` bins or fewer, else 0 (values counted: none); the choice by ``x``'s
    type is made when compiling, so no pair kernel is compiled for float64 gradients."""
    raise NotImplementedError("compiled code only")


@overload(counted_in_pairs)
def _counted_in_pairs(x, edges, counts, delta):
    if getattr(x, "dtype", None) != types.float32:
        return lambda x, edges, counts, delta: 0

    def counted(x, edges, counts, delta):
        return pair_histogram32(x, edges, counts, delta) if edges.size - 1 <= PAIR_BINS else 0
    return counted
