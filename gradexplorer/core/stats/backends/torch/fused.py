"""Fused torch statistics over many gradients at once (one (device, dtype) group).

The gradients are copied into a padded block layout (``blocks.Blocks``: every row belongs to
one tensor), so every figure of every parameter comes from a fixed number of whole-buffer ops
whatever the parameter count: elementwise ops on kept buffers with per-row broadcasting,
``dim=1`` reductions, and one small per-row → per-tensor sum or min/max. Nothing here reads a
value back to the host, builds a host scalar into a device tensor or makes a shape that
depends on the data. The histograms are in ``fused_bins``.

On the CPU every full-length op is a pass over memory, so the choice of ops is the cost:
comparisons write 0/1 in the working dtype (summing booleans or mixing dtypes in one op is
several times slower), float64 appears only where a sum needs it, and the float64 sums of
squares are ``vector_norm`` reductions (one read, no temporary).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gradexplorer.core.stats.backends import raw as C
from gradexplorer.core.stats.backends.torch.blocks import Blocks
from gradexplorer.core.stats.histogram import finite_bounds

F64 = torch.float64
KERNEL_DTYPES = (torch.float32, torch.float64)
INF = float("inf")


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32/float64 as they are; half types widened to float32 (exactly)."""
    return dtype if dtype in KERNEL_DTYPES else torch.float32


def pow2_above(top: torch.Tensor, limits: tuple[int, int] = C.SCALE_EXPONENTS):
    """Per value, ``2**e`` above ``top`` (e clamped to ``limits``) and its inverse, float64,
    both exact (built from bits)."""
    exponent = _exponent_above(top, limits)
    return torch.bitwise_left_shift(exponent + 1023, 52).view(F64), _inverse_pow2(exponent)


def inverse_pow2_above(top: torch.Tensor, limits: tuple[int, int] = C.SCALE_EXPONENTS):
    """``pow2_above(top, limits)[1]`` alone (the ops of the other left out)."""
    return _inverse_pow2(_exponent_above(top, limits))


def _exponent_above(top: torch.Tensor, limits: tuple[int, int]) -> torch.Tensor:
    return torch.frexp(top).exponent.to(torch.int64).clamp_(*limits)


def _inverse_pow2(exponent: torch.Tensor) -> torch.Tensor:
    return torch.bitwise_left_shift(1023 - exponent, 52).view(F64)


def row_norms(x: torch.Tensor) -> torch.Tensor:
    """√Σx² of each row of a float64 buffer (one read; its square is Σx² to an ulp or two)."""
    return torch.linalg.vector_norm(x, dim=1)


@dataclass
class Prepared:
    """What the histogram pass reuses from the moments pass."""

    low_filled: torch.Tensor  # (rows, block) working dtype: the values, NaN/±Inf/padding → -Inf
    bad: torch.Tensor | None  # (P,) int64 NaN, ±Inf and padding elements; None: not counted
    bounds: tuple[torch.Tensor, torch.Tensor] | None = None  # (P,) float64 ``finite_bounds``


def counts_and_extremes(x: torch.Tensor, blocks: Blocks, count_bad: bool):
    """Per tensor zeros, NaNs and finite (min, max) in float64 (min/max ±Inf where nothing is
    finite), the count of bad elements (NaN, ±Inf, padding) per tensor if ``count_bad`` (the
    histograms of an auto or symmetric range count them anyway), and ``x`` with every bad
    element set to -Inf (kept buffer).

    Each indicator is written as 0/1 in the working dtype and summed per row: exact (a row holds
    at most 1024 elements) and far faster than counting booleans.
    """
    high_filled = blocks.buffer("high_filled", x.dtype)
    low_filled = blocks.buffer("low_filled", x.dtype)
    flag = blocks.buffer("flag", x.dtype)
    low = torch.nan_to_num(x, nan=INF, posinf=INF, neginf=INF, out=high_filled).amin(1)
    per_row = [torch.eq(high_filled, INF, out=flag).sum(1)] if count_bad else []
    high = torch.nan_to_num(x, nan=-INF, posinf=-INF, neginf=-INF, out=low_filled).amax(1)
    per_row += [torch.ne(x, x, out=flag).sum(1), torch.eq(x, 0, out=flag).sum(1)]
    lo = blocks.reduce_rows(low, "min", INF).to(F64)
    hi = blocks.reduce_rows(high, "max", -INF).to(F64)
    sums = blocks.sum_rows(torch.stack(per_row, 1).to(F64)).unbind(1)
    bad = sums[0].long() if count_bad else None
    return sums[-1], sums[-2], lo, hi, Prepared(low_filled, bad)


