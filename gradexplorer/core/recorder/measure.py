"""The app's GradientMonitor driven by a watched loop's step boundaries (no TrainingSession)."""

from __future__ import annotations

from gradexplorer.core.errors import measured
from gradexplorer.core.stats.monitor import GradientMonitor
from gradexplorer.core.stats.records import StepGradients


class _Result:
    """The little of a StepResult the monitor fills in."""

    def __init__(self, step: int) -> None:
        self.step, self.grad_norm, self.gradients, self.ledger = step, None, None, None


class MonitorMeasure:
    """The app's GradientMonitor driven by step boundaries instead of a TrainingSession."""

    def __init__(self, monitor: GradientMonitor, session) -> None:
        self.monitor, self.session = monitor, session
        self.warned: set = set()  # one warning per cause (errors.measured)

    def begin(self, optimizer, step: int) -> None:
        measured("a step", lambda: self.monitor.after_backward(self.session, step - 1),
                 self.warned)

    def end(self, optimizer) -> StepGradients | None:
        result = _Result(self.session.step_count)
        measured("a step", lambda: self.monitor.after_step(self.session, result), self.warned)
        return result.gradients

    def latest(self) -> StepGradients | None:
        return self.monitor.latest()
