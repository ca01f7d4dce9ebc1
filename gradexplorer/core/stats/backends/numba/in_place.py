"""CPU statistics read in place: every gradient of a step in one kernel call per pass.

Where every tensor is a contiguous CPU tensor of one kernel dtype (the common case), the
step's tensors are handed to ``numba.kernels_in_place`` by address: no packing copy, no Python work per
tensor beyond reading its address, and the same per-tensor kernels (the same figures, bit for
bit) as the packed path of ``numba.cpu``, which remains for everything else. With several
torch threads and enough work the tensors are shared out among them by size, one call a share.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_not

import numpy as np
import torch

from gradexplorer.core.stats.backends.numba import cpu as C
from gradexplorer.core.stats.backends.numba import kernels_in_place as KA
from gradexplorer.core.stats.backends.numba.cpu import PARALLEL_MIN, ParamCopies
from gradexplorer.core.stats.backends.raw import MAX, MIN, MOMENT_COLUMNS, RawStats
from gradexplorer.core.stats.histogram import HistRange, histogram_edges, range_bounds

_LIKE = {torch.float32: np.zeros(0, np.float32), torch.float64: np.zeros(0, np.float64)}


@dataclass
class Addresses:
    """Where tensors lie: int64 ``addresses`` and ``sizes``, their dtype (``like``: an empty
    array of it), and the tensors themselves, held while the kernels read them."""

    addresses: np.ndarray
    sizes: np.ndarray
    like: np.ndarray
    tensors: list[torch.Tensor]
    total: int = -1  # the sum of ``sizes`` (-1: summed here)

    def __post_init__(self) -> None:
        if self.total < 0:
            self.total = int(self.sizes.sum())

    def part(self, rows: np.ndarray) -> Addresses:
        return Addresses(self.addresses[rows], self.sizes[rows], self.like, self.tensors)


def addresses_of(tensors: list[torch.Tensor]) -> Addresses | None:
    """The tensors' addresses when the kernels can read them all in place (dense, contiguous
    CPU tensors of one kernel dtype); else None."""
    if not tensors:
        return None
    dtype = tensors[0].dtype
    like = _LIKE.get(dtype)
    if like is None:
        return None
    # C-level loops over the tensors (no Python frame per tensor: this runs for every step)
    if any(map(is_not, map(_DTYPE, tensors), repeat(dtype))) or not all(map(_IS_CPU, tensors)) \
            or any(map(_IS_SPARSE, tensors)) or not all(map(torch.Tensor.is_contiguous, tensors)):
        return None
    sizes = np.array(list(map(torch.Tensor.numel, tensors)), np.int64)
    addresses = np.array(list(map(torch.Tensor.data_ptr, tensors)), np.int64)
    if not addresses.all() and sizes[addresses == 0].any():  # no storage of its own (a DTensor,
        return None  # another wrapper subclass): data_ptr() is 0, nothing a kernel may read
    return Addresses(addresses, sizes, like, tensors, int(sizes.sum()))


_DTYPE, _IS_CPU, _IS_SPARSE = attrgetter("dtype"), attrgetter("is_cpu"), attrgetter("is_sparse")


class KeptAddresses:
    """``addresses_of`` the same tensors step after step (the weights), read again only when
    one of them is another object, lies elsewhere, changes size or is no longer contiguous (a
    dtype or device change moves it): four C-level maps a call instead of seven and two
    arrays. The Addresses kept hold the tensors, so their ids stay theirs."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._at: Addresses | None = None

    def of(self, tensors: list[torch.Tensor]) -> Addresses | None:
        key = (list(map(id, tensors)), list(map(torch.Tensor.data_ptr, tensors)),
               list(map(torch.Tensor.numel, tensors)))
        if key == self._key and all(map(torch.Tensor.is_contiguous, tensors)):
            return self._at
        self._at = addresses_of(tensors)
        self._key = key if self._at is not None else None
        return self._at


ALL = slice(None)  # the one share of a single kernel call: every row
SHARED_MIN = 1 << 20  # weights: fewer, the update norms are not worth sharing with the worker


