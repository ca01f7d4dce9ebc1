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

from gradexplorer.core.stats import raw as C
from gradexplorer.core.stats.blocks import Blocks

F64 = torch.float64
KERNEL_DTYPES = (torch.float32, torch.float64)
INF = float("inf")


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32/float64 as they are; half types widened to float32 (exactly)."""
    return dtype if dtype in KERNEL_DTYPES else torch.float32


def pow2_above(top: torch.Tensor, limits: tuple[int, int] = C.SCALE_EXPONENTS):
    """Per value, ``2**e`` above ``top`` (e clamped to ``limits``) and its inverse, float64,
    both exact (built from bits)."""
    exponent = torch.frexp(top).exponent.to(torch.int64).clamp_(*limits)
    scale = torch.bitwise_left_shift(exponent + 1023, 52).view(F64)
    inverse = torch.bitwise_left_shift(1023 - exponent, 52).view(F64)
    return scale, inverse


def row_norms(x: torch.Tensor) -> torch.Tensor:
    """√Σx² of each row of a float64 buffer (one read; its square is Σx² to an ulp or two)."""
    return torch.linalg.vector_norm(x, dim=1)


@dataclass
class Prepared:
    """What the histogram pass reuses from the moments pass."""

    low_filled: torch.Tensor  # (rows, block) working dtype: the values, NaN/±Inf/padding → -Inf
    bad: torch.Tensor  # (P,) int64: NaN, ±Inf and padding elements of each tensor


def counts_and_extremes(x: torch.Tensor, blocks: Blocks):
    """Per tensor zeros, NaNs, Infs and finite (min, max) in float64 (min/max ±Inf where
    nothing is finite), the count of bad elements (NaN, ±Inf, padding) per tensor, and ``x``
    with every bad element set to -Inf (kept buffer).

    Each indicator is written as 0/1 in the working dtype and summed per row: exact (a row holds
    at most 1024 elements) and far faster than counting booleans.
    """
    high_filled = blocks.buffer("high_filled", x.dtype)
    low_filled = blocks.buffer("low_filled", x.dtype)
    flag = blocks.buffer("flag", x.dtype)
    low = torch.nan_to_num(x, nan=INF, posinf=INF, neginf=INF, out=high_filled).amin(1)
    bad_rows = torch.eq(high_filled, INF, out=flag).sum(1)
    high = torch.nan_to_num(x, nan=-INF, posinf=-INF, neginf=-INF, out=low_filled).amax(1)
    nan_rows = torch.ne(x, x, out=flag).sum(1)
    zero_rows = torch.eq(x, 0, out=flag).sum(1)
    lo = blocks.reduce_rows(low, "min", INF).to(F64)
    hi = blocks.reduce_rows(high, "max", -INF).to(F64)
    per_row = torch.stack([zero_rows, nan_rows, bad_rows], 1).to(F64)
    zeros, nans, bad = blocks.sum_rows(per_row).unbind(1)
    infs = bad - nans - blocks.pad_total
    return zeros, nans, infs, lo, hi, Prepared(low_filled, bad.long())


def moments(x: torch.Tensor, blocks: Blocks) -> tuple[torch.Tensor, Prepared]:
    """``(P, MOMENT_COLUMNS)`` float64 rows (as ``raw``) and what the histograms reuse.

    ``d = x - shift`` is formed from the raw values, so NaN, ±Inf and padding stay non-finite
    through the subtraction and one ``nan_to_num`` sets exactly those to 0.
    """
    zeros, nans, infs, lo, hi, prepared = counts_and_extremes(x, blocks)
    empty = ~(lo <= hi)
    lo0, hi0 = lo.masked_fill(empty, 0.0), hi.masked_fill(empty, 0.0)
    scale, inverse = pow2_above(torch.maximum(lo0.abs(), hi0.abs()))
    shift = lo0 / 2 + hi0 / 2
    wide = x.dtype == F64
    values = blocks.buffer("values", F64)
    if wide:  # x / s first (exact), so that squares neither overflow nor underflow
        torch.mul(x, blocks.per_row(inverse), out=values)
        values.sub_(blocks.per_row(shift * inverse))
    else:  # float32 squares are exact and in range in float64: scale the sums instead
        values.copy_(x).sub_(blocks.per_row(shift))
    d = values.nan_to_num_(0.0, 0.0, 0.0)
    per_row = [torch.mv(d, blocks.ones), row_norms(d).square_()]
    if wide:
        torch.mul(x, blocks.per_row(inverse), out=values)
    else:
        values.copy_(x)
    per_row.append(row_norms(values.nan_to_num_(0.0, 0.0, 0.0)).square_())
    dsum, dsq, nsq = blocks.sum_rows(torch.stack(per_row, 1)).unbind(1)
    if not wide:  # power-of-two scaling: the same figures, bit for bit
        dsum, dsq, nsq = dsum * inverse, dsq * inverse.square(), nsq * inverse.square()
    finite = blocks.lengths.to(F64) - nans - infs
    rows = torch.stack([lo, hi, zeros, nans, infs, finite, dsum, dsq, nsq, scale, shift], 1)
    return rows, prepared


def weight_norms(before: Blocks) -> torch.Tensor:
    """``(P,)`` float64 ‖θ‖ per tensor of the weights ``before`` holds, scaled (no overflow)."""
    return _norms(before, before.grid)


def update_norms(before: Blocks, after: Blocks | None, now: list[torch.Tensor]) -> torch.Tensor:
    """``(P,)`` float64 ‖θ_now − θ_before‖ per tensor; ``before`` holds θ_before as float64
    (zero padding) and becomes θ_before − θ_now (exact: float32 and narrower differences are
    exact in float64, and a float64 difference is the float64 one).

    On the CPU one mixed-dtype ``_foreach_sub_`` does it; on a device, where a mixed-dtype
    foreach op falls back to a kernel per tensor, a converting copy into ``after`` (the same
    layout, device groups only) and one whole-buffer sub.
    """
    if after is None:
        torch._foreach_sub_(before.views, now)
    else:
        before.grid.sub_(after.load(now))
    return _norms(before, before.grid)


def _norms(blocks: Blocks, x: torch.Tensor) -> torch.Tensor:
    if not blocks.source_wide:  # squares of float32 and narrower are exact, in range
        return blocks.sum_rows(row_norms(x).square_()).sqrt()
    top = torch.maximum(x.amax(1), x.amin(1).neg_())
    scale, inverse = pow2_above(blocks.reduce_rows(top, "max", 0.0))
    scaled = torch.mul(x, blocks.per_row(inverse), out=blocks.buffer("scaled", F64))
    return scale * blocks.sum_rows(row_norms(scaled).square_()).sqrt()
