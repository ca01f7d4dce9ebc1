"""What the GUI remembers of a run: loss/norm curves and recent gradient statistics (Qt-free)."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

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
        self.gradients: deque[Any] = deque(maxlen=history)
        self.steps_per_second = 0.0

    def clear(self) -> None:
        """Forget everything (a new model was opened)."""
        self.__init__(self.gradients.maxlen or 256)

    def add(self, update: RunUpdate) -> None:
        """Take in what a drain of the run buffer brought."""
        steps = [float(p.step) for p in update.points]
        self.loss.extend(steps, [p.loss for p in update.points])
        self.norm.extend(steps, [np.nan if p.grad_norm is None else p.grad_norm for p in update.points])
        self.gradients.extend(update.gradients)
        if update.points:
            self.steps_per_second = update.steps_per_second

    @property
    def latest_gradients(self) -> Any:
        """The newest StepGradients, or None."""
        return self.gradients[-1] if self.gradients else None

    def previous_histogram(self, param: str) -> Any:
        """The histogram of ``param`` recorded before the newest one, or None."""
        seen = 0
        for grads in reversed(self.gradients):
            hist = grads.histograms.get(param)
            if hist is not None:
                seen += 1
                if seen == 2:
                    return hist
        return None
