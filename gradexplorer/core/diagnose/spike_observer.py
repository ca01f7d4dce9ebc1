"""Spike detection on a TrainingSession: ``gradexplorer run`` and the app.

``SpikeObserver`` reads what a step already brought to the host: the loss, the global norm and,
when a GradientMonitor observes the session before it, every parameter's figures. The batch
behind a step is the workload's ``make_batch`` index (``step - 1``). A flagged step's event is
put in ``result.spike`` (the app's mailbox carries it) and emitted by ``spike``.
"""

from __future__ import annotations

import warnings

from psygnal import Signal

from gradexplorer.core.diagnose.spike_band import SpikeSettings
from gradexplorer.core.diagnose.spikes import SpikeDetector, SpikeEvent
from gradexplorer.core.messages.errors import emit_guarded, first_line


class SpikeObserver:
    """Session observer: add it after the GradientMonitor. ``spike(event, step)`` (psygnal):
    a step that belongs to an event."""

    spike = Signal(object, int)

    def __init__(self, settings: SpikeSettings | None = None, report=None) -> None:
        self.detector = SpikeDetector(settings)
        self.failed = False
        self._report = report or (lambda line: warnings.warn(line, RuntimeWarning, stacklevel=3))

    @classmethod
    def telling(cls, signal, settings: SpikeSettings | None = None) -> SpikeObserver:
        """An observer that tells each event, when it begins, through ``signal`` (a psygnal
        signal instance of ``HookRegistry.event``'s signature) as ``("spike", module,
        "spike at step N: …")``: the app's event log shows it."""
        observer = cls(settings)

        def tell(event: SpikeEvent, step: int) -> None:
            if event.step == step:
                module = event.modules[0]["name"] if event.modules else ""
                signal.emit("spike", module, f"spike at {event.summary()}")
        observer.spike.connect(tell)
        return observer

    def close(self) -> None:
        """Let the detector's kernel warm-up end (no thread left working after it)."""
        self.detector.close()

    @property
    def events(self) -> list[SpikeEvent]:
        return self.detector.events

    def after_step(self, session, result) -> None:
        """Score the step; a failure here is told once and ends spike detection, never the run."""
        if self.failed:
            return
        try:
            self._check(result)
        except Exception as exc:  # noqa: BLE001 - never break the training being observed
            self.failed = True
            self._report(f"gradexplorer: spike detection stopped at step {result.step}: "
                         f"{first_line(exc)}; training goes on")

    def _check(self, result) -> None:
        record = result.gradients
        event = self.detector.observe(result.step, result.loss, record, result.grad_norm)
        if event is None:
            return
        if event.step == result.step:
            event.batch = {"make_batch": result.step - 1}
        result.spike = event
        emit_guarded(self.spike, "a subscriber of the spike events", event, result.step)
