"""What the GUI remembers of a run: loss/norm curves and recent gradient statistics (Qt-free)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.gui.run_buffer import RunUpdate


class Curve:
    """A growable float series with its step numbers, capped at ``limit`` points."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._x = np.empty(1024)
        self._y = np.empty(1024)
        self.size = 0

    def extend(self, xs: list[float], ys: list[float]) -> None:
        """Append points (NaN for a missing value)."""
        n = len(xs)
        if self.size + n > len(self._x):
            cap = max(len(self._x) * 2, self.size + n)
            self._x = np.resize(self._x, cap)
            self._y = np.resize(self._y, cap)
        self._x[self.size : self.size + n] = xs
        self._y[self.size : self.size + n] = ys
        self.size += n
        if self.size > self.limit:  # keep the newest half
            keep = self.limit // 2
            self._x[:keep] = self._x[self.size - keep : self.size]
            self._y[:keep] = self._y[self.size - keep : self.size]
            self.size = keep

    def decimated(self, max_points: int) -> tuple[np.ndarray, np.ndarray]:
        """At most about ``max_points`` points keeping each bucket's minimum and maximum."""
        x, y = self.x, self.y
        if len(x) <= max_points:
            return x, y
        buckets = max_points // 2
        edges = np.linspace(0, len(x), buckets + 1).astype(int)
        keep = []
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            part = y[lo:hi]
            if not np.isfinite(part).any():
                keep.append(lo)
                continue
            a, b = lo + int(np.nanargmin(part)), lo + int(np.nanargmax(part))
            keep.extend(sorted({a, b}))
        index = np.asarray(keep)
        return x[index], y[index]

    @property
    def x(self) -> np.ndarray:
        return self._x[: self.size]

    @property
    def y(self) -> np.ndarray:
        return self._y[: self.size]


class Timeline:
    """Curves of loss and global gradient norm, plus the latest gradient statistics."""

    def __init__(self, history: int = 256) -> None:
        self.loss = Curve()
        self.norm = Curve()
        self.gradients = GradientHistory(history)
        self.steps_per_second = 0.0

    def clear(self) -> None:
        """Forget everything (a new model was opened)."""
        self.__init__(self.gradients.maxlen)

    def add(self, update: RunUpdate) -> None:
        """Take in what a drain of the run buffer brought."""
        steps = [float(p.step) for p in update.points]
        self.loss.extend(steps, [p.loss for p in update.points])
        norms = [np.nan if p.grad_norm is None else p.grad_norm for p in update.points]
        self.norm.extend(steps, norms)
        for item in update.gradients:
            self.gradients.append(item)
        if update.points:
            self.steps_per_second = update.steps_per_second

    @property
    def latest_gradients(self) -> Any:
        """The newest StepGradients, or None."""
        return self.gradients.latest()

    def histograms_of(self, param: str) -> tuple[Any, Any]:
        """``param``'s histogram at the newest recorded histogram step and at the one before.

        Either is None when that step recorded no histogram for ``param`` (no gradient).
        """
        recorded = [g for g in self.gradients if g.histograms]
        current = recorded[-1].histograms.get(param) if recorded else None
        previous = recorded[-2].histograms.get(param) if len(recorded) > 1 else None
        return current, previous
