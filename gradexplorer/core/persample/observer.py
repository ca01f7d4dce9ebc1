"""Per-sample gradient norms on a TrainingSession (the app and ``run --per-sample-norms``): a
session observer taking each step's figures once its backward is over."""

from __future__ import annotations

from collections.abc import Callable

from gradexplorer.core.persample.record import PerSampleStep
from gradexplorer.core.persample.tracker import PerSampleNorms


class PerSampleObserver:
    """``latest``: the last step's PerSampleStep (None before, or when no supported module ran
    a backward); ``report(step, figures)`` is called after each step that has figures."""

    def __init__(self, model, reduction: str = "mean",
                 report: Callable[[int, PerSampleStep], None] | None = None) -> None:
        self.tracker = PerSampleNorms(model, reduction)
        self.report = report
        self.latest: PerSampleStep | None = None
        self.batch: tuple[int, object] | None = None  # (step, its batch identity)
        self.last: tuple[int, PerSampleStep] | None = None  # (step, figures): one assignment,
        # read by the app's view from another thread

    @property
    def unsupported(self) -> dict[str, str]:
        return self.tracker.unsupported

    def after_backward(self, session, step: int) -> None:
        self.latest = self.tracker.take()

    def after_step(self, session, result) -> None:
        self.batch = (result.step, result.batch)  # the step's batch identity, before ``last``
        if self.latest is not None:
            self.last = (result.step, self.latest)
        if self.report is not None and self.latest is not None:
            self.report(result.step, self.latest)

    def remove(self) -> None:
        self.tracker.remove()
