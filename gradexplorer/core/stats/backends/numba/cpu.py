"""CPU statistics backend: fused Numba passes over each gradient, no copies of large tensors.

Large tensors are handed to the kernels in place; small ones are packed into one flat array
first, so a model with many tiny parameters costs a few kernel calls, not hundreds.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gradexplorer.core.stats.backends.numba import kernels as K
from gradexplorer.core.stats.backends.numba import kernels_in_place as KA
from gradexplorer.core.stats.backends.raw import INFS, MAX, MIN, MOMENT_COLUMNS, NANS, RawStats
from gradexplorer.core.stats.histogram import HistRange, histogram_edges, range_bounds

SMALL = 1 << 16  # tensors below this many elements are packed together
PARALLEL_MIN = 1 << 19  # less work than this (elements) is not worth handing to threads
KERNEL_DTYPES = (torch.float32, torch.float64)


@dataclass
class Pack:
    """A flat float array holding the tensors ``indices`` at ``offsets``."""

    flat: np.ndarray
    offsets: np.ndarray
    indices: list[int]


def flat_array(t: torch.Tensor) -> np.ndarray:
    """A 1-D float32/float64 numpy view of a CPU tensor (a copy if not contiguous or half)."""
    if t.requires_grad:
        t = t.detach()
    if t.is_complex():  # its real and imaginary parts (a view)
        t = torch.view_as_real(t)
    if t.dtype not in KERNEL_DTYPES:
        t = t.float()
    return t.numpy().reshape(-1)


def concatenate(parts: list[np.ndarray]) -> np.ndarray:
    """One flat copy (numpy: single-threaded, so no wait on a busy thread pool)."""
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def offsets_of(sizes: list[int]) -> np.ndarray:
    """``[0, s0, s0+s1, ...]`` as int64 (Python sums: a few sizes, no numpy calls)."""
    return np.array([0, *itertools.accumulate(sizes)], np.int64)


def pack_tensors(tensors: list[torch.Tensor]) -> list[Pack]:
    """Group tensors into flat packs: big ones alone (as views), small ones joined (a copy)."""
    packs: list[Pack] = []
    small: dict[np.dtype, list[int]] = {}
    ready = [flat_array(t) for t in tensors]
    for i, a in enumerate(ready):
        if a.size >= SMALL:
            packs.append(Pack(a, offsets_of([a.size]), [i]))
        else:
            small.setdefault(a.dtype, []).append(i)
    for indices in small.values():
        parts = [ready[i] for i in indices]
        packs.append(Pack(concatenate(parts), offsets_of([p.size for p in parts]), indices))
    return packs


def in_parallel(fn: Callable[[Any], Any], items: list[Any],
                size: Callable[[Any], int] = lambda pack: pack.flat.size) -> list[Any]:
    """``[fn(x) for x in items]``, spread over torch's thread count (the kernels drop the GIL)."""
    workers = max(1, torch.get_num_threads())
    sizes = [size(x) for x in items]
    if workers == 1 or len(items) < 2 or sum(sizes) < PARALLEL_MIN:
        return [fn(x) for x in items]
    global _POOL
    if _POOL is None or _POOL._max_workers != workers:
        _POOL = ThreadPoolExecutor(workers, thread_name_prefix="gradexplorer-stats")
    order = sorted(range(len(items)), key=lambda i: -sizes[i])  # biggest first
    try:
        mapped = _POOL.map(fn, [items[i] for i in order])
    except RuntimeError:  # no thread to be had (a process or address-space limit): here
        return [fn(x) for x in items]
    results = dict(zip(order, mapped, strict=True))
    return [results[i] for i in range(len(items))]


_POOL: ThreadPoolExecutor | None = None


def pack_moments(pack: Pack) -> np.ndarray:
    """Moments of each tensor in one pack."""
    rows = np.zeros((len(pack.indices), MOMENT_COLUMNS))
    K.segment_moments(pack.flat, pack.offsets, rows)
    return rows


