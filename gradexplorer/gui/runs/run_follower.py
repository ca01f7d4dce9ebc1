"""A run directory as a timeline source: the app follows a run that ``watch`` writes.

A polling thread of its own reads the run's database (a cheap query for the steps after the
last one seen, the newest of them whole, their ledgers, optimizer state and spike events)
with its own connection, so no query waits on the GUI thread; what it read reaches the GUI
thread by a queued signal, which turns each new step into the monitor's StepGradients and feeds
the same ``TimelineModel.extend`` the in-app session feeds (each point carrying its step's
record, as the mailbox's do), so every view works unchanged. Only the
newest step of a poll is read whole; the older ones are read parameter by parameter as views
ask (gui/models/run_steps.py), on the GUI thread through the window's own ``Run``: a run of thousands
of parameters opens in a second or two.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Qt, Signal

from gradexplorer.core.files.folder_lock import writer_present
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.run import Run
from gradexplorer.core.stats.history import GradientHistory
from gradexplorer.core.stats.records import StepGradients
from gradexplorer.gui.models.run_steps import StepReader, lazy_step
from gradexplorer.gui.models.step_ledger import FollowedStep, followed_steps
from gradexplorer.gui.models.timeline import StepPoint, TimelineModel

POLL_MS = 500
MAX_STEPS_PER_POLL = 20_000  # a long run already on disk loads in slices; the window stays live
CLOSE_WAIT_S = 5.0  # how long closing waits for a read under way


@dataclass
class StepsRead:
    """What one poll read of a run after step ``after``: the new ``rows`` (oldest first), the
    newest step whole, each row's ledger and more (``followed_steps``), the histogram bins, and
    whether the writer had closed the run, or died without closing it (no process holds the
    run directory's lock: ``core/files/folder_lock.py``; both read only when no step was new)."""

    after: int
    rows: list[dict] = field(default_factory=list)
    newest: StepGradients | None = None
    followed: dict[int, FollowedStep] = field(default_factory=dict)
    bins: int = 64
    finished: bool = False
    writer_gone: bool = False


def read_new_steps(run: Run, after: int) -> StepsRead:
    """The steps of ``run`` committed after step ``after`` (at most ``MAX_STEPS_PER_POLL``),
    the newest read whole."""
    writing = writer_present(run.path)  # before reading: a step committed as it died is read
    rows = run.step_rows(after)[:MAX_STEPS_PER_POLL]
    if not rows:
        finished = run.meta("finished") is not None
        return StepsRead(after, finished=finished, writer_gone=not (writing or finished))
    newest = run.step_gradients(rows[-1]["step"])  # a damaged one: the dialog
    return StepsRead(after, rows, newest, followed_steps(run, rows, after),
                     run.settings.get("bins", 64))


class RunFollower(QObject):
    """``TimelineSource`` for a run directory: ``poll()`` takes in the steps committed so far
    (on the calling thread), ``start()`` keeps doing it on a polling thread every ``poll_ms``.

    ``finished(last_step)`` once the writer has closed the run (its ``finished`` meta entry);
    ``stopped(last_step)`` once it died without closing it (``kill -9``, a crash: the kernel
    freed the run directory's lock; every step it committed read; polling stops);
    ``failed(line)`` when the run cannot be read any more (following stops).
    """

    finished = Signal(object)
    stopped = Signal(object)
    failed = Signal(str)  # one line: the run could not be read any more
    _read = Signal(object)  # a StepsRead, from the polling thread
    _unreadable = Signal(str)  # the polling thread's UserError

    def __init__(self, run: Run, timeline: TimelineModel, history: int = 256,
                 poll_ms: int = POLL_MS, parent=None) -> None:
        super().__init__(parent)
        self.run, self.timeline = run, timeline
        self.last_step = -1
        self.poll_ms = poll_ms
        timeline.reset(GradientHistory(history))  # the timeline's own, fed by extend
        timeline.step_reader = StepReader(run)  # a step older than the history: the run's read
        timeline.optimizer.follow(run)  # the optimizer curves read the run's series
        self._times: list[float] = []
        self.is_finished = False
        self.is_stopped = False  # the writer died: no step will come
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._read.connect(self._take, Qt.ConnectionType.QueuedConnection)
        self._unreadable.connect(self._fail, Qt.ConnectionType.QueuedConnection)
        stop = self._stop
        self.destroyed.connect(lambda *_: stop.set())  # the thread ends with the follower

    @property
    def following(self) -> bool:
        """Whether the polling thread is still reading the run (no longer once the run's writer
        has closed it or died: the thread may still be closing its connection then)."""
        return (self._thread is not None and self._thread.is_alive() and not self._stop.is_set()
                and not (self.is_finished or self.is_stopped))

    def poll(self) -> int:
        """Read the steps committed since the last poll, here and now; how many were new.

        A step that cannot be read (the run damaged since it was opened) stops following with
        one line to ``failed``'s listeners (the window shows it in a dialog)."""
        try:
            read = read_new_steps(self.run, self.last_step)
        except UserError as exc:
            self._fail(str(exc))
            return 0
        return self._take(read)

    def start(self) -> None:
        """Poll on a thread of its own from now on (after the first ``poll``)."""
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(
                target=follow_run, args=(self.run.path, self.last_step, self.poll_ms / 1000,
                                         self._stop, self._read.emit, self._unreadable.emit),
                name="gradexplorer run follower", daemon=True)
            try:
                self._thread.start()
            except RuntimeError as exc:  # "can't start new thread": say so, never wait
                self._thread = None
                self._fail(f"cannot follow the run {str(self.run.path)!r}: no thread could be "
                           f"started ({exc}); reopen it to see newer steps")

    def _take(self, read: StepsRead) -> int:
        """On the GUI thread: feed the timeline what a poll read."""
        rows = [r for r in read.rows if r["step"] > self.last_step]
        if self._stop.is_set() and self._thread is not None:
            return 0  # closed meanwhile
        if not rows:
            if read.finished and not self.is_finished:
                self.is_finished = True  # every step was read: the writer closed after them
                self.finished.emit(None if self.last_step < 0 else self.last_step)
            elif read.writer_gone and not (self.is_stopped or self.is_finished):
                self.is_stopped = True
                self.stopped.emit(None if self.last_step < 0 else self.last_step)
            return 0
        first_kept = len(rows) - self.timeline.gradients.maxlen  # older ones would fall out
        records = [None] * max(first_kept, 0) + \
            [lazy_step(self.run, row, read.bins) for row in rows[max(first_kept, 0):-1]] + [read.newest]
        points = []
        for r, record in zip(rows, records, strict=True):
            f = read.followed[r["step"]]
            points.append(StepPoint(r["step"], math.nan if r["loss"] is None else float(r["loss"]),
                                    r["global_norm"], r["seconds"] or 0.0, ledger=f.ledger,
                                    optimizer=f.optimizer, spikes=f.spikes, time=float(r["time"]),
                                    gradients=record, loss_known=r["loss"] is not None))
        self.last_step = rows[-1]["step"]
        self._times = (self._times + [r["time"] for r in rows])[-64:]
        span = self._times[-1] - self._times[0]
        rate = (len(self._times) - 1) / span if span > 0 else 0.0  # as the run was written
        self.timeline.extend(points, rate)
        return len(points)

    def _fail(self, line: str) -> None:
        if self._stop.is_set() and self._thread is not None:
            return
        self._stop.set()
        self.failed.emit(line)

    def close(self) -> None:
        """Stop following (waiting for a read under way) and close the run."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(CLOSE_WAIT_S)
        self.run.close()


def follow_run(path, after: int, period_s: float, stop: threading.Event,
               got, unreadable) -> None:
    """The polling thread: every ``period_s`` until ``stop``, the steps after ``after`` read
    with a connection of its own and handed to ``got`` (a queued signal's ``emit``); a run that
    cannot be read is one line to ``unreadable``; it ends once the writer has closed the run
    or died."""
    try:
        reader = Run(path)
    except UserError as exc:
        unreadable(str(exc))
        return
    try:
        while not stop.wait(period_s):
            try:
                read = read_new_steps(reader, after)
            except UserError as exc:
                if not stop.is_set():
                    unreadable(str(exc))
                return
            if stop.is_set():
                return
            if read.rows or read.finished or read.writer_gone:
                got(read)
            if read.rows:
                after = read.rows[-1]["step"]
            elif read.finished or read.writer_gone:
                return  # every step was read: nothing more will come
    except RuntimeError:  # the follower was deleted under way: nothing to tell
        return
    finally:
        reader.close()
