"""Fused torch statistics over one flat buffer holding many gradients (one (device, dtype) group).

Every figure of every parameter comes from a fixed number of whole-buffer ops whatever the
parameter count: segment reductions (``segment_reduce`` with the cached segment lengths),
one ``index_add_`` for the four element counts and one for all the histograms
(``segment * (bins + 4) + slot``). Nothing here reads a value back to the host, builds a
host scalar into a device tensor or makes a shape that depends on the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gradexplorer.core.stats import raw as C
from gradexplorer.core.stats.histogram import HistRange

F64 = torch.float64
KERNEL_DTYPES = (torch.float32, torch.float64)
INF = float("inf")


@dataclass
class Layout:
    """Where each tensor sits in the flat buffer; made once per set of sizes, kept on the device."""

    count: int
    total: int
    lengths: torch.Tensor  # (P,) int64
    segment: torch.Tensor  # (N,) int64: which tensor each element belongs to

    @classmethod
    def of(cls, numels: tuple[int, ...], device: torch.device) -> Layout:
        lengths = torch.tensor(numels, dtype=torch.int64).to(device)
        segment = torch.repeat_interleave(torch.arange(len(numels), device=device), lengths,
                                          output_size=sum(numels))
        return cls(len(numels), sum(numels), lengths, segment)


def flatten(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One flat copy of same-dtype tensors on one device: a single ``_chunk_cat``."""
    kept = [t for t in tensors if t.numel()]
    if not kept:
        return torch.zeros(0, dtype=tensors[0].dtype, device=tensors[0].device)
    if any(t.dim() == 0 for t in kept):  # _chunk_cat needs a dimension: one view per scalar
        kept = [t.view(1) if t.dim() == 0 else t for t in kept]
    return torch._chunk_cat(kept, 0, 1).view(-1)


def working(flat: torch.Tensor) -> torch.Tensor:
    """float32/float64 as they are; half types widened to float32 (exactly)."""
    return flat if flat.dtype in KERNEL_DTYPES else flat.float()


def segment_sum(values: torch.Tensor, layout: Layout) -> torch.Tensor:
    return torch.segment_reduce(values, "sum", lengths=layout.lengths, unsafe=True, initial=0)


def segment_extreme(values: torch.Tensor, layout: Layout, reduce: str) -> torch.Tensor:
    initial = INF if reduce == "min" else -INF
    return torch.segment_reduce(values, reduce, lengths=layout.lengths, unsafe=True,
                                initial=initial)


