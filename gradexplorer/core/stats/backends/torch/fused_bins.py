"""Exact histograms of a fused group (``fused``): one guess, one comparison, one count.

For each element ``v`` the position ``u = (v - first) * bins / (last - first)`` is computed in
the working dtype, rounded to the nearest edge index ``k`` (any error below half a bin is
fine), and one exact comparison with edge ``k`` — looked up in a per-row table, not
recomputed — decides between bin ``k - 1`` and bin ``k``:

    slot = k + (v >= E[k])        slot 0: below the range, 1..bins: the bins, bins+1: above

``E[k]`` is edge ``k`` rounded up to the working dtype (for a float32 ``v`` and a float64
edge ``e``, ``v >= e`` exactly when ``v >= ceil32(e)``), and ``E[bins]`` is the next value
above the last edge, so the last bin is closed as in ``np.histogram``. The position is
computed on ``v * p - first * p`` with a per-row power of two ``p`` (exact) so that narrow or
tiny ranges neither overflow nor lose the guess, minus the rounding error of ``first * p``.
NaN, ±Inf and padding arrive as -Inf, fall below every edge and are taken back out of the
"below" slot per tensor; the NaN and Inf counts of the moments fill their own columns. With an
auto or symmetric range no finite value is below, so that slot is the count of bad elements
and the moments need not count them.

Explicit ranges beyond what float32 can hold exactly enough are binned in float64.
"""

from __future__ import annotations

import math

import torch

from gradexplorer.core.stats.backends import raw as C
from gradexplorer.core.stats.backends.torch.blocks import Blocks
from gradexplorer.core.stats.backends.torch.fused import F64, Prepared, fill_counts, inverse_pow2_above
from gradexplorer.core.stats.histogram import HistRange, histogram_edges, mode_bounds

POSITION_EXPONENTS = {torch.float32: (-126, 128), F64: C.SCALE_EXPONENTS}
SAFE32 = 2.0 ** 100  # explicit ranges within this (and not narrower) are guessed in float32
FLOAT32_MAX = torch.finfo(torch.float32).max


def hist_dtype(dtype: torch.dtype, hist_range: HistRange) -> torch.dtype:
    """The dtype the guess is made in: the working dtype, or float64 for an explicit range
    whose bounds or width float32 cannot follow to well under a bin."""
    if dtype == F64 or hist_range in ("auto", "symmetric"):
        return dtype
    lo, hi = hist_range
    top = max(abs(lo), abs(hi))
    if 1 / SAFE32 < top < SAFE32 and hi - lo > top / SAFE32:
        return dtype
    return F64


def range_bound(dtype: torch.dtype, hist_range: HistRange) -> float | None:
    """What ``histogram_edges`` may take as a bound on the histogram range's ends: the bounds of
    an explicit range, the largest float32 for the minima and maxima of float32 values (the
    working dtype of float32 and narrower gradients), none for float64 values."""
    if isinstance(hist_range, tuple):
        return max(abs(hist_range[0]), abs(hist_range[1]))
    return FLOAT32_MAX if dtype == torch.float32 else None


def round_up(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The least ``dtype`` value ≥ each float64 value (±Inf where out of range)."""
    if dtype == F64:
        return values
    near = values.to(dtype)
    return torch.where(near.to(F64) < values, torch.nextafter(near, torch.full_like(near, math.inf)),
                       near)


def comparison_table(edges: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``(P, bins+2)``: ``v >= E[k]`` ⇔ ``v >= edges[k]`` for k < bins, ``v >= E[bins]`` ⇔
    ``v > edges[bins]``; the last column pads rows to the slot width. ``E[bins]`` is the next
    float64 above the last edge rounded up: every ``dtype`` value above the edge is at least
    that float64, so the least of them is its ``round_up``."""
    last = edges[:, -1:]
    above = torch.nextafter(last, torch.full_like(last, math.inf))
    return round_up(torch.cat([edges[:, :-1], above, above], 1), dtype)


def position_terms(edges: torch.Tensor, bins: int, dtype: torch.dtype) -> torch.Tensor:
    """``(P, 4)`` in ``dtype``: p, first·p, scale and correction per tensor, for
    ``u = (v·p − first·p)·scale − correction`` (+0.5, so that truncation rounds)."""
    first, last = edges[:, 0], edges[:, -1]
    p = inverse_pow2_above(torch.maximum(first.abs(), last.abs()), POSITION_EXPONENTS[dtype])
    start = first * p
    scale = bins / (last * p - start)  # scaled first: last - first may overflow
    start_d = start.to(dtype).to(F64)
    correction = (start - start_d) * scale - 0.5
    return torch.stack([p, start_d, scale, correction], 1).to(dtype)


def count_slots(slot: torch.Tensor, total: int, by_bincount: bool) -> torch.Tensor:
    """How many elements hold each value ``0 … total-1`` of ``slot`` (int32), int64.

    ``bincount`` is the fast CPU count; on a device it would read its maximum back (a sync),
    so there an ``index_add_`` of ones.
    """
    flat = slot.view(-1)
    if by_bincount:
        return torch.bincount(flat, minlength=total)
    ones = torch.ones((), dtype=torch.int64, device=slot.device).expand(flat.shape)
    return torch.zeros(total, dtype=torch.int64, device=slot.device).index_add_(0, flat, ones)


def histograms(prepared: Prepared, blocks: Blocks, rows: torch.Tensor, bins: int,
               hist_range: HistRange) -> tuple[torch.Tensor, torch.Tensor]:
    """Edges ``(P, bins+1)`` and counts ``(P, bins+4)``: bins, then NaN, ±Inf, below, above."""
    values = prepared.low_filled
    edges = histogram_edges(*mode_bounds(*prepared.bounds, hist_range), bins,
                            range_bound(values.dtype, hist_range))
    dtype = hist_dtype(values.dtype, hist_range)
    if dtype != values.dtype:
        values = blocks.buffer("wide_values", dtype).copy_(values)
    width = bins + 2
    table = comparison_table(edges, dtype).view(-1)
    terms = torch.index_select(position_terms(edges, bins, dtype), 0, blocks.segment)
    p, start, scale, correction = terms.split(1, 1)
    u = torch.mul(values, p, out=blocks.buffer("position", dtype))
    u.sub_(start).mul_(scale).sub_(correction).clamp_(0, bins + 0.5)
    slot = blocks.buffer("slot", torch.int32).copy_(u).add_(blocks.tensor_offsets(width))
    edge = torch.index_select(table, 0, slot.view(-1), out=u.view(-1)).view_as(u)
    above = torch.ge(values, edge, out=edge)
    slot.add_(blocks.buffer("step", torch.int32).copy_(above))
    counts = count_slots(slot, blocks.count * width, slot.device.type == "cpu")
    counts = counts.view(blocks.count, width)
    bad = prepared.bad
    if bad is None:  # an auto or symmetric range: nothing finite is below, only the bad
        bad = counts[:, 0]
        fill_counts(rows, bad, blocks)
    below = counts[:, 0] - bad
    out = torch.cat([counts[:, 1: bins + 1], rows[:, C.NANS: C.INFS + 1].long(), below[:, None],
                     counts[:, bins + 1:]], 1)
    return edges, out
