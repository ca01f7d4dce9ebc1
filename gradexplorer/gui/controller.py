"""The app's model: the live session, the worker thread that drives it, and the run state."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from gradexplorer.core.model.spec import ModelOptions
from gradexplorer.core.session.engine import SessionConfig
from gradexplorer.gui.live_session import LiveSession, open_live_session, reconfigure
from gradexplorer.gui.run_buffer import RunBuffer
from gradexplorer.gui.session_worker import SessionWorker
from gradexplorer.gui.snapshot_jobs import export_now, start_periodic_export, stop_periodic_export
from gradexplorer.gui.timeline import Timeline

IDLE, LOADING, RUNNING, PAUSED = "idle", "loading", "running", "paused"
REFRESH_MS = 50  # the GUI redraws at most 20 times a second


class SessionController(QObject):
    """Owns the session and the worker; widgets call its methods and observe its signals."""

    session_opened = Signal(object)  # LiveSession
    model_opened = Signal(object)  # LiveSession of a newly opened model (before session_opened)
    state_changed = Signal(str)
    updated = Signal(object)  # RunUpdate, at most every REFRESH_MS
    hooks_changed = Signal(dict)  # module path -> action spec
    job_finished = Signal(str, object)  # tag, result (graph traces, exports)
    error = Signal(str)  # one line for an error dialog
    message = Signal(str)  # a status-bar note
    event = Signal(str, str)  # kind (attached/detached/failed/note/snapshot/error), text

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.live: LiveSession | None = None
        self.state = IDLE
        self.timeline = Timeline()
        self.hooks: dict[str, str] = {}
        self._control = None
        self._jobs_pending = 0
        self.exporter = None  # a SnapshotExporter while "export every K steps" is on
        self._buffer = RunBuffer()
        self._worker = SessionWorker(self._buffer)
        self._worker.run_started.connect(self._on_run_started)
        self._worker.run_finished.connect(self._on_run_finished)
        self._worker.job_done.connect(self._on_job_done)
        self._worker.failed.connect(self._on_failed)
        self._worker.start()
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.flush)
        self._timer.start()

    # -- models ------------------------------------------------------------------------
    def open_model(self, spec: str, options: ModelOptions | None = None,
                   config: SessionConfig | None = None) -> None:
        """Load a model in the worker; ``session_opened`` or ``error`` follows."""
        self.stop()
        options = options or ModelOptions()
        config = config or (self.live.config if self.live else SessionConfig())
        self._set_state(LOADING)
        self.post("open", lambda: open_live_session(spec, options, config))

    def reconfigure(self, **changes: Any) -> None:
        """Switch device or optimizer (``device=``, ``optimizer=``, ``lr=``, ``momentum=``)."""
        live = self.live
        if live is None:
            return
        self.stop()
        exporter = self.exporter

        def switch() -> LiveSession:
            new = reconfigure(live, **changes)
            if exporter is not None:  # keep exporting from the new session
                live.session.remove_observer(exporter)
                new.session.add_observer(exporter)
            return new
        self.post("reconfigure", switch)

    def set_lr(self, lr: float) -> None:
        """Change the learning rate from the next step on."""
        if self.live is not None:
            session = self.live.session
            session.submit(lambda: session.set_lr(lr))
            session.config.lr = lr

    def set_histogram_every(self, every: int) -> None:
        """Record histograms every ``every`` steps."""
        monitor = self.live.monitor if self.live else None
        if monitor is not None:
            self.live.session.submit(lambda: setattr(monitor, "every", max(1, int(every))))

    # -- running -------------------------------------------------------------------------
    def run(self, steps: int | None = None) -> None:
        """Run ``steps`` steps (None: until stopped) in the worker."""
        if self.live is None or self.state in (RUNNING, PAUSED, LOADING):
            return
        self._control = self._worker.start_run(self.live.session, steps)
        self._set_state(RUNNING)

    def step(self) -> None:
        """Run exactly one step."""
        self.run(1)

    def toggle_pause(self) -> None:
        """Pause a running run, resume a paused one, or start running until stopped."""
        if self.state == RUNNING:
            self._control.pause()
            self._set_state(PAUSED)
        elif self.state == PAUSED:
            self._control.resume()
            self._set_state(RUNNING)
        else:
            self.run(None)

    def stop(self) -> None:
        """Stop the current run after its current step."""
        self._worker.stop_run()

    def post(self, tag: str, fn) -> None:
        """Run ``fn()`` on the training thread; ``job_finished(tag, result)`` follows."""
        self._jobs_pending += 1
        self._worker.post(tag, fn)

    @property
    def busy(self) -> bool:
        """Whether a run, a load or a posted job is still under way."""
        return self.state != IDLE or self._jobs_pending > 0

    # -- hooks -----------------------------------------------------------------------------
    def attach_hook(self, module: str, action: str) -> None:
        """Attach ``action`` to ``module`` between steps."""
        registry = self._registry()
        if registry is not None:
            self.post("hooks", lambda: self._hook_state(registry.attach(module, action)))

    def detach_hook(self, module: str) -> None:
        """Detach whatever hook ``module`` has, between steps."""
        registry = self._registry()
        if registry is not None:
            self.post("hooks", lambda: self._hook_state(registry.detach(module)))

    def hook_problem(self, module: str) -> str | None:
        """Why a full backward hook on ``module`` would be unsafe or useless, if it would."""
        hookable = self.live.hookable if self.live else {}
        safe, reason = hookable.get(module, (True, ""))
        return reason or None

    def _registry(self):
        if self.live is None or self.live.hooks is None:
            self.error.emit("hooks are not available in this build")
            return None
        return self.live.hooks

    def _hook_state(self, _result=None) -> dict[str, str]:
        return {path: hook.action for path, hook in self.live.hooks.attached().items()}

    # -- snapshots --------------------------------------------------------------------------
    def export_snapshot(self, directory: str) -> None:
        """Write a snapshot of the latest step; ``job_finished("snapshot", path)`` follows."""
        live = self.live
        if live is not None:
            self.post("snapshot", lambda: export_now(live, directory))

    def export_every(self, directory: str | None, every: int = 0) -> None:
        """Export every ``every`` steps into ``directory``; None stops exporting."""
        live, old = self.live, self.exporter
        if live is None:
            return
        push = self._buffer.push_event

        def change():
            if old is not None:
                stop_periodic_export(live, old)
            if directory is None:
                return None
            return start_periodic_export(live, directory, every,
                                         lambda step, path: push("snapshot", "", f"snapshot {path}"))
        self.post("exporter", change)

    # -- results ---------------------------------------------------------------------------
    def flush(self) -> None:
        """Take what the worker produced and announce it (the refresh timer calls this)."""
        update = self._buffer.drain()
        if update is None:
            return
        self.timeline.add(update)
        for kind, _module, text in update.events:
            self.message.emit(text)
            self.event.emit(kind, text)
            if kind in ("detached", "failed"):
                self.post("hooks", self._hook_state)
        self.updated.emit(update)

    def _on_run_started(self) -> None:
        if self.state not in (RUNNING, PAUSED):
            self._set_state(RUNNING)

    def _on_run_finished(self, _done: int) -> None:
        self.flush()
        self._set_state(IDLE)

    def _on_job_done(self, tag: str, result: object) -> None:
        self._jobs_pending -= 1
        if tag in ("open", "reconfigure"):
            self._install(result, fresh=tag == "open")
        elif tag == "hooks":
            self.hooks = dict(result)
            self.hooks_changed.emit(self.hooks)
        elif tag == "exporter":
            self.exporter = result
        elif tag == "snapshot":
            self.event.emit("snapshot", f"snapshot {result}")
        self.job_finished.emit(tag, result)

    def _on_failed(self, tag: str, text: str) -> None:
        if tag != "run":
            self._jobs_pending -= 1
        self.event.emit("error", text)
        if tag == "open":
            self._set_state(IDLE)
        self.error.emit(text)

    def _install(self, live: LiveSession, fresh: bool) -> None:
        self.live = live
        if fresh:
            self.timeline.clear()
            self.hooks = {}
            self.exporter = None
            if live.hooks is not None:
                live.hooks.listeners.append(self._buffer.push_event)
            self.model_opened.emit(live)
        self._set_state(IDLE)
        self.session_opened.emit(live)
        self.hooks_changed.emit(self.hooks)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)

    def close(self) -> None:
        """Stop the worker and wait for it (call before the app quits)."""
        self._timer.stop()
        self._worker.shutdown()