def pow2_above(top: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, ``2**e`` with every |x| ≤ top below it, and its inverse; both exact (bit-built)."""
    low, high = C.SCALE_EXPONENTS
    exponent = torch.frexp(top).exponent.to(torch.int64).clamp_(low, high)
    scale = torch.bitwise_left_shift(exponent + 1023, 52).view(F64)
    inverse = torch.bitwise_left_shift(1023 - exponent, 52).view(F64)
    return scale, inverse


@dataclass
class Prepared:
    """What the histogram pass reuses from the moments pass."""

    values: torch.Tensor  # float64, non-finite elements set to 0
    nonfinite: torch.Tensor  # bool: NaN or ±Inf
    nan: torch.Tensor  # bool


def moments(x: torch.Tensor, layout: Layout) -> tuple[torch.Tensor, Prepared]:
    """``(P, MOMENT_COLUMNS)`` float64 rows (as ``raw``) and what the histograms reuse.

    Ops work in place wherever they can: on the CPU a fresh full-length buffer costs more
    (page faults) than the arithmetic in it.
    """
    seg = layout.segment
    nonfinite = torch.isfinite(x).logical_not_()
    nan = torch.isnan(x)
    slot = (x == 0).to(torch.int64).masked_fill_(nonfinite, 3).masked_fill_(nan, 2)
    ones = torch.ones((), dtype=torch.int64, device=x.device).expand(x.numel())
    counts = torch.zeros(layout.count * 4, dtype=torch.int64, device=x.device)
    counts = counts.index_add_(0, slot.add_(seg, alpha=4), ones).view(layout.count, 4).to(F64)
    del slot
    masked = x.masked_fill(nonfinite, INF)
    lo = segment_extreme(masked, layout, "min").to(F64)
    hi = segment_extreme(masked.masked_fill_(nonfinite, -INF), layout, "max").to(F64)
    del masked
    empty = ~(lo <= hi)
    lo0, hi0 = lo.masked_fill(empty, 0.0), hi.masked_fill(empty, 0.0)
    scale, inverse = pow2_above(torch.maximum(lo0.abs(), hi0.abs()))
    shift = lo0 / 2 + hi0 / 2
    values = torch.empty(x.shape, dtype=F64, device=x.device).copy_(x).masked_fill_(nonfinite, 0)
    a = inverse.index_select(0, seg).mul_(values)  # x / s, exact
    d = (shift * inverse).index_select(0, seg).neg_().add_(a).masked_fill_(nonfinite, 0.0)
    dsum = segment_sum(d, layout)
    dsq = segment_sum(d.square_(), layout)
    del d
    nsq = segment_sum(a.square_(), layout)
    zeros, nans, infs = counts[:, 1:].unbind(1)
    rows = torch.stack([lo, hi, zeros, nans, infs, counts[:, 0] + zeros, dsum, dsq, nsq, scale,
                        shift], 1)
    return rows, Prepared(values, nonfinite, nan)


def bounds(rows: torch.Tensor, hist_range: HistRange) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-gradient (lo, hi) on the device, as ``histogram.range_bounds``."""
    mins, maxs = rows[:, C.MIN], rows[:, C.MAX]
    empty = ~(mins <= maxs)
    lo = torch.where(empty, 0.0, mins)
    hi = torch.where(empty, 0.0, maxs)
    if hist_range == "auto":
        return lo, hi
    if hist_range == "symmetric":
        top = torch.maximum(lo.abs(), hi.abs())
        return -top, top
    return torch.full_like(lo, hist_range[0]), torch.full_like(hi, hist_range[1])


def edges_of(lo: torch.Tensor, hi: torch.Tensor, bins: int) -> torch.Tensor:
    """``(P, bins+1)`` edges computed exactly as ``histogram.histogram_edges``."""
    same = lo == hi
    lo, hi = torch.where(same, lo - 0.5, lo), torch.where(same, hi + 0.5, hi)
    step = (hi - lo) / bins
    edges = torch.arange(bins + 1, dtype=F64, device=lo.device)[None, :] * step[:, None]
    edges = edges + lo[:, None]
    return torch.cat([edges[:, :-1], hi[:, None]], 1)


def histograms(prepared: Prepared, layout: Layout, rows: torch.Tensor, bins: int,
               hist_range: HistRange) -> tuple[torch.Tensor, torch.Tensor]:
    """Edges ``(P, bins+1)`` and counts ``(P, bins+4)``: bins, then NaN, ±Inf, below, above.

    Element ``v`` lands in bin ``k`` iff ``edges[k] <= v < edges[k+1]`` (last bin closed), as
    ``np.histogram`` with those edges: a float64 guess (off by at most one bin), then one exact
    comparison with each neighbouring edge; the clamp closes the last bin.
    """
    seg = layout.segment
    edges = edges_of(*bounds(rows, hist_range), bins)
    first, last = edges[:, 0], edges[:, -1]
    v = prepared.values
    b = (bins / (last - first)).index_select(0, seg).mul_(v - first.index_select(0, seg))
    b = b.nan_to_num_(0.0).floor_().clamp_(0, bins - 1).long()  # NaN only if hi - lo overflowed
    index = seg * (bins + 1)
    index.add_(b)
    flat_edges = edges.reshape(-1)
    below_guess = v < flat_edges.take(index)
    b.add_(below_guess, alpha=-1).add_(v >= flat_edges.take(index.add_(1)))
    del index, below_guess
    b.clamp_(0, bins - 1)
    b.masked_fill_(v < first.index_select(0, seg), bins + 2)
    b.masked_fill_(v > last.index_select(0, seg), bins + 3)
    b.masked_fill_(prepared.nonfinite, bins + 1).masked_fill_(prepared.nan, bins)
    ones = torch.ones((), dtype=torch.int64, device=v.device).expand(v.numel())
    counts = torch.zeros(layout.count * (bins + 4), dtype=torch.int64, device=v.device)
    counts = counts.index_add_(0, b.add_(seg, alpha=bins + 4), ones)
    return edges, counts.view(layout.count, bins + 4)


def update_norms(before: torch.Tensor, after: torch.Tensor, layout: Layout) -> torch.Tensor:
    """``(P, 2)`` float64: ‖after − before‖ and ‖before‖ per segment, scaled (no overflow)."""
    pair = torch.empty((before.numel(), 2), dtype=F64, device=before.device)
    pair[:, 0].copy_(after)
    pair[:, 1].copy_(before)
    pair[:, 0].sub_(pair[:, 1])
    top = torch.segment_reduce(pair.abs(), "max", lengths=layout.lengths, unsafe=True,
                               initial=0.0)
    scale, inverse = pow2_above(top)
    scaled = inverse.index_select(0, layout.segment).mul_(pair).square_()
    return scale * segment_sum(scaled, layout).sqrt()
