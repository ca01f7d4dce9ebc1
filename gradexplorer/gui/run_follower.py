"""A run directory as a timeline source: the app follows a run that ``watch`` writes.

It polls the run's database on the GUI thread (a cheap query for steps after the last one
seen), turns each new step into the monitor's StepGradients and feeds the same
``TimelineModel`` the in-app session feeds, so every view works unchanged.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QObject, QTimer

from gradexplorer.core.recorder.run import Run
from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel

POLL_MS = 500
MAX_STEPS_PER_POLL = 512  # a long run already on disk loads in slices, the window stays live


class RunFollower(QObject):
    """``TimelineSource`` for a run directory; ``poll()`` takes in the steps committed so far."""

    def __init__(self, run: Run, timeline: TimelineModel, history: int = 256,
                 poll_ms: int = POLL_MS, parent=None) -> None:
        super().__init__(parent)
        self.run, self.timeline = run, timeline
        self.history = GradientHistory(history)
        self.last_step = -1
        timeline.reset(self.history)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.poll)
        self._timer.start(poll_ms)
        self._times: list[float] = []

    def poll(self) -> int:
        """Read the steps committed since the last poll, oldest first; how many were new."""
        steps = [s for s in self.run.steps if s > self.last_step][:MAX_STEPS_PER_POLL]
        if len(steps) > self.history.maxlen:  # older steps would fall out of the history anyway
            steps_for_history = steps[-self.history.maxlen :]
        else:
            steps_for_history = steps
        points, times = [], []
        for step in steps:
            info = self.run.step_info(step)
            times.append(info["time"])
            if step in steps_for_history:
                self.history.append(self.run.step_gradients(step))
            loss = info["loss"]
            points.append(StepPoint(step, math.nan if loss is None else float(loss),
                                    info["global_norm"], info["seconds"] or 0.0))
        if points:
            self.last_step = steps[-1]
            self._times = (self._times + times)[-64:]
            span = self._times[-1] - self._times[0]
            rate = (len(self._times) - 1) / span if span > 0 else 0.0  # as the run was written
            self.timeline.extend(points, rate)
        return len(points)

    def close(self) -> None:
        """Stop following and close the run."""
        self._timer.stop()
        self.run.close()
