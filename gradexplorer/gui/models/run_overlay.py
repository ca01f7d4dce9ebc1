"""Many runs in one window (Qt-free): which runs are overlaid, their colours, which are shown,
the reference run, and the x axis (step, relative time or wall time) of every curve.

The first run is the window's own: the live session or the run directory it follows (a
``TimelineSource``); the others are run directories added to compare (``HistorySource``, read
whole from their databases through ``RunHistory``). Every series comes out on the chosen x
axis, so the views draw them on shared scales without knowing where a run comes from.
Events: ``changed()`` after any change of the set, a run's visibility, the reference or the x axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from psygnal import Signal

from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.share.colours import RUN_COLOURS
from gradexplorer.core.stats.curves import thin_steps
from gradexplorer.core.stats.history import HistogramMatrix
from gradexplorer.core.steps.ledger import headline_series

# distinct on light and dark backgrounds; the window's own run takes the first
PALETTE = RUN_COLOURS  # the report draws runs in the same colours
X_MODES = ("step", "relative time", "wall time")
X_LABELS = {"step": "step", "relative time": "seconds since the run's first step",
            "wall time": "wall clock"}
FIGURES = ("loss", "global_norm", "headline_norm")  # the run-wide curves (global_norm: as
# applied, as recorded; headline_norm: as accumulated ÷ scale where recorded, else as applied)


class RunSource(Protocol):
    """Where one overlaid run's figures come from."""

    def step_times(self) -> tuple[np.ndarray, np.ndarray]: ...  # (steps, wall times)
    def figure(self, figure: str) -> tuple[np.ndarray, np.ndarray]: ...  # FIGURES, ledger fields
    def clips_or_scales(self) -> bool: ...  # a step clipped or had a GradScaler
    def spike_events(self) -> list: ...  # SpikeEvent, oldest first
    def parameter(self, field: str, name: str) -> tuple[np.ndarray, np.ndarray]: ...
    def histograms(self, name: str, max_steps: int) -> HistogramMatrix: ...


class HistorySource:
    """A run directory read whole (the run-wide figures cached until it grows)."""

    def __init__(self, history: RunHistory) -> None:
        self.history = history
        self._cached: tuple[Any, tuple] | None = None
        self._reads: dict[tuple, Any] = {}  # (what, args) -> value, at the last step seen

    def _read(self, key: tuple, read):
        """``read()`` once per key until the run grows (views redraw often; a run added to
        compare is mostly finished)."""
        last = self.run.last_step
        if self._reads.get(("last",)) != last:
            self._reads = {("last",): last}
        if key not in self._reads:
            self._reads[key] = read()
        return self._reads[key]

    @property
    def run(self):
        return self.history.run

    def close(self) -> None:
        """Close the run's database (the run left the overlay)."""
        self.run.close()

    def _figures(self) -> tuple[np.ndarray, np.ndarray, dict]:
        last = self.run.last_step
        if self._cached is None or self._cached[0] != last:
            self._cached = (last, self.history.step_figures())
        return self._cached[1]

    def step_times(self) -> tuple[np.ndarray, np.ndarray]:
        steps, times, _ = self._figures()
        return steps, times

    def figure(self, figure: str) -> tuple[np.ndarray, np.ndarray]:
        steps, _, figures = self._figures()
        if figure == "headline_norm":
            return steps, headline_series(figures, len(steps))
        values = figures.get(figure, [None] * len(steps))
        return steps, np.array([math.nan if v is None else v for v in values], dtype=np.float64)

    def clips_or_scales(self) -> bool:
        """Whether a step had a GradScaler or its applied norm differs from the accumulated
        one (clipped), as ``TimelineModel.clips_or_scales`` says of the window's own run."""
        steps, _, figures = self._figures()
        applied = self.figure("global_norm")[1]
        return any(v is not None for v in figures.get("scale", ())) or not np.array_equal(
            headline_series(figures, len(steps)), applied, equal_nan=True)

    def spike_events(self) -> list:
        return self._read(("spikes",), self.run.spike_events)

    def parameter(self, field: str, name: str) -> tuple[np.ndarray, np.ndarray]:
        def read():
            steps, values = self.history.stat_series(field, [name])
            return steps, values[name]
        return self._read(("parameter", field, name), read)

    def histograms(self, name: str, max_steps: int) -> HistogramMatrix:
        return self._read(("histograms", name, max_steps), lambda: self.history.histogram_matrix(
            name, thin_steps(self.history.histogram_steps(), max_steps)))


class TimelineSource:
    """The window's own run: the timeline's curves; per-parameter figures and histograms from
    the whole run directory when the window follows one (``history``), else from the steps
    the session's gradient history holds."""

    def __init__(self, timeline, history: RunHistory | None = None) -> None:
        self.timeline, self.history = timeline, history
        self._whole = None if history is None else HistorySource(history)

    def step_times(self) -> tuple[np.ndarray, np.ndarray]:
        times = self.timeline.times
        return times.x.astype(np.int64), times.y.copy()

    def figure(self, figure: str) -> tuple[np.ndarray, np.ndarray]:
        """A curve of the timeline, or a StepLedger field over the steps its ledger holds."""
        t = self.timeline
        curve = {"loss": t.loss, "global_norm": t.applied, "headline_norm": t.norm}.get(figure)
        if curve is None:
            return t.ledger.figure(figure)
        return curve.x.astype(np.int64), curve.y.copy()

    def clips_or_scales(self) -> bool:
        return self.timeline.clips_or_scales

    def spike_events(self) -> list:
        return self.timeline.ledger.events()

    def parameter(self, field: str, name: str) -> tuple[np.ndarray, np.ndarray]:
        if self._whole is not None:
            return self._whole.parameter(field, name)
        return self.timeline.gradients.series(name, field)

    def histograms(self, name: str, max_steps: int) -> HistogramMatrix:
        if self._whole is not None:
            return self._whole.histograms(name, max_steps)
        return self.timeline.gradients.histogram_matrix(name)


