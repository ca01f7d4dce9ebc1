"""A run directory as a timeline source: the app follows a run that ``watch`` writes.

It polls the run's database on the GUI thread (a cheap query for steps after the last one
seen), turns each new step into the monitor's StepGradients and feeds the same
``TimelineModel`` the in-app session feeds, so every view works unchanged. Only the newest
step of a poll is read whole; the older ones are read parameter by parameter as views ask
(gui/run_steps.py): a run of thousands of parameters opens in a second or two.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QObject, QTimer, Signal

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder.run import Run
from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.gui.models.step_ledger import run_point_extras
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel
from gradexplorer.gui.run_steps import lazy_step

POLL_MS = 500
MAX_STEPS_PER_POLL = 20_000  # a long run already on disk loads in slices; the window stays live


class RunFollower(QObject):
    """``TimelineSource`` for a run directory; ``poll()`` takes in the steps committed so far.

    ``finished(last_step)`` once the writer has closed the run (its ``finished`` meta entry).
    """

    finished = Signal(object)

    failed = Signal(str)  # one line: the run could not be read any more

    def __init__(self, run: Run, timeline: TimelineModel, history: int = 256,
                 poll_ms: int = POLL_MS, parent=None) -> None:
        super().__init__(parent)
        self.run, self.timeline = run, timeline
        self.history = GradientHistory(history)
        self.last_step = -1
        timeline.reset(self.history)
        timeline.optimizer.follow(run)  # the optimizer curves read the run's series
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.poll)
        self._timer.start(poll_ms)
        self._times: list[float] = []
        self.is_finished = False

    def poll(self) -> int:
        """Read the steps committed since the last poll, oldest first; how many were new.

        A step that cannot be read (the run damaged since it was opened) stops following with
        one line to ``failed``'s listeners (the window shows it in a dialog)."""
        try:
            rows = self.run.step_rows(self.last_step)[:MAX_STEPS_PER_POLL]
            kept = rows[-self.history.maxlen :]  # older ones would fall out
            # the newest read whole (a damaged one is the dialog), the older ones when asked for
            bins = self.run.settings.get("bins", 64) if kept else 64
            records = [lazy_step(self.run, row, bins) for row in kept[:-1]]
            records += [self.run.step_gradients(row["step"]) for row in kept[-1:]]
            extras = run_point_extras(self.run, rows, self.last_step)
        except UserError as exc:
            self._timer.stop()
            self.failed.emit(str(exc))
            return 0
        if not rows:
            if not self.is_finished and self.run.meta("finished") is not None:
                self.is_finished = True  # every step was read: the writer closed after them
                self.finished.emit(None if self.last_step < 0 else self.last_step)
            return 0
        for record in records:
            self.history.append(record)
        points = [StepPoint(r["step"], math.nan if r["loss"] is None else float(r["loss"]),
                            r["global_norm"], r["seconds"] or 0.0, time=float(r["time"]),
                            **extras[r["step"]])
                  for r in rows]
        self.last_step = rows[-1]["step"]
        self._times = (self._times + [r["time"] for r in rows])[-64:]
        span = self._times[-1] - self._times[0]
        rate = (len(self._times) - 1) / span if span > 0 else 0.0  # as the run was written
        self.timeline.extend(points, rate)
        return len(points)

    def close(self) -> None:
        """Stop following and close the run."""
        self._timer.stop()
        self.run.close()
