"""The one thread that touches the model: runs steps and queued jobs, one at a time.

``post`` is the one command channel into the training thread: a job is a function whose
return value is a typed result (``gui.models.session``) that comes back through ``job_done``.
"""

from __future__ import annotations

import atexit
import queue
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QThread, Signal

from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.session.config import RunControl
from gradexplorer.gui.training.run_buffer import RunBuffer

if TYPE_CHECKING:
    from gradexplorer.core.session.engine import TrainingSession

_QUIT = object()

# Every started worker, until its thread has ended: a QThread whose Python object is freed
# while its thread still runs aborts the process ("QThread: Destroyed while thread is still
# running"). That happens when the last reference goes away at the wrong moment: a window
# closed while a long step or job outlives ``shutdown``'s wait, a garbage collection between
# ``run()`` returning and the thread ending, or the interpreter's exit. This set is the one
# owner that lets go only on the GUI thread, after the thread has ended.
_STARTED: set[SessionWorker] = set()


@dataclass
class _Run:
    session: TrainingSession
    steps: int | None
    control: RunControl


def describe_failure(exc: BaseException) -> str:
    """One line for a dialog: the UserError text, else the exception type and first line."""
    return str(exc) if isinstance(exc, UserError) else first_line(exc)


class SessionWorker(QThread):
    """Executes training runs and jobs (graph tracing, hook changes, exports) in order.

    Jobs posted while a run is going are executed between its steps, so they never
    overlap a forward or backward pass. Results reach the GUI as queued signals: a job's
    typed result through ``job_done``, steps and hook events through ``buffer`` (a mailbox
    that wakes the GUI thread with ``steps_ready`` when it stops being empty).
    """

    run_started = Signal()
    run_finished = Signal(int)  # steps done
    steps_ready = Signal()  # the mailbox has something: drain it
    job_done = Signal(object)  # the job's typed result
    job_failed = Signal(str)  # one-line message
    run_failed = Signal(str)  # one-line message

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.buffer = RunBuffer(self.steps_ready.emit)
        self._queue: queue.Queue = queue.Queue()
        self._control: RunControl | None = None
        self._deferred: list[_Run] = []  # runs posted during a step loop: queued after it
        self.finished.connect(self._release)  # queued: runs on the GUI thread

    def start(self, *args) -> None:  # noqa: D102 - QThread.start, kept alive until it ends
        _STARTED.add(self)
        super().start(*args)

    def _release(self) -> None:
        self.wait()  # ``finished`` is emitted just before the thread function returns
        _STARTED.discard(self)

    # -- called from the GUI thread ------------------------------------------------
    def post(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` on this thread (between steps); its result comes back through ``job_done``."""
        self._queue.put(fn)

    def start_run(self, session: TrainingSession, steps: int | None) -> RunControl:
        """Queue a run of ``steps`` steps (None: until stopped); returns its control."""
        control = RunControl()
        self._control = control
        self._queue.put(_Run(session, steps, control))
        return control

    def stop_run(self) -> None:
        """Ask the current run to stop after its current step."""
        if self._control is not None:
            self._control.stop()

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Stop any run, finish the jobs already posted, and wait for the thread; False if it
        did not end in time (it ends after them, and stays referenced until then)."""
        self.stop_run()
        self._queue.put(_QUIT)
        return self.wait(timeout_ms) if self.isRunning() else True

    # -- the thread -------------------------------------------------------------------
    def run(self) -> None:  # noqa: D102 - QThread entry point
        while True:
            item = self._queue.get()
            if item is _QUIT:
                return
            if isinstance(item, _Run):
                self._run_steps(item)
            else:
                self._execute(item)
            for deferred in self._deferred:  # the loop is over: the runs posted meanwhile
                self._queue.put(deferred)
            self._deferred.clear()

    def _execute(self, job: Callable[[], Any]) -> None:
        try:
            result = job()
        except Exception as exc:  # noqa: BLE001 - reported to the user, thread keeps going
            self._report(self.job_failed, exc)
        else:
            self.job_done.emit(result)

    def between_steps(self, control: RunControl) -> Callable[[], bool]:
        """The ``between`` of a step loop on this thread (``run_steps``: the app's runs and a
        job's own loop, an A/B run's): it executes the jobs posted since the last step (waiting
        a little while ``control`` is paused) and says True when the worker is asked to quit.
        A run posted meanwhile starts after the loop."""
        return lambda: self._jobs_between_steps(block=control.paused)

    def _run_steps(self, run: _Run) -> None:
        self.run_started.emit()
        done = 0
        try:  # the core's step loop, this thread's jobs between its steps
            for result in run.session.run(run.steps, run.control, self.between_steps(run.control)):
                self.buffer.push(result)
                done += 1
        except Exception as exc:  # noqa: BLE001
            self._report(self.run_failed, exc)
        finally:
            self.run_finished.emit(done)

    def _jobs_between_steps(self, block: bool) -> bool:
        """Execute queued jobs; True when asked to quit. Waits a little when ``block``."""
        while True:
            try:
                item = self._queue.get(timeout=0.05) if block else self._queue.get_nowait()
            except queue.Empty:
                return False
            block = False
            if item is _QUIT:
                self._queue.put(_QUIT)
                return True
            if isinstance(item, _Run):
                self._deferred.append(item)
            else:
                self._execute(item)

    @staticmethod
    def _report(signal, exc: BaseException) -> None:
        if not isinstance(exc, UserError):
            traceback.print_exception(exc, file=sys.stderr)
        signal.emit(describe_failure(exc))


@atexit.register
def _end_started_workers() -> None:
    """At the interpreter's exit, end every worker still running (a window never closed)
    before Python frees its object."""
    for worker in list(_STARTED):
        worker.stop_run()
        worker._queue.put(_QUIT)
    for worker in list(_STARTED):
        worker.wait()
    _STARTED.clear()
