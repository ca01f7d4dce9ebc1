"""CPU statistics backend: fused Numba passes over each gradient, no copies of large tensors.

Large tensors are handed to the kernels in place; small ones are packed into one flat array
first, so a model with many tiny parameters costs a few kernel calls, not hundreds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gradexplorer.core import grad_kernels as K
from gradexplorer.core.grad_raw import INFS, MAX, MIN, MOMENT_COLUMNS, NANS, RawStats
from gradexplorer.core.histogram_math import HistRange, histogram_edges, range_bounds

SMALL = 1 << 16  # tensors below this many elements are packed together
KERNEL_DTYPES = (torch.float32, torch.float64)


@dataclass
class Pack:
    """A flat float array holding the tensors ``indices`` at ``offsets``."""

    flat: np.ndarray
    offsets: np.ndarray
    indices: list[int]


def _kernel_ready(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t if t.dtype in KERNEL_DTYPES else t.float()


def _offsets(sizes: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def pack_tensors(tensors: list[torch.Tensor]) -> list[Pack]:
    """Group tensors into flat packs: big ones alone (as views), small ones joined (a copy)."""
    packs: list[Pack] = []
    small: dict[torch.dtype, list[int]] = {}
    ready = [_kernel_ready(t) for t in tensors]
    for i, t in enumerate(ready):
        if t.numel() >= SMALL:
            packs.append(Pack(t.reshape(-1).numpy(), _offsets([t.numel()]), [i]))
        else:
            small.setdefault(t.dtype, []).append(i)
    for indices in small.values():
        parts = [ready[i].reshape(-1) for i in indices]
        flat = torch.cat(parts) if parts else torch.empty(0)
        packs.append(Pack(flat.numpy(), _offsets([p.numel() for p in parts]), indices))
    return packs


def moments(packs: list[Pack], count: int) -> np.ndarray:
    """``(count, MOMENT_COLUMNS)`` moments, rows in the original tensor order."""
    out = np.zeros((count, MOMENT_COLUMNS))
    for pack in packs:
        rows = np.zeros((len(pack.indices), MOMENT_COLUMNS))
        K.segment_moments(pack.flat, pack.offsets, rows)
        out[pack.indices] = rows
    return out


def histograms(packs: list[Pack], stats: np.ndarray, bins: int, hist_range: HistRange):
    """Exact histograms of every packed tensor: ``(edges, counts, extra)`` arrays by tensor."""
    count = stats.shape[0]
    lo, hi = range_bounds(stats[:, MIN], stats[:, MAX], hist_range)
    edges = histogram_edges(lo, hi, bins)
    counts = np.zeros((count, bins), np.int64)
    extra = np.zeros((count, 4), np.int64)
    nonfinite = stats[:, NANS] + stats[:, INFS] > 0
    outside = (stats[:, MIN] < edges[:, 0]) | (stats[:, MAX] > edges[:, -1])
    careful = nonfinite | outside
    for pack in packs:
        idx = np.asarray(pack.indices)
        sub_counts = np.zeros((idx.size, bins), np.int64)
        sub_extra = np.zeros((idx.size, 4), np.int64)
        K.segment_histograms(
            pack.flat, pack.offsets, np.arange(idx.size), np.ascontiguousarray(edges[idx]),
            sub_counts, sub_extra, careful[idx],
        )
        counts[idx], extra[idx] = sub_counts, sub_extra
    extra[:, 2], extra[:, 3] = stats[:, NANS], stats[:, INFS]
    return edges, counts, extra


class ParamCopies:
    """Reusable copies of parameters taken before the optimizer step (for ‖Δθ‖)."""

    def __init__(self) -> None:
        self._buffers: dict[int, torch.Tensor] = {}
        self.packs: list[Pack] = []

    def take(self, params: list[torch.Tensor]) -> None:
        """Copy ``params`` now: big ones into kept buffers, small ones packed together."""
        self.packs = []
        small = [i for i, p in enumerate(params) if p.numel() < SMALL]
        for i, p in enumerate(params):
            if p.numel() >= SMALL:
                src = _kernel_ready(p).reshape(-1)
                buf = self._buffers.get(i)
                if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
                    buf = self._buffers[i] = torch.empty_like(src)
                np.copyto(buf.numpy(), src.numpy())  # one thread: no contention with torch's pool
                self.packs.append(Pack(buf.numpy(), _offsets([src.numel()]), [i]))
        for pack in pack_tensors([params[i] for i in small]):
            pack.indices = [small[j] for j in pack.indices]
            self.packs.append(pack)

    def update_norms(self, params: list[torch.Tensor]) -> np.ndarray:
        """``(P, 2)``: ‖θ_now − θ_copy‖² and ‖θ_copy‖² per parameter."""
        out = np.zeros((len(params), 2))
        for pack in self.packs:
            parts = [_kernel_ready(params[i]).reshape(-1) for i in pack.indices]
            now = parts[0] if len(parts) == 1 else torch.cat(parts)
            rows = np.zeros((len(pack.indices), 2))
            K.segment_update_norms(now.numpy(), pack.flat, pack.offsets, rows)
            out[pack.indices] = rows
        return out


def compute(grads: list[torch.Tensor], want_histograms: bool, bins: int,
            hist_range: HistRange) -> RawStats:
    """Moments, and histograms when asked, of CPU gradients."""
    packs = pack_tensors(grads)
    stats = moments(packs, len(grads))
    if not want_histograms:
        return RawStats(stats)
    return RawStats(stats, *histograms(packs, stats, bins, hist_range))
