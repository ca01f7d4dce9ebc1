"""Device statistics backend: torch ops on the gradients' own device, one host transfer per step.

Used for CUDA/MPS gradients (and on the CPU when Numba is missing). Every figure, histogram
edges included, stays a device tensor until ``finish`` copies them all to the host at once.
"""

from __future__ import annotations

import numpy as np
import torch

from gradexplorer.core.stats.histogram import HistRange
from gradexplorer.core.stats.raw import RawStats

COLUMNS = 8  # as grad_kernels: sum, sumsq, min, max, zeros, nan, inf, finite
F64 = torch.float64


def _flat(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().reshape(-1)
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


def moment_row(g: torch.Tensor) -> torch.Tensor:
    """The eight moments of one flat gradient as a float64 device tensor."""
    if g.numel() == 0:
        return torch.tensor([0, 0, np.inf, -np.inf, 0, 0, 0, 0], dtype=F64, device=g.device)
    finite = torch.isfinite(g)
    nans = torch.isnan(g).sum()
    count = finite.sum()
    kept = torch.where(finite, g, 0).to(F64)
    inf = torch.tensor(np.inf, dtype=g.dtype, device=g.device)
    low = torch.where(finite, g, inf).amin()
    high = torch.where(finite, g, -inf).amax()
    parts = [kept.sum(), kept.square().sum(), low, high, (g == 0).sum(), nans,
             g.numel() - count - nans, count]
    return torch.stack([p.to(F64) for p in parts])


def device_bounds(rows: torch.Tensor, hist_range: HistRange) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-gradient (lo, hi) on the device, as ``histogram_math.range_bounds``."""
    mins, maxs = rows[:, 2], rows[:, 3]
    empty = ~(mins <= maxs)
    lo = torch.where(empty, torch.zeros_like(mins), mins)
    hi = torch.where(empty, torch.zeros_like(maxs), maxs)
    if hist_range == "auto":
        return lo, hi
    if hist_range == "symmetric":
        top = torch.maximum(lo.abs(), hi.abs())
        return -top, top
    return torch.full_like(lo, hist_range[0]), torch.full_like(hi, hist_range[1])


def device_edges(lo: torch.Tensor, hi: torch.Tensor, bins: int) -> torch.Tensor:
    """``(P, bins+1)`` edges computed exactly as ``histogram_math.histogram_edges``."""
    same = lo == hi
    lo, hi = torch.where(same, lo - 0.5, lo), torch.where(same, hi + 0.5, hi)
    step = (hi - lo) / bins
    edges = torch.arange(bins + 1, dtype=F64, device=lo.device)[None, :] * step[:, None]
    edges = edges + lo[:, None]
    edges[:, -1] = hi
    return edges


def histogram_slots(g: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
    """Bin of each element; ``bins`` for NaN, +1 for ±Inf, +2 below range, +3 above."""
    bins = edges.numel() - 1
    v = g.to(F64)
    lo, hi = edges[0], edges[-1]
    guess = torch.nan_to_num((v - lo) * (bins / (hi - lo)), nan=0.0, posinf=bins, neginf=0.0)
    b = guess.floor().clamp_(0, bins - 1).long()
    b = b - ((v < edges[b]) & (b > 0)).long()
    b = b + ((v >= edges[b + 1]) & (b < bins - 1)).long()
    b = torch.where(v < lo, bins + 2, b)
    b = torch.where(v > hi, bins + 3, b)
    b = torch.where(torch.isinf(v), bins + 1, b)
    return torch.where(torch.isnan(v), bins, b)


class TorchPending:
    """Device tensors of one step, waiting for the optimizer step and the single transfer."""

    def __init__(self, rows, edges, counts, copies):
        self.rows, self.edges, self.counts, self.copies = rows, edges, counts, copies


def begin(grads: list[torch.Tensor], params: list[torch.Tensor] | None, want_histograms: bool,
          bins: int, hist_range: HistRange) -> TorchPending:
    """Queue every statistic on the device; copy ``params`` if update ratios are wanted."""
    flats = [_flat(g) for g in grads]
    rows = torch.stack([moment_row(g) for g in flats]) if flats else torch.zeros((0, COLUMNS))
    edges = counts = None
    if want_histograms and flats:
        edges = device_edges(*device_bounds(rows, hist_range), bins)
        counts = torch.zeros((len(flats), bins + 4), dtype=torch.int64, device=rows.device)
        for i, g in enumerate(flats):
            slots = histogram_slots(g, edges[i])
            counts[i].index_add_(0, slots, torch.ones(1, dtype=torch.int64, device=g.device)
                                 .expand(slots.numel()))
    copies = [p.detach().clone() for p in params] if params is not None else None
    return TorchPending(rows, edges, counts, copies)


def finish(pending: TorchPending, params: list[torch.Tensor] | None) -> RawStats:
    """Update norms (if copies were taken), then one device-to-host transfer of everything."""
    parts = [pending.rows.reshape(-1)]
    if pending.edges is not None:
        parts += [pending.edges.reshape(-1), pending.counts.to(F64).reshape(-1)]
    if pending.copies is not None and params is not None and pending.copies:
        now = [p.detach() for p in params]
        delta = torch.stack(torch._foreach_norm(torch._foreach_sub(now, pending.copies)))
        before = torch.stack(torch._foreach_norm(pending.copies))
        parts.append(torch.stack([delta.to(F64) ** 2, before.to(F64) ** 2], 1).reshape(-1))
    host = torch.cat([p.to(parts[0].device) for p in parts]).cpu().numpy()
    return _unpack(host, pending)


def _unpack(host: np.ndarray, pending: TorchPending) -> RawStats:
    count = pending.rows.shape[0]
    rows, host = host[: count * COLUMNS].reshape(count, COLUMNS), host[count * COLUMNS :]
    raw = RawStats(rows)
    if pending.edges is not None:
        width = pending.edges.shape[1]
        raw.edges, host = host[: count * width].reshape(count, width), host[count * width :]
        slots = host[: count * (width + 3)].reshape(count, width + 3).astype(np.int64)
        host = host[count * (width + 3) :]
        raw.counts, raw.extra = slots[:, : width - 1], slots[:, width - 1 :].copy()
        raw.extra = raw.extra[:, [2, 3, 0, 1]]  # below, above, NaN, Inf
    if host.size:
        raw.update = host.reshape(count, 2)
    return raw
