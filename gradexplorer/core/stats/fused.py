"""Fused torch statistics over many gradients at once (one (device, dtype) group).

The gradients are copied into a padded block layout (``blocks.Blocks``: every row belongs to
one tensor), so every figure of every parameter comes from a fixed number of whole-buffer ops
whatever the parameter count: in-place elementwise ops on kept buffers with per-row
broadcasting, ``dim=1`` reductions, and one small per-row → per-tensor sum or min/max. Nothing
here reads a value back to the host, builds a host scalar into a device tensor or makes a shape
that depends on the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gradexplorer.core.stats import raw as C
from gradexplorer.core.stats.blocks import Blocks
from gradexplorer.core.stats.histogram import HistRange, range_bounds

F64 = torch.float64
KERNEL_DTYPES = (torch.float32, torch.float64)
INF = float("inf")


def square_sum(x: torch.Tensor) -> torch.Tensor:
    """Σ x² per row of a kept float64 buffer, squaring it in place (its values are spent)."""
    return x.square_().sum(1)


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32/float64 as they are; half types widened to float32 (exactly)."""
    return dtype if dtype in KERNEL_DTYPES else torch.float32


def pow2_above(top: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, ``2**e`` with every |x| ≤ top below it, and its inverse; both exact (bit-built)."""
    low, high = C.SCALE_EXPONENTS
    exponent = torch.frexp(top).exponent.to(torch.int64).clamp_(low, high)
    scale = torch.bitwise_left_shift(exponent + 1023, 52).view(F64)
    inverse = torch.bitwise_left_shift(1023 - exponent, 52).view(F64)
    return scale, inverse


@dataclass
class Prepared:
    """What the histogram pass reuses from the moments pass (kept buffers, ``(rows, block)``)."""

    values: torch.Tensor  # float64, non-finite elements and padding set to 0
    bad: torch.Tensor  # bool: NaN, ±Inf or padding
    bad_rows: torch.Tensor  # int64 (rows,): how many elements of each row are bad
    wide: bool  # float64 gradients (else float32 or narrower: no overflow is possible)


def counts_and_extremes(x: torch.Tensor, blocks: Blocks):
    """Per tensor (zeros, NaNs, Infs) and finite (min, max), float64; the bad mask and the
    per-row count of bad elements (int64).

    min and max are +Inf and -Inf where nothing is finite; the bad mask (kept buffer) marks
    NaN, ±Inf and padding. Each indicator is written as 0/1 in a working-precision buffer and
    summed per row: exact (a row holds at most 1024 elements) and far faster than counting
    booleans.
    """
    t, flag = blocks.buffer("work", x.dtype), blocks.buffer("flag", x.dtype)
    bad = blocks.buffer("bad", torch.bool)
    low = torch.nan_to_num(x, nan=INF, posinf=INF, neginf=INF, out=t).amin(1)
    torch.eq(t, INF, out=bad)  # NaN, ±Inf and padding (+Inf)
    bad_rows = flag.copy_(bad).sum(1)
    nan_rows = torch.ne(x, x, out=flag).sum(1)
    zero_rows = torch.eq(x, 0, out=flag).sum(1)
    high = torch.nan_to_num(x, nan=-INF, posinf=-INF, neginf=-INF, out=t).amax(1)
    lo = blocks.reduce_rows(low, "min", INF).to(F64)
    hi = blocks.reduce_rows(high, "max", -INF).to(F64)
    per_row = torch.stack([zero_rows, nan_rows, bad_rows - nan_rows - blocks.pad], 1)
    zeros, nans, infs = blocks.sum_rows(per_row.to(F64)).unbind(1)
    return zeros, nans, infs, lo, hi, bad, bad_rows.long()


def moments(x: torch.Tensor, blocks: Blocks) -> tuple[torch.Tensor, Prepared]:
    """``(P, MOMENT_COLUMNS)`` float64 rows (as ``raw``) and what the histograms reuse."""
    zeros, nans, infs, lo, hi, bad, bad_rows = counts_and_extremes(x, blocks)
    empty = ~(lo <= hi)
    lo0, hi0 = lo.masked_fill(empty, 0.0), hi.masked_fill(empty, 0.0)
    scale, inverse = pow2_above(torch.maximum(lo0.abs(), hi0.abs()))
    shift = lo0 / 2 + hi0 / 2
    values = blocks.buffer("values", F64).copy_(x).masked_fill_(bad, 0.0)
    if x.dtype == F64:  # x / s first (exact), so that squares neither overflow nor underflow
        a = torch.mul(values, blocks.per_row(inverse), out=blocks.buffer("a", F64))
        d = torch.sub(a, blocks.per_row(shift * inverse), out=blocks.buffer("d", F64))
        nsq = square_sum(a)
    else:  # float32 squares are exact in float64 and in range: scale the sums instead
        d = torch.sub(values, blocks.per_row(shift), out=blocks.buffer("d", F64))
        nsq = torch.square(values, out=blocks.buffer("a", F64)).sum(1)
    d.masked_fill_(bad, 0.0)
    per_row = torch.stack([d.sum(1), square_sum(d), nsq], 1)
    dsum, dsq, nsq = blocks.sum_rows(per_row).unbind(1)
    if x.dtype != F64:  # power-of-two scaling: the same figures, bit for bit
        dsum, dsq, nsq = dsum * inverse, dsq * inverse.square(), nsq * inverse.square()
    finite = blocks.lengths.to(F64) - nans - infs
    rows = torch.stack([lo, hi, zeros, nans, infs, finite, dsum, dsq, nsq, scale, shift], 1)
    return rows, Prepared(values, bad, bad_rows, x.dtype == F64)


def bounds(rows: torch.Tensor, hist_range: HistRange) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-gradient (lo, hi) on the device, by ``histogram.range_bounds`` itself."""
    return range_bounds(rows[:, C.MIN], rows[:, C.MAX], hist_range)


def edge_terms(lo: torch.Tensor, hi: torch.Tensor, bins: int):
    """(lo, step, hi) as ``histogram.histogram_edges``: edge k is ``k * step + lo``, the last hi."""
    same = lo == hi
    lo, hi = torch.where(same, lo - 0.5, lo), torch.where(same, hi + 0.5, hi)
    return lo, (hi - lo) / bins, hi


def edges_of(lo: torch.Tensor, step: torch.Tensor, hi: torch.Tensor, bins: int) -> torch.Tensor:
    """``(P, bins+1)`` edges computed exactly as ``histogram.histogram_edges``."""
    edges = torch.arange(bins + 1, dtype=F64, device=lo.device)[None, :] * step[:, None]
    edges = edges + lo[:, None]
    return torch.cat([edges[:, :-1], hi[:, None]], 1)


def bin_of(v: torch.Tensor, first: torch.Tensor, scale: torch.Tensor, lo: torch.Tensor,
           step: torch.Tensor, bins: int, wide: bool, out: tuple[torch.Tensor, ...]):
    """Float64 bin index (clamped to the bins) of each ``v``, written into ``out[0]``.

    A guess (off by at most one bin), then one exact comparison with each neighbouring edge,
    recomputed by the very expression that made the edge (``k * step + lo``, bit-identical).
    The same ops serve whole buffers (per-row columns) and one value per tensor.
    """
    guess, edge, flag = out
    torch.sub(v, first, out=guess).mul_(scale)
    if wide:  # NaN only if hi - lo overflowed (float64 values)
        guess.nan_to_num_(0.0)
    guess.floor_()  # any integer works below: edge k is computed, not looked up
    torch.mul(guess, step, out=edge).add_(lo)
    guess.sub_(torch.lt(v, edge, out=flag))
    torch.add(guess, 1, out=edge).mul_(step).add_(lo)
    return guess.add_(torch.ge(v, edge, out=flag)).clamp_(0, bins - 1)


def count_slots(slot: torch.Tensor, width: int, by_bincount: bool) -> torch.Tensor:
    """``(rows, width)`` int64: how many elements of each row of ``slot`` hold each value.

    ``bincount`` over ``row * width + slot`` is the fast CPU count (it overwrites ``slot``); on
    a device it would read its maximum back (a sync), so there a ``scatter_add_`` per row.
    """
    rows = slot.shape[0]
    if by_bincount:
        slot.add_(torch.arange(0, rows * width, width, device=slot.device)[:, None])
        return torch.bincount(slot.view(-1), minlength=rows * width).view(rows, width)
    ones = torch.ones((), dtype=torch.int64, device=slot.device).expand(slot.shape)
    counts = torch.zeros((rows, width), dtype=torch.int64, device=slot.device)
    return counts.scatter_add_(1, slot, ones)


def histograms(prepared: Prepared, blocks: Blocks, rows: torch.Tensor, bins: int,
               hist_range: HistRange) -> tuple[torch.Tensor, torch.Tensor]:
    """Edges ``(P, bins+1)`` and counts ``(P, bins+4)``: bins, then NaN, ±Inf, below, above.

    Element ``v`` lands in bin ``k`` iff ``edges[k] <= v < edges[k+1]`` (last bin closed), as
    ``np.histogram`` with those edges (``bin_of``). Non-finite elements and padding hold 0 in
    ``values`` and are binned as 0; each row's count of them is taken back out of its tensor's
    bin of 0 (the same ops on one 0 per tensor), and the NaN and Inf counts of the moments go
    in their slots: no per-element mask is applied.
    """
    lo, step, hi = edge_terms(*bounds(rows, hist_range), bins)
    edges = edges_of(lo, step, hi, bins)
    first, last = edges[:, 0], edges[:, -1]
    scale = bins / (last - first)
    explicit = hist_range not in ("auto", "symmetric")  # else every finite value is in range
    v = prepared.values
    per_row = blocks.per_row
    work = (blocks.buffer("a", F64), blocks.buffer("d", F64), blocks.buffer("flag", F64))
    guess = bin_of(v, per_row(first), per_row(scale), per_row(lo), per_row(step), bins,
                   prepared.wide, work)
    slot = blocks.buffer("slot", torch.int64).copy_(guess)
    zero = torch.zeros_like(first)
    zero_slot = bin_of(zero, first, scale, lo, step, bins, prepared.wide,
                       (torch.empty_like(zero), torch.empty_like(zero), torch.empty_like(zero)))
    if explicit:
        outside = blocks.buffer("outside", torch.bool)
        slot.masked_fill_(torch.lt(v, per_row(first), out=outside), bins + 2)
        slot.masked_fill_(torch.gt(v, per_row(last), out=outside), bins + 3)
        zero_slot = torch.where(zero < first, bins + 2, torch.where(zero > last, bins + 3,
                                                                    zero_slot))
    counts = count_slots(slot, bins + 4, slot.device.type == "cpu")
    counts.scatter_add_(1, per_row(zero_slot.long()), prepared.bad_rows.neg()[:, None])
    counts = blocks.sum_rows(counts)
    counts[:, bins: bins + 2] = rows[:, C.NANS: C.INFS + 1].long()  # adjacent columns
    return edges, counts


def update_norms(blocks: Blocks, after: list[torch.Tensor]) -> torch.Tensor:
    """``(P, 2)`` float64: ‖after − before‖ and ‖before‖ per tensor, scaled (no overflow).

    ``blocks`` (zero padding) holds the weights loaded before the step; ``after`` are the
    same tensors now.
    """
    before = blocks.buffer("before", F64).copy_(blocks.grid)
    delta = blocks.buffer("delta", F64).copy_(blocks.load(after)).sub_(before)
    out = []
    for x in (delta, before):
        if blocks.flat.dtype != F64:  # squares of float32 and narrower are exact, in range
            out.append(blocks.sum_rows(square_sum(x)).sqrt())
            continue
        top = torch.maximum(x.amax(1), x.amin(1).neg_())
        scale, inverse = pow2_above(blocks.reduce_rows(top, "max", 0.0))
        x.mul_(blocks.per_row(inverse))
        out.append(scale * blocks.sum_rows(square_sum(x)).sqrt())
    return torch.stack(out, 1)