def shares(at: Addresses) -> list[np.ndarray | slice]:
    """The tensors' rows split among torch's threads, balanced by size (one share, ``ALL``,
    when one thread or too little work: a single kernel call)."""
    workers = torch.get_num_threads()
    if workers == 1 or at.sizes.size < 2 or at.total < PARALLEL_MIN:
        return [ALL]
    return balanced(at.sizes, workers)


def balanced(sizes: np.ndarray, parts: int) -> list[np.ndarray]:
    """Row indices of ``sizes`` in (at most) ``parts`` shares of about equal total size."""
    loads, rows = [0] * parts, [[] for _ in range(parts)]
    for i in np.argsort(-sizes, kind="stable").tolist():  # biggest first, to the least loaded
        k = loads.index(min(loads))
        rows[k].append(i)
        loads[k] += int(sizes[i])
    return [np.array(r, np.int64) for r in rows if r]


def in_shares(at: Addresses, work, out: np.ndarray) -> np.ndarray:
    """``out[rows] = work(at.part(rows), rows)`` for each share, the shares on torch's threads."""
    parts = shares(at)
    if len(parts) == 1:
        out[:] = work(at, ALL)
        return out
    done = C.in_parallel(lambda rows: work(at.part(rows), rows), parts,
                         size=lambda rows: int(at.sizes[rows].sum()))
    for rows, found in zip(parts, done, strict=True):
        out[rows] = found
    return out


def _moments(at: Addresses, rows) -> np.ndarray:
    out = np.zeros((at.sizes.size, MOMENT_COLUMNS))
    KA.moments_at(at.addresses, at.sizes, at.like, out)
    return out


def copy_and_moments_at(at: Addresses, starts: np.ndarray, into: np.ndarray) -> np.ndarray:
    """``at``'s tensors copied into ``into`` (at ``starts``) and the copy's moments
    (``compute_at``'s, bit for bit) in one call: a float32 tensor's in the copy's own pass."""
    out = np.zeros((at.sizes.size, MOMENT_COLUMNS))
    KA.copy_moments_at(at.addresses, at.sizes, at.like, starts, into, out)
    return out


def step_edges(moments: np.ndarray, bins: int, hist_range: HistRange) -> tuple[np.ndarray, np.ndarray | None]:
    """Every row's histogram edges (``histogram_edges(*range_bounds(...))``, bit for bit) and
    careful flags (``pack_histograms``'s) in one kernel call; where a row needs the fallback
    ranges, the numpy edges and no flags."""
    count = moments.shape[0]
    edges, careful = np.empty((count, bins + 1)), np.empty(count, np.bool_)
    mode, lo, hi = (KA.FIXED, *hist_range) if isinstance(hist_range, tuple) else \
        (KA.SYMMETRIC if hist_range == "symmetric" else KA.AUTO, 0.0, 0.0)
    if bins >= 1 and KA.edges_of(moments, mode, float(lo), float(hi), edges, careful):
        return edges, careful
    return histogram_edges(*range_bounds(moments[:, MIN], moments[:, MAX], hist_range), bins), None


def compute_at(at: Addresses, want_histograms: bool, bins: int, hist_range: HistRange) -> RawStats:
    """``numba.cpu.compute``'s figures, read in place."""
    count = at.sizes.size
    raw = RawStats(in_shares(at, _moments, np.zeros((count, MOMENT_COLUMNS))))
    if not want_histograms:
        return raw
    m = raw.moments
    edges, careful = step_edges(m, bins, hist_range)
    raw.edges = edges
    if len(shares(at)) == 1:  # one kernel call, straight into the step's arrays
        _, raw.counts, raw.extra = C.pack_histograms(at, m, bins, hist_range, edges, careful)
        return raw
    counts_and_extra = np.zeros((count, bins + 4), np.int64)

    def histograms(part: Addresses, rows) -> np.ndarray:
        _, counts, extra = C.pack_histograms(part, m[rows], bins, hist_range, edges[rows],
                                             None if careful is None else careful[rows])
        return np.concatenate([counts, extra], 1)

    in_shares(at, histograms, counts_and_extra)
    raw.counts = np.ascontiguousarray(counts_and_extra[:, :bins])
    raw.extra = np.ascontiguousarray(counts_and_extra[:, bins:])
    return raw


