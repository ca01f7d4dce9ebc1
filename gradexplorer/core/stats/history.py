"""A bounded buffer of StepGradients for histogram-over-time and gradient-flow views: the last
``maxlen`` steps (a ring), or with ``whole_run`` the whole run thinned to at most ``maxlen``
steps (every ``stride``-th step since the first, and the newest two)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gradexplorer.core.stats.histogram import rebin_rows
from gradexplorer.core.stats.records import StepGradients


@dataclass
class HistogramMatrix:
    """One parameter's histograms over time: row ``t`` is step ``steps[t]``."""

    steps: np.ndarray  # (T,)
    edges: np.ndarray  # (T, bins+1): each step has its own range
    counts: np.ndarray  # (T, bins)
    nonfinite: np.ndarray | None = None  # (T,) NaN and ±Inf values of each step (not binned)

    def on_common_grid(self, bins: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(edges, counts)`` redistributed onto one grid spanning every step (for an image)."""
        if not len(self.steps):
            return np.zeros(0), np.zeros((0, 0))
        bins = bins or self.counts.shape[1]
        grid = np.linspace(self.edges[:, 0].min(), self.edges[:, -1].max(), bins + 1)
        return grid, rebin_rows(self.edges, self.counts, grid)


class GradientHistory:
    """At most ``maxlen`` StepGradients; memory ≈ maxlen × params × (bins × 16 + 200) bytes.

    By default the last ``maxlen`` steps. With ``whole_run`` the first step is never dropped:
    it holds every ``stride``-th step appended since the first (``stride`` 1, 2, 4 …: when the
    buffer would pass ``maxlen`` the stride doubles and every other held step goes), plus the
    newest two, so the views cover the whole run, evenly spread, within the same bound.

    One thread appends (the training thread); others may read at the same time: every
    reader works on a copy of the items taken in one step.
    """

    def __init__(self, maxlen: int = 256, whole_run: bool = False) -> None:
        if maxlen < (4 if whole_run else 1):
            raise ValueError(f"history length must be at least {4 if whole_run else 1}")
        self._maxlen, self.whole_run = maxlen, whole_run
        self._items: deque[StepGradients] = deque(maxlen=None if whole_run else maxlen)
        self._arrivals: deque[int] = deque()  # whole_run: each item's order of arrival (0: first)
        self._count = 0  # items appended
        self.stride = 1

    @property
    def maxlen(self) -> int:
        return self._maxlen

    def append(self, item: StepGradients) -> None:
        """Add a step: when full, the oldest goes, or with ``whole_run`` the steps off the
        doubled stride."""
        if not self.whole_run:
            self._items.append(item)
            return
        arrival, self._count = self._count, self._count + 1
        items, arrivals = self._items, self._arrivals
        if len(arrivals) >= 2 and arrivals[-2] % self.stride:  # no longer one of the newest two
            del items[-2], arrivals[-2]
        items.append(item)
        arrivals.append(arrival)
        if len(items) > self._maxlen:
            self.stride *= 2
            kept = [(a, i) for a, i in zip(arrivals, items, strict=True)
                    if a % self.stride == 0 or a >= arrival - 1]
            self._arrivals = deque(a for a, _ in kept)
            self._items = deque(i for _, i in kept)  # one assignment: readers see old or new

    def clear(self) -> None:
        self._items.clear()
        self._arrivals.clear()
        self._count, self.stride = 0, 1

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[StepGradients]:
        return iter(list(self._items))

    def latest(self) -> StepGradients | None:
        """The most recent step, or None before the first."""
        return self._items[-1] if self._items else None

    def steps(self) -> list[int]:
        """Step numbers held, oldest first."""
        return [item.step for item in list(self._items)]

    def series(self, param: str, field: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one ParamStats field (``global_norm`` with param ``""``); a
        gradient's norm and max |g| NaN/inf where it held NaN/Inf (``whole_figure``)."""
        items = list(self._items)
        if field == "global_norm":
            values = [item.global_norm for item in items]
        else:
            values = [_field(item, param, field) for item in items]
        floats = [np.nan if v is None else float(v) for v in values]
        return np.array([i.step for i in items], dtype=np.int64), np.array(floats)

    def histogram_matrix(self, param: str) -> HistogramMatrix:
        """Histograms of ``param`` at every held step that has one."""
        rows = [(i.step, i.histograms[param]) for i in list(self._items) if param in i.histograms]
        if not rows:
            return HistogramMatrix(np.zeros(0, np.int64), np.zeros((0, 0)), np.zeros((0, 0)))
        return HistogramMatrix(
            np.array([s for s, _ in rows], dtype=np.int64),
            np.stack([h.edges for _, h in rows]),
            np.stack([h.counts for _, h in rows]),
            np.array([h.nan_count + h.inf_count for _, h in rows], dtype=np.int64),
        )

    def memory_bytes(self) -> int:
        """Approximate bytes held (histogram arrays and per-parameter records)."""
        total = 0
        for item in list(self._items):
            total += sum(h.edges.nbytes + h.counts.nbytes for h in item.histograms.values())
            total += 200 * len(item.params)
        return total


def _field(item: StepGradients, param: str, field: str):
    stats = item.params.get(param)
    return None if stats is None else stats.whole(field)  # NaN/inf where the gradient held them