def fill_counts(rows: torch.Tensor, bad: torch.Tensor, blocks: Blocks) -> None:
    """Set the Inf and finite columns of ``rows`` from the bad-element counts (in place)."""
    nans = rows[:, C.NANS]
    infs = bad.to(F64) - nans - blocks.pad_total
    rows[:, C.INFS: C.FINITE + 1] = torch.stack([infs, blocks.lengths - nans - infs], 1)


def moments(x: torch.Tensor, blocks: Blocks, count_bad: bool = True):
    """``(P, MOMENT_COLUMNS)`` float64 rows (as ``raw``) and what the histograms reuse; without
    ``count_bad`` the Inf and finite columns wait for ``fill_counts``.

    ``d = x - shift`` is formed from the raw values, so NaN, ±Inf and padding stay non-finite
    through the subtraction and one ``nan_to_num`` sets exactly those to 0.
    """
    zeros, nans, lo, hi, prepared = counts_and_extremes(x, blocks, count_bad)
    lo0, hi0 = prepared.bounds = finite_bounds(lo, hi)
    scale, inverse = pow2_above(torch.maximum(lo0.abs(), hi0.abs()))
    shift = lo0 / 2 + hi0 / 2
    wide = x.dtype == F64
    values = blocks.buffer("values", F64)
    if wide:  # x / s first (exact), so that squares neither overflow nor underflow
        torch.mul(x, blocks.per_row(inverse), out=values)
        d = torch.sub(values, blocks.per_row(shift * inverse), out=blocks.buffer("d", F64))
    else:  # float32 squares are exact and in range in float64: scale the sums instead
        d = torch.sub(values.copy_(x), blocks.per_row(shift), out=blocks.buffer("d", F64))
    d.nan_to_num_(0.0, 0.0, 0.0)
    values.nan_to_num_(0.0, 0.0, 0.0)
    per_row = [torch.mv(d, blocks.ones), row_norms(d).square_(), row_norms(values).square_()]
    dsum, dsq, nsq = blocks.sum_rows(torch.stack(per_row, 1)).unbind(1)
    if not wide:  # power-of-two scaling: the same figures, bit for bit
        square = inverse.square()
        dsum, dsq, nsq = dsum * inverse, dsq * square, nsq * square
    rows = torch.stack([lo, hi, zeros, nans, nans, nans, dsum, dsq, nsq, scale, shift], 1)
    if prepared.bad is not None:
        fill_counts(rows, prepared.bad, blocks)
    return rows, prepared


def weight_norms(before: Blocks) -> torch.Tensor:
    """``(P,)`` float64 ‖θ‖ per tensor of the weights ``before`` holds, scaled (no overflow)."""
    return _norms(before, before.grid)


def update_norms(before: Blocks, after: Blocks, now: list[torch.Tensor]) -> torch.Tensor:
    """``(P,)`` float64 ‖θ_now − θ_before‖ per tensor; ``before`` holds θ_before as float64
    (zero padding), ``after`` (the same layout) receives θ_now and then the difference (exact:
    float32 and narrower differences are exact in float64, a float64 one is the float64 one).
    A mixed-dtype ``_foreach_sub_`` would be one op but, on the CPU as on devices, a copy and
    an op per tensor inside; a converting ``_foreach_copy_`` and one whole-buffer sub are not.
    """
    delta = after.load(now).sub_(before.grid)
    return _norms(after, delta)


def _norms(blocks: Blocks, x: torch.Tensor) -> torch.Tensor:
    if not blocks.source_wide:  # squares of float32 and narrower are exact, in range
        return blocks.sum_rows(row_norms(x).square_()).sqrt()
    top = torch.maximum(x.amax(1), x.amin(1).neg_())
    scale, inverse = pow2_above(blocks.reduce_rows(top, "max", 0.0))
    scaled = torch.mul(x, blocks.per_row(inverse), out=blocks.buffer("scaled", F64))
    return scale * blocks.sum_rows(row_norms(scaled).square_()).sqrt()
