"""Each parameter's optimizer figures over the steps: what the Optimizer curves draw (Qt-free).

Per step and parameter: lr, ‖m‖, RMS √v̂, effective lr, ‖momentum‖ (the core's
``optimizer_state``, read after the step) and ‖Δθ‖/‖θ‖ (the monitor's update ratio, inf where
θ was 0). The in-app session feeds it each StepPoint's ``optimizer`` and ``update_ratios``
(``take``); for a followed or opened run directory (``follow(run)``) it reads a parameter's
series from the run when asked for it (``RunHistory.optimizer_series``), then only the steps
added since, up to the newest step the timeline holds.
"""

from __future__ import annotations

import math

import numpy as np

from gradexplorer.core.stats.optimizer_fields import STATE_FIELDS  # (no torch: the window imports this)
from gradexplorer.gui.models.noise_track import NoiseTrack

SERIES_FIELDS = (*STATE_FIELDS, "update_ratio")
# + the smoothed gradient SNR and the model's smoothed B_simple (docs/noise.md; its band and each
# step's own estimate beside it in ``series``: BAND)
CURVE_FIELDS = (*SERIES_FIELDS, "snr", "b_simple_ema")
BAND = ("b_simple", "b_simple_low", "b_simple_high")
CELLS = 4_000_000  # figures the live session keeps (float64: 32 MB); when full, the oldest half goes
_RATIO = len(STATE_FIELDS)


class OptimizerTrack:
    """``series(name)`` -> ``(steps, {figure: values})``, NaN where a step has no such figure."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Start over (a new model or run): nothing held, fed by ``take``."""
        self.run_history = None
        self.noise = NoiseTrack()  # the live session's noise scale
        self._read: dict[str, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
        self._index: dict[str, int] = {}
        self._steps = np.empty(0)
        self._values = np.empty((0, 0, len(SERIES_FIELDS)))
        self.size = 0

    def follow(self, run) -> None:
        """Read the figures from ``run`` (a Run) from now on."""
        from gradexplorer.core.runs.history import RunHistory

        self.clear()
        self.run_history = RunHistory(run)

    @property
    def names(self) -> list[str]:
        """Parameters with figures, in the order they came (a run: the model's order)."""
        if self.run_history is not None:
            return self.run_history.run.parameters
        return list(self._index)

    def take(self, points) -> None:
        """Take in the figures of new steps (StepPoints, oldest first; the live session)."""
        if self.run_history is not None:
            return
        self.noise.take(points)
        for point in points:
            state = getattr(point, "optimizer", None) or {}
            ratios = getattr(point, "update_ratios", None) or {}
            if state or ratios:
                self._append(point.step, state, ratios)

    def _append(self, step: int, state: dict, ratios: dict) -> None:
        for name in (*state, *ratios):
            if name not in self._index:
                self._widen(name)
        if self.size == len(self._steps):
            self._grow()
        row = self._values[self.size]
        row[:] = math.nan
        for name, figures in state.items():
            cells = row[self._index[name]]
            for k, field in enumerate(STATE_FIELDS):
                value = getattr(figures, field, None)
                if value is not None:
                    cells[k] = value
        for name, ratio in ratios.items():
            if ratio is not None:
                row[self._index[name], _RATIO] = ratio
        self._steps[self.size] = step
        self.size += 1

    def _limit(self) -> int:
        """Steps kept: CELLS over the figures of one step (at least two)."""
        return max(2, CELLS // max(1, len(self._index) * len(SERIES_FIELDS)))

    def _widen(self, name: str) -> None:
        self._index[name] = len(self._index)
        more = np.full((len(self._values), 1, len(SERIES_FIELDS)), math.nan)
        self._values = np.concatenate([self._values, more], axis=1)
        limit = self._limit()
        if self.size > limit:  # more parameters, fewer steps: keep the newest
            self._keep_newest(limit // 2)

    def _grow(self) -> None:
        limit = self._limit()
        if self.size >= limit:
            self._keep_newest(limit // 2)
            return
        capacity = min(limit, max(64, 2 * len(self._steps)))
        self._steps = np.resize(self._steps, capacity)
        values = np.full((capacity, *self._values.shape[1:]), math.nan)
        values[: self.size] = self._values[: self.size]
        self._values = values

    def _keep_newest(self, keep: int) -> None:
        start = self.size - keep
        self._steps[:keep] = self._steps[start : self.size]
        self._values[:keep] = self._values[start : self.size]
        self.size = keep

    def series(self, name: str, until: int | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``name``'s figures at every step held (a run: at most ``until``, the timeline's newest)."""
        if self.run_history is not None:
            steps, values = self._run_series(name, until)
            return steps, {**values, **self._run_noise(name, steps)}
        column = self._index.get(name)
        steps = self._steps[: self.size].copy()
        if column is None:
            return np.zeros(0), {f: np.zeros(0) for f in (*CURVE_FIELDS, *BAND)}
        noise = self.noise.aligned(name, steps)
        return steps, {**{f: self._values[: self.size, column, k].copy()
                          for k, f in enumerate(SERIES_FIELDS)}, **noise}

    def _run_noise(self, name: str, steps: np.ndarray) -> dict[str, np.ndarray]:
        """The run's smoothed gradient SNR of ``name`` and its B_simple figures at ``steps``
        (NaN where it has none)."""
        from gradexplorer.core.runs.noise_rows import noise_rows, snr_curve

        def at_steps(found: dict) -> np.ndarray:
            return np.array([np.nan if found.get(int(s)) is None else found[int(s)]
                             for s in steps], np.float64)

        run = self.run_history.run
        at, _, smoothed = snr_curve(run, name)
        rows = noise_rows(run)
        out = {"snr": at_steps(dict(zip(at, smoothed, strict=True))),
               **{f: at_steps({r["step"]: r[f] for r in rows}) for f in ("b_simple_ema", *BAND)}}
        if run.settings.get("noise_every", 1) != 1:  # on a cadence: the steps that have one
            out["noise_at"] = np.isin(steps, [r["step"] for r in rows])
        return out

    def _run_series(self, name: str, until: int | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        steps, values = self._read.get(name) or (np.zeros(0), {f: np.zeros(0) for f in SERIES_FIELDS})
        after = int(steps[-1]) if len(steps) else -1
        if until is None or until > after:
            new_steps, new = self.run_history.optimizer_series(name, after, until)
            if len(new_steps):
                steps = np.concatenate([steps, new_steps.astype(np.float64)])
                values = {f: np.concatenate([values[f], new[f]]) for f in SERIES_FIELDS}
                self._read[name] = steps, values
        if until is not None and len(steps) and steps[-1] > until:
            keep = int(np.searchsorted(steps, until, side="right"))
            return steps[:keep], {f: v[:keep] for f, v in values.items()}
        return steps, values