def pack_histograms(pack: Pack, stats: np.ndarray, bins: int, hist_range: HistRange,
                    edges: np.ndarray | None = None, careful: np.ndarray | None = None):
    """Exact histograms of each tensor in one pack (or ``numba.in_place.Addresses``): ``(edges,
    counts, extra)``; ``edges`` (the pack's rows) when already computed for every tensor at once,
    and ``careful`` (NaN/Inf present or values outside the edges) with them."""
    count = stats.shape[0]
    if edges is None:
        edges = histogram_edges(*range_bounds(stats[:, MIN], stats[:, MAX], hist_range), bins)
    counts = np.zeros((count, bins), np.int64)
    extra = np.zeros((count, 4), np.int64)
    if careful is None:
        careful = (stats[:, NANS] + stats[:, INFS] > 0) | (stats[:, MIN] < edges[:, 0]) \
            | (stats[:, MAX] > edges[:, -1])
    if isinstance(pack, Pack):
        K.segment_histograms(pack.flat, pack.offsets, np.arange(count), edges, counts, extra, careful)
    else:  # the tensors read in place (backend_at.Addresses)
        KA.histograms_at(pack.addresses, pack.sizes, pack.like, edges, counts, extra, careful)
    extra[:, 2], extra[:, 3] = stats[:, NANS], stats[:, INFS]
    return edges, counts, extra


class ParamCopies:
    """Reusable copies of parameters taken before the optimizer step (for ‖Δθ‖)."""

    def __init__(self) -> None:
        self._buffers: dict[int, np.ndarray] = {}
        self._views: dict[int, tuple[int, np.ndarray]] = {}
        self.packs: list[Pack] = []

    def view(self, p: torch.Tensor) -> np.ndarray:
        """Flat numpy array of a parameter, a kept view while its storage stays the same."""
        kept = self._views.get(id(p))
        if kept is not None and kept[0] == p.data_ptr() and kept[1].size == p.numel():
            return kept[1]
        array = flat_array(p)
        if p.is_contiguous() and p.dtype in KERNEL_DTYPES:  # a true view: safe to keep
            self._views[id(p)] = (p.data_ptr(), array)
        return array

    def take(self, params: list[torch.Tensor]) -> None:
        """Copy ``params`` now: big ones into kept buffers, small ones packed together."""
        self.packs = []
        small = [i for i, p in enumerate(params) if p.numel() < SMALL]
        sources = {}
        for i, p in enumerate(params):
            if p.numel() >= SMALL:
                src = self.view(p)
                buf = self._buffers.get(id(p))
                if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
                    buf = self._buffers[id(p)] = np.empty_like(src)
                self.packs.append(Pack(buf, offsets_of([src.size]), [i]))
                sources[i] = src
        in_parallel(lambda pack: np.copyto(pack.flat, sources[pack.indices[0]]), self.packs)
        by_dtype: dict[np.dtype, list[int]] = {}
        for i in small:
            by_dtype.setdefault(self.view(params[i]).dtype, []).append(i)
        for indices in by_dtype.values():
            parts = [self.view(params[i]) for i in indices]
            self.packs.append(Pack(concatenate(parts), offsets_of([a.size for a in parts]), indices))

    def update_norms(self, params: list[torch.Tensor]) -> np.ndarray:
        """``(P, 2)``: ‖θ_now − θ_copy‖ and ‖θ_copy‖ per parameter (float64, scaled)."""
        def work(pack: Pack) -> np.ndarray:
            parts = [self.view(params[i]) for i in pack.indices]
            now = parts[0] if len(parts) == 1 else concatenate(parts)
            rows = np.zeros((len(pack.indices), 2))
            K.segment_update_norms(now, pack.flat, pack.offsets, rows)
            return rows

        out = np.zeros((len(params), 2))
        for pack, rows in zip(self.packs, in_parallel(work, self.packs), strict=True):
            out[pack.indices] = rows
        return out


def compute(grads: list[torch.Tensor], want_histograms: bool, bins: int,
            hist_range: HistRange) -> RawStats:
    """Moments, and histograms when asked, of CPU gradients (rows in the order given)."""
    count = len(grads)
    packs = pack_tensors(grads)
    raw = RawStats(np.zeros((count, MOMENT_COLUMNS)))
    for pack, rows in zip(packs, in_parallel(pack_moments, packs), strict=True):
        raw.moments[pack.indices] = rows
    if not want_histograms:
        return raw
    # every tensor's edges in one vectorised pass (row-wise: the same figures as pack by pack)
    m = raw.moments
    raw.edges = histogram_edges(*range_bounds(m[:, MIN], m[:, MAX], hist_range), bins)
    raw.counts, raw.extra = np.zeros((count, bins), np.int64), np.zeros((count, 4), np.int64)

    def work(pack: Pack):
        return pack_histograms(pack, m[pack.indices], bins, hist_range, raw.edges[pack.indices])

    for pack, (_, counts, extra) in zip(packs, in_parallel(work, packs), strict=True):
        raw.counts[pack.indices], raw.extra[pack.indices] = counts, extra
    return raw
