"""The run's timeline: loss and gradient-norm curves plus its own gradient history.

The gradient-norm curve (``norm``) is the global norm as accumulated, divided by the
GradScaler's scale, where the step's ledger has it (``ledger.headline_norm``): under
``clip_grad_norm_`` the applied norm sits at ``max_norm`` whatever backward produced. The
applied norm (what the optimizer used, the run's ``global_norm``) is kept beside it
(``applied``); ``clips_or_scales`` says whether a step was clipped, had a GradScaler, or the
two differed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from psygnal import Signal

from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.core.steps.ledger import headline_norm
from gradexplorer.gui.models.optimizer_track import OptimizerTrack
from gradexplorer.gui.models.step_ledger import LedgerTrack


@dataclass(frozen=True)
class StepPoint:
    """The scalars of one step that the curves and the status bar show."""

    step: int
    loss: float
    grad_norm: float | None
    seconds: float
    ledger: Any = None  # the step's StepLedger (which gradient, clip, scale, skipped)
    optimizer: Any = None  # name -> ParamOptimState after the step, or None
    spikes: tuple = ()  # spike events this step belongs to or reports (SpikeEvent)
    update_ratios: Any = None  # name -> ‖Δθ‖/‖θ‖ of the step (inf where θ was 0), or None
    time: float = math.nan  # wall clock (Unix seconds) when the step was recorded
    gradients: Any = None  # the step's StepGradients (the monitor's record), or None
    noise: Any = None  # the step's NoiseStep (≥ 2 micro-batches: docs/noise.md), or None
    loss_known: bool = True  # False: no loss was recorded (``loss`` NaN for the curves), not a NaN loss


PINNED = 64  # spike steps whose records are kept beside the (thinned) live history


class Curve:
    """A growable float series with its step numbers, capped at ``limit`` points."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._x = np.empty(1024)
        self._y = np.empty(1024)
        self.size = 0

    def extend(self, xs: Sequence[float], ys: Sequence[float]) -> None:
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