def norms_at(at: Addresses) -> np.ndarray:
    """‖t‖ of each tensor, float64 (``kernels.norm_of_array``)."""
    def norms(part: Addresses, rows) -> np.ndarray:
        out = np.zeros(part.sizes.size)
        KA.norms_at(part.addresses, part.sizes, part.like, out)
        return out
    return in_shares(at, norms, np.zeros(at.sizes.size))


class FlatBuffer:
    """One kept flat buffer for a copy of tensors laid end to end (``starts``: where each
    begins), reallocated only when their total size or dtype changes."""

    def __init__(self) -> None:
        self.flat = np.zeros(0, np.float32)
        self.sizes = np.zeros(0, np.int64)
        self.starts = np.zeros(0, np.int64)

    def fit(self, at: Addresses) -> bool:
        """Make it hold ``at``'s tensors; True when the buffer or the layout changed."""
        fits = self.flat.size == at.total and self.flat.dtype == at.like.dtype
        if not fits:
            self.flat = np.empty(at.total, at.like.dtype)
        if fits and at.sizes.tobytes() == self.sizes.tobytes():
            return False
        self.sizes, self.starts = at.sizes, np.concatenate([[0], np.cumsum(at.sizes)[:-1]])
        return True

    def holds(self, at: Addresses) -> bool:
        """Whether the buffer is laid out for ``at``'s tensors (their dtype and sizes)."""
        return at.like.dtype == self.flat.dtype and at.sizes.tobytes() == self.sizes.tobytes()


class UpdateCopies:
    """The weights before the optimizer step, for ‖Δθ‖: one kept flat buffer filled in place
    by address (``ParamCopies``, the packed copies, where the weights cannot be read so)."""

    def __init__(self) -> None:
        self._buffer = FlatBuffer()
        self._packed: ParamCopies | None = None
        self._where = KeptAddresses()

    def take(self, params: list[torch.Tensor]) -> None:
        """Copy ``params`` now."""
        at = self._where.of(params)
        if at is None:
            self._packed = self._packed or ParamCopies()
            self._packed.take(params)
            return
        self._packed = None
        buffer = self._buffer
        buffer.fit(at)

        def copy(part: Addresses, rows) -> np.ndarray:
            KA.copy_at(part.addresses, part.sizes, part.like, buffer.starts[rows], buffer.flat)
            return np.zeros(part.sizes.size)
        in_shares(at, copy, np.zeros(at.sizes.size))

    def update_norms(self, params: list[torch.Tensor], helper=None) -> np.ndarray:
        """``(P, 2)``: ‖θ_now − θ_copy‖ and ‖θ_copy‖ per parameter (float64). ``helper(job)``:
        where given, a ``numba.worker.PendingWork`` of ``job`` on the statistics worker (or
        None): with ``SHARED_MIN`` weights or more and a single share, half of them (by size)
        are measured there while this thread measures the other half, then waited for (the
        same kernel on each tensor: the same figures bit for bit)."""
        if self._packed is not None:
            return self._packed.update_norms(params)
        at = self._where.of(params)
        buffer = self._buffer
        if at is None or not buffer.holds(at):
            raise RuntimeError("the parameters changed across the optimizer step")

        def norms(part: Addresses, rows) -> np.ndarray:
            out = np.zeros((part.sizes.size, 2))
            KA.update_norms_at(part.addresses, part.sizes, part.like, buffer.flat,
                               buffer.starts[rows], out)
            return out
        out = np.zeros((at.sizes.size, 2))
        halves = balanced(at.sizes, 2) if helper is not None and at.total >= SHARED_MIN \
            and at.sizes.size > 1 and len(shares(at)) == 1 else []
        other = helper(lambda: norms(at.part(halves[1]), halves[1])) if len(halves) == 2 else None
        if other is None:
            return in_shares(at, norms, out)
        out[halves[0]] = norms(at.part(halves[0]), halves[0])
        out[halves[1]] = other.result()  # done on the worker, or here if it has not begun
        return out
