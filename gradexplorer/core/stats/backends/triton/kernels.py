"""The two Triton kernels of the statistics pass, as plain functions (``triton.stats`` jits them).

They are left undecorated so that ``triton.stats`` can build them for the mode in force when
they are first used: ``triton.jit`` decides between compiling and interpreting
(``TRITON_INTERPRET=1``) at decoration time, so a module-level decorator would fix the mode at
import. Both read one row of the padded block layout (``blocks.Blocks``) per program: ``BLOCK``
values of one tensor, the tail of a tensor's last row +Inf padding.

Bits matter in the histogram: a value is placed by comparing it with its neighbouring edges
*loaded* from the edges table the host reports (never recomputed here), and the launcher turns
floating-point contraction off (``enable_fp_fusion=False``) so that no ``a * b + c`` becomes an
FMA on a GPU.
"""

from __future__ import annotations

try:
    import triton.language as tl
except ImportError:  # no Triton: triton_stats.usable() is False and nothing here is called
    tl = None


def extremes(x_ptr, low_ptr, high_ptr, counts_ptr, BLOCK: tl.constexpr):
    """Per row: finite min and max (+Inf / -Inf where none), and counts of zeros, NaN and
    ±Inf (padding included) into ``counts[row, 0:3]`` (int64)."""
    row = tl.program_id(0).to(tl.int64)
    x = tl.load(x_ptr + row * BLOCK + tl.arange(0, BLOCK))
    nan = x != x
    finite = tl.abs(x) < float("inf")  # False for NaN too
    tl.store(low_ptr + row, tl.min(tl.where(finite, x, float("inf")), axis=0))
    tl.store(high_ptr + row, tl.max(tl.where(finite, x, float("-inf")), axis=0))
    tl.store(counts_ptr + row * 3, tl.sum((x == 0).to(tl.int64), axis=0))
    tl.store(counts_ptr + row * 3 + 1, tl.sum(nan.to(tl.int64), axis=0))
    tl.store(counts_ptr + row * 3 + 2, tl.sum((~finite & ~nan).to(tl.int64), axis=0))


def sums_and_histogram(x_ptr, segment_ptr, shift_ptr, inverse_ptr, scaled_shift_ptr, sums_ptr,
                       edges_ptr, first_ptr, last_ptr, unit_ptr, bin_scale_ptr, counts_ptr,
                       BLOCK: tl.constexpr, WIDE: tl.constexpr, HISTOGRAM: tl.constexpr,
                       BINS: tl.constexpr, WIDTH: tl.constexpr):
    """Per row: Σd, Σd², Σa² in float64 into ``sums[row, 0:3]`` (as ``fused.moments``), and,
    if ``HISTOGRAM``, the row's counts into ``counts[row, 0:BINS+4]``: bins, NaN and Inf
    (left 0: the moments know them), below, above.

    ``WIDE`` (float64 input): ``a = x / s`` and ``d = a - K / s`` (``scaled_shift``), so that
    squares neither overflow nor underflow. Otherwise ``a = x`` and ``d = x - K`` (squares of
    float32 values are exact in float64) and the caller scales the sums by the power of two.
    """
    row = tl.program_id(0).to(tl.int64)
    segment = tl.load(segment_ptr + row)
    v = tl.load(x_ptr + row * BLOCK + tl.arange(0, BLOCK)).to(tl.float64)
    finite = tl.abs(v) < float("inf")
    v = tl.where(finite, v, 0.0)
    if WIDE:
        a = v * tl.load(inverse_ptr + segment)
        d = a - tl.load(scaled_shift_ptr + segment)
    else:
        a = v
        d = v - tl.load(shift_ptr + segment)
    d = tl.where(finite, d, 0.0)
    tl.store(sums_ptr + row * 3, tl.sum(d, axis=0))
    tl.store(sums_ptr + row * 3 + 1, tl.sum(d * d, axis=0))
    tl.store(sums_ptr + row * 3 + 2, tl.sum(a * a, axis=0))
    if HISTOGRAM:
        first = tl.load(first_ptr + segment)
        last = tl.load(last_ptr + segment)
        # a guess off by at most one bin, kept in the table: positions in units of ``unit``, a
        # power of two near the range's magnitude, so that neither a range wider than max float
        # nor a subnormal one overflows (``bin_scale`` = BINS / (last·unit − first·unit))
        unit = tl.load(unit_ptr + segment)
        guess = (v * unit - first * unit) * tl.load(bin_scale_ptr + segment)
        guess = tl.where(guess == guess, guess, 0.0)
        guess = tl.minimum(tl.maximum(guess, 0.0), BINS - 1.0)
        k = guess.to(tl.int32)  # truncation is floor here: guess >= 0
        edges = edges_ptr + segment * (BINS + 1)
        left = tl.load(edges + k)
        right = tl.load(edges + k + 1)
        down = v < left
        up = (v >= right) & (~down)
        k = k - down.to(tl.int32) + up.to(tl.int32)
        k = tl.minimum(tl.maximum(k, 0), BINS - 1)  # the last bin is closed
        below = finite & (v < first)
        above = finite & (v > last)
        inside = finite & (~below) & (~above)
        k = tl.where(inside, k, WIDTH - 1)  # a slot never reported (no histogram mask: 3.0)
        columns = tl.arange(0, WIDTH)  # WIDTH: a power of two > BINS + 4
        counts = tl.histogram(k, WIDTH).to(tl.int64)  # 0 from column BINS to WIDTH - 2
        counts = tl.where(columns == BINS + 2, tl.sum(below.to(tl.int64), axis=0), counts)
        counts = tl.where(columns == BINS + 3, tl.sum(above.to(tl.int64), axis=0), counts)
        tl.store(counts_ptr + row * (BINS + 4) + columns, counts, mask=columns < BINS + 4)