class TimelineModel:
    """What the plots show of a run. Events: ``changed()`` after new steps or a reset.

    ``gradients`` is the timeline's own :class:`GradientHistory`, given by ``reset`` (empty, or
    a source's steps so far); ``extend`` appends the records its points carry, so a step's
    figures reach every view by one route, the mailbox, on the GUI thread.
    """

    changed = Signal()
    started = Signal()  # reset: a new model or run (before ``changed``)

    def __init__(self) -> None:
        self.loss = Curve()
        self.norm = Curve()  # as accumulated ÷ scale where known, else as applied
        self.applied = Curve()  # as applied: the step's global_norm
        self.clips_or_scales = False  # a step clipped or scaled (or the two norms differed)
        self.times = Curve()  # x: the step, y: its wall-clock time (the curves' time axes)
        self.gradients = GradientHistory(1)
        self.ledger = LedgerTrack()  # ledgers, optimizer state and spike events
        self.optimizer = OptimizerTrack()  # each parameter's optimizer figures over the steps
        self.latest: StepPoint | None = None
        self.steps_per_second = 0.0
        self.pinned: dict[int, Any] = {}  # spike steps' records, kept whatever the history drops
        self.step_reader: Any = None  # step -> StepGradients or None: a run's per-step reads

    def reset(self, gradients: GradientHistory) -> None:
        """Start over (a new model): empty curves, and ``gradients`` as the history kept."""
        self.loss, self.norm, self.applied, self.times = Curve(), Curve(), Curve(), Curve()
        self.clips_or_scales = False
        self.gradients = gradients
        self.ledger.clear()
        self.optimizer.clear()
        self.latest, self.steps_per_second = None, 0.0
        self.pinned, self.step_reader = {}, None
        self.started.emit()
        self.changed.emit()

    def extend(self, points: Sequence[StepPoint], steps_per_second: float) -> None:
        """Take in finished steps, oldest first (the source calls this on the GUI thread)."""
        if not points:
            return
        steps = [float(p.step) for p in points]
        self.loss.extend(steps, [p.loss for p in points])
        applied = [np.nan if p.grad_norm is None else p.grad_norm for p in points]
        headline = [headline_norm(p.ledger, p.grad_norm) for p in points]
        headline = [np.nan if v is None else v for v in headline]
        self.norm.extend(steps, headline)
        self.applied.extend(steps, applied)
        self.clips_or_scales = self.clips_or_scales or any(
            getattr(p.ledger, "clipped", None) or getattr(p.ledger, "scale", None) is not None
            for p in points) or not np.array_equal(headline, applied, equal_nan=True)
        self.times.extend(steps, [p.time for p in points])
        self.ledger.take(points)
        self.optimizer.take(points)
        for point in points:
            if point.gradients is not None:
                self.gradients.append(point.gradients)
                if any(e.step == point.step for e in point.spikes) and len(self.pinned) < PINNED:
                    self.pinned[point.step] = point.gradients
        self.latest, self.steps_per_second = points[-1], steps_per_second
        self.changed.emit()

    @property
    def latest_gradients(self) -> Any:
        """The newest StepGradients, or None."""
        return self.gradients.latest()

    @property
    def newest_step(self) -> int | None:
        """The newest step taken in, or None."""
        return None if self.latest is None else self.latest.step

    def gradients_at(self, step: int | None) -> Any:
        """The StepGradients every view shows at ``step`` (None: the newest): the record held
        (the history, a pinned spike step), else the run's own read of that step
        (``step_reader``), else the nearest held step before it (the live history keeps every
        stride-th step: its record says which step it is). None before any step."""
        if step is None or (self.latest is not None and step >= self.latest.step):
            return self.gradients.latest()
        held = {g.step: g for g in self.gradients}
        found = held.get(step) or self.pinned.get(step)
        if found is None and self.step_reader is not None:
            found = self.step_reader(step)
        if found is None:
            before = [s for s in (*held, *self.pinned) if s <= step]
            found = (held.get(max(before)) or self.pinned.get(max(before))) if before else None
        return found

    def histograms_of(self, param: str, step: int | None = None) -> tuple[Any, Any]:
        """``param``'s histogram at the newest histogram step at or before ``step`` (None: the
        newest) and at the histogram step before that. Either is None when that step recorded
        no histogram for ``param`` (no gradient)."""
        return tuple(None if pair is None else pair[1] for pair in self.histogram_records(param, step))

    def histogram_records(self, param: str, step: int | None = None) -> tuple[Any, Any]:
        """``histograms_of`` as ``(StepGradients, Histogram)`` pairs: each record says which
        step drew its histogram (with histograms every 5, step 33's is step 30's)."""
        recorded = self.histogram_steps_at(step)
        pairs = [None] * (2 - len(recorded)) + [(g, g.histograms.get(param)) for g in recorded]
        return tuple(None if pair is None or pair[1] is None else pair for pair in (pairs[1], pairs[0]))

    def histogram_steps_at(self, step: int | None = None, count: int = 2) -> list:
        """The last ``count`` records with histograms at or before the one shown at ``step``
        (None: the newest), oldest first: the last is the histogram step every histogram view
        shows."""
        at = self.gradients_at(step)
        if at is None:
            return []
        found = [at] if at.histograms else []
        held = sorted({g.step: g for g in (*self.gradients, *self.pinned.values())}.items())
        for s, g in reversed(held):
            if len(found) >= count:
                break
            if s < at.step and g.histograms:
                found.append(g)
        return found[::-1]


class TimelineSource(Protocol):
    """What feeds a :class:`TimelineModel`: the in-app session, or a followed run directory.

    A source calls, on the GUI thread, ``timeline.reset(history)`` when a run begins (a
    ``GradientHistory`` the timeline keeps: empty, or the steps read so far) and
    ``timeline.extend(points, rate)`` as steps finish, each point carrying its step's record.
    ``close()`` ends the feed (the window closes or another source takes over).
    The in-app source is ``SessionController``.
    """

    timeline: TimelineModel

    def close(self) -> None: ...
