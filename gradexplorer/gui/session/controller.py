"""The bridge between the views and the training thread: commands go in, results come back.

Every command becomes a job on the worker (the one channel into the training thread); the
GUI thread never changes a core object itself. What comes back (queued Qt signals) is applied
to the Qt-free models (``session``: :class:`SessionModel`, ``timeline``:
:class:`TimelineModel`), whose events the widgets observe. Torch and the modules that import
it (``live_session``, ``snapshot_jobs``) are imported inside the jobs, by the training thread.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from gradexplorer.core.graph.deep_stack import DEEP_STACK_BYTES
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.options import ModelOptions
from gradexplorer.core.session.config import SessionConfig, check_accumulate
from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.gui.models.session import (
    IDLE,
    LOADING,
    PAUSED,
    RUNNING,
    ExportChanged,
    HookableProbed,
    HooksChanged,
    ModelBuilt,
    SessionModel,
    SessionOpened,
    SettingApplied,
    SnapshotWritten,
)
from gradexplorer.gui.models.timeline import TimelineModel
from gradexplorer.gui.session.session_worker import SessionWorker

if TYPE_CHECKING:
    from gradexplorer.gui.training.live_session import LiveSession

__all__ = ["IDLE", "LOADING", "PAUSED", "RUNNING", "SessionController"]

FIRST_VIEW_WAIT_S = 3.0  # the longest the set-up of an opening model waits for its first view


class SessionController(QObject):
    """Owns the worker; widgets call its methods and observe ``session`` (the live session,
    state, hooks, exporter and their events: ``session.state_changed``, ``session.opened``, …)
    and ``timeline``.
    """

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.session = SessionModel()
        self.timeline = TimelineModel()
        self._control = None
        self.run_span: tuple[int, int] | None = None  # (first step, N) of the Run N under way
        self._jobs_pending = 0
        self._opening = 0  # counts open_model calls: a model built for an older one is dropped
        self._view_shown = threading.Event()  # set by first_view_shown (see open_model)
        self._closing = threading.Event()  # set by close: a model still opening is not set up
        self._worker = SessionWorker()
        self._worker.run_started.connect(self._on_run_started)
        self._worker.run_finished.connect(self._on_run_finished)
        self._worker.steps_ready.connect(self.flush)
        self._worker.job_done.connect(self._on_job_done)
        self._worker.job_failed.connect(self._on_job_failed)
        self._worker.run_failed.connect(self._on_failed)
        self._worker.setStackSize(DEEP_STACK_BYTES)  # deep autograd graphs recurse natively
        self._worker.start()
        if not self._worker.isRunning():  # "QThread::start: Thread creation error"
            self._worker.setStackSize(0)  # the default stack: room for all but the deepest graphs
            self._worker.start()
        if not self._worker.isRunning():  # one line, never a window waiting on no thread
            raise UserError("cannot start the app's worker thread (a process or address-space "
                            "limit? see ulimit -u and ulimit -v)")

    @property
    def closing(self) -> bool:
        """``close`` has been called."""
        return self._closing.is_set()

    @property
    def opening(self) -> int:
        """How many models were asked for so far."""
        return self._opening

    # -- models ------------------------------------------------------------------------
    def open_model(self, spec: str, options: ModelOptions | None = None,
                   config: SessionConfig | None = None,
                   first_view: Callable[[Any], Any] | None = None) -> None:
        """Load a model in the worker; ``session_opened`` or ``error`` follows.

        ``first_view(session)``, given while no model is open, runs on the training thread as
        soon as the model is built, before its training is set up (the first optimizer, the
        statistics warm-up: a second at a first open); its typed
        result reaches ``job_finished`` first, then the set-up runs as a job of its own, once
        the view is shown (``first_view_shown``; at most ``FIRST_VIEW_WAIT_S`` later), so the
        two never compete for the interpreter.
        """
        self.stop()
        options = options or ModelOptions()
        config = config or (self.session.live.config if self.session.live else SessionConfig())
        self.session.set_state(LOADING)
        self._opening += 1
        opening = self._opening

        def open_(session=None) -> SessionOpened | None:
            from gradexplorer.gui.training.live_session import open_live_session

            if self._closing.is_set():  # the window closed while the model opened: nobody
                return None  # would train it (the set-up costs seconds at a first open)
            live = open_live_session(spec, options, config, holder=self, session=session)
            to_mailbox(live.stack.events, self._worker.buffer)  # the stack's bus, subscribed once
            return SessionOpened(live, fresh=True)

        def build() -> ModelBuilt | None:
            from gradexplorer.gui.training.live_session import build_session

            session = build_session(spec, options, config, holder=self)
            if self._closing.is_set():  # closed while it was built: no first view to trace
                return None

            def finish() -> SessionOpened:
                shown.wait(FIRST_VIEW_WAIT_S)
                return open_(session)
            return ModelBuilt(first_view(session), finish, opening)
        shown = self._view_shown = threading.Event()
        self.post(open_ if first_view is None or self.session.live is not None else build)

    def reconfigure(self, **changes: Any) -> None:
        """Switch device or optimizer (``device=``, ``optimizer=``, ``lr=``, ``momentum=``)."""
        live = self.session.live
        if live is None:
            return
        self.stop()

        def switch() -> SessionOpened:
            from gradexplorer.gui.training.live_session import reconfigure

            return SessionOpened(reconfigure(live, **changes), fresh=False)  # exports carry on
        self.post(switch)

    def set_lr(self, lr: float) -> None:
        """Change the learning rate from the next step on."""
        live = self.session.live
        if live is not None:
            def apply() -> SettingApplied:
                live.session.set_lr(lr)
                live.session.config.lr = lr
                return SettingApplied("lr", lr)
            self.post(apply)

    def set_histogram_every(self, every: int) -> None:
        """Record histograms every ``every`` steps."""
        monitor = self.session.live.monitor if self.session.live else None
        if monitor is not None:
            every = max(1, int(every))

            def apply() -> SettingApplied:
                monitor.histogram_every = every
                return SettingApplied("histogram_every", every)
            self.post(apply)

    def set_accumulate(self, k: int) -> None:
        """Micro-batches a step (``SessionConfig.accumulate``) from the next step on: ≥ 2 gives
        the noise scale and each parameter's SNR (docs/noise.md)."""
        live = self.session.live
        if live is not None:
            def apply() -> SettingApplied:
                live.session.config.accumulate = check_accumulate(int(k))
                return SettingApplied("accumulate", k)
            self.post(apply)

    # -- running -------------------------------------------------------------------------
    def run(self, steps: int | None = None) -> None:
        """Run ``steps`` steps (None: until stopped) in the worker."""
        if self.session.live is None or self.session.state in (RUNNING, PAUSED, LOADING):
            return
        start = self.session.live.session.step_count  # idle: the worker is not stepping now
        self.run_span = (start, steps) if steps and steps > 1 else None
        self._control = self._worker.start_run(self.session.live.session, steps)
        self.session.set_state(RUNNING)

    def step(self) -> None:
        """Run exactly one step."""
        self.run(1)

    def toggle_pause(self) -> None:
        """Pause a running run, resume a paused one, or start running until stopped."""
        if self.session.state == RUNNING:
            self._control.pause()
            self.session.set_state(PAUSED)
        elif self.session.state == PAUSED:
            self._control.resume()
            self.session.set_state(RUNNING)
        else:
            self.run(None)

    def stop(self) -> None:
        """Stop the current run after its current step."""
        self._worker.stop_run()

    def post(self, job) -> None:
        """Run ``job()`` on the training thread; ``job_finished(result)`` follows."""
        self._jobs_pending += 1
        self._worker.post(job)

    def between_steps(self, control) -> Callable[[], bool]:
        """For a job's own step loop (an A/B run's ``run_steps``): the jobs posted while it
        steps run between its steps (``SessionWorker.between_steps``)."""
        return self._worker.between_steps(control)

    @property
    def busy(self) -> bool:
        """Whether a run, a load or a posted job is still under way."""
        return self.session.state != IDLE or self._jobs_pending > 0

    # -- hooks -----------------------------------------------------------------------------
    def attach_hook(self, module: str, action: str) -> None:
        """Attach ``action`` to ``module`` between steps."""
        live = self.session.live
        if live is not None:
            self.post(lambda: (live.hooks.attach(module, action), _hook_state(live))[1])

    def detach_hook(self, module: str) -> None:
        """Detach whatever hook ``module`` has, between steps."""
        live = self.session.live
        if live is not None:
            self.post(lambda: (live.hooks.detach(module), _hook_state(live))[1])

    def hook_problem(self, module: str) -> str | None:
        """Why a full backward hook on ``module`` would be unsafe or useless, if it would."""
        hookable = (self.session.live.hookable if self.session.live else None) or {}
        safe, reason = hookable.get(module, (True, ""))
        return reason or None

    def probe_hooks(self) -> None:
        """Find which modules take a hook safely, on the worker, after the jobs already posted."""
        live = self.session.live
        if live is not None and live.hookable is None:
            def probe() -> HookableProbed:
                from gradexplorer.gui.training.live_session import probe_hookable

                live.hookable = probe_hookable(live)  # one assignment: safe to read meanwhile
                return HookableProbed(live.hookable)
            self.post(probe)

    # -- snapshots --------------------------------------------------------------------------
    def export_snapshot(self, directory: str) -> None:
        """Write a snapshot of the latest step; ``job_finished(SnapshotWritten)`` follows."""
        live = self.session.live
        if live is not None:
            def write() -> SnapshotWritten:
                from gradexplorer.gui.training.snapshot_jobs import export_now

                return SnapshotWritten(export_now(live, directory))
            self.post(write)

    def export_every(self, directory: str | None, every: int = 0) -> None:
        """Export every ``every`` steps into ``directory``; None stops exporting."""
        live, old = self.session.live, self.session.exporter
        if live is None:
            return

        def change() -> ExportChanged:
            from gradexplorer.gui.training.snapshot_jobs import start_periodic_export, stop_periodic_export

            if old is not None:
                stop_periodic_export(live, old)
            if directory is None:
                return ExportChanged(None)
            return ExportChanged(start_periodic_export(live, directory, every))  # told on the bus
        self.post(change)

    # -- results ---------------------------------------------------------------------------
    def flush(self) -> None:
        """Take what the worker produced and apply it to the models (``steps_ready`` calls this)."""
        update = self._worker.buffer.drain()
        if update is None:
            return
        for kind, _module, text in update.events:
            self.session.message.emit(text)
            self.session.event.emit(kind, text)
        if update.hooks is not None:  # published with the event of a hook that took itself off
            self.session.set_hooks(update.hooks)
        if update.observed:
            self.session.set_observed(update.observed)
        self.timeline.extend(update.points, update.steps_per_second)
        for series, kind, payload in update.ab:  # A/B windows' data: the same mailbox
            series.apply(kind, payload)

    def push_ab(self, series, kind: str, payload=None) -> None:
        """An A/B run's message into the mailbox (any thread; ``flush`` applies it)."""
        self._worker.buffer.push_ab(series, kind, payload)

    def _on_run_started(self) -> None:
        if self.session.state not in (RUNNING, PAUSED):
            self.session.set_state(RUNNING)

    def _on_run_finished(self, _done: int) -> None:
        self.flush()
        self.session.set_state(IDLE)

    def _on_job_done(self, result: object) -> None:
        self._jobs_pending -= 1
        session = self.session
        if isinstance(result, ModelBuilt):
            if result.opening != self._opening:  # another model was asked for meanwhile
                return
            self.post(result.finish)  # the set-up: session_opened follows
            result = result.view
            if result is None:
                self.first_view_shown()
                return
        if isinstance(result, SessionOpened):
            if result.fresh:
                self.timeline.reset(GradientHistory(  # the whole run, thinned: docs/gui.md
                    result.live.monitor.history.maxlen, whole_run=True))
            session.open(result.live, result.fresh)
        elif isinstance(result, HooksChanged):
            session.set_hooks(result.hooks)
        elif isinstance(result, ExportChanged):
            session.exporter = result.exporter
        elif isinstance(result, SnapshotWritten):
            session.event.emit("snapshot", f"snapshot {result.path}")
        session.job_finished.emit(result)

    def _on_job_failed(self, text: str) -> None:
        self._jobs_pending -= 1
        if self.session.state == LOADING:  # an open or a re-make failed: the old session stays
            self.session.set_state(IDLE)
        self._on_failed(text)

    def _on_failed(self, text: str) -> None:
        self.session.event.emit("error", text)
        self.session.error.emit(text)

    def first_view_shown(self) -> None:
        """The first view of the model being opened is on screen: set its training up."""
        self._view_shown.set()

    def close(self, wait: bool = True) -> None:
        """Stop the worker and wait for it (call before the app quits); torch's threads back.
        A model still opening is not set up for training (only the job under way finishes).
        ``wait=False``: told to stop, not waited for (the process ends now: ``app.launch``)."""
        self._closing.set()
        self._view_shown.set()
        ended = self._worker.shutdown(timeout_ms=10_000 if wait else 0)
        if ended and "gradexplorer.gui.training.live_session" in sys.modules:
            from gradexplorer.gui.training.live_session import give_cores_back  # no torch import to quit

            give_cores_back(self)


def to_mailbox(events, buffer) -> None:
    """The app's subscription to its stack's bus (``core/stack/events.py``, emitted on the
    training thread): each event-log line (hook events, NaN origin, spikes, snapshots,
    failures) and the hook table published after a hook took itself off into the mailbox
    (``RunBuffer``), so the views learn of them as of a step: no job."""
    events.told.connect(buffer.push_event)
    events.hooks.connect(buffer.push_hooks)


def hook_table(live: LiveSession) -> dict[str, str]:
    """The hooks attached now, module -> action (on the training thread)."""
    return {path: hook.action for path, hook in live.hooks.attached().items()}


def _hook_state(live: LiveSession) -> HooksChanged:
    """The hooks attached now (on the training thread), as a job's result."""
    return HooksChanged(hook_table(live))
