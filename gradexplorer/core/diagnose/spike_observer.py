"""Spike detection as a stack reporter: the app, ``gradexplorer run`` and ``watch``.

``SpikeObserver`` is the one path from a step to a spike event. It reads what a step already
brought to the host: the loss, the global norm and, when the stack's GradientMonitor measured
the step before it, every parameter's figures. The batch behind an event is the step's own
batch identity, ``result.batch``: the workload's ``make_batch`` index (``{"make_batch": N}``)
on a TrainingSession, the ids the loop noted with ``rec.note_batch`` under ``watch``. A flagged
step's event is put in ``result.spike`` (the app's mailbox carries it), handed to ``sink``
(``watch``'s ``SpikeLog``: the per-sample losses, the event's snapshot, the run's table) and
emitted by ``spike``.
"""

from __future__ import annotations

from collections.abc import Callable

from psygnal import Signal

from gradexplorer.core.diagnose.spike_band import SpikeSettings
from gradexplorer.core.diagnose.spikes import SpikeDetector, SpikeEvent
from gradexplorer.core.messages.errors import UserError, emit_guarded, first_line
from gradexplorer.core.messages.failures import tell_failure


class SpikeObserver:
    """Session observer: a reporter of the stack, after the GradientMonitor. ``spike(event,
    step)`` (psygnal): a step that belongs to an event. ``report(line)``: where a failure of
    detection is told (default: one MonitorWarning); ``sink(event, result)``: what keeps an
    event besides this observer (called on every step that belongs to one)."""

    spike = Signal(object, int)

    def __init__(self, settings: SpikeSettings | None = None, report=None,
                 sink: Callable[[SpikeEvent, object], None] | None = None) -> None:
        if settings is not None and not isinstance(settings, SpikeSettings):
            raise UserError(f"spikes must be True, False or a SpikeSettings, "
                            f"got {type(settings).__name__}")
        self.detector = SpikeDetector(settings)
        self.failed = False
        self._report = report or tell_failure
        self._sink = sink

    @classmethod
    def telling(cls, signal, settings: SpikeSettings | None = None) -> SpikeObserver:
        """An observer that tells each event, when it begins, through ``signal`` (a psygnal
        signal instance of ``HookRegistry.event``'s signature) as ``("spike", module,
        "spike at step N: …")``: the app's event log shows it."""
        observer = cls(settings)
        observer.spike.connect(lambda event, step: tell_spike(signal.emit, event, step))
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
        event = self.detector.observe(result.step, result.loss, result.gradients, result.grad_norm)
        if event is None:
            return
        if event.step == result.step:  # the event begins here: its batch is this step's
            event.batch = result.batch
        if self._sink is not None:
            self._sink(event, result)
        result.spike = event
        emit_guarded(self.spike, "a subscriber of the spike events", event, result.step)


def tell_spike(tell, event: SpikeEvent, step: int) -> None:
    """``tell("spike", module, "spike at step N: …")`` when ``event`` begins at ``step`` (the
    event log's line: ``StackEvents.told``)."""
    if event.step == step:
        module = event.modules[0]["name"] if event.modules else ""
        tell("spike", module, f"spike at {event.summary()}")
