"""The figures of the overlay's reference run, for the views that show one run (Qt-free).

The Ledger, the Optimizer tab and the Distributions tiles show one run's figures. With runs
overlaid (``RunOverlay``) that is the reference run: the window's own (the timeline) until
another is made the reference, then that run directory, read whole (``RunFigures``). A
``ReferenceFigures`` reads as a ``TimelineModel`` does for these views (``ledger``,
``optimizer``, ``latest``, ``latest_gradients``, ``gradients``) and says whose figures they
are (``run_name``: the reference's name while runs are overlaid, else None).
Events: ``changed()`` when the reference run changes, grows, or (the window's own) takes steps.
"""

from __future__ import annotations

import math

from psygnal import Signal

from gradexplorer.core.messages.errors import UserError
from gradexplorer.gui.models.optimizer_track import OptimizerTrack
from gradexplorer.gui.models.run_overlay import HistorySource, RunOverlay
from gradexplorer.gui.models.step_ledger import LedgerTrack, followed_steps
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel


class RunFigures:
    """What the one-run views show of a run directory added to the overlay, as read at its
    step ``last_step``: every step's ledger and its spike events (``ledger``), each
    parameter's optimizer series (``optimizer``, read when asked), the newest step whole
    (``latest_gradients``) and the newest histograms (``gradients``: the records holding them)."""

    def __init__(self, run=None) -> None:
        """``run``: a Run (None: nothing, as for a run that could not be read)."""
        self.run, self.last_step = run, None if run is None else run.last_step
        rows = [] if run is None else run.step_rows()
        self.ledger = LedgerTrack()
        self.ledger.take(followed_steps(run, rows, -1).values())
        self.optimizer = OptimizerTrack()
        if run is not None:
            self.optimizer.follow(run)
        newest = rows[-1] if rows else None
        self.latest = None if newest is None else StepPoint(
            newest["step"], math.nan if newest["loss"] is None else float(newest["loss"]),
            newest["global_norm"], newest["seconds"] or 0.0, ledger=self.ledger.latest,
            time=float(newest["time"]), loss_known=newest["loss"] is not None)
        self.latest_gradients = None if newest is None else run.step_gradients(newest["step"])
        self.gradients = [] if self.latest_gradients is None else [self.latest_gradients]
        self._histogram_steps: list[int] = []
        if self.latest_gradients is not None:
            from gradexplorer.core.runs.history import RunHistory

            self._histogram_steps = RunHistory(run).histogram_steps()
            held = self._histogram_steps  # histograms on a cadence: the newest kept
            if not self.latest_gradients.histograms and held:
                self.gradients.insert(0, run.step_gradients(held[-1]))

    @property
    def newest_step(self) -> int | None:
        """The run's newest step read, or None."""
        return None if self.latest is None else self.latest.step

    def gradients_at(self, step: int | None):
        """As ``TimelineModel.gradients_at``: the run's own read of ``step`` (the newest step
        at or before it that the run holds; None: the newest)."""
        if self.run is None or self.latest is None:
            return None
        if step is None or step >= self.latest.step:
            return self.latest_gradients
        held = [s for s in self.run.steps if s <= step]
        return self.run.step_gradients(held[-1]) if held else None

    def histogram_steps_at(self, step: int | None = None, count: int = 2) -> list:
        """As ``TimelineModel.histogram_steps_at``: the last ``count`` steps' records with
        histograms at or before the step shown at ``step``, oldest first."""
        at = self.gradients_at(step)
        if at is None:
            return []
        before = [s for s in self._histogram_steps if s <= at.step][-count:]
        return [at if s == at.step else self.run.step_gradients(s) for s in before]


class ReferenceFigures:
    """The reference run's figures (see the module's text); follows ``overlay`` and ``timeline``."""

    changed = Signal()

    def __init__(self, timeline: TimelineModel, overlay: RunOverlay) -> None:
        self.timeline, self.overlay = timeline, overlay
        self._run = None  # the OverlayRun whose RunFigures are held (None: the timeline's)
        self._figures: RunFigures | None = None
        timeline.changed.connect(self._timeline_changed)
        overlay.changed.connect(self._overlay_changed)

    @property
    def shown(self):
        """The TimelineModel or RunFigures whose figures are shown."""
        return self.timeline if self._figures is None else self._figures

    @property
    def run_name(self) -> str | None:
        """The reference run's name while runs are overlaid (the views say it), else None."""
        overlay = self.overlay
        return overlay.runs[overlay.reference].name if overlay.overlaid else None

    ledger = property(lambda self: self.shown.ledger)
    optimizer = property(lambda self: self.shown.optimizer)
    latest = property(lambda self: self.shown.latest)
    latest_gradients = property(lambda self: self.shown.latest_gradients)
    gradients = property(lambda self: self.shown.gradients)
    newest_step = property(lambda self: self.shown.newest_step)

    def gradients_at(self, step: int | None):
        """The shown run's record at ``step`` (None: the newest)."""
        return self.shown.gradients_at(step)

    def histogram_steps_at(self, step: int | None = None, count: int = 2) -> list:
        """The shown run's last ``count`` histogram records at or before ``step``."""
        return self.shown.histogram_steps_at(step, count)

    def _timeline_changed(self) -> None:
        if self._figures is None:
            self.changed.emit()

    def _overlay_changed(self) -> None:
        """The reference may be another run now, or have grown (read again then); its name or
        the runs beside it may have changed: the views redraw."""
        overlay = self.overlay
        run = overlay.runs[overlay.reference]
        if not isinstance(run.source, HistorySource):
            self._run, self._figures = None, None
        else:
            try:
                if run is not self._run or self._figures.last_step != run.source.run.last_step:
                    self._run, self._figures = run, RunFigures(run.source.run)
            except UserError:  # damaged since it was added: its views show nothing, never
                self._run, self._figures = run, RunFigures()  # another run's figures
        self.changed.emit()
