"""The live session's noise scale over the steps (Qt-free): each step of ≥ 2 micro-batches'
``NoiseStep`` (``result.noise``, ``core/watch/session_noise.py``; docs/noise.md), for the parameter
table's SNR column (``snr_at``), the Optimizer tab's smoothed SNR and B_simple curves
(``aligned``). A run directory's come from the run (``core/runs/noise_rows.py``) instead.
"""

from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

CELLS = 2_000_000  # per-parameter figures kept (two float64 each: 32 MB); then the oldest half goes
WHOLE = ("b_simple", "b_simple_ema", "b_simple_low", "b_simple_high")


class NoiseTrack:
    """The steps' figures, newest last: ``take`` StepPoints, read by step."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._steps: list[int] = []
        self._whole: list[tuple[float, ...]] = []
        self._per: list[tuple[dict[str, int], np.ndarray, np.ndarray]] = []  # index, snr, ema
        self._cells = 0

    def __len__(self) -> int:
        return len(self._steps)

    def take(self, points) -> None:
        """The noise scale of new steps (StepPoints, oldest first), where they have one."""
        index: dict[str, int] | None = self._per[-1][0] if self._per else None
        for point in points:
            noise = getattr(point, "noise", None)
            if noise is None:
                continue
            w, s = noise.whole, noise.smoothed
            self._steps.append(point.step)
            self._whole.append(tuple(math.nan if v is None else float(v)
                                     for v in (w.b_simple, s.b_simple, s.low, s.high)))
            if index is None or len(index) != len(noise.names) or list(index) != noise.names:
                index = {name: i for i, name in enumerate(noise.names)}
            self._per.append((index, noise.per["snr"], noise.per["snr_ema"]))
            self._cells += len(index)
        if self._cells > CELLS:
            keep = len(self._steps) // 2
            self._steps, self._whole = self._steps[-keep:], self._whole[-keep:]
            self._per = self._per[-keep:]
            self._cells = sum(len(i) for i, _, _ in self._per)

    def snr_at(self, step: int | None) -> dict[str, float | None]:
        """Each parameter's SNR at ``step`` (None: the newest), {} where that step has none."""
        if not self._steps:
            return {}
        at = len(self._steps) - 1 if step is None else bisect_left(self._steps, step)
        if at >= len(self._steps) or (step is not None and self._steps[at] != step):
            return {}
        index, snr, _ = self._per[at]
        return {name: None if math.isnan(snr[i]) else float(snr[i]) for name, i in index.items()}

    def aligned(self, name: str, steps: np.ndarray) -> dict[str, np.ndarray]:
        """At ``steps``: ``snr`` (``name``'s smoothed SNR) and the model's B_simple (this step's,
        smoothed, and the smoothed one's ±1 standard-error band), NaN where a step has none."""
        out = {f: np.full(len(steps), np.nan) for f in ("snr", *WHOLE)}
        if not self._steps or not len(steps):
            return out
        held = np.asarray(self._steps, np.float64)
        where = np.searchsorted(held, steps)
        found = (where < len(held)) & (held[np.minimum(where, len(held) - 1)] == steps)
        for row, at in zip(np.flatnonzero(found), where[found], strict=True):
            index, _, ema = self._per[at]
            i = index.get(name)
            if i is not None:
                out["snr"][row] = ema[i]
            for f, v in zip(WHOLE, self._whole[at], strict=True):
                out[f][row] = v
        return out