@dataclass
class OverlayRun:
    """One run of the overlay: its name in the legend, its colour and whether it is shown."""

    name: str
    source: Any  # RunSource
    colour: str
    visible: bool = True
    path: Any = None  # the run directory (None: the live session)


def x_positions(steps: np.ndarray, step_times: tuple[np.ndarray, np.ndarray], mode: str) -> np.ndarray:
    """``steps`` on the x axis ``mode``: the step itself, seconds since the run's first step, or
    the wall clock (Unix seconds); a step whose time is not known is NaN."""
    steps = np.asarray(steps, dtype=np.float64)
    if mode == "step":
        return steps
    if mode not in X_MODES:
        raise ValueError(f"unknown x axis {mode!r}; one of {', '.join(X_MODES)}")
    known, times = np.asarray(step_times[0], dtype=np.float64), np.asarray(step_times[1], dtype=np.float64)
    good = np.isfinite(times)
    known, times = known[good], times[good]
    if not len(known):
        return np.full(len(steps), math.nan)
    index = np.clip(np.searchsorted(known, steps), 0, len(known) - 1)
    at = np.where(known[index] == steps, times[index], math.nan)
    return at - times[0] if mode == "relative time" else at


class RunOverlay:
    """The runs overlaid in the window; ``runs[0]`` is the window's own."""

    changed = Signal()

    def __init__(self, own: Any, name: str = "live session") -> None:
        self.runs: list[OverlayRun] = [OverlayRun(name, own, PALETTE[0])]
        self.reference = 0
        self.x_mode = "step"

    @property
    def overlaid(self) -> bool:
        """Whether runs besides the window's own are open."""
        return len(self.runs) > 1

    def set_own(self, source: Any, name: str, path: Any = None) -> None:
        """The window now shows ``source`` (a model's session, or a followed run)."""
        own = self.runs[0]
        own.source, own.name, own.path = source, name, path
        self.changed.emit()

    def add(self, source: Any, name: str, path: Any = None) -> OverlayRun:
        """Overlay another run, in the first colour no shown run has."""
        taken = {r.colour for r in self.runs}
        colour = next((c for c in PALETTE if c not in taken), PALETTE[len(self.runs) % len(PALETTE)])
        run = OverlayRun(name, source, colour, path=path)
        self.runs.append(run)
        self.changed.emit()
        return run

    def remove(self, index: int) -> OverlayRun:
        """Stop overlaying run ``index`` (the window's own run stays)."""
        if index == 0:
            raise ValueError("the window's own run cannot be removed from the overlay")
        run = self.runs.pop(index)
        if hasattr(run.source, "close"):
            run.source.close()
        if self.reference == index:
            self.reference = 0
        elif self.reference > index:
            self.reference -= 1
        self.changed.emit()
        return run

    def close(self) -> None:
        """Close every added run, without a ``changed`` event (the window closes)."""
        for run in self.runs[1:]:
            run.source.close()
        del self.runs[1:]
        self.reference = 0

    def set_visible(self, index: int, visible: bool) -> None:
        if self.runs[index].visible != visible:
            self.runs[index].visible = visible
            self.changed.emit()

    def set_reference(self, index: int) -> None:
        """The run drawn in full (all bands, on top, its heat map in the Gradients dock)."""
        if not 0 <= index < len(self.runs):
            raise IndexError(f"no run {index} in the overlay")
        if self.reference != index:
            self.reference = index
            self.changed.emit()

    def set_x_mode(self, mode: str) -> None:
        if mode not in X_MODES:
            raise ValueError(f"unknown x axis {mode!r}; one of {', '.join(X_MODES)}")
        if mode != self.x_mode:
            self.x_mode = mode
            self.changed.emit()

    def shown(self) -> list[OverlayRun]:
        """The visible runs, the reference last (drawn on top)."""
        ref = self.runs[self.reference]
        return [r for r in self.runs if r.visible and r is not ref] + ([ref] if ref.visible else [])

    def x_of(self, run: OverlayRun, steps: np.ndarray) -> np.ndarray:
        """``steps`` of ``run`` on the chosen x axis."""
        if self.x_mode == "step":
            return np.asarray(steps, dtype=np.float64)
        return x_positions(steps, run.source.step_times(), self.x_mode)

    def curve(self, run: OverlayRun, figure: str) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of a run-wide figure (``loss`` or ``global_norm``) of ``run``."""
        steps, values = run.source.figure(figure)
        return self.x_of(run, steps), values

    def parameter_curve(self, run: OverlayRun, field: str, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of one parameter's figure (a ParamStats field) over ``run``."""
        steps, values = run.source.parameter(field, name)
        return self.x_of(run, steps), values
